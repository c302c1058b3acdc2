"""A float16 corpus case whose expected outputs ONNX Runtime computes with a comparison on
values it kept in float32 (onnxruntime#8787, with every optimization off) gets none: a
flipped boolean no tolerance absorbs would fail every backend that rounds as the model
says (an audit found 12 such cases in 1,500 exported)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxfuzz.generate.corpus.validate import flipped_steps, half_step_doubt, run_reference

TOL = (1e-2, 2e-2)


def _sum_then_less_or_equal() -> onnx.ModelProto:
    """Sum(a, b) <= c, all float16 (ONNX Runtime's CPU Sum runs in float32 between casts
    it inserts, and drops the cast back to float16 before the comparison)."""
    h = TensorProto.FLOAT16
    nodes = [
        helper.make_node("Sum", ["a", "b"], ["s"], name="sum0"),
        helper.make_node("LessOrEqual", ["s", "c"], ["y"], name="le0"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, h, [2]) for n in "abc"],
        [helper.make_tensor_value_info("y", TensorProto.BOOL, [2])],
        value_info=[helper.make_tensor_value_info("s", h, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _f16(*v: float) -> np.ndarray:
    return np.array(v, np.float16)


def test_a_comparison_on_values_kept_in_float32_gets_no_expected_outputs() -> None:
    model = _sum_then_less_or_equal()
    # 1 + 2**-11 rounds to 1 in float16 (a tie, to even): Sum is 1, and 1 <= 1
    inputs = {"a": _f16(1.0, 1.0), "b": _f16(2**-11, 0.0), "c": _f16(1.0, 1.0)}
    ort_says = run_reference(model, inputs)["y"]
    assert ort_says.tolist() == [False, True]  # the fault this test needs is still in ORT
    assert flipped_steps(model, inputs) == ["LessOrEqual (le0)"]
    doubt = half_step_doubt(model, inputs, {"y": ort_says}, TOL)
    assert doubt is not None and "LessOrEqual (le0)" in doubt and "onnxruntime#8787" in doubt


def test_a_comparison_of_values_float16_holds_keeps_its_expected_outputs() -> None:
    model = _sum_then_less_or_equal()
    inputs = {"a": _f16(1.0, 0.5), "b": _f16(2**-10, 0.25), "c": _f16(1.0, 1.0)}
    outs = run_reference(model, inputs)
    assert outs["y"].tolist() == [False, True]
    assert flipped_steps(model, inputs) == []
    assert half_step_doubt(model, inputs, outs, TOL) is None


def test_a_model_whose_exposed_run_fails_gives_no_evidence_and_no_error() -> None:
    """The check runs ONNX Runtime once more, on the model with its intermediates made
    outputs; where that run fails (an input missing here), it says nothing rather than
    ending the corpus."""
    model = _sum_then_less_or_equal()
    assert flipped_steps(model, {"a": _f16(1.0, 1.0)}) == []
