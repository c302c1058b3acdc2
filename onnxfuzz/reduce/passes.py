"""Passes driven to a fixed point, most successful first, with per-pass statistics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

S = TypeVar("S")
# After a kept candidate a pass goes on from where it was, not from its first candidate:
# the ones before it failed a moment ago, and trying them again on the new state (a new
# state, so no verdict is remembered) cost a backend run each, most of a reduction's runs
# where a compiler takes a second a model. The next sweep tries every candidate again,
# so the fixed point is the same kind: no pass's candidate is kept on the final state.
# EARLIER = True: the strategy before that (each pass starts again from its first
# candidate, no zero runs in choice_passes): tools/bench_reduce_strategy.py's reference,
# measured in the same run.
EARLIER = False


@dataclass
class PassStats:
    tried: int = 0
    kept: int = 0
    seconds: float = 0.0


@dataclass
class Pass(Generic[S]):
    """``candidates(state)`` yields smaller variants of ``state``, simplest first."""

    name: str
    candidates: Callable[[S], Iterator[S]]
    stats: PassStats = field(default_factory=PassStats)
    # False: the pass's candidates go on after a kept one by themselves (the driver does
    # not pass over the ones before it; ``choice_passes._ZeroRuns``)
    resumes: bool = True


def fixed_point(
    state: S,
    passes: list[Pass[S]],
    keep: Callable[[S, S], S | None],
    deadline: float,
    on_kept: Callable[[S], None] | None = None,
) -> tuple[S, bool]:
    """Apply passes until none makes progress or the deadline passes. ``keep(old, new)``
    returns the (normalized) new state when the candidate is smaller and still shows the
    failure, else None; ``on_kept`` gets each state kept (what a Ctrl-C leaves). Returns
    the final state and whether the fixed point was reached (False: out of time)."""
    while True:
        progress = False
        for p in sorted(passes, key=lambda p: -p.stats.kept):
            skip = 0  # candidates to pass over: tried on the state before the last kept one
            restart = True
            while restart:
                restart = False
                t0 = time.perf_counter()
                for i, cand in enumerate(p.candidates(state)):
                    if i < skip:
                        continue
                    if time.perf_counter() > deadline:
                        p.stats.seconds += time.perf_counter() - t0
                        return state, False
                    p.stats.tried += 1
                    kept = keep(state, cand)
                    if kept is not None:
                        p.stats.kept += 1
                        state = kept
                        if on_kept is not None:
                            on_kept(state)
                        progress = restart = True
                        skip = 0 if EARLIER or not p.resumes else i
                        break
                p.stats.seconds += time.perf_counter() - t0
        if not progress:
            return state, True
