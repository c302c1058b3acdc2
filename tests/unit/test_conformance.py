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
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.measure.coverage import main_types, spec_cases

SEEDS = int(os.environ.get("ONNXFUZZ_CONFORMANCE_SEEDS", "6"))


CASES = spec_cases()


@pytest.mark.parametrize(
    ("op", "opset", "dtype"), CASES, ids=[f"{o}-{v}-{dt.NAMES[d]}" for o, v, d in CASES]
)
def test_spec_conformance(op: str, opset: int, dtype: int) -> None:
    # Only the main type variable is pinned to ``dtype``; other type variables (a
    # QuantizeLinear's integer output) keep the types the main one does not take.
    others = dt.DEFAULT - set(main_types(op, opset))
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
