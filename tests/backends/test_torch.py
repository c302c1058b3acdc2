"""The ``torch`` and ``torch-compile`` adapters (onnx2torch) against the real libraries."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxfuzz.backend import is_unsupported, load_backend
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import run_reference
from onnxfuzz.generate.lang.config import Config

pytest.importorskip("torch")
pytest.importorskip("onnx2torch")

OPS = frozenset({"Relu", "Add", "Mul", "Sigmoid", "Tanh", "Abs", "Neg", "Exp"})


@pytest.fixture(scope="module")
def backend():
    return load_backend("torch")


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


def _case(opset: int, seed: int):
    gen = Generator(
        Config(
            min_nodes=3, max_nodes=6, opset=opset, ops=OPS, dtypes=frozenset({TensorProto.FLOAT})
        )
    )
    case = gen.generate(seed)
    return case, case.make_inputs(seed)


def test_protocol(backend) -> None:
    assert backend.name == "torch"
    assert backend.available() is None
    assert "onnx2torch" in backend.version()
    lo, hi = backend.supported_opsets()
    assert lo <= 13 and hi >= 20


@pytest.mark.parametrize("opset,seed", [(13, 0), (18, 1), (20, 2), (21, 3)])
def test_generated_models_match_reference(backend, opset: int, seed: int) -> None:
    case, inputs = _case(opset, seed)
    assert backend.supports(case.model) is None  # these ops have converters up to 21
    _close(backend.run(backend.compile(case.model), inputs), run_reference(case.model, inputs))


def test_multi_output_node_and_shared_producer(backend) -> None:
    # onnx2torch returns one value per distinct producing node, a tuple for a node with
    # several outputs: the adapter picks each graph output out of that.
    k = helper.make_tensor("k", TensorProto.INT64, [1], [2])
    model = _model(
        [
            helper.make_node("TopK", ["x", "k"], ["vals", "idx"], axis=1),
            helper.make_node("Relu", ["x"], ["r"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [
            helper.make_tensor_value_info("idx", TensorProto.INT64, [2, 2]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("vals", TensorProto.FLOAT, [2, 2]),
        ],
    )
    model.graph.initializer.append(k)
    inputs = {"x": np.array([[3, -1, 7, 2], [0, 5, -4, 9]], dtype=np.float32)}
    out = backend.run(backend.compile(model), inputs)
    assert list(out) == ["idx", "r", "vals"]
    _close(out, run_reference(model, inputs))


def test_bfloat16_round_trip(backend) -> None:
    model = _model(
        [helper.make_node("Neg", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])],
    )
    x = np.array([1e10, 0.5, -3.0], dtype=ml_dtypes.bfloat16)
    y = backend.run(backend.compile(model), {"x": x})["y"]
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), -x.astype(np.float32))


def test_missing_converter_is_unsupported(backend) -> None:
    model = _model(
        [helper.make_node("Sinh", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    assert "Sinh-9" in (backend.supports(model) or "")
    with pytest.raises(NotImplementedError, match="Converter is not implemented") as info:
        backend.compile(model)
    assert is_unsupported(backend, info.value)
    assert backend.is_unsupported(info.value)
    # a converter refusing an attribute value, and a kernel without the dtype
    assert backend.is_unsupported(ValueError("alpha parameter must be 1.67, not 0.29"))
    assert backend.is_unsupported(RuntimeError("\"addmm_impl_cpu_\" not implemented for 'UInt64'"))
    assert not backend.is_unsupported(
        IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    )


def test_a_padding_mode_torch_has_only_for_the_last_dims_is_unsupported(backend) -> None:
    """ONNX pads any axis in reflect mode; torch's reflect padding is implemented for the
    last dims only, and says so: a stated limit (as OpenVINO's "only supported"), not a
    crash to file (camp2 and camp8 filed it as a bug of torch and of torch-compile)."""
    model = _model(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2, 2, 2]),
            helper.make_tensor_value_info("pads", TensorProto.INT64, [8]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 2, 2, 2])],
        opset=13,  # onnx2torch converts Pad up to 13
    )
    model.graph.input.pop()  # the pads as a constant
    model.graph.initializer.append(
        helper.make_tensor("pads", TensorProto.INT64, [8], [1, 0, 0, 0, 1, 0, 0, 0])
    )
    x = np.arange(24, dtype=np.float32).reshape(3, 2, 2, 2)
    with pytest.raises(RuntimeError, match="reflect padding is implemented for") as info:
        backend.run(backend.compile(model), {"x": x})
    assert backend.is_unsupported(info.value)
    assert not backend.is_unsupported(RuntimeError("narrow(): length must be non-negative."))


def test_torch_compile_matches_reference() -> None:
    b = load_backend("torch-compile")
    assert b.name == "torch-compile"
    case, inputs = _case(18, 4)
    ex = b.compile(case.model)  # lazy: inductor compiles at the first run
    ref = run_reference(case.model, inputs)
    _close(b.run(ex, inputs), ref)
    _close(b.run(ex, inputs), ref)  # the compiled path, now cached


def test_torch_compile_options() -> None:
    from onnxfuzz.errors import BackendError

    with pytest.raises(BackendError, match="mode must be one of"):
        load_backend("torch-compile:mode=fast")
    assert (
        load_backend("torch-compile:mode=max-autotune-no-cudagraphs").mode
        == "max-autotune-no-cudagraphs"
    )


def test_a_one_output_split_giving_a_tuple_is_a_wrong_shape_and_its_consumers_follow_it() -> None:
    """onnx2torch's Split of one output gives a tuple of 1: as the model's output it comes
    back as numpy reads it ([1, 4], a wrong shape), not unwrapped into the right answer;
    so a consumer's crash on that tuple is shown to follow Split (one root cause), where
    the unwrapped output made it a bug of each consumer (74 of 190 bundles, one campaign)."""
    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.execute.sandbox import Stage
    from onnxfuzz.reduce.precursor import find_precursor
    from onnxfuzz.reduce.reproduce import Reproducer, Target

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    split = helper.make_node("Split", ["x"], ["s"], axis=0, name="split0")
    alone = _model([split], [x], [helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])], 17)
    feeds = {"x": np.linspace(-1, 1, 4, dtype=np.float32)}
    torch_ = load_backend("torch")
    out = torch_.run(torch_.compile(alone), feeds)
    assert out["s"].shape == (1, 4), out  # the tuple, as it is
    then_exp = _model(
        [split, helper.make_node("Exp", ["s"], ["y"], name="exp0")],
        [x],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        17,
    )
    with pytest.raises(TypeError, match="must be Tensor, not tuple"):
        torch_.run(torch_.compile(then_exp), feeds)
    with BackendPool(["ort", "torch"], timeout=60) as pool:
        found = find_precursor(then_exp, feeds, Reproducer(pool, Target("torch", "ort")), Stage.RUN)
    assert found is not None and (found.op, found.kind) == ("Split", "shape"), found
    assert found.signature == "torch|mismatch|run|shape in Split output", found
