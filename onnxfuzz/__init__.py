"""onnxfuzz: valid random ONNX models, differential testing of ONNX compilers."""

__version__ = "0.1.0"
