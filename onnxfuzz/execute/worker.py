"""Entry of a sandboxed backend worker: ``python -m onnxfuzz.execute.worker FD STAGE_FD BACKEND``
(FD: the socket to the parent; STAGE_FD: a one-byte file both map, see ``serve``)."""

import mmap
import sys
from multiprocessing.connection import Connection

from onnxfuzz.execute.sandbox import serve

if __name__ == "__main__":
    serve(sys.argv[3], Connection(int(sys.argv[1])), mmap.mmap(int(sys.argv[2]), 1))
