"""A user adapter of a vendor's library (``npu_lib``, beside this file) that gives its
plain reproducer in the library's own API (``plain_reproducer``, docs/adapters.md)."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # npu_lib, as if installed
import npu_lib  # noqa: E402


class Npu:
    name = "npu"
    plain_reproducer = """
        import npu_lib

        def compile_model(path, options):
            return npu_lib.load(str(path))

        def run_model(compiled, inputs):
            return compiled.execute(inputs)
    """

    def version(self) -> str:
        return npu_lib.__version__

    def supported_opsets(self) -> tuple[int, int]:
        return (7, 26)

    def compile(self, model: onnx.ModelProto) -> Any:
        return npu_lib.load(model.SerializeToString())

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(zip(executable.output_names, executable.execute(inputs), strict=True))


class NpuHookNotLiteral(Npu):
    plain_reproducer = "import npu_lib\n" + "def compile_model(path, options): ..."


class NpuHookMissingRun(Npu):
    plain_reproducer = """
        def compile_model(path, options):
            return None
    """
