"""Entry of a sandboxed backend worker: ``python -m onnxfuzz.execute.worker FD CLOCK_FD BACKEND``
(FD: the socket to the parent; CLOCK_FD: the test clock both map, see ``sandbox._CLOCK``)."""

import mmap
import sys
from multiprocessing.connection import Connection

from onnxfuzz.execute.sandbox import CLOCK_BYTES, serve

if __name__ == "__main__":
    serve(sys.argv[3], Connection(int(sys.argv[1])), mmap.mmap(int(sys.argv[2]), CLOCK_BYTES))
