"""Sequences and optionals as typed values (onnxfuzz.generate.build.sequences, specs/sequence.py):
a corpus over the sequence and optional ops is valid in ONNX Runtime (checker, strict shape
inference with the declared sequence types, a run), finite, byte-identical per seed and
replayable; the recorded lengths, element shapes and presence match ORT's values; graph
outputs stay tensors; the reducer still reduces models with sequences."""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from pathlib import Path

import pytest

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.sequences import OPS as SEQUENCE_OPS
from onnxfuzz.generate.corpus.validate import check_static, validate
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.reduce.measure import size_of
from onnxfuzz.reduce.reducer import reduce_case
from onnxfuzz.reduce.reproduce import Reproducer, Target

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from check_intervals import check  # noqa: E402

ADAPTERS = Path(__file__).resolve().parents[1] / "campaign" / "adapters.py"
ORDINARY = frozenset({"Add", "Relu", "MatMul", "Reshape", "Concat"})
OPS = SEQUENCE_OPS | ORDINARY


def _gen(opset: int = 21) -> Generator:
    return Generator(Config(min_nodes=3, max_nodes=12, opset=opset, ops=OPS))


@pytest.mark.parametrize("opset", [17, 21])
def test_sequence_corpus_is_valid_and_finite(opset: int) -> None:
    gen = _gen(opset)
    used: Counter[str] = Counter()
    bad = []
    for seed in range(200):
        case = gen.generate(seed)
        used.update(case.ops)
        assert all(o.type.HasField("tensor_type") for o in case.model.graph.output)
        v = validate(case.model, case.make_inputs(seed))
        if not v.ok or not v.finite:
            bad.append((seed, case.ops, v.problems[:1] or ["non-finite output"]))
    assert not bad, bad[:3]
    assert set(used) >= SEQUENCE_OPS, sorted(SEQUENCE_OPS - set(used))
    # sequence values are declared with their types (the strict pass compared them)
    kinds = {
        vi.type.WhichOneof("value")
        for seed in range(40)
        for vi in gen.generate(seed).model.graph.value_info
    }
    assert {"sequence_type", "optional_type"} <= kinds


def test_recorded_lengths_shapes_and_presence_match_onnx_runtime() -> None:
    """Every sequence and optional exposed: ORT's sequence has the recorded length, each
    element the recorded shape and values inside its interval, each optional holds a value
    exactly when recorded (what positions and axes were drawn from)."""
    gen = _gen()
    violations = [v for seed in range(150) for v in check(gen, seed)]
    assert not violations, violations[:5]


def test_sequence_models_are_byte_identical_per_seed_and_replayable() -> None:
    def digest(gen: Generator) -> str:
        h = hashlib.sha256()
        for s in range(60):
            h.update(gen.generate(s).model.SerializeToString())
        return h.hexdigest()

    assert digest(_gen()) == digest(_gen())
    gen = _gen()
    for seed in range(30):
        case = gen.generate(seed)
        again = gen.generate(seed + 1000, prefix=case.choices)
        again.model.graph.name = case.model.graph.name
        assert again.model.graph.SerializeToString() == case.model.graph.SerializeToString()


def test_positions_and_axes_stay_inside_the_values() -> None:
    """Zero-tail and shrunk choice lists (what the reducer replays) still give valid models:
    every position and axis is drawn from what the sequence allows."""
    gen = _gen()
    for seed in range(40):
        case = gen.generate(seed)
        half = case.choices[: len(case.choices) // 2]
        small = gen.generate(seed, prefix=half, zero_tail=True)
        assert not check_static(small.model), (seed, check_static(small.model)[:1])
        v = validate(small.model, small.make_inputs(seed))
        assert v.ok, (seed, v.problems[:1])


def test_reducer_reduces_a_model_with_sequences() -> None:
    """A planted Relu miscompilation inside sequence-heavy models reduces to a valid model
    with the same signature, Relu kept, no measure larger."""
    label = f"{ADAPTERS}:WrongOp:op=Relu"
    gen = Generator(Config(min_nodes=10, max_nodes=10, ops=OPS, dtypes=frozenset({1})))
    reduced = 0
    with BackendPool(["ort", label], timeout=10.0) as pool:
        rep = Reproducer(pool, Target(label, "ort"))
        for seed in range(200):
            case = gen.generate(seed)
            if not SEQUENCE_OPS & set(case.ops):
                continue
            a = rep.assess(case.model, case.make_inputs(seed))
            if a.signature is None:
                continue
            rep.target.signature = a.signature
            before = size_of(case.model, case.make_inputs(seed))
            r = reduce_case(gen, case, rep, budget_s=30)
            assert "Relu" in r.ops
            assert len(r.ops) < len(case.ops)
            assert rep(r.model, r.inputs), "the reduced model lost the signature"
            assert not check_static(r.model)
            assert size_of(r.model, r.inputs).no_larger_than(before)
            reduced += 1
            if reduced == 2:
                break
    assert reduced == 2
