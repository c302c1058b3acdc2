"""``onnx-reference``: onnx.reference.ReferenceEvaluator, the spec's executable form.

A tie-breaker rather than ground truth: it has known wrong kernels (LRN onnx #7805, Loop
#5750, NonMaxSuppression defaults #6354, Reduce with noop_with_empty_axes #7394)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx


class ReferenceBackend:
    name = "onnx-reference"

    def version(self) -> str:
        return onnx.__version__

    def supported_opsets(self) -> tuple[int, int]:
        return (7, onnx.defs.onnx_opset_version())

    def compile(self, model: onnx.ModelProto) -> Any:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model)

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = list(executable.output_names)
        return dict(zip(names, executable.run(None, inputs), strict=True))
