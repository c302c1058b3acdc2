"""Rule inference (NeuRI): rules for ops no hand spec covers, learned from a backend.

Owns the op schemas of other domains (``schema``), the probe draws (``draws``), the
campaign of labelled single-op records (``learn``: records run through a backend pool,
constraints, rules verified on held-out records), output-shape synthesis (``synth``, z3
offline), agreement with hand specs (``rule_check``) and the rule format and its loading
(``rules``: the committed specs/inferred/DOMAIN.json, registered as the ``inferred`` spec
source, so the solver reads them like hand specs).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.generate``,
``onnxfuzz.execute``. Nothing here judges, stores or drives a campaign.

Entry point: ``learn.run_inference``; ``rules.load_domain``.
"""
