"""The ``openvino`` adapter. openvino is an extra (``pip install -e '.[openvino]'``): without
it the adapter still loads and says why it is unavailable, and the rest is skipped."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxfuzz.backend import is_unsupported, load_backend
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import run_reference
from onnxfuzz.generate.lang.config import Config

OPS = frozenset({"Relu", "Add", "Mul", "Sigmoid", "Tanh", "Abs", "Neg", "Exp"})


def test_loads_without_openvino() -> None:
    b = load_backend("openvino")
    assert b.name == "openvino"
    lo, hi = b.supported_opsets()
    assert lo <= 13 and hi >= 21
    reason = b.available()
    try:
        import openvino  # noqa: F401
    except ImportError:
        assert reason == "openvino is not installed: pip install -e '.[openvino]'"


@pytest.fixture(scope="module")
def backend():
    b = load_backend("openvino")
    reason = b.available()
    if reason:
        pytest.skip(reason)
    return b


def _close(out: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> None:
    assert list(out) == list(ref)
    for name, want in ref.items():
        got = out[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        np.testing.assert_allclose(
            got.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-3, err_msg=name
        )


def _model(nodes, inputs, outputs, opset=18):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("opset,seed", [(13, 0), (18, 1), (21, 2), (26, 3)])
def test_generated_models_match_reference(backend, opset: int, seed: int) -> None:
    gen = Generator(
        Config(
            min_nodes=3, max_nodes=6, opset=opset, ops=OPS, dtypes=frozenset({TensorProto.FLOAT})
        )
    )
    case = gen.generate(seed)
    inputs = case.make_inputs(seed)
    assert backend.version()
    _close(backend.run(backend.compile(case.model), inputs), run_reference(case.model, inputs))


def test_outputs_by_name_and_bfloat16(backend) -> None:
    # bf16 goes in and out as raw bits (handed an ml_dtypes array, openvino would squeeze
    # it through f16 and 1e10 would become inf).
    model = _model(
        [helper.make_node("Neg", ["x"], ["b"]), helper.make_node("Abs", ["x"], ["a"])],
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
        [
            helper.make_tensor_value_info("b", TensorProto.BFLOAT16, [3]),
            helper.make_tensor_value_info("a", TensorProto.BFLOAT16, [3]),
        ],
    )
    x = np.array([1e10, 0.5, -3.0], dtype=ml_dtypes.bfloat16)
    out = backend.run(backend.compile(model), {"x": x})
    assert list(out) == ["b", "a"]
    assert out["b"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out["b"].astype(np.float32), -x.astype(np.float32))
    np.testing.assert_array_equal(out["a"].astype(np.float32), np.abs(x.astype(np.float32)))


def test_unknown_op_is_unsupported(backend) -> None:
    model = _model(
        [helper.make_node("NoSuchOp", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    with pytest.raises(Exception, match="No conversion rule found") as info:
        backend.compile(model)
    assert is_unsupported(backend, info.value)
    # a conversion that fails a shape check refuses a valid model: a real error
    assert not backend.is_unsupported(
        RuntimeError(
            "FrontEnd API failed with OpConversionFailure:\nModel wasn't fully converted. "
            "Failed operations detailed log:\n-- Tile-21 with a message:\nTile repeats must "
            "be of rank 1"
        )
    )
