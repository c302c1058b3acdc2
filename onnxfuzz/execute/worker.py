"""Entry of a sandboxed backend worker: ``python -m onnxfuzz.execute.worker FD CLOCK_FD BACKEND``
(FD: the socket to the parent; CLOCK_FD: the test clock both map, see ``sandbox._CLOCK``)."""

import mmap
import os
import sys
import threading
import time
from multiprocessing.connection import Connection

from onnxfuzz.execute.sandbox import CLOCK_BYTES, serve

ORPHAN_CHECK_S = 1.0  # how often a worker looks whether its parent is still there


def _leave_when_orphaned(parent: int) -> None:
    """A worker runs in a session of its own, so a signal to the campaign does not reach
    it; one hung in an adapter (a compile that never returns) never reads the closed
    socket either. When the parent is gone (SIGTERM, kill -9), the worker leaves."""
    while True:
        time.sleep(ORPHAN_CHECK_S)
        if os.getppid() != parent:
            os._exit(0)


if __name__ == "__main__":
    threading.Thread(target=_leave_when_orphaned, args=(os.getppid(),), daemon=True).start()
    serve(sys.argv[3], Connection(int(sys.argv[1])), mmap.mmap(int(sys.argv[2]), CLOCK_BYTES))
