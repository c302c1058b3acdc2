"""A float16 error the tolerance hides only by another element's size is not rounding.

The float16 atol scales with the tensor's largest magnitude (an accumulation's error
scales with the magnitudes summed). Audit 16 (D3) planted a LeakyRelu that doubles its
output where x < -4: its wrong elements (about -0.07 against -0.14) sat inside the atol of
a tensor that also held values near 7, so localization walked past it, blamed the Div
after it and called that "amplified rounding, not a bug"; with the LeakyRelu as the
output, a 4-ulp nudge of its inputs (plus the scaled atol) was said to explain a 100 %
error. The planted adapter (``adapters.py:DoubledNegativeLeakyRelu``) runs under the real
ONNX Runtime, which is the reference.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig, Verdict, judge

DOUBLED = "tests/campaign/adapters.py:DoubledNegativeLeakyRelu"
HALF = TensorProto.FLOAT16


def gemm_to_div() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Audit 16's seed-6884 model: Gemm(x, x^T) -> Max -> LeakyRelu -> Clip -> Div, float16,
    with its input: the outer product holds values near 13 and near -13 (LeakyRelu: -0.13)."""
    nodes = [
        helper.make_node("Gemm", ["x", "x"], ["g"], name="gemm0", transB=1),
        helper.make_node("Max", ["g", "g"], ["m"], name="max0"),
        helper.make_node("LeakyRelu", ["m"], ["l"], name="leakyrelu0"),
        helper.make_node("Clip", ["l", "lo", "hi"], ["c"], name="clip0"),
        helper.make_node("Div", ["l", "c"], ["y"], name="div0"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", HALF, [8, 1])],
        [helper.make_tensor_value_info("y", HALF, [8, 8])],
        initializer=[
            numpy_helper.from_array(np.float16(0.5), "lo"),
            numpy_helper.from_array(np.float16(16.1), "hi"),
        ],
        value_info=[helper.make_tensor_value_info(t, HALF, [8, 8]) for t in "gmlc"],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = np.array([1.999, -3.559, 3.623, -0.5137, 1.549, 1.548, -1.974, 0.5684], np.float16)
    return model, {"x": x.reshape(8, 1)}


def leaky_relu_out() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The LeakyRelu is the output (audit 16's test 8855): elements near -0.048 doubled,
    beside values up to 4.72 (atol 0.0472 once scaled). Those at x = -4.82..-4.83 are off
    by 0.0482..0.0483, just outside that atol and inside it plus the 4-ulp nudge's reach
    (~1.6e-4): "float16 rounding inside the op" was said of a 100 % error."""
    graph = helper.make_graph(
        [helper.make_node("LeakyRelu", ["x"], ["y"], name="leakyrelu0")],
        "g",
        [helper.make_tensor_value_info("x", HALF, [64])],
        [helper.make_tensor_value_info("y", HALF, [64])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = np.concatenate([np.tile([-4.828, -4.824, -4.8203], 3), np.linspace(-4.8, 4.72, 55)])
    return model, {"x": x.astype(np.float16)}


@pytest.fixture(scope="module")
def pool() -> Iterator[BackendPool]:
    with BackendPool(["ort", DOUBLED]) as p:
        yield p


def _assess(pool: BackendPool, model: onnx.ModelProto, inputs: dict[str, np.ndarray]):
    order = [o.name for o in model.graph.output]
    outcomes = pool.run_all(model.SerializeToString(), inputs, only=("ort", DOUBLED))
    raw = judge("ort", outcomes["ort"], DOUBLED, outcomes[DOUBLED], order, OracleConfig())
    got = Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)[DOUBLED]
    return raw, got


def test_a_leaky_relu_doubled_on_small_elements_is_blamed_not_amplified_rounding(pool) -> None:
    model, inputs = gemm_to_div()
    raw, got = _assess(pool, model, inputs)
    assert raw.verdict == Verdict.MISMATCH, raw.message  # the Div output shows it
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH, v.message
    assert "first diverging node: leakyrelu0 (LeakyRelu)" in v.message, v.message
    assert "not a bug" not in v.message, v.message
    assert got.signature is not None and "LeakyRelu" in got.signature, got.signature


def test_a_leaky_relu_output_doubled_is_not_float16_rounding(pool) -> None:
    model, inputs = leaky_relu_out()
    raw, got = _assess(pool, model, inputs)
    assert raw.verdict == Verdict.MISMATCH, raw.message
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH, v.message
    assert "rounding" not in v.message, v.message
