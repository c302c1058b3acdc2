"""A fork server of fresh backend processes (a *zygote*, as Android calls its own).

Confirmation, the search for what a stale cache needs, and every worker started again
after a crash want a process of the backend that has run nothing. Spawning one imports the
backend's library again: about 4 s for TVM or torch, while the model it then runs takes a
second. A zygote is spawned once per backend (``python -m onnxfuzz.execute.fork_server FD
BACKEND``), imports the library by loading the adapter, and forks a child for each fresh
process asked of it. The child loads its *own* adapter (cheap now: the library is
imported), so nothing an adapter holds is shared between processes (a coin drawn from
the OS's entropy, a counter of runs), and serves tests exactly as a spawned worker does
(``sandbox.serve_loaded``), over a socket, a test clock and a stderr file its parent
made. It has run nothing: the zygote never compiles or runs a model.

The zygote is its children's parent, so it reports their exit statuses (a signal's number,
an exit code) to the campaign, which kills them through a pidfd (no pid reuse). A child
leaves when the campaign's process is gone; the zygote leaves when its socket closes.

Forking is refused, and the caller spawns processes as before, where the adapter's
library started threads while loading (a forked child would inherit them stopped, holding
their locks: ONNX Runtime's import starts one, OpenVINO a task pool) or initialized CUDA
(unusable after a fork), where the adapter says so (a class attribute ``fork_safe =
False``), or where ``ONNXFUZZ_FORK=0`` is set. A spawned worker is what ``sandbox`` has
always started: "never forked" holds for every process that touched a GPU.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection

from onnxfuzz.errors import BackendError
from onnxfuzz.execute import crashdump
from onnxfuzz.execute.messages import LoadError

MODULE = "onnxfuzz.execute.fork_server"  # the zygote's own code
FORK_TIMEOUT = 30.0  # seconds to wait for the zygote to answer a fork


class ForkedProcess:
    """What a ``sandbox.Worker`` uses of ``subprocess.Popen`` (``pid``, ``poll``, ``wait``,
    ``kill``, ``returncode``), for a process a zygote forked. ``lost``: it exited after its
    zygote died, so its exit status is unknown (``returncode`` is then 0)."""

    def __init__(self, pid: int, zygote: Zygote) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.lost = False
        self._zygote = zygote
        try:  # a handle on this very process: its pid may be reused once it is reaped
            self._pidfd: int | None = os.pidfd_open(pid)
        except (OSError, AttributeError):
            self._pidfd = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._settle(self._zygote.exit_code(self.pid, self._pidfd, 0.0))
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._settle(self._zygote.exit_code(self.pid, self._pidfd, timeout))
            if self.returncode is None:
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout or 0.0)
        return self.returncode

    def kill(self) -> None:
        if self.poll() is not None:
            return
        with contextlib.suppress(OSError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)

    def _settle(self, code: int | None | Lost) -> None:
        if code is None:
            return
        if isinstance(code, Lost):
            self.returncode, self.lost = 0, True
        else:
            self.returncode = code
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def __del__(self) -> None:
        if getattr(self, "_pidfd", None) is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)  # type: ignore[arg-type]


class Lost:
    """An exit whose status no one can tell (the zygote that reaped it is gone)."""


class Zygote:
    """The campaign's side of one backend's fork server."""

    def __init__(self, text: str, startup_timeout: float = 300.0) -> None:
        self.text = text
        self.startup_timeout = startup_timeout
        self.unforkable: str | None = None
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._replies: queue.Queue[tuple] = queue.Queue()
        self._codes: dict[int, int] = {}
        self._cond = threading.Condition()
        self._gone = False
        self._fork_lock = threading.Lock()

    def start(self) -> None:
        """Spawn the zygote and wait for it to load the backend. Raises ``BackendError``
        when it cannot (the message a spawned worker would give)."""
        ours, theirs = socket.socketpair()
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the zygote
        self._proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, str(theirs.fileno()), self.text],
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            start_new_session=True,
        )
        theirs.close()
        self._sock = ours
        conn = Connection(os.dup(ours.fileno()))
        if not conn.poll(self.startup_timeout):
            conn.close()
            raise BackendError(
                f"backend {self.text}: fork server did not start within "
                f"{self.startup_timeout:.0f} s"
            )
        try:
            hello = conn.recv()
        except EOFError:
            conn.close()
            self._proc.wait(5)
            raise BackendError(
                f"backend {self.text}: fork server died while loading "
                f"(status {self._proc.returncode}): "
                f"{crashdump.evidence(crashdump.file_tail(self._stderr, crashdump.DUMP_BYTES))}"
            ) from None
        if isinstance(hello.loaded, LoadError):
            conn.close()
            raise BackendError(hello.loaded.message)
        self.unforkable = hello.unforkable
        if self.unforkable is not None:
            conn.close()
            return
        threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    @property
    def usable(self) -> bool:
        return self.unforkable is None and self._sock is not None and not self._gone

    def fork(self, fds: tuple[int, int, int]) -> ForkedProcess:
        """A fresh process of the backend, serving over the socket ``fds[0]``, marking the
        test clock mapped from ``fds[1]``, writing its stderr to ``fds[2]``. Raises
        ``OSError`` when the zygote cannot fork one (the caller spawns one instead)."""
        if not self.usable:
            raise OSError(f"fork server of {self.text} is not running")
        assert self._sock is not None
        with self._fork_lock:
            socket.send_fds(self._sock, [b"F"], list(fds))
            try:
                reply = self._replies.get(timeout=FORK_TIMEOUT)
            except queue.Empty:
                raise OSError(f"fork server of {self.text} did not answer") from None
        if reply[0] != "forked":
            raise OSError(f"fork server of {self.text}: {reply[1]}")
        return ForkedProcess(reply[1], self)

    def exit_code(self, pid: int, pidfd: int | None, timeout: float | None) -> int | Lost | None:
        """``pid``'s exit code as its zygote reported it (a negative signal number, as
        ``Popen.returncode``), waiting up to ``timeout`` seconds (None: no limit); None if it
        has not exited; ``Lost`` if it exited after the zygote died."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while pid not in self._codes:
                if self._gone and (pidfd is None or _exited(pidfd)):
                    return Lost()
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                # after the zygote's death no report comes: look at the pidfd now and then
                self._cond.wait(0.05 if self._gone else left)
            return self._codes.pop(pid)

    def close(self) -> None:
        """End the zygote (its children go on until their own workers close them)."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)

    def _read(self, conn: Connection) -> None:
        """The zygote's reports: fork answers (to ``fork``), exit statuses (to
        ``exit_code``)."""
        try:
            while True:
                msg = conn.recv()
                if msg[0] == "exit":
                    with self._cond:
                        self._codes[msg[1]] = msg[2]
                        self._cond.notify_all()
                else:
                    self._replies.put(msg)
        except (EOFError, OSError, pickle.UnpicklingError):
            pass
        finally:
            conn.close()
            with self._cond:
                self._gone = True
                self._cond.notify_all()
            self._replies.put(("failed", "it has died"))


def _exited(pidfd: int) -> bool:
    """Has the process of ``pidfd`` exited (its pidfd reads ready)?"""
    try:
        return bool(select.select([pidfd], [], [], 0)[0])
    except (OSError, ValueError):
        return True
