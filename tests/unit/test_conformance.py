"""Every registered spec, in every element type it allows, over many seeds: the model
passes the checker, strict shape inference agrees with every shape the spec declared,
ONNX Runtime runs it to outputs of exactly the declared shapes and types, and the
reference outputs are finite."""

from __future__ import annotations

import os

import pytest

from onnxfuzz import dtypes as dt
from onnxfuzz.config import DEFAULT_OPSET, Config
from onnxfuzz.errors import ConfigError
from onnxfuzz.generator import Generator
from onnxfuzz.spec import load_specs, op_info
from onnxfuzz.validate import validate

SEEDS = int(os.environ.get("ONNXFUZZ_CONFORMANCE_SEEDS", "6"))


def _first_input_types(op: str, opset: int) -> list[int]:
    """The element types the op's main type variable takes at ``opset`` (schema & ORT)."""
    from onnxfuzz.builder import GenBuilder, restricted_by_dtypes
    from onnxfuzz.choices import ChoiceStream
    from onnxfuzz.graph import Graph

    spec = load_specs()[op]
    info = op_info(op, opset)
    b = GenBuilder(spec, info, Config(opset=opset), Graph(), ChoiceStream(0))
    # The first input typed by a type variable that --dtypes restricts (Where's condition
    # is always bool; Gather's indices are index-typed).
    for formal in info.input_pos:
        tv = info.input_type[formal]
        if tv in info.schema_type_vars and restricted_by_dtypes(info.type_sets[tv]):
            return list(b.types(tv))
    first = next(iter(info.input_pos))
    return list(b.types(info.input_type[first]))


def _cases(opset: int) -> list[tuple[str, int]]:
    out = []
    for op, spec in load_specs().items():
        if not spec.covers(opset):
            continue
        for d in _first_input_types(op, opset):
            out.append((op, d))
    return out


CASES = _cases(DEFAULT_OPSET)


@pytest.mark.parametrize(("op", "dtype"), CASES, ids=[f"{o}-{dt.NAMES[d]}" for o, d in CASES])
def test_spec_conformance(op: str, dtype: int) -> None:
    cfg = Config(min_nodes=1, max_nodes=4, ops=frozenset([op]), dtypes=frozenset([dtype]))
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
