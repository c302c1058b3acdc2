"""The fork server's own code (``python -m onnxfuzz.execute.fork_server FD BACKEND``): it
loads the backend, says whether it may fork (``unforkable``), then forks a fresh worker
for each request and reports each one's exit. The campaign's side, and why: ``zygote``."""

from __future__ import annotations

import contextlib
import mmap
import os
import random
import select
import signal
import socket
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from onnxfuzz.execute import crashdump
from onnxfuzz.execute.messages import Hello
from onnxfuzz.execute.sandbox import CLOCK_BYTES, load, load_error, serve_loaded


def _threads() -> int | None:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return None


def unforkable(threads_before: int | None, backend: Any = None) -> str | None:
    """Why this process, having loaded ``backend``, must not fork fresh workers (None: it
    may)."""
    if getattr(backend, "fork_safe", True) is False:
        return "its adapter says it is not (fork_safe = False)"
    if not hasattr(os, "fork") or not hasattr(os, "pidfd_open"):
        return "this system has no fork() or pidfd_open()"
    now = _threads()
    if now is None or threads_before is None:
        return "its threads cannot be counted (no /proc/self/task)"
    if now > threads_before or threading.active_count() > 1:
        return (
            f"loading it started {max(now - threads_before, 1)} thread(s), which a forked "
            "process would inherit stopped"
        )
    try:
        with open("/proc/self/maps") as f:
            if "libcuda.so" in f.read():
                return "loading it initialized CUDA, which a forked process cannot use"
    except OSError:
        return "its memory map cannot be read (no /proc/self/maps)"
    return None


def main(fd: int, text: str) -> None:
    sock = socket.socket(fileno=fd)
    out = Connection(os.dup(fd))
    before = _threads()
    armed = crashdump.arm()
    try:
        # Each child loads its own adapter; this one imports the library for all of them.
        adapter, ready = load(text)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        out.send(Hello(load_error(e), None))
        return
    crashdump.rearm(armed)
    why = unforkable(before, adapter.backend)
    del adapter
    campaign = -1
    if why is None:
        try:  # children leave when the campaign is gone
            campaign = os.pidfd_open(os.getppid())
        except OSError as e:
            why = f"this kernel gives no pidfd ({e})"
    out.send(Hello(ready, why))
    if why is not None:
        return
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    while True:
        readable = select.select([sock, wake_r], [], [])[0]
        if wake_r in readable:
            with contextlib.suppress(OSError):
                while os.read(wake_r, 512):
                    pass
            _reap(out)
        if sock in readable:
            try:
                msg, fds, _, _ = socket.recv_fds(sock, 1, 3)
            except OSError:
                return
            if not msg:  # the campaign closed it, or is gone
                return
            if len(fds) != 3:
                for f in fds:
                    os.close(f)
                out.send(("failed", f"a fork request came with {len(fds)} of 3 descriptors"))
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pid = os.fork()
            except OSError as e:
                for f in fds:
                    os.close(f)
                out.send(("failed", f"fork: {e}"))
                continue
            if pid == 0:
                _child(text, fds, campaign, armed, (sock.fileno(), out.fileno(), wake_r, wake_w))
            for f in fds:
                os.close(f)
            out.send(("forked", pid))


def _reap(out: Connection) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        out.send(("exit", pid, os.waitstatus_to_exitcode(status)))


def _child(
    text: str, fds: list[int], campaign: int, armed: Any, zygote_fds: tuple[int, ...]
) -> None:
    """A forked fresh worker: never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for f in zygote_fds:
            os.close(f)
        os.setsid()  # a session of its own, as a spawned worker: a ^C reaches none of them
        conn_fd, clock_fd, err_fd = fds
        os.dup2(err_fd, 2)
        os.close(err_fd)
        clock = mmap.mmap(clock_fd, CLOCK_BYTES)
        os.close(clock_fd)
        conn = Connection(conn_fd)
        random.seed()  # a spawned process draws its own: the zygote's state is every child's
        np.random.seed()
        threading.Thread(target=_leave_with, args=(campaign,), daemon=True).start()
        try:
            adapter, ready = load(text)
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            conn.send(load_error(e))
        else:
            conn.send(ready)
            crashdump.rearm(armed)  # an adapter's own loading may have put a handler in front
            serve_loaded(adapter, conn, clock)
        code = 0
    except BaseException:  # noqa: BLE001 - the worker's own defect: on its stderr
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _leave_with(campaign: int) -> None:
    """In a child: leave when the campaign's process is gone (its pidfd reads ready), as a
    spawned worker leaves when orphaned. Where the pidfd cannot be watched (an adapter
    closed it), when the zygote is gone (it leaves when the campaign closes its socket)."""
    zygote = os.getppid()
    try:
        select.select([campaign], [], [])
    except (OSError, ValueError):
        while os.getppid() == zygote:
            time.sleep(1.0)
    os._exit(0)


if __name__ == "__main__":
    # Through the package's module, not ``__main__``: what it pickles (``Hello``) must
    # unpickle in the campaign.
    from onnxfuzz.execute import fork_server

    fork_server.main(int(sys.argv[1]), sys.argv[2])
