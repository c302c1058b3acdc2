import sys

from onnxfuzz.cli import main

sys.exit(main())
