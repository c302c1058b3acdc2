"""Choice-stream shrinking: Hypothesis's idea applied to the generator.

A generated model is a function of its recorded choices, and the backtrack-free solver
turns *any* choice list into a valid model. So a finding shrinks by editing the list —
dropping an op's block of choices, zeroing an op's choices (simplest dims, dtypes and
attributes, reuse of the first candidate), lowering single choices — and regenerating;
an edit is kept only if the same failure reproduces and no size measure grows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from onnxfuzz.generate.build.generator import (
    NODE_COUNT,
    OP,
    OP_TYPE,
    Case,
    Generator,
    glue_per_op,
)
from onnxfuzz.generate.lang.choices import Span, spans_by_label
from onnxfuzz.reduce import passes as driver
from onnxfuzz.reduce.measure import Size, size_of
from onnxfuzz.reduce.passes import Pass, fixed_point


@dataclass(frozen=True)
class Choices:
    """A choice record and the generator's labelled spans over it."""

    record: tuple[int, ...]
    spans: tuple[Span, ...]

    @property
    def op_spans(self) -> list[Span]:
        return spans_by_label(self.spans, OP)

    @property
    def ops(self) -> int:
        return len(self.op_spans)

    @property
    def glue_per_op(self) -> list[int]:
        return glue_per_op(self.spans)

    def fixed(self) -> set[int]:
        """Positions the single-choice passes leave alone: the node count (dropping ops
        changes it) and op types (the op-level passes handle ops)."""
        return {
            i
            for s in spans_by_label(self.spans, NODE_COUNT) + spans_by_label(self.spans, OP_TYPE)
            for i in range(s.start, s.end)
        }


@dataclass
class Shrunk:
    case: Case
    passes: list[Pass]
    complete: bool  # reached the fixed point within the budget


def _without(c: Choices, first: int, last: int) -> Choices | None:
    """The record without ops ``first..last`` (their spans), the node count lowered by
    the nodes they made (each op, and the glue ops that connected its inputs); None when
    the node count is not a choice (one possible value)."""
    count = spans_by_label(c.spans, NODE_COUNT)
    if not count or count[0].end - count[0].start != 1:
        return None
    ops = c.op_spans
    begin, end = ops[first].start, ops[last].end
    glue = sum(c.glue_per_op[first : last + 1])
    rec = list(c.record)
    rec[count[0].start] = max(0, rec[count[0].start] - (last - first + 1) - glue)
    del rec[begin:end]
    return Choices(tuple(rec), ())


def _drop_op_chunks(c: Choices) -> Iterator[Choices]:
    """Remove runs of ops, halves first (delta debugging): few kept steps for long models,
    which matters when each check that still fails costs a timeout (hangs)."""
    size = c.ops // 2
    while size >= 2:
        for first in range(0, c.ops - size + 1, size):
            if (fewer := _without(c, first, first + size - 1)) is not None:
                yield fewer
        size //= 2


def _drop_ops(c: Choices) -> Iterator[Choices]:
    """Remove one op's block of choices (the latest first), one node fewer."""
    if c.ops <= 1:
        return
    for k in reversed(range(c.ops)):
        if (fewer := _without(c, k, k)) is not None:
            yield fewer


def _zeroed(c: Choices, positions: Iterable[int]) -> Choices:
    """``c``'s record with the choices at ``positions`` set to zero."""
    rec = list(c.record)
    for i in positions:
        rec[i] = 0
    return Choices(tuple(rec), ())


def _zero_ops(c: Choices) -> Iterator[Choices]:
    """Every choice of one op but its type set to the simplest."""
    fixed = c.fixed()
    for op in c.op_spans:
        free = [i for i in range(op.start, op.end) if i not in fixed]
        if any(c.record[i] for i in free):
            yield _zeroed(c, free)


def _halvings(k: int) -> Iterator[int]:
    """k, k // 2, ..., 1."""
    while k >= 1:
        yield k
        k //= 2


class _ZeroRuns:
    """Free nonzero choices set to zero, one by one and, after a kept one, in runs twice as
    long as the last kept run: most of a finding's choices do not matter to it and sit
    side by side (an op's dims and attributes), and each candidate costs a backend run
    (``_lower`` alone zeroes them one run each). A run that is not kept is halved until
    one is, or down to one choice. Stateful: the driver abandons a candidate iterator
    only at a kept candidate (or out of time), so a call that finds ``pending`` set goes
    on after that run."""

    def __init__(self) -> None:
        self.pending: tuple[int, int] | None = None  # (first position, length) last yielded

    def __call__(self, c: Choices) -> Iterator[Choices]:
        fixed = c.fixed()
        free = [i for i, v in enumerate(c.record) if v > 0 and i not in fixed]
        j, k = 0, 1
        if self.pending is not None:  # kept: go on after it, with a run twice as long
            at, kept = self.pending
            j = next((n for n, i in enumerate(free) if i > at), len(free))
            k = 2 * kept
        while j < len(free):
            for length in _halvings(k):
                self.pending = (free[j], length)
                yield _zeroed(c, free[j : j + length])
            j, k = j + 1, 1
        self.pending = None


def _lower(c: Choices) -> Iterator[Choices]:
    """Single choices toward zero: to 0, halved, minus one."""
    fixed = c.fixed()
    for i, v in enumerate(c.record):
        if v <= 0 or i in fixed:
            continue
        for w in dict.fromkeys((0, v // 2, v - 1)):
            rec = list(c.record)
            rec[i] = w
            yield Choices(tuple(rec), ())


def shrink_case(
    gen: Generator, case: Case, still_fails: Callable[[Case], bool], deadline: float
) -> Shrunk:
    """Shrink ``case`` (generated by ``gen``) while ``still_fails`` holds."""
    cfg = gen.cfg
    shrinker = gen if cfg.min_nodes == 1 else Generator(replace(cfg, min_nodes=1))
    # Re-encode the node count for a generator whose range starts at 1.
    record = list(case.choices)
    count = spans_by_label(case.spans, NODE_COUNT)
    at = count[0].start if count else 0
    del record[at : count[0].end if count else 0]
    if shrinker.cfg.min_nodes < shrinker.cfg.max_nodes:  # it draws the count
        record.insert(at, len(case.ops) - 1)

    memo: dict[tuple[int, ...], tuple[Case, Size]] = {}

    def realize(c: Choices) -> tuple[Case, Size]:
        hit = memo.get(c.record)
        if hit is None:
            made = shrinker.generate(case.seed, prefix=c.record, zero_tail=True)
            hit = memo[c.record] = (made, size_of(made.model, made.make_inputs(case.seed)))
        return hit

    start_case, _ = realize(Choices(tuple(record), ()))
    state = Choices(tuple(start_case.choices), tuple(start_case.spans))
    verdicts: dict[tuple[int, ...], bool] = {}

    def keep(old: Choices, new: Choices) -> Choices | None:
        made, size = realize(new)
        old_case, old_size = realize(old)
        if not size.no_larger_than(old_size):
            return None
        if (len(made.choices), made.choices) >= (len(old_case.choices), old_case.choices):
            return None  # shortlex: the record must get simpler
        key = tuple(made.choices)
        if key not in verdicts:
            verdicts[key] = still_fails(made)
        if not verdicts[key]:
            return None
        # the state is what was actually drawn, with its op boundaries
        kept = Choices(key, tuple(made.spans))
        memo[kept.record] = (made, size)
        return kept

    passes: list[Pass[Choices]] = [
        Pass("drop-ops", _drop_op_chunks),
        Pass("drop-op", _drop_ops),
        Pass("zero-op", _zero_ops),
        *([] if driver.EARLIER else [Pass("zero-choices", _ZeroRuns(), resumes=False)]),
        Pass("lower-choice", _lower),
    ]
    if not still_fails(start_case):
        return Shrunk(case, passes, True)  # the re-encoded case no longer fails: keep it
    state, complete = fixed_point(state, passes, keep, deadline)
    final, _ = realize(state)
    return Shrunk(final, passes, complete)
