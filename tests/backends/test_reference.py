"""The onnx-reference adapter on the real ONNX reference evaluator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Status
from onnxfuzz.judge.oracle import Verdict
from onnxfuzz.reduce.reducer import reduce_model
from onnxfuzz.reduce.reproduce import Reproducer, Target

ADAPTERS = Path(__file__).resolve().parents[1] / "campaign" / "adapters.py"

# The evaluator's NonMaxSuppression raises on these (no iou_threshold given): a real bug,
# found at the top level and inside an If branch by one campaign.
NMS_DATA = [
    numpy_helper.from_array(np.array([[[1, 1, 0, 0]]], np.float32), "boxes"),
    numpy_helper.from_array(np.array([[[0.0625]]], np.float32), "scores"),
    numpy_helper.from_array(np.array(1, np.int64), "most"),
]


def _nms(out: str) -> onnx.NodeProto:
    return helper.make_node("NonMaxSuppression", ["boxes", "scores", "most"], [out])


F32 = TensorProto.FLOAT
OPSET = [helper.make_opsetid("", 21)]


def _top() -> onnx.ModelProto:
    graph = helper.make_graph(
        [_nms("selected")],
        "top",
        [],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])],
        NMS_DATA,
    )
    return helper.make_model(graph, opset_imports=OPSET, ir_version=10)


def _branched() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """If(c): the else branch, taken, computes an NMS nothing reads."""
    then_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", F32, [2])],
    )
    else_branch = helper.make_graph(
        [_nms("unread"), helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", F32, [2])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        "branched",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", F32, [2]),
        ],
        [helper.make_tensor_value_info("y", F32, [2])],
        NMS_DATA,
    )
    model = helper.make_model(graph, opset_imports=OPSET, ir_version=10)
    return model, {"c": np.array(False), "x": np.ones(2, np.float32)}


def test_a_node_failing_inside_an_if_branch_fails_as_at_the_top_level() -> None:
    """The evaluator wraps a body node's error in one naming the If: the campaign filed
    the NonMaxSuppression bug a second time, as an If crash."""
    branched, feeds = _branched()
    with BackendPool(["onnx-reference"]) as pool:
        top = pool.run_one("onnx-reference", _top().SerializeToString(), {})
        inside = pool.run_one("onnx-reference", branched.SerializeToString(), feeds)
    assert top.status == inside.status == Status.ERROR, (top, inside)
    assert "(operator 'NonMaxSuppression')" in top.message, top.message
    assert inside.message == top.message


def test_a_node_computed_for_nothing_in_a_branch_reduces_to_itself() -> None:
    """That If crash was a 12-node bundle no reduction shrank: inlining the branch left
    the NMS read by nothing at the top level, and every candidate is pruned of such
    nodes. An inlined body's unread outputs become graph outputs. (The evaluator's NMS
    fault is documented now, so the evaluator under test failing on it is known and
    neither filed nor reduced: a planted backend that fails on an NMS wherever it is, as
    the evaluator does, stands in for it.)"""
    branched, feeds = _branched()
    with BackendPool(["onnx-reference"]) as pool:
        assert pool.run_one("onnx-reference", branched.SerializeToString(), feeds).status == (
            Status.ERROR
        )
        a = Reproducer(pool, Target("onnx-reference", "onnx-reference")).assess(branched, feeds)
        assert a.judgement.verdict == Verdict.KNOWN, a
    planted = f"{ADAPTERS}:RaiseNested:op=NonMaxSuppression"
    with BackendPool(["ort", planted], timeout=30.0) as pool:
        rep = Reproducer(pool, Target(planted, "ort"))
        a = rep.assess(branched, feeds)
        assert a.signature is not None and "NonMaxSuppression" in a.judgement.message, a
        rep.target.signature = a.signature
        r = reduce_model(branched, feeds, rep, budget_s=60)
        assert rep(r.model, r.inputs), "the reduced model no longer shows the bug"
    assert r.ops == ["NonMaxSuppression"], onnx.printer.to_text(r.model.graph)
