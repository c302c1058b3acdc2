"""Corpus quality: 2,000-model corpora at opsets 17 and 21 cover at least 150 op types, every
model is valid in ONNX Runtime (checker, strict shape inference, a run), no reference output
is non-finite, and every tensor stays inside the value interval its spec declared."""

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


@pytest.mark.parametrize("opset", [17, 21, 26])
def test_value_intervals_are_sound(opset: int) -> None:
    gen = Generator(Config(min_nodes=1, max_nodes=25, opset=opset))
    violations = [v for seed in range(150) for v in check(gen, seed)]
    assert not violations, violations[:5]
