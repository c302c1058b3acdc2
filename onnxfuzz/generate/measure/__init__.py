"""Measurement over generated models: diversity metrics (``metrics``), the coverage table
(``coverage``) and the spec-completeness check (``completeness``).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.generate.lang``,
``onnxfuzz.generate.build``.
"""
