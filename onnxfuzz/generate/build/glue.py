"""Glue: making a tensor the graph already has fit an input that nothing fits as it is.

GraphFuzzer connects an op to the graph by slicing or padding an existing tensor to the
shape the op needs. Here the same idea is part of the solver: when an op's data input
finds no tensor of its type, rank, dims and values, the solver may take one that a node
produced (a dangling output first, so chains grow long) and emit the few ops that adapt
it, every decision an ordinary recorded choice, so generation stays backtrack-free,
byte-deterministic per seed, replayable and shrinkable:

    values   Clip        into the input's value domain (and into a Cast's target range);
             sometimes Relu, Tanh or Sigmoid where its range fits the domain
    type     Cast        only where it is exact or merely rounds: never float -> int or
                         bool, where truncation turns a tolerated rounding difference
                         between two backends into a mismatch (a false alarm)
    rank     Reshape | Flatten | Squeeze | Unsqueeze
    layout   Transpose   sometimes (compilers' layout and transpose passes)
    dims     Slice to shrink, then Pad | Expand | Tile to grow; or, where one axis
             alone changes, sometimes one Gather (a window of indices, wrapping
             around: it shrinks and grows at once)

Glue ops are nodes like any other: they count toward the model's node budget, and only
ops the run may generate are used (``--ops``, ``--exclude-ops``, the probe's avoid list).
Most of them compute no new values (they move, repeat, clip or convert values); the
activations' outputs lie in their fixed ranges, so every interval stays sound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.graph import Graph, Node, Tensor
from onnxfuzz.generate.lang.intervals import INT64_CLIP_SAFE, Interval, Values, rounding_room
from onnxfuzz.generate.lang.spec_api import DimEntry, fits_dim, fits_pattern
from onnxfuzz.generate.lang.values import interval_of

GLUE_OPS = (
    "Clip",
    "Cast",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Transpose",
    "Slice",
    "Pad",
    "Expand",
    "Tile",
    "Gather",
    "Relu",
    "Tanh",
    "Sigmoid",
)
GLUE = "glue"  # span label: one per glue node (the shrinker counts nodes per op with it)
TRANSPOSE_RATE = 0.1  # how often a rank >= 2 adaptation also permutes the axes
# How often a one-axis change of dims is one Gather instead of Slice and Pad|Expand|Tile:
# varied glue makes varied op chains, and Gather is one node with one constant input.
GATHER_RATE = 0.5
# How often a value adaptation that an activation can do is one (Relu for Clip(min=0);
# Tanh, Sigmoid where their ranges fit): activations are what compilers fuse.
ACTIVATION_RATE = 0.5
# Entries a glue's memos hold before they start over (a bound on memory; the intervals
# and domains they are keyed by repeat across models).
STEPS_MEMO_SIZE = 20_000


@dataclass(frozen=True)
class Glue:
    """Which glue a generator may emit: per op, the element types its data input takes
    (an op missing here is not available); ``cast_to``: Cast's target types."""

    types: Mapping[str, frozenset[int]]
    cast_to: frozenset[int]
    # Clip with both bounds given: some backend lacks Clip with ``min`` left out and ``max``
    # there (onnx2torch; the probe's ``omitted:min`` form)
    clip_both_bounds: bool = False
    # ``_value_steps`` answers by (interval, source type, target type, domain): a pure
    # function of them and of this glue, asked again for every source of every adaptation
    steps_memo: dict[tuple, int | None] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )
    # ``_cast_targets`` answers by what a need asks of a type (its types and each one's
    # domain), then by source type and interval (``targets_memo``)
    targets_memo: dict[tuple, dict[tuple, list[tuple[int, int]]]] = field(
        default_factory=dict, compare=False, hash=False, repr=False
    )

    def has(self, op: str, dtype: int) -> bool:
        return dtype in self.types.get(op, ())


@dataclass
class Need:
    """What one input asks for, as ``GenBuilder.input`` received it."""

    allowed: tuple[int, ...]
    lo: int  # rank range
    hi: int
    pattern: Callable[[int], Sequence[DimEntry] | None]  # dims per rank
    values: Callable[[int], Values]  # value domain per element type
    fits: Callable[[int, DimEntry], bool]
    draw_dim: Callable[[int, DimEntry], int]
    max_dim: int
    cap: int  # the largest dim a reusable tensor may have
    domain: Values | None = None  # ``values``' answer for every type, where it is one


def adapt(
    glue: Glue,
    g: Graph,
    s: ChoiceStream,
    need: Need,
    budget: int,
    sources: Sequence[Tensor] | None = None,
    skip: AbstractSet[str] = frozenset(),
) -> tuple[Tensor | None, int]:
    """A tensor fitting ``need``, made from one a node produced (or one of ``sources``)
    with at most ``budget`` glue nodes (None when none can be adapted), and the glue nodes
    it emitted. ``skip``: names of node outputs not to take (where ``sources`` is None)."""
    if sources is None:
        best, cost = cheapest_indexed(glue, g, need, budget, skip)
    else:
        best, cost = cheapest_scanned(glue, g, need, budget, sources)
    if not best:
        return None, 0
    src, targets = best[s.index(len(best))]
    emitter = _Emitter(glue, g, s, spare=budget - cost, cap=need.cap)
    out = emitter.run(src, targets, need)
    return out, emitter.emitted


Cheapest = tuple[list[tuple[Tensor, list[tuple[int, int]]]], int]


def cheapest_scanned(
    glue: Glue, g: Graph, need: Need, budget: int, sources: Sequence[Tensor]
) -> Cheapest:
    """The sources an adaptation may start from, in their order, each with the types it
    may become (``_cast_targets``), and what adapting them costs: those of least cost
    within ``budget``, dangling ones first, then those whose producer merged more
    branches. Every source is costed (a source that costs more than the best so far
    not fully)."""
    best: list[tuple[Tensor, list[tuple[int, int]]]] = []
    best_key = (budget + 1, 0, 0)
    # what each (type, interval) of a source may become: many sources share one
    targets_of = targets_memo(glue, need)
    consumed, made_by, cap = g.consumed, g.made_by, need.cap
    for t in sources:
        if t.shape and max(t.shape) > cap:
            continue
        costed = _cost(glue, t, need, min(budget, best_key[0]), targets_of)
        if costed is None or costed[0] > budget:
            continue
        # ``g.fan_in``, inlined: the loop runs over every source
        made = made_by.get(t.name)
        key = (costed[0], 0 if t.name not in consumed else 1, -made[1] if made else 0)
        if key < best_key:
            best, best_key = [(t, costed[1])], key
        elif key == best_key:
            best.append((t, costed[1]))
    return best, best_key[0]


def cheapest_indexed(
    glue: Glue, g: Graph, need: Need, budget: int, skip: AbstractSet[str] = frozenset()
) -> Cheapest:
    """``cheapest_scanned`` over ``g.produced`` (less the names in ``skip``), found from
    ``g.produced_by``: buckets in order of the least a source of theirs can cost (rank
    steps, a Cast), and none whose least cost exceeds the best found. The same sources
    in the same order: ties go back to their positions in ``g.produced``. A bucket's
    sources share a type and a rank, so ``_cost``'s steps are worked out per bucket
    (the rank's, the dims pattern) and per shape (the dims')."""
    lo, hi, allowed = need.lo, need.hi, need.allowed
    buckets: list[tuple[int, int, int, list[tuple[int, Tensor]]]] = []
    for (d, r), bucket in g.produced_by.items():
        # _cost's rank steps: a Reshape-like node, and a Slice and a Pad where the rank
        # left is not 0 (a rank-0 need may also slice first: the floor leaves it out)
        floor = 0 if lo <= r <= hi else 1 if hi == 0 else 3
        if d not in allowed:
            floor += 1  # every type it may become is a Cast away
        if floor <= budget:
            buckets.append((floor, d, r, bucket))
    buckets.sort(key=_first)  # by floor
    best: list[tuple[int, Tensor, list[tuple[int, int]]]] = []
    best_key = (budget + 1, 0, 0)
    targets_of = targets_memo(glue, need)
    consumed, made_by, cap, max_dim = g.consumed, g.made_by, need.cap, need.max_dim
    plain_fits = need.fits is fits_dim
    for floor, d, r, bucket in buckets:
        if floor > best_key[0]:
            break  # sorted: no later bucket's source can cost less than the best
        to = lo if r < lo else hi if r > hi else r  # the rank the source is brought to
        base = 0 if to == r else 1
        pattern = None
        if to > 0:
            pattern = need.pattern(to)
            if pattern is not None and len(pattern) != to:
                continue  # no source of this rank can be adapted
            if to != r:
                base += 2  # a slice and a pad at most
        cast = d not in allowed
        steps_of: dict[tuple[int, ...], int] = {}  # by shape; -1: over the reuse cap
        for pos, t in bucket:
            if skip and t.name in skip:
                continue
            shape = t.shape
            steps = steps_of.get(shape)
            if steps is None:
                steps = base
                if shape and max(shape) > cap:
                    steps = -1
                elif to == 0:
                    if r and t.size > 1:
                        steps += 1  # slice to one element first
                elif to == r and (
                    max(shape) > max_dim
                    or pattern is not None
                    and not (
                        fits_pattern(shape, pattern)
                        if plain_fits
                        else all(need.fits(c, e) for c, e in zip(shape, pattern, strict=True))
                    )
                ):
                    steps += 2
                steps_of[shape] = steps
            if steps < 0 or steps + cast > min(budget, best_key[0]):
                continue
            iv = t.interval
            tkey = (d, iv.lo, iv.hi, iv.min_abs)
            targets = targets_of.get(tkey)
            if targets is None:
                targets = targets_of[tkey] = _cast_targets(glue, t, need)
            if not targets:
                continue
            cost = steps + max(k + (dd != d) for dd, k in targets)
            if cost > budget:
                continue
            made = made_by.get(t.name)
            key = (cost, 0 if t.name not in consumed else 1, -made[1] if made else 0)
            if key < best_key:
                best, best_key = [(pos, t, targets)], key
            elif key == best_key:
                best.append((pos, t, targets))
    best.sort(key=_first)  # by position in ``g.produced``
    return [(t, targets) for _, t, targets in best], best_key[0]


def _first(entry: tuple) -> int:
    return entry[0]


# --- what an adaptation costs (no choices: picks the source) ---------------------------
Targets = dict[tuple[int, float, float, float], list[tuple[int, int]]]


def targets_memo(glue: Glue, need: Need) -> Targets:
    """``_cast_targets`` answers for ``need``, by the source's type and interval (lo, hi,
    min_abs): the answers ``glue`` keeps for every need of the same types and the same
    domain per type (needs repeat across models, and sources' intervals with them), or,
    where a spec's domain callable fails for a type, a memo of this need's own."""
    if need.domain is not None:
        asks: tuple = (need.allowed, need.domain)
    else:
        try:  # the domain of every type, a Cast may not target: spec callables are pure
            asks = (need.allowed, tuple(need.values(d) for d in need.allowed))
        except Exception:  # noqa: BLE001 -- asked again, for the types glue needs
            return {}
    memo = glue.targets_memo
    found = memo.get(asks)
    if found is None:
        if len(memo) > STEPS_MEMO_SIZE:
            memo.clear()
        found = memo[asks] = {}
    elif len(found) > STEPS_MEMO_SIZE:
        found.clear()
    return found


def _cast_targets(glue: Glue, src: Tensor, need: Need) -> list[tuple[int, int]]:
    """The element types ``src`` may become for ``need``, each with the Clip nodes its
    values then need: the source's own type, or a Cast's target."""
    if src.dtype in need.allowed:
        dtypes = [src.dtype]
    elif not glue.has("Cast", src.dtype):
        return []
    elif src.dtype in dt.FLOATS:  # float -> int/bool truncates: only float -> float
        dtypes = [d for d in need.allowed if d in glue.cast_to and d in dt.FLOATS]
    else:
        dtypes = [d for d in need.allowed if d in glue.cast_to]
    out = []
    for d in dtypes:
        v = need.values(d)
        if v.fresh_only(d):
            continue
        steps = _value_steps(glue, src.interval, src.dtype, d, v)
        if steps is not None:
            out.append((d, steps))
    return out


def _clip_bounds(iv: Interval, dtype: int, lo: float, hi: float, m: float) -> Interval | None:
    """Clip bounds that put ``iv`` inside ``[lo, hi]`` with |x| >= m; None when there are
    none in ``dtype``."""
    if dtype == dt.INT64 and not iv.within(-INT64_CLIP_SAFE, INT64_CLIP_SAFE):
        return None
    a, b = max(lo, iv.lo), min(hi, iv.hi)
    a, b = min(a, hi), max(b, lo)  # iv wholly outside [lo, hi]: clip to the nearer end
    if m > 0 and a < m and b > -m:
        if hi >= m:
            a, b = m, max(b, m)
        elif lo <= -m:
            a, b = min(a, -m), -m
        else:
            return None
    if dtype in dt.FLOATS:
        a, b = _inside(a, dtype, up=True), _inside(b, dtype, up=False)
    else:
        a, b = math.ceil(a), math.floor(b)
    if a > b or a < lo or b > hi:
        return None
    return Interval(a, b)


def _inside(v: float, dtype: int, up: bool) -> float:
    """``v`` as ``dtype`` holds it, rounded inward (a bound must stay a bound)."""
    np_t = dt.np_dtype(dtype).type
    x = np_t(v)
    if up and float(x) < v:
        x = np.nextafter(x, np_t(np.inf))
    elif not up and float(x) > v:
        x = np.nextafter(x, np_t(-np.inf))
    return float(x)


def fits_values(iv: Interval, lo: float, hi: float, m: float) -> bool:
    """Does a tensor with interval ``iv`` fit the value domain [lo, hi], |x| >= m?"""
    return iv.within(lo, hi) and (iv.min_abs >= m or m == 0)


def _value_steps(glue: Glue, iv: Interval, src: int, dst: int, v: Values) -> int | None:
    """Clip nodes needed (0-2) to bring ``iv`` (in ``src``) into ``dst``'s range and the
    domain ``v``; None when Clip cannot do it for these types."""
    memo = glue.steps_memo
    key = (iv.lo, iv.hi, iv.min_abs, src, dst, v)
    if key in memo:
        return memo[key]
    if len(memo) > STEPS_MEMO_SIZE:
        memo.clear()
    steps = memo[key] = _count_value_steps(glue, iv, src, dst, v)
    return steps


def _count_value_steps(glue: Glue, iv: Interval, src: int, dst: int, v: Values) -> int | None:
    steps = 0
    if src != dst:
        tlo, thi = dt.value_range(dst)
        if not iv.within(tlo, thi):
            bounds = _clip_bounds(iv, src, tlo, thi, 0) if glue.has("Clip", src) else None
            if bounds is None:
                return None
            iv = _clip_interval(iv, bounds)
            steps += 1
        iv = _cast_interval(iv, src, dst)
    vlo, vhi = v.bounds(dst)
    if not fits_values(iv, vlo, vhi, v.min_abs):
        if not glue.has("Clip", dst) or _clip_bounds(iv, dst, vlo, vhi, v.min_abs) is None:
            return None
        steps += 1
    return steps


def _cost(
    glue: Glue,
    t: Tensor,
    need: Need,
    limit: int | None = None,
    targets_of: dict[tuple[int, float, float, float], list[tuple[int, int]]] | None = None,
) -> tuple[int, list[tuple[int, int]]] | None:
    """An upper bound on the glue nodes adapting ``t`` takes, and the element types it may
    become (``_cast_targets``); None if it cannot be done, or (``limit``) it costs more.
    ``targets_of``: ``_cast_targets`` already found for this need, by type and interval."""
    steps = 0  # the shape's steps first: cheap, and often enough to rule ``t`` out
    shape = t.shape
    rank = len(shape)
    r = need.lo if rank < need.lo else need.hi if rank > need.hi else rank
    if r != rank:
        steps += 1
        if r == 0 and t.size > 1:
            steps += 1  # slice to one element first
    if r > 0:
        pattern = need.pattern(r)
        if pattern is not None and len(pattern) != r:
            return None
        if r != rank or max(shape) > need.max_dim:
            steps += 2  # a slice and a pad at most
        elif pattern is not None and not (
            fits_pattern(shape, pattern)
            if need.fits is fits_dim
            else all(need.fits(c, e) for c, e in zip(shape, pattern, strict=True))
        ):
            steps += 2
    # a Cast at least, when the source's type is not allowed (every target then casts)
    if limit is not None and steps + (t.dtype not in need.allowed) > limit:
        return None
    if targets_of is None:
        targets = _cast_targets(glue, t, need)
    else:
        iv = t.interval
        key = (t.dtype, iv.lo, iv.hi, iv.min_abs)
        found = targets_of.get(key)
        if found is None:
            found = targets_of[key] = _cast_targets(glue, t, need)
        targets = found
    if not targets:
        return None
    return steps + max(k + (d != t.dtype) for d, k in targets), targets


def _fits(need: Need, shape: tuple[int, ...]) -> bool:
    """Do ``shape``'s dims fit ``need`` as they are (no Slice, Pad, ... needed)?"""
    pattern = need.pattern(len(shape))
    return pattern is None or all(need.fits(c, e) for c, e in zip(shape, pattern, strict=True))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _clip_interval(iv: Interval, bounds: Interval) -> Interval:
    a, b = bounds.lo, bounds.hi
    return Interval(min(max(iv.lo, a), b), min(max(iv.hi, a), b), bounds.min_abs)


def _cast_interval(iv: Interval, src: int, dst: int) -> Interval:
    if dst == dt.BOOL:
        return Interval(0, 1)
    if src == dt.BOOL:
        return Interval(0, 1)
    if dst in dt.FLOATS:
        lo, hi = dt.value_range(dst)
        return rounding_room(iv, dst, lo, hi)
    return iv  # int -> int inside the target's range: exact


# --- emitting the glue --------------------------------------------------------------------
class _Emitter:
    """Draws the adaptation's choices and appends its nodes to the graph."""

    def __init__(self, glue: Glue, g: Graph, s: ChoiceStream, spare: int, cap: int) -> None:
        """``spare``: nodes the budget leaves beyond the adaptation's cost (a Transpose);
        ``cap``: the largest dim a tensor other ops may reuse has (a merging Reshape's
        output may be larger, until a Slice cuts it)."""
        self.glue, self.g, self.s, self.spare, self.cap = glue, g, s, spare, cap
        self.emitted = 0

    def run(self, src: Tensor, targets: list[tuple[int, int]], need: Need) -> Tensor | None:
        """``src`` adapted to ``need``, as one of ``targets`` (its ``_cast_targets``)."""
        s = self.s
        d = targets[s.index(len(targets))][0]
        v = need.values(d)
        t = src
        if d != t.dtype:
            tlo, thi = dt.value_range(d)
            if not t.interval.within(tlo, thi):
                t = self._clip(t, _clip_bounds(t.interval, t.dtype, tlo, thi, 0))
            t = self._node(
                "Cast", [t], d, t.shape, _cast_interval(t.interval, t.dtype, d), to=int(d)
            )
        vlo, vhi = v.bounds(d)
        if not fits_values(t.interval, vlo, vhi, v.min_abs):
            bounds = _clip_bounds(t.interval, d, vlo, vhi, v.min_abs)
            t = self._activation(t, vlo, vhi, v.min_abs) or self._clip(t, bounds)
        r = min(max(t.rank, need.lo), need.hi)
        if r != t.rank:
            t = self._rank(t, r)
            if t is None:
                return None
        if r >= 2 and self.spare > 0 and self.glue.has("Transpose", d) and s.chance(TRANSPOSE_RATE):
            perm = list(range(r))
            for i in range(r - 1, 0, -1):  # Fisher-Yates, one choice per step
                j = s.index(i + 1)
                perm[i], perm[j] = perm[j], perm[i]
            shape = tuple(t.shape[p] for p in perm)
            # Permuted dims that no longer fit cost a Slice and a Pad the budget may lack
            extra = 2 if _fits(need, t.shape) and not _fits(need, shape) else 0
            if 1 + extra <= self.spare:
                t = self._node("Transpose", [t], d, shape, t.interval, perm=perm)
        if r > 0:
            t = self._dims(t, need)
        return t

    # --- steps ----------------------------------------------------------------------
    def _node(
        self,
        op: str,
        inputs: Sequence[Tensor | str],
        dtype: int,
        shape: tuple[int, ...],
        interval: Interval,
        **attrs: object,
    ) -> Tensor:
        g = self.g
        self.s.start_span(GLUE)
        self.s.stop_span()
        name = g.fresh_name(f"glue_{op.lower()}")  # says what it is in a reproducer
        names = [x if isinstance(x, str) else x.name for x in inputs]
        out = Tensor(f"{name}_out", dtype, tuple(shape), interval, "node")
        g.add_node(Node(op, name, names, [out], dict(attrs)))
        if max(out.shape, default=1) <= self.cap:
            g.add_reusable(out)
        self.emitted += 1
        return out

    def _const(self, label: str, values: Sequence[int] | np.ndarray, dtype: int) -> str:
        arr = np.asarray(values, dtype=dt.np_dtype(dtype))
        name = self.g.fresh_name(f"glue_{label}")
        iv = interval_of(arr)
        self.g.initializers.append((Tensor(name, dtype, tuple(arr.shape), iv, "init"), arr))
        return name

    def _clip(self, t: Tensor, bounds: Interval | None) -> Tensor:
        assert bounds is not None  # _cost checked that the bounds exist
        iv = t.interval
        # Only the bounds that cut (Clip's min and max are optional inputs)
        lo = self._const("min", np.array(bounds.lo), t.dtype) if bounds.lo > iv.lo else ""
        hi = self._const("max", np.array(bounds.hi), t.dtype) if bounds.hi < iv.hi else ""
        if hi and not lo and self.glue.clip_both_bounds:  # a min that cuts nothing
            lo = self._const("min", np.array(dt.value_range(t.dtype)[0]), t.dtype)
        ins = [t, lo, hi] if hi else [t, lo]
        return self._node("Clip", ins, t.dtype, t.shape, _clip_interval(iv, bounds))

    def _activation(self, t: Tensor, lo: float, hi: float, m: float) -> Tensor | None:
        """Sometimes an activation instead of a Clip, where its output fits ``[lo, hi]``
        with |x| >= m: Relu (exact), Tanh, Sigmoid (their intervals as their specs give
        them: the image of the input's, widened by a few ulps, as kernels approximate
        them); None: Clip it is."""
        d, iv = t.dtype, t.interval
        ways: list[tuple[str, Interval]] = []
        relu = Interval(max(iv.lo, 0.0), max(iv.hi, 0.0))
        if self.glue.has("Relu", d) and fits_values(relu, lo, hi, m):
            ways.append(("Relu", relu))
        if d in dt.FLOATS:
            tlo, thi = dt.value_range(d)
            for op, f in (("Tanh", math.tanh), ("Sigmoid", _sigmoid)):
                out = rounding_room(iv.monotone(f), d, tlo, thi)
                if self.glue.has(op, d) and fits_values(out, lo, hi, m):
                    ways.append((op, out))
        if not ways or not self.s.chance(ACTIVATION_RATE):
            return None
        op, out = ways[self.s.index(len(ways))]
        return self._node(op, [t], d, t.shape, out)

    def _rank(self, t: Tensor, r: int) -> Tensor | None:
        s, d = self.s, t.dtype
        if r == 0:
            if t.size > 1:
                t = self._slice(t, (1,) * t.rank)
            if self.glue.has("Squeeze", d) and s.chance(0.5):
                return self._node("Squeeze", [t], d, (), t.interval)
            return self._reshape(t, ())
        if r < t.rank:
            ways = ["reshape"]
            if r == 2 and self.glue.has("Flatten", d):
                ways.append("flatten")
            ones = [i for i, n in enumerate(t.shape) if n == 1]
            if len(ones) >= t.rank - r and self.glue.has("Squeeze", d):
                ways.append("squeeze")
            way = ways[s.index(len(ways))]
            if way == "flatten":
                axis = s.integer(1, t.rank - 1)
                shape = (math.prod(t.shape[:axis]), math.prod(t.shape[axis:]))
                return self._node("Flatten", [t], d, shape, t.interval, axis=axis)
            if way == "squeeze":
                axes = ones[: t.rank - r]
                shape = tuple(n for i, n in enumerate(t.shape) if i not in axes)
                ins: list[Tensor | str] = [t]
                if len(ones) > len(axes) or s.chance(0.5):  # else all: axes may be omitted
                    ins.append(self._const("axes", axes, dt.INT64))
                return self._node("Squeeze", ins, d, shape, t.interval)
            k = t.rank - r + 1  # merge k neighbouring axes into one
            at = s.integer(0, r - 1)
            shape = t.shape[:at] + (math.prod(t.shape[at : at + k]),) + t.shape[at + k :]
            return self._reshape(t, shape)
        # r > rank: new axes of size 1 at drawn positions
        free = list(range(r))
        axes = sorted(free.pop(s.index(len(free))) for _ in range(r - t.rank))
        rest = iter(t.shape)
        shape = tuple(1 if i in axes else next(rest) for i in range(r))
        if self.glue.has("Unsqueeze", d) and s.chance(0.5):
            return self._node(
                "Unsqueeze", [t, self._const("axes", axes, dt.INT64)], d, shape, t.interval
            )
        return self._reshape(t, shape)

    def _reshape(self, t: Tensor, shape: tuple[int, ...]) -> Tensor | None:
        if not self.glue.has("Reshape", t.dtype):
            return None
        spelled = list(shape)
        if spelled and self.s.chance(0.3):  # one dim left for the backend to infer
            spelled[self.s.index(len(spelled))] = -1
        target = self._const("shape", spelled, dt.INT64)
        return self._node("Reshape", [t, target], t.dtype, shape, t.interval)

    def _slice(self, t: Tensor, want: tuple[int, ...]) -> Tensor:
        axes = [i for i, (c, w) in enumerate(zip(t.shape, want, strict=True)) if w < c]
        starts = [self.s.integer(0, t.shape[i] - want[i]) for i in axes]
        ends = [b + want[i] for b, i in zip(starts, axes, strict=True)]
        ins: list[Tensor | str] = [t]
        if self.s.chance(0.5):  # the axes input given
            ins += [self._const("starts", starts, dt.INT64), self._const("ends", ends, dt.INT64)]
            ins.append(self._const("axes", axes, dt.INT64))
        else:  # omitted: every axis, whole where it is not cut
            begin = dict(zip(axes, starts, strict=True))
            all_starts = [begin.get(i, 0) for i in range(t.rank)]
            all_ends = [begin[i] + want[i] if i in begin else c for i, c in enumerate(t.shape)]
            ins.append(self._const("starts", all_starts, dt.INT64))
            ins.append(self._const("ends", all_ends, dt.INT64))
        shape = tuple(min(c, w) for c, w in zip(t.shape, want, strict=True))
        return self._node("Slice", ins, t.dtype, shape, t.interval)

    def _dims(self, t: Tensor, need: Need) -> Tensor | None:
        pattern = need.pattern(t.rank) or (None,) * t.rank
        if len(pattern) != t.rank:
            return None
        want: list[int] = []
        for i, (c, e) in enumerate(zip(t.shape, pattern, strict=True)):
            if e is None:  # glue makes no dim above --max-dim
                want.append(c if c <= need.max_dim else self.s.integer(1, need.max_dim))
            else:
                want.append(c if need.fits(c, e) else need.draw_dim(i, e))
        moved = [i for i, (w, c) in enumerate(zip(want, t.shape, strict=True)) if w != c]
        if len(moved) == 1 and self.glue.has("Gather", t.dtype) and self.s.chance(GATHER_RATE):
            return self._gather(t, moved[0], want[moved[0]])
        if any(w < c for w, c in zip(want, t.shape, strict=True)):
            if not self.glue.has("Slice", t.dtype):
                return None
            t = self._slice(t, tuple(want))
        if any(w > c for w, c in zip(want, t.shape, strict=True)):
            return self._grow(t, tuple(want))
        return t

    def _gather(self, t: Tensor, axis: int, n: int) -> Tensor:
        """``n`` consecutive indices along ``axis`` from a drawn start, wrapping around
        (so repeating where ``n`` exceeds the dim), sometimes reversed: values only move."""
        c = t.shape[axis]
        start = self.s.integer(0, c - 1)
        idx = [(start + k) % c for k in range(n)]
        if self.s.chance(0.5):
            idx.reverse()
        shape = t.shape[:axis] + (n,) + t.shape[axis + 1 :]
        ins = [t, self._const("indices", idx, dt.INT64)]
        return self._node("Gather", ins, t.dtype, shape, t.interval, axis=axis)

    def _grow(self, t: Tensor, want: tuple[int, ...]) -> Tensor | None:
        s, d, shape = self.s, t.dtype, t.shape
        grow = [i for i, (c, w) in enumerate(zip(shape, want, strict=True)) if w > c]
        ways = []
        if self.glue.has("Pad", d):
            ways.append("pad")
        if self.glue.has("Expand", d) and all(shape[i] == 1 for i in grow):
            ways.append("expand")
        if self.glue.has("Tile", d) and all(want[i] % shape[i] == 0 for i in grow):
            ways.append("tile")
        if not ways:
            return None
        way = ways[s.index(len(ways))]
        if way == "expand":
            target = self._const("shape", list(want), dt.INT64)
            return self._node("Expand", [t, target], d, want, t.interval)
        if way == "tile":
            reps = [w // c for c, w in zip(shape, want, strict=True)]
            return self._node(
                "Tile", [t, self._const("repeats", reps, dt.INT64)], d, want, t.interval
            )
        before = [s.integer(0, w - c) for c, w in zip(shape, want, strict=True)]
        after = [w - c - b for c, w, b in zip(shape, want, before, strict=True)]
        modes = ["constant"]
        if d != dt.BOOL:
            modes.append("edge")
            if all(b < c and a < c for b, a, c in zip(before, after, shape, strict=True)):
                modes.append("reflect")
        mode = modes[s.index(len(modes))]
        ins: list[Tensor | str] = [t, self._const("pads", before + after, dt.INT64)]
        if mode == "constant":  # a value the interval already holds keeps it sound
            iv = t.interval
            low = abs(iv.lo) >= iv.min_abs
            v = iv.lo if low else iv.hi
            if d in dt.FLOATS:
                v = _inside(v, d, up=low)
            elif d != dt.BOOL:
                v = math.ceil(v) if low else math.floor(v)
            ins.append(self._const("value", np.array(v), d))
            return self._node("Pad", ins, d, want, iv, mode="constant")
        return self._node("Pad", ins, d, want, t.interval, mode=mode)
