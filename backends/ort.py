"""ONNX Runtime adapters: CPU (``ort``, with the graph optimization level as an option, so
optimized vs unoptimized ORT is itself a differential pair) and CUDA (``ort-cuda``)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx

_LEVELS = ("none", "basic", "extended", "layout", "all")
_UNSUPPORTED = re.compile(
    r"NOT_IMPLEMENTED|Could not find an implementation|not supported", re.IGNORECASE
)


class OrtBackend:
    """ONNX Runtime on the CPU. Options: ``opt`` = none|basic|extended|layout|all
    (graph optimization level, default all), ``threads`` (intra-op, default 1)."""

    name = "ort"
    provider = "CPUExecutionProvider"

    def __init__(self, opt: str = "all", threads: str = "1") -> None:
        if opt not in _LEVELS:
            raise TypeError(f"opt must be one of {', '.join(_LEVELS)}, got {opt!r}")
        self.opt = opt
        self.threads = int(threads)
        self._opts: Any = None  # SessionOptions, made once

    def available(self) -> str | None:
        import onnxruntime as ort

        if self.provider not in ort.get_available_providers():
            return f"onnxruntime {ort.__version__} has no {self.provider}"
        return None

    def version(self) -> str:
        import onnxruntime as ort

        return ort.__version__

    def supported_opsets(self) -> tuple[int, int]:
        return (7, 26)  # ONNX Runtime 1.31

    def _options(self) -> Any:
        import onnxruntime as ort

        levels = {
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "layout": getattr(
                ort.GraphOptimizationLevel,
                "ORT_ENABLE_LAYOUT",
                ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            ),
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        opts = ort.SessionOptions()
        opts.graph_optimization_level = levels[self.opt]
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 4
        return opts

    def compile(self, model: onnx.ModelProto) -> Any:
        return self.compile_bytes(model.SerializeToString())

    def compile_bytes(self, data: bytes) -> Any:
        """``compile`` of a serialized model (the sandbox's fast path: no parse)."""
        import onnxruntime as ort

        if self._opts is None:
            self._opts = self._options()
        return ort.InferenceSession(data, self._opts, providers=self._providers())

    def _providers(self) -> list[Any]:
        return [self.provider]

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in executable.get_outputs()]
        return dict(zip(names, executable.run(names, inputs), strict=True))

    def is_unsupported(self, error: BaseException) -> bool:
        return bool(_UNSUPPORTED.search(str(error)))


class OrtCudaBackend(OrtBackend):
    """ONNX Runtime with the CUDA execution provider (needs the ``cuda`` extra, which puts
    onnxruntime-gpu in place of onnxruntime, and a GPU)."""

    name = "ort-cuda"
    provider = "CUDAExecutionProvider"

    def __init__(self, opt: str = "all", threads: str = "1", tf32: str = "0") -> None:
        """``tf32``: 0 (default) computes float32 MatMul, Gemm and Conv in float32. ORT's
        CUDA provider uses TF32 (10-bit mantissa) on Ampere and later by default, which put
        a 1-node Gemm 1.4 % off ORT-CPU on an H100: a precision mode, not a bug, like
        OpenVINO's bfloat16 on AMX CPUs. 1: TF32, as ORT does by default."""
        super().__init__(opt, threads)
        if tf32 not in ("0", "1"):
            raise TypeError(f"tf32 must be one of 0, 1, got {tf32!r}")
        self.tf32 = tf32

    def _providers(self) -> list[Any]:
        return [(self.provider, {"use_tf32": self.tf32})]

    def available(self) -> str | None:
        why = super().available()
        if why:
            return why
        # "Available" only says the build has the provider: when its CUDA or cuDNN libraries
        # do not load, a session silently runs on the CPU, and a campaign would compare
        # ORT-CPU with itself under the name ort-cuda. Start one and ask what it got.
        import onnxruntime as ort
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "probe",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
        model.ir_version = 8
        try:
            got = ort.InferenceSession(
                model.SerializeToString(), self._options(), providers=self._providers()
            ).get_providers()
        except Exception as e:  # noqa: BLE001 - any failure means: not usable here
            return f"onnxruntime could not start a {self.provider} session: {e}"
        if self.provider not in got:
            return (
                f"onnxruntime fell back to {', '.join(got)}: its {self.provider} did not "
                "load (are the CUDA and cuDNN libraries it was built for on the library path?)"
            )
        return None
