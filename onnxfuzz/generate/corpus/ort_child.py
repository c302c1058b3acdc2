"""The corpus's ONNX Runtime runs, in a child process a crash cannot take the corpus with.

    python -m onnxfuzz.generate.corpus.ort_child FD     (FD: the socket to the parent)

For each case the child runs the model twice on the case's inputs:

1. the reference run (``validate.ort_session``: graph optimizations off, one thread), whose
   outputs become the case's expected ones, sent back at once;
2. the session a user gets by default (``onnxruntime.SessionOptions()``: graph optimizations
   at ORT_ENABLE_ALL; one thread, as the reference run, to keep a corpus cheap), whose
   outcome only says whether ONNX Runtime's default session fails the valid model.

Why the second run: the expected outputs come from an unoptimized session, so a model on
which ONNX Runtime's optimizers crash (an audit found a segfault, rc 139, and four errors
in 1,800 cases) looked like any other case, and a user's runner built on ORT's default
session died there with no word that the fault was ORT's. Why a child: such a crash killed
the process it ran in, and in-process a crash of the reference run itself would end the
corpus at that case on every rerun. A dead child is started again for the next case; its
start (about a second) is paid once per corpus, each case costs one more session.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

# seconds one run may take before the child is killed (generated models run in
# milliseconds; a hang is ORT's fault, reported like a crash)
RUN_TIMEOUT_S = 120.0
DEFAULT_SESSION = "ONNX Runtime's default session (graph optimizations ORT_ENABLE_ALL)"


@dataclass
class OrtRun:
    """What the child said of one case. ``outputs`` None: the reference run failed,
    ``error`` says how. ``default_fault``: how ONNX Runtime's default session failed the
    model (None: it ran it; also None where the reference run failed, as it was not tried)."""

    outputs: dict[str, np.ndarray] | None = None
    error: str | None = None
    default_fault: str | None = None


class OrtChild:
    """One child process at a time, started on first use and after a crash. Use as a
    context manager (or call ``close``) so the child leaves with the corpus."""

    def __init__(self, timeout: float = RUN_TIMEOUT_S) -> None:
        self.timeout = timeout
        self._proc: Any = None
        self._conn: Connection | None = None
        self.starts = 0

    def __enter__(self) -> OrtChild:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Ask the child to leave (``None``), then make sure."""
        if self._proc is not None and self._proc.poll() is None and self._conn is not None:
            try:
                self._conn.send(None)
                self._proc.wait(2)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._proc.wait(5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def _connection(self) -> Connection:
        if self._conn is None or self._proc is None or self._proc.poll() is not None:
            self._kill()
            # Its own module (``python -m``, never a fork of the corpus's process), in a
            # session of its own; its stderr dropped: ORT's and a dying process's words would
            # break the progress line, and what failed is said in the case's index entry.
            ours, theirs = socket.socketpair()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            theirs.close()
            self._conn = Connection(ours.detach())
            self.starts += 1
        return self._conn

    def _answer(self, conn: Connection) -> tuple[str, Any] | str:
        """The child's next message, or why none came (it died, or ran past the timeout:
        then it is killed, and the next case starts a new one)."""
        try:
            if conn.poll(self.timeout):
                return conn.recv()  # type: ignore[no-any-return]
            why = f"no answer in {self.timeout:g} s"
        except (EOFError, OSError):
            why = ""
        proc = self._proc
        self._kill()
        return why or _death(proc.returncode if proc is not None else None)

    def run(self, model: bytes, inputs: dict[str, np.ndarray]) -> OrtRun:
        try:
            conn = self._connection()
            conn.send((model, inputs))
        except OSError:  # the child went away between cases: once more, in a fresh one
            self.close()
            conn = self._connection()
            conn.send((model, inputs))
        first = self._answer(conn)
        if isinstance(first, str):
            return OrtRun(error=f"ONNX Runtime died with graph optimizations off: {first}")
        kind, value = first
        if kind == "error":
            return OrtRun(error=value)
        second = self._answer(conn)
        if isinstance(second, str):
            return OrtRun(outputs=value, default_fault=f"{DEFAULT_SESSION} died: {second}")
        return OrtRun(outputs=value, default_fault=second[1])


def _death(code: int | None) -> str:
    if code is None:
        return "it vanished"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def _run_default(model: bytes, inputs: dict[str, np.ndarray]) -> None:
    import onnxruntime as ort

    opts = ort.SessionOptions()  # the default level: ORT_ENABLE_ALL
    opts.log_severity_level = 4
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    sess.run(None, inputs)


def serve(conn: Connection) -> None:
    """Answer (model bytes, inputs) with ("outputs", reference outputs) or ("error",
    message), then, after the former, ("default", None or how the default session failed)."""
    from onnxfuzz.generate.corpus.validate import ort_session

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        model, inputs = msg
        try:
            sess = ort_session(model)
            names = [o.name for o in sess.get_outputs()]
            outs = dict(zip(names, sess.run(names, inputs), strict=True))
        except Exception as e:  # noqa: BLE001 - ORT raises its own exception types
            conn.send(("error", str(e)))
            continue
        conn.send(("outputs", outs))
        try:
            _run_default(model, inputs)
            fault = None
        except Exception as e:  # noqa: BLE001
            first = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            fault = f"{DEFAULT_SESSION} fails: {first}"
        conn.send(("default", fault))


def _leave_when_orphaned(parent: int) -> None:
    """The child runs in a session of its own (``spawn``): when the corpus's process is
    gone (a kill), it leaves instead of waiting on a socket no one reads."""
    import time

    while True:
        time.sleep(1.0)
        if os.getppid() != parent:
            os._exit(0)


if __name__ == "__main__":
    threading.Thread(target=_leave_when_orphaned, args=(os.getppid(),), daemon=True).start()
    serve(Connection(int(sys.argv[1])))
