"""The node side of the Ray executor: a ``ShardRunner`` makes, runs and judges the tests
of one shard after another on its node and streams them back compact.

It holds the campaign's ``Generator`` and a ``BackendPool`` (the backends in spawned worker
processes on its node, as a local lane), and judges with the campaign's own ``judge_all``:
localizing a mismatch and the "not a bug" checks need the backends and the outputs, which
are here. What goes back per test is what the driver stores (verdicts, timings, ops,
diversity features); the model, inputs and outputs only for a test with a finding, which
the driver reduces and bundles. Nothing here imports Ray: ``ray_executor`` makes this class
an actor.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import BackendInfo, Outcome
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.judge.oracle import OracleConfig
from onnxfuzz.run.campaign import AHEAD, Campaign, CampaignOptions, Judged
from onnxfuzz.run.pregen import Made, make
from onnxfuzz.run.probe import Support
from onnxfuzz.store.known import KnownFile

YIELD_EVERY = 0.2  # seconds of finished tests a shard sends back at once


@cache
def code_digest() -> str:
    """A digest of onnxfuzz's Python sources (package, specs, built-in adapters): two
    processes with the same digest make the same model from the same seed."""
    import onnxfuzz.backends
    import onnxfuzz.specs

    h = hashlib.sha256()
    for pkg in (onnxfuzz, onnxfuzz.specs, onnxfuzz.backends):
        root = Path(pkg.__file__).parent
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def clock_offset() -> float:
    """``time.time() - time.perf_counter()`` here: outcomes are timed on the node's
    ``perf_counter``; shifted by the two offsets they land on the driver's clock."""
    return time.time() - time.perf_counter()


@dataclass
class ShardSetup:
    """What a ``ShardRunner`` needs from the driver (after its ``start``)."""

    opts: CampaignOptions
    cfg: Config  # with the probe's steering applied
    oracle: OracleConfig
    support: dict[str, Support]
    names: dict[str, str]
    labels: list[str]
    digest: str
    driver_clock: float  # the driver's clock_offset()
    known: KnownFile | None = None  # the campaign's --known findings


@dataclass
class Ready:
    """A ``ShardRunner`` that started its backends."""

    infos: dict[str, BackendInfo]
    digest: str
    pid: int
    host: str
    node: str = ""  # the Ray node id (hosts of a one-machine cluster share a name)


@dataclass
class Tested:
    """One test as a shard sends it back: ``judged`` None when generation failed."""

    made: Made
    outcomes: dict[str, Outcome]
    judged: Judged | None
    wall: float  # the test's wall time on its node (from the end of the one before)


class ShardRunner:
    """A Ray actor (``ray.remote(ShardRunner)``): a generator and a backend pool on one
    node, making, running and judging the tests of one shard after another."""

    # The campaign's own judging, so that a test gets the verdict it would get locally:
    # it reads only the attributes set in __init__ (opts, support, oracle, names, infos,
    # cfg, known).
    judge_all = Campaign.judge_all

    def __init__(self, setup: ShardSetup) -> None:
        self.opts = setup.opts
        self.cfg = setup.cfg
        self.oracle = setup.oracle
        self.known = setup.known
        self.support = setup.support
        self.names = setup.names
        self.shift = clock_offset() - setup.driver_clock
        self.generator = Generator(setup.cfg)
        self.pool = BackendPool(setup.labels, setup.opts.timeout, setup.opts.memory_mb)
        self.infos: dict[str, BackendInfo] = self.pool.start()
        self._last = 0.0

    def ready(self) -> Ready:
        node = ""
        ray = sys.modules.get("ray")  # loaded in a Ray actor; not imported here
        if ray is not None:
            with contextlib.suppress(Exception):  # not in a Ray worker: no node
                node = ray.get_runtime_context().get_node_id()
        return Ready(self.infos, code_digest(), os.getpid(), socket.gethostname(), node)

    def run_shard(self, indices: list[int], deadline: float | None) -> Iterator[list[Tested]]:
        """Make, run and judge these tests (pipelined as a local lane is), yielding what
        finished every ``YIELD_EVERY`` s; none is started after ``deadline`` (time.time)."""
        todo = iter(indices)
        started: deque[Made] = deque()
        batch: list[Tested] = []
        sent = time.perf_counter()

        def fill() -> None:
            while len(started) < AHEAD:
                if deadline is not None and time.time() >= deadline:
                    return
                i = next(todo, None)
                if i is None:
                    return
                t = make(self.generator, i, self.opts.seed + i)
                if t.case is None:  # generation failed: the driver logs and stores it
                    batch.append(Tested(t, {}, None, 0.0))
                    continue
                self.pool.start_test(t.model_bytes, t.inputs)
                started.append(t)

        fill()
        while started:
            current = started.popleft()
            outcomes = self.pool.wait()
            fill()
            assert current.case is not None
            judged = self.judge_all(current.case, current.inputs, outcomes, self.pool)
            now = time.perf_counter()
            wall = now - max(current.started, self._last)
            self._last = now
            batch.append(self._compact(current, outcomes, judged, wall))
            if now - sent >= YIELD_EVERY:
                yield batch
                batch, sent = [], now
        if batch:
            yield batch

    def _compact(
        self, t: Made, outcomes: dict[str, Outcome], judged: Judged, wall: float
    ) -> Tested:
        """What the driver needs of a test: everything for one with a finding (it reduces
        and bundles it); else the ops, features, verdicts and timings (a few hundred
        bytes, not the model, inputs and outputs)."""
        timed = {k: replace(o, started=o.started + self.shift) for k, o in outcomes.items()}
        for f in judged.findings:  # the bundle's outcomes: on the driver's clock too
            f.outcomes = {k: timed[k] for k in f.outcomes}
        assert t.case is not None
        if not judged.findings:
            timed = {k: replace(o, outputs=None, message="", trace="") for k, o in timed.items()}
            t.case = Case(None, t.case.seed, t.case.ops, [], [], {})  # type: ignore[arg-type]
            t.inputs = {}
        t.model_bytes = b""
        return Tested(t, timed, judged, wall)

    def close(self) -> None:
        self.pool.close()
