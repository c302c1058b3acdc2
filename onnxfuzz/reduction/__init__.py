"""Reduction: every finding shrunk to its trigger.

``choices`` shrinks a generated model's recorded choice stream (the backtrack-free solver
turns any choice list into a valid model); ``graph`` reduces any ONNX model by graph
surgery; ``passes`` drives a list of passes to a fixed point; ``reproduce`` decides whether
a candidate still shows *the same* failure.
"""
