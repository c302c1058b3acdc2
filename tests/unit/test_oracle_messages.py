"""The oracle's mismatch message: readable, and no numpy warning on the user's terminal."""

from __future__ import annotations

import warnings

import numpy as np

from onnxfuzz.judge.oracle import Verdict, _values


def test_every_wrong_element_a_nan_gives_a_message_and_no_warning() -> None:
    want = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    got = np.array([np.nan, np.nan, 3.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.nanmax's "All-NaN slice" warned here
        j = _values("y", want, got, (1e-3, 1e-2))
    assert j is not None and j.verdict == Verdict.MISMATCH
    # a NaN against a number has no size of error: counted in words, no "max abs err nan"
    assert "2/3 elements" in j.message and "2 NaN where the reference is not" in j.message
    assert "max abs err" not in j.message and "no tolerance passes it" in j.message


def test_the_largest_finite_error_is_reported_beside_nans() -> None:
    want = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    got = np.array([np.nan, 2.5, 3.0], dtype=np.float32)
    j = _values("y", want, got, (1e-3, 1e-2))
    assert j is not None and "max abs err 0.5," in j.message


def test_single_node_without_a_declared_input_type_is_none() -> None:
    # A reducer's candidate can lack the value_info of an intermediate (seen for a NonZero
    # output): localization then cannot cut the node out, and says so instead of failing.
    from onnx import TensorProto, helper

    from onnxfuzz.judge.localize import single_node

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [helper.make_node("Relu", ["x"], ["mid"]), helper.make_node("Neg", ["mid"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    assert single_node(model, nodes[1]) is None
    assert single_node(model, nodes[0]) is not None


def test_no_relative_error_is_given_against_a_reference_of_zero() -> None:
    """An Add off by 1 where the reference gave 0 read "max rel err 1e+30"."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        j = _values("y", np.zeros(3, np.float32), np.ones(3, np.float32), (1e-3, 1e-2))
        both = _values(
            "y", np.array([0.0, 2.0], np.float32), np.array([1.0, 3.0], np.float32), (1e-3, 1e-2)
        )
    assert j is not None and "max rel err - (the reference is 0 there)" in j.message, j
    assert both is not None and "max rel err 0.5;" in both.message, both
