"""Which nodes a failure's message names (``onnxfuzz.reduce.suspects``)."""

from __future__ import annotations

import onnx

from onnxfuzz.reduce.suspects import MAX_SUSPECTS, named_nodes


def _chain(*ops: str) -> onnx.ModelProto:
    h = onnx.helper
    nodes, prev = [], "x"
    for k, op in enumerate(ops):
        name = f"{op.lower()}{k}"
        nodes.append(h.make_node(op, [prev], [f"{name}_out"], name=name))
        prev = f"{name}_out"
    graph = h.make_graph(
        nodes,
        "g",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [h.make_tensor_value_info(prev, onnx.TensorProto.FLOAT, [2])],
    )
    return h.make_model(graph)


def test_the_first_diverging_node_of_a_wrong_value_comes_first() -> None:
    m = _chain("Abs", "Unsqueeze", "Relu")
    said = (
        "output relu2_out: shape [4, 3], the model declares [4, 5]; ort meets the declaration\n"
        "first diverging node: unsqueeze1 (Unsqueeze)"
    )
    # relu2_out is a tensor, not the node relu2: only the diverging node is named
    assert named_nodes(m, said) == [1]


def test_names_then_op_types_then_converter_files_in_the_order_said() -> None:
    m = _chain("Abs", "Reshape", "Relu", "Neg")
    assert named_nodes(m, "Node (relu2) failed; Reshape is fine") == [2, 1]
    torch = (
        "InternalTorchDynamoError: TypeError: torch.Size() takes an iterable of 'int'\n"
        'File "/site-packages/onnx2torch/node_converters/reshape.py", line 23'
    )
    assert named_nodes(m, torch) == [1]
    # an op type is its CamelCase word, not an English word inside other text
    assert named_nodes(_chain("Abs", "Not", "Neg"), "is not implemented") == []
    assert named_nodes(m, "nothing about any of them") == []


def test_a_lone_node_or_no_message_names_nothing_and_few_are_named() -> None:
    assert named_nodes(_chain("Relu"), "Node (relu0) failed") == []
    assert named_nodes(_chain("Relu", "Abs"), "") == []
    many = _chain(*["Relu"] * 8)
    assert len(named_nodes(many, "Relu failed")) == MAX_SUSPECTS


def test_tvm_operators_name_the_onnx_op_their_converter_came_from() -> None:
    m = _chain("Abs", "Sub", "Pow", "PRelu", "Atan", "Conv")
    power = (
        "TypeError: Binary operators must have the same datatype for both operands.  However, "
        "R.power(lv13, lv15) uses datatype T.float32 on the LHS (Type of "
        'R.Tensor((8, 4), dtype="float32")), and datatype T.float64 on the RHS'
    )
    # R.power is Pow's; R.Tensor and T.float32 are no operators
    assert named_nodes(m, power) == [2]
    prelu = 'ValueError: In ir.Op(span=None, name="relax.nn.prelu", description=""), the input'
    assert named_nodes(m, prelu) == [3]
    assert named_nodes(m, 'InternalError: unknown intrinsic ir.Op(name="tirx.atan")') == [4]
    # a namespace, a 1d/2d/Nd suffix and Relax's own spelling of an op
    said = "R.nn.convNd(lv, metadata) ... R.subtract(R.const(1.0), lv)"
    assert named_nodes(m, said) == [5, 1]
    assert named_nodes(m, 'R.shape([2, 3]) and R.const(1.0, "float32")') == []
