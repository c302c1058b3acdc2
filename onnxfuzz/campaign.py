"""Differential fuzzing campaigns: generate, run on every backend, judge, store, bundle.

Test ``i`` of a campaign with seed ``S`` is always the model of seed ``S + i`` with the
inputs of that seed, so a campaign is a deterministic function of its options: killed and
resumed, it ends with the same counts as one that never stopped.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from onnxfuzz import dtypes as dt
from onnxfuzz.assess import Assessed, assess, attribute
from onnxfuzz.backend import parse_backend
from onnxfuzz.bundle import Finding, sync_meta, write_bundle
from onnxfuzz.config import DEFAULT_OPSET, Config
from onnxfuzz.errors import BackendError, UsageError
from onnxfuzz.generator import Case, Generator
from onnxfuzz.oracle import CRASH_V, MISMATCH_V, OK_V, TIMEOUT_V, OracleConfig, Verdict
from onnxfuzz.pregen import Pregenerator
from onnxfuzz.probe import Support, fully_unsupported, lacking, unsupported_pairs
from onnxfuzz.reduction.reduce import Reduced, reduce_case
from onnxfuzz.reduction.reproduce import Reproducer, Target
from onnxfuzz.sandbox import ERROR, UNSUPPORTED, BackendInfo, Outcome, Worker, busy_seconds
from onnxfuzz.signature import bug_id
from onnxfuzz.store import Result, Store

MIN_OPSET, MAX_OPSET = 13, 26
GENERATOR_ERROR = "generator-error"  # onnxfuzz failed to build the test's model
MAX_REDUCED = 3  # hits of one signature that are reduced (their patterns split bugs)


@dataclass
class CampaignOptions:
    backends: list[str]
    reference: str | None = None
    tests: int | None = None
    seconds: float | None = None
    seed: int = 0
    workers: int = 1
    timeout: float = 30.0
    memory_mb: float = 8192.0
    config: str | None = None
    atol: float | None = None
    rtol: float | None = None
    generator: dict[str, Any] = field(default_factory=dict)  # Config fields, opset optional
    probe: str = "classify"  # classify | exclude | off (see onnxfuzz.probe)
    reduce: bool = True  # reduce findings (and dedup bugs after reduction)
    reduce_budget: float = 30.0  # seconds per reduction
    pregen: bool | None = None  # generate in a process of its own (None: when cores allow)

    @property
    def reference_label(self) -> str:
        return self.reference or self.backends[0]


def negotiate_opset(infos: list[BackendInfo], wanted: int | None) -> int:
    """An opset inside every backend's supported range (and onnxfuzz's 13..26)."""
    lo = max([MIN_OPSET] + [i.opsets[0] for i in infos])
    hi = min([MAX_OPSET] + [i.opsets[1] for i in infos])
    if lo > hi:
        ranges = ", ".join(f"{i.label} {i.opsets[0]}..{i.opsets[1]}" for i in infos)
        raise UsageError(f"--backend: no opset in 13..26 that every backend supports ({ranges})")
    if wanted is not None:
        if not lo <= wanted <= hi:
            narrow = [i.label for i in infos if not i.opsets[0] <= wanted <= i.opsets[1]]
            raise UsageError(
                f"--opset {wanted}: outside the range of {', '.join(narrow)}; "
                f"every selected backend supports {lo}..{hi}"
            )
        return wanted
    preferred = [i.preferred for i in infos if i.preferred is not None]
    return max(lo, min([DEFAULT_OPSET, hi] + preferred))


@dataclass
class Lane:
    """One executor: a worker per backend. Lanes run tests concurrently.

    A lane has at most one test in flight on its workers (``start``, then ``wait``). Anything
    else that needs the workers (localizing a mismatch, reducing a bug) first ``settle``s:
    the test in flight is collected and kept for ``wait``."""

    workers: dict[str, Worker]
    _inflight: dict[str, Outcome | None] | None = None
    _done: dict[str, Outcome] | None = None

    def start(self, model_bytes: bytes, inputs: dict) -> None:
        """Start a test on every backend at once (they are separate processes)."""
        assert self._inflight is None and self._done is None, "one test in flight per lane"
        self._inflight = {label: w.submit(model_bytes, inputs) for label, w in self.workers.items()}

    def settle(self) -> None:
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

    def run_all(self, model_bytes: bytes, inputs: dict) -> dict[str, Outcome]:
        """Run a model on every backend now (after the test in flight, if any)."""
        self.settle()
        kept, self._done = self._done, None
        self.start(model_bytes, inputs)
        out = self.wait()
        self._done = kept
        return out

    def execute(self, label: str, model_bytes: bytes, inputs: dict) -> Outcome:
        """Run a model on one backend now (after the test in flight, if any)."""
        self.settle()
        return self.workers[label].execute(model_bytes, inputs)

    def close(self) -> None:
        for w in self.workers.values():
            w.close()


@dataclass
class Judged:
    results: list[Result]
    findings: list[Finding]
    probe_s: float = 0.0  # backend compile+run spent localizing mismatches


@dataclass
class Prepared:
    index: int
    case: Case | None  # None: generation failed (error)
    inputs: dict
    model_bytes: bytes
    started: float
    seed: int = 0
    error: str | None = None


@dataclass
class Progress:
    tests: int = 0
    started: float = field(default_factory=time.perf_counter)
    verdicts: Counter = field(default_factory=Counter)
    ops: Counter = field(default_factory=Counter)
    bugs: int = 0
    wall: float = 0.0
    backend: float = 0.0  # wall time during which a backend compiled or ran
    backend_cpu: float = 0.0  # CPU time of the backends' compile + run
    reduction: float = 0.0  # seconds spent reducing new bugs
    last: str = ""


class Campaign:
    def __init__(self, out: Path, opts: CampaignOptions | None, resume: bool) -> None:
        self.out = out
        db = out / "campaign.db"
        if resume:
            if not db.exists():
                raise UsageError(f"--resume: {out} holds no campaign (no campaign.db)")
            self.store = Store(db)
            stored = self.store.get_meta("options")
            if opts is not None:  # a new budget may extend the stored one
                stored["tests"] = opts.tests if opts.tests is not None else stored["tests"]
                stored["seconds"] = opts.seconds if opts.seconds is not None else stored["seconds"]
            self.opts = CampaignOptions(**stored)
        else:
            if db.exists():
                raise UsageError(
                    f"--out: {out} already holds a campaign; pass --resume to "
                    "continue it or choose another --out"
                )
            if opts is None:
                raise UsageError("no campaign options")
            out.mkdir(parents=True, exist_ok=True)
            self.store = Store(db)
            self.opts = opts
            self.store.set_meta("options", asdict(opts))
        o = self.opts
        if not o.backends:
            raise UsageError("--backend: name at least two backends (or one with --reference)")
        self.labels = list(dict.fromkeys([o.reference_label] + o.backends))
        if len(self.labels) < 2:
            raise UsageError(
                "--backend: a differential campaign needs two backends, e.g. "
                "--backend ort --backend ort:opt=none"
            )
        for label in self.labels:
            parse_backend(label)  # syntax errors before anything starts
        self.oracle = OracleConfig.load(Path(o.config) if o.config else None, o.atol, o.rtol)
        self.progress = Progress()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_finish: dict[int, float] = {}
        self.lanes: list[Lane] = []
        self.infos: dict[str, BackendInfo] = {}
        self.pregen: Pregenerator | None = None

    # --- set-up ----------------------------------------------------------------------
    def start(self) -> None:
        o = self.opts
        for _ in range(max(1, o.workers)):
            workers = {
                label: Worker(parse_backend(label), o.timeout, o.memory_mb) for label in self.labels
            }
            lane = Lane(workers)
            self.lanes.append(lane)
            for label, w in workers.items():
                info = w.start()
                if info.available:
                    raise BackendError(f"backend {label} is not available here: {info.available}")
                self.infos[label] = info
        gen = dict(o.generator)
        opset = negotiate_opset(list(self.infos.values()), gen.pop("opset", None))
        if "dtypes" in gen and gen["dtypes"] is not None:
            gen["dtypes"] = frozenset(dt.BY_NAME[n] for n in gen["dtypes"])
        for key in ("ops", "exclude_ops"):
            if gen.get(key) is not None:
                gen[key] = frozenset(gen[key])
        self.cfg = Config(opset=opset, **{k: v for k, v in gen.items() if v is not None})
        # What each backend lacks, op by op and type by type (probed once, stored for
        # --resume): classifies its failures, or leaves ops out with probe="exclude".
        support = self.store.get_meta("probe_unsupported")
        if support is None:
            support = {}
            if o.probe != "off":
                for label, w in self.lanes[0].workers.items():
                    support[label] = unsupported_pairs(w, self.cfg)
            self.store.set_meta("probe_unsupported", support)
        self.support: dict[str, Support] = support
        excluded = {}
        if o.probe == "exclude":
            for label, pairs in support.items():
                for op_type, why in fully_unsupported(pairs, self.cfg).items():
                    excluded.setdefault(op_type, f"{label}: {why}")
        self.excluded = excluded
        if excluded:
            self.cfg = replace(self.cfg, exclude_ops=self.cfg.exclude_ops | set(excluded))
        self.generator = Generator(self.cfg)
        if self._use_pregen():
            self.pregen = Pregenerator(self.cfg)
            self.pregen.start()
        self.store.set_meta("versions", {k: i.version for k, i in self.infos.items()})
        self.store.set_meta("opset", opset)

    def _use_pregen(self) -> bool:
        """Generate in a process of its own when there is a core for it: one per worker,
        one for this process, one for the generator. With fewer, the processes only take
        turns on the same cores and the extra hand-over costs more than it hides
        (measured on 2 cores: ORT vs ORT 384 tests/s with it, 434 without)."""
        if self.opts.pregen is not None:
            return self.opts.pregen
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        return cores >= len(self.labels) * len(self.lanes) + 2

    def close(self) -> None:
        if self.pregen is not None:
            self.pregen.close()
        for lane in self.lanes:
            lane.close()
        sync_meta(self.out, self.store.bugs())
        self.store.close()

    # --- the loop --------------------------------------------------------------------
    def _ids(self) -> Iterator[int]:
        done = self.store.done_ids()
        o = self.opts
        i = 0
        while o.tests is None or i < o.tests:
            if i not in done:
                yield i
            i += 1

    def run(self, on_update: Callable[[Progress], None] | None = None) -> Progress:
        o = self.opts
        deadline = time.perf_counter() + o.seconds if o.seconds else None
        ids = self._ids()
        ids_lock = threading.Lock()

        def over() -> bool:
            return self._stop.is_set() or bool(deadline and time.perf_counter() >= deadline)

        def next_id() -> int | None:
            if over():
                return None
            with ids_lock:
                return next(ids, None)

        # With a generator process (onnxfuzz.pregen) tests are made a few ahead and handed
        # to the lanes in order; those still owed at a stop are not run (nor stored: a
        # resumed campaign makes them again). Without, each lane makes its next test while
        # its backends run the current one.
        pregen = self.pregen
        window = 2 + 2 * len(self.lanes)
        gen_lock = threading.Lock()

        def next_test() -> Prepared | None:
            if pregen is None:
                return self.prepare(i) if (i := next_id()) is not None else None
            with gen_lock:
                while len(pregen.owed) < window and (i := next_id()) is not None:
                    pregen.request(i, o.seed + i)
                if not pregen.owed or over():
                    return None
                m = pregen.receive()
            return Prepared(
                m.index, m.case, m.inputs, m.model_bytes, time.perf_counter(), m.seed, m.error
            )

        errors: list[BaseException] = []

        def lane_loop(lane: Lane) -> None:
            try:
                pipelined(lane)
            except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                errors.append(e)
                self._stop.set()

        def pipelined(lane: Lane) -> None:
            # Pipelined: while the backends run test i, test i+1 is generated, and test i-1
            # is judged and stored. A mismatch's localization and a new bug's reduction need
            # the workers: the lane settles the test in flight first.
            current = next_test()
            self._start(lane, current)
            while current is not None:
                nxt = next_test()
                if current.case is None:  # generation failed: nothing ran
                    self._start(lane, nxt)
                    self.finish_error(current)
                    current = nxt
                    continue
                outcomes = lane.wait()
                self._start(lane, nxt)
                judged = self.judge_all(current.case, current.inputs, outcomes, lane)
                self.finish(current, outcomes, judged, lane if judged.findings else None)
                current = nxt

        threads = [
            threading.Thread(target=lane_loop, args=(lane,), daemon=True) for lane in self.lanes
        ]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.25)
                if on_update:
                    on_update(self.progress)
        except KeyboardInterrupt:
            self._stop.set()
            for t in threads:
                t.join()
        if on_update:
            on_update(self.progress)
        if errors:
            raise errors[0]
        return self.progress

    def prepare(self, i: int) -> Prepared:
        t0 = time.perf_counter()
        seed = self.opts.seed + i
        try:
            case = self.generator.generate(seed)
            inputs = case.make_inputs(seed)
        except Exception as e:  # noqa: BLE001 - a spec bug must not end the campaign
            return Prepared(i, None, {}, b"", t0, seed, f"{type(e).__name__}: {e}")
        return Prepared(i, case, inputs, case.model.SerializeToString(), t0, seed)

    @staticmethod
    def _start(lane: Lane, t: Prepared | None) -> None:
        if t is not None and t.case is not None:
            lane.start(t.model_bytes, t.inputs)

    def finish_error(self, t: Prepared) -> None:
        """A test whose model could not be generated (a bug in onnxfuzz, reported with its
        seed): stored with the verdict ``generator-error`` so that it is counted once."""
        with self._lock:
            with open(self.out / "generator-errors.log", "a") as log:
                log.write(f"test {t.index} seed {t.seed}: {t.error}\n")
            self.store.record(
                t.index,
                t.seed,
                [],
                self.cfg.opset,
                0.0,
                0.0,
                [Result("onnxfuzz", GENERATOR_ERROR, detail=t.error or "")],
            )
            self.progress.tests += 1
            self.progress.verdicts[GENERATOR_ERROR] += 1

    def run_test(self, lane: Lane, i: int) -> None:
        """One test, start to end (no pipelining)."""
        p = self.prepare(i)
        if p.case is None:
            self.finish_error(p)
            return
        outcomes = lane.run_all(p.model_bytes, p.inputs)
        self.finish(p, outcomes, self.judge_all(p.case, p.inputs, outcomes, lane), lane)

    def finish(
        self, t: Prepared, outcomes: dict[str, Outcome], judged: Judged, lane: Lane | None = None
    ) -> None:
        """Store a judged test; reduce and bundle its new bugs first (with ``lane``)."""
        assert t.case is not None
        results, findings = judged.results, judged.findings
        # Backends run in parallel: the test's backend time is the wall time during which
        # any of them compiled or ran.
        backend_s = busy_seconds(list(outcomes.values())) + judged.probe_s
        with self._lock:
            known = self.store.bug_keys() if findings else set()
            by_backend = {r.backend: r for r in results}
            reducing = 0.0  # reduction is its own phase, not fuzz-loop time
            for f in findings:
                t_red = time.perf_counter()
                key, reduced = self.bug_key(f, lane)
                reducing += time.perf_counter() - t_red
                r = by_backend[f.backend]
                r.bug, r.pattern = key, key.rsplit("|", 1)[1]
                if key not in known:
                    f.bug_id = bug_id(key)
                    write_bundle(self.out, f, reduced)  # before the commit: a kill re-runs it
                    known.add(key)
            now = time.perf_counter()
            # A test's wall time runs from the end of the previous one (pipelined lanes
            # overlap preparation with the backends' work).
            wall = now - max(t.started, self._last_finish.get(threading.get_ident(), 0.0))
            wall -= reducing
            self._last_finish[threading.get_ident()] = now
            self.progress.reduction += reducing
            self.store.record(
                t.index, t.case.seed, t.case.ops, self.cfg.opset, wall, backend_s, results
            )
            p = self.progress
            p.tests += 1
            p.wall += wall
            p.backend += backend_s
            p.backend_cpu += sum(o.cpu_s for o in outcomes.values())
            p.ops.update(t.case.ops)
            for r in results:
                p.verdicts[r.verdict] += 1
            p.bugs = len(known) if findings else p.bugs
            p.last = ", ".join(t.case.ops[:6])

    def judge_all(
        self, case: Case, inputs: dict, outcomes: dict[str, Outcome], lane: Lane | None = None
    ) -> Judged:
        ref_label = self.opts.reference_label
        run_all = run_one = None
        if lane is not None:

            def run_all(data: bytes) -> dict[str, Outcome]:
                return lane.run_all(data, inputs)

            def run_one(label: str, data: bytes, feeds: dict) -> Outcome:
                return lane.execute(label, data, feeds)

        for label, o in list(outcomes.items()):
            # A failure on a model with an (op, type) the probe found the backend lacks is
            # missing support, not a bug.
            why = lacking(case.model, self.support.get(label, {})) if o.status == ERROR else None
            if why is not None:
                outcomes[label] = replace(
                    o, status=UNSUPPORTED, message=f"probe: {why}\n{o.message}"
                )
        assessed = assess(case.model, inputs, outcomes, ref_label, self.oracle, run_all, run_one)
        attribution = None
        if any(a.verdict.verdict == MISMATCH_V for a in assessed.values()):
            attribution = attribute(case.model, outcomes, ref_label, self.oracle)
        if attribution is not None and attribution.reference_odd:
            # The others agree and the reference departs: blame the reference, localized
            # against a backend of the majority, rather than every other backend.
            anchor = sorted(attribution.majority)[0]
            assessed[ref_label] = assess(
                case.model, inputs, outcomes, anchor, self.oracle, run_all, run_one
            )[ref_label]
            for label in attribution.majority:
                if assessed[label].verdict.verdict == MISMATCH_V:
                    assessed[label] = Assessed(
                        Verdict(OK_V, message=f"agrees with the majority; {ref_label} departs"),
                        None,
                    )
        results, findings = [], []
        for label, a in assessed.items():
            v = a.verdict
            suspect = None
            if v.verdict in (CRASH_V, TIMEOUT_V) or (v.verdict == MISMATCH_V and a.witness):
                suspect = label
            elif v.verdict == MISMATCH_V and attribution is not None:
                suspect = label if label not in attribution.majority else None
            results.append(
                Result(label, v.verdict, v.stage, a.signature, None, v.message[:2000], suspect)
            )
            if a.signature is None:
                continue
            reference = ref_label
            if a.witness is not None:  # departs from the declaration; the witness meets it
                reference = a.witness
            elif label == ref_label and attribution is not None and attribution.reference_odd:
                reference = sorted(attribution.majority)[0]
            findings.append(
                Finding(
                    signature=a.signature,
                    bug_id=bug_id(a.signature),
                    verdict=v,
                    backend=label,
                    reference=reference,
                    seed=case.seed,
                    opset=self.cfg.opset,
                    ops=case.ops,
                    model=case.model,
                    inputs=inputs,
                    outcomes={k: outcomes[k] for k in dict.fromkeys([reference, label])},
                    versions={k: i.version for k, i in self.infos.items()},
                    tolerance=dict(self.oracle.tolerance),
                    timeout=self.opts.timeout,
                    extra={
                        "suspect": suspect,
                        "backends": list(outcomes),
                        "odd_one_out": bool(
                            attribution and attribution.reference_odd and label == ref_label
                        ),
                    },
                    case=case,
                )
            )
        return Judged(results, findings, sum(a.probe_s for a in assessed.values()))

    # --- bugs: dedup after reduction --------------------------------------------------
    def bug_key(self, f: Finding, lane: Lane | None) -> tuple[str, Reduced | None]:
        """A finding's bug: its signature and the op pattern its reduced model ends in.
        The first few hits of a signature are reduced; later ones join its first bug."""
        hits = self.store.db.execute(
            "SELECT COUNT(*) FROM results WHERE signature=?", (f.signature,)
        ).fetchone()[0]
        if self.opts.reduce and lane is not None and f.case is not None and hits < MAX_REDUCED:
            labels = list(dict.fromkeys([f.reference, f.backend]))
            lane.settle()  # the reduction uses the workers
            rep = Reproducer(
                {k: lane.workers[k] for k in labels},
                Target(f.backend, f.reference, f.signature),
                self.oracle,
            )
            reduced = reduce_case(self.generator, f.case, rep, self.opts.reduce_budget)
            return f"{f.signature}|{reduced.pattern}", reduced
        keys = self.store.keys_of(f.signature)
        return (keys[0] if keys else f"{f.signature}|unreduced"), None


def summary_rows(store: Store) -> list[dict[str, Any]]:
    rows = []
    for b in store.bugs():
        rows.append(
            {
                "id": b["id"],
                "verdict": b["verdict"],
                "stage": b["stage"],
                "backend": b["backend"],
                "suspect": b["suspect"],
                "pattern": b["pattern"],
                "hits": b["hits"],
                "first_test": b["first_test"],
                "first_seen": b["first_seen"],
                "seeds": json.loads(b["seeds"]),
            }
        )
    return rows
