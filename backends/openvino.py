"""``openvino``: Intel OpenVINO's ONNX frontend and CPU plugin (the ``openvino`` extra).

openvino is imported inside the methods only, so listing or loading this adapter never
fails where it is not installed: ``available()`` says so instead. Options: ``device``
(default CPU), ``precision`` (``INFERENCE_PRECISION_HINT``, default f32: CPUs with AMX or
AVX512-BF16 otherwise run f32 models in bf16, which is a documented precision trade, not a
bug), ``threads`` (``INFERENCE_NUM_THREADS``, default 1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import onnx

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
            request.set_tensor(port, _to_ov(ov, np.asarray(inputs[name])))
        request.infer()
        outs: dict[str, np.ndarray] = {}
        for name, port in executable.outputs:
            outs[name] = _from_ov(ov, request.get_tensor(port))
        return outs

    def is_unsupported(self, error: BaseException) -> bool:
        return bool(_UNSUPPORTED.search(f"{type(error).__name__}: {error}"))
