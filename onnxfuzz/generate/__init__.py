"""Generation: from a seed to a valid ONNX model and its inputs, split by job.

- ``lang``: the spec language (what a spec states and how values are bounded);
- ``build``: graph building (the solver, glue, blocks, guidance, mutation, export);
- ``corpus``: corpus export and the validity gates (backend-test layout, validation, audit);
- ``measure``: what is measured over generated models (diversity, coverage, completeness).

Each subpackage imports only those listed before it (``tests/unit/test_architecture.py``).
May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.specs``. Nothing here runs
a backend in a worker, judges or stores; this ``__init__`` imports nothing.

Entry point: ``build.generator.Generator(lang.config.Config(...)).generate(seed) -> Case``.
"""
