"""Adapters for the optimization-feedback tests: a hook that raises, no hook at all, and
ONNX Runtime with a planted optimizer bug. Loaded by path, as a user's adapter would be."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort

from onnxfuzz.backends.ort import OrtBackend


class _Plain:
    name = "plain"

    def version(self) -> str:
        return ort.__version__

    def supported_opsets(self) -> tuple[int, int]:
        return (7, 26)

    def compile(self, model: Any) -> Any:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.intra_op_num_threads = 1
        return ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in executable.get_outputs()]
        return dict(zip(names, executable.run(names, inputs), strict=True))


class NoFeedback(_Plain):
    """ONNX Runtime without an ``optimizations`` hook."""

    name = "no-feedback"


class RaisingFeedback(_Plain):
    """ONNX Runtime whose ``optimizations`` hook always raises."""

    name = "raising-feedback"

    def optimizations(self, executable: Any) -> dict[str, list[str]] | None:
        raise RuntimeError("feedback exploded")


class _Shifted:
    """A session whose float outputs come out 1 too large (a planted optimizer bug)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def get_outputs(self) -> Any:
        return self.session.get_outputs()

    def run(self, names: list[str], inputs: dict[str, np.ndarray], options: Any = None) -> Any:
        outs = self.session.run(names, inputs, options)
        return [o + 1 if o.dtype.kind == "f" else o for o in outs]


class BrokenFusion(OrtBackend):
    """ONNX Runtime as if ``victim`` (a transformer or rule) computed wrong values: every
    session made with it enabled shifts the float outputs by 1."""

    name = "broken-fusion"

    def __init__(self, victim: str = "FuseReluClip", isolate: str = "1") -> None:
        super().__init__(isolate=isolate)
        self.victim = victim

    def _session(self, data: bytes, disabled: tuple[str, ...]) -> Any:
        session = super()._session(data, disabled)
        return session if self.victim in disabled else _Shifted(session)
