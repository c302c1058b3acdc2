"""An op that computes its statistics in float32 (stash_type) makes a float64 model's
downstream outputs float32-precise: their comparison uses float32's tolerance."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.judge.oracle import precision_dtypes


def _model(stash: int | None) -> object:
    attrs = {} if stash is None else {"stash_type": stash}
    nodes = [
        helper.make_node("LayerNormalization", ["x", "s"], ["n"], **attrs),
        helper.make_node("Relu", ["n"], ["y"]),
        helper.make_node("Neg", ["x"], ["z"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 3])],
        [
            helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 3]),
            helper.make_tensor_value_info("z", TensorProto.DOUBLE, [2, 3]),
        ],
        initializer=[numpy_helper.from_array(np.ones(3), "s")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def test_stash_type_float32_loosens_what_follows_it() -> None:
    p = precision_dtypes(_model(None))  # the default stash_type is 1: float32
    assert p["y"] == "float32" and p["n"] == "float32"
    assert p["z"] == "float64"  # a path around it keeps float64's tolerance


def test_stash_type_double_keeps_float64() -> None:
    assert precision_dtypes(_model(TensorProto.DOUBLE))["y"] == "float64"
