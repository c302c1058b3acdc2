"""Layout ops: they move values without changing them, so every output's interval is its
input's. Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile (Slice, Split,
Concat, DepthToSpace, SpaceToDepth, Shape and Size live in ``slicing``).

Order: the data input first with the widest pattern the op accepts (so existing tensors
are reused), then attributes and constant inputs drawn from domains computed from its
shape. Structured constant inputs (a Reshape target, a set of axes) get a domain class of
their own here, whose ``contains`` accepts every spelling ONNX gives the same meaning
(negative axes, 0 and -1 in a Reshape target), so ONNX's node tests can be checked.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints, OneOf, Permutation
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Axes, Each, as_ints, divisors


class NewAxes:
    """Unsqueeze's axes: 1..``max_new`` distinct positions in the *output*, whose rank is
    ``in_rank`` + the number of axes, so the length is drawn before the positions."""

    __slots__ = ("in_rank", "max_new")

    def __init__(self, in_rank: int, max_new: int) -> None:
        self.in_rank, self.max_new = in_rank, max_new

    def __repr__(self) -> str:
        return f"NewAxes(in_rank={self.in_rank}, 1..{self.max_new})"

    def _at(self, k: int) -> Axes:
        out_rank = self.in_rank + k
        return Axes(range(out_rank), out_rank, k, k)

    def empty(self) -> bool:
        return self.max_new < 1

    def draw(self, s: ChoiceStream) -> list[int]:
        return self._at(s.integer(1, self.max_new)).draw(s)

    def contains(self, value: Any) -> bool:
        vals = as_ints(value)
        return (
            vals is not None
            and 1 <= len(vals) <= self.max_new
            and self._at(len(vals)).contains(vals)
        )


class ReshapeTarget:
    """A valid Reshape ``shape`` input for a tensor of shape ``in_shape``: a factorization
    of the element count into at most ``max_rank`` dims, where a dim may be written as 0
    (copy the input's dim at that position; only with allowzero=0) and at most one as -1
    (inferred from the element count)."""

    __slots__ = ("in_shape", "allowzero", "max_rank", "size")

    def __init__(self, in_shape: Sequence[int], allowzero: int, max_rank: int) -> None:
        self.in_shape = tuple(in_shape)
        self.allowzero = allowzero
        self.max_rank = max_rank
        self.size = math.prod(self.in_shape)

    def __repr__(self) -> str:
        return (
            f"ReshapeTarget({list(self.in_shape)}, allowzero={self.allowzero}, "
            f"rank<={self.max_rank})"
        )

    def empty(self) -> bool:
        return self.max_rank < 1 and self.size != 1

    def draw(self, s: ChoiceStream) -> list[int]:
        rank = s.integer(0 if self.size == 1 else 1, self.max_rank)
        dims, rest = [], self.size
        for _ in range(rank - 1):
            divs = divisors(rest)
            d = divs[s.index(len(divs))]
            dims.append(d)
            rest //= d
        if rank:
            dims.append(rest)
        target = list(dims)
        if not self.allowzero:  # 0 = "same dim as the input here"
            for i in range(min(rank, len(self.in_shape))):
                if dims[i] == self.in_shape[i] and s.chance(0.25):
                    target[i] = 0
        infer = s.integer(-1, rank - 1)  # -1: no inferred dim
        if infer >= 0 and target[infer] != 0:
            target[infer] = -1
        return target

    def resolve(self, target: Sequence[int]) -> tuple[int, ...]:
        """The output shape ``target`` stands for (assumes ``contains(target)``)."""
        dims = [
            self.in_shape[i] if v == 0 and not self.allowzero else v for i, v in enumerate(target)
        ]
        known = math.prod(d for d in dims if d != -1)
        return tuple(self.size // known if d == -1 else d for d in dims)

    def contains(self, value: Any) -> bool:
        vals = as_ints(value)
        if vals is None or len(vals) > self.max_rank or vals.count(-1) > 1:
            return False
        for i, v in enumerate(vals):
            if v < -1 or (v == 0 and (self.allowzero or i >= len(self.in_shape))):
                return False  # allowzero=1 with a 0 means a zero-size output
        known = math.prod(self.in_shape[i] if v == 0 else v for i, v in enumerate(vals) if v != -1)
        if -1 in vals:
            return self.size % known == 0
        return known == self.size


class ExpandShape:
    """Expand's ``shape`` input: any rank up to ``max_rank``; aligned from the right with
    the input's shape, each pair broadcasts (equal, or one of them 1). Free dims (where the
    input has 1, or on extra leading axes) are drawn in 1..``max_dim``."""

    __slots__ = ("in_shape", "max_rank", "max_dim")

    def __init__(self, in_shape: Sequence[int], max_rank: int, max_dim: int) -> None:
        self.in_shape, self.max_rank, self.max_dim = tuple(in_shape), max_rank, max_dim

    def __repr__(self) -> str:
        return f"ExpandShape({list(self.in_shape)}, rank<={self.max_rank}, dim<={self.max_dim})"

    def empty(self) -> bool:
        return False  # [] (no change) always works

    def _aligned(self, rank: int, j: int) -> int:
        """The input's dim aligned with position ``j`` of a rank-``rank`` target (1 if none)."""
        i = j - (rank - len(self.in_shape))
        return self.in_shape[i] if i >= 0 else 1

    def draw(self, s: ChoiceStream) -> list[int]:
        rank = s.integer(0, self.max_rank)
        out = []
        for j in range(rank):
            d = self._aligned(rank, j)
            out.append(s.integer(1, self.max_dim) if d == 1 else (d, 1)[s.index(2)])
        return out

    def contains(self, value: Any) -> bool:
        vals = as_ints(value)
        if vals is None or len(vals) > self.max_rank:
            return False
        for j, v in enumerate(vals):
            d = self._aligned(len(vals), j)
            if not (1 <= v <= self.max_dim if d == 1 else v in (d, 1)):
                return False
        return True

    def output(self, target: Sequence[int]) -> tuple[int, ...]:
        rank = max(len(target), len(self.in_shape))
        lead_t, lead_x = rank - len(target), rank - len(self.in_shape)
        return tuple(
            max(
                target[j - lead_t] if j >= lead_t else 1,
                self.in_shape[j - lead_x] if j >= lead_x else 1,
            )
            for j in range(rank)
        )


@op("Reshape")
def reshape(b: SpecBuilder, p: None) -> None:
    x = b.input("data")
    # allowzero (14+): 0 in the target means "copy" when 0, a literal 0 when 1; a literal
    # zero would make an empty output, so with allowzero=1 the target has no zeros.
    allowzero = b.attr("allowzero", OneOf([0, 1]), 0) if b.version >= 14 else 0
    domain = ReshapeTarget(x.shape, allowzero, b.max_rank)
    target = b.draw("shape", domain)
    b.const("shape", target)
    b.output(domain.resolve(target), interval=x.interval)


@op("Flatten")
def flatten(b: SpecBuilder, p: None) -> None:
    x = b.input("input")
    # axis in [-r, r]; the default 1 exists only for rank >= 1.
    axis = b.attr("axis", Ints(-x.rank, x.rank), 1 if x.rank >= 1 else MISSING)
    a = axis + x.rank if axis < 0 else axis
    b.output((math.prod(x.shape[:a]), math.prod(x.shape[a:])), interval=x.interval)


@op("Squeeze")
def squeeze(b: SpecBuilder, p: None) -> None:
    x = b.input("data")
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    # An axis whose dim is not 1 is an error, so explicit axes come from the 1-dims; with
    # none of them, axes is left out (which removes every 1-dim: none).
    if ones and b.optional("axes"):
        axes = b.draw("axes", Axes(ones, x.rank))
        b.const("axes", axes)
        removed = {a % x.rank for a in axes}
    else:
        removed = set(ones)
    b.output([d for i, d in enumerate(x.shape) if i not in removed], interval=x.interval)


@op("Unsqueeze")
def unsqueeze(b: SpecBuilder, p: None) -> None:
    # Room for at least one new axis inside --max-rank.
    if b.max_rank < 1:
        raise ConfigError("Unsqueeze: needs --max-rank >= 1 (its output has a new axis)")
    x = b.input("data", rank=Ints(0, b.max_rank - 1))
    axes = b.draw("axes", NewAxes(x.rank, b.max_rank - x.rank))
    b.const("axes", axes)
    out_rank = x.rank + len(axes)
    new = {a % out_rank for a in axes}
    dims = iter(x.shape)
    b.output([1 if j in new else next(dims) for j in range(out_rank)], interval=x.interval)


@op("Transpose")
def transpose(b: SpecBuilder, p: None) -> None:
    x = b.input("data")
    reverse = list(range(x.rank))[::-1]
    # perm is optional (default: reverse the axes); a scalar has no perm to write.
    perm = b.attr("perm", Permutation(x.rank), reverse) if x.rank else reverse
    b.output([x.shape[int(a)] for a in perm], interval=x.interval)


@op("Expand")
def expand(b: SpecBuilder, p: None) -> None:
    x = b.input("input")
    domain = ExpandShape(x.shape, b.max_rank, b.max_dim)
    target = b.draw("shape", domain)
    b.const("shape", target)
    b.output(domain.output(target), interval=x.interval)


@op("Tile")
def tile(b: SpecBuilder, p: None) -> None:
    x = b.input("input")
    # One repeat per axis; small, so tiled dims stay near --max-dim (at least 1..3).
    repeats = b.draw("repeats", Each([Ints(1, max(3, b.max_dim // d)) for d in x.shape]))
    b.const("repeats", repeats)
    b.output([d * r for d, r in zip(x.shape, repeats, strict=True)], interval=x.interval)
