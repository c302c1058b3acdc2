"""Localization blames a node on the mismatching output's path, never one in another
branch that also diverges once every intermediate is exposed.

The planted adapter (``adapters.py:WrongOp``) adds 0.5 to every float32 Sigmoid. Branch B's
Sigmoid diverges first in topological order, but a Greater after it hides that from its
graph output; branch A's Sigmoid makes the output that mismatches. The real ONNX Runtime is
the reference and runs under the adapter.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig, Verdict

WRONG_SIGMOID = "tests/campaign/adapters.py:WrongOp:op=Sigmoid"


def test_the_culprit_is_on_the_mismatching_outputs_path() -> None:
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Sigmoid", ["xb"], ["sb"], name="sigmoid_b"),
        helper.make_node("Greater", ["sb", "low"], ["yb"], name="greater_b"),
        helper.make_node("Neg", ["xa"], ["na"], name="neg_a"),
        helper.make_node("Sigmoid", ["na"], ["ya"], name="sigmoid_a"),
    ]
    graph = helper.make_graph(
        nodes,
        "two_branches",
        [helper.make_tensor_value_info(x, f32, [4]) for x in ("xa", "xb")],
        [
            helper.make_tensor_value_info("ya", f32, [4]),
            helper.make_tensor_value_info("yb", TensorProto.BOOL, [4]),
        ],
        initializer=[numpy_helper.from_array(np.float32(-1.0), "low")],
        value_info=[
            helper.make_tensor_value_info("sb", f32, [4]),
            helper.make_tensor_value_info("na", f32, [4]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.linspace(-2, 2, 4, dtype=np.float32)
    inputs = {"xa": x, "xb": x}
    with BackendPool(["ort", WRONG_SIGMOID]) as pool:
        outcomes = pool.run_all(model.SerializeToString(), inputs)
        assert np.array_equal(outcomes["ort"].outputs["yb"], outcomes[WRONG_SIGMOID].outputs["yb"])
        got = Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)[WRONG_SIGMOID]
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.output == "ya", v.message
    assert "first diverging node: sigmoid_a (Sigmoid)" in v.message, v.message
    assert "sigmoid_b" not in v.message


def test_a_model_without_value_info_is_localized_by_inferred_types() -> None:
    """A model from elsewhere often declares no intermediate types: its intermediates are
    exposed with the types ONNX's shape inference gives them, so the Sigmoid in the middle
    is blamed, not the Neg that makes the mismatching output."""
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [
            helper.make_node("Neg", ["x"], ["a"], name="neg_in"),
            helper.make_node("Sigmoid", ["a"], ["s"], name="sigmoid_mid"),
            helper.make_node("Neg", ["s"], ["y"], name="neg_out"),
        ],
        "untyped",
        [helper.make_tensor_value_info("x", f32, [4])],
        [helper.make_tensor_value_info("y", f32, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    inputs = {"x": np.linspace(-2, 2, 4, dtype=np.float32)}
    with BackendPool(["ort", WRONG_SIGMOID]) as pool:
        outcomes = pool.run_all(model.SerializeToString(), inputs)
        got = Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)[WRONG_SIGMOID]
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH, v.message
    assert "first diverging node: sigmoid_mid (Sigmoid)" in v.message, v.message
    assert "Sigmoid output" in got.signature, got.signature


def test_a_wrong_element_type_is_blamed_on_the_node_that_gives_it() -> None:
    """onnx2torch's Pow of a float base and a double exponent gives double (torch's type
    promotion; ONNX says the base's type). Before it, a float16 HardSigmoid cast to double
    differs from ORT's by one float16 ulp, past float64's tolerance: values localized the
    wrong type to that Cast, a signature only the float16 noise kept (a campaign's bundle
    stuck at these 3 nodes). The element type names Pow, which alone shows the bug."""
    pytest.importorskip("onnx2torch")
    nodes = [
        helper.make_node("HardSigmoid", ["x1"], ["t1"], beta=0.25, name="hardsigmoid0"),
        helper.make_node("Cast", ["t1"], ["t2"], to=TensorProto.DOUBLE, name="cast0"),
        helper.make_node("Pow", ["x2", "t2"], ["y"], name="pow0"),
    ]
    graph = helper.make_graph(
        nodes,
        "hardsigmoid_cast_pow",
        [
            helper.make_tensor_value_info("x1", TensorProto.FLOAT16, [1, 1, 1]),
            helper.make_tensor_value_info("x2", TensorProto.FLOAT, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 1])],
        value_info=[
            helper.make_tensor_value_info("t1", TensorProto.FLOAT16, [1, 1, 1]),
            helper.make_tensor_value_info("t2", TensorProto.DOUBLE, [1, 1, 1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    # the campaign's input values (x1: float16 bits 47852)
    inputs = {
        "x1": np.array([47852], np.uint16).view(np.float16).reshape(1, 1, 1),
        "x2": np.array(3.9935123920440674, np.float32),
    }
    with BackendPool(["ort", "torch"]) as pool:
        outcomes = pool.run_all(model.SerializeToString(), inputs)
        # the premise: the float16 noise is there, and breaks float64's tolerance at t2
        exposed = {k: o.outputs for k, o in pool.run_all(_exposed(model), inputs).items()}
        assert exposed["ort"]["t2"] != exposed["torch"]["t2"], exposed
        got = Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)["torch"]
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.kind == "dtype", v.message
    assert "first diverging node: pow0 (Pow)" in v.message, v.message
    assert got.signature == "torch|mismatch|run|dtype in Pow output", got.signature


def _exposed(model) -> bytes:
    from onnxfuzz.judge.localize import expose_all

    return expose_all(model).SerializeToString()


SCALES_WHOLE = "tests/campaign/adapters.py:ScalesWholeModel:op=Sigmoid"


def _chain(first: str, second: str | None = None) -> tuple[bytes, object, dict]:
    """Relu -> Neg -> Sigmoid -> Neg, "y"; with ``second``, a Relu of "x2" as a first graph
    output "y2" off the Sigmoid's path."""
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu0"),
        helper.make_node("Neg", ["r"], ["n"], name="neg0"),
        helper.make_node("Sigmoid", ["n"], ["s"], name="sigmoid0"),
        helper.make_node("Neg", ["s"], ["y"], name="neg1"),
    ]
    ins = [helper.make_tensor_value_info("x", f32, [4])]
    outs = [helper.make_tensor_value_info("y", f32, [4])]
    if second:
        nodes.insert(0, helper.make_node("Relu", ["x2"], ["y2"], name=second))
        ins.append(helper.make_tensor_value_info("x2", f32, [4]))
        outs.insert(0, helper.make_tensor_value_info("y2", f32, [4]))
    graph = helper.make_graph(nodes, first, ins, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    inputs = {t.name: np.linspace(0.5, 2, 4, dtype=np.float32) for t in ins}
    return model.SerializeToString(), model, inputs


def _assess(adapter: str, model, inputs: dict):
    with BackendPool(["ort", adapter]) as pool:
        outcomes = pool.run_all(model.SerializeToString(), inputs)
        return Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)[adapter]


def test_a_node_right_alone_is_passed_over_for_the_one_wrong_alone() -> None:
    """A backend that scales every output of a model holding a Sigmoid makes the Relu, the
    first float node, look wrong once intermediates are exposed; that Relu alone on the same
    inputs is right there, the Sigmoid alone is not: the Sigmoid is blamed, so one bug is
    one signature whichever op comes first (an audit's planted bug was filed as 30 bugs,
    one per first op, each reduced to that op and a Sigmoid)."""
    _, model, inputs = _chain("relu_neg_sigmoid_neg")
    got = _assess(SCALES_WHOLE, model, inputs)
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.kind == "values", v.message
    assert "first diverging node: sigmoid0 (Sigmoid)" in v.message, v.message
    assert "agrees with the reference" not in v.message, v.message
    assert got.signature.endswith("values in Sigmoid output"), got.signature


def test_a_node_wrong_alone_off_the_outputs_path_is_blamed_when_the_path_is_right() -> None:
    """The mismatching output (a Relu of another input, listed first) is off the Sigmoid's
    path, and its Relu is right alone: the Sigmoid, wrong alone, is blamed and said to be
    off the path, so this model's bug has the signature of the Sigmoid alone (one bundle,
    reducible to the Sigmoid) and not "values in Relu output"."""
    _, model, inputs = _chain("two_outputs", second="relu_other")
    got = _assess(SCALES_WHOLE, model, inputs)
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.output == "y2", v.message
    assert "first diverging node: sigmoid0 (Sigmoid)" in v.message, v.message
    assert (
        f"Sigmoid (sigmoid0) does not feed output y2; each node that does and differs is right "
        f"alone on {SCALES_WHOLE}, fed the same input values, and Sigmoid alone is not"
    ) in v.message, v.message
    assert got.signature.endswith("values in Sigmoid output"), got.signature


def test_a_node_right_alone_with_none_wrong_alone_says_so() -> None:
    """The backend scales the float outputs of a model that holds a Shape: no node is wrong
    alone (a Shape alone gives int64), so the Relu stays blamed and the message says it is
    right alone on the backend, so nobody reads it as a wrong Relu kernel."""
    adapter = "tests/campaign/adapters.py:ScalesWholeModel:op=Shape"
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["y"], name="relu0"),
            helper.make_node("Shape", ["x"], ["s"], name="shape0"),
        ],
        "relu_and_shape",
        [helper.make_tensor_value_info("x", f32, [4])],
        [
            helper.make_tensor_value_info("y", f32, [4]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [1]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    got = _assess(adapter, model, {"x": np.linspace(0.5, 2, 4, dtype=np.float32)})
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.output == "y", v.message
    assert "first diverging node: relu0 (Relu)" in v.message, v.message
    assert (
        f"Relu (relu0) alone on {adapter}, fed the same input values, agrees with the "
        "reference: its wrong value needs the rest of the model"
    ) in v.message, v.message


def test_a_lone_precision_error_is_quoted_from_the_node_run_alone() -> None:
    """Within the end-to-end tolerance (1 + 2e-3), the precision check blames the op that
    is beyond its budget alone on the backend too, and quotes that run: "Relu alone ... is
    off" was said of a Relu the backend computed right alone."""
    adapter = "tests/campaign/adapters.py:ScalesWholeModel:op=Sigmoid,rel=2e-3"
    _, model, inputs = _chain("relu_neg_sigmoid_neg")
    got = _assess(adapter, model, inputs)
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.kind == "precision", v.message
    assert "first diverging node: sigmoid0 (Sigmoid)" in v.message, v.message
    assert "Sigmoid (sigmoid0) alone, on the same input values, is off by up to 0.002" in (
        v.message
    ), v.message
    # and by how much in its own units, at which element (a +1 bug read as noise without)
    number = r"([0-9.e-]+)"
    said = re.search(rf"max abs error {number}, {number} for {number} at \[\d+\]", v.message)
    assert said is not None, v.message
    err, got_at, want_at = map(float, said.groups())
    assert abs(abs(got_at - want_at) - err) <= 1e-6 and got_at > want_at > 0, v.message


FUSED = "tests/campaign/adapters.py:WrongFusion:first=MatMul,then=Add,dtype=float32"


def _matmul_add_tail(tail: list[str]) -> tuple[object, dict]:
    """MatMul -> Add (a bias) -> ``tail`` ops, each elementwise on the last's output."""
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["m"], name="matmul0"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add0"),
    ]
    last = "a"
    for k, op in enumerate(tail):
        nodes.append(helper.make_node(op, [last], [f"t{k}"], name=f"{op.lower()}{k}"))
        last = f"t{k}"
    nodes[-1].output[0] = "y"
    inits = [
        numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "w"),
        numpy_helper.from_array(np.full(4, 0.25, np.float32), "b"),
    ]
    graph = helper.make_graph(
        nodes,
        "fused",
        [helper.make_tensor_value_info("x", f32, [2, 3])],
        [helper.make_tensor_value_info("y", f32, [2, 4])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return model, {"x": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)}


def test_a_fusion_that_exposing_undoes_is_blamed_on_its_last_node_by_cutting() -> None:
    """A MatMul -> Add fusion wrong only while MatMul's output stays inside (as a compiler
    fuses): with every intermediate exposed nothing differs, and the mismatch was blamed
    on whichever op came after the Add (an audit's one planted fusion bug was filed as 19
    bundles, "values in Gelu output", "... Tanh output", ..., 18 of them not minimal). The
    model cut after the Add still fuses and is wrong; cut after the MatMul it is right."""
    for tail in (["Tanh", "Neg"], ["Sigmoid"]):
        model, inputs = _matmul_add_tail(tail)
        got = _assess(FUSED, model, inputs)
        v = got.judgement
        assert v.verdict == Verdict.MISMATCH, v.message
        assert got.signature.endswith("|values in Add output"), (tail, got.signature)
        assert "first diverging node: add0 (Add), in the model cut after it" in v.message


def test_a_fusion_bug_reduces_to_the_fused_pair(tmp_path) -> None:
    """``onnxfuzz reduce`` of the fused pair with ops after it: 4 -> 4 nodes before (the
    signature named the last op, so no op after the Add could go), the pair now."""
    import onnx

    from onnxfuzz.cli.main import main

    model, inputs = _matmul_add_tail(["Tanh", "Neg"])
    path = tmp_path / "fused.onnx"
    onnx.save(model, path)
    out = tmp_path / "reduced"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", FUSED, "--out", str(out)]
    assert main(argv) == 0
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["MatMul", "Add"], reduced.graph.node


def test_a_cut_goes_back_through_a_sequence_to_the_fusion() -> None:
    """MatMul -> Add -> SplitToSequence -> SequenceAt: a sequence is no graph output, so
    no cut can end at SplitToSequence; the walk goes through it to the Add (an audit's
    fusion bug kept three bundles so: SequenceAt, and OptionalGetElement twice)."""
    model, inputs = _matmul_add_tail([])
    g = model.graph
    g.node[-1].output[0] = "a"
    pos = numpy_helper.from_array(np.array(0, np.int64), "pos")
    g.initializer.append(pos)
    g.node.extend(
        [
            helper.make_node("SplitToSequence", ["a"], ["q"], axis=0, name="split0"),
            helper.make_node("SequenceAt", ["q", "pos"], ["y"], name="at0"),
        ]
    )
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]))
    got = _assess(FUSED, model, inputs)
    assert got.signature.endswith("|values in Add output"), got.signature


def test_a_cut_goes_back_to_the_fusion_an_if_branch_reads() -> None:
    """MatMul -> Add, read inside an If's branches (not an input of the If node): the walk
    follows what the bodies read (the audit's fusion bug kept a MatMul -> Add -> If)."""
    model, inputs = _matmul_add_tail([])
    g = model.graph
    g.node[-1].output[0] = "a"
    f32 = TensorProto.FLOAT

    def branch(op: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"b_{op}", f32, [2, 4])  # names are model-wide
        node = helper.make_node(op, ["a"], [out.name])
        return helper.make_graph([node], op.lower(), [], [out])

    g.initializer.append(numpy_helper.from_array(np.array(True), "c"))
    g.node.append(
        helper.make_node(
            "If", ["c"], ["y"], then_branch=branch("Neg"), else_branch=branch("Abs"), name="if0"
        )
    )
    got = _assess(FUSED, model, inputs)
    assert got.signature.endswith("|values in Add output"), got.signature
