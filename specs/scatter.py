"""Index-driven ops: ScatterElements, ScatterND, GatherND, OneHot, ReverseSequence,
CenterCropPad, Col2Im, MaxUnpool, EyeLike, CumProd, TensorScatter.

Order: the data input first (any dims the op accepts, so existing tensors are reused), then
attributes, then index inputs drawn from the data's shape, then the outputs.

Scatter indices are constants drawn by a domain that knows the data's shape: with
reduction 'none' two updates landing on one element leave the result to the order of
writes (undefined), so those indices are duplicate-free where they meet; with a reduction
duplicates are drawn on purpose and the output interval counts them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import Interval, Values, hull
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Axes, Each, PadPairs, divisors, is_int, rank_from

NOT_GENERATED = {
    "test_reversesequence_batch": "a sequence length of 0 (nothing reversed, as a length of "
    "1): lengths are drawn in 1..T",
}

BUDGET = 64  # most index elements a drawn index constant has (each is one choice)


def _distinct(s: ChoiceStream, n: int, k: int) -> list[int]:
    """``k`` distinct values of ``range(n)`` in random order (a sparse Fisher-Yates
    shuffle: no list of size ``n``)."""
    swap: dict[int, int] = {}
    out = []
    for i in range(k):
        j = s.integer(i, n - 1)
        out.append(swap.get(j, j))
        swap[j] = swap.get(i, i)
    return out


def _spell(s: ChoiceStream, v: int, d: int) -> int:
    """An index ``v`` in [0, d) written as ``v`` or ``v - d`` (ONNX accepts [-d, d-1])."""
    return v - d if s.chance(0.25) else v


def _ints_array(value: Any) -> np.ndarray | None:
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if arr.dtype.kind not in "iuf" or (arr.dtype.kind == "f" and not np.all(arr == np.round(arr))):
        return None
    return arr.astype(np.int64)


# --- reductions shared by ScatterElements and ScatterND -----------------------------------
def _reductions(b: SpecBuilder, data: Tensor) -> list[str]:
    dtype = data.dtype
    out = ["none"]
    if b.version >= 16 and dtype != dt.BOOL:
        out += ["add"]
        # mul: -128 * -1 overflows int8; only data whose magnitude fits the positive side.
        if data.interval.mag <= dt.value_range(dtype)[1]:
            out += ["mul"]
    if b.version >= 18 and dtype != dt.BOOL:
        out += ["max", "min"]
    # ONNX Runtime's CPU kernels reject float16 reductions (ScatterElements: add and mul;
    # ScatterND: all of them) at run time.
    if dtype == dt.FLOAT16:
        out = [r for r in out if r in ("none", "max", "min")]
        if b.op == "ScatterND":
            out = ["none"]
    return out


def _updates_values(data: Tensor, red: str, k: int) -> Values:
    """Updates' value domain: ``k`` updates may land on one element (k = 1 without
    duplicates); the reduced result stays inside the dtype's bound."""
    lo, hi = dt.value_range(data.dtype)
    m = data.interval.mag
    if red == "add":
        u = max(0.0, (hi - m) / k)
        u = math.floor(u) if data.dtype in dt.INTS else u
        return Values(0 if data.dtype in dt.UNSIGNED_INTS else -u, u)
    if red == "mul":
        u = min(4.0, (hi / max(m, 1.0)) ** (1.0 / k))
        u = max(1, math.floor(u)) if data.dtype in dt.INTS else u
        return Values(0 if data.dtype in dt.UNSIGNED_INTS else -u, u)
    return Values()


def _scatter_interval(data: Interval, upd: Interval, red: str, k: int) -> Interval:
    if red == "add":
        return Interval(data.lo + k * min(upd.lo, 0), data.hi + k * max(upd.hi, 0))
    if red == "mul":
        bound = max(data.mag, 1.0) * max(upd.mag, 1.0) ** k
        return Interval(0 if data.lo >= 0 and upd.lo >= 0 else -bound, bound)
    return hull([data, upd])  # none, max, min: every result is a data or update value


# --- ScatterElements ----------------------------------------------------------------------
class ElementIndices:
    """ScatterElements' indices: data's rank, each dim at most data's (ONNX Runtime checks
    this), values in [-d, d-1] along the axis (d = data.shape[axis]), distinct along the
    axis (within each fiber) where ``distinct``; at most ``BUDGET`` elements."""

    __slots__ = ("shape", "axis", "distinct")

    def __init__(self, shape: Sequence[int], axis: int, distinct: bool) -> None:
        self.shape, self.axis, self.distinct = tuple(shape), axis, distinct

    def __repr__(self) -> str:
        return f"ElementIndices({list(self.shape)}, axis={self.axis}, distinct={self.distinct})"

    def empty(self) -> bool:
        return any(d < 1 for d in self.shape)

    def draw(self, s: ChoiceStream) -> list:
        dims, room = [], BUDGET
        for dmax in self.shape:
            n = s.integer(1, max(1, min(dmax, room)))
            dims.append(n)
            room //= n
        d = self.shape[self.axis]
        n = dims[self.axis]
        moved = [x for i, x in enumerate(dims) if i != self.axis]
        fibers = []
        for _ in range(math.prod(moved)):
            vals = _distinct(s, d, n) if self.distinct else [s.integer(0, d - 1) for _ in range(n)]
            fibers.append([_spell(s, v, d) for v in vals])
        arr = np.asarray(fibers, dtype=np.int64).reshape([*moved, n])
        return np.moveaxis(arr, -1, self.axis).tolist()

    def contains(self, value: Any) -> bool:
        arr = _ints_array(value)
        if arr is None or arr.ndim != len(self.shape):
            return False
        if any(not 1 <= n <= d for n, d in zip(arr.shape, self.shape, strict=True)):
            return False
        d = self.shape[self.axis]
        if arr.min() < -d or arr.max() > d - 1:
            return False
        if self.distinct:
            norm = np.sort(np.moveaxis(arr % d, self.axis, -1), axis=-1)
            return bool((np.diff(norm, axis=-1) != 0).all())
        return True


@op("ScatterElements")
def scatter_elements(b: SpecBuilder, p: None) -> None:
    data = b.input("data", rank=rank_from(b, 1))
    r = data.rank
    axis = b.attr("axis", Ints(-r, r - 1), 0)
    ax = axis % r
    red = "none"
    if b.version >= 16:
        red = b.attr("reduction", OneOf(_reductions(b, data)), "none")
    # Duplicates leave 'none' to the order of writes; a reduction combines them, so
    # up to indices.shape[axis] updates may meet in one element.
    distinct = red == "none"
    idx = b.draw("indices", ElementIndices(data.shape, ax, distinct))
    indices = b.const("indices", idx)
    mult = 1 if distinct else indices.shape[ax]
    upd = b.input("updates", dims=list(indices.shape), values=_updates_values(data, red, mult))
    b.output(data.shape, interval=_scatter_interval(data.interval, upd.interval, red, mult))


# --- ScatterND ----------------------------------------------------------------------------
class TupleIndices:
    """ScatterND's indices: shape [*lead, k] with 1 <= k <= r, len(lead) + r - k within
    --max-rank, each tuple's j-th entry in [-S_j, S_j - 1]; tuples pairwise distinct where
    ``distinct`` (at most prod(S[:k]) of them); at most ``BUDGET`` tuples."""

    __slots__ = ("shape", "max_rank", "max_dim", "distinct")

    def __init__(self, shape: Sequence[int], max_rank: int, max_dim: int, distinct: bool):
        self.shape, self.max_rank, self.max_dim = tuple(shape), max_rank, max_dim
        self.distinct = distinct

    def __repr__(self) -> str:
        return f"TupleIndices({list(self.shape)}, distinct={self.distinct})"

    def empty(self) -> bool:
        return not self.shape or self.max_rank < 1

    def draw(self, s: ChoiceStream) -> list:
        r = len(self.shape)
        # k >= r - max_rank + 1 leaves room for the indices' own rank (>= 1).
        k = s.integer(max(1, r - self.max_rank + 1), r)
        space = math.prod(self.shape[:k])
        cap = min(BUDGET, space) if self.distinct else BUDGET
        lead_rank = s.integer(0, min(self.max_rank - 1, self.max_rank - (r - k)))
        lead, room = [], cap
        for _ in range(lead_rank):
            n = s.integer(1, max(1, min(self.max_dim, room)))
            lead.append(n)
            room //= n
        count = math.prod(lead)
        if self.distinct:
            flats = _distinct(s, space, count)
        else:
            flats = [s.integer(0, space - 1) for _ in range(count)]
        tuples = []
        for f in flats:
            tup = list(np.unravel_index(f, self.shape[:k]))
            tuples.append([_spell(s, int(v), d) for v, d in zip(tup, self.shape, strict=False)])
        return np.asarray(tuples, dtype=np.int64).reshape([*lead, k]).tolist()

    def contains(self, value: Any) -> bool:
        arr = _ints_array(value)
        if arr is None or arr.ndim < 1 or 0 in arr.shape:
            return False
        k, r = arr.shape[-1], len(self.shape)
        if not 1 <= k <= r or arr.ndim - 1 + r - k > self.max_rank:
            return False
        dims = np.asarray(self.shape[:k])
        flat = arr.reshape(-1, k)
        if (flat < -dims).any() or (flat > dims - 1).any():
            return False
        if self.distinct:
            norm = flat % dims
            return len({tuple(t) for t in norm.tolist()}) == len(norm)
        return True


@op("ScatterND")
def scatter_nd(b: SpecBuilder, p: None) -> None:
    data = b.input("data", rank=rank_from(b, 1))
    red = "none"
    if b.version >= 16:
        red = b.attr("reduction", OneOf(_reductions(b, data)), "none")
    distinct = red == "none"
    idx = b.draw("indices", TupleIndices(data.shape, b.max_rank, b.max_dim, distinct))
    indices = b.const("indices", idx)
    lead, k = indices.shape[:-1], indices.shape[-1]
    mult = 1 if distinct else max(1, math.prod(lead))  # tuples that may hit one element
    upd = b.input(
        "updates",
        dims=[*lead, *data.shape[k:]],
        values=_updates_values(data, red, mult),
    )
    b.output(data.shape, interval=_scatter_interval(data.interval, upd.interval, red, mult))


# --- GatherND -----------------------------------------------------------------------------
@op("GatherND")
def gather_nd(b: SpecBuilder, p: None) -> None:
    data = b.input("data", rank=rank_from(b, 1))
    r = data.rank
    bd = b.attr("batch_dims", Ints(0, r - 1), 0)
    # Every index column j addresses data.shape[bd + j]: values in [-m, m-1] with m the
    # smallest of those dims fit every column, whatever the tuple length k.
    m = min(data.shape[bd:])

    def dims(q: int) -> list:
        # indices: the batch dims, then q-1-bd free dims, then k in 1..r-bd with the
        # output rank (q - 1) + (r - bd - k) within --max-rank.
        k_lo = max(1, q - 1 + r - bd - b.max_rank)
        return [*data.shape[:bd], *([None] * (q - 1 - bd)), Ints(k_lo, r - bd)]

    q_hi = b.max_rank - r + bd + 2
    idx = b.input(
        "indices", rank=Ints(bd + 1, max(bd + 1, q_hi)), dims=dims, values=Values(-m, m - 1)
    )
    k = idx.shape[-1]
    b.output([*idx.shape[:-1], *data.shape[bd + k :]], interval=data.interval)


# --- OneHot -------------------------------------------------------------------------------
@op("OneHot")
def one_hot(b: SpecBuilder, p: None) -> None:
    # Indices outside [-depth, depth-1] give an all-off row (defined), so any integer
    # tensor fits. Float indices are whole numbers, and non-negative: the doc casts them to
    # int64 (1.56 is 1), while ONNX Runtime 1.31 and the reference evaluator compare the
    # float with each position (1.56 matches none), so on a fraction a backend that
    # follows the doc (OpenVINO) was filed as wrong, the evaluator's second opinion siding
    # with ONNX Runtime. A fresh input (``avoid``), so no float error upstream moves one.
    def index_values(d: int) -> Values:
        return Values(lo=0, avoid="fraction") if d in dt.FLOATS else Values()

    # Rank >= 1 (ONNX's shape inference rejects scalar indices); the output adds an axis.
    idx = b.input("indices", rank=Ints(1, max(1, b.max_rank - 1)), values=index_values)
    r = idx.rank
    axis = b.attr("axis", Ints(-(r + 1), r), -1)
    depth = b.draw("depth", Ints(1, b.max_dim))
    b.const("depth", depth)
    values = b.input("values", dims=[2])  # [off_value, on_value]
    ax = axis % (r + 1)
    shape = [*idx.shape[:ax], depth, *idx.shape[ax:]]
    b.output(shape, interval=values.interval)


# --- ReverseSequence ----------------------------------------------------------------------
@op("ReverseSequence")
def reverse_sequence(b: SpecBuilder, p: None) -> None:
    x = b.input("input", rank=rank_from(b, 2))
    time_axis = b.attr("time_axis", OneOf([0, 1]), 0)
    if time_axis == 0:
        batch_axis = b.attr("batch_axis", OneOf([1]), 1)
    else:
        batch_axis = b.attr("batch_axis", OneOf([0]))
    t = x.shape[time_axis]
    # One length per batch entry, each in [1, T] (ORT rejects longer ones).
    b.input("sequence_lens", dims=[x.shape[batch_axis]], values=Values(1, t))
    b.output(x.shape, interval=x.interval)


# --- CenterCropPad ------------------------------------------------------------------------
@op("CenterCropPad")
def center_crop_pad(b: SpecBuilder, p: None) -> None:
    x = b.input("input_data", rank=rank_from(b, 1))
    r = x.rank
    axes = b.attr("axes", Axes(range(r), r, 1, r), None)
    axes = list(range(r)) if axes is None else [a % r for a in axes]
    target = b.draw("shape", Each([Ints(1, b.max_dim)] * len(axes)))
    b.const("shape", target)
    shape = list(x.shape)
    for a, n in zip(axes, target, strict=True):
        shape[a] = int(n)
    padded = any(n > x.shape[a] for a, n in zip(axes, target, strict=True))
    iv = hull([x.interval, Interval(0, 0)]) if padded else x.interval  # pads with zeros
    b.output(shape, interval=iv)


# --- Col2Im -------------------------------------------------------------------------------
# image_shape and block_shape: "a 1-dimensional tensor with size of at least 2" (the operator
# doc: [H, W] for a 2-D image, or N-D). A 1-D image is outside the standard, although ONNX's
# checker and shape inference let it through.
MIN_IMAGE_DIMS = 2


class BlockShape:
    """Col2Im's block_shape: ``MIN_IMAGE_DIMS``..``max_n`` kernel sizes whose product
    divides C * prod(block) (the input's dim 1) and stays <= ``max_prod`` (each output pixel
    sums at most prod(block) values)."""

    __slots__ = ("cb", "max_n", "max_prod")

    def __init__(self, cb: int, max_n: int, max_prod: int) -> None:
        self.cb, self.max_n, self.max_prod = cb, max_n, max_prod

    def __repr__(self) -> str:
        return f"BlockShape({self.cb}, n<={self.max_n}, prod<={self.max_prod})"

    def empty(self) -> bool:
        return self.max_n < MIN_IMAGE_DIMS or self.max_prod < 1

    def draw(self, s: ChoiceStream) -> list[int]:
        n = s.integer(MIN_IMAGE_DIMS, self.max_n)
        out, rest, room = [], self.cb, self.max_prod
        for _ in range(n):
            opts = [d for d in divisors(rest) if d <= min(4, room)]
            k = opts[s.index(len(opts))]
            out.append(k)
            rest //= k
            room //= k
        return out

    def contains(self, value: Any) -> bool:
        vals = list(np.asarray(value).reshape(-1).tolist())
        if not MIN_IMAGE_DIMS <= len(vals) <= self.max_n:
            return False
        if not all(is_int(v) and v >= 1 for v in vals):
            return False
        p = math.prod(int(v) for v in vals)
        return self.cb % p == 0 and p <= self.max_prod


class ImageShape:
    """Col2Im's image_shape: per spatial dim an image size whose block count
    (img + pads - dilation*(k-1) - 1) // stride + 1 is >= 1, with the counts'
    product equal to L (the input's dim 2)."""

    __slots__ = ("eff", "strides", "pads", "length")

    def __init__(
        self, eff: Sequence[int], strides: Sequence[int], pads: Sequence[int], length: int
    ):
        self.eff, self.strides, self.pads, self.length = (
            tuple(eff),
            tuple(strides),
            tuple(pads),
            length,
        )

    def __repr__(self) -> str:
        return f"ImageShape(L={self.length}, eff={list(self.eff)}, strides={list(self.strides)})"

    def empty(self) -> bool:
        return self.length < 1

    def _pad(self, i: int) -> int:
        n = len(self.eff)
        return self.pads[i] + self.pads[n + i]

    def draw(self, s: ChoiceStream) -> list[int]:
        n = len(self.eff)
        out, rest = [], self.length
        for i in range(n):
            opts = divisors(rest) if i < n - 1 else [rest]
            c = opts[s.index(len(opts))]
            rest //= c
            st = self.strides[i]
            base = (c - 1) * st + self.eff[i] - self._pad(i)  # >= 1 by the pads' bound
            out.append(base + s.integer(0, st - 1))
        return out

    def contains(self, value: Any) -> bool:
        vals = list(np.asarray(value).reshape(-1).tolist())
        if len(vals) != len(self.eff) or not all(is_int(v) and v >= 1 for v in vals):
            return False
        counts = [
            (int(v) + self._pad(i) - self.eff[i]) // self.strides[i] + 1 for i, v in enumerate(vals)
        ]
        return all(c >= 1 for c in counts) and math.prod(counts) == self.length


@op("Col2Im")
def col2im(b: SpecBuilder, p: None) -> None:
    # The output is [N, C, *image]: an image of at least 2 dims needs rank 4.
    if b.max_rank < MIN_IMAGE_DIMS + 2:
        raise ConfigError(f"{b.op}: its output has rank >= 4, but --max-rank is {b.max_rank}")
    x = b.input("input", rank=3)  # [N, C * prod(block_shape), L]
    nb, cb, length = x.shape
    bound = dt.value_range(x.dtype)[1]
    max_prod = max(1, math.floor(bound / max(x.interval.mag, 1.0)))
    blocks = b.draw("block_shape", BlockShape(cb, min(3, b.max_rank - 2), max_prod))
    n = len(blocks)
    ones = [1] * n
    dil = b.attr("dilations", Each([Ints(1, 5)] * n), ones)
    strides = b.attr("strides", Each([Ints(1, 3)] * n), ones)
    eff = [d * (k - 1) + 1 for d, k in zip(dil, blocks, strict=True)]
    # A block count of 1 needs img + pads >= eff with img >= 1: begins up to eff - 1 (at
    # most 2), each total up to eff - 1 so that img >= 1 remains possible.
    pads = b.attr(
        "pads", PadPairs([min(2, e - 1) for e in eff], [e - 1 for e in eff]), [0] * (2 * n)
    )
    image = b.draw("image_shape", ImageShape(eff, strides, pads, length))
    b.const("image_shape", image)
    b.const("block_shape", blocks)
    k = math.prod(blocks)
    iv = x.interval
    # Each output pixel sums at most prod(block) inputs; uncovered pixels are 0.
    b.output([nb, cb // k, *image], interval=Interval(min(0, k * iv.lo), max(0, k * iv.hi)))


# --- MaxUnpool ----------------------------------------------------------------------------
class UnpoolIndices:
    """MaxUnpool's indices: X's shape; flat positions into the output, each (n, c) plane's
    inside that plane (P positions) and distinct (two writes to one position leave the
    result to their order). Drawn from one seed: X may be large."""

    __slots__ = ("shape", "plane")

    def __init__(self, shape: Sequence[int], plane: int) -> None:
        self.shape, self.plane = tuple(shape), plane

    def __repr__(self) -> str:
        return f"UnpoolIndices({list(self.shape)}, plane={self.plane})"

    def empty(self) -> bool:
        return math.prod(self.shape[2:]) > self.plane

    def draw(self, s: ChoiceStream) -> np.ndarray:
        rng = np.random.default_rng(s.seed32())
        planes = self.shape[0] * self.shape[1]
        per = math.prod(self.shape[2:])
        out = np.empty((planes, per), dtype=np.int64)
        for i in range(planes):
            out[i] = i * self.plane + rng.choice(self.plane, size=per, replace=False)
        return out.reshape(self.shape)

    def contains(self, value: Any) -> bool:
        arr = _ints_array(value)
        if arr is None or tuple(arr.shape) != self.shape:
            return False
        flat = arr.reshape(self.shape[0] * self.shape[1], -1)
        base = np.arange(flat.shape[0])[:, None] * self.plane
        local = flat - base
        if (local < 0).any() or (local >= self.plane).any():
            return False
        return all(len(set(row)) == len(row) for row in local.tolist())


@op("MaxUnpool")
def max_unpool(b: SpecBuilder, p: None) -> None:
    has_shape = b.optional("output_shape")
    x = b.input("X", rank=Ints(3, 5))  # N, C, spatial...
    n = x.rank - 2
    spatial = x.shape[2:]
    ks = b.attr("kernel_shape", Each([Ints(1, 3)] * n))
    strides = b.attr("strides", Each([Ints(1, 3)] * n), [1] * n)
    # Default output dim (in - 1) * stride + k - pads; pads < kernel, and small enough
    # that every output plane holds at least as many positions as X's plane.
    room = [(d - 1) * (s - 1) + k - 1 for d, s, k in zip(spatial, strides, ks, strict=True)]
    pads = b.attr("pads", PadPairs([k - 1 for k in ks], room), [0] * (2 * n))
    out = [
        (d - 1) * s + k - pads[i] - pads[n + i]
        for i, (d, s, k) in enumerate(zip(spatial, strides, ks, strict=True))
    ]
    if has_shape:
        # A larger output (as ConvTranspose's output_padding): up to stride - 1 more.
        wider = [Ints(o, o + s - 1) for o, s in zip(out, strides, strict=True)]
        full = b.draw("output_shape", Each([OneOf([x.shape[0]]), OneOf([x.shape[1]]), *wider]))
        out = [int(v) for v in full[2:]]
    idx = b.draw("I", UnpoolIndices(x.shape, math.prod(out)))
    b.const("I", idx)
    if has_shape:
        b.const("output_shape", [*x.shape[:2], *out])
    b.output([*x.shape[:2], *out], interval=hull([x.interval, Interval(0, 0)]))


# --- EyeLike ------------------------------------------------------------------------------
@op("EyeLike")
def eye_like(b: SpecBuilder, p: None) -> None:
    x = b.input("input", rank=2)
    rows, cols = x.shape
    types = b.types("T2")
    if not types:
        raise ConfigError(f"{b.op}: no output element type under --dtypes")
    # Without `dtype` the output takes the input's type (where that is an output type).
    if x.dtype in types:
        out_type = b.attr("dtype", OneOf(types), x.dtype)
    else:
        out_type = b.attr("dtype", OneOf(types))
    # k off the matrix gives all zeros (defined); keep it near.
    b.attr("k", Ints(-rows, cols), 0)
    b.output(x.shape, dtype=out_type, interval=Interval(0, 1))


# --- CumProd ------------------------------------------------------------------------------
@op("CumProd")
def cum_prod(b: SpecBuilder, p: None) -> None:
    # Products of up to n = shape[axis] factors: |x| <= 6 (ints) or 1.5 (floats) and
    # every dim at most log(bound) / log(|x|max), so any axis's product stays bounded.
    def values(d: int) -> Values:
        if d in dt.UNSIGNED_INTS:
            return Values(0, 6)
        return Values(-6, 6) if d in dt.INTS else Values(-1.5, 1.5)

    def limit(d: int) -> float:
        return values(d).hi

    # The dim bound holds for every allowed type (x's type is drawn with its dims).
    n = min(
        (math.floor(math.log(dt.value_range(t)[1]) / math.log(limit(t))) for t in b.types("T")),
        default=1,
    )
    x = b.input("x", rank=rank_from(b, 1), dims=lambda r: [Ints(1, n)] * r, values=values)
    r = x.rank
    axis = b.draw("axis", Ints(-r, r - 1))
    b.const("axis", axis)
    b.attr("exclusive", OneOf([0, 1]), 0)
    b.attr("reverse", OneOf([0, 1]), 0)
    nmax = x.shape[axis % r]
    bound = max(x.interval.mag, 1.0) ** nmax
    lo = 0 if x.interval.lo >= 0 else -bound
    b.output(x.shape, interval=Interval(lo, bound))


@op("TensorScatter", since=24)
def tensor_scatter(b: SpecBuilder, p: None) -> None:
    # A KV-cache update: past_cache (batch, D1, ..., max_seq, ..., Dn) with the sequence at
    # `axis` (never 0, the batch); update has seq <= max_seq there. Batch b's update is
    # written at positions write_indices[b] + 0..seq-1 (absent: 0), modulo max_seq in
    # circular mode; linear mode needs write_indices[b] + seq <= max_seq. seq <= max_seq
    # means no position is written twice, so the result never depends on write order.
    has_idx = b.optional("write_indices")
    past = b.input("past_cache", rank=Ints(2, 5))
    r = past.rank
    axes = OneOf([a for a in range(-r, r) if a % r != 0])
    # The default -2 is the batch axis of a 2-D cache: there axis must be given.
    axis = b.attr("axis", axes, -2) if r > 2 else b.attr("axis", axes)
    ax = axis % r
    mode = b.attr("mode", OneOf(["linear", "circular"]), "linear")
    max_seq = past.shape[ax]
    dims: list = list(past.shape)
    dims[ax] = Ints(1, max_seq)
    upd = b.input("update", dims=dims)
    seq = upd.shape[ax]
    if has_idx:
        last = max_seq - seq if mode == "linear" else max_seq - 1
        idx = [b.draw(f"write_indices[{i}]", Ints(0, last)) for i in range(past.shape[0])]
        b.const("write_indices", np.asarray(idx, dtype=np.int64))
    b.output(past.shape, interval=past.interval.union(upd.interval))
