"""Execution: backends in sandboxed, persistent, spawned worker processes.

Owns the worker process (``worker``, ``sandbox.serve``), the parent's handle on it
(``sandbox.Worker``: timeout, memory cap, crash stage, respawn), the fork server fresh
processes are forked from (``zygote``; its own code: ``fork_server``), the messages
between them and the ``Outcome`` of one model on one backend, and the ``BackendPool`` that
runs a model on every backend of a campaign, a reduction, a replay or a conformance check.

May import: ``onnxfuzz.errors``, ``onnxfuzz.dtypes``, ``onnxfuzz.backend`` (the adapter
protocol). Nothing here generates, judges or stores.

Entry point: ``BackendPool(labels, ...)`` as a context manager: ``run_all`` / ``run_one``.
"""
