"""Reductions: Y = reduce(f, data, axes), keepdims, noop_with_empty_axes.

Axes are an attribute up to the op version that moved them to an optional input (ReduceSum
at 13, the others at 18); from then on they are a constant int64 input. With axes absent
(or, as an input, empty) the op reduces every axis, unless noop_with_empty_axes=1, where it
reduces none: ONNX Runtime then still applies the elementwise part (x^2 for ReduceSumSquare,
|x| for ReduceL1/L2, log for ReduceLogSum), i.e. it reduces sets of one element.

Soundness: each op's result over N elements has a bound that grows with N (a sum by N, a
product by mag^N). The input domain lets any single axis be reduced (dims of tensors the solver
reuses are at most ``max_reuse_dim``), and the axes domain keeps only the sets of axes whose
element count N keeps the result inside the dtype's bound for this input's interval.

ONNX's empty-set node tests (a zero-size dim) are left to the core's zero-size exclusion.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import OneOf
from onnxfuzz.generate.lang.intervals import ANY, Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder

MARGIN = 0.999  # input bounds a little inside the limit, so float rounding cannot cross it


def _bound(dtype: int) -> float:
    return dt.value_range(dtype)[1]


def _product(dims: Iterable[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _whole(iv: Interval, dtype: int) -> Interval:
    """Integer results are truncated or rounded: widen to the enclosing integers."""
    if dtype in dt.INTS:
        return Interval(math.floor(iv.lo), math.ceil(iv.hi))
    return iv


# --- per-op facts ------------------------------------------------------------------------
@dataclass(frozen=True)
class Reduction:
    # (dtype, reuse cap) -> the input's value domain: any one axis can be reduced
    values: Callable[[int, int], Values]
    # (input interval, dtype) -> the largest element count N whose result stays in bound
    limit: Callable[[Interval, int], float]
    # (input interval, N, dtype) -> the output interval
    out: Callable[[Interval, int, int], Interval]
    axes_input_since: int = 18
    # A mean, root or log of integers has to be rounded back to an integer, and ONNX does
    # not say how (backends truncate, floor or round): those reductions take floats only.
    floats_only: bool = False


def _magnitude(scale: Callable[[float], float]) -> Callable[[int, int], Values]:
    """|x| <= scale^-1(bound / cap): a sum of ``cap`` such terms stays inside the bound."""

    def values(dtype: int, cap: int) -> Values:
        m = MARGIN * scale(_bound(dtype) / cap)
        if dtype in dt.INTS:
            m = max(1, math.floor(m))
        return Values(-m, m)

    return values


def _count(per_term: Callable[[Interval], float]) -> Callable[[Interval, int], float]:
    """N terms each at most ``per_term`` in size: N <= bound / per_term."""

    def limit(iv: Interval, dtype: int) -> float:
        t = per_term(iv)
        return math.inf if t <= 0 else math.floor(_bound(dtype) / t)

    return limit


def _sum(iv: Interval, n: int, dtype: int) -> Interval:
    return Interval(n * iv.lo, n * iv.hi)


def _prod_values(dtype: int, cap: int) -> Values:
    # |x|^cap <= bound, and at most 1.5: products of reused tensors grow fast otherwise.
    r = min(1.5, MARGIN * _bound(dtype) ** (1.0 / cap))
    return Values(-r, r)


def _prod_limit(iv: Interval, dtype: int) -> float:
    if iv.mag <= 1:
        return math.inf
    return math.floor(math.log(_bound(dtype)) / math.log(iv.mag))


def _prod(iv: Interval, n: int, dtype: int) -> Interval:
    if iv.lo >= 0:
        return Interval(iv.lo**n, iv.hi**n)
    m = iv.mag**n
    return Interval(-m, m)


def _log_sum_values(dtype: int, cap: int) -> Values:
    # log needs a positive sum: every term > 0, and the sum of ``cap`` terms in bound.
    return Values(0.01, MARGIN * _bound(dtype) / cap)


def _log_sum(iv: Interval, n: int, dtype: int) -> Interval:
    return _whole(Interval(math.log(n * iv.lo), math.log(n * iv.hi)), dtype)


def _lse_values(dtype: int, cap: int) -> Values:
    # A sum of ``cap`` exp(x) in bound (no overflow even without the max shift), and exp(x)
    # far from underflow (a naive log(sum(exp)) of underflowed terms is -inf).
    b = _bound(dtype)
    return Values(-math.log(b), MARGIN * math.log(b / cap))


def _log_sum_exp(iv: Interval, n: int, dtype: int) -> Interval:
    # log(sum exp(x_i)) lies between log(N exp(lo)) and log(N exp(hi)).
    return _whole(Interval(iv.lo + math.log(n), iv.hi + math.log(n)), dtype)


def _identity(iv: Interval, n: int, dtype: int) -> Interval:
    return iv


SUM = Reduction(_magnitude(lambda t: t), _count(lambda iv: iv.mag), _sum, axes_input_since=13)

TABLE: dict[str, Reduction] = {
    "ReduceSum": SUM,
    # Mean accumulates a sum first (integer and half-precision accumulators): the sum's budget.
    "ReduceMean": Reduction(SUM.values, SUM.limit, _identity, floats_only=True),
    "ReduceMax": Reduction(lambda d, cap: ANY, lambda iv, d: math.inf, _identity),
    "ReduceMin": Reduction(lambda d, cap: ANY, lambda iv, d: math.inf, _identity),
    "ReduceProd": Reduction(_prod_values, _prod_limit, _prod),
    "ReduceL1": Reduction(
        SUM.values, SUM.limit, lambda iv, n, d: Interval(n * iv.abs().lo, n * iv.mag)
    ),
    "ReduceL2": Reduction(
        _magnitude(math.sqrt),
        _count(lambda iv: iv.mag**2),
        lambda iv, n, d: _whole(Interval(math.sqrt(n) * iv.abs().lo, math.sqrt(n) * iv.mag), d),
        floats_only=True,
    ),
    "ReduceSumSquare": Reduction(
        _magnitude(math.sqrt),
        _count(lambda iv: iv.mag**2),
        lambda iv, n, d: Interval(n * iv.abs().lo ** 2, n * iv.mag**2),
    ),
    "ReduceLogSum": Reduction(
        _log_sum_values, _count(lambda iv: iv.hi), _log_sum, floats_only=True
    ),
    "ReduceLogSumExp": Reduction(
        _lse_values, _count(lambda iv: math.exp(iv.hi)), _log_sum_exp, floats_only=True
    ),
}


# --- the axes domain ------------------------------------------------------------------------
class ReduceAxes:
    """Distinct axes of ``shape``, each written as i or i - rank, in any order, whose dims
    multiply to at most ``limit`` elements; at least ``min_size`` of them."""

    __slots__ = ("shape", "limit", "min_size")

    def __init__(self, shape: Sequence[int], limit: float, min_size: int) -> None:
        self.shape, self.limit, self.min_size = tuple(shape), limit, min_size

    def __repr__(self) -> str:
        return f"ReduceAxes({list(self.shape)}, <= {self.limit:g} elements, >= {self.min_size})"

    def empty(self) -> bool:
        return self.min_size > 0 and not any(d <= self.limit for d in self.shape)

    def draw(self, s: ChoiceStream) -> list[int]:
        r = len(self.shape)
        want = s.integer(self.min_size, r)
        picked: list[int] = []
        n = 1
        while len(picked) < want:
            fits = [a for a in range(r) if a not in picked and n * self.shape[a] <= self.limit]
            if not fits:
                break
            a = fits[s.index(len(fits))]
            picked.append(a)
            n *= self.shape[a]
        return [a if s.chance(0.5) else a - r for a in picked]

    def contains(self, value: Any) -> bool:
        r = len(self.shape)
        try:
            axes = [int(v) for v in value]
        except (TypeError, ValueError):
            return False
        if not all(-r <= a < r for a in axes):
            return False
        norm = {a % r for a in axes}
        return (
            len(norm) == len(axes)
            and len(axes) >= self.min_size
            and _product(self.shape[a] for a in norm) <= self.limit
        )


def _reduced_shape(shape: Sequence[int], axes: set[int], keepdims: int) -> list[int]:
    if keepdims:
        return [1 if i in axes else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in axes]


# --- the spec -----------------------------------------------------------------------------
@op(table=TABLE)
def reduce(b: SpecBuilder, p: Reduction) -> None:
    cap = b.cfg.max_reuse_dim
    x = b.input(
        "data", dtype=dt.FLOATS if p.floats_only else None, values=lambda d: p.values(d, cap)
    )
    keepdims = b.attr("keepdims", OneOf([0, 1]), 1)
    limit = p.limit(x.interval, x.dtype)
    whole_fits = _product(x.shape) <= limit  # may every axis be reduced?

    if b.version < p.axes_input_since:
        # Axes attribute: absent = reduce all (a rank-0 input has no axis to name).
        if x.rank == 0:
            axes: list[int] = []
        elif whole_fits:
            axes = b.attr("axes", ReduceAxes(x.shape, limit, 1), default=[])
        else:
            axes = b.attr("axes", ReduceAxes(x.shape, limit, 1))
        noop = 0
    else:
        noop = b.attr("noop_with_empty_axes", OneOf([0, 1]), 0)
        # Empty axes (absent or []) are an identity under noop, else reduce every axis;
        # when the latter does not fit, the axes input must be present and non-empty.
        empty_ok = noop == 1 or whole_fits
        axes = []
        if not empty_ok or b.optional("axes"):
            axes = b.draw("axes", ReduceAxes(x.shape, limit, 0 if empty_ok else 1))
            b.const("axes", np.asarray(axes, dtype=np.int64))

    if axes:
        reduced = {a % x.rank for a in axes}
    elif noop:
        reduced = set()
    else:
        reduced = set(range(x.rank))
    n = _product(x.shape[a] for a in reduced)
    shape = x.shape if not reduced else _reduced_shape(x.shape, reduced, keepdims)
    b.output(shape, interval=p.out(x.interval, n, x.dtype) if x.dtype != dt.BOOL else None)
