"""Storage: what a campaign keeps and shows.

Owns the campaign database (``db``: tests, per-backend results, bugs, options; one
transaction per test), bug bundles on disk (``bundle``: model, inputs, outputs, meta.json,
log.txt, a standalone repro.py; ``plain_repro``: repro_plain.py in the backend's own
API; ``readable``/``upstream``: issue.md's model text, wording and known upstream issues)
and reports for people (``report``: bug rows, tables, the
end-of-campaign summary; ``html_report``: the campaign as one HTML page, from
``report_data``'s aggregates, drawn with ``svg`` and ``model_graph``).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.backend``,
``onnxfuzz.generate``, ``onnxfuzz.execute``, ``onnxfuzz.judge``, ``onnxfuzz.reduce``.
Nothing here drives a campaign.

Entry points: ``db.Store(path)``, ``bundle.write_bundle``, ``report.print_summary``.
"""
