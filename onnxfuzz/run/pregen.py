"""Tests generated ahead, in a process of their own.

Generation is the campaign process's largest cost per test (the Python solver), and the
campaign process is the loop's serial part: while it generates, judges and stores, the
backends wait; with several lanes, their threads would take turns generating under one
GIL. Each lane has a spawned generator process (``python -m onnxfuzz.run.pregen FD``) that
builds its next tests (model, serialized bytes, inputs, diversity features) from their
seeds while the campaign process judges and the backends run, and hands them over in
request order: only (index, seed) goes in, the guide's decision for the test
(``onnxfuzz.run.steer``; None when unguided) and what generation avoids for it
(``onnxfuzz.run.avoidance``; None: nothing beyond the campaign's configuration), which the
model is a function of too.

Generation is deterministic in (options, seed): a test made here is byte-identical to one
made in the campaign process, which still regenerates a case when it reduces a bug. If the
generator process dies, it is started again and the tests it owed are asked for again.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import onnx

from onnxfuzz.errors import BackendError
from onnxfuzz.execute.messages import LoadError
from onnxfuzz.execute.sandbox import kill, process_cpu_seconds, spawn, stop
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.build.guide import Decision, Guided
from onnxfuzz.generate.build.seeds import blocks_from_record
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.measure.metrics import Features, features
from onnxfuzz.run.avoidance import AvoidSet


@dataclass(frozen=True)
class GeneratorReady:
    """The generator process built its Generator and takes ``Request``s."""


@dataclass(frozen=True)
class Request:
    """Make test ``index`` of the campaign from ``seed`` and the guide's ``decision``."""

    index: int
    seed: int
    decision: Decision = None
    avoid: AvoidSet | None = None


@dataclass
class Made:
    """Test ``index`` of a campaign, made from ``seed`` (``case`` None: generation failed,
    ``error`` says why). ``started``: when making it began (``time.perf_counter()``).
    ``features``: the model's diversity features as the campaign counts them (digests
    computed, keys left out: see ``counted``)."""

    index: int
    seed: int
    case: Case | None
    model_bytes: bytes
    inputs: dict[str, np.ndarray]
    error: str | None = None
    started: float = 0.0
    features: Features | None = None
    decision: Decision = None  # the guide's (onnxfuzz.generate.build.guide), made with it
    avoid: AvoidSet | None = None  # what its generation avoided (onnxfuzz.run.avoidance)


def counted(f: Features) -> Features:
    """``f`` as a campaign's diversity adds it (``Diversity.add_features``): its digests
    computed where the model is made, the readable keys dropped (what crosses to the
    campaign process is a third the size)."""
    return Features(f.ops, {}, f.nodes, f.connectivity, f.longest, f.digests())


def make(
    gen: Generator | Guided,
    index: int,
    seed: int,
    decision: Decision = None,
    avoid: AvoidSet | None = None,
) -> Made:
    """One test: the model, its serialized bytes (what the backends take), inputs and
    diversity features. ``avoid``: what ``gen`` avoids beyond the campaign's configuration
    (recorded with the test; ``Makers.get`` gives the generator)."""
    started = time.perf_counter()
    try:
        case = gen.case(seed, decision) if isinstance(gen, Guided) else gen.generate(seed)
        inputs = case.make_inputs(seed)
        data = case.model.SerializeToString()
    except Exception as e:  # noqa: BLE001 - a spec bug must not end the campaign
        err = f"{type(e).__name__}: {e}"
        return Made(index, seed, None, b"", {}, err, started, decision=decision, avoid=avoid)
    try:
        feats: Features | None = counted(features(case.model))
    except Exception:  # noqa: BLE001 - metrics are no reason to lose a test
        feats = None
    return Made(index, seed, case, data, inputs, None, started, feats, decision, avoid)


class Makers:
    """The test maker (a ``Guided`` generator) of each avoid set: the campaign's own for
    none, else its configuration with the set added, each built once (avoid sets only grow
    during a campaign: a few dozen at most)."""

    def __init__(self, base: Guided, seed_blocks: dict | None = None) -> None:
        self.base = base
        self.seed_blocks = seed_blocks or {}
        self._made: dict[AvoidSet, Guided] = {}

    def get(self, avoid: AvoidSet | None) -> Guided:
        if not avoid:
            return self.base
        got = self._made.get(avoid)
        if got is None:
            cfg = self.base.gen.cfg
            cfg = replace(
                cfg,
                avoid=cfg.avoid | avoid.pairs,
                avoid_features=cfg.avoid_features | avoid.forms,
            )
            if cfg == self.base.gen.cfg:  # nothing new: the same tests as without
                got = self.base
            else:
                got = Guided(Generator(cfg), blocks_from_record(self.seed_blocks))
            self._made[avoid] = got
        return got


def serve(conn: Connection) -> None:
    """The generator process's loop: a Config and the lifted user-model blocks' record,
    then ``Request``s (None: leave)."""
    try:
        cfg, seed_blocks = conn.recv()
        makers = Makers(Guided(Generator(cfg), blocks_from_record(seed_blocks)), seed_blocks)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(LoadError(f"{type(e).__name__}: {e}"))
        return
    conn.send(GeneratorReady())
    while True:
        try:
            req = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            # The campaign is gone (killed, or Ctrl-C): leave quietly. A ConnectionResetError
            # here printed one traceback per lane under a campaign stopped by `timeout`.
            return
        if req is None:
            return
        made = make(makers.get(req.avoid), req.index, req.seed, req.decision, req.avoid)
        if made.case is not None:
            # The case travels without its model: the bytes go anyway (parsed on arrival).
            made.case.model = None  # type: ignore[assignment]
        try:
            conn.send(made)
        except (OSError, KeyboardInterrupt):  # the campaign is gone: as above
            return


class Pregenerator:
    """The campaign side: ``request`` tests ahead, ``receive`` them in order."""

    def __init__(
        self, cfg: Config, startup_timeout: float = 120.0, seed_blocks: dict | None = None
    ) -> None:
        """``seed_blocks``: the lifted user-model blocks as a record
        (``onnxfuzz.generate.build.seeds.blocks_to_record``)."""
        self.cfg = cfg
        self.seed_blocks = seed_blocks or {}
        self.startup_timeout = startup_timeout
        self.owed: deque[Request] = deque()  # requested, not yet received
        self._proc: Any = None
        self._conn: Any = None
        self.restarts = 0

    def start(self) -> None:
        self.launch()
        self.ready()

    def launch(self) -> None:
        """Spawn the process without waiting for it (``ready`` waits): several start at
        once."""
        self._proc, self._conn = spawn("onnxfuzz.run.pregen", [])
        self._conn.send((self.cfg, self.seed_blocks))

    def ready(self) -> None:
        """Wait until the launched process serves; then ask again for what it owes (after a
        restart)."""
        deadline = time.monotonic() + self.startup_timeout
        while not self._conn.poll(0.1):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BackendError("the generator process did not start")
        msg = self._conn.recv()
        if isinstance(msg, LoadError):
            self.close()
            raise BackendError(f"the generator process failed: {msg.message}")
        for req in self.owed:  # after a restart: ask again for what the last one owed
            self._conn.send(req)

    def request(
        self, index: int, seed: int, decision: Decision = None, avoid: AvoidSet | None = None
    ) -> None:
        req = Request(index, seed, decision, avoid)
        self.owed.append(req)
        try:
            self._conn.send(req)
        except OSError:
            self._restart()

    def receive(self) -> Made:
        """The oldest test requested."""
        assert self.owed, "nothing requested"
        while True:
            try:
                made: Made = self._conn.recv()
                break
            except (EOFError, OSError):
                self._restart()
        want = self.owed.popleft()
        got = Request(made.index, made.seed, made.decision, made.avoid)
        assert got == want, f"generator answered {got} for {want}"
        if made.case is not None:
            made.case.model = onnx.load_from_string(made.model_bytes)
        made.started = time.perf_counter()  # the campaign's time for it starts on arrival
        return made

    def cpu_seconds(self) -> float:
        """CPU time the generator process has used so far (0 when it is not running)."""
        if self._proc is None or self._proc.poll() is not None:
            return 0.0
        return process_cpu_seconds(self._proc.pid)

    def _restart(self) -> None:
        self.restarts += 1
        if self.restarts > 10:
            raise BackendError("the generator process keeps dying")
        self._kill()
        self.start()

    def _kill(self) -> None:
        kill(self._proc, self._conn)
        self._proc = self._conn = None

    def close(self) -> None:
        stop(self._proc, self._conn)
        self._proc = self._conn = None


if __name__ == "__main__":
    # Served from the module under its own name, not __main__: the ``Made`` records it
    # sends must unpickle as onnxfuzz.run.pregen.Made in the campaign process.
    from onnxfuzz.run import pregen

    pregen.serve(Connection(int(sys.argv[1])))
