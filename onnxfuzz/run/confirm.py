"""Confirm a finding before it is filed, as ClusterFuzz confirms a crash.

The failing model is run again ``runs`` times in a *fresh* process of the backend (no
state of the campaign's worker). Every run fails the same way: the finding is
**deterministic**. Some do: **intermittent** (a race), with its rate. None do: it may
need what the worker ran before (a stale compile cache), so the models the worker's
process had run before it are replayed in a fresh process, then the failing one; if that
re-creates it, the earlier models are bisected to the fewest that still do (**depends on
an earlier model**). If nothing re-creates it, it is **not reproducible**: counted, never
filed as a bug.

"The same way" is what a bundle's ``repro.py`` checks: the same verdict and stage, and the
same mismatch kind on the same output, or the same normalized error message (a crash). A
model's first and second run are one stage there: a flaky kernel fails on either; where
fresh runs failed on the first run in some and only on the second in others, the outputs
vary from run to run: intermittent, even if every fresh run failed. A finding
of a second run (stage ``rerun``) that a fresh run shows on its *first* run is a flaky
kernel, not a second-run bug: ``first_run`` says how many fresh runs did.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from onnxfuzz.execute.messages import Test
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import (
    EARLIER_MAX,
    FIRST_PER_INPUTS,
    OUT_OF_MEMORY,
    Outcome,
    Stage,
    same_outputs,
)
from onnxfuzz.judge.budget import precision_again
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import Judgement, OracleConfig, Verdict
from onnxfuzz.judge.signature import normalize
from onnxfuzz.store.bundle import Finding

CONFIRM_RUNS = 5  # fresh runs of a finding before it is filed (the default of --confirm)
COSTLY_RUNS = 2  # a hang or memory blow-up: each run costs its time limit
MAX_ATTEMPTS = 8  # the most runs a reduction candidate of an intermittent finding gets
DETECT = 0.95  # the chance a candidate that keeps an intermittent bug shows it in k runs
# repro.py of an intermittent bundle: runs that show the bug with this chance (at least
# REPRO_MIN, at most REPRO_MAX): a user who runs it once should see it
REPRO_DETECT, REPRO_MIN, REPRO_MAX = 0.99, 10, 20
BISECT_CHECKS = 10  # fresh processes a bisection of the earlier models may start


class Reproducibility(StrEnum):
    DETERMINISTIC = "deterministic"
    INTERMITTENT = "intermittent"
    STATE = "depends on an earlier model"
    NOT_REPRODUCIBLE = "not reproducible"


@dataclass
class Confirmation:
    """What the fresh runs of a finding came to."""

    kind: Reproducibility
    runs: int  # fresh runs of the failing model alone
    failed: int  # of which failed the same way
    earlier: list[Test] = field(default_factory=list)  # STATE: the earlier models, in order
    replayed: int = 0  # earlier models of the worker's process that were replayed
    processes: int = 0  # fresh processes started
    seconds: float = 0.0
    # a second run's finding: fresh runs that showed it on their first run already
    first_run: int = 0
    # the failing runs failed at different runs of the compiled model (the first in some,
    # only the second in others): the backend's outputs vary from run to run, so the
    # failure is intermittent even where every fresh run happened to show it
    mixed: bool = False

    @property
    def rate(self) -> float:
        return self.failed / self.runs if self.runs else 0.0

    @property
    def cautious_rate(self) -> float:
        """The rate as if one more run had passed: a few runs overestimate a rare failure
        as often as they underestimate it, and too few attempts lose it."""
        if self.failed < self.runs or self.mixed:
            return self.failed / (self.runs + 1)
        return 1.0

    @property
    def attempts(self) -> int:
        """Runs that show a bug of this rate with probability ``DETECT`` (at most
        ``MAX_ATTEMPTS``): what a reduction candidate and ``repro.py`` get."""
        return attempts_for(self.cautious_rate)

    @property
    def repro_runs(self) -> int:
        """Runs of an intermittent bundle's ``repro.py`` (1: a state-dependent one's)."""
        if self.kind != Reproducibility.INTERMITTENT:
            return 1
        return max(REPRO_MIN, attempts_for(self.cautious_rate, REPRO_DETECT, REPRO_MAX))

    def as_meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "reproducibility": str(self.kind),
            "confirmed": {
                "runs": self.runs,
                "failed": self.failed,
                "attempts": self.attempts,
                "repro_runs": self.repro_runs,
                "processes": self.processes,
                "seconds": round(self.seconds, 3),
            },
        }
        if self.first_run:
            meta["confirmed"]["first_run"] = self.first_run
        if self.mixed:
            meta["confirmed"]["mixed"] = True
        if self.kind == Reproducibility.STATE:
            meta["confirmed"]["replayed"] = self.replayed
        return meta


def attempts_for(rate: float, detect: float = DETECT, most: int = MAX_ATTEMPTS) -> int:
    """Runs in which a failure of ``rate`` shows at least once with chance ``detect``
    (at most ``most``)."""
    if rate >= 1.0:
        return 1
    if rate <= 0.0:
        return most
    return max(1, min(most, math.ceil(math.log(1 - detect) / math.log(1 - rate))))


def too_costly(j: Judgement) -> bool:
    """A hang or a memory blow-up: the same excess, whichever limit it hit first."""
    return j.verdict == Verdict.TIMEOUT or (
        j.verdict == Verdict.CRASH and j.message.startswith(OUT_OF_MEMORY)
    )


def same_failure(want: Judgement, got: Judgement) -> bool:
    """Whether ``got`` is ``want``'s failure again (repro.py's test; a hang or memory
    blow-up is the same as either: under the tight per-run limit of a confirmation, a
    runaway allocation may time out before it reaches the cap)."""
    if too_costly(want):
        return too_costly(got)
    if got.verdict != want.verdict or not same_stage(got.stage, want.stage):
        return False
    if want.verdict == Verdict.MISMATCH:
        return got.kind == want.kind and (want.output is None or got.output == want.output)
    if want.verdict == Verdict.TIMEOUT:
        return True
    return normalize(got.message) == normalize(want.message)


def same_stage(a: Stage | None, b: Stage | None) -> bool:
    """Whether two failures are at one stage: a compiled model's first and second run are
    (the same kernel, flaky, fails on either)."""
    runs = (Stage.RUN, Stage.RERUN)
    return a == b or (a in runs and b in runs)


def judge_again(f: Finding, outcome: Outcome, cfg: OracleConfig) -> Judgement:
    """The backend's new outcome judged against the reference's stored one (no
    localization: the kind and output are what repro.py compares too)."""
    outcomes = {f.reference: f.outcomes[f.reference], f.backend: outcome}
    return Judge(f.reference, cfg).assess(f.model, f.inputs, outcomes)[f.backend].judgement


@dataclass
class Confirmer:
    """Runs a finding's confirmation through ``pool`` (fresh processes of its backends)."""

    pool: BackendPool
    cfg: OracleConfig
    runs: int = CONFIRM_RUNS

    def confirm(
        self,
        f: Finding,
        earlier: Sequence[Test] = (),
        timeout: float | None = None,
        replay: bool = True,
    ) -> Confirmation:
        """Run ``f`` again in fresh processes; ``earlier``: the models the worker's
        process had run before it (oldest first), replayed if it does not fail alone
        (``replay`` False: not replayed; not reproducible then). ``timeout``: the per-run
        limit (None: the pool's)."""
        t0 = time.perf_counter()
        data = f.model.SerializeToString()
        costly = f.judgement.verdict == Verdict.TIMEOUT or f.outcomes[f.backend].too_costly
        runs = min(self.runs, COSTLY_RUNS) if costly else self.runs
        processes = 0
        first_run = 0
        stages: set[Stage | None] = set()  # of the fresh runs' same failures

        def fails(outcome: Outcome) -> bool:
            nonlocal first_run
            again = judge_again(f, outcome, self.cfg)
            if f.judgement.kind == "precision":
                # Found by localizing: inside the tolerance, or beyond it where the judge's
                # checks called the end-to-end difference amplified rounding (they need
                # runs this judge has not): then the same outputs again show it again.
                first = f.outcomes[f.backend].outputs
                alike = again.verdict == Verdict.OK or (
                    first is not None
                    and outcome.outputs is not None
                    and same_outputs(first, outcome.outputs)
                )
                return alike and precision_again(f.outcomes[f.reference], outcome)
            same = same_failure(f.judgement, again)
            if same and f.judgement.stage == Stage.RERUN and again.stage == Stage.RUN:
                first_run += 1  # wrong on the first run already: a flaky kernel's way
            if same:
                stages.add(again.stage)
            return same

        def check(before: Sequence[Test]) -> bool:
            nonlocal processes
            processes += 1
            got = self.pool.fresh_runs(f.backend, data, f.inputs, 1, before, timeout)
            return fails(got[0])

        outs = self.pool.fresh_runs(f.backend, data, f.inputs, runs, (), timeout)
        processes += 1
        failed = sum(fails(o) for o in outs)
        if failed:
            # A planted 30 % flaky kernel, run twice per fresh run, failed all five in a
            # few of 91 findings, now on the first run, now on the second only: filed as
            # deterministic, its repro.py ran once and said "fixed" half the time.
            mixed = Stage.RUN in stages and Stage.RERUN in stages
            kind = (
                Reproducibility.DETERMINISTIC
                if failed == len(outs) and not mixed
                else Reproducibility.INTERMITTENT
            )
            return Confirmation(
                kind,
                len(outs),
                failed,
                [],
                0,
                processes,
                time.perf_counter() - t0,
                first_run,
                mixed,
            )
        # ``ran_before``'s: the most recent EARLIER_MAX, after the first ones of the
        # failing model's input signature (a cache they filled long before)
        again = list(earlier)[-(EARLIER_MAX + FIRST_PER_INPUTS) :] if replay else []
        found = bisect(again, check, BISECT_CHECKS) if again else None
        kind = Reproducibility.STATE if found else Reproducibility.NOT_REPRODUCIBLE
        return Confirmation(
            kind, len(outs), 0, found or [], len(again), processes, time.perf_counter() - t0
        )


def bisect(earlier: list[Test], check: Any, budget: int) -> list[Test] | None:
    """The fewest of ``earlier`` (kept in order) after which the failing model fails in
    a fresh process, or None when all of them do not re-create it. ``check(tests)``
    runs them and then the failing model in one fresh process. At most ``budget``
    checks; the answer is checked twice (a flaky bug that happened to fail once after
    some models must not pass for a state-dependent one)."""
    spent = 0

    def ok(tests: list[Test]) -> bool:
        nonlocal spent
        spent += 1
        return bool(check(tests))

    if not ok(earlier):
        return None
    kept = earlier
    # The shortest suffix that re-creates it: its first model is needed.
    lo, hi = 0, len(kept) - 1
    while lo < hi and spent < budget - 2:
        mid = (lo + hi + 1) // 2
        if ok(kept[mid:]):
            lo = mid
        else:
            hi = mid - 1
    kept = kept[lo:]
    # Then the others, one at a time (most need just that one: a cache one model filled).
    if len(kept) > 1 and spent < budget - 1 and ok(kept[:1]):
        kept = kept[:1]
    i = 1
    while i < len(kept) and spent < budget - 1:
        candidate = kept[:i] + kept[i + 1 :]
        if ok(candidate):
            kept = candidate
        else:
            i += 1
    return kept if ok(kept) and ok(kept) else None
