"""Domains of spec variables: what an attribute, dim or count may take.

A domain can ``draw`` a value from the choice stream (generation) and say whether
it ``contains`` a given value (spec completeness checks against real test suites).
An empty domain is a spec bug: the builder raises ``SpecError`` naming the variable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from onnxfuzz.generate.lang.choices import ChoiceStream


class Domain(Protocol):
    def empty(self) -> bool: ...
    def draw(self, s: ChoiceStream) -> Any: ...
    def contains(self, value: Any) -> bool: ...


class Ints:
    """Integers in ``[lo, hi]``."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = int(lo), int(hi)

    def __repr__(self) -> str:
        return f"Ints({self.lo}, {self.hi})"

    def empty(self) -> bool:
        return self.hi < self.lo

    def draw(self, s: ChoiceStream) -> int:
        return s.integer(self.lo, self.hi)

    def contains(self, value: Any) -> bool:
        return _is_int(value) and self.lo <= int(value) <= self.hi


def _is_int(v: Any) -> bool:
    try:
        return int(v) == v and not isinstance(v, str | list | tuple)
    except (TypeError, ValueError):
        return False


class OneOf:
    """One of a fixed list of options (first = simplest)."""

    __slots__ = ("options",)

    def __init__(self, options: Sequence[Any]) -> None:
        self.options = tuple(options)

    def __repr__(self) -> str:
        return f"OneOf({list(self.options)!r})"

    def empty(self) -> bool:
        return not self.options

    def draw(self, s: ChoiceStream) -> Any:
        return self.options[s.index(len(self.options))]

    def contains(self, value: Any) -> bool:
        if isinstance(value, float):
            return any(
                isinstance(o, float | int) and abs(o - value) <= 1e-6 * max(1, abs(o))
                for o in self.options
            )
        return any(value == o for o in self.options)


class Floats:
    """Real numbers in ``[lo, hi]``, drawn on a grid of ``steps`` + 1 points
    (attributes such as alpha; values from a grid keep models readable)."""

    __slots__ = ("lo", "hi", "steps")

    def __init__(self, lo: float, hi: float, steps: int = 8) -> None:
        self.lo, self.hi, self.steps = float(lo), float(hi), steps

    def __repr__(self) -> str:
        return f"Floats({self.lo:g}, {self.hi:g})"

    def empty(self) -> bool:
        return self.hi < self.lo

    def draw(self, s: ChoiceStream) -> float:
        if self.hi == self.lo:
            return self.lo
        k = s.integer(0, self.steps)
        return round(self.lo + (self.hi - self.lo) * k / self.steps, 6)

    def contains(self, value: Any) -> bool:
        return isinstance(value, float | int) and self.lo - 1e-6 <= value <= self.hi + 1e-6


class Permutation:
    """A permutation of ``range(n)``."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Permutation({self.n})"

    def empty(self) -> bool:
        return self.n < 0

    def draw(self, s: ChoiceStream) -> list[int]:
        rest = list(range(self.n))
        return [rest.pop(s.index(len(rest))) for _ in range(self.n)]

    def contains(self, value: Any) -> bool:
        return sorted(int(v) for v in value) == list(range(self.n))


class Subset:
    """A subset of ``items`` with ``min_size <= size <= max_size``, in the order of ``items``
    (unordered membership)."""

    __slots__ = ("items", "min_size", "max_size")

    def __init__(self, items: Sequence[Any], min_size: int = 0, max_size: int | None = None):
        self.items = tuple(items)
        self.min_size = min_size
        self.max_size = len(self.items) if max_size is None else min(max_size, len(self.items))

    def __repr__(self) -> str:
        return f"Subset({list(self.items)}, {self.min_size}..{self.max_size})"

    def empty(self) -> bool:
        return self.min_size > self.max_size

    def draw(self, s: ChoiceStream) -> list[Any]:
        k = s.integer(self.min_size, self.max_size)
        rest = list(range(len(self.items)))
        picked = sorted(rest.pop(s.index(len(rest))) for _ in range(k))
        return [self.items[i] for i in picked]

    def contains(self, value: Any) -> bool:
        vals = list(value)
        return (
            len(set(vals)) == len(vals)
            and self.min_size <= len(vals) <= self.max_size
            and all(v in self.items for v in vals)
        )


class Shuffled(Subset):
    """Like ``Subset`` but the order of the picked items is itself a choice
    (e.g. Unsqueeze axes in any order)."""

    def draw(self, s: ChoiceStream) -> list[Any]:
        k = s.integer(self.min_size, self.max_size)
        rest = list(self.items)
        return [rest.pop(s.index(len(rest))) for _ in range(k)]


class Linked:
    """Two dims where the second is ``f`` of the first (a square matrix's, AffineGrid's
    theta (2, 3) or (3, 4)): ``lead, follower = Linked(domain, f).pair()``. Per-axis dims
    are drawn and matched in axis order, so the follower sees what the lead took."""

    __slots__ = ("dom", "f", "last")

    def __init__(self, dom: Domain, f: Any = None) -> None:
        self.dom, self.f, self.last = dom, f or (lambda v: v), None

    def __repr__(self) -> str:
        return repr(self.dom)

    def empty(self) -> bool:
        return self.dom.empty()

    def draw(self, s: ChoiceStream) -> Any:
        self.last = self.dom.draw(s)
        return self.last

    def contains(self, value: Any) -> bool:
        self.last = value
        return self.dom.contains(value)

    def pair(self) -> tuple[Linked, Follower]:
        return self, Follower(self)


class Follower:
    """The second dim of a ``Linked`` pair: ``f`` of what the lead took."""

    __slots__ = ("lead",)

    def __init__(self, lead: Linked) -> None:
        self.lead = lead

    def __repr__(self) -> str:
        return f"Follows({self.lead!r})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> Any:
        return self.lead.f(self.lead.last)

    def contains(self, value: Any) -> bool:
        return self.lead.last is not None and value == self.lead.f(self.lead.last)
