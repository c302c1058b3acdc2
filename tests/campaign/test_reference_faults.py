"""With the ONNX reference evaluator as the reference, a model one of its documented faults
applies to (``reference_limits``) measures the other backends against wrong values: their
departures are invalid-reference, not bugs of theirs. Real evaluator, real ONNX Runtime and
TVM, on LRN, whose evaluator sums its window over the batch rather than the channels
(onnx #7805): right where N == C, wrong values where N < C."""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.judge.attribution import blame
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig, Verdict

REFERENCE = "onnx-reference"


def _lrn(n: int, c: int) -> onnx.ModelProto:
    shape = [n, c, 2, 3]
    node = helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.5, beta=0.75, bias=1.0)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _verdicts(backends: list[str], n: int, c: int) -> dict[str, tuple[str, str]]:
    model = _lrn(n, c)
    x = np.linspace(-2, 2, n * c * 6, dtype=np.float32).reshape(n, c, 2, 3)
    with BackendPool(backends) as pool:
        outcomes = pool.run_all(model.SerializeToString(), {"x": x})
        got = blame(Judge(REFERENCE, OracleConfig(), pool), model, {"x": x}, outcomes)
    return {k: (b.assessed.judgement.verdict, b.assessed.judgement.message) for k, b in got.items()}


def test_a_departure_from_the_evaluators_documented_fault_is_invalid_reference() -> None:
    got = _verdicts([REFERENCE, "ort"], 1, 5)
    verdict, message = got["ort"]
    assert verdict == Verdict.INVALID_REFERENCE, got
    assert "onnx-reference is wrong on this model's LRN, not the backend" in message
    assert got[REFERENCE][0] == Verdict.OK
    # where the fault does not apply (N == C) the two agree: nothing to excuse
    assert _verdicts([REFERENCE, "ort"], 5, 5)["ort"][0] == Verdict.OK


@pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="needs apache-tvm")
def test_two_backends_that_agree_against_a_faulted_evaluator_are_not_blamed() -> None:
    """The evaluator's vote does not count where its fault applies, so two agreeing backends
    make no majority: neither is filed (before, each got a bug of its own)."""
    got = _verdicts([REFERENCE, "ort", "tvm"], 1, 5)
    assert got["ort"][0] == got["tvm"][0] == Verdict.INVALID_REFERENCE, got
