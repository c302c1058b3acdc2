"""Reduction: every finding shrunk to its trigger.

``choice_passes`` shrinks a generated model's recorded choice stream (the backtrack-free
solver turns any choice list into a valid model); ``graph_passes`` reduces any ONNX model
by graph surgery; ``passes`` drives a list of passes to a fixed point; ``reproduce`` decides
whether a candidate still shows *the same* failure; ``reducer`` puts them together.

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.generate``,
``onnxfuzz.execute``, ``onnxfuzz.judge``. Nothing here stores or drives a campaign.

Entry points: ``reducer.reduce_case`` (a generated case) and ``reducer.reduce_model``
(any model), each with a ``reproduce.Reproducer``.
"""
