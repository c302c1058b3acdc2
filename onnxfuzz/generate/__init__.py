"""Generation: from a seed to a valid ONNX model and its inputs.

Owns the spec language (what a spec may call: ``spec_api``; registration: ``spec``; the
builders that implement it: ``builder``; ``domains``, ``spec_domains``, ``shapes``), the
options and the opset range (``config``), the backtrack-free solver (``generator`` over one
recorded ``choices`` stream, connecting ops with ``glue``, drawing real-model ``blocks``;
``mutate`` edits a case's choices; ``guide`` makes a case from a seed and a guide's
decision; ``seeds`` lifts user models into blocks),
value domains (``intervals``, ``values``), the in-memory graph
and its export (``graph``, ``export``), validation (``validate``), and what is built on
generation alone: corpus export (``corpus``), the coverage table (``coverage``), the
spec-completeness check (``completeness``), diversity metrics over any models
(``metrics``), and inferred rules of other domains: loaded as specs (``inferred``), synthesized
from labelled records (``synth``, z3 offline), compared with hand specs (``rule_check``).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.specs``. Nothing here runs
a backend in a worker, judges or stores.

Entry point: ``Generator(Config(...)).generate(seed) -> Case``.
"""
