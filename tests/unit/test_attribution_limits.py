"""Attribution with the ONNX reference evaluator as a voter: its documented faults
(onnxfuzz.generate.corpus.reference_limits) take its vote away, so that it and a backend sharing its
fault cannot outvote the backend that follows the spec (a false ORT bug seen in a campaign)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.backend import load_backend
from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.generate.corpus.reference_limits import reference_limits
from onnxfuzz.judge.attribution import attribute
from onnxfuzz.judge.oracle import OracleConfig

I64_MIN = np.iinfo(np.int64).min


def _slice_model(start: int) -> onnx.ModelProto:
    """A Slice with a negative step whose start lies before the axis begins: ONNX clamps it
    to the axis' last element (one element taken), NumPy-style slicing takes none."""
    consts = {
        "starts": [1, 0, 0, start],
        "ends": [0, 1, 1, -2],
        "axes": [0, 1, 2, 3],
        "steps": [-1, 1, 1, -1],
    }
    inits = [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in consts.items()]
    nodes = [
        helper.make_node("Slice", ["x", *consts], ["s"]),
        helper.make_node("ReduceSumSquare", ["s"], ["y"], keepdims=1),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 1])],
        initializer=inits,
        value_info=[helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1, 1, 1])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _outcomes(model: onnx.ModelProto, x: np.ndarray) -> dict[str, Outcome]:
    out = {}
    for label in ("ort", "onnx-reference", "torch"):
        backend = load_backend(label)
        got = backend.run(backend.compile(model), {"x": x})
        out[label] = Outcome(Status.OK, outputs={"y": np.asarray(got["y"])})
    return out


def test_the_reference_evaluator_and_a_backend_sharing_its_fault_do_not_outvote_the_spec():
    model = _slice_model(I64_MIN)
    assert reference_limits(model)  # the documented fault applies
    x = np.arange(1, 5, dtype=np.float32).reshape(2, 2, 1, 1)
    outcomes = _outcomes(model, x)
    assert outcomes["ort"].outputs["y"].ravel().tolist() == [9.0]  # x[1, 0, 0, 0] ** 2
    ref, torch = outcomes["onnx-reference"].outputs["y"], outcomes["torch"].outputs["y"]
    assert ref.ravel().tolist() == [0.0] and torch.ravel().tolist() == [0.0]  # both slice none
    # Without the reference's vote two backends remain: no majority, nobody outvoted.
    assert attribute(model, outcomes, "ort", OracleConfig()) is None


def test_the_reference_evaluator_still_votes_where_no_fault_applies():
    model = _slice_model(-1)  # a start inside the axis: every backend takes one element
    assert not reference_limits(model)
    x = np.arange(1, 5, dtype=np.float32).reshape(2, 2, 1, 1)
    outcomes = _outcomes(model, x)
    outcomes["torch"] = Outcome(Status.OK, outputs={"y": np.array([[[[5.0]]]], np.float32)})
    a = attribute(model, outcomes, "ort", OracleConfig())
    assert a is not None and a.majority == {"ort", "onnx-reference"}


def test_a_model_without_value_info_is_read_as_far_as_it_declares_and_does_not_raise():
    # A reduced model may lack the value_info of an intermediate. Where the faulty node's
    # own inputs are declared (the Slice reads the graph input), the fault is still seen.
    model = _slice_model(I64_MIN)
    del model.graph.value_info[:]
    assert [lim.op for lim in reference_limits(model)] == ["Slice"]
    x = np.arange(1, 5, dtype=np.float32).reshape(2, 2, 1, 1)
    outcomes = _outcomes(model, x)
    assert attribute(model, outcomes, "ort", OracleConfig()) is None  # as with value_info


def test_a_model_the_fault_check_cannot_read_keeps_the_old_vote_and_does_not_raise():
    # Where the faulty node's input has no declared shape, the fault check cannot tell.
    model = _slice_model(I64_MIN)
    g = model.graph
    g.node.insert(0, helper.make_node("Identity", ["x"], ["x1"]))
    g.node[1].input[0] = "x1"
    del g.value_info[:]
    assert not reference_limits(model)
    x = np.arange(1, 5, dtype=np.float32).reshape(2, 2, 1, 1)
    outcomes = _outcomes(model, x)
    a = attribute(model, outcomes, "ort", OracleConfig())
    assert a is not None and a.reference_odd  # as before the check: ORT outvoted


def test_a_fault_inside_an_if_branch_applies_to_the_model() -> None:
    """The evaluator runs branches and bodies too: the sliced model's fault inside an If
    branch applies (it was missed there: a generated opset-28 model with MaxUnpool in an
    If branch was reported invalid for the evaluator's IndexError)."""
    inner = _slice_model(I64_MIN).graph
    branch = helper.make_graph(
        list(inner.node), "then", [], list(inner.output), value_info=list(inner.value_info)
    )
    other = helper.make_graph(
        [helper.make_node("ReduceSumSquare", ["x"], ["z"], keepdims=1, axes=[0, 1, 2, 3])],
        "else",
        [],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 1, 1, 1])],
    )
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2, 1, 1]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1, 1])],
        initializer=list(inner.initializer),
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    assert [lim.op for lim in reference_limits(model)] == ["Slice"]
