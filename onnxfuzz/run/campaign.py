"""Differential fuzzing campaigns: generate, run on every backend, judge, store, bundle.

Test ``i`` of a campaign with seed ``S`` is always the model of seed ``S + i`` with the
inputs of that seed, so a campaign is a deterministic function of its options: killed and
resumed, it ends with the same counts as one that never stopped.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any, ClassVar

import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.backend import display_names, parse_backend
from onnxfuzz.errors import UsageError
from onnxfuzz.execute.messages import Test
from onnxfuzz.execute.pool import BackendPool, Spares
from onnxfuzz.execute.sandbox import BackendInfo, Outcome, Stage, Status, busy_seconds
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.build.guide import Decision, Guided
from onnxfuzz.generate.build.seeds import blocks_from_record, blocks_to_record, lift_folder
from onnxfuzz.generate.build.single_op import single_op_pairs
from onnxfuzz.generate.corpus.write import corpus_mark
from onnxfuzz.generate.lang.config import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET, Config
from onnxfuzz.generate.measure.metrics import Diversity, Features, features
from onnxfuzz.judge.attribution import blame
from onnxfuzz.judge.budget import repro_tolerance
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import Judgement, OracleConfig, Verdict
from onnxfuzz.judge.second_opinion import needed, second_opinion
from onnxfuzz.judge.signature import (
    blamed_op,
    bug_id,
    family,
    kind_twins,
    root_signature,
    same_fault,
)
from onnxfuzz.reduce.neighbours import MAX_VARIANTS, try_neighbours
from onnxfuzz.reduce.precursor import find_precursor
from onnxfuzz.reduce.reducer import Reduced, reduce_case
from onnxfuzz.reduce.reproduce import (
    CONTAINERS,
    Reproducer,
    Target,
    hang_try_limit,
)
from onnxfuzz.run.avoidance import Avoidance, AvoidSet, StoredTest
from onnxfuzz.run.confirm import (
    CONFIRM_RUNS,
    EARLIER_MAX,
    Confirmation,
    Confirmer,
    Reproducibility,
)
from onnxfuzz.run.culprit import annotate
from onnxfuzz.run.feedback_policy import WAIT_S, CampaignFeedback
from onnxfuzz.run.optcov import OptimizationCoverage, fired_keys, stderr_and_log
from onnxfuzz.run.pregen import Made, Makers, Pregenerator, make
from onnxfuzz.run.probe import (
    Support,
    fully_unsupported,
    lacked_features_of,
    lacking,
    probe_backend,
)
from onnxfuzz.run.steer import MODES, Steering, optimization_keys, reward_keys
from onnxfuzz.store.bundle import Finding, plain_hook, sync_meta, write_bundle
from onnxfuzz.store.db import (
    EVALUATOR_SUSPECTS,
    FOLLOW_UPS,
    FOLLOWS,
    NOT_REPRODUCIBLE,
    REDUCER_LOG,
    REDUCTION_FAILURES,
    REDUCTION_STOPPED,
    REFERENCE_BUGS,
    REFERENCE_ONLY,
    SETTLED_PATTERNS,
    STATE,
    CampaignLock,
    Result,
    Store,
)
from onnxfuzz.store.folders import writable_folder
from onnxfuzz.store.known import (
    AVOID_AFTER,
    KnownFile,
    Trigger,
    bundle_trigger,
    named_triggers,
    trigger_of,
)
from onnxfuzz.store.report import print_summary

# Verdicts of a backend that did not compile and run the test: its model is no coverage.
NOT_RUN = frozenset({Verdict.UNSUPPORTED, Verdict.GENERATOR_ERROR, Verdict.TOO_COSTLY})
DIVERSITY_EVERY = 5.0  # seconds between writes of the diversity to campaign.db
CATCH_UP_MAX = 5000  # on resume, tests stored after the last write that are regenerated
MAX_REDUCED = 3  # hits of one signature that are reduced (their patterns split bugs)
# Hits of a signature confirmed as not reproducible after which later ones are counted as
# such without running them again (a confirmation with its bisection costs seconds to
# minutes of a slow compiler).
GIVE_UP_AFTER = 3
# Replays of earlier models (a confirmation that no fresh run re-created: a stale cache?)
# that re-created nothing of a signature family, after which the family's later findings
# that no fresh run shows are not reproducible without one. A flaky kernel's hits are
# mostly new signatures of one family (where its wrong value is localized varies): each
# replayed up to 96 models in a fresh process, up to 75 % of a campaign's wall time.
REPLAY_GIVE_UP = 3
# HANG_TRY_FLOOR, HANG_TRY_FACTOR (reduce.reproduce): per-try time limit reducing a hang
TRY_FLOOR, TRY_FACTOR = 10.0, 10.0  # per-try time limit reducing any other finding
# Tests a lane keeps started: each worker holds the next test while it runs one, and goes
# on to it without waiting for this process to judge and store (execute.sandbox).
AHEAD = 2
# Tests a lane's generator process makes ahead of what the lane has taken: enough that the
# next one is ready when a test ends, few enough that a stop discards little work.
MADE_AHEAD = AHEAD + 2
# Seconds of finished tests committed to campaign.db in one transaction (a kill -9 loses at
# most these: not counted, they run again on resume, as a test in flight does).
COMMIT_EVERY = 0.2
WAIT = "wait"  # the guide needs rewards of tests still running (onnxfuzz.run.steer)
AVOIDANCE = "avoidance"  # campaign.db meta: the triggers avoided, from which test on
PROBE_SHARE = 0.5  # the most of --time the support probe may take


def same_crash(filed: list[tuple[str, str, str]], signature: str, pattern: str) -> list[str]:
    """The keys of ``filed`` bugs (key, signature, pattern: ``Store.crash_keys``) a crash or
    hang of ``signature`` reduced to ``pattern`` is one with: of its family
    (``judge.signature.family``), reduced to the same ops or to some of them (a model of
    those alone fails so already: the reduction kept more, as a word of the message that
    depends on another node, an input's rank, held them; a Gather crash was 7 bundles,
    Gather alone and Reshape, LSTM, Conv, ... -> Gather). Those reduced to the same ops
    first, then the fewest ops; the first filed first."""
    mine = _ops_of(pattern)
    kin = _kin(filed, signature) if mine is not None else []
    found = [(ops != mine, ops.total(), k, key) for k, (key, ops) in enumerate(kin) if ops <= mine]
    return [key for *_, key in sorted(found)]


def wider_crashes(filed: list[tuple[str, str, str]], signature: str, pattern: str) -> list[str]:
    """The keys of ``filed`` bugs of ``signature``'s family reduced to ``pattern``'s ops and
    more: those a bug reduced to ``pattern`` takes over (``same_crash`` the other way)."""
    mine = _ops_of(pattern)
    kin = _kin(filed, signature) if mine is not None else []
    return [key for key, ops in kin if mine < ops]


def _kin(filed: list[tuple[str, str, str]], signature: str) -> list[tuple[str, Counter[str]]]:
    """(key, reduced ops) of the ``filed`` bugs of ``signature``'s family reduced to ops."""
    fam = family(signature)
    return [
        (key, ops)
        for key, sig, pat in filed
        if (ops := _ops_of(pat)) is not None and family(sig) == fam
    ]


def steering_note(excluded: dict[str, str], pairs: int, forms: int) -> str:
    """One line on what the probe keeps out of the tests, said once at the start (it
    showed only in the HTML report: a user saw no Einsum tested and no reason why)."""
    said = []
    if excluded:
        names = sorted(excluded)
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        said.append(f"{len(names)} op{'s' if len(names) > 1 else ''} in every type ({shown})")
    if pairs:
        said.append(f"{pairs} (op, element type) pairs")
    if forms:
        said.append(f"{forms} forms of ops (attribute values, computed weights)")
    return (
        f"probe: left out {' and '.join(said)} that some backend lacks, so that every test "
        "compares every backend (`onnxfuzz report` lists them and why; --probe classify "
        "tests them anyway)"
    )


def fitting_key(keys: list[str], ops: Sequence[str]) -> str:
    """Of the bugs ``keys`` filed for one signature (the first filed first), the first
    whose reduced ops the test's ``ops`` all hold: the bug a hit that is not reduced is
    counted for (a bundle of Reshape -> Gather got the hits of tests with no Reshape)."""
    have = Counter(ops)
    for key in keys:
        mine = _ops_of(key.rsplit("|", 1)[1])
        if mine is not None and mine <= have:
            return key
    return keys[0]


def _ops_of(pattern: str) -> Counter[str] | None:
    """A reduced model's ops (``reduce.measure.op_pattern``: ``Add+Mul``) as a multiset;
    None for a pattern that names no reduced model (unreduced, intermittent, ...)."""
    if pattern in (*SETTLED_PATTERNS, REFERENCE_ONLY, "unreduced", "-", ""):
        return None
    return Counter(pattern.split("+"))


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
    probe: str = "steer"  # steer | classify | exclude | off (see onnxfuzz.run.probe)
    probe_cache: bool = True  # reuse and extend the probe's cache (False: probe afresh)
    reduce: bool = True  # reduce findings (and dedup bugs after reduction)
    reduce_budget: float = 30.0  # seconds per reduction
    pregen: bool | None = None  # generate in processes of their own (None: the default)
    # What steers generation (onnxfuzz.run.steer): "mcts", "frontier", or "random" (what
    # campaigns stored before the guide existed did)
    guide: str = "random"
    # a folder of user models to mutate (onnxfuzz.generate.build.seeds)
    seed_models: str | None = None
    mutants: float = 0.0  # guided tests that are mutants of interesting earlier tests
    known: str | None = None  # a known-findings file (onnxfuzz.store.known)
    avoid_after: int = AVOID_AFTER  # hits of a known family after which its trigger is avoided
    # fresh runs of a finding before it is filed (onnxfuzz.run.confirm; 0: file unconfirmed)
    confirm: int = CONFIRM_RUNS
    # with one reference and one target, reduce failures of the reference alone too
    reduce_reference: bool = False
    # one-change variants of each new bug's reduced model run to say what its failure
    # depends on (onnxfuzz.reduce.neighbours; 0: none)
    neighbours: int = MAX_VARIANTS

    @property
    def reference_label(self) -> str:
        return self.reference or self.backends[0]


# Flags a resumed campaign may change: its budget and how it runs, never what it tests.
RESUMABLE_SETTINGS = (
    "workers",
    "timeout",
    "memory_mb",
    "reduce",
    "reduce_budget",
    "neighbours",
)


@dataclass
class Resumed:
    """What a ``--resume`` changes: ``more_tests`` added to the budget (to the tests done
    when the campaign had only a time budget), a new time budget for this run, and
    operational settings (``RESUMABLE_SETTINGS``; others would change what is tested)."""

    more_tests: int | None = None
    seconds: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def apply(self, stored: CampaignOptions, done: int) -> CampaignOptions:
        unknown = sorted(set(self.settings) - set(RESUMABLE_SETTINGS))
        if unknown:
            raise UsageError(f"--resume: {', '.join(unknown)} cannot change on resume")
        opts = replace(stored, **self.settings)
        if self.more_tests is not None:
            base = stored.tests if stored.tests is not None else done
            opts = replace(opts, tests=base + self.more_tests)
        if self.seconds is not None:
            opts = replace(opts, seconds=self.seconds)
        return opts


def negotiate_opset(infos: list[BackendInfo], wanted: int | None) -> int:
    """An opset inside every backend's supported range and onnxfuzz's (MIN..MAX_OPSET)."""
    lo = max([MIN_OPSET] + [i.opsets[0] for i in infos])
    hi = min([MAX_OPSET] + [i.opsets[1] for i in infos])
    if lo > hi:
        ranges = ", ".join(f"{i.label} {i.opsets[0]}..{i.opsets[1]}" for i in infos)
        raise UsageError(
            f"--backend: no opset in {MIN_OPSET}..{MAX_OPSET} that every backend supports "
            f"({ranges})"
        )
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
class Judged:
    results: list[Result]
    findings: list[Finding]
    probe_s: float = 0.0  # backend compile+run spent localizing mismatches


@dataclass
class Progress:
    tests: int = 0
    started: float = field(default_factory=time.perf_counter)
    verdicts: Counter = field(default_factory=Counter)
    ops: Counter = field(default_factory=Counter)
    bugs: int = 0
    backend_cpu: float = 0.0  # CPU time of the backends' compile + run
    reduction: float = 0.0  # seconds spent reducing new bugs (confirmation included)
    confirmed: int = 0  # findings re-run in fresh processes before filing
    confirming: float = 0.0  # seconds those confirmations took (part of ``reduction``)
    unreplayed: int = 0  # not reproducible without a replay of earlier models (REPLAY_GIVE_UP)
    last: str = ""
    interrupted: bool = False  # stopped by Ctrl-C: the tests in flight run again on resume
    busy: float = 0.0  # wall time in which any backend of any lane compiled or ran
    total: int | None = None  # tests this run has to do (None: a time budget only)
    seconds: float | None = None  # this run's time budget
    _busy_end: float = 0.0
    _reducing: list[tuple[float, float]] = field(default_factory=list)
    # What ``overhead``'s wall time leaves out, as the summary says it.
    wall_note: ClassVar[str] = "reduction excluded"

    def add_busy(self, outcomes: list[Outcome], extra: float = 0.0) -> None:
        """Extend ``busy`` by the part of these outcomes' compile+run intervals not yet
        covered (lanes and backends overlap; tests arrive roughly in time order) and not
        inside a reduction (its time is not the loop's), plus ``extra`` backend seconds
        spent localizing."""
        for a, b in sorted((o.started, o.started + o.backend_s) for o in outcomes):
            a = max(a, self._busy_end)
            if b > a:
                inside = sum(max(0.0, min(b, r1) - max(a, r0)) for r0, r1 in self._reducing)
                self.busy += b - a - inside
                self._busy_end = b
        if self._reducing and self._reducing[0][1] <= self._busy_end:
            # windows wholly before what is covered can clip nothing any more
            self._reducing = [w for w in self._reducing if w[1] > self._busy_end]
        self.busy += extra

    def reduced(self, began: float, ended: float) -> None:
        """A reduction ran from ``began`` to ``ended``: not fuzz-loop time."""
        self.reduction += ended - began
        self._reducing.append((began, ended))

    def eta(self, now: float | None = None) -> float | None:
        """Seconds until the budget is spent, at the rate so far (None: not known yet)."""
        elapsed = (now if now is not None else time.perf_counter()) - self.started
        left = []
        if self.total is not None and self.tests and elapsed > 0:
            left.append(max(0, self.total - self.tests) * elapsed / self.tests)
        if self.seconds is not None:
            left.append(max(0.0, self.seconds - elapsed))
        return min(left) if left else None

    def overhead(self, now: float | None = None) -> float:
        """Share of this run's wall time (reduction excluded) in which no backend worked."""
        wall = (now if now is not None else time.perf_counter()) - self.started - self.reduction
        return max(0.0, 1.0 - self.busy / wall) if wall > 0 else 0.0


@dataclass
class IdSet:
    """A set of test ids, compact for a campaign's (almost) consecutive ones: every id
    below ``below``, and ``extra`` above it."""

    below: int = 0
    extra: set[int] = field(default_factory=set)

    def add(self, i: int) -> None:
        if i == self.below:
            self.below += 1
            while self.below in self.extra:
                self.extra.remove(self.below)
                self.below += 1
        elif i > self.below:
            self.extra.add(i)

    def __contains__(self, i: int) -> bool:
        return i < self.below or i in self.extra

    def __len__(self) -> int:
        return self.below + len(self.extra)

    def to_record(self) -> dict[str, Any]:
        return {"below": self.below, "extra": sorted(self.extra)}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> IdSet:
        return cls(int(rec["below"]), {int(i) for i in rec["extra"]})


class CampaignDiversity:
    """The diversity of a campaign's models (``onnxfuzz.generate.measure.metrics``): over every
    generated test, and per backend over the tests it compiled and ran (a model it
    rejected is no coverage of it). ``tests``: the ids counted, so that a resume after a
    kill counts the tests stored after the last write (campaign.db's ``diversity``)."""

    def __init__(self, labels: list[str]) -> None:
        self.all = Diversity()
        self.backends = {label: Diversity() for label in labels}
        self.tests = IdSet()

    def add(self, test_id: int, f: Features | None, verdicts: dict[str, str]) -> None:
        """Count test ``test_id`` (``f`` None: no model was generated)."""
        self.tests.add(test_id)
        if f is None:
            return
        self.all.add_features(f)
        for label, verdict in verdicts.items():
            d = self.backends.get(label)
            if d is not None and verdict not in NOT_RUN:
                d.add_features(f)

    def summary(self) -> dict[str, Any]:
        """The figures alone (``Diversity.summary``), small enough to keep one per write."""
        return {
            "all": self.all.summary(),
            "backends": {k: d.summary() for k, d in self.backends.items()},
        }

    def to_record(self) -> dict[str, Any]:
        return {
            "all": self.all.to_record(),
            "backends": {k: d.to_record() for k, d in self.backends.items()},
            "tests": self.tests.to_record(),
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any] | None, labels: list[str]) -> CampaignDiversity:
        cd = cls(labels)
        if rec:
            cd.all = Diversity.from_record(rec["all"])
            for label, r in rec["backends"].items():
                if label in cd.backends:
                    cd.backends[label] = Diversity.from_record(r)
            cd.tests = IdSet.from_record(rec["tests"])
        return cd


class Campaign:
    def __init__(
        self,
        out: Path,
        opts: CampaignOptions | None,
        resume: bool,
        changes: Resumed | None = None,
    ) -> None:
        """A new campaign in ``out`` with ``opts``, or (``resume``) the one stored there,
        with ``changes`` (a budget to add, operational settings). Nothing is written to
        ``out`` until ``start`` has validated every option and started every backend."""
        self.out = out
        db = out / "campaign.db"
        self.store: Store | None = None
        self.lock: CampaignLock | None = None
        if resume:
            if not db.exists():
                raise UsageError(f"--resume: {out} holds no campaign (no campaign.db)")
            self.lock = CampaignLock(out)
            try:
                self.store = Store.open_existing(db)
                stored = self.store.get_meta("options")
                if not isinstance(stored, dict):
                    raise UsageError(f"--resume: {db} holds no campaign options (not a campaign)")
                self.opts = CampaignOptions(**stored)
                if changes is not None:
                    self.opts = changes.apply(self.opts, len(self.store.done_ids()))
            except BaseException:
                if self.store is not None:
                    self.store.close()
                self.lock.release()
                raise
        else:
            if db.exists() and not _clear_if_empty(out):
                raise UsageError(
                    f"--out: {out} already holds a campaign; pass --resume to "
                    "continue it or choose another --out"
                )
            if (mark := corpus_mark(out)) is not None:
                # a campaign's bundles and database beside its cases: neither reads the mix
                raise UsageError(
                    f"--out: {out} holds a corpus of onnxfuzz generate ({mark.name}); a "
                    "campaign goes in a folder of its own: choose another --out"
                )
            held = [
                folder
                for folder in (out / "bugs", out / REFERENCE_BUGS)
                if folder.is_dir() and any(not p.name.startswith(".") for p in folder.iterdir())
            ]
            if held and not db.exists():
                # a new campaign's bundles would overwrite theirs under the same ids, and
                # mix with the rest (triage then counted one bundle, replay three)
                raise UsageError(
                    f"--out: {held[0]} holds bug bundles of another campaign, whose "
                    "campaign.db is gone; choose another --out, or move them away first"
                )
            if opts is None:
                raise UsageError("no campaign options")
            writable_folder(out, "--out")
            self.opts = opts
        o = self.opts
        if not o.backends:
            raise UsageError("--backend: name at least two backends (or one with --reference)")
        self.labels = list(dict.fromkeys([o.reference_label] + o.backends))
        if len(self.labels) < 2 and len(o.backends) > 1:
            raise UsageError(
                f"--backend: {o.backends[0]} is given twice; a differential campaign compares "
                "two different backends, e.g. --backend ort --backend ort:opt=none (or name "
                "one: --backend a=ort --backend b=ort)"
            )
        if len(self.labels) < 2:
            raise UsageError(
                "--backend: a differential campaign needs two backends, e.g. "
                "--backend ort --backend ort:opt=none"
            )
        for label in self.labels:
            parse_backend(label)  # syntax errors before anything starts
            plain_hook(label)  # and a user adapter's malformed plain_reproducer
        self.oracle = OracleConfig.load(Path(o.config) if o.config else None, o.atol, o.rtol)
        self.known = self._known_file()
        self.known_notes: list[str] = []  # what differs between the known file and this run
        self.avoidance: Avoidance | None = None  # triggers avoided as the campaign goes
        self._avoidance_saved = 0  # its updates written to campaign.db
        self.progress = Progress()
        self._fruitless: Counter[str] = Counter()  # family -> replays that re-created nothing
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last_finish: dict[int, float] = {}
        self._unfiled_ids: set[str] = set()  # bundles that failed to write, said once each
        self.lanes: list[BackendPool] = []
        self.spares = Spares()  # fresh processes for confirmations (fork servers), shared
        self.names: dict[str, str] = {}  # label -> display name, once the backends start
        self.infos: dict[str, BackendInfo] = {}
        self.pregens: list[Pregenerator] = []  # one generator process per lane, or none
        self.diversity = CampaignDiversity(self.labels)
        self._diversity_saved = 0.0  # time.perf_counter() of the last write
        self._diversity_loaded = False  # start() read the stored diversity
        self.steering: Steering | None = None  # None: every test is its seed's model
        self.seed_report: list[str] = []  # what --seed-models left out, model by model
        self.probe_notes: list[str] = []  # probes cut short by the time budget
        self.optcov: OptimizationCoverage | None = None  # once campaign.db is open
        # Which tests ask the backends whose feedback costs compile time (ort:feedback=new)
        # and, per started test, the backends it asked (onnxfuzz.run.feedback_policy).
        self.feedback: CampaignFeedback | None = None
        self._asked: dict[int, set[str]] = {}

    # --- set-up ----------------------------------------------------------------------
    def _known_file(self) -> KnownFile | None:
        """The known findings this campaign skips: read from ``--known`` before anything
        starts (a one-line error for a file that is missing, not one, or of none of the
        campaign's backends), or on resume the copy stored in campaign.db."""
        stored = self.store.get_meta("known") if self.store is not None else None
        if stored is not None:
            try:
                return KnownFile.from_record(stored, self.opts.known or "campaign.db")
            except (KeyError, TypeError, ValueError) as e:
                raise UsageError(
                    f"--resume: the known findings stored in campaign.db are unreadable ({e})"
                ) from None
        if not self.opts.known or self.store is not None:
            return None
        known = KnownFile.load(Path(self.opts.known))
        known.check_backends(self.labels)
        return known

    def _avoidance(self, fresh: bool) -> Avoidance | None:
        """With ``--known`` and ``--avoid-after`` K: the triggers of bugs hit K times are
        avoided during the campaign too (``onnxfuzz.run.avoidance``), counting the tests
        campaign.db holds. A campaign stored before that existed resumes without (its tests
        did not avoid)."""
        assert self.store is not None and self.known is not None
        o = self.opts
        stored = self.store.get_meta(AVOIDANCE)
        if o.avoid_after <= 0 or (not fresh and stored is None):
            return None
        avoidance = Avoidance(self.known, o.avoid_after)
        if stored is None:
            self.store.set_meta(AVOIDANCE, avoidance.record())
        learned = avoidance.load(stored)  # the triggers each stored test taught
        hits: dict[int, list[str]] = {i: [] for i in self.store.done_ids()}
        rows = self.store.db.execute(
            "SELECT test_id, backend, verdict, signature FROM results WHERE signature IS NOT NULL"
        )
        for i, backend, verdict, sig in rows:
            hits.setdefault(i, []).append(avoidance.unit_of(backend, verdict, sig))
        for i in sorted(hits):
            avoidance.report(i, StoredTest(hits[i], learned.get(i, {})))
        return avoidance

    def start(self, on_probe: Callable[[str, int, int], None] | None = None) -> None:
        """Start the lanes, probe what each backend supports (``on_probe(label, done,
        total)`` as it goes: a slow compiler's probe takes minutes), open campaign.db."""
        o = self.opts
        for _ in range(self._lane_count()):
            lane = BackendPool(self.labels, o.timeout, o.memory_mb, spares=self.spares)
            self.lanes.append(lane)
            self.infos.update(lane.start())
        self.names = display_names(self.labels, {k: i.name for k, i in self.infos.items()})
        opset = negotiate_opset(list(self.infos.values()), o.generator.get("opset"))
        for other in (o.generator.get("opset_mix") or ())[1:]:  # --opset 16,21: the others
            negotiate_opset(list(self.infos.values()), other)
        self.cfg = Config.from_record(o.generator, opset=opset)
        self.generator = Generator(self.cfg)  # checks the options against the specs
        fresh = self.store is None
        if self.store is None:  # every option is valid and every backend runs: write
            self.out.mkdir(parents=True, exist_ok=True)
            self.lock = CampaignLock(self.out)
            self.store = Store.create(self.out / "campaign.db", {"options": asdict(o)})
        elif self.store.get_meta("options") != asdict(o):
            self.store.set_meta("options", asdict(o))  # a resumed budget or settings
        self.optcov = OptimizationCoverage(self.names, stderr_and_log(self.out))
        self.optcov.resume(self.store)
        self.feedback = (
            CampaignFeedback(self.labels, o.seed, WAIT_S if o.guide == "optcov" else 0.0)
            or None
        )
        if self.feedback is not None and not fresh:
            self.feedback.resume(self.store.optimizations(), self.store.done_ids())
        # What each backend lacks, op by op and type by type (probed once, stored for
        # --resume): classifies its failures, or leaves ops out with probe="exclude".
        support = self.store.get_meta("probe_unsupported")
        if support is None:
            support = {}
            if o.probe != "off":
                # With --time the probe takes at most PROBE_SHARE of it (a hung adapter
                # once held it for 45 minutes); what it could not try counts as supported
                # and the next campaign goes on from the probe's cache.
                deadline = time.monotonic() + PROBE_SHARE * o.seconds if o.seconds else None
                for label, opset_cfg in product(self.labels, self._opset_configs()):
                    probed = probe_backend(
                        self.lanes,
                        label,
                        opset_cfg,
                        None
                        if on_probe is None
                        else partial(on_probe, self._probe_name(label, opset_cfg)),
                        deadline=deadline,
                        use_cache=o.probe_cache,
                    )
                    # --opset 16,21: what it lacks at any of them (steering then leaves a
                    # pair out at every opset)
                    lacks = support.setdefault(label, {})
                    for op_type, missing in probed.support.items():
                        lacks[op_type] = {**missing, **lacks.get(op_type, {})}
                    if not probed.complete:
                        self.probe_notes.append(
                            f"probe of {self.names[label]} stopped at the time limit after "
                            f"{probed.done}/{probed.total}: the rest counts as supported "
                            "(the next campaign goes on from the probe's cache)"
                        )
                # every pair probed, for the report's heatmap (its cells)
                self.store.set_meta("probe_pairs", single_op_pairs(self._opset_configs()[0]))
            self.store.set_meta("probe_unsupported", support)
        self.support: dict[str, Support] = support
        excluded: dict[str, str] = {}
        avoid: set[tuple[str, int]] = set()
        avoid_features: set[tuple[str, str]] = set()
        if o.probe in ("exclude", "steer"):
            probed = self.store.get_meta("probe_pairs")
            for label, pairs in support.items():
                for op_type, why in fully_unsupported(pairs, self.cfg, probed).items():
                    excluded.setdefault(op_type, f"{label}: {why}")
        if o.probe == "steer":  # and the (op, type) pairs a backend lacks
            avoid = {
                (op_type, dt.BY_NAME[name])
                for pairs in support.values()
                for op_type, missing in pairs.items()
                for name in missing
                if name in dt.BY_NAME and op_type not in excluded
            }
            # and the forms of an op a backend lacks (an attribute value, a computed weight)
            avoid_features = {f for pairs in support.values() for f in lacked_features_of(pairs)}
        if excluded or avoid or avoid_features:
            self.probe_notes.append(steering_note(excluded, len(avoid), len(avoid_features)))
        if self.known is not None:
            if self.store.get_meta("known") is None:  # kept for --resume and the export
                self.store.set_meta("known", self.known.to_record())
            self.known_notes = self.known.absent_notes(self.labels)
            self.known_notes += self.known.version_notes(
                {k: i.version for k, i in self.infos.items()}
            )
            # the triggers of families hit often enough: the tests go to new territory
            known_pairs, known_forms = self.known.avoided(o.avoid_after)
            avoid |= known_pairs
            avoid_features |= known_forms
            self.avoidance = self._avoidance(fresh)
        self.excluded = excluded
        if excluded or avoid or avoid_features:
            self.cfg = replace(
                self.cfg,
                exclude_ops=self.cfg.exclude_ops | set(excluded),
                avoid=self.cfg.avoid | frozenset(avoid),
                avoid_features=self.cfg.avoid_features | frozenset(avoid_features),
            )
            self.generator = Generator(self.cfg)
        seed_blocks = self._seed_blocks()
        self.guided = Guided(self.generator, blocks_from_record(seed_blocks))
        self.makers = Makers(self.guided, seed_blocks)
        if o.guide not in MODES:
            raise UsageError(f"--guide: one of {', '.join(MODES)}, got {o.guide!r}")
        steering = Steering(
            self.guided,
            o.seed,
            o.guide,
            list(seed_blocks),
            self.store.guide_rows(),
            mutants=o.mutants,
        )
        self.steering = steering if steering.active else None
        if self._use_pregen():
            self.pregens = [Pregenerator(self.cfg, seed_blocks=seed_blocks) for _ in self.lanes]
            for pregen in self.pregens:  # start together: each takes a second or two
                pregen.launch()
            for pregen in self.pregens:
                pregen.ready()
        self.store.batch_seconds = COMMIT_EVERY
        self.store.names = self.names
        self.store.set_meta("names", self.names)
        self.store.set_meta("versions", {k: i.version for k, i in self.infos.items()})
        self.store.set_meta("opset", opset)
        self._resume_diversity()

    def _probe_name(self, label: str, cfg: Config) -> str:
        """A backend's name in the probe's progress lines, with the opset where a campaign
        probes several (--opset 16,21)."""
        name = self.names[label]
        return f"{name} at opset {cfg.opset}" if self.cfg.opset_mix else name

    def _opset_configs(self) -> list[Config]:
        """The campaign's generator options at each of its opsets (--opset 16,21), each
        probed on its own."""
        return [replace(self.cfg, opset=o, opset_mix=()) for o in self.cfg.opsets]

    def _seed_blocks(self) -> dict[str, Any]:
        """The user models' blocks (``--seed-models``), lifted once and stored, so that a
        resumed campaign makes its tests from the same ones whatever the folder holds now."""
        assert self.store is not None
        stored = self.store.get_meta("seed_blocks")
        if stored is not None or not self.opts.seed_models:
            return stored or {}
        folder = Path(self.opts.seed_models)
        lifted = lift_folder(folder, {s.op_type for s in self.generator.specs}, self.cfg.max_nodes)
        self.seed_report = lifted.report()
        if self.seed_report:
            with open(self.out / "seed-models.log", "a") as log:
                log.write("".join(line + "\n" for line in self.seed_report))
        record = blocks_to_record(lifted.blocks)
        self.store.set_meta("seed_blocks", record)
        return record

    def _lane_count(self) -> int:
        """Lanes this process runs tests on (an executor that runs them elsewhere keeps
        one, for the probe and reductions)."""
        return max(1, self.opts.workers)

    def _resume_diversity(self) -> None:
        """The diversity stored by the last run, with the tests it stored after its last
        write counted (regenerated: a test is a function of its seed); more than
        ``CATCH_UP_MAX`` such tests (a campaign.db older than the metrics) stay uncounted."""
        assert self.store is not None
        try:
            self.diversity = CampaignDiversity.from_record(
                self.store.get_meta("diversity"), self.labels
            )
        except (KeyError, TypeError, ValueError):  # another version's record: count anew
            self.diversity = CampaignDiversity(self.labels)
        missing = sorted(i for i in self.store.done_ids() if i not in self.diversity.tests)
        for i in missing:
            f = None
            verdicts = self.store.verdicts_of(i)
            if len(missing) <= CATCH_UP_MAX and Verdict.GENERATOR_ERROR not in verdicts.values():
                try:
                    d = self.store.decision_of(i)
                    avoid = self.avoidance.for_test(i) if self.avoidance is not None else None
                    f = features(self.makers.get(avoid).case(self.opts.seed + i, d).model)
                except Exception:  # noqa: BLE001 - it failed when it ran: count no model
                    f = None
            self.diversity.add(i, f, verdicts)
        self._diversity_loaded = True
        self._save_diversity()

    def _save_diversity(self) -> None:
        assert self.store is not None
        self.store.set_meta("diversity", self.diversity.to_record())
        # and the figures as they stand, for the report's coverage curves
        self.store.add_diversity_snapshot(len(self.diversity.tests), self.diversity.summary())
        self._diversity_saved = time.perf_counter()

    def _use_pregen(self) -> bool:
        """Generate in processes of their own (one per lane) unless there is a single core.
        Generation is most of this process's work per test: here it holds up the lane (and,
        with several lanes, the GIL) while the backends wait for their next test. Measured
        on 2 cores shared with other work, ORT vs ORT:opt=none, one lane: 143-158 tests/s
        and 31-34 % overhead with it, 94-140 tests/s and 38-50 % without."""
        if self.opts.pregen is not None:
            return self.opts.pregen
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        return cores >= 2

    def print_summary(self) -> None:
        assert self.store is not None, "start the campaign first"
        overhead = self.progress.overhead() if self.progress.tests else None
        print_summary(
            self.store,
            self.out,
            self.labels,
            self.opts.reference_label,
            overhead,
            self.progress.wall_note,
        )

    def close(self) -> None:
        for pregen in self.pregens:
            pregen.close()
        for lane in self.lanes:
            lane.close()
        self.spares.close()
        if self.store is not None:
            if self._diversity_loaded:  # else it would overwrite the stored one
                self._save_diversity()
            sync_meta(self.out, self.store.bugs(), follow_ups=self.store.follow_ups())
            sync_meta(self.out, self.store.reference_bugs(), REFERENCE_BUGS)
            self.store.close()
        if self.lock is not None:
            self.lock.release()

    # --- the loop --------------------------------------------------------------------
    def _ids(self) -> Iterator[int]:
        done = self.store.done_ids()
        o = self.opts
        self.progress.total = sum(1 for i in range(o.tests) if i not in done) if o.tests else None
        self.progress.seconds = o.seconds
        i = 0
        while o.tests is None or i < o.tests:
            if i not in done:
                yield i
            i += 1

    def run(self, on_update: Callable[[Progress], None] | None = None) -> Progress:
        o = self.opts
        self.progress.started = time.perf_counter()  # this run's clock: not the set-up's
        deadline = time.perf_counter() + o.seconds if o.seconds else None
        ids = self._ids()
        ids_lock = threading.Lock()
        steer = self.steering
        avoidance = self.avoidance
        peeked: list[int | None] = [None]  # the next id, taken from ids but not handed out

        def over() -> bool:
            return self._stop.is_set() or bool(deadline and time.perf_counter() >= deadline)

        def next_id() -> tuple[int, Decision, AvoidSet | None] | str | None:
            """The next test, the guide's decision for it and what its generation avoids;
            WAIT: the guide or the avoidance needs results not in yet
            (onnxfuzz.run.steer, onnxfuzz.run.avoidance); None: no more tests."""
            if over():
                return None
            with ids_lock:
                if peeked[0] is None:
                    peeked[0] = next(ids, None)
                i = peeked[0]
                if i is None:
                    return None
                if avoidance is not None and not avoidance.ready(i):
                    return WAIT
                avoid = avoidance.for_test(i) if avoidance is not None else None
                if steer is None:
                    peeked[0] = None
                    return i, None, avoid
                if not steer.ready(i):
                    return WAIT
                peeked[0] = None
                return i, steer.decide(i), avoid

        def next_test(pregen: Pregenerator | None) -> Made | str | None:
            # With a generator process per lane (onnxfuzz.run.pregen) a lane's tests are
            # made a few ahead and handed over in the order the lane asked for them; those
            # still owed at a stop are not run (nor stored: a resumed campaign makes them
            # again). Without, the lane makes its next test while its backends run.
            if pregen is None:
                got = next_id()
                return self.prepare(*got) if isinstance(got, tuple) else got
            got = None
            while len(pregen.owed) < MADE_AHEAD and isinstance(got := next_id(), tuple):
                pregen.request(got[0], o.seed + got[0], got[1], got[2])
            if over():
                return None
            if not pregen.owed:
                return got  # WAIT or None
            return pregen.receive()

        errors: list[BaseException] = []

        def lane_loop(lane: BackendPool, pregen: Pregenerator | None) -> None:
            try:
                pipelined(lane, pregen)
            except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                errors.append(e)
                self._stop.set()

        def pipelined(lane: BackendPool, pregen: Pregenerator | None) -> None:
            # The lane keeps AHEAD tests started: each backend goes from one test to the next
            # without waiting. When the oldest ends, the next is made (or received) and
            # started, then the oldest is judged and stored while the backends run. A
            # mismatch's localization and a new bug's reduction need the workers: they settle
            # the tests in flight first (their outcomes wait in the pool).
            # A lane the guide makes wait runs what it holds to the end first (a waiting lane
            # holds no unfinished test, so no two lanes ever wait on each other).
            started: deque[Made] = deque()

            def fill() -> bool:
                """Start tests until AHEAD are; True: the guide said to wait."""
                while len(started) < AHEAD:
                    t = next_test(pregen)
                    if not isinstance(t, Made):
                        return t == WAIT
                    if t.case is None:  # generation failed: nothing to run
                        self.finish_error(t)
                        continue
                    asked = None
                    if self.feedback is not None:
                        asked = self._asked[t.index] = self.feedback.decide(
                            t.index, t.model_bytes
                        )
                    lane.start_test(t.model_bytes, t.inputs, feedback=asked)
                    started.append(t)
                return False

            waiting = fill()
            while started or waiting:
                if not started:
                    if (i := peeked[0]) is not None:
                        if avoidance is not None:
                            avoidance.wait(i, self._stop)
                        if steer is not None:
                            steer.wait(i, self._stop)
                    waiting = fill()
                    continue
                current = started.popleft()
                outcomes = lane.wait()
                waiting = fill()
                assert current.case is not None
                judged = self.judge_all(current.case, current.inputs, outcomes, lane)
                self.finish(current, outcomes, judged, lane if judged.findings else None)

        threads = [
            threading.Thread(target=lane_loop, args=(lane, pregen), daemon=True)
            for lane, pregen in zip(
                self.lanes, self.pregens or [None] * len(self.lanes), strict=True
            )
        ]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.25)
                with self._lock:  # tests a lane finished a while ago are not left uncommitted
                    self.store.commit_due()
                if on_update:
                    on_update(self.progress)
        except KeyboardInterrupt:
            self.progress.interrupted = True
            self._stop.set()
            for t in threads:
                t.join()
        if on_update:
            on_update(self.progress)
        with self._lock:
            self._save_diversity()  # before the summary reads it
            p = self.progress
            # This run's cost of confirming findings, for the summary (tests/s with it and
            # without it).
            self.store.set_meta(
                "confirmation",
                {
                    "findings": p.confirmed,
                    "unreplayed": p.unreplayed,
                    "replay_give_up": REPLAY_GIVE_UP,
                    "seconds": round(p.confirming, 3),
                    "tests": p.tests,
                    "wall": round(time.perf_counter() - p.started, 3),
                },
            )
            if self.feedback is not None:  # this run's tests that asked, per backend
                self.store.set_meta("feedback_asked", {**self.feedback.asked, "tests": p.tests})
            self.store.commit()
        if errors:
            raise errors[0]
        return self.progress

    def prepare(self, i: int, decision: Decision = None, avoid: AvoidSet | None = None) -> Made:
        return make(self.makers.get(avoid), i, self.opts.seed + i, decision, avoid)

    def _guide_record(
        self, t: Made, results: list[Result], outcomes: dict[str, Outcome] | None = None
    ) -> tuple[Decision, bytes] | None:
        """What the guide stores with a test (its decision, its reward keys); tells the
        guide the keys (under ``self._lock``, after the test is recorded)."""
        if self.steering is None:
            return None
        sigs = [(r.backend, r.signature) for r in results if r.signature]
        if self.opts.guide == "optcov":
            return t.decision, optimization_keys(fired_keys(outcomes or {}), sigs)
        return t.decision, reward_keys(t.features, sigs)

    def _unasked(self, i: int, outcomes: dict[str, Outcome]) -> set[str]:
        """The backends test ``i`` did not ask for feedback (after it ran: told to the
        feedback policy, with what fired). A test started elsewhere (Ray) asked them all."""
        if self.feedback is None:
            return set()
        policies = self.feedback.policies
        asked = self._asked.pop(i, set(policies))
        fired: dict[str, list[str]] = {}
        for label, _, name in fired_keys(outcomes):
            fired.setdefault(label, []).append(name)
        self.feedback.report(i, asked, fired)
        return set(policies) - asked

    def finish_error(self, t: Made) -> None:
        """A test whose model could not be generated (a bug in onnxfuzz, reported with its
        seed): stored with the verdict ``generator-error`` so that it is counted once."""
        if self.feedback is not None:
            self.feedback.report(t.index, (), {})
        guide = self._guide_record(t, [])
        with self._lock:
            with open(self.out / "generator-errors.log", "a") as log:
                log.write(f"test {t.index} seed {t.seed}: {t.error}\n")
            self.store.record(
                t.index,
                t.seed,
                [],
                self.cfg.opset_of(t.seed),
                0.0,
                0.0,
                [Result("onnxfuzz", Verdict.GENERATOR_ERROR, detail=t.error or "")],
                guide,
            )
            if guide is not None and self.steering is not None:
                self.steering.report(t.index, guide[1])
            if self.avoidance is not None:
                self._report_avoidance(t, [], {}, StoredTest())
            self._count_diversity(t.index, None, {})
            self.progress.tests += 1
            self.progress.verdicts[Verdict.GENERATOR_ERROR] += 1

    def finish(
        self,
        t: Made,
        outcomes: dict[str, Outcome],
        judged: Judged,
        lane: BackendPool | None = None,
    ) -> None:
        """Store a judged test; reduce and bundle its new bugs first (with ``lane``)."""
        assert t.case is not None
        results, findings = judged.results, judged.findings
        # Backends run in parallel: the test's backend time is the wall time during which
        # any of them compiled or ran.
        backend_s = busy_seconds(list(outcomes.values())) + judged.probe_s
        feats = t.features  # made with the test (in the lane's generator process, if any)
        # Reductions run outside the campaign lock: a reduction takes up to --reduce-budget
        # (longer per try on a slow compiler), and under the lock every other lane waited
        # to store its tests and the progress line stalled (6 GPU lanes stored nothing for
        # 15 minutes). The lane's own pool does the reducing; only the store needs the lock.
        if findings:
            with self._lock:  # a reduction takes a while: the tests before it are safe first
                self.store.commit()
        keyed: list[tuple[Finding, str | None, Reduced | None]] = []
        reducing = 0.0  # reduction is its own phase, not fuzz-loop time
        for f in findings:
            t_red = time.perf_counter()
            maker = self.makers.get(t.avoid)  # what made the test: its reductions replay it
            key, reduced = self.bug_key(f, lane, maker.generator_for(t.decision, t.seed))
            t_end = time.perf_counter()
            reducing += t_end - t_red
            keyed.append((f, key, reduced))
            with self._lock:
                self.progress.reduced(t_red, t_end)
        filed: list[Path] = []  # bundles written for this test
        avoid_report = StoredTest()  # what the test tells the avoidance, if any
        with self._lock:
            # Read the known bugs again: another lane may have filed one of these meanwhile.
            known = self.store.bug_keys() if findings else set()
            fresh: list[str] = []  # the bugs this test files
            by_backend = {r.backend: r for r in results}
            for f, key, reduced in keyed:
                r = by_backend[f.backend]
                if key is None:  # no fresh run re-created it: counted, never filed
                    r.verdict = NOT_REPRODUCIBLE
                    continue
                if key not in known:
                    # the same op's wrong output of another kind, filed by another lane
                    # meanwhile (its hit, not a second bundle: _own_key checks before
                    # reducing, this after)
                    twins = [k for t in kind_twins(f.signature) for k in self.store.keys_of(t)]
                    key = next(iter(twins), key)
                r.bug, r.pattern = key, key.rsplit("|", 1)[1]
                # as confirmation filed it: a second run's finding that fresh runs showed
                # on first runs too is a failure of any run (``on_first_run``); the tables
                # said "rerun" beside a bundle of stage "run" (an audit)
                r.stage = f.judgement.stage
                if key not in known:
                    f.bug_id = bug_id(key, self.names)
                    where = REFERENCE_BUGS if r.pattern == REFERENCE_ONLY else "bugs"
                    if reduced is None:  # the bundle's report says why, not "reduced to"
                        f.extra.setdefault("unreduced", self._unreduced_why(f, r.pattern))
                    # before the commit: a kill re-runs it
                    try:
                        filed.append(write_bundle(self.out, f, reduced, where))
                    except Exception as e:  # noqa: BLE001 - one bundle, not the campaign
                        # Raised here, the test was never stored: the campaign died, and
                        # --resume re-ran the same test into the same error.
                        self._unfiled(f, where, e)
                        r.bug, r.pattern = None, ""  # a later hit may file it
                        continue
                    known.add(key)
                    fresh.append(key)
                    # nodes in bodies count: an If may hold several
                    if reduced is not None and not reduced.complete and reduced.after.nodes > 1:
                        stopped = self.store.get_meta(REDUCTION_STOPPED) or {}
                        stopped[key] = {
                            "nodes": reduced.after.nodes,
                            "runs": reduced.runs,
                            "seconds": round(reduced.seconds, 1),
                            # the labels `onnxfuzz reduce` goes on with
                            "reference": f.reference,
                            "backend": f.backend,
                        }
                        self.store.set_meta(REDUCTION_STOPPED, stopped)
                    if self.avoidance is not None and where == "bugs":
                        # the reduced model's trigger (with its attribute values)
                        t_bundle = bundle_trigger(filed[-1], f.signature)
                        if t_bundle is not None:
                            unit = self.avoidance.unit_of(r.backend, r.verdict, f.signature)
                            avoid_report.triggers.setdefault(unit, []).append(t_bundle)
            now = time.perf_counter()
            # A test's wall time runs from the end of the previous one (pipelined lanes
            # overlap preparation with the backends' work).
            wall = now - max(t.started, self._last_finish.get(threading.get_ident(), 0.0))
            wall -= reducing
            self._last_finish[threading.get_ident()] = now
            guide = self._guide_record(t, results, outcomes)
            self.store.record(
                t.index,
                t.case.seed,
                t.case.ops,
                self.cfg.opset_of(t.case.seed),
                wall,
                backend_s,
                results,
                guide,
            )
            for key in fresh:  # filed bundles of its crash that held more ops go
                for old in self._supersedes(key):
                    shutil.rmtree(self.out / "bugs" / self.store.merge_bug(old, key), True)
                    known.discard(old)
                for old in self._followers(key):  # and those of crashes its result caused
                    gone = self.store.merge_bug(old, key, why="follows")
                    shutil.rmtree(self.out / "bugs" / gone, True)
                    known.discard(old)
            if guide is not None and self.steering is not None:
                self.steering.report(t.index, guide[1])
            if self.avoidance is not None:
                self._report_avoidance(t, results, outcomes, avoid_report)
            if self.optcov is not None:  # with the test's record: they commit together
                self.optcov.add(self.store, t.index, outcomes, self._unasked(t.index, outcomes))
            self._count_diversity(t.index, feats, {r.backend: r.verdict for r in results})
            p = self.progress
            p.tests += 1
            p.add_busy(list(outcomes.values()), judged.probe_s)
            p.backend_cpu += sum(o.cpu_s for o in outcomes.values())
            p.ops.update(t.case.ops)
            for r in results:
                p.verdicts[r.verdict] += 1
            if findings:
                p.bugs = sum(1 for k in known if not k.endswith("|" + REFERENCE_ONLY))
            p.last = ", ".join(t.case.ops[:6])
        for folder in filed:  # outside the lock: a child process runs the backend again
            annotate(folder, cheap_only=True)  # ORT's; onnxfuzz triage looks for the rest

    def _report_avoidance(
        self,
        t: Made,
        results: list[Result],
        outcomes: dict[str, Outcome],
        report: StoredTest,
    ) -> None:
        """Tell the avoidance what a stored test hit and which node each hit points at
        (under ``self._lock``, after it is recorded; ``report`` holds the triggers of the
        bundles it filed). What it taught goes to campaign.db with the test."""
        avoidance = self.avoidance
        assert avoidance is not None and self.store is not None
        model = t.case.model if t.case is not None else None
        for r in results:
            if not r.signature:
                continue
            unit = avoidance.unit_of(r.backend, r.verdict, r.signature)
            report.hits.append(unit)
            if model is None:  # a Ray shard's test without findings: no model came back
                continue
            if r.signature.split("|", 2)[1] == Verdict.MISMATCH:
                named = trigger_of(model, r.signature)
                found = [Trigger(named.op, named.dtype, [])] if named and named.dtype else []
            else:
                o = outcomes.get(r.backend)
                found = named_triggers(model, f"{o.message}\n{o.trace}") if o else []
            report.triggers.setdefault(unit, []).extend(found)
        taught = avoidance.report(t.index, report)
        if taught or len(avoidance.updates) != self._avoidance_saved:
            self._avoidance_saved = len(avoidance.updates)
            self.store.set_meta(AVOIDANCE, avoidance.record())

    def _count_diversity(self, test_id: int, f: Features | None, verdicts: dict[str, str]) -> None:
        """Count a stored test (under ``self._lock``, after it is recorded); written every
        ``DIVERSITY_EVERY`` s in the transaction that holds the tests it counts, so that the
        stored diversity never counts a test that a resume would run again."""
        self.diversity.add(test_id, f, verdicts)
        if time.perf_counter() - self._diversity_saved >= DIVERSITY_EVERY:
            self._save_diversity()

    def judge_all(
        self,
        case: Case,
        inputs: dict,
        outcomes: dict[str, Outcome],
        lane: BackendPool | None = None,
    ) -> Judged:
        ref_label = self.opts.reference_label
        for label, o in list(outcomes.items()):
            # A failure on a model with an (op, type) the probe found the backend lacks is
            # missing support, not a bug.
            why = (
                lacking(case.model, self.support.get(label, {}))
                if o.status == Status.ERROR
                else None
            )
            if why is not None:
                outcomes[label] = replace(
                    o, status=Status.UNSUPPORTED, message=f"probe: {why}\n{o.message}"
                )
        blamed = blame(Judge(ref_label, self.oracle, lane), case.model, inputs, outcomes)
        results, findings = [], []
        for label, b in blamed.items():
            v = b.assessed.judgement
            results.append(
                Result(
                    label,
                    v.verdict,
                    v.stage,
                    b.assessed.signature,
                    None,
                    v.message[:2000],
                    b.suspect,
                )
            )
            if b.assessed.signature is None:
                continue
            entry = (
                self.known.match(label, b.assessed.signature, v.message) if self.known else None
            )
            if entry is not None:
                # known (--known): counted with its hits, neither reduced nor filed
                said = f"known as {entry.id} ({self.known.source}): {v.message}"
                results[-1] = replace(results[-1], verdict=Verdict.KNOWN, detail=said[:2000])
                continue
            reference = b.against
            findings.append(
                Finding(
                    signature=b.assessed.signature,
                    bug_id=bug_id(b.assessed.signature, self.names),
                    names=self.names,
                    judgement=v,
                    backend=label,
                    reference=reference,
                    seed=case.seed,
                    opset=self.cfg.opset_of(case.seed),
                    ops=case.ops,
                    model=case.model,
                    inputs=inputs,
                    outcomes={k: outcomes[k] for k in dict.fromkeys([reference, label])},
                    versions={k: i.version for k, i in self.infos.items()},
                    tolerance=_tolerance_of(self.oracle, v, case.model),
                    timeout=self.opts.timeout,
                    memory_mb=self.opts.memory_mb,
                    extra={
                        "suspect": b.suspect,
                        "backends": list(outcomes),
                        "odd_one_out": b.odd_one_out,
                        "shared_with": b.shared_with,
                    },
                    case=case,
                )
            )
        if findings and lane is not None and self.opts.confirm:
            # The models the backend's process ran before this test: a finding that does
            # not fail in a fresh process may need them (onnxfuzz.run.confirm).
            for f in findings:
                f.earlier = lane.ran_before(f.backend, lane.last_seq, EARLIER_MAX)
        return Judged(results, findings, sum(b.assessed.probe_s for b in blamed.values()))

    # --- bugs: dedup after reduction --------------------------------------------------
    def _unfiled(self, f: Finding, where: str, e: Exception) -> None:
        """Say that a finding's bundle could not be written (once per bug id, on stderr,
        and with the traceback in ``bundle-errors.log``): its test is still stored."""
        if f.bug_id in self._unfiled_ids:
            return
        self._unfiled_ids.add(f.bug_id)
        line = (
            f"onnxfuzz: could not write the bundle of {f.bug_id} ({type(e).__name__}: {e}); "
            f"its test is stored and the campaign goes on; what was written is in "
            f"{self.out / where / ('.tmp_' + f.bug_id)} (an onnxfuzz bug: please report it)"
        )
        print(line, file=sys.stderr, flush=True)
        with open(self.out / "bundle-errors.log", "a") as log:
            log.write(line + "\n" + traceback.format_exc() + "\n")

    def bug_key(
        self, f: Finding, lane: BackendPool | None, gen: Generator | None = None
    ) -> tuple[str | None, Reduced | None]:
        """A finding's bug (``_root_key``); a new bug's reduced model gets its passing
        neighbours (``_neighbours``: its bundle only, not every reduced hit)."""
        key, reduced = self._root_key(f, lane, gen)
        if key is not None and reduced is not None and lane is not None:
            with self._lock:
                new = key not in self.store.bug_keys()
            if new:
                self._neighbours(f, reduced, lane)
        return key, reduced

    def _root_key(
        self, f: Finding, lane: BackendPool | None, gen: Generator | None = None
    ) -> tuple[str | None, Reduced | None]:
        """A finding's bug (``_own_key``), or a filed bug of its root cause: one cause, one
        bundle. A reduced crash joins the bug whose wrong result it is shown to follow
        (``reduce.precursor``; one that follows a wrong result no bundle holds yet is filed,
        the only report of that cause, until that result is: ``_followers``), or a crash
        bug of its family reduced to the same
        ops (the same error in other words: InstanceNormalization's input of rank 3 or 5,
        LayerNormalization's "found Float" after Double or Half). ``FOLLOW_UPS`` keeps
        what joined, for the bug's bundle."""
        key, reduced = self._own_key(f, lane, gen)
        if key is None or reduced is None:
            return key, reduced
        follows = f.extra.get("follows")
        with self._lock:
            if key in self.store.bug_keys():  # a bundle of its own already
                return key, reduced
            roots, why = [], "follows"
            if follows:  # the wrong result, of whichever kind it showed as filed
                sig = follows["signature"]
                roots = [k for s in [sig, *kind_twins(sig)] for k in self.store.keys_of(s)]
            if not roots and f.judgement.verdict in (Verdict.CRASH, Verdict.TIMEOUT):
                roots = same_crash(
                    self.store.crash_keys(f.backend, f.judgement.verdict),
                    f.signature,
                    key.rsplit("|", 1)[1],
                )
                why = "same crash"
            if not roots:
                return key, reduced
            if roots[0] not in self.store.keys_of(f.signature):  # else a hit like any other
                joined = self.store.get_meta(FOLLOW_UPS) or {}
                ops = [n.op_type for n in reduced.model.graph.node]
                entry = {"ops": ops, "seed": f.seed, "why": why}
                joined.setdefault(roots[0], {}).setdefault(f.signature, entry)
                self.store.set_meta(FOLLOW_UPS, joined)
        return roots[0], None

    def _supersedes(self, key: str) -> list[str]:
        """The filed crash (or hang) bugs that the just filed bug ``key`` shows reduced
        further (``wider_crashes``: a Gather crash filed as LSTM -> Gather before a later
        hit reduced to Gather alone). A bug whose crash follows a wrong result is of that
        result's family: never one."""
        row = self.store.db.execute(
            "SELECT signature, backend, verdict, pattern FROM bugs WHERE key=?", (key,)
        ).fetchone()
        follows = self.store.get_meta(FOLLOWS) or {}
        if row is None or row[2] not in (Verdict.CRASH, Verdict.TIMEOUT) or key in follows:
            return []
        signature, backend, verdict, pattern = row
        filed = [f for f in self.store.crash_keys(backend, verdict) if f[0] not in follows]
        return wider_crashes(filed, signature, pattern)

    def _followers(self, key: str) -> list[str]:
        """The filed crash bugs shown to follow the wrong result just filed as ``key``
        (``reduce.precursor``). Each was filed as the only report of its cause while no
        bundle held that result; now one does, and they join it: one root cause, one
        bundle (an audit's NonMaxSuppression -> MatMul -> Add crash, filed at test 67,
        stayed a bundle beside NonMaxSuppression's wrong shape alone, filed at test 497)."""
        row = self.store.db.execute(
            "SELECT signature, verdict FROM bugs WHERE key=?", (key,)
        ).fetchone()
        if row is None or row[1] != Verdict.MISMATCH:
            return []
        crashes = self.store.db.execute("SELECT key FROM bugs WHERE verdict=?", (Verdict.CRASH,))
        filed = {k for (k,) in crashes}
        follows = self.store.get_meta(FOLLOWS) or {}
        return [
            k for k, sig in follows.items() if k != key and k in filed and same_fault(sig, row[0])
        ]

    def _own_key(
        self, f: Finding, lane: BackendPool | None, gen: Generator | None = None
    ) -> tuple[str | None, Reduced | None]:
        """A finding's bug: its signature and the op pattern its reduced model ends in; an
        intermittent or state-dependent one's signature family (one bundle per family);
        None when no fresh run re-creates it (not reproducible: never filed). A finding
        that would open a new bug is confirmed first (``onnxfuzz.run.confirm``). The first
        few hits of a signature are reduced (their records replayed by ``gen``, the
        generator that made the case); later ones join its first bug."""
        with self._lock:  # called outside it (reductions run unlocked): the store needs it
            hits = self.store.hits_of(f.signature)
            prior = self.store.bug_of_signature(f.signature)
            keys = self.store.keys_of(f.signature)
            lost = self.store.not_reproducible_of(f.signature)
            twin_bug = None
            for twin in kind_twins(f.signature) if prior is None else []:
                twin_bug = twin_bug or self.store.bug_of_signature(twin)
        if twin_bug is not None and not self._reference_alone(f):
            # One op's wrong output of another kind (values / precision / shape,
            # judge.signature.kind_twins): a hit of the bug filed for it, not a new bundle
            # (an Add off by 1 was filed as "values" and twice as "precision")
            return twin_bug, None
        settled = (*SETTLED_PATTERNS, REFERENCE_ONLY)
        if prior is not None and prior.rsplit("|", 1)[1] in settled:
            return prior, None  # confirmed before, filed as its family's or the reference's
        alone = self._reference_alone(f)
        reduce = (
            self.opts.reduce
            and lane is not None
            and f.case is not None
            and hits < MAX_REDUCED
            and not alone
        )
        if keys and not reduce:
            return fitting_key(keys, f.ops), None  # a bug confirmed when it was filed
        if prior is not None and not reduce:
            return prior, None  # its reduced hits joined the bug their crash follows
        if prior is not None and reduce and not alone:
            # A signature confirmed deterministic before: this hit is reduced, and confirmed
            # only if its reduction opens a new bug (a bundle's rate is its own).
            reduced = self._reduce(f, lane, gen, 1)
            key = f"{filed_as(f, reduced)}|{reduced.pattern}" if reduced is not None else prior
            if reduced is not None and not reduced.complete and not prior.endswith("|unreduced"):
                # stopped at its budget with nodes to spare: a pattern no smaller than need
                # be is no sign of another bug (a hang reduced to Tanh was filed again as
                # Tanh -> Pow, its reduction cut short)
                key, reduced = prior, None
            with self._lock:
                new = key not in self.store.bug_keys()
            if new:
                self._confirm(f, lane)
            return key, reduced
        if prior is None and lost >= GIVE_UP_AFTER and self.opts.confirm:
            return None, None  # like its earlier hits: not run again (bounds the cost)
        conf = self._confirm(f, lane)
        if conf is not None:
            if conf.kind == Reproducibility.NOT_REPRODUCIBLE:
                return None, None
            if conf.kind in (Reproducibility.INTERMITTENT, Reproducibility.STATE):
                if conf.kind == Reproducibility.INTERMITTENT:
                    key = f"{family(f.signature)}|intermittent"
                else:  # one per backend: its state's symptoms vary with what meets it
                    key = f"{f.backend}|state|dependent|{STATE}"  # bundle *-state-dependent-*
                with self._lock:
                    filed = key in self.store.bug_keys()
                f.runs = conf.repro_runs  # what its repro.py runs
                if filed or not reduce:
                    return key, None
                if conf.kind == Reproducibility.STATE:  # each candidate after the earlier ones
                    return key, self._reduce(f, lane, gen, 1, 1, conf.earlier)
                return key, self._reduce(f, lane, gen, conf.attempts, f.runs)
        if alone:
            return f"{f.signature}|{REFERENCE_ONLY}", None
        if reduce:
            reduced = self._reduce(f, lane, gen, 1)
            if reduced is not None:
                return f"{filed_as(f, reduced)}|{reduced.pattern}", reduced
        return (keys[0] if keys else f"{f.signature}|unreduced"), None

    def _unreduced_why(self, f: Finding, pattern: str) -> str:
        """Why a new bug's bundle holds the model as generated (its report says so)."""
        if pattern == REFERENCE_ONLY:
            return (
                "a failure of the reference alone is set aside unreduced; `onnxfuzz fuzz "
                "--reduce-reference` reduces it"
            )
        if not self.opts.reduce:
            return "reduction was off, `--no-reduce`"
        if f.case is None:
            return "no generator record to shrink: the model was not made by onnxfuzz's generator"
        return "the campaign did not reduce it"

    def _reference_alone(self, f: Finding) -> bool:
        """A crash or hang of the reference alone in a campaign of one reference and one
        target (the test said nothing about the target): set aside (``reference-bugs/``,
        unreduced) unless ``reduce_reference``. A mismatch the model's declaration pins on
        the reference stays a bug."""
        return (
            len(self.labels) == 2
            and f.backend == self.opts.reference_label
            and f.judgement.verdict in (Verdict.CRASH, Verdict.TIMEOUT)
            and not self.opts.reduce_reference
        )

    def _confirm(self, f: Finding, lane: BackendPool | None) -> Confirmation | None:
        """Run ``f`` again in fresh processes (``confirm`` times); its rate goes to
        ``f.extra`` (meta.json), a state-dependent one's earlier models to ``f.earlier``.
        None: confirmation is off, or there is no pool to run it (Ray workers' findings
        are confirmed on the driver's lane)."""
        earlier, f.earlier = f.earlier, []
        if not self.opts.confirm or lane is None:
            return None
        lane.settle()  # the confirmation starts processes of its own; the lane waits
        t0 = time.perf_counter()
        fam = family(f.signature)
        with self._lock:
            replay = self._fruitless[fam] < REPLAY_GIVE_UP
        conf = Confirmer(lane, self.oracle, self.opts.confirm).confirm(
            f, earlier, reduction_timeout(f), replay
        )
        with self._lock:
            self.progress.confirmed += 1
            self.progress.confirming += time.perf_counter() - t0
            if conf.kind == Reproducibility.NOT_REPRODUCIBLE:
                if conf.replayed:
                    self._fruitless[fam] += 1
                elif earlier and not replay:
                    self.progress.unreplayed += 1
        f.extra.update(conf.as_meta())
        f.earlier = conf.earlier
        if conf.first_run and f.judgement.stage == Stage.RERUN:
            on_first_run(f, conf)
        return conf

    def _reduce(
        self,
        f: Finding,
        lane: BackendPool | None,
        gen: Generator | None,
        attempts: int,
        check_runs: int = 1,
        earlier: Sequence[Test] = (),
    ) -> Reduced | None:
        """Reduce ``f`` (``attempts`` > 1: an intermittent one, kept while it shows at least
        once in that many runs; ``earlier``: a state-dependent one, each candidate run in a
        fresh process after these); None when reduction failed (logged) or the reduced
        model does not fail in a fresh process in ``check_runs`` runs (every one of them,
        for a deterministic finding; after ``earlier`` and not without, for a
        state-dependent one): the bundle keeps the original model."""
        assert lane is not None and f.case is not None
        lane.settle()  # the reduction uses the workers
        target = Target(f.backend, f.reference, f.signature, attempts=attempts, earlier=earlier)
        rep = Reproducer(lane, target, self.oracle)
        try:
            limit = reduction_timeout(f) if earlier else candidate_timeout(f)
            with lane.time_limit(limit):
                reduced = reduce_case(gen or self.generator, f.case, rep, self.opts.reduce_budget)
        except Exception as e:  # noqa: BLE001 - a bug in onnxfuzz must not end the campaign
            # The finding is kept, unreduced, and the error logged with its seed; the bundle,
            # the summary, triage and the report say that reduction failed, and why.
            why = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:300]}"
            f.extra["reduction_failed"] = f"{why} (traceback: {REDUCER_LOG})"
            with self._lock, open(self.out / REDUCER_LOG, "a") as log:
                log.write(f"seed {f.case.seed} ({f.signature}):\n{traceback.format_exc()}\n")
                failed = self.store.get_meta(REDUCTION_FAILURES) or {}
                failed.setdefault(f.signature, why)
                self.store.set_meta(REDUCTION_FAILURES, failed)
            return None
        if self.opts.confirm and not self._reduced_fails(
            f, reduced, lane, attempts, check_runs, earlier
        ):
            f.extra["reduction_dropped"] = (
                "the reduced model did not fail in a fresh process (it needed the state of "
                "the worker that reduced it): the bundle keeps the original model"
            )
            return None
        self._second_opinion(f, reduced)
        self._precursor(f, rep, reduced, lane)
        return reduced

    def _reduced_fails(
        self,
        f: Finding,
        reduced: Reduced,
        lane: BackendPool,
        attempts: int,
        runs: int,
        earlier: Sequence[Test] = (),
    ) -> bool:
        """Whether the reduced model fails as ``f`` did in ``runs`` fresh runs: every one
        for a deterministic finding (``attempts`` 1), at least one for an intermittent one;
        with ``earlier``, not alone but after them (confirmed as ``f`` was)."""
        if f.reference not in reduced.outcomes:
            return False
        outputs = {o.name for o in reduced.model.graph.output}
        want = replace(
            f.judgement, output=f.judgement.output if f.judgement.output in outputs else None
        )
        small = replace(
            f,
            model=reduced.model,
            inputs=reduced.inputs,
            outcomes=reduced.outcomes,
            judgement=want,
        )
        t0 = time.perf_counter()
        conf = Confirmer(lane, self.oracle, runs).confirm(small, earlier, reduction_timeout(f))
        with self._lock:
            self.progress.confirming += time.perf_counter() - t0
        f.extra["reduced_confirmed"] = {"runs": conf.runs, "failed": conf.failed}
        if earlier:
            f.extra["reduced_confirmed"]["reproducibility"] = str(conf.kind)
            return conf.kind == Reproducibility.STATE
        return conf.failed == conf.runs if attempts == 1 else conf.failed > 0

    def _precursor(
        self, f: Finding, rep: Reproducer, reduced: Reduced, lane: BackendPool
    ) -> None:
        """A deterministic crash of two nodes or more that follows another node's wrong
        result (``reduce.precursor``): that node and its result go into ``f.extra`` (for
        meta.json and issue.md), and the wrong result's signature into the store under the
        bug's key, so that the bug is of that result's family (its root cause)."""
        if (
            f.judgement.verdict != Verdict.CRASH
            or not rep.deterministic
            or len(reduced.model.graph.node) < 2
        ):
            return
        try:
            with lane.time_limit(candidate_timeout(f)):
                found = find_precursor(reduced.model, reduced.inputs, rep, f.judgement.stage)
        except Exception:  # noqa: BLE001 - the finding stands without it
            with self._lock, open(self.out / REDUCER_LOG, "a") as log:
                log.write(f"precursor, seed {f.seed}:\n{traceback.format_exc()}\n")
            return
        if found is None:
            return
        f.extra["follows"] = found.as_meta()
        with self._lock:
            follows = self.store.get_meta(FOLLOWS) or {}
            follows.setdefault(f"{filed_as(f, reduced)}|{reduced.pattern}", found.signature)
            self.store.set_meta(FOLLOWS, follows)

    def _neighbours(self, f: Finding, reduced: Reduced, lane: BackendPool) -> None:
        """One-change variants of the reduced model, each run once against the finding
        (``reduce.neighbours``): what its failure depends on, for the bundle. None for a
        finding that does not fail on every run (``try_neighbours`` says so); a variant,
        or the whole step, that fails is left out: the bundle stands without it."""
        if self.opts.neighbours <= 0 or reduced.final is None:
            return
        # as the finding was confirmed: an intermittent one's attempts, a state-dependent
        # one's earlier models (either makes the reproducer not deterministic: no variant)
        flaky = f.extra.get("reproducibility") not in (None, str(Reproducibility.DETERMINISTIC))
        attempts = max(2, f.runs) if flaky or f.runs > 1 else 1
        target = Target(f.backend, f.reference, f.signature, attempts=attempts, earlier=f.earlier)
        rep = Reproducer(lane, target, self.oracle)
        lane.settle()
        try:
            with lane.time_limit(candidate_timeout(f)):
                f.neighbours = try_neighbours(
                    reduced.model,
                    reduced.inputs,
                    rep,
                    reduced.final.culprit,
                    reduced.message,
                    self.opts.neighbours,
                )
        except Exception:  # noqa: BLE001 - the finding stands without it
            with self._lock, open(self.out / REDUCER_LOG, "a") as log:
                log.write(f"neighbours, seed {f.seed}:\n{traceback.format_exc()}\n")

    def _second_opinion(self, f: Finding, reduced: Reduced) -> None:
        """A mismatch no majority decided: the ONNX reference evaluator's opinion on the
        reduced model (``judge.second_opinion``), kept in ``f.extra`` for the bundle."""
        if f.judgement.verdict != Verdict.MISMATCH or f.extra.get("suspect") is not None:
            return
        if not reduced.message or not needed(list(f.extra.get("backends", [])), reduced.model):
            return
        try:
            # a precision finding is judged by its op's budget (the finding's tolerance)
            precision = f.judgement.kind == "precision"
            opinion = second_opinion(
                reduced.model,
                reduced.inputs,
                reduced.outcomes,
                replace(self.oracle, tolerance=dict(f.tolerance)) if precision else self.oracle,
                self.opts.timeout,
                self.opts.memory_mb,
            )
        except Exception:  # noqa: BLE001 - an opinion is extra: the finding stands without
            with self._lock, open(self.out / REDUCER_LOG, "a") as log:
                log.write(f"second opinion, seed {f.seed}:\n{traceback.format_exc()}\n")
            return
        f.extra["second_opinion"] = opinion.as_dict()
        pair = {f.backend, f.reference}
        if opinion.said == "ran" and len(opinion.agrees) == 1 and len(pair) == 2:
            (suspect,) = pair - set(opinion.agrees)
            with self._lock:
                suspects = self.store.get_meta(EVALUATOR_SUSPECTS) or {}
                suspects.setdefault(f.signature, suspect)
                self.store.set_meta(EVALUATOR_SUSPECTS, suspects)


def filed_as(f: Finding, reduced: Reduced) -> str:
    """The signature a reduced finding's bug is keyed by: its own, except where it blamed
    an If, Loop or Scan node and the reduced model (its body inlined or unrolled) blames
    the op inside: then that one, so that a hit of the op outside control flow and one
    inside are one bug (a wrong Softmax was filed twice, "values in If output" and
    "values in Softmax output", both reduced to Softmax)."""
    got = reduced.signature
    if blamed_op(f.signature) not in CONTAINERS or got is None:
        return f.signature
    return f.signature if root_signature(got) == root_signature(f.signature) else got


def on_first_run(f: Finding, conf: Confirmation) -> None:
    """A second run's finding that fresh runs showed on their first run too: a failure of
    any run (a flaky kernel), filed at the run stage, with the wrong values it was found on
    as the backend's outputs (its first run was right that time)."""
    j = f.judgement
    note = (
        f"\nits first run was wrong too in {conf.first_run} of {conf.runs} fresh runs: a "
        "failure of any run (a race), not of second runs only"
    )
    f.judgement = replace(j, stage=Stage.RUN, message=j.message + note)
    backend, verdict, _, detail = f.signature.split("|", 3)
    f.signature = f"{backend}|{verdict}|{Stage.RUN}|{detail}"
    got = f.outcomes[f.backend]
    if got.second is not None:
        f.outcomes[f.backend] = replace(got, outputs=got.second, second=None)


def reduction_timeout(f: Finding) -> float | None:
    """The per-try time limit while reducing a hang or a memory blow-up: a few times what
    the reference took on the model (floor ``HANG_TRY_FLOOR``), so that each candidate
    that still hangs costs seconds, not the campaign's ``--timeout``. None: keep it."""
    o = f.outcomes.get(f.backend)
    if o is None or not o.too_costly:
        return None
    ref = f.outcomes.get(f.reference)
    took = ref.backend_s if ref is not None and ref.status == Status.OK else 0.0
    return hang_try_limit(took, f.timeout)


def candidate_timeout(f: Finding) -> float | None:
    """The per-try time limit while reducing ``f``: a hang's or a memory blow-up's
    (``reduction_timeout``), else ten times the longest a backend took on its test (floor
    ``TRY_FLOOR``). A candidate is no larger than the test, and one that runs that long
    instead of failing as the test did (a candidate that sends a compiler into a loop) is
    rejected all the same: without the limit, after the campaign's whole ``--timeout``."""
    limit = reduction_timeout(f)
    if limit is not None:
        return limit
    took = max((o.backend_s for o in f.outcomes.values()), default=0.0)
    return min(f.timeout, max(TRY_FLOOR, TRY_FACTOR * took))


def _clear_if_empty(out: Path) -> bool:
    """Whether ``out``'s campaign.db holds no test (a campaign stopped before its first one
    was stored: an adapter's protocol error on the first test), then removed so that the
    same --out starts afresh; False where it holds tests. A campaign running there holds
    its lock: that is the error (``CampaignLock``)."""
    lock = CampaignLock(out)
    try:
        db = out / "campaign.db"
        store = Store.open_existing(db)
        try:
            empty = store.n_tests() == 0
        finally:
            store.close()
        if empty:
            for path in (db, db.with_name("campaign.db-wal"), db.with_name("campaign.db-shm")):
                path.unlink(missing_ok=True)
        return empty
    finally:
        lock.release()


def _tolerance_of(
    oracle: OracleConfig, v: Judgement, model: onnx.ModelProto
) -> dict[str, tuple[float, float]]:
    """The tolerances a finding's reproducer compares by: the oracle's, and for a precision
    finding the budget of the op it blames (``onnxfuzz.judge.budget``) for float32."""
    tol = dict(oracle.tolerance)
    lone = repro_tolerance(model, v.output) if v.kind == "precision" else None
    if lone is not None:
        tol["float32"] = lone
    return tol
