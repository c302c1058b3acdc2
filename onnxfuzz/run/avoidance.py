"""Avoiding the triggers of bugs already hit often, during a campaign (``fuzz --known``).

A campaign with a known-findings file (``onnxfuzz.store.known``) avoids, from its start, the
triggers of the file's families hit ``--avoid-after`` times or more. This module goes on
from there: as soon as a bug is hit that often (a known family, counting the file's hits
and this campaign's, or a bug this campaign found), generation stops making its trigger
(op and element type, or attribute value), so that tests stop crashing on it (a crash hides
the rest of its model) and go to new territory.

Determinism: what test ``i`` avoids is a function of the results of tests ``< i - LAG``
only, taken in test order (as the guide's rewards are, ``onnxfuzz.run.steer``). So the same
seed, options and known file give the same tests whatever the timing (a lane that would
need a result not in yet waits for it), and ``--resume`` gives the tests again from what
campaign.db holds: the results, and the bundles whose reduced models name the triggers.
Reductions run against a time budget, so the trigger of a bug this campaign found is as
stable as its bundle's reduced model.

A bug's *unit* is what is counted: a crash's root-cause family (``judge.signature.family``),
a wrong value's signature (its op: a values family says nothing of the cause), or the
known-file entry a finding matched. Its triggers: the known entry's, those of the bundles
filed for it, and the node each hit's error names (``store.known.named_triggers``: ONNX
Runtime names the node, TVM the op it was converting) or its wrong value's op, unreduced:
op and element type. A unit hit often enough has each trigger avoided as soon as it is
learned (one root cause reached through another op). A unit whose triggers are avoided
and that is still hit ``after`` more times has them widened once: attribute values were
not what made it fail, so the op is avoided in its element type too (never the whole op).
The triggers learned are stored with the test that taught them (``record``), as its
results are: the error text they came from is not.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from onnxfuzz import dtypes as dt
from onnxfuzz.judge.oracle import Verdict
from onnxfuzz.judge.signature import family, root_signature
from onnxfuzz.store.known import KnownFile, Trigger, avoid_triggers, trigger_from

# Results a test's avoidance may not wait for: more than the tests a lane holds in flight
# (the one being judged, AHEAD started, MADE_AHEAD made ahead: 7), so one lane never waits.
LAG = 8


@dataclass(frozen=True)
class AvoidSet:
    """What generation avoids on top of the campaign's configuration: (op, element type)
    pairs (``Config.avoid``) and (op, feature) forms (``Config.avoid_features``)."""

    pairs: frozenset[tuple[str, int]] = frozenset()
    forms: frozenset[tuple[str, str]] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.pairs or self.forms)

    def to_record(self) -> dict[str, Any]:
        return {
            "avoid": sorted([op, dt.NAMES[d]] for op, d in self.pairs),
            "forms": sorted([op, f] for op, f in self.forms),
        }


@dataclass
class StoredTest:
    """What one stored test tells the avoidance: the units its results hit and the
    triggers of the bundles it filed (unit -> triggers)."""

    hits: list[str] = field(default_factory=list)
    triggers: dict[str, list[Trigger]] = field(default_factory=dict)


@dataclass
class Update:
    """From test ``start`` on, generation avoids ``avoid`` (everything so far); ``why``:
    the units whose triggers were added then."""

    start: int
    avoid: AvoidSet
    why: list[str]


class Avoidance:
    """The avoid set of each test of a campaign (see the module's docstring)."""

    def __init__(self, known: KnownFile, after: int, lag: int = LAG) -> None:
        assert after > 0
        self.known = known
        self.after = after
        self.lag = lag
        self._cond = threading.Condition()
        self._reports: dict[int, StoredTest] = {}
        self._applied = 0  # tests below this are counted
        self._hits: Counter[str] = Counter()
        self._hits_since: Counter[str] = Counter()  # hits after a unit's triggers were avoided
        self._triggers: dict[str, list[Trigger]] = {}
        self._avoided: dict[str, int] = {}  # unit -> 1: its triggers, 2: widened to types
        self._avoided_from: dict[str, int] = {}  # unit -> the first test that avoided it so
        self._learned: dict[tuple[str, str], int] = {}  # (unit, trigger) -> first test
        self._pairs: set[tuple[str, int]] = set()
        self._forms: set[tuple[str, str]] = set()
        self.updates: list[Update] = [Update(0, AvoidSet(), [])]
        for f in known.families:
            unit = _known_unit(f.id)
            self._hits[unit] = f.hits
            self._triggers[unit] = f.all_triggers()
        self._avoid_due(-1)  # the file's families hit often enough: from the first test

    # --- what tests report ------------------------------------------------------------
    def unit_of(self, backend: str, verdict: str, signature: str) -> str:
        """The unit a result with ``signature`` counts for."""
        entry = self.known.match(backend, signature)
        if entry is not None:
            return _known_unit(entry.id)
        if verdict == Verdict.MISMATCH or signature.split("|", 2)[1:2] == [Verdict.MISMATCH]:
            return f"{backend}||{root_signature(signature)}"
        return f"{backend}||{family(signature)}"

    def report(self, i: int, report: StoredTest) -> bool:
        """Test ``i`` is stored (``report``: what it hit and filed); True: it taught a
        trigger (``record`` changed)."""
        with self._cond:
            self._reports[i] = report
            taught = False
            for unit, triggers in report.triggers.items():
                for t in triggers:
                    key = (unit, json.dumps(asdict(t), sort_keys=True))
                    if self._learned.get(key, i + 1) > i:
                        self._learned[key] = i
                        taught = True
            self._cond.notify_all()
            return taught

    def load(self, record: Any) -> dict[int, dict[str, list[Trigger]]]:
        """The triggers a stored record (``record``) says each test taught."""
        out: dict[int, dict[str, list[Trigger]]] = {}
        if not isinstance(record, dict):
            return out
        for i, unit, t in record.get("learned", []):
            out.setdefault(int(i), {}).setdefault(str(unit), []).append(trigger_from(t))
        return out

    # --- what tests avoid -------------------------------------------------------------
    def ready(self, i: int) -> bool:
        """Whether test ``i``'s avoid set is known (every result it depends on is in)."""
        with self._cond:
            return self._ready(i)

    def wait(self, i: int, stop: threading.Event) -> None:
        with self._cond:
            while not stop.is_set() and not self._ready(i):
                self._cond.wait(0.25)

    def for_test(self, i: int) -> AvoidSet:
        """Test ``i``'s avoid set; needs ``ready(i)`` (a test stored already: always)."""
        with self._cond:
            cutoff = i - self.lag
            while self._applied < cutoff:
                j = self._applied
                self._count(j, self._reports.pop(j, StoredTest()))
                self._applied += 1
                self._avoid_due(j)
            return next(u.avoid for u in reversed(self.updates) if u.start <= i)

    def _ready(self, i: int) -> bool:
        return all(j in self._reports for j in range(self._applied, i - self.lag))

    def _count(self, j: int, r: StoredTest) -> None:
        for unit, triggers in r.triggers.items():
            known = self._triggers.setdefault(unit, [])
            known.extend(t for t in triggers if t not in known)
        for unit in r.hits:
            self._hits[unit] += 1
            if unit in self._avoided and j >= self._avoided_from[unit]:
                self._hits_since[unit] += 1

    def _avoid_due(self, j: int) -> None:
        """After counting test ``j``: avoid the triggers of units hit ``after`` times (from
        test ``j + 1 + lag``, the first whose avoid set counts test ``j``), each trigger
        learned since too, and widen those hit ``after`` times in tests that avoided them."""
        why = []
        pairs, forms = set(self._pairs), set(self._forms)
        start = 0 if j < 0 else j + 1 + self.lag
        for unit, n in sorted(self._hits.items()):
            triggers = self._triggers.get(unit)
            if not triggers or n < self.after:
                continue
            level = self._avoided.get(unit, 0)
            if level == 0 or (level == 1 and self._hits_since[unit] >= self.after):
                # level 2: still hit where its triggers were avoided, so their attribute
                # values were not what made it fail: the op in its element type
                level = self._avoided[unit] = level + 1
                self._avoided_from[unit] = start
                self._hits_since[unit] = 0
                why.append(unit)
            avoid_triggers(triggers, pairs, forms)
            if level == 2:
                pairs.update((t.op, dt.BY_NAME[t.dtype]) for t in triggers if t.dtype in dt.BY_NAME)
        if pairs != self._pairs or forms != self._forms:
            self._pairs, self._forms = pairs, forms
            avoid = AvoidSet(frozenset(pairs), frozenset(forms))
            if self.updates[-1].start == start:
                self.updates[-1] = Update(start, avoid, self.updates[-1].why + why)
            else:
                self.updates.append(Update(start, avoid, why))

    def record(self) -> dict[str, Any]:
        """For campaign.db: the triggers each test taught (what ``load`` reads on resume)
        and the updates so far (what was avoided from which test on, and why)."""
        with self._cond:
            learned = sorted((i, unit, t) for (unit, t), i in self._learned.items())
            return {
                "learned": [[i, unit, json.loads(t)] for i, unit, t in learned],
                "updates": [
                    {"from": u.start, **u.avoid.to_record(), "why": u.why} for u in self.updates
                ],
            }

    def describe(self) -> list[str]:
        """A line per update that took effect: from which test on generation avoided what."""
        with self._cond:
            shown = [u for u in self.updates if u.avoid and u.start <= self._applied + self.lag]
            lines = []
            last = AvoidSet()
            for u in shown:
                new = sorted(f"{op} {dt.NAMES[d]}" for op, d in u.avoid.pairs - last.pairs)
                new += sorted(f"{op} {f}" for op, f in u.avoid.forms - last.forms)
                lines.append(f"avoided from test {u.start} on: {', '.join(new)}")
                last = u.avoid
            return lines


def _known_unit(entry_id: str) -> str:
    return f"known||{entry_id}"
