"""The onnx-reference adapter on the real ONNX reference evaluator."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Status

# The evaluator's NonMaxSuppression raises on these (no iou_threshold given): a real bug,
# found at the top level and inside an If branch by one campaign.
NMS_DATA = [
    numpy_helper.from_array(np.array([[[1, 1, 0, 0]]], np.float32), "boxes"),
    numpy_helper.from_array(np.array([[[0.0625]]], np.float32), "scores"),
    numpy_helper.from_array(np.array(1, np.int64), "most"),
]


def _nms(out: str) -> onnx.NodeProto:
    return helper.make_node("NonMaxSuppression", ["boxes", "scores", "most"], [out])


def test_a_node_failing_inside_an_if_branch_fails_as_at_the_top_level() -> None:
    """The evaluator wraps a body node's error in one naming the If: the campaign filed
    the NonMaxSuppression bug a second time, as an If crash that no reduction could bring
    to the NonMaxSuppression (inlining the branch changed the message)."""
    f32 = TensorProto.FLOAT
    top = helper.make_graph(
        [_nms("selected")],
        "top",
        [],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])],
        NMS_DATA,
    )
    then_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["t"])],
        "then",
        [],
        [helper.make_tensor_value_info("t", f32, [2])],
    )
    else_branch = helper.make_graph(
        [_nms("unread"), helper.make_node("Identity", ["x"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", f32, [2])],
    )
    branched = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch)],
        "branched",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", f32, [2]),
        ],
        [helper.make_tensor_value_info("y", f32, [2])],
        NMS_DATA,
    )
    opset = [helper.make_opsetid("", 21)]
    models = [helper.make_model(g, opset_imports=opset, ir_version=10) for g in (top, branched)]
    feeds = [{}, {"c": np.array(False), "x": np.ones(2, np.float32)}]
    with BackendPool(["onnx-reference"]) as pool:
        got = [
            pool.run_one("onnx-reference", m.SerializeToString(), f)
            for m, f in zip(models, feeds, strict=True)
        ]
    assert [g.status for g in got] == [Status.ERROR, Status.ERROR], got
    assert "(operator 'NonMaxSuppression')" in got[0].message, got[0].message
    assert got[1].message == got[0].message
