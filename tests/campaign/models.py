"""Small hand-made models the campaign tests share (imported by name: pytest puts this
folder on sys.path for its test modules)."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper


def chain(ops: list[str]) -> onnx.ModelProto:
    """x (float [2, 3]) through one unary op after another to y."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    names = ["x"] + [f"t{i}" for i in range(len(ops) - 1)] + ["y"]
    nodes = [
        helper.make_node(op, [a], [b]) for op, a, b in zip(ops, names, names[1:], strict=False)
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
