"""``openvino``: Intel OpenVINO's ONNX frontend and CPU plugin (the ``openvino`` extra).

openvino is imported inside the methods only, so listing or loading this adapter never
fails where it is not installed: ``available()`` says so instead. Options: ``device``
(default CPU), ``precision`` (``INFERENCE_PRECISION_HINT``, default f32: CPUs with AMX or
AVX512-BF16 otherwise run f32 models in bf16, which is a documented precision trade, not a
bug), ``threads`` (``INFERENCE_NUM_THREADS``, default 1).

The CPU plugin computes integers in i32 (its documented inference precisions: f32, bf16,
f16, i32, and quantized u8/i8): an int64, uint64 or uint32 value beyond int32's range
wraps (2**40 + 3 comes back 3). A model fed one, as an input or a weight, is refused as
unsupported, as a precision it does not offer, not compared (a Slice's start or end, an
index the frontend folds, is exempt: INT64_MAX there means "to the end"); so is a
BitwiseNot of a uint32 or uint64 tensor, whose complement of any small value is beyond
int32. Other values beyond it made inside a graph (a long chain of int64 Muls) are not
foreseen: the adapter sees only what it is given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import numpy_helper

_INSTALL = "pip install -e '.[openvino]'"
_PRECISIONS = ("f32", "bf16", "f16")
# The ONNX frontend: "No conversion rule found for operations: Foo-18" (no converter for an
# op or op version); the CPU plugin: "Unsupported operation of type ...", "... is not
# supported", "Unsupported padding mode: [wrap]"; a dtype limit, DFT's "FFT op input
# element type must be f32, f16, or bf16", as TVM's adapter reads its own. A conversion
# that fails a shape check ("Model wasn't fully converted. Failed operations detailed log:
# ... Check ... failed") is a refused valid model: a real error, unless the check states a
# limit of a form ("GridSample is only supported for 4D input tensors", the CPU plugin's
# "Interpolate node ... only supports resize on spatial dimensions"), as TVM's importer
# does (the same words as its adapter's: each adapter is self-contained, as a bundle's
# repro.py embeds its source alone).
_UNSUPPORTED = re.compile(
    r"No conversion rule found|not supported|\bunsupported\b|not implemented|"
    r"doesn't support|does not support|input element type must be|"
    r"\bonly supports?\b|\bonly\b[^.\n]{0,80}?\b(?:is |are )?(?:currently )?supported\b|"
    r"\bsupported only\b",
    re.IGNORECASE,
)


@dataclass
class _Executable:
    compiled: Any
    inputs: list[tuple[str, Any]]  # graph input name, its port in the compiled model
    outputs: list[tuple[str, Any]]


def _ports(ports: Any, names: list[str], kind: str) -> list[tuple[str, Any]]:
    """Match the compiled model's ports to graph names (by tensor name, else by position:
    the ONNX frontend keeps the graph's order)."""
    ports = list(ports)
    if len(ports) != len(names):
        raise RuntimeError(
            f"openvino compiled {len(ports)} {kind}s for the graph's {len(names)}: {names}"
        )
    by_name = {n: p for p in ports for n in p.get_names()}
    return [(n, by_name.get(n, ports[i])) for i, n in enumerate(names)]


_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1
_COMPUTED_IN_I32 = (np.dtype(np.int64), np.dtype(np.uint64), np.dtype(np.uint32))
# (op type, input index) read as a clamped index, not as data
_INDEX_INPUTS = {("Slice", 1), ("Slice", 2), ("Slice", 3), ("Slice", 4)}


def _beyond_i32(name: str, a: np.ndarray) -> None:
    """Refuse, as a precision the CPU plugin does not offer, an integer value it would wrap."""
    if a.dtype in _COMPUTED_IN_I32 and a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < _I32_MIN or hi > _I32_MAX:
            raise RuntimeError(
                f"{name}: {a.dtype} values beyond the int32 range are not supported: the CPU "
                f"plugin computes integers in i32, so {hi if hi > _I32_MAX else lo} would wrap"
            )


def _no_unsigned_complement(model: onnx.ModelProto) -> None:
    """Refuse a BitwiseNot of an unsigned type wider than 16 bits: ~6 is 4294967289 in
    uint32, which i32 holds as -7 (a campaign's BitwiseNot -> Clip to 10000 came back 0)."""
    g = model.graph
    if not any(n.op_type == "BitwiseNot" for n in g.node):
        return  # (no shape inference on every compile)
    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in onnx.shape_inference.infer_shapes(model).graph.value_info
    }
    types.update({vi.name: vi.type.tensor_type.elem_type for vi in (*g.input, *g.output)})
    types.update({t.name: t.data_type for t in g.initializer})
    wide = {onnx.TensorProto.UINT32: "uint32", onnx.TensorProto.UINT64: "uint64"}
    for n in g.node:
        if n.op_type == "BitwiseNot" and types.get(n.input[0]) in wide:
            raise RuntimeError(
                f"{n.name or n.output[0]}: BitwiseNot of {wide[types[n.input[0]]]} is not "
                "supported: its complement is beyond the int32 range the CPU plugin "
                "computes integers in"
            )


def _to_ov(ov: Any, a: np.ndarray) -> Any:
    """numpy -> ov.Tensor. bfloat16 goes in as raw bits: handed an ml_dtypes array,
    openvino converts it to f16 and loses the range (1e10 -> inf)."""
    a = np.ascontiguousarray(a) if a.ndim else a.copy()
    if a.dtype == ml_dtypes.bfloat16:
        return ov.Tensor(a.view(np.uint16), ov.Shape(list(a.shape)), ov.Type.bf16)
    return ov.Tensor(a)


def _from_ov(ov: Any, t: Any) -> np.ndarray:
    """ov.Tensor -> numpy (a copy). openvino shows bf16 data as float16 *bits*."""
    if t.element_type == ov.Type.bf16:
        return np.array(t.data, copy=True).view(np.uint16).view(ml_dtypes.bfloat16)
    return np.array(t.data, copy=True)


class OpenVinoBackend:
    """OpenVINO on the CPU (or ``device=GPU``/``NPU`` where present)."""

    name = "openvino"

    def __init__(self, device: str = "CPU", precision: str = "f32", threads: str = "1") -> None:
        if precision not in _PRECISIONS:
            raise TypeError(f"precision must be one of {', '.join(_PRECISIONS)}, got {precision!r}")
        self.device = device
        self.precision = precision
        self.threads = int(threads)
        self._core: Any = None

    def _ov(self) -> Any:
        try:
            import openvino
        except ImportError as e:
            from onnxfuzz.errors import BackendError

            raise BackendError(f"openvino is not installed: {_INSTALL} ({e})") from e
        return openvino

    def _get_core(self) -> Any:
        if self._core is None:
            self._core = self._ov().Core()
        return self._core

    def available(self) -> str | None:
        try:
            import openvino  # noqa: F401
        except ImportError:
            return f"openvino is not installed: {_INSTALL}"
        devices = list(self._get_core().available_devices)
        if not any(d == self.device or d.startswith(self.device + ".") for d in devices):
            return (
                f"openvino has no {self.device} device here "
                f"(available: {', '.join(devices) or 'none'})"
            )
        return None

    def version(self) -> str:
        return str(self._ov().get_version())

    def supported_opsets(self) -> tuple[int, int]:
        # The ONNX frontend covers opsets 1..(about) 21; onnxfuzz exports 13..26, and an op
        # version it lacks comes back as a conversion failure (unsupported).
        return (7, 26)

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.device == "CPU":
            read_as_data = {
                t
                for n in model.graph.node
                for k, t in enumerate(n.input)
                if (n.op_type, k) not in _INDEX_INPUTS
            }
            for init in model.graph.initializer:
                if init.name in read_as_data:
                    _beyond_i32(init.name, numpy_helper.to_array(init))
            _no_unsigned_complement(model)
        core = self._get_core()
        data = model.SerializeToString()
        # read_model(bytes, weights): the ONNX frontend takes the serialized model itself.
        ov_model = core.read_model(data, b"")
        config = (
            {
                "INFERENCE_PRECISION_HINT": self.precision,
                "INFERENCE_NUM_THREADS": self.threads,
            }
            if self.device == "CPU"
            else {"INFERENCE_PRECISION_HINT": self.precision}
        )
        compiled = core.compile_model(ov_model, self.device, config)
        initializers = {i.name for i in model.graph.initializer}
        names = [i.name for i in model.graph.input if i.name not in initializers]
        return _Executable(
            compiled=compiled,
            inputs=_ports(compiled.inputs, names, "input"),
            outputs=_ports(compiled.outputs, [o.name for o in model.graph.output], "output"),
        )

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ov = self._ov()
        request = executable.compiled.create_infer_request()
        for name, port in executable.inputs:
            if self.device == "CPU":
                _beyond_i32(name, np.asarray(inputs[name]))
            request.set_tensor(port, _to_ov(ov, np.asarray(inputs[name])))
        request.infer()
        outs: dict[str, np.ndarray] = {}
        for name, port in executable.outputs:
            outs[name] = _from_ov(ov, request.get_tensor(port))
        return outs

    def is_unsupported(self, error: BaseException) -> bool:
        return bool(_UNSUPPORTED.search(f"{type(error).__name__}: {error}"))
