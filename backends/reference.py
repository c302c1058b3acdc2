"""``onnx-reference``: onnx.reference.ReferenceEvaluator, the spec's executable form.

A tie-breaker rather than ground truth: it has known wrong kernels (LRN onnx #7805, Loop
#5750, NonMaxSuppression defaults #6354, Reduce with noop_with_empty_axes #7394). A node
that fails inside an If, Loop or Scan body fails with its own error, not the evaluator's
wrapper naming the control-flow op."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx

# The evaluator wraps the error of a node inside a body in one naming the control-flow op.
_BODY_WRAPPER = re.compile(r"\(operator '(If|Loop|Scan|SequenceMap)'\)\.?$")


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
        try:
            outs = executable.run(None, inputs)
        except Exception as e:
            inner = _node_error(e)
            if inner is e:
                raise
            raise inner from None
        return dict(zip(names, outs, strict=True))


def _node_error(e: BaseException) -> BaseException:
    """The error of the node that failed, wherever it sits: a node in an If branch fails
    as it does at the top level (one bug, one signature), and the message names it, not
    the If."""
    while e.__cause__ is not None and _BODY_WRAPPER.search(str(e)):
        e = e.__cause__
    return e
