"""Entry of a sandboxed backend worker: ``python -m onnxfuzz.worker FD BACKEND``."""

import sys
from multiprocessing.connection import Connection

from onnxfuzz.sandbox import serve

if __name__ == "__main__":
    serve(sys.argv[2], Connection(int(sys.argv[1])))
