"""Running: the jobs that drive every stage below.

Owns the campaign (``campaign``: options, pipelined lanes, probing, judging policy,
dedup after reduction, statistics), its guide (``steer``: each test's decision, in test
order, from lagged coverage rewards), generation ahead in a process per lane (``pregen``),
per-(op, type) support probing (``probe``), replaying a bundle (``replay``) and the
conformance kit for an adapter (``conformance``). A Ray executor belongs here too.

May import every library stage: ``generate``, ``execute``, ``judge``, ``reduce``,
``store``. Never ``onnxfuzz.cli``.

Entry points: ``Campaign(out, CampaignOptions(...), resume)`` with ``start``/``run``/
``close``; ``replay.replay_bundle``; ``conformance.check_backend``.
"""
