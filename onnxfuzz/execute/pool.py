"""One model on several backends: the one way every job runs its backends.

A ``BackendPool`` holds one sandboxed ``Worker`` per backend label. ``run_all`` starts a
model on every backend at once (they are separate processes) and collects the outcomes;
``run_one`` runs a model on one backend. A campaign lane pipelines: ``start`` a test, do
other work, ``wait`` for its outcomes; anything else that needs the workers meanwhile
(localizing a mismatch, reducing a bug) first ``settle``s the test in flight, which is
kept for ``wait``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType

import numpy as np

from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.execute.sandbox import BackendInfo, Outcome, Worker

Inputs = dict[str, np.ndarray]


class BackendPool:
    """Backends by label, each in its own worker process; a context manager."""

    def __init__(
        self,
        labels: Iterable[str],
        timeout: float = 30.0,
        memory_mb: float = 8192.0,
        startup_timeout: float = 300.0,
    ) -> None:
        self.workers = {
            label: Worker(parse_backend(label), timeout, memory_mb, startup_timeout)
            for label in dict.fromkeys(labels)
        }
        self.infos: dict[str, BackendInfo] = {}
        self._inflight: dict[str, Outcome | None] | None = None
        self._done: dict[str, Outcome] | None = None

    @property
    def labels(self) -> list[str]:
        return list(self.workers)

    # --- life -----------------------------------------------------------------------
    def start(self, require_available: bool = True) -> dict[str, BackendInfo]:
        """Start every worker; with ``require_available``, refuse a backend that cannot
        run on this machine (no GPU, ...), naming it."""
        try:
            for label, w in self.workers.items():
                info = w.start()
                self.infos[label] = info
                if require_available and info.available:
                    raise BackendError(f"backend {label} is not available here: {info.available}")
        except BaseException:
            self.close()
            raise
        return self.infos

    def close(self) -> None:
        for w in self.workers.values():
            w.close()

    def __enter__(self) -> BackendPool:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def time_limit(self, seconds: float | None) -> Iterator[None]:
        """Every worker's per-test timeout set to ``seconds`` inside (None: unchanged)."""
        if seconds is None:
            yield
            return
        self.settle()
        kept = {label: w.timeout for label, w in self.workers.items()}
        for w in self.workers.values():
            w.timeout = seconds
        try:
            yield
        finally:
            for label, w in self.workers.items():
                w.timeout = kept[label]

    # --- running --------------------------------------------------------------------
    def start_test(
        self, model_bytes: bytes, inputs: Inputs, only: Iterable[str] | None = None
    ) -> None:
        """Start a model on every backend (or those in ``only``) without waiting."""
        assert self._inflight is None and self._done is None, "one test in flight per pool"
        labels = self.labels if only is None else list(dict.fromkeys(only))
        self._inflight = {
            label: self.workers[label].submit(model_bytes, inputs) for label in labels
        }

    def settle(self) -> None:
        """Collect the test in flight, if any, and keep its outcomes for ``wait``."""
        if self._inflight is not None:
            sent, self._inflight = self._inflight, None
            self._done = {
                label: failed if failed is not None else self.workers[label].collect()
                for label, failed in sent.items()
            }

    def wait(self) -> dict[str, Outcome]:
        """The outcomes of the test in flight."""
        self.settle()
        assert self._done is not None, "no test in flight"
        done, self._done = self._done, None
        return done

    def run_all(
        self, model_bytes: bytes, inputs: Inputs, only: Iterable[str] | None = None
    ) -> dict[str, Outcome]:
        """Run a model on every backend (or those in ``only``) now, in parallel; a test in
        flight is settled first and kept for ``wait``."""
        self.settle()
        kept, self._done = self._done, None
        self.start_test(model_bytes, inputs, only)
        out = self.wait()
        self._done = kept
        return out

    def run_one(self, label: str, model_bytes: bytes, inputs: Inputs) -> Outcome:
        """Run a model on one backend now (after the test in flight, if any)."""
        self.settle()
        return self.workers[label].execute(model_bytes, inputs)
