"""Digests of generated corpora per seed: the byte-identity check behind refactors.

    python tools/golden_corpus.py           # compare with tests/quality/data/golden_corpus.json
    python tools/golden_corpus.py --write   # record them (only when bytes change on purpose)

Each row is one generator configuration over a range of seeds; its digest covers every
model's bytes and every input array (name, dtype, shape, bytes), and a mutant of each case.
A change of any byte of any model changes the row's digest. `tests/quality/test_golden_corpus.py`
runs the same comparison; record new digests only with a commit that says why the bytes
changed (a refactor must not change them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from onnxfuzz import dtypes as dt

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "quality" / "data" / "golden_corpus.json"

# The rows recorded before issue 24 made "chains" the default op mix pin "uniform" (their
# digests are unchanged); the "chains-" rows pin the new default's bytes. The rows recorded
# before --wide-values pin it at 0 (their digests are unchanged: the option off makes the
# models it made before); the "wide-" rows pin its default's bytes.
UNIFORM = {"op_mix": "uniform", "wide_values": 0.0}
CHAINS = {"op_mix": "chains", "wide_values": 0.0}
CONTROL_OPS = frozenset({"If", "Loop", "Scan", "Add", "Relu", "MatMul", "Reshape"})

# name -> (Config keyword arguments, first seed, count)
ROWS: dict[str, tuple[dict[str, Any], int, int]] = {
    "default": (UNIFORM, 0, 60),
    "nodes-5-20": ({"min_nodes": 5, "max_nodes": 20, **UNIFORM}, 1000, 30),
    "opset-13": ({"opset": 13, **UNIFORM}, 0, 25),
    "opset-28": ({"opset": 28, **UNIFORM}, 0, 25),
    "contrib": ({"domains": frozenset({"ai.onnx", "com.microsoft"}), **UNIFORM}, 0, 25),
    "before-glue": ({"connectivity": 0.0, "block_rate": 0.0, **UNIFORM}, 0, 25),
    "control-flow": ({"ops": CONTROL_OPS, **UNIFORM}, 0, 25),
    "sequences": (
        {
            "ops": frozenset(
                {"SequenceConstruct", "SequenceAt", "SplitToSequence", "ConcatFromSequence",
                 "SequenceInsert", "Optional", "OptionalGetElement", "Add", "Concat"}
            ),
            **UNIFORM,
        },
        0,
        25,
    ),
    "float16": ({"dtypes": frozenset({dt.FLOAT16}), **UNIFORM}, 0, 25),
    "chains-default": (CHAINS, 0, 60),
    "chains-nodes-5-20": ({"min_nodes": 5, "max_nodes": 20, **CHAINS}, 1000, 30),
    "chains-control-flow": ({"ops": CONTROL_OPS, **CHAINS}, 0, 25),
    "chains-float16": ({"dtypes": frozenset({dt.FLOAT16}), **CHAINS}, 0, 25),
    "wide-default": ({}, 0, 60),
    "wide-nodes-5-20": ({"min_nodes": 5, "max_nodes": 20}, 1000, 30),
    "wide-integers": ({"dtypes": frozenset({dt.INT32, dt.INT64, dt.UINT8})}, 0, 25),
}


def digest(kwargs: dict[str, Any], first: int, count: int) -> str:
    # Imported here so the tool names the module layout it runs against only once.
    from onnxfuzz.generate.build.generator import Generator
    from onnxfuzz.generate.build.mutate import mutate
    from onnxfuzz.generate.lang.config import Config

    gen = Generator(Config(**kwargs))
    h = hashlib.sha256()
    for seed in range(first, first + count):
        case = gen.generate(seed)
        h.update(case.model.SerializeToString())
        for name, arr in sorted(case.make_inputs(seed).items()):
            h.update(f"{name}:{arr.dtype}:{arr.shape}".encode())
            h.update(arr.tobytes())
        mutant, _ = mutate(gen, case, seed + 7)
        h.update(mutant.model.SerializeToString())
    return h.hexdigest()


def digests() -> dict[str, str]:
    return {name: digest(*row) for name, row in ROWS.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="record the digests")
    args = ap.parse_args()
    now = digests()
    if args.write:
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(now)} digests to {GOLDEN}")
        return 0
    old = json.loads(GOLDEN.read_text())
    changed = sorted(k for k in now if old.get(k) != now[k])
    for k in sorted(now):
        print(f"{k:14} {'CHANGED' if k in changed else 'same'}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
