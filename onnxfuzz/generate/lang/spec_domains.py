"""Domains and helpers that specs share: lists of per-axis values, axes, pads, kernel
dims, multiples (each with ``empty``/``draw``/``contains``, like ``domains``'s), and small
integer helpers. One definition each, used by every spec that needs it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Domain, Ints
from onnxfuzz.generate.lang.spec_api import SpecBuilder


def is_int(v: Any) -> bool:
    """An integer value (Python or numpy), not a bool-like string or a list."""
    try:
        return not isinstance(v, str | list | tuple) and int(v) == v
    except (TypeError, ValueError):
        return False


def as_list(value: Any) -> list | None:
    """``value`` as a list, or None when it is not iterable."""
    try:
        return list(value)
    except TypeError:
        return None


def as_ints(value: Any) -> list[int] | None:
    """``value`` as a list of Python ints, or None when it is not a list of integers."""
    try:
        vals = list(value)
    except TypeError:
        return None
    return [int(v) for v in vals] if all(is_int(v) for v in vals) else None


def rank_from(b: SpecBuilder, lo: int) -> Ints:
    """Ranks ``lo``..--max-rank. When --max-rank is below ``lo`` the builder reports a
    ConfigError (the op is skipped) instead of an empty domain (a spec bug)."""
    return Ints(lo, max(lo, b.max_rank))


def types_or_skip(
    b: SpecBuilder, type_var: str, among: Collection[int] | None = None
) -> tuple[int, ...]:
    """The element types ``type_var`` may take (``b.types``), kept to ``among`` if given,
    for a spec that picks the type itself. None left (e.g. by --dtypes) rules the op out
    with a ConfigError (the op is skipped) instead of an empty domain (a spec bug)."""
    out = tuple(t for t in b.types(type_var) if among is None or t in among)
    if not out:
        raise ConfigError(f"{b.op}: no element type for {type_var} under --dtypes")
    return out


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


class Each:
    """A list whose i-th element lies in ``domains[i]``, drawn in order (strides, pads,
    Tile's repeats, Slice's starts/ends/steps)."""

    __slots__ = ("domains",)

    def __init__(self, domains: Sequence[Domain]) -> None:
        self.domains = tuple(domains)

    def __repr__(self) -> str:
        return f"Each({list(self.domains)!r})"

    def empty(self) -> bool:
        return any(d.empty() for d in self.domains)

    def draw(self, s: ChoiceStream) -> list:
        return [d.draw(s) for d in self.domains]

    def contains(self, value: Any) -> bool:
        v = as_list(value)
        return (
            v is not None
            and len(v) == len(self.domains)
            and all(d.contains(x) for d, x in zip(self.domains, v, strict=True))
        )


class Axes:
    """Distinct axes of a rank-``rank`` tensor taken from ``items`` (non-negative), in any
    order, each written as ``i - rank`` with probability ``negative`` (ONNX accepts
    [-rank, rank-1]; 0: never, and only non-negative axes are inside the domain)."""

    __slots__ = ("items", "rank", "min_size", "max_size", "negative")

    def __init__(
        self,
        items: Sequence[int],
        rank: int,
        min_size: int = 1,
        max_size: int | None = None,
        negative: float = 0.25,
    ) -> None:
        self.items = tuple(items)
        self.rank = rank
        self.min_size = min_size
        self.max_size = len(self.items) if max_size is None else min(max_size, len(self.items))
        self.negative = negative

    def __repr__(self) -> str:
        return f"Axes({list(self.items)}, rank={self.rank}, {self.min_size}..{self.max_size})"

    def empty(self) -> bool:
        return self.min_size > self.max_size

    def draw(self, s: ChoiceStream) -> list[int]:
        k = s.integer(self.min_size, self.max_size)
        rest = list(self.items)
        picked = [rest.pop(s.index(len(rest))) for _ in range(k)]
        if not self.negative:
            return picked
        return [a - self.rank if s.chance(self.negative) else a for a in picked]

    def contains(self, value: Any) -> bool:
        vals = as_ints(value)
        if vals is None or not self.min_size <= len(vals) <= self.max_size:
            return False
        lo = -self.rank if self.negative else 0
        if any(not lo <= v < self.rank for v in vals):
            return False
        norm = [v % self.rank for v in vals]
        return len(set(norm)) == len(norm) and all(a in self.items for a in norm)


class KernelDims:
    """Kernel dims with ``1 <= k[i] <= his[i]`` and ``prod(k) <= max_prod`` (LpPool's bound
    on the window size). All ones is always inside, so the domain is never empty."""

    __slots__ = ("his", "max_prod")

    def __init__(self, his: Sequence[int], max_prod: float = math.inf) -> None:
        self.his = tuple(max(1, int(h)) for h in his)
        self.max_prod = max_prod

    def __repr__(self) -> str:
        return f"KernelDims({list(self.his)}, prod<={self.max_prod:g})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> list[int]:
        out, left = [], self.max_prod
        for hi in self.his:
            k = s.integer(1, int(min(hi, left)))
            left = left // k if left != math.inf else left
            out.append(k)
        return out

    def contains(self, value: Any) -> bool:
        v = as_list(value)
        return (
            v is not None
            and len(v) == len(self.his)
            and all(Ints(1, h).contains(k) for k, h in zip(v, self.his, strict=True))
            and math.prod(v) <= self.max_prod
        )


class PadPairs:
    """Begin/end pads (ONNX layout: all begins, then all ends), each end bounded by
    ``room[i] - begin`` and each begin by ``begin_max[i]``."""

    __slots__ = ("begin_max", "room")

    def __init__(self, begin_max: Sequence[int], room: Sequence[int]) -> None:
        self.begin_max, self.room = tuple(begin_max), tuple(room)

    def __repr__(self) -> str:
        return f"PadPairs(begin<={list(self.begin_max)}, sum<={list(self.room)})"

    def empty(self) -> bool:
        return any(m < 0 for m in self.begin_max) or any(r < 0 for r in self.room)

    def draw(self, s: ChoiceStream) -> list[int]:
        begins = [s.integer(0, min(m, r)) for m, r in zip(self.begin_max, self.room, strict=True)]
        ends = [
            s.integer(0, min(m, r - pb))
            for m, r, pb in zip(self.begin_max, self.room, begins, strict=True)
        ]
        return begins + ends

    def contains(self, value: Any) -> bool:
        vals = list(value)
        n = len(self.room)
        if len(vals) != 2 * n or not all(is_int(v) and v >= 0 for v in vals):
            return False
        return all(
            vals[i] <= self.begin_max[i]
            and vals[n + i] <= self.begin_max[i]
            and vals[i] + vals[n + i] <= self.room[i]
            for i in range(n)
        )


class Multiples:
    """Positive multiples of ``step`` up to ``max(step, hi)`` (output channels: group | M)."""

    __slots__ = ("step", "hi")

    def __init__(self, step: int, hi: int) -> None:
        self.step, self.hi = step, max(step, hi)

    def __repr__(self) -> str:
        return f"Multiples({self.step}, <={self.hi})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> int:
        return self.step * s.integer(1, self.hi // self.step)

    def contains(self, value: Any) -> bool:
        return Ints(1, self.hi).contains(value) and int(value) % self.step == 0
