"""One model on several backends: the one way every job runs its backends.

A ``BackendPool`` holds one sandboxed ``Worker`` per backend label. ``run_all`` starts a
model on every backend at once (they are separate processes) and collects the outcomes;
``run_one`` runs a model on one backend. A campaign lane pipelines: ``start_test`` a test
or two, do other work, ``wait`` for the oldest one's outcomes; anything else that needs the
workers meanwhile (localizing a mismatch, reducing a bug) first ``settle``s the tests in
flight, whose outcomes are kept for ``wait``. With two tests started, each worker goes on
to the second the moment it finishes the first (``sandbox.QUEUE_AHEAD``): the backends do
not wait for the campaign to judge and store.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType

import numpy as np

from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.execute.messages import Test
from onnxfuzz.execute.sandbox import BackendInfo, Outcome, Worker, pack, start_limit
from onnxfuzz.execute.zygote import Zygote

Inputs = dict[str, np.ndarray]


class Spares:
    """Fresh processes for ``fresh_runs``, shared by the pools of one campaign (its lanes
    are threads): per backend, a fork server (``onnxfuzz.execute.zygote``) that forks one
    in milliseconds, started at the first need; where a backend cannot be forked from
    (``Zygote.unforkable``), one process launched ahead instead, so that a campaign of
    many lanes holds one idle process per backend, not one per lane."""

    def __init__(self, fork: bool | None = None) -> None:
        """``fork``: use fork servers (None: unless the environment sets ONNXFUZZ_FORK=0)."""
        self._lock = threading.Lock()
        self._by_label: dict[str, Worker] = {}
        self.fork = os.environ.get("ONNXFUZZ_FORK", "1") != "0" if fork is None else fork
        self._zygotes: dict[str, Zygote | None] = {}
        self._zygote_locks: dict[str, threading.Lock] = {}
        self.unforkable: dict[str, str] = {}  # backend label -> why its zygote will not fork

    def zygote(self, label: str, like: Worker) -> Zygote | None:
        """``label``'s fork server, started now if it is the first call (None where it
        cannot fork: the backend's library starts threads or CUDA as it loads, or the
        server did not start)."""
        if not self.fork:
            return None
        with self._lock:
            if label in self._zygotes:
                return self._zygotes[label]
            lock = self._zygote_locks.setdefault(label, threading.Lock())
        with lock:  # one start per backend; other backends' callers do not wait for it
            with self._lock:
                if label in self._zygotes:
                    return self._zygotes[label]
            z: Zygote | None = Zygote(like.ref.text, like.startup_timeout)
            try:
                z.start()
            except (BackendError, OSError) as e:
                self.unforkable[label] = f"its fork server did not start: {e}"
                z.close()
                z = None
            if z is not None and not z.usable:
                self.unforkable[label] = z.unforkable or "its fork server stopped"
                z.close()
                z = None
            with self._lock:
                self._zygotes[label] = z
            return z

    def take(self, label: str) -> Worker | None:
        with self._lock:
            return self._by_label.pop(label, None)

    def launch(self, label: str, like: Worker) -> None:
        """A process of ``like``'s backend, launched now (none if one is waiting)."""
        with self._lock:
            if label in self._by_label:
                return
            spare = Worker(like.ref, like.timeout, like.memory_mb, like.startup_timeout)
            try:
                spare.launch()
            except OSError:  # no process to spare now: the next call starts its own
                spare.close()
                return
            self._by_label[label] = spare

    def close(self) -> None:
        with self._lock:
            for w in self._by_label.values():
                w.close()
            self._by_label.clear()
            zygotes = [z for z in self._zygotes.values() if z is not None]
            self._zygotes.clear()
        for z in zygotes:
            z.close()


class BackendPool:
    """Backends by label, each in its own worker process; a context manager."""

    def __init__(
        self,
        labels: Iterable[str],
        timeout: float = 30.0,
        memory_mb: float = 8192.0,
        startup_timeout: float | None = None,
        spares: Spares | None = None,
    ) -> None:
        """``startup_timeout``: seconds a worker may take to load its backend (None:
        ``sandbox.start_limit()``, $ONNXFUZZ_START_TIMEOUT or 300)."""
        limit = start_limit() if startup_timeout is None else startup_timeout
        self.workers = {
            label: Worker(parse_backend(label), timeout, memory_mb, limit)
            for label in dict.fromkeys(labels)
        }
        self.infos: dict[str, BackendInfo] = {}
        # Tests started and not yet waited for, oldest first, with their test numbers:
        # those in the workers (per label, the outcome of a failed hand-over or None) and
        # those settled.
        self._inflight: deque[tuple[int, dict[str, Outcome | None]]] = deque()
        self._done: deque[tuple[int, dict[str, Outcome]]] = deque()
        self.last_seq = 0  # the test number of the test ``wait`` answered last
        # Where ``fresh_runs`` gets its processes (``Spares``: a fork server per backend,
        # else one launched ahead); shared ``spares`` are their owner's to close.
        self._own_spares = spares is None
        self.spares = spares if spares is not None else Spares()

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
        if self._own_spares:
            self.spares.close()

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
    @property
    def pending(self) -> int:
        """Tests started and not yet waited for."""
        return len(self._inflight) + len(self._done)

    def start_test(
        self,
        model_bytes: bytes,
        inputs: Inputs,
        only: Iterable[str] | None = None,
        feedback: Container[str] | None = None,
    ) -> None:
        """Start a model on every backend (or those in ``only``) without waiting; behind
        the tests already started, if any (``wait`` answers in the order they started).
        ``feedback``: the backends that want optimization feedback on it, of those whose
        adapter takes requests (``Test.feedback``; None: all)."""
        labels = self.labels if only is None else list(dict.fromkeys(only))
        test = pack(model_bytes, inputs)
        quiet = test
        if feedback is not None and any(label not in feedback for label in labels):
            quiet = pack(model_bytes, inputs, False, test.seq)
        sent = {
            label: self.workers[label].submit_packed(
                test if feedback is None or label in feedback else quiet
            )
            for label in labels
        }
        self._inflight.append((test.seq, sent))

    def _collect_oldest(self) -> tuple[int, dict[str, Outcome]]:
        # Each worker answers its tests in order: its oldest is this one.
        seq, sent = self._inflight.popleft()
        return seq, {
            label: failed if failed is not None else self.workers[label].collect()
            for label, failed in sent.items()
        }

    def settle(self) -> None:
        """Collect the tests in flight, if any, and keep their outcomes for ``wait``."""
        while self._inflight:
            self._done.append(self._collect_oldest())

    def wait(self) -> dict[str, Outcome]:
        """The outcomes of the oldest test started (those after it go on running); its
        test number is ``last_seq`` then (for ``ran_before``)."""
        if self._done:
            self.last_seq, got = self._done.popleft()
            return got
        assert self._inflight, "no test in flight"
        self.last_seq, got = self._collect_oldest()
        return got

    def run_all(
        self, model_bytes: bytes, inputs: Inputs, only: Iterable[str] | None = None
    ) -> dict[str, Outcome]:
        """Run a model on every backend (or those in ``only``) now, in parallel; the tests
        in flight are settled first and kept for ``wait``."""
        self.settle()
        labels = self.labels if only is None else list(dict.fromkeys(only))
        test = pack(model_bytes, inputs)
        sent = {label: self.workers[label].submit_packed(test) for label in labels}
        return {
            label: failed if failed is not None else self.workers[label].collect()
            for label, failed in sent.items()
        }

    def run_one(
        self, label: str, model_bytes: bytes, inputs: Inputs, frontend: bool = False
    ) -> Outcome:
        """Run a model on one backend now (after the tests in flight, if any; ``frontend``:
        only its import, ``Test.frontend``)."""
        self.settle()
        return self.workers[label].execute(model_bytes, inputs, frontend)

    # --- state: what ran before, and fresh processes ----------------------------------
    def ran_before(self, label: str, seq: int, limit: int) -> list[Test]:
        """The tests ``label``'s process had run before test ``seq`` (oldest first, at most
        ``limit``): the state a finding that needs an earlier model may depend on."""
        return self.workers[label].ran_before(seq, limit)

    def fresh_runs(
        self,
        label: str,
        model_bytes: bytes,
        inputs: Inputs,
        runs: int,
        earlier: Sequence[Test] = (),
        timeout: float | None = None,
        until: Callable[[Outcome], bool] | None = None,
    ) -> list[Outcome]:
        """Run a model ``runs`` times in a new process of ``label``'s backend (started for
        this, closed after: no state of this pool's workers), after the ``earlier`` tests
        in the same process (their outcomes are not kept); stops at the first outcome
        ``until`` accepts. ``timeout``: the per-test limit (None: the pool's). The process
        comes from ``_fresh``."""
        mine = self.workers[label]
        worker = self._fresh(label)
        worker.timeout = timeout or mine.timeout
        try:
            for t in earlier:
                worker.execute(t.model_bytes, t.inputs)
            got: list[Outcome] = []
            for _ in range(runs):
                got.append(worker.execute(model_bytes, inputs))
                if until is not None and until(got[-1]):
                    break
            return got
        finally:
            worker.close()
            if worker.zygote is None:
                self.spares.launch(label, mine)

    def _fresh(self, label: str) -> Worker:
        """A loaded process of ``label``'s backend that has run nothing: forked from the
        backend's zygote, else the spare launched ahead, else one started now (also where
        the spare died while loading)."""
        mine = self.workers[label]
        zygote = self.spares.zygote(label, mine)
        if zygote is not None:
            mine.zygote = mine.zygote or zygote  # this pool's worker restarts by forks too
            worker = Worker(
                mine.ref, mine.timeout, mine.memory_mb, mine.startup_timeout, zygote=zygote
            )
            worker.start()
            return worker
        spare = self.spares.take(label)
        if spare is not None:
            try:
                spare.ready()
                return spare
            except BackendError:
                spare.close()
        worker = Worker(mine.ref, mine.timeout, mine.memory_mb, mine.startup_timeout)
        worker.start()
        return worker
