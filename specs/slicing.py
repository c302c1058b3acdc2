"""Ops that cut or join tensors along axes: Slice, Split, Concat, DepthToSpace and
SpaceToDepth (blocks of channels <-> blocks of pixels), and the shape queries Shape, Size.

Values move unchanged, so outputs keep the input's interval (Concat: the hull of its
inputs'; Shape and Size: the exact numbers they return). Every output dim is >= 1:
slices are drawn non-empty, split sizes positive.

Slice and Shape read indices the numpy way, then clamp: ``Index`` draws an effective index
in a wanted range and one of its spellings (positive, negative, or past the clamp such as
INT64_MAX), and accepts every int64 that means an index in that range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints, OneOf, Subset
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import Interval, hull, point
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Axes, Each, is_int, rank_from

NOT_GENERATED = {
    "test_slice_start_out_of_bounds": "an empty slice (zero-size output): slices are drawn "
    "non-empty",
    "test_shape_start_greater_than_end": "an empty shape slice (zero-size output)",
    "test_split_equal_parts_1d_opset13": "Split-13 without `split` takes its output count from "
    "the node's outputs, which a spec cannot draw: the spec "
    "passes `split` for more than one output",
    "test_split_equal_parts_2d_opset13": "as test_split_equal_parts_1d_opset13",
    "test_split_equal_parts_default_axis_opset13": "as test_split_equal_parts_1d_opset13",
}

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def clamp_index(v: int, d: int, lo: int, hi: int) -> int:
    """ONNX's effective index: a negative ``v`` counts from the end (``v + d``), then the
    result is clamped to ``[lo, hi]``."""
    if v < 0:
        v += d
    return min(max(v, lo), hi)


class Index:
    """Int64 values whose effective index (``clamp_index(v, d, lo, hi)``) lies in
    ``[want_lo, want_hi]``. Draws the effective index first, then one spelling of it:
    ``e``, ``e - d``, or a value past the clamp (INT64_MAX / INT64_MIN, as exporters write
    "to the end") where ``e`` is at the clamp's edge. Every other spelling clamps the same."""

    __slots__ = ("d", "lo", "hi", "want_lo", "want_hi")

    def __init__(self, d: int, lo: int, hi: int, want_lo: int, want_hi: int) -> None:
        self.d, self.lo, self.hi = d, lo, hi
        self.want_lo, self.want_hi = max(want_lo, lo), min(want_hi, hi)

    def __repr__(self) -> str:
        return (
            f"Index(d={self.d}, clamp [{self.lo}, {self.hi}], want [{self.want_lo}, "
            f"{self.want_hi}])"
        )

    def empty(self) -> bool:
        return self.want_lo > self.want_hi

    def draw(self, s: ChoiceStream) -> int:
        e = s.integer(self.want_lo, self.want_hi)
        spellings = [e] if e >= 0 else []
        if e < self.d:
            spellings.append(e - self.d)
        if e == self.hi:
            spellings.append(INT64_MAX)
        if e == self.lo:
            spellings.append(INT64_MIN)
        return spellings[s.index(len(spellings))]

    def contains(self, value: Any) -> bool:
        return (
            is_int(value)
            and INT64_MIN <= int(value) <= INT64_MAX
            and self.want_lo <= clamp_index(int(value), self.d, self.lo, self.hi) <= self.want_hi
        )


class Step:
    """A non-zero Slice step of an allowed sign. Drawn with magnitude 1..3 (a larger step
    only thins the slice further); any non-zero int64 of an allowed sign is accepted."""

    __slots__ = ("forward",)

    def __init__(self, forward: bool) -> None:
        self.forward = forward  # may the step be positive (negative ones always work)

    def __repr__(self) -> str:
        return f"Step(forward={self.forward})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> int:
        options = [1, 2, 3, -1, -2, -3] if self.forward else [-1, -2, -3]
        return options[s.index(len(options))]

    def contains(self, value: Any) -> bool:
        return is_int(value) and value != 0 and (self.forward or value < 0)


class Composition:
    """Split sizes: 1..``max_parts`` positive ints summing to ``total``."""

    __slots__ = ("total", "max_parts")

    def __init__(self, total: int, max_parts: int) -> None:
        self.total, self.max_parts = total, max_parts

    def __repr__(self) -> str:
        return f"Composition({self.total}, parts<={self.max_parts})"

    def empty(self) -> bool:
        return self.total < 1 or self.max_parts < 1

    def draw(self, s: ChoiceStream) -> list[int]:
        k = s.integer(1, min(self.max_parts, self.total))
        cuts = [0, *Subset(range(1, self.total), k - 1, k - 1).draw(s), self.total]
        return [b - a for a, b in zip(cuts, cuts[1:], strict=False)]

    def contains(self, value: Any) -> bool:
        vals = list(value)
        return (
            1 <= len(vals) <= self.max_parts
            and all(is_int(v) and v >= 1 for v in vals)
            and sum(vals) == self.total
        )


@op("Slice")
def slice_(b: SpecBuilder, p: None) -> None:
    has_axes, has_steps = b.optional("axes"), b.optional("steps")
    x = b.input("data", rank=rank_from(b, 1))
    r = x.rank
    # Omitted axes mean [0, ..., r-1], so starts then has one entry per axis.
    axes = b.draw("axes", Axes(range(r), r, 1, r)) if has_axes else list(range(r))
    dims = [x.shape[a % r] for a in axes]
    # Without steps every step is 1, so a start must leave room before the end; with
    # steps, a start at the end is still fine for a negative step.
    starts = b.draw("starts", Each([Index(d, 0, d, 0, d if has_steps else d - 1) for d in dims]))
    if has_steps:
        steps = b.draw(
            "steps",
            Each([Step(clamp_index(st, d, 0, d) < d) for st, d in zip(starts, dims, strict=True)]),
        )
    else:
        steps = [1] * len(axes)
    # The end is clamped to [0, d] going forward, [-1, d-1] going backward; the slice is
    # non-empty iff the effective end lies strictly beyond the effective start.
    ends_dom, firsts = [], []
    for st, step, d in zip(starts, steps, dims, strict=True):
        if step > 0:
            s0 = clamp_index(st, d, 0, d)
            ends_dom.append(Index(d, 0, d, s0 + 1, d))
        else:
            s0 = clamp_index(st, d, 0, d - 1)
            ends_dom.append(Index(d, -1, d - 1, -1, s0 - 1))
        firsts.append(s0)
    ends = b.draw("ends", Each(ends_dom))
    b.const("starts", starts)
    b.const("ends", ends)
    if has_axes:
        b.const("axes", axes)
    if has_steps:
        b.const("steps", steps)
    shape = list(x.shape)
    for a, s0, en, step, dom in zip(axes, firsts, ends, steps, ends_dom, strict=True):
        e0 = clamp_index(en, dom.d, dom.lo, dom.hi)
        shape[a % r] = len(range(s0, e0, step))
    b.output(shape, interval=x.interval)


def _outputs(
    b: SpecBuilder, x: Tensor, shapes: Sequence[Sequence[int]], interval: Interval
) -> None:
    """Outputs of a variadic output list (the type variable is bound by the input)."""
    for shape in shapes:
        b.output(shape, interval=interval)


@op("Split")
def split(b: SpecBuilder, p: None) -> None:
    has_split = b.optional("split")
    x = b.input("input", rank=rank_from(b, 1))
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), 0)
    ax = axis + x.rank if axis < 0 else axis
    d = x.shape[ax]
    if has_split:
        sizes = b.draw("split", Composition(d, 4))
        b.const("split", sizes)
    elif b.version >= 18:
        # num_outputs: chunks of ceil(d / n), the last one smaller; n only where the last
        # chunk stays non-empty (d=5, n=4 would leave -1).
        ok = [n for n in range(1, min(4, d) + 1) if d - math.ceil(d / n) * (n - 1) >= 1]
        n = b.attr("num_outputs", OneOf(ok))
        chunk = math.ceil(d / n)
        sizes = [chunk] * (n - 1) + [d - chunk * (n - 1)]
    else:
        # Split-13 without `split` splits equally into as many outputs as the node has:
        # a count no builder variable carries, so this branch makes one output.
        sizes = [d]
    shapes = [[sz if i == ax else dim for i, dim in enumerate(x.shape)] for sz in sizes]
    _outputs(b, x, shapes, x.interval)


@op("Concat")
def concat(b: SpecBuilder, p: None) -> None:
    n = b.arity(1, 4)
    x = b.input("inputs", rank=rank_from(b, 1))
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1))
    ax = axis + x.rank if axis < 0 else axis
    # Every other input matches the first on all axes but the concatenation axis.
    dims = [None if i == ax else d for i, d in enumerate(x.shape)]
    xs = [x] + [b.input("inputs", index=i, dims=dims) for i in range(1, n)]
    shape = list(x.shape)
    shape[ax] = sum(t.shape[ax] for t in xs)
    b.output(shape, interval=hull(t.interval for t in xs))


@op("Shape")
def shape_(b: SpecBuilder, p: None) -> None:
    # A scalar's shape is empty (a zero-size output), so rank >= 1.
    x = b.input("data", rank=rank_from(b, 1))
    r = x.rank
    start, end = 0, r
    if b.version >= 15:
        # start/end pick axes [start, end) of the shape, clamped to [0, r]; non-empty.
        start = b.attr("start", Index(r, 0, r, 0, r - 1), 0)
        end = b.attr("end", Index(r, 0, r, clamp_index(start, r, 0, r) + 1, r), r)
    dims = x.shape[clamp_index(start, r, 0, r) : clamp_index(end, r, 0, r)]
    b.output((len(dims),), interval=Interval(min(dims), max(dims)))


@op("Size")
def size(b: SpecBuilder, p: None) -> None:
    x = b.input("data")
    b.output((), interval=point(math.prod(x.shape)))


def _need_rank4(b: SpecBuilder) -> None:
    # Work-around: the builder takes a dims list's length as the rank without comparing
    # it with --max-rank, so check here.
    if b.max_rank < 4:
        raise ConfigError(f"{b.op}: input 'input' needs rank 4, but --max-rank is {b.max_rank}")


class BlockDim:
    """A dim of the tensor DepthToSpace/SpaceToDepth rearranges: any size (an existing
    tensor of any shape may be reused), but a fresh one is drawn as a multiple of one of
    ``blocks`` where ``max_dim`` has any, so a blocksize above 1 is usually possible."""

    __slots__ = ("blocks", "max_dim", "cap")

    def __init__(self, blocks: Sequence[int], max_dim: int, cap: int) -> None:
        self.blocks, self.max_dim, self.cap = tuple(blocks), max_dim, cap

    def __repr__(self) -> str:
        return f"BlockDim(multiples of {list(self.blocks)} preferred, <= {self.cap})"

    def empty(self) -> bool:
        return self.max_dim < 1

    def draw(self, s: ChoiceStream) -> int:
        dims = range(1, self.max_dim + 1)
        nice = [d for d in dims if any(d % k == 0 for k in self.blocks)] or list(dims)
        return nice[s.index(len(nice))]

    def contains(self, value: Any) -> bool:
        return is_int(value) and 1 <= value <= self.cap


@op("DepthToSpace")
def depth_to_space(b: SpecBuilder, p: None) -> None:
    _need_rank4(b)
    c_dim = BlockDim([4, 9], b.max_dim, b.cfg.max_reuse_dim)  # blocksize 2 or 3 fit
    x = b.input("input", dims=[None, c_dim, None, None])  # N, C, H, W
    n, c, h, w = x.shape
    # C must split into blocksize^2 blocks; 1 always does (the identity rearrangement).
    bs = b.attr("blocksize", OneOf([k for k in range(1, math.isqrt(c) + 1) if c % (k * k) == 0]))
    b.attr("mode", OneOf(["DCR", "CRD"]), "DCR")
    b.output((n, c // (bs * bs), h * bs, w * bs), interval=x.interval)


@op("SpaceToDepth")
def space_to_depth(b: SpecBuilder, p: None) -> None:
    _need_rank4(b)
    hw_dim = BlockDim([2, 3], b.max_dim, b.cfg.max_reuse_dim)
    x = b.input("input", dims=[None, None, hw_dim, hw_dim])  # N, C, H, W
    n, c, h, w = x.shape
    bs = b.attr(
        "blocksize", OneOf([k for k in range(1, min(h, w) + 1) if h % k == 0 and w % k == 0])
    )
    if b.version >= 28:  # SpaceToDepth-28 orders the blocks as DepthToSpace does
        b.attr("mode", OneOf(["DCR", "CRD"]), "DCR")
    b.output((n, c * bs * bs, h // bs, w // bs), interval=x.interval)
