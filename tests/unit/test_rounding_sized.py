"""The element-wise rounding rule (``precision.beyond_rounding``, ``_within_reach``): an
element's difference is rounding when it is within its own tolerance (the float16 atol
*not* scaled by the tensor's largest magnitude) widened by rtol, what nudging the op's
float16 inputs by a few ulps moves that element on the reference, and a few ulps of its
own. Real ONNX Runtime runs the nudged node."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.oracle import OracleConfig, tolerance
from onnxfuzz.judge.precision import beyond_rounding, within_rounding

HALF = TensorProto.FLOAT16


def _node_model(op: str, ins: list[str], n: int, **attrs) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node(op, ins, ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info(t, HALF, [n]) for t in ins],
        [helper.make_tensor_value_info("y", HALF, [n])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def run_ort(data: bytes, feeds: dict[str, np.ndarray]) -> Outcome:
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return Outcome(Status.OK, outputs=dict(zip(names, sess.run(names, feeds), strict=True)))


def _own(want: np.ndarray):
    return lambda _t: tolerance("a", "b", "y", want, OracleConfig(), scaled=False)


def test_the_unscaled_float16_tolerance_is_the_dtypes_own() -> None:
    want = np.array([-0.07, 7.0], np.float16)
    assert tolerance("a", "b", "y", want, OracleConfig()) == (0.07, 0.02)
    assert tolerance("a", "b", "y", want, OracleConfig(), scaled=False) == (0.01, 0.02)


def leaky() -> tuple[onnx.ModelProto, dict[str, np.ndarray], np.ndarray]:
    m = _node_model("LeakyRelu", ["x"], 8, alpha=0.01)
    x = np.array([-6.9, -5.0, -1.0, 0.5, 3.0, 5.0, 6.5, 7.0], np.float16)
    want = run_ort(m.SerializeToString(), {"x": x}).outputs["y"]
    return m, {"x": x}, want


def test_a_2x_error_on_small_elements_is_beyond_rounding_beside_large_ones() -> None:
    m, fed, want = leaky()
    got = np.where(fed["x"] < -4, want * 2, want).astype(np.float16)
    # inside the magnitude-scaled atol (0.07): the oracle's comparison lets it through
    assert np.abs(got.astype(float) - want).max() < 0.07
    assert beyond_rounding(m, fed, {"y": want}, {"y": got}, run_ort, _own(want))
    # the nudge's reach is not allowed to stand for it either
    assert within_rounding(m, fed, {"y": want}, {"y": got}, run_ort, _own(want)) is None


def test_a_few_ulps_are_rounding() -> None:
    m, fed, want = leaky()
    got = (want.astype(np.float32) + 2 * np.spacing(np.abs(want)).astype(np.float32)).astype(
        np.float16
    )
    assert not beyond_rounding(m, fed, {"y": want}, {"y": got}, run_ort, _own(want))


def test_a_cancellation_amplifies_input_rounding_and_stays_rounding() -> None:
    """Sub of nearly equal float16 values near 1000 (one ulp: 0.5): a one-ulp difference of
    an input is 100 % of a result near 0.5, far beyond its own tolerance, and within what
    nudging the inputs moves it."""
    m = _node_model("Sub", ["a", "b"], 4)
    a = np.array([1000.5, 1001.0, 1000.0, 3.0], np.float16)
    b = np.array([1000.0, 1000.5, 1000.5, 1.0], np.float16)
    want = run_ort(m.SerializeToString(), {"a": a, "b": b}).outputs["y"]
    # the other side saw a one ulp lower (rounded another way upstream)
    a2 = (a.astype(np.float32) - np.spacing(np.abs(a)).astype(np.float32)).astype(np.float16)
    got = (a2 - b).astype(np.float16)
    assert np.abs(got.astype(float) - want).max() >= 0.5
    fed = {"a": a, "b": b}
    assert not beyond_rounding(m, fed, {"y": want}, {"y": got}, run_ort, _own(want))
    said = within_rounding(m, fed, {"y": want}, {"y": got}, run_ort, _own(want))
    assert said is not None and "float16 rounding inside the op" in said, said


def test_a_small_divisor_amplifies_input_rounding_and_stays_rounding() -> None:
    m = _node_model("Div", ["a", "b"], 3)
    a = np.array([3.0, 2.5, 1.0], np.float16)
    b = np.array([0.001, 0.002, 1.0], np.float16)
    want = run_ort(m.SerializeToString(), {"a": a, "b": b}).outputs["y"]
    b2 = (b.astype(np.float32) + np.spacing(b).astype(np.float32)).astype(np.float16)
    got = (a.astype(np.float32) / b2.astype(np.float32)).astype(np.float16)
    fed = {"a": a, "b": b}
    assert not beyond_rounding(m, fed, {"y": want}, {"y": got}, run_ort, _own(want))
