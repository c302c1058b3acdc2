"""The reducer's graph passes keep every tensor a node reads typed."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxfuzz.reduce.graph_passes import State, cut_outputs


def _typed(g: onnx.GraphProto) -> set[str]:
    return {vi.name for vi in list(g.input) + list(g.value_info) + list(g.output)}


def test_an_output_cut_that_a_node_still_reads_keeps_its_type() -> None:
    # a = Relu(x) is a graph output and Neg's input; cutting the outputs down to b keeps a
    # as an intermediate, with its type (it was declared only as an output).
    f = TensorProto.FLOAT
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"])],
        "g",
        [helper.make_tensor_value_info("x", f, [2, 3])],
        [
            helper.make_tensor_value_info("a", f, [2, 3]),
            helper.make_tensor_value_info("b", f, [2, 3]),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    s = State(m, {"x": np.ones((2, 3), np.float32)})
    only_b = [c for c in cut_outputs(s) if [o.name for o in c.model.graph.output] == ["b"]]
    assert only_b, "cut_outputs offers keeping b alone"
    cg = only_b[0].model.graph
    assert [n.op_type for n in cg.node] == ["Relu", "Neg"]
    assert {"x", "a", "b"} <= _typed(cg)
    info = {vi.name: vi for vi in cg.value_info}["a"]
    assert info.type.tensor_type.elem_type == f
    assert [d.dim_value for d in info.type.tensor_type.shape.dim] == [2, 3]
    only_a = [c for c in cut_outputs(s) if [o.name for o in c.model.graph.output] == ["a"]]
    assert only_a and not only_a[0].model.graph.value_info  # Neg pruned, nothing to type


def test_value_faults_judge_tensors_and_pass_over_sequences() -> None:
    """A Log fed a negative value is a fault; a sequence value (a list of arrays of
    different shapes) is not judged, and does not break the check."""
    import numpy as np
    from onnx import TensorProto
    from onnx import helper as h

    from onnxfuzz.reduce.domains import value_faults

    nodes = [
        h.make_node("SequenceConstruct", ["a", "b"], ["s"]),
        h.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
        h.make_node("Log", ["c"], ["y"]),
    ]
    ins = [h.make_tensor_value_info(n, TensorProto.FLOAT, [k]) for n, k in (("a", 2), ("b", 3))]
    g = h.make_graph(nodes, "g", ins, [h.make_tensor_value_info("y", TensorProto.FLOAT, [5])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    b = np.ones(3, np.float32)
    for a, faults in (
        (np.array([-1.0, 2.0], np.float32), {("Log:y", "input.values")}),
        (np.array([1.0, 2.0], np.float32), set()),
    ):
        c = np.concatenate([a, b])
        assert value_faults(m, {"a": a, "b": b, "s": [a, b], "c": c}) == faults


def test_simplify_values_keeps_a_string_input_a_string_tensor() -> None:
    """A string input is simplified to "" then "a" (bytes stay bytes), never to 0: an
    object array of ints is a model input no runtime takes and no test data file holds.
    Each candidate's values still serialize as the model's string input."""
    from onnx import numpy_helper

    from onnxfuzz.reduce.graph_passes import simplify_values

    s_ = TensorProto.STRING
    g = helper.make_graph(
        [helper.make_node("StringConcat", ["x", "y"], ["z"])],
        "g",
        [helper.make_tensor_value_info(n, s_, [2]) for n in ("x", "y")],
        [helper.make_tensor_value_info("z", s_, [2])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    x = np.array(["ab", "c"], dtype=object)
    y = np.array([b"d", b""], dtype=object)
    got = [c.inputs for c in simplify_values(State(m, {"x": x, "y": y}))]
    assert [v.tolist() for c in got for v in c.values() if v is not x and v is not y] == [
        ["", ""],
        [b"", b""],
        ["a", "a"],
        [b"a", b"a"],
    ]
    for c in got:
        for name, v in c.items():
            numpy_helper.from_array(v, name)  # raised NotImplementedError on a 0 element
