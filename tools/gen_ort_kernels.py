"""Write onnxfuzz/data/ort_cpu_kernels.json from the installed onnxruntime.

The table records which element types ONNX Runtime's CPU execution provider has
kernels for, per op and op version. Generation reads the checked-in table (so the
same seed gives the same model whatever is installed); a test checks that the
table matches the installed onnxruntime.

    .venv/bin/python tools/gen_ort_kernels.py          # rewrite the table
    .venv/bin/python tools/gen_ort_kernels.py --check  # exit 1 if it is stale
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "onnxfuzz" / "data" / "ort_cpu_kernels.json"


def build() -> dict:
    import onnxruntime
    from onnxruntime.capi import _pybind_state as C

    from onnxfuzz.dtypes import NAMES, from_schema_str

    kernels: dict[str, list] = {}
    for k in C.get_all_opkernel_def():
        if k.provider != "CPUExecutionProvider" or k.domain not in ("", "ai.onnx"):
            continue
        cons = {}
        for tv, strs in sorted(k.type_constraints.items()):
            names = sorted({NAMES[t] for s in strs if (t := from_schema_str(s)) is not None})
            cons[tv] = names
        lo, hi = k.version_range
        kernels.setdefault(k.op_name, []).append([lo, min(hi, 10_000), cons])
    for entries in kernels.values():
        entries.sort(key=lambda e: (e[0], e[1], json.dumps(e[2], sort_keys=True)))
    return {"onnxruntime": onnxruntime.__version__, "kernels": dict(sorted(kernels.items()))}


def probe(table: dict) -> dict:
    """Ops ONNX Runtime runs through their schema's function body have no kernel entry;
    find the element types it actually runs them in by running generated models."""
    from onnxfuzz import dtypes as dt
    from onnxfuzz.config import Config
    from onnxfuzz.errors import OnnxFuzzError
    from onnxfuzz.generator import Generator
    from onnxfuzz.spec import load_specs, op_info
    from onnxfuzz.validate import validate

    # Probe against the kernel table just built, without any earlier probe results, so
    # that --check and a rewrite compute the same thing.
    kernels = {
        op: [
            (lo, hi, {tv: frozenset(dt.BY_NAME[n] for n in names) for tv, names in c.items()})
            for lo, hi, c in entries
        ]
        for op, entries in table["kernels"].items()
    }
    saved = dt._ort_table
    dt._ort_table = lambda: (kernels, {})
    try:
        return _probe(dt, Config, OnnxFuzzError, Generator, load_specs, op_info, validate)
    finally:
        dt._ort_table = saved


def _probe(dt, Config, OnnxFuzzError, Generator, load_specs, op_info, validate) -> dict:  # noqa: N803
    probed: dict[str, dict] = {}
    for op, spec in load_specs().items():
        for opset in range(max(spec.since, 13), min(spec.until, 26) + 1):
            info = op_info(op, opset)
            if info is None or dt.ort_kernels(op, info.version, opset):
                continue
            tv = info.input_type[next(iter(info.input_pos))]
            ok = []
            for d in sorted(info.type_sets[tv] & dt.DEFAULT):
                cfg = Config(
                    min_nodes=1,
                    max_nodes=1,
                    opset=opset,
                    ops=frozenset([op]),
                    dtypes=frozenset([d]),
                )
                try:
                    gen = Generator(cfg)
                    cases = [gen.generate(s) for s in range(3)]
                except OnnxFuzzError:
                    continue
                if all(validate(c.model, c.make_inputs(0)).ok for c in cases):
                    ok.append(dt.NAMES[d])
            probed.setdefault(op, {})[str(opset)] = {tv: ok}
    return probed


def main() -> int:
    table = build()
    table["probed"] = probe(table)
    data = json.dumps(table, indent=0, sort_keys=False) + "\n"
    if "--check" in sys.argv:
        if TABLE.read_text() != data:
            print(f"{TABLE} is stale: run tools/gen_ort_kernels.py", file=sys.stderr)
            return 1
        print("up to date")
        return 0
    TABLE.write_text(data)
    print(f"wrote {TABLE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
