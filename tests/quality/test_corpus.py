"""Corpus quality: 2,000-model corpora at opsets 17 and 21 cover at least 150 op types, every
model is valid in ONNX Runtime (checker, strict shape inference, a run), no reference output
is non-finite, and every tensor stays inside the value interval its spec declared (with the
default share of wide values, and with every fresh tensor wide)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from check_intervals import check  # noqa: E402


@pytest.mark.parametrize("opset", [17, 21])
def test_corpus_of_2000_models(opset: int) -> None:
    gen = Generator(Config(min_nodes=5, max_nodes=20, opset=opset))
    ops: set[str] = set()
    bad, non_finite = [], []
    for seed in range(2000):
        case = gen.generate(seed)
        ops.update(case.ops)
        v = validate(case.model, case.make_inputs(seed))
        if not v.ok:
            bad.append((seed, v.problems[0][:200]))
        elif not v.finite:
            non_finite.append(seed)
    assert not bad, bad[:3]
    assert not non_finite, non_finite[:10]
    assert len(ops) >= 150, f"{len(ops)} op types"


@pytest.mark.parametrize(
    ("opset", "wide"),
    # (the default share of wide values at each opset, and every fresh tensor wide: a
    # spec whose intervals hold only for values near zero shows there; DequantizeLinear's
    # float16 scale once went subnormal under an int32 x near 2**31)
    [(17, None), (21, None), (26, None), (26, 1.0)],
)
def test_value_intervals_are_sound(opset: int, wide: float | None) -> None:
    share = {} if wide is None else {"wide_values": wide}
    gen = Generator(Config(min_nodes=1, max_nodes=25, opset=opset, **share))
    violations = [v for seed in range(150) for v in check(gen, seed)]
    assert not violations, violations[:5]
