"""Corpus export and the validity gates.

Owns the resumable corpus writer (``write``), the backend-test layout on disk
(``testdata``), validation (``validate``: checker, strict shape inference, a reference run)
and the audit against the operator docs (``audit``, with ``audit_rules``, the evaluator's
known faults ``reference_limits`` and the ``node_views`` both read).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.generate.lang``,
``onnxfuzz.generate.build``.
"""
