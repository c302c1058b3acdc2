"""Judging: from the backends' outcomes on one model to a verdict per backend.

Owns the verdict vocabulary and tolerances (``oracle``), the ``Judge`` that applies them
with localization of a mismatch (``localize``) and the ordered "not a bug" checks
(``checks``: instability, float16 rounding, excess precision in ``precision``), the
declared output types and shapes as tie-breaker (``declared``), who is to blame with three
or more backends (``attribution``) and bug signatures (``signature``).

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.generate`` (validation
helpers) and ``onnxfuzz.execute`` (outcomes, and the pool that re-runs models while
localizing). Nothing here stores, reduces or drives a campaign.

Entry point: ``Judge(reference, config, pool).assess(model, inputs, outcomes)``.
"""
