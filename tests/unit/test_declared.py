"""Declared output types and shapes break ties that majority voting gets wrong.

Two libraries sharing a mistake (the ONNX reference evaluator and onnx2torch both promote
int32 ReduceSumSquare to int64) must not outvote the one that follows the model.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxfuzz.execute.sandbox import Outcome
from onnxfuzz.judge.attribution import attribute
from onnxfuzz.judge.declared import declared_outputs, departures, violations
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig, Verdict


def _model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("ReduceSumSquare", ["x"], ["y"], keepdims=0)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


X = {"x": np.arange(6, dtype=np.int32).reshape(2, 3)}
RIGHT = Outcome("ok", outputs={"y": np.array(55, dtype=np.int32)})
PROMOTED = Outcome("ok", outputs={"y": np.array(55, dtype=np.int64)})
WRONG_SHAPE = Outcome("ok", outputs={"y": np.array([55], dtype=np.int32)})


def test_violations_name_the_output_and_the_declaration() -> None:
    decl = declared_outputs(_model())
    assert violations(RIGHT.outputs, decl) == {}
    assert violations(PROMOTED.outputs, decl) == {"y": "dtype int64, the model declares int32"}
    assert violations(WRONG_SHAPE.outputs, decl) == {"y": "shape [1], the model declares []"}


def test_a_declaration_nobody_meets_blames_nobody() -> None:
    decl = declared_outputs(_model())
    both = {"a": PROMOTED.outputs, "b": PROMOTED.outputs}
    assert departures(both, decl) == {}
    assert set(departures({"a": PROMOTED.outputs, "b": RIGHT.outputs}, decl)) == {"a"}


def test_a_shared_mistake_does_not_outvote_the_declaration() -> None:
    outcomes = {"ort": RIGHT, "onnx-reference": PROMOTED, "torch": PROMOTED}
    assert attribute(_model(), outcomes, "ort", OracleConfig()) is None
    got = Judge("ort", OracleConfig()).assess(_model(), X, outcomes)
    assert got["ort"].judgement.verdict == Verdict.OK
    for label in ("onnx-reference", "torch"):
        assert got[label].judgement.verdict == Verdict.MISMATCH
        assert got[label].judgement.kind == "dtype"


def test_a_reference_departing_from_the_declaration_is_blamed_itself() -> None:
    outcomes = {"onnx-reference": PROMOTED, "ort": RIGHT, "torch": PROMOTED}
    got = Judge("onnx-reference", OracleConfig()).assess(_model(), X, outcomes)
    assert got["ort"].judgement.verdict == Verdict.OK  # judged against the excused reference
    for label in ("onnx-reference", "torch"):
        v = got[label].judgement
        assert (v.verdict, v.kind) == (Verdict.MISMATCH, "dtype"), v.message
        assert "declares int32" in v.message
        assert got[label].signature is not None


def test_values_are_still_compared_where_only_the_reference_type_is_off() -> None:
    outcomes = {"ref": PROMOTED, "b": Outcome("ok", outputs={"y": np.array(54, np.int32)})}
    got = Judge("ref", OracleConfig()).assess(_model(), X, outcomes)
    assert got["b"].judgement.verdict == Verdict.MISMATCH and got["b"].judgement.kind == "values"


def test_a_failure_shared_with_the_reference_is_one_finding() -> None:
    from onnxfuzz.execute.sandbox import Stage, Status
    from onnxfuzz.judge.attribution import blame

    def fails(text: str) -> Outcome:
        return Outcome(Status.ERROR, Stage.COMPILE, message=text)

    outcomes = {
        "ref": fails("RuntimeError: AffineGrid: size of theta 0x55aa is wrong"),
        "adapter": fails("RuntimeError: AffineGrid: size of theta 0x7f00 is wrong"),
        "other": fails("ValueError: no kernel"),
    }
    got = blame(Judge("ref", OracleConfig()), _model(), X, outcomes)
    assert got["ref"].assessed.signature is not None and got["ref"].shared_with == ["adapter"]
    assert got["adapter"].assessed.signature is None  # the reference's finding stands for it
    assert "the same failure as ref" in got["adapter"].assessed.judgement.message
    assert got["other"].assessed.signature is not None  # a failure of its own
