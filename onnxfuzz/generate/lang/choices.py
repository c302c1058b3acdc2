"""The recorded choice stream: the only source of randomness in generation.

Every decision the generator makes is an integer drawn here and appended to
``record``. Replaying a recorded list (``prefix``) reproduces the same model;
a shrinker can edit the list (smaller numbers mean simpler choices) and replay
it, because the backtrack-free solver turns *any* choice list into a valid model.

The generator labels runs of choices as spans (``start_span``/``stop_span``, as
Hypothesis does): the node count, each op, each op's type. A shrinker finds the choices
it edits with ``spans_by_label`` and never needs to know how the generator lays them out.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import NamedTuple


class Span(NamedTuple):
    """Choices ``record[start:end]`` made under one label."""

    label: str
    start: int
    end: int


_new_span = tuple.__new__


def spans_by_label(spans: Sequence[Span], label: str) -> list[Span]:
    return [s for s in spans if s.label == label]


class ChoiceStream:
    __slots__ = ("_rng", "_prefix", "_n_prefix", "_zero_tail", "record", "spans", "_open")

    def __init__(
        self, seed: int, prefix: Sequence[int] | None = None, zero_tail: bool = False
    ) -> None:
        """``zero_tail``: once ``prefix`` is used up, every choice is the simplest (0)
        instead of random, as a shrinker wants."""
        self._rng = random.Random(seed)
        self._prefix = list(prefix) if prefix is not None else []
        self._n_prefix = len(self._prefix)
        self._zero_tail = zero_tail
        self.record: list[int] = []
        self.spans: list[Span] = []  # closed spans, in the order they were opened
        self._open: list[tuple[int, str, int]] = []  # (slot in spans, label, start)

    # Spans are made with tuple.__new__: a NamedTuple's own __new__ is a Python function,
    # and a model opens a few spans per node.
    def start_span(self, label: str) -> None:
        at = len(self.record)
        spans = self.spans
        self._open.append((len(spans), label, at))
        spans.append(_new_span(Span, (label, at, at)))

    def stop_span(self) -> None:
        slot, label, start = self._open.pop()
        self.spans[slot] = _new_span(Span, (label, start, len(self.record)))

    def _next(self, n: int) -> int:
        """A choice in ``[0, n]``; 0 is the simplest option."""
        i = len(self.record)
        if i < self._n_prefix:
            v = self._prefix[i]
            v = 0 if v < 0 else (n if v > n else v)
        elif self._zero_tail:
            v = 0
        else:
            v = int(self._rng.random() * (n + 1))
        self.record.append(v)
        return v

    def integer(self, lo: int, hi: int) -> int:
        """Uniform integer in ``[lo, hi]`` (inclusive); shrinks toward ``lo``."""
        if hi <= lo:
            return lo
        return lo + self._next(hi - lo)

    def index(self, n: int) -> int:
        """Uniform index in ``[0, n)``."""
        return 0 if n <= 1 else self._next(n - 1)

    def chance(self, p_true: float) -> bool:
        """True with probability ``p_true``. Recorded as 0 (true) / 1 (false) so that
        shrinking prefers the likely branch."""
        i = len(self.record)
        if i < self._n_prefix:
            v = 0 if self._prefix[i] <= 0 else 1
        elif self._zero_tail:
            v = 0
        else:
            v = 0 if self._rng.random() < p_true else 1
        self.record.append(v)
        return v == 0

    def seed32(self) -> int:
        """A seed for a numpy generator that fills one tensor's values."""
        return self._next(0xFFFFFFFF)


class OpReplay(ChoiceStream):
    """A stream that replays choices op by op: ``head`` before the first op, then the k-th
    list of ``ops`` for the k-th ``op_label`` span (an empty list, a shorter one, or a
    ``None`` entry: fresh random draws there; a longer one: its tail is dropped). So
    editing one op's list (inserting, deleting or replacing an op, redrawing one choice)
    leaves every other op's choices as they were: a local mutation, where a flat prefix
    would shift every later choice onto another variable."""

    __slots__ = ("_head", "_ops", "_op_label", "_block", "_pos", "_k")

    def __init__(
        self,
        seed: int,
        head: Sequence[int | None],
        ops: Sequence[Sequence[int | None]],
        op_label: str,
    ) -> None:
        super().__init__(seed)
        self._head = list(head)
        self._ops = [list(o) for o in ops]
        self._op_label = op_label
        self._block: list[int | None] = self._head
        self._pos = 0
        self._k = 0

    def start_span(self, label: str) -> None:
        if label == self._op_label and not self._open:  # a top-level op: its own list
            self._block = self._ops[self._k] if self._k < len(self._ops) else []
            self._pos = 0
            self._k += 1
        super().start_span(label)

    def _replayed(self) -> int | None:
        if self._pos < len(self._block):
            v = self._block[self._pos]
            self._pos += 1
            return v
        return None

    def _next(self, n: int) -> int:
        r = self._replayed()
        v = int(self._rng.random() * (n + 1)) if r is None else min(max(r, 0), n)
        self.record.append(v)
        return v

    def chance(self, p_true: float) -> bool:
        r = self._replayed()
        if r is None:
            r = 0 if self._rng.random() < p_true else 1
        v = 0 if r <= 0 else 1
        self.record.append(v)
        return v == 0


class OpStart(ChoiceStream):
    """A stream whose first top-level ``op_label`` spans begin with given choices (the
    k-th list of ``ops`` for the k-th op; an empty list: nothing forced), every other
    choice drawn from the seed. Only span starts are intercepted (each forced list becomes
    the stream's prefix at that position), so a choice costs what it does in a plain stream:
    a guide forcing an op type or two pays nothing per choice, where ``OpReplay`` (which
    can leave holes to redraw) checks every one."""

    __slots__ = ("_forced", "_op_label", "_k")

    def __init__(self, seed: int, ops: Sequence[Sequence[int]], op_label: str) -> None:
        super().__init__(seed)
        self._forced = [list(o) for o in ops]
        self._op_label = op_label
        self._k = 0

    def start_span(self, label: str) -> None:
        if label == self._op_label and not self._open:  # a top-level op
            if self._k < len(self._forced) and self._forced[self._k]:
                at = len(self.record)
                self._prefix = [0] * at + self._forced[self._k]  # read from ``at`` on
                self._n_prefix = len(self._prefix)
            self._k += 1
        super().start_span(label)
