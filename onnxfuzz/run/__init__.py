"""Running: the jobs that drive every stage below.

Owns the campaign (``campaign``: options, pipelined lanes, probing, judging policy,
dedup after reduction, statistics), its guide (``steer``: each test's decision, in test
order, from lagged coverage rewards), generation ahead in a process per lane (``pregen``),
per-(op, type) support probing (``probe``), rule inference for ops without a
spec (``infer``: records labelled by a backend, rules verified on held-out records),
replaying a bundle (``replay``) or a folder of them (``replay_all``), the culprit
inside a backend (``culprit``), the conformance kit for an adapter (``conformance``)
and the Ray executor (``ray_executor``, the driver: it stores, reduces and bundles;
``shard``, the node side: a shard's tests made, run and judged; Ray is imported only
in ``ray_executor``, as it is optional).

May import every library stage: ``generate``, ``execute``, ``judge``, ``reduce``,
``store``. Never ``onnxfuzz.cli``.

Entry points: ``Campaign(out, CampaignOptions(...), resume)`` with ``start``/``run``/
``close``; ``ray_executor.RayCampaign`` (the same, plus ``address``);
``replay.replay_bundle``; ``conformance.check_backend``.
"""
