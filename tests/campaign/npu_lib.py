"""A stand-in for a vendor's runtime library (an accelerator's Python API), with a planted
bug: a model with a float32 Add gives every float32 output + 0.5, unless the environment
sets ``NPU_LIB_FIXED`` (the vendor's fix). Everything else runs on ONNX Runtime's CPU.
A user adapter wraps it (``npu_adapter.py``), and its plain reproducer calls it directly."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort

__version__ = "0.3.1"


class Program:
    """A loaded model: ``execute`` gives its outputs, a list in the model's order."""

    def __init__(self, model: bytes) -> None:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.intra_op_num_threads = 1
        self.session = ort.InferenceSession(model, options, ["CPUExecutionProvider"])
        self.output_names = [o.name for o in self.session.get_outputs()]
        proto = onnx.load_from_string(model)
        self.buggy = any(n.op_type == "Add" for n in proto.graph.node)

    def execute(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        outs = self.session.run(None, inputs)
        if not self.buggy or os.environ.get("NPU_LIB_FIXED"):
            return outs
        return [o + np.float32(0.5) if o.dtype == np.float32 else o for o in outs]


def load(model: str | bytes) -> Program:
    """A model file's path, or its bytes."""
    if isinstance(model, str):
        with open(model, "rb") as f:
            model = f.read()
    return Program(model)
