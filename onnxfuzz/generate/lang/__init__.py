"""The spec language: what a spec may call and the facts it states.

Owns the options record and the opset range (``config``), the recorded choice stream
(``choices``), domains (``domains``, ``spec_domains``: axes, pads, per-axis lists), shape
helpers (``shapes``), value intervals and input values (``intervals``, ``values``), the
in-memory graph a spec sees (``graph``), the builder protocol specs are written against
(``spec_api.SpecBuilder``), registration and op facts (``spec``: ``@op``, ``OpInfo``, the
spec sources of other domains) and an op's forms (``features``).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``. Nothing here draws a graph.
"""
