"""Planted bugs on ONNX's reference evaluator, for the fork server's tests
(``onnxfuzz.execute.zygote``): unlike ``adapters.py`` (ONNX Runtime, whose import starts a
thread, so it is never forked from), these load no library that starts threads, so fresh
processes of them are forked. Loaded by path, as a user's adapter is."""

from __future__ import annotations

import ctypes
import os
import random
import threading
import time
from typing import Any

import numpy as np
import onnx


class _Reference:
    name = "reference-wrapper"

    def __init__(self, op: str = "Add", log: str = "") -> None:
        """``log``: a file each process that loads the adapter appends a line to: its
        process id, its parent's, and its first draws of Python's and numpy's global
        random generators."""
        self.op = op
        if log:
            with open(log, "a") as f:
                f.write(f"{os.getpid()} {os.getppid()} {random.random()} {np.random.random()}\n")

    def version(self) -> str:
        return onnx.__version__

    def supported_opsets(self) -> tuple[int, int]:
        return (7, 21)

    def triggered(self, model: onnx.ModelProto) -> bool:
        return any(n.op_type == self.op for n in model.graph.node)

    def compile(self, model: onnx.ModelProto) -> Any:
        from onnx.reference import ReferenceEvaluator

        return (ReferenceEvaluator(model), self.triggered(model))

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ev = executable[0]
        return dict(zip(ev.output_names, ev.run(None, inputs), strict=True))


def _wrong(outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v + v.dtype.type(0.5) if v.dtype.kind == "f" else v for k, v in outs.items()}


class Healthy(_Reference):
    name = "reference-healthy"


class Segfault(_Reference):
    """Dereferences NULL while running a model with ``op``."""

    name = "reference-segfault"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if executable[1]:
            ctypes.string_at(0)
        return super().run(executable, inputs)


class Hang(_Reference):
    """Never returns from running a model with ``op``."""

    name = "reference-hang"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if executable[1]:
            time.sleep(3600)
        return super().run(executable, inputs)


# Op types of the models this process compiled before (StaleCache's kernel cache).
_COMPILED_BEFORE: set[str] = set()


class StaleCache(_Reference):
    """A stale compile cache: a model with ``op`` and without ``other`` is wrong (every
    float output + 0.5) once this process has compiled a model with ``other``; a fresh
    process is right on every model."""

    name = "reference-stale-cache"

    def __init__(self, op: str = "Add", other: str = "Mul", log: str = "") -> None:
        super().__init__(op, log)
        self.other = other

    def compile(self, model: onnx.ModelProto) -> Any:
        ops = {n.op_type for n in model.graph.node}
        stale = self.op in ops and self.other not in ops and self.other in _COMPILED_BEFORE
        _COMPILED_BEFORE.update(ops)
        return (super().compile(model)[0], stale)

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = super().run(executable, inputs)
        return _wrong(outs) if executable[1] else outs


class Threads(_Reference):
    """Starts a thread as it loads (as OpenVINO's task pool does): not to be forked."""

    name = "reference-threads"

    def __init__(self, op: str = "Add", log: str = "") -> None:
        super().__init__(op, log)
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()


class NotForkSafe(_Reference):
    """Says a forked process must not share what it loaded (an open device, say)."""

    name = "reference-not-fork-safe"
    fork_safe = False


class Refuses(_Reference):
    """Cannot load: its library is missing."""

    name = "reference-refuses"

    def __init__(self, op: str = "Add") -> None:
        raise ImportError("libnpu.so: cannot open shared object file")
