"""The same campaign on a Ray cluster (``onnxfuzz fuzz --executor ray [--address ADDR]``).

Who does what:

- **Shards.** Test ``i`` is still the model of seed ``S + i``; the tests are cut into
  shards of ``SHARD`` consecutive indices, ``[k*SHARD, (k+1)*SHARD)``, less those
  campaign.db already holds. An idle ``ShardRunner`` actor (one per CPU of the cluster,
  ``num_cpus=1``) takes the next shard; nodes that join later get actors too.
- **On the nodes** (``onnxfuzz.run.shard``). A ``ShardRunner`` holds the campaign's
  ``Generator`` and a ``BackendPool`` (the backends in spawned worker processes on its
  node, as in a local lane). It makes, runs and *judges* its tests (the campaign's own
  ``judge_all``, so a mismatch is localized and put through the "not a bug" checks where
  its outputs are) and streams compact results back every ``YIELD_EVERY`` seconds:
  verdicts, timings, the model's ops and diversity features; the model, inputs and
  outputs only for a test with a finding.
- **On the driver.** The campaign process is the only writer of campaign.db. It stores
  each test as it arrives (``Campaign.finish``, the local path), and *reduces and bundles*
  findings through its own ``BackendPool``: bugs are deduplicated after reduction against
  one store, so one root cause is one bundle whichever node hit it, and the reduction
  budget per new bug is spent once, not once per node. Findings are rare, so the driver's
  steady work per test is one SQLite insert and a diversity update: it stays light while
  the nodes generate, run and judge.
- **Faults.** A shard whose actor dies (a killed worker, a lost node) is given again, to a
  fresh actor, with only the indices the driver has not stored; a test that arrives twice
  is stored once. An actor that stops answering without dying (a stopped or hung process,
  a node Ray still counts as alive) is killed once its stream has sent nothing for
  longer than any test can take (``silence_limit``), and its shard is given again the same
  way. A kill of the driver loses only uncommitted tests, as locally: ``--resume``
  (with either executor) runs every test campaign.db lacks.
- **Same code everywhere.** Each actor reports a digest of onnxfuzz's sources and its
  backends' versions; a node that differs from the driver is refused (it would make other
  models, or judge them with another backend).

Ray is optional: it is imported only here, and ``--executor ray`` without it is a one-line
error naming the fix.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from onnxfuzz.errors import BackendError, UsageError
from onnxfuzz.execute.sandbox import Outcome, start_limit
from onnxfuzz.run.campaign import Campaign, CampaignOptions, Progress, Resumed
from onnxfuzz.run.shard import Ready, ShardRunner, ShardSetup, Tested, clock_offset, code_digest

RAY_FIX = "pip install onnxfuzz[ray]"
SHARD = 32  # tests per shard: a second or two of one node's work, little to redo on a loss
SCALE_EVERY = 2.0  # seconds between looks for free CPUs (a node that joined)
MAX_SHARD_TRIES = 3  # a shard whose actor dies this often stops the campaign
ACTOR_START_TIMEOUT = 300.0  # seconds to wait for the first actor (backends to start)
CONNECT_TIMEOUT = 5.0  # seconds to reach --address before calling it unreachable
# A shard sends what it finished every YIELD_EVERY s, so a silent stream is one test that
# has not ended: its backends' --timeout each (they run at once), a crashed backend's
# worker started again (up to the pool's start-up limit), the judging's probe runs. Past
# this much more, the actor is taken as hung.
SILENCE_SLACK_S = 120.0


def import_ray() -> Any:
    """Ray, or a one-line error naming the fix."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"--executor ray: Ray is not installed; {RAY_FIX}") from None
    return ray


def _check_address(address: str) -> None:
    """Refuse an address where nothing answers, at once: ``ray.init`` would retry for
    minutes, printing to the terminal."""
    if address == "auto" or "://" in address:
        return  # the local cluster's file, or Ray Client: ray.init fails fast itself
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--address {address}: expected HOST:PORT, e.g. 10.0.0.1:6379")
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        raise UsageError(
            f"--address {address}: no Ray cluster answers there ({e.strerror or e}); "
            "start one with `ray start --head` or check the address"
        ) from None


@dataclass
class ClusterProgress(Progress):
    """``Progress`` for tests that arrive from several nodes, in batches, out of time order:
    ``busy`` is the union of every backend's compile+run intervals however late one
    arrives (``Progress.add_busy`` drops an interval that begins before the last one it
    counted). Reductions run on the driver while the nodes go on testing: their time is
    not taken out of the wall time."""

    wall_note: ClassVar[str] = "reductions included: the nodes test on meanwhile"
    _spans: list[tuple[float, float]] = field(default_factory=list)  # disjoint, sorted
    _settled: float = 0.0  # busy seconds of spans dropped from ``_spans`` (long past)
    _extra: float = 0.0  # backend seconds spent localizing

    def add_busy(self, outcomes: list[Outcome], extra: float = 0.0) -> None:
        for o in outcomes:
            a, b = o.started, o.started + o.backend_s
            if b <= a:
                continue
            keep = []
            for x, y in self._spans:
                if y < a or x > b:
                    keep.append((x, y))
                else:  # overlaps: merge into [a, b]
                    a, b = min(a, x), max(b, y)
            keep.append((a, b))
            keep.sort()
            # what ended a minute before the latest interval gets no more overlaps
            horizon = keep[-1][1] - 60.0
            self._settled += sum(y - x for x, y in keep if y < horizon)
            self._spans = [(x, y) for x, y in keep if y >= horizon]
        self._extra += extra
        self.busy = self._settled + sum(y - x for x, y in self._spans) + self._extra

    def overhead(self, now: float | None = None) -> float:
        wall = (now if now is not None else time.perf_counter()) - self.started
        return max(0.0, 1.0 - self.busy / wall) if wall > 0 else 0.0


@dataclass
class _Flight:
    """A shard running on an actor."""

    actor: Any
    indices: list[int]
    tries: int
    stream: Any = None
    silent: float = 0.0  # seconds the driver has waited on it since its last batch


@dataclass
class _Actors:
    """The driver's actors: idle, and starting (their ``ready`` refs)."""

    idle: list[Any] = field(default_factory=list)
    starting: dict[Any, Any] = field(default_factory=dict)  # ready ref -> actor
    pids: dict[Any, int] = field(default_factory=dict)  # actor -> its process id
    hosts: dict[Any, str] = field(default_factory=dict)
    nodes: dict[Any, str] = field(default_factory=dict)  # actor -> its Ray node id


class RayCampaign(Campaign):
    """A campaign whose tests run on a Ray cluster; the driver stores, reduces and bundles.
    ``address`` None: a local cluster is started (and stopped at ``close``)."""

    def __init__(
        self,
        out: Path,
        opts: CampaignOptions | None,
        resume: bool = False,
        changes: Resumed | None = None,
        address: str | None = None,
        shard: int = SHARD,
        silence_limit: float | None = None,
    ) -> None:
        super().__init__(out, opts, resume, changes)
        # seconds a shard's stream may send nothing before its actor is taken as hung
        self.silence_limit = silence_limit or (
            start_limit() + 3 * self.opts.timeout + SILENCE_SLACK_S
        )
        self.hung = 0  # actors killed for their silence
        self.progress = ClusterProgress()
        self.address = address
        self.shard = shard
        self.reruns = 0  # shards given again after their actor died
        self.duplicates = 0  # tests that arrived after they were stored (not stored again)
        self._ray: Any = None
        self._owns_ray = False
        self._actors = _Actors()
        self._setup: ShardSetup | None = None
        self._remote: Any = None
        self._flights: dict[Any, _Flight] = {}  # stream -> the shard it runs
        self._stored: set[int] = set()  # test indices campaign.db holds (run() fills it)

    # --- set-up ----------------------------------------------------------------------
    def _lane_count(self) -> int:
        return 1  # the driver's pool: the probe and reductions; tests run on the cluster

    def _use_pregen(self) -> bool:
        return False  # the driver makes no tests

    def start(self, on_probe: Callable[[str, int, int], None] | None = None) -> None:
        if self.opts.guide != "random" or self.opts.seed_models:
            # The guide decides test i from the rewards of the tests below it, in the
            # campaign process; shards on other nodes make their tests from seeds alone.
            raise UsageError(
                "--executor ray: only --guide random without --seed-models for now (the "
                "guide's decisions are made in test order in one process)"
            )
        # Ray first: a missing Ray or a bad --address is refused before anything is written.
        ray = import_ray()
        if self.address is not None:
            _check_address(self.address)
        if not ray.is_initialized():
            kw: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
            if os.environ.get("PYTHONPATH"):  # workers import the driver's onnxfuzz
                kw["runtime_env"] = {"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}}
            try:
                if self.address is None:
                    ray.init(include_dashboard=False, **kw)
                else:
                    ray.init(address=self.address, **kw)
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = self.address or "a local cluster"
                raise UsageError(f"--address: cannot connect to {where}: {e}") from None
            self._owns_ray = True
        self._ray = ray
        try:
            super().start(on_probe)
            self._setup = ShardSetup(
                self.opts,
                self.cfg,
                self.oracle,
                self.support,
                self.names,
                self.labels,
                code_digest(),
                clock_offset(),
                self.known,
            )
            self._remote = ray.remote(num_cpus=1, max_restarts=0, max_task_retries=0)(ShardRunner)
            for _ in range(max(1, int(ray.cluster_resources().get("CPU", 0)))):
                self._start_actor()
            self._wait_first_actors()
        except BaseException:
            self._stop_actors()
            raise

    def _start_actor(self) -> None:
        actor = self._remote.remote(self._setup)
        self._actors.starting[actor.ready.remote()] = actor

    def _admit(self, ref: Any) -> bool:
        """An actor answered ``ready``: put it to work, or refuse it (an error: False)."""
        ray = self._ray
        actor = self._actors.starting.pop(ref)
        try:
            r: Ready = ray.get(ref)
        except ray.exceptions.RayError as e:
            self._last_actor_error = str(_cause(e))
            return False
        if r.digest != code_digest():
            ray.kill(actor)
            raise UsageError(
                f"Ray node {r.host} runs other onnxfuzz code (sources {r.digest}, the "
                f"driver's {code_digest()}): install the same onnxfuzz on every node"
            )
        for label, info in r.infos.items():
            mine = self.infos[label].version
            if info.version != mine:
                ray.kill(actor)
                raise UsageError(
                    f"Ray node {r.host} has {label} {info.version}, the driver {mine}: "
                    "install the same backends on every node"
                )
        self._actors.pids[actor] = r.pid
        self._actors.hosts[actor] = r.host
        self._actors.nodes[actor] = r.node
        self._actors.idle.append(actor)
        return True

    def _wait_first_actors(self) -> None:
        """Wait until every actor asked for has started (or failed): the run's clock starts
        with the nodes ready, as a local run's starts with its lanes ready."""
        ray = self._ray
        self._last_actor_error = ""
        deadline = time.monotonic() + ACTOR_START_TIMEOUT
        while self._actors.starting and time.monotonic() < deadline:
            ready, _ = ray.wait(list(self._actors.starting), num_returns=1, timeout=1.0)
            for ref in ready:
                self._admit(ref)
            if not self._actors.idle and ready and not self._actors.starting:
                break
        if not self._actors.idle:
            why = self._last_actor_error or f"none started within {ACTOR_START_TIMEOUT:.0f} s"
            raise BackendError(f"--executor ray: no Ray worker could start the backends: {why}")

    def actor_pids(self) -> dict[str, int]:
        """Process id of each running actor, by host (for operators and tests)."""
        return {
            f"{self._actors.hosts[a]}#{i}": p for i, (a, p) in enumerate(self._actors.pids.items())
        }

    def pids_on(self, node: str) -> list[int]:
        """Process ids of the actors running on a Ray node (for operators and tests)."""
        return [p for a, p in self._actors.pids.items() if self._actors.nodes.get(a) == node]

    def owed(self) -> dict[str, int]:
        """Per Ray node id, the tests its shards in flight still owe the driver (for
        operators and tests: a shard whose every test arrived may still be in flight,
        waiting for the end of its stream)."""
        out: dict[str, int] = {}
        for f in self._flights.values():
            node = self._actors.nodes.get(f.actor, "")
            out[node] = out.get(node, 0) + sum(1 for i in f.indices if i not in self._stored)
        return out

    # --- the loop --------------------------------------------------------------------
    def _shards(self, done: set[int]) -> Iterator[list[int]]:
        """Shard after shard, each less the tests campaign.db holds (empty ones skipped)."""
        total = self.opts.tests
        k = 0
        while total is None or k * self.shard < total:
            hi = (k + 1) * self.shard if total is None else min((k + 1) * self.shard, total)
            todo = [i for i in range(k * self.shard, hi) if i not in done]
            if todo:
                yield todo
            k += 1

    def run(self, on_update: Callable[[Progress], None] | None = None) -> Progress:
        ray = self._ray
        assert self.store is not None, "start the campaign first"
        o = self.opts
        stored = self._stored = self.store.done_ids()
        p = self.progress
        p.total = sum(1 for i in range(o.tests) if i not in stored) if o.tests else None
        p.seconds = o.seconds
        p.started = time.perf_counter()
        deadline = p.started + o.seconds if o.seconds else None
        wall_deadline = time.time() + o.seconds if o.seconds else None
        # After the deadline the shards in flight end their tests (a test can take the
        # --timeout on each backend); past this grace what is left is dropped (not stored:
        # a resume runs it).
        grace = 2 * o.timeout + 10.0
        shards = self._shards(stored)
        again: deque[tuple[list[int], int]] = deque()  # shards to give again, with tries
        flights = self._flights  # stream -> flight
        flights.clear()
        next_scale = time.monotonic() + SCALE_EVERY

        def dispatch() -> None:
            while self._actors.idle and not self._stop.is_set():
                if deadline is not None and time.perf_counter() >= deadline:
                    return
                if again:
                    indices, tries = again.popleft()
                    indices = [i for i in indices if i not in stored]
                    if not indices:
                        continue
                else:
                    indices = next(shards, None)  # type: ignore[arg-type]
                    tries = 0
                    if indices is None:
                        return
                actor = self._actors.idle.pop()
                stream = actor.run_shard.remote(indices, wall_deadline)
                flights[stream] = _Flight(actor, indices, tries, stream)

        try:
            dispatch()
            while flights or again:
                now = time.perf_counter()
                if deadline is not None and now >= deadline:
                    again.clear()  # not started in time: a resume runs them
                    if not flights or now >= deadline + grace:
                        break
                if self._stop.is_set():
                    break
                waits = list(flights) + list(self._actors.starting)
                t_wait = time.monotonic()
                ready, _ = ray.wait(waits, num_returns=1, timeout=0.25) if waits else ([], [])
                # Silence counts only while the driver waits (not while it reduces a
                # finding, when every stream looks silent).
                waited = time.monotonic() - t_wait
                for stream, flight in flights.items():
                    if stream not in ready:
                        flight.silent += waited
                self._kill_silent(flights)
                for ref in ready:
                    if ref in self._actors.starting:
                        self._admit(ref)
                    else:
                        self._receive(flights, ref, stored, again)
                if time.monotonic() >= next_scale:
                    next_scale = time.monotonic() + SCALE_EVERY
                    self._scale_up()
                if again and not flights and not self._actors.idle:
                    if not self._actors.starting:
                        self._start_actor()  # every actor died: ask for a fresh one
                    self._stalled(again)
                dispatch()
                with self._lock:
                    self.store.commit_due()
                if on_update:
                    on_update(p)
        except KeyboardInterrupt:
            p.interrupted = True
            self._stop.set()
        if on_update:
            on_update(p)
        with self._lock:
            self._save_diversity()
            self.store.commit()
        return p

    def _receive(
        self,
        flights: dict[Any, _Flight],
        stream: Any,
        stored: set[int],
        again: deque[tuple[list[int], int]],
    ) -> None:
        """The next batch of a shard's stream: store its tests; at its end the actor is
        idle again; if its actor died, the shard's unstored tests go back in the queue."""
        ray = self._ray
        flight = flights[stream]
        flight.silent = 0.0
        try:
            batch: list[Tested] = ray.get(next(stream))
        except StopIteration:
            del flights[stream]
            self._actors.idle.append(flight.actor)
            return
        except ray.exceptions.RayTaskError as e:  # onnxfuzz itself failed on the node
            raise _cause(e) from None
        except ray.exceptions.RayError:  # the actor or its node is gone
            del flights[stream]
            self._forget(flight.actor)
            if flight.tries + 1 >= MAX_SHARD_TRIES:
                raise BackendError(
                    f"tests {flight.indices[0]}..{flight.indices[-1]} lost their Ray worker "
                    f"{MAX_SHARD_TRIES} times (killed, or its node lost); the campaign stops "
                    "here, the stored tests are kept (--resume; --executor local shows a "
                    "test that kills its process)"
                ) from None
            self.reruns += 1
            again.appendleft((flight.indices, flight.tries + 1))
            if not self._actors.starting:
                self._start_actor()  # it takes the lost one's CPU if that is still there
            return
        for t in batch:
            if t.made.index in stored:  # a re-run shard's test that arrived before
                self.duplicates += 1
                continue
            self._store(t)
            stored.add(t.made.index)

    def _kill_silent(self, flights: dict[Any, _Flight]) -> None:
        """Kill the actors whose streams have been silent past ``silence_limit``: their
        streams then end in an error, and ``_receive`` gives their shards again."""
        for flight in flights.values():
            if flight.silent > self.silence_limit and flight.actor in self._actors.pids:
                self.hung += 1
                self._forget(flight.actor)  # kills it (SIGKILL stops a stopped one too)

    def _store(self, t: Tested) -> None:
        t.made.started = time.perf_counter() - t.wall  # its wall time, as timed on its node
        self._last_finish.pop(threading.get_ident(), None)
        if t.judged is None:
            self.finish_error(t.made)
        else:
            lane = self.lanes[0] if t.judged.findings else None
            self.finish(t.made, t.outcomes, t.judged, lane)

    def _forget(self, actor: Any) -> None:
        self._actors.pids.pop(actor, None)
        self._actors.hosts.pop(actor, None)
        self._actors.nodes.pop(actor, None)
        if actor in self._actors.idle:
            self._actors.idle.remove(actor)
        with contextlib.suppress(Exception):  # it is gone already
            self._ray.kill(actor)

    def _scale_up(self) -> None:
        """A CPU nobody uses (a node that joined, a lost actor's CPU back): one more actor."""
        if self._actors.starting:
            return
        if self._ray.available_resources().get("CPU", 0) >= 1:
            self._start_actor()

    def _stalled(self, again: deque[tuple[list[int], int]]) -> None:
        """Shards wait and no actor runs: wait for one to start, or give up."""
        deadline = time.monotonic() + ACTOR_START_TIMEOUT
        while not self._actors.idle and time.monotonic() < deadline and not self._stop.is_set():
            ready, _ = self._ray.wait(list(self._actors.starting), num_returns=1, timeout=1.0)
            for ref in ready:
                self._admit(ref)
            if not self._actors.starting and not self._actors.idle:
                self._start_actor()
        if not self._actors.idle:
            raise BackendError(
                f"--executor ray: no Ray worker left to run tests {again[0][0][0]}..; "
                "the cluster lost its nodes (the stored tests are kept: --resume)"
            )

    # --- the end ---------------------------------------------------------------------
    def _stop_actors(self) -> None:
        if self._ray is None:
            return
        actors = list(self._actors.pids) + list(self._actors.starting.values())
        closing = [a.close.remote() for a in self._actors.pids]
        if closing:  # let each close its backend workers; then make sure
            self._ray.wait(closing, num_returns=len(closing), timeout=5.0)
        for a in actors:
            with contextlib.suppress(Exception):  # gone already
                self._ray.kill(a)
        self._actors = _Actors()

    def close(self) -> None:
        try:
            self._stop_actors()
            super().close()
        finally:
            if self._owns_ray and self._ray is not None:
                self._ray.shutdown()
                self._owns_ray = False


def _cause(e: BaseException) -> BaseException:
    """The exception a Ray task raised, unwrapped (a BackendError stays a BackendError)."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        return cause
    return BackendError(str(e).splitlines()[0] if str(e) else type(e).__name__)
