"""Every registered spec, in every op version (MIN_OPSET..MAX_OPSET) and element type it allows,
over many seeds: the model
passes the checker, strict shape inference agrees with every shape the spec declared,
ONNX Runtime runs it to outputs of exactly the declared shapes and types, and the
reference outputs are finite."""

from __future__ import annotations

import os

import pytest

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.config import MAX_OPSET, MIN_OPSET, Config
from onnxfuzz.generate.generator import Generator
from onnxfuzz.generate.spec import load_specs, op_info
from onnxfuzz.generate.validate import validate

SEEDS = int(os.environ.get("ONNXFUZZ_CONFORMANCE_SEEDS", "6"))


def _main_types(op: str, opset: int) -> list[int]:
    """The element types the op's main type variable takes at ``opset`` (schema & ORT)."""
    from onnxfuzz.generate.coverage import _main_types

    return _main_types(op, opset)


def _cases() -> list[tuple[str, int, int]]:
    """(op, opset, dtype) for every op version a spec covers in MIN..MAX_OPSET (at the last
    opset where that version is in force) and every element type it takes there."""
    out = []
    for op, spec in load_specs().items():
        last: dict[int, int] = {}
        for opset in range(MIN_OPSET, MAX_OPSET + 1):
            info = op_info(op, opset)
            if info is not None and spec.covers(opset):
                last[info.version] = opset
        for opset in sorted(last.values()):
            out.extend((op, opset, d) for d in _main_types(op, opset))
    return out


CASES = _cases()


@pytest.mark.parametrize(
    ("op", "opset", "dtype"), CASES, ids=[f"{o}-{v}-{dt.NAMES[d]}" for o, v, d in CASES]
)
def test_spec_conformance(op: str, opset: int, dtype: int) -> None:
    # Only the main type variable is pinned to ``dtype``; other type variables (a
    # QuantizeLinear's integer output) keep the types the main one does not take.
    others = dt.DEFAULT - set(_main_types(op, opset))
    cfg = Config(
        min_nodes=1,
        max_nodes=4,
        opset=opset,
        ops=frozenset([op]),
        dtypes=frozenset([dtype]) | others,
    )
    try:
        gen = Generator(cfg)
    except ConfigError as e:
        # The spec narrows the schema's types on purpose (e.g. no integer ReduceMean:
        # ONNX leaves its rounding open); the reason is in the message.
        pytest.skip(f"{op} is not generated in {dt.NAMES[dtype]}: {e}")
    for seed in range(SEEDS):
        case = gen.generate(seed)
        v = validate(case.model, case.make_inputs(seed))
        assert v.ok, f"seed {seed}: {v.problems}"
        assert v.finite, f"seed {seed}: non-finite reference output"
