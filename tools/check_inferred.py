"""Check inferred contrib ops in generation: single-op models, or a written hybrid corpus.

    python tools/check_inferred.py single [--seeds 20] [--ops ExpandDims,Pad]
        1-node models of each inferred op (every op of specs/inferred/com.microsoft.json
        unless --ops), run in ONNX Runtime CPU with optimizations off (as the corpus
        reference); counts runs, errors and non-finite outputs per op.
    python tools/check_inferred.py corpus DIR [DIR2]
        every model of a corpus written by `onnxfuzz generate` run again in ONNX Runtime CPU
        on its test_data_set_0 inputs; counts errors, non-finite outputs, inferred-op
        instances (and distinct ops); with DIR2, whether the two corpora are byte-identical.

Exit status 1 when any model fails or has a non-finite output.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import ort_session
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.infer.rules import load_domain

DOMAIN = "com.microsoft"


def _finite(outs: list) -> bool:
    return all(
        np.isfinite(np.asarray(o).astype(np.float64)).all()
        for o in outs
        if np.asarray(o).dtype != object
    )


def single(seeds: int, ops: list[str] | None) -> int:
    names = ops or [r.op for r in load_domain(DOMAIN)]
    bad = 0
    total = 0
    for op in names:
        gen = Generator(
            Config(
                domains=frozenset({DOMAIN}),
                ops=frozenset({f"{DOMAIN}.{op}"}),
                min_nodes=1,
                max_nodes=1,
                connectivity=0,
                block_rate=0,
            )
        )
        ok = nonfinite = 0
        errors: list[str] = []
        for seed in range(seeds):
            case = gen.generate(seed)
            try:
                outs = ort_session(case.model).run(None, case.make_inputs(seed))
            except Exception as e:  # noqa: BLE001 - any ONNX Runtime error counts
                errors.append(f"seed {seed}: {str(e).splitlines()[0][:140]}")
                continue
            ok += 1
            nonfinite += not _finite(outs)
        total += seeds
        bad += (seeds - ok) + nonfinite
        print(f"{op}: {ok}/{seeds} run, {nonfinite} non-finite", *errors[:2], sep="\n  ")
    print(f"{len(names)} ops, {total - bad}/{total} run with finite outputs")
    return 1 if bad else 0


def _inputs(case: Path, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    init = {i.name for i in model.graph.initializer}
    names = [i.name for i in model.graph.input if i.name not in init]
    files = sorted(
        (case / "test_data_set_0").glob("input_*.pb"), key=lambda f: int(f.stem.split("_")[1])
    )
    feeds = {}
    for name, f in zip(names, files, strict=True):
        t = onnx.TensorProto()
        t.ParseFromString(f.read_bytes())
        feeds[name] = numpy_helper.to_array(t)
    return feeds


def corpus(root: Path, other: Path | None) -> int:
    cases = sorted(p.parent for p in root.rglob("model.onnx"))
    ok = nonfinite = 0
    errors: list[str] = []
    instances: Counter[str] = Counter()
    with_inferred = 0
    for case in cases:
        model = onnx.load(case / "model.onnx")
        ops = [n.op_type for n in model.graph.node if n.domain == DOMAIN]
        instances.update(ops)
        with_inferred += bool(ops)
        try:
            outs = ort_session(model).run(None, _inputs(case, model))
        except Exception as e:  # noqa: BLE001 - any ONNX Runtime error counts
            errors.append(f"{case.name}: {str(e).splitlines()[0][:140]}")
            continue
        ok += 1
        nonfinite += not _finite(outs)
    print(f"{ok}/{len(cases)} models run, {nonfinite} with non-finite outputs")
    print(
        f"{sum(instances.values())} {DOMAIN} instances in {with_inferred} models, "
        f"{len(instances)} distinct: {dict(sorted(instances.items()))}"
    )
    for e in errors[:10]:
        print("  " + e)
    same = True
    if other is not None:
        a = sorted(p.relative_to(root) for p in root.rglob("*.onnx"))
        b = sorted(p.relative_to(other) for p in other.rglob("*.onnx"))
        same = a == b and all((root / x).read_bytes() == (other / x).read_bytes() for x in a)
        print(f"byte-identical models: {same} ({len(a)} vs {len(b)} files)")
    return 0 if ok == len(cases) and not nonfinite and same else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("single")
    s.add_argument("--seeds", type=int, default=20)
    s.add_argument("--ops", default="")
    c = sub.add_parser("corpus")
    c.add_argument("dir", type=Path)
    c.add_argument("other", type=Path, nargs="?")
    a = p.parse_args()
    if a.mode == "single":
        return single(a.seeds, [x for x in a.ops.split(",") if x] or None)
    return corpus(a.dir, a.other)


if __name__ == "__main__":
    sys.exit(main())
