"""A campaign's optimization coverage: what each backend's optimizer did, test by test.

Each backend's worker asks its adapter's ``optimizations`` hook after a compile (see
``onnxfuzz.backend``); the outcome carries the answer. Here they are counted per backend,
kind (``transformer``, ``rule``, ``pass``, ``fused``) and name, stored in campaign.db with
the test, and what fired first is returned (the reward an optimization-coverage guide
would take). A backend that gives no feedback is said once (it runs unguided); an adapter
whose hook raised gets one warning naming it, and its tests go on.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Container
from pathlib import Path

from onnxfuzz.backend import split_known
from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.store.db import Store

Key = tuple[str, str, str]  # (backend label, kind, name)


class OptimizationCoverage:
    """Counts what fired, per backend, across a campaign (resumed from campaign.db)."""

    def __init__(self, names: dict[str, str], say: Callable[[str], None]) -> None:
        self.names = names  # label -> display name
        self.say = say
        self.fired: set[Key] = set()
        self._known: set[Key] = set()  # written to campaign.db already (fired or not)
        self._silent: set[str] = set()  # backends said to give no feedback
        self._failing: set[str] = set()  # backends whose hook raised (warned once)

    def summary(self) -> str:
        """What fired so far, per backend and kind: ``ort: 23 transformer, 15 rule``."""
        counts: dict[str, dict[str, int]] = {}
        for label, kind, _ in self.fired:
            per = counts.setdefault(self.names.get(label, label), {})
            per[kind] = per.get(kind, 0) + 1
        return "; ".join(
            f"{name}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(per.items()))
            for name, per in sorted(counts.items())
        )

    def resume(self, store: Store) -> None:
        rows = store.optimizations()
        self.fired = {(b, k, n) for b, k, n, tests, _ in rows if tests}
        self._known = {(b, k, n) for b, k, n, _, _ in rows}

    def add(
        self,
        store: Store,
        test_id: int,
        outcomes: dict[str, Outcome],
        unasked: Container[str] = (),
    ) -> list[Key]:
        """Store test ``test_id``'s feedback (after its ``record``: one transaction) and
        return what fired for the first time in the campaign. ``unasked``: backends whose
        feedback this test did not ask for (``onnxfuzz.run.feedback_policy``): their
        backend time still counts in the cost's share."""
        new: list[Key] = []
        for label, o in outcomes.items():
            if o.status != Status.OK and o.optimizations is None and not o.feedback_error:
                continue  # it never got past compiling: nothing to say
            if label in unasked:
                store.add_feedback_cost(label, o.backend_s, 0.0)
                continue
            name = self.names.get(label, label)
            if o.feedback_error:
                store.add_feedback_cost(label, o.backend_s, o.feedback_s, o.feedback_error)
                if label not in self._failing:
                    self._failing.add(label)
                    self.say(
                        f"warning: backend {name}: its optimizations() hook raised "
                        f"({o.feedback_error.splitlines()[0][:200]}); its tests go on without "
                        "optimization feedback"
                    )
                continue
            if o.optimizations is None:
                if label not in self._silent:
                    self._silent.add(label)
                    self.say(
                        f"backend {name} gives no optimization feedback: it runs unguided "
                        "by optimization coverage"
                    )
                continue
            store.add_feedback_cost(label, o.backend_s, o.feedback_s)
            fired, known = split_known(o.optimizations)
            unseen = {
                kind: tuple(n for n in names if (label, kind, n) not in self._known)
                for kind, names in known.items()
            }
            store.add_feedback(test_id, label, fired, unseen)
            self._known.update((label, k, n) for k, names in {**unseen}.items() for n in names)
            for kind, names in fired.items():
                for n in names:
                    key = (label, kind, n)
                    self._known.add(key)
                    if key not in self.fired:
                        self.fired.add(key)
                        new.append(key)
        return new


def stderr_and_log(out: Path) -> Callable[[str], None]:
    """A ``say`` that writes one line to stderr and to ``out/feedback.log``."""

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)
        with open(out / "feedback.log", "a") as log:
            log.write(line + "\n")

    return say



def fired_keys(outcomes: dict[str, Outcome]) -> list[Key]:
    """What fired on one test, every backend that gave feedback: ``(label, kind, name)``."""
    out: list[Key] = []
    for label, o in outcomes.items():
        if o.optimizations:
            fired, _ = split_known(o.optimizations)
            out.extend((label, kind, n) for kind, names in fired.items() for n in names)
    return out
