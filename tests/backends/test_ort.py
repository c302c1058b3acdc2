"""The ONNX Runtime adapters (CPU at every optimization level; CUDA where a GPU is) and the
ONNX reference evaluator adapter, against real libraries."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from onnxfuzz.backend import is_unsupported, load_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import run_reference
from onnxfuzz.generate.lang.config import Config

OPS = frozenset({"Relu", "Add", "Mul", "Sigmoid", "Conv", "MatMul", "Softmax", "Transpose"})


def _cases(n: int = 6):
    gen = Generator(Config(min_nodes=3, max_nodes=8, ops=OPS, dtypes=frozenset({1})))
    for seed in range(n):
        case = gen.generate(seed)
        yield case, case.make_inputs(seed)


@pytest.mark.parametrize(
    "spec", ["ort", "ort:opt=none", "ort:opt=basic", "ort:opt=extended", "onnx-reference"]
)
def test_adapter_matches_unoptimized_ort(spec: str) -> None:
    """Each adapter against an implementation it does not share: ONNX Runtime's against the
    ONNX reference evaluator, the reference evaluator's against ONNX Runtime (unoptimized);
    and ``opt`` really sets ORT's optimization level (none: no transformer modifies the
    model; all: some do, on these Conv/MatMul/Softmax models)."""
    backend = load_backend(spec)
    lo, hi = backend.supported_opsets()
    assert lo <= 21 <= hi
    fired: list[str] = []
    for case, inputs in _cases():
        exe = backend.compile(case.model)
        got = backend.run(exe, inputs)
        if spec == "onnx-reference":
            want = run_reference(case.model, inputs)
        else:
            names = [o.name for o in case.model.graph.output]
            want = dict(zip(names, ReferenceEvaluator(case.model).run(None, inputs), strict=True))
            fired += backend.optimizations(exe)["transformer"]
        assert set(got) == set(want)
        for name, w in want.items():
            np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-5)
    if spec == "ort:opt=none":
        assert fired == []
    elif spec == "ort":
        assert fired


def _relu(elem_type: int, ir_version: int) -> onnx.ModelProto:
    """y = Relu(x) on a [2] tensor, at opset 21."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", elem_type, [2])],
        [helper.make_tensor_value_info("y", elem_type, [2])],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=ir_version)


def test_ort_missing_kernel_is_unsupported() -> None:
    backend = load_backend("ort")
    # Relu allows int16 in the schema; ONNX Runtime's CPU provider has no such kernel.
    model = _relu(TensorProto.INT16, ir_version=10)
    with pytest.raises(Exception) as e:
        backend.compile(model)
    assert is_unsupported(backend, e.value)


def test_a_kernel_the_optimizer_needs_and_lacks_is_a_crash_not_unsupported() -> None:
    """ORT's QDQ propagation moves a DequantizeLinear of int32 past an Unsqueeze, adding a
    QuantizeLinear to int32 that no CPU kernel takes: "NOT_IMPLEMENTED ... QuantizeLinear"
    at session creation. The model, optimizations off, loads and runs: the missing kernel
    is the optimizer's doing, a bug, which was counted "unsupported" and never filed."""
    scale = helper.make_tensor("scale", TensorProto.FLOAT16, [], [np.float16(0.0125)])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    g = helper.make_graph(
        [
            helper.make_node("DequantizeLinear", ["x", "scale"], ["d"]),
            helper.make_node("Unsqueeze", ["d", "axes"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT32, [6, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [1, 6, 1])],
        [scale, axes],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = {"x": np.arange(6, dtype=np.int32).reshape(6, 1)}
    plain = load_backend("ort:opt=none")
    assert plain.run(plain.compile(model), x)["y"].shape == (1, 6, 1)
    backend = load_backend("ort")
    with pytest.raises(Exception, match="NOT_IMPLEMENTED") as e:
        backend.compile(model)
    assert not is_unsupported(backend, e.value)
    # a kernel missing with optimizations off too stays unsupported (Relu of int16)
    with pytest.raises(Exception) as e:
        backend.compile(_relu(TensorProto.INT16, ir_version=10))
    assert is_unsupported(backend, e.value)
    # At run time, ORT's words name the node type it ran: one the model does not hold is
    # a fused node (the audit's MatMulIntegerToFloat with per-channel scales, "not
    # supported yet"), the optimizer's; one it holds is the model's own.
    backend.compile(_relu(TensorProto.FLOAT, ir_version=10))
    said = "Non-zero status code returned while running {} node. Name:'n' Status Message: "
    fused = RuntimeError(said.format("MatMulIntegerToFloat") + "Per-Channel is not supported yet")
    own = RuntimeError(said.format("Relu") + "this type is not supported")
    assert not is_unsupported(backend, fused) and is_unsupported(backend, own)


def test_a_newer_ir_version_than_ort_loads_is_unsupported_not_a_crash() -> None:
    """onnx 1.23 writes IR 14 by default; ONNX Runtime 1.31 loads IR <= 13 and says so.
    A user's model at IR 14 is a limit ORT states (verdict unsupported), not a crash to
    reduce and file; the same model at IR 10 runs."""
    backend = load_backend("ort")
    model = _relu(TensorProto.FLOAT, ir_version=14)
    with pytest.raises(Exception, match="IR version") as e:
        backend.compile(model)
    assert is_unsupported(backend, e.value)
    model.ir_version = 10
    out = backend.run(backend.compile(model), {"x": np.array([-1.0, 2.0], np.float32)})
    assert out["y"].tolist() == [0.0, 2.0]


def test_bad_option_value_names_the_choices() -> None:
    with pytest.raises(BackendError, match="opt must be one of none, basic"):
        load_backend("ort:opt=sideways")


def test_ort_cuda_where_a_gpu_is() -> None:
    backend = load_backend("ort-cuda")
    why = backend.available()
    if why:
        pytest.skip(f"ort-cuda: {why}")
    for case, inputs in _cases(3):
        got = backend.run(backend.compile(case.model), inputs)
        want = run_reference(case.model, inputs)
        for name, w in want.items():
            np.testing.assert_allclose(got[name], w, rtol=1e-2, atol=1e-3)
