"""Value intervals: what every tensor's values are known to lie in.

Each tensor in a generated graph carries a sound interval (every element lies
inside it). Specs state the value domain each input needs (``Values``: Log needs
> 0, a divisor needs |y| >= 0.5, Gather indices lie in [-d, d-1]); the solver
reuses an existing tensor for that input only if its interval fits, and draws a
fresh tensor inside the domain otherwise. Specs compute output intervals from
input intervals, and every interval stays inside the element type's bound, so
reference outputs are finite by construction, not by filtering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from onnxfuzz import dtypes as dt

# ONNX Runtime 1.31's CPU Clip on int64 leaves some values beyond the int32 range unclipped
# (2**31 + 5 with max 10000 stays 2**31 + 5 in a tensor of two elements): the reference
# would be wrong, so int64 tensors are clipped only inside it (glue and the Clip spec).
INT64_CLIP_SAFE = 2**31 - 1


class Interval:
    """A closed interval ``[lo, hi]``; ``min_abs`` > 0 also promises |x| >= min_abs."""

    __slots__ = ("lo", "hi", "min_abs")

    def __init__(self, lo: float, hi: float, min_abs: float = 0.0) -> None:
        self.lo = float(lo)
        self.hi = float(hi)
        if lo > 0:
            min_abs = max(min_abs, lo)
        elif hi < 0:
            min_abs = max(min_abs, -hi)
        self.min_abs = float(min_abs)

    def __repr__(self) -> str:
        extra = f", |x|>={self.min_abs:g}" if self.min_abs and self.lo <= 0 <= self.hi else ""
        return f"[{self.lo:g}, {self.hi:g}{extra}]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Interval) and (self.lo, self.hi, self.min_abs) == (
            other.lo,
            other.hi,
            other.min_abs,
        )

    @property
    def mag(self) -> float:
        """Largest magnitude."""
        return max(abs(self.lo), abs(self.hi))

    def within(self, lo: float, hi: float) -> bool:
        return lo <= self.lo and self.hi <= hi

    # --- arithmetic used by specs to compute output intervals ---------------------
    def __add__(self, o: Interval) -> Interval:
        return Interval(self.lo + o.lo, self.hi + o.hi)

    def __sub__(self, o: Interval) -> Interval:
        return Interval(self.lo - o.hi, self.hi - o.lo)

    def __mul__(self, o: Interval) -> Interval:
        c = (self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi)
        return Interval(min(c), max(c), self.min_abs * o.min_abs)

    def __neg__(self) -> Interval:
        return Interval(-self.hi, -self.lo, self.min_abs)

    def scale(self, k: float) -> Interval:
        """Every element multiplied by a constant ``k``."""
        return Interval(min(self.lo * k, self.hi * k), max(self.lo * k, self.hi * k))

    def union(self, o: Interval) -> Interval:
        return Interval(min(self.lo, o.lo), max(self.hi, o.hi), min(self.min_abs, o.min_abs))

    def abs(self) -> Interval:
        if self.lo >= 0:
            return self
        if self.hi <= 0:
            return -self
        return Interval(self.min_abs, self.mag)

    def symmetric(self, k: float = 1.0) -> Interval:
        """``[-k*mag, k*mag]``: sums and products of unknown signs."""
        m = self.mag * k
        return Interval(-m, m)

    def monotone(self, f: Callable[[float], float], increasing: bool = True) -> Interval:
        a, b = f(self.lo), f(self.hi)
        return Interval(a, b) if increasing else Interval(b, a)

    def clamp(self, lo: float, hi: float) -> Interval:
        return Interval(min(max(self.lo, lo), hi), max(min(self.hi, hi), lo))


# Kernels round: float32 tanh returns -1.0000001 for large inputs (seen in ONNX Runtime),
# so a float output's interval gets room for a few ulps. A non-negative interval stays
# non-negative (no kernel rounds exp, sigmoid or relu below zero), so Sqrt and Log can still
# take such tensors; Asin/Acos (domain [-1, 1]) no longer take a tanh's.
_ROUNDING = {dt.FLOAT: 1e-6, dt.DOUBLE: 1e-12, dt.FLOAT16: 2e-3, dt.BFLOAT16: 2e-2}


def rounding_room(iv: Interval, dtype: int, lo: float, hi: float) -> Interval:
    """``iv`` widened by a few ulps of the float type ``dtype``, inside ``[lo, hi]``."""
    eps = _ROUNDING[dtype] * max(1.0, iv.mag)
    new_lo = iv.lo if iv.lo >= 0 else max(lo, iv.lo - eps)
    return Interval(new_lo, min(hi, iv.hi + eps), max(0.0, iv.min_abs - eps))


def hull(items: Iterable[Interval]) -> Interval:
    items = list(items)
    return Interval(
        min(i.lo for i in items), max(i.hi for i in items), min(i.min_abs for i in items)
    )


def point(v: float) -> Interval:
    return Interval(v, v)


@dataclass(frozen=True, slots=True)
class Values:
    """The value domain an input needs.

    ``lo``/``hi`` default to the element type's bound. ``min_abs`` keeps values away
    from zero (divisors). ``distinct_axis`` asks for values without ties along an axis
    (ArgMax, TopK); ``avoid`` keeps float values away from rounding ties
    (``"integer"``: not near whole numbers, for Floor/Ceil/float-to-int Cast;
    ``"half"``: not near x.5, for Round; ``"fraction"``: whole numbers only, where
    implementations disagree on what a fraction means). Such inputs cannot be satisfied by
    reusing an arbitrary intermediate tensor, so the solver makes them fresh.
    """

    lo: float | None = None
    hi: float | None = None
    min_abs: float = 0.0
    distinct_axis: int | None = None
    avoid: str | None = None

    def bounds(self, dtype: int) -> tuple[float, float]:
        blo, bhi = dt.value_range(dtype)
        lo = blo if self.lo is None else max(blo, self.lo)
        hi = bhi if self.hi is None else min(bhi, self.hi)
        return lo, hi

    def fresh_only(self, dtype: int) -> bool:
        return self.distinct_axis is not None or (self.avoid is not None and dtype in dt.FLOATS)

    def to_json(self) -> dict:
        d: dict = {}
        if self.lo is not None:
            d["lo"] = self.lo
        if self.hi is not None:
            d["hi"] = self.hi
        if self.min_abs:
            d["min_abs"] = self.min_abs
        if self.distinct_axis is not None:
            d["distinct_axis"] = self.distinct_axis
        if self.avoid:
            d["avoid"] = self.avoid
        return d


ANY = Values()
