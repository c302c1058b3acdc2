"""Passes driven to a fixed point, most successful first, with per-pass statistics."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

S = TypeVar("S")


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


def fixed_point(
    state: S, passes: list[Pass[S]], keep: Callable[[S, S], S | None], deadline: float
) -> tuple[S, bool]:
    """Apply passes until none makes progress or the deadline passes. ``keep(old, new)``
    returns the (normalized) new state when the candidate is smaller and still shows the
    failure, else None. Returns the final state and whether the fixed point was reached
    (False: out of time)."""
    while True:
        progress = False
        for p in sorted(passes, key=lambda p: -p.stats.kept):
            restart = True
            while restart:
                restart = False
                t0 = time.perf_counter()
                for cand in p.candidates(state):
                    if time.perf_counter() > deadline:
                        p.stats.seconds += time.perf_counter() - t0
                        return state, False
                    p.stats.tried += 1
                    kept = keep(state, cand)
                    if kept is not None:
                        p.stats.kept += 1
                        state = kept
                        progress = restart = True
                        break
                p.stats.seconds += time.perf_counter() - t0
        if not progress:
            return state, True
