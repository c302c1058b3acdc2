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
    """Element types ONNX Runtime runs an op in beyond its kernel registry: through the
    schema's function body (Mish, HardSwish), or by casting around a missing kernel (its
    CPU provider inserts Casts for float16 Add, for instance). Found by running generated
    single-op models; recorded per model opset."""
    from onnxfuzz import dtypes as dt
    from onnxfuzz.errors import OnnxFuzzError
    from onnxfuzz.generate.build import builder
    from onnxfuzz.generate.build.generator import Generator
    from onnxfuzz.generate.corpus.validate import validate
    from onnxfuzz.generate.lang.config import MIN_OPSET, ORT_MAX_OPSET, Config
    from onnxfuzz.generate.lang.spec import load_specs, op_info

    kernels = {
        op: [
            (lo, hi, {tv: frozenset(dt.BY_NAME[n] for n in names) for tv, names in c.items()})
            for lo, hi, c in entries
        ]
        for op, entries in table["kernels"].items()
    }
    saved = dt._ort_table

    def runs(op: str, opset: int, dtype: int) -> dict[str, set[int]] | None:
        """The element types each type variable took in passing probe models, or None."""
        # Generate without the op's kernel entries (schema types only), then run.
        dt._ort_table = lambda: ({k: v for k, v in kernels.items() if k != op}, {})
        builder._TYPES_CACHE.clear()
        info = op_info(op, opset)
        try:
            others = dt.DEFAULT - info.type_sets[info.main_type_var]  # other vars free
            cfg = Config(
                min_nodes=1,
                max_nodes=1,
                opset=opset,
                ops=frozenset([op]),
                dtypes=frozenset([dtype]) | others,
            )
            gen = Generator(cfg)
            cases = [gen.generate(s) for s in range(6)]
        except OnnxFuzzError:
            return None
        finally:
            dt._ort_table = lambda: (kernels, {})
            builder._TYPES_CACHE.clear()
        if not all(validate(c.model, c.make_inputs(0)).ok for c in cases):
            return None
        used: dict[str, set[int]] = {}
        for c in cases:
            g = c.model.graph
            types = {
                v.name: v.type.tensor_type.elem_type
                for v in list(g.input) + list(g.output) + list(g.value_info)
            }
            types.update({i.name: i.data_type for i in g.initializer})
            # the op's own node (a sequence op's model also holds the nodes that make and
            # consume its sequences)
            node = next(n for n in g.node if n.op_type == op and not n.name.startswith("make_"))
            for formals, names in (
                (list(info.schema.inputs), node.input),
                (list(info.schema.outputs), node.output),
            ):
                for k, name in enumerate(names):
                    if name and formals:
                        tv = formals[min(k, len(formals) - 1)].type_str
                        if tv in info.schema_type_vars and types.get(name):  # tensors only
                            used.setdefault(tv, set()).add(types[name])
        return used

    dt._ort_table = lambda: (kernels, {})
    builder._TYPES_CACHE.clear()
    probed: dict[str, dict] = {}
    done: dict[tuple, list[int]] = {}
    try:
        for op, spec in load_specs().items():
            for opset in range(max(spec.since, MIN_OPSET), min(spec.until, ORT_MAX_OPSET) + 1):
                info = op_info(op, opset)
                if info is None:
                    continue
                tv = info.main_type_var
                if tv is None:
                    continue
                kern = dt.ort_kernels(op, info.version, opset) or []
                if any(tv not in e and not all(e.values()) for e in kern):
                    # a sequence op's kernel is registered on the sequence type (listed
                    # empty), not on the element type: nothing to probe beyond it
                    continue
                have = set().union(*(e.get(tv, frozenset()) for e in kern))
                missing = sorted((info.type_sets[tv] & dt.DEFAULT) - have)
                # A function body is expanded at the model's opset; casts are not.
                key = (
                    (op, info.version)
                    if kern and not info.has_function
                    else (op, info.version, opset)
                )
                if key not in done:
                    found = {d: runs(op, opset, d) for d in missing}
                    done[key] = [(d, used) for d, used in found.items() if used is not None]
                if kern and not done[key]:
                    continue
                entries = probed.setdefault(op, {}).setdefault(str(opset), [])
                if not kern:  # a function body: every type it runs, as one combination
                    names = sorted(dt.NAMES[d] for d, _ in done[key])
                    entries.append({tv: names})
                # Each type found to run, with the types the other type variables took with
                # it (a float16 BatchNormalization runs with float16 scale, not float32).
                for d, used in done[key] if kern else ():
                    entry = {v: sorted(dt.NAMES[t] for t in ts) for v, ts in used.items()}
                    entry[tv] = [dt.NAMES[d]]
                    entries.append(dict(sorted(entry.items())))
    finally:
        dt._ort_table = saved
        builder._TYPES_CACHE.clear()
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
