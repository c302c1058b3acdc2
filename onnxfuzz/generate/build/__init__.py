"""Graph building: the backtrack-free solver that turns a seed into a model.

Owns the builders that run a spec (``builder``: drawing and checking), the generator loop
(``generator``), glue that adapts a node's output to an input (``glue``), real-model
patterns (``blocks``), subgraph bodies (``control``), sequences and optionals
(``sequences``), a guide's decision (``guide``), mutation of a case's choices
(``mutate``), user models lifted into blocks (``seeds``), single-op models (``single_op``)
and graph -> ModelProto (``export``).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.generate.lang``.
"""
