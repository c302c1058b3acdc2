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
