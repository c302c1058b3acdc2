"""The ``tvm`` adapter against the real TVM (Relax): generated models match ONNX Runtime,
missing converters count as unsupported, outputs come back by name."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz.backend import is_unsupported, load_backend
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import run_reference
from onnxfuzz.generate.lang.config import Config

pytest.importorskip("tvm")

OPS = frozenset({"Relu", "Add", "Mul", "Sigmoid", "Tanh", "Abs", "Neg", "Exp"})


@pytest.fixture(scope="module")
def backend():
    b = load_backend("tvm")
    reason = b.available()
    if reason:
        pytest.skip(reason)
    return b


def _close(out: dict[str, np.ndarray], ref: dict[str, np.ndarray]) -> None:
    assert list(out) == list(ref)
    for name, want in ref.items():
        got = out[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if want.dtype == np.float32:
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3, err_msg=name)
        else:
            np.testing.assert_allclose(
                got.astype(np.float64), want.astype(np.float64), rtol=1e-5, atol=1e-6, err_msg=name
            )


def _model(nodes, inputs, outputs, opset=18, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def test_protocol(backend) -> None:
    assert backend.name == "tvm"
    assert backend.version().startswith("0.")
    lo, hi = backend.supported_opsets()
    assert lo <= 18 <= hi


@pytest.mark.parametrize("opset,seed", [(18, 0), (21, 1), (21, 2)])
def test_generated_models_match_reference(backend, opset: int, seed: int) -> None:
    gen = Generator(
        Config(
            min_nodes=3, max_nodes=6, opset=opset, ops=OPS, dtypes=frozenset({TensorProto.FLOAT})
        )
    )
    case = gen.generate(seed)
    inputs = case.make_inputs(seed)
    _close(backend.run(backend.compile(case.model), inputs), run_reference(case.model, inputs))


def test_outputs_keyed_by_name_with_shape_scalar_and_initializer() -> None:
    # Several outputs (a tuple from the VM) in graph order, a Shape output (folded into a
    # ShapeExpr: comes back as a tvm Shape), a 0-d input, an initializer kept as a constant;
    # opt_level=0 goes through the same path.
    b = load_backend("tvm:opt_level=0")
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, -2.0, 0.5])
    model = _model(
        [
            helper.make_node("Mul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "s"], ["b_sum"]),
            helper.make_node("Neg", ["m"], ["a_neg"]),
            helper.make_node("Shape", ["x"], ["shape"]),
        ],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
        ],
        [
            helper.make_tensor_value_info("b_sum", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("a_neg", TensorProto.FLOAT, [2, 3]),
        ],
        initializers=[w],
    )
    onnx.checker.check_model(model)
    inputs = {
        "x": np.arange(6, dtype=np.float32).reshape(2, 3),
        "s": np.asarray(0.25, dtype=np.float32),
    }
    out = b.run(b.compile(model), inputs)
    assert list(out) == ["b_sum", "shape", "a_neg"]
    _close(out, run_reference(model, inputs))


def test_missing_converter_is_unsupported(backend) -> None:
    model = _model(
        [helper.make_node("Celu", ["x"], ["y"], alpha=0.5)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    with pytest.raises(Exception) as info:
        backend.compile(model)
    assert "not supported for frontend ONNX: Celu" in str(info.value)
    assert is_unsupported(backend, info.value)


def test_dtype_limit_is_unsupported_but_a_crash_is_not(backend) -> None:
    # relax.log refuses integer tensors, which ONNX ReduceLogSum allows.
    model = _model(
        [helper.make_node("ReduceLogSum", ["x"], ["y"], keepdims=0)],
        [helper.make_tensor_value_info("x", TensorProto.INT64, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [])],
    )
    with pytest.raises(Exception) as info:
        backend.compile(model)
    assert is_unsupported(backend, info.value), str(info.value)[-300:]
    assert not is_unsupported(backend, IndexError("index 2 is out of bounds for axis 0"))
    assert not is_unsupported(backend, RuntimeError("Check failed: (ptr->ndim == ndim)"))


def test_a_form_the_importer_states_it_does_not_take_is_unsupported(backend) -> None:
    """The importer's own words for a form it lacks ("Only constant axes currently
    supported": axes fed as a graph input; "Only resize1d/resize2d/resize3d are
    supported.": a Resize of rank 6) are missing support, not a crash to file; the same
    ops in the forms it takes compile."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    axes = helper.make_tensor_value_info("axes", TensorProto.INT64, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    dynamic = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])], [x, axes], [y])
    x6 = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2, 2, 2])
    resize = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    rank6 = _model([resize], [x6], [y])
    rank6.graph.initializer.append(
        helper.make_tensor("scales", TensorProto.FLOAT, [6], [1, 1, 2, 2, 2, 2])
    )
    for model, said in ((dynamic, "Only constant axes"), (rank6, "Only resize1d")):
        with pytest.raises(Exception, match=said) as info:
            backend.compile(model)
        assert is_unsupported(backend, info.value)
    constant = _model([helper.make_node("ReduceSum", ["x", "axes"], ["y"])], [x], [y])
    constant.graph.initializer.append(helper.make_tensor("axes", TensorProto.INT64, [1], [1]))
    got = backend.run(backend.compile(constant), {"x": np.ones((2, 3), np.float32)})
    assert got["y"].tolist() == [[3.0], [3.0]]
    assert not is_unsupported(backend, AssertionError("Only 3 of 4 outputs were written"))


def test_options() -> None:
    from onnxfuzz.errors import BackendError

    with pytest.raises(BackendError, match="target must be one of"):
        load_backend("tvm:target=vulkan")
    cuda = load_backend("tvm:target=cuda")
    import tvm

    if not tvm.cuda(0).exist:
        assert cuda.available()
