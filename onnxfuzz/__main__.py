import sys

from onnxfuzz.cli.main import main

sys.exit(main())
