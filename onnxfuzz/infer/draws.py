"""How ``onnxfuzz infer`` draws a variant of an op and the rank tuples and dims it probes.

The random draw (present inputs, element types, attributes), the structured draws for ops
it finds no valid record for (inputs by role, list attributes sized to the spatial rank,
probes with one axis a multiple of another), block-quantized and recurrent draws (int
attributes bound to dims: MatMulNBits' K and N, hidden_size), and shapes stated in the
schema's input descriptions. All are pure functions of the schema and a seeded generator.
"""

from __future__ import annotations

import itertools
import math
import re
import zlib
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.infer.schema import (
    Draw,
    Schema,
    formal_of,
    role_name,
    string_candidates,
    triple,
)

USABLE = frozenset(
    {
        dt.FLOAT,
        dt.FLOAT16,
        dt.DOUBLE,
        dt.INT8,
        dt.UINT8,
        dt.INT16,
        dt.UINT16,
        dt.INT32,
        dt.INT64,
        dt.BOOL,
    }
)
MAX_RANK = 4
RANK_TRIES = 8  # random rank tuples probed per variant draw, after the common ones
# Structured draws (ops phase 1 found no valid record for): variant draws, rank tuples each.
STRUCTURED_TRIES, STRUCTURED_RANKS = 8, 12


def _presence(s: Schema, k: int) -> list[int]:
    """Structured draw ``k``'s present inputs: the required ones with, in turn, the optional
    zero points (QLinear* need them), the first optional input, the first two, none."""
    req = [i for i, f in enumerate(s.inputs) if not f.optional]
    opt = [i for i, f in enumerate(s.inputs) if f.optional]
    zp = [i for i in opt if "zero_point" in s.inputs[i].name]
    options = [zp or opt[:1], opt[:1], opt[:2], []]
    return sorted(set(req) | set(options[k % len(options)]))


def draw_variant(s: Schema, rng: np.random.Generator, structured: int = -1) -> Draw | str:
    """Present inputs, element types and attributes (ranks later), or why none can be.
    ``structured`` >= 0: the structured draw of that number (present inputs by schedule,
    required strings from their candidates); -1: the random draw."""
    if any(f.variadic for f in s.outputs):
        return "variadic outputs (not inferred)"
    strings: list[tuple[str, str]] = []
    for a in s.attrs:
        if a.required and a.kind not in ("INT", "FLOAT", "INTS"):
            cands = string_candidates(a) if a.kind == "STRING" and structured >= 0 else ()
            if not cands:
                return f"required attribute {a.name} of type {a.kind} (no candidate values)"
            strings.append((a.name, cands[int(rng.integers(len(cands)))]))
        elif (
            a.kind == "STRING"
            and a.default is None
            and structured >= 0
            and (cands := string_candidates(a))
        ):
            # an optional string with no default the kernel may still need (FusedGemm's
            # activation): set from its candidates
            strings.append((a.name, cands[int(rng.integers(len(cands)))]))
    if structured >= 0:
        present_l = _presence(s, structured)
    else:
        present_l = [i for i, f in enumerate(s.inputs) if not f.optional or rng.random() < 0.25]
    if s.inputs and s.inputs[-1].variadic and present_l and present_l[-1] == len(s.inputs) - 1:
        # a variadic input: 1..3 tensors in this variant, of one element type (1..3
        # triples of a triple variadic: tensor, scale, zero point)
        per = 3 if triple(s.inputs[-1]) else 1
        present_l += [present_l[-1] + k for k in range(1, per * int(rng.integers(1, 4)))]
    present = tuple(present_l)
    bound: dict[str, int] = {}
    dtypes = []
    for i in present:
        f = formal_of(s, i)
        if f.type_str in s.type_sets:
            tv = f.type_str
            if triple(f):
                # a triple's scale is a float; its tensor and zero point one quantized type
                if role_name(s, i).endswith("_scale") and dt.FLOAT in s.type_sets[tv]:
                    dtypes.append(dt.FLOAT)
                    continue
                tv += "#quantized"
                # of the type of the op's own zero point (QLinearConcat's Y_zero_point)
                zps = [
                    t
                    for j, t in zip(present, dtypes, strict=False)  # the types drawn so far
                    if formal_of(s, j).name.endswith("zero_point")
                ]
                if zps and tv not in bound and zps[0] in s.type_sets[f.type_str]:
                    bound[tv] = zps[0]
            if tv not in bound:
                usable = [
                    t
                    for t in s.type_sets[f.type_str]
                    if t in USABLE and not (tv.endswith("#quantized") and t in dt.FLOATS)
                ]
                if not usable:
                    return f"input {f.name}: no usable element type"
                if structured >= 0:
                    # float on even draws, else each type in turn (a kernel may exist for
                    # one only: MulInteger's uint8)
                    j = structured // 2 + len(bound)
                    pick = dt.FLOAT if dt.FLOAT in usable and structured % 2 == 0 else None
                    bound[tv] = pick or int(usable[j % len(usable)])
                else:
                    pick = dt.FLOAT if dt.FLOAT in usable and rng.random() < 0.6 else None
                    bound[tv] = pick or int(usable[rng.integers(len(usable))])
            dtypes.append(bound[tv])
        else:
            t = dt.from_schema_str(f.type_str)
            if t is None or t not in USABLE:
                return f"input {f.name}: element type {f.type_str} not drawn"
            dtypes.append(t)
    attrs = []
    for a in s.attrs:
        if a.kind == "INT" and (a.required or rng.random() < 0.3):
            # a flag (default 0 or 1) takes 0 or 1; a required count (heads, groups) 1 or
            # 2; any other int keeps its default
            if a.default in (0, 1):
                options = [0, 1]
            elif a.default is not None:
                options = [int(a.default)]
            else:
                options = [1, 2]
            attrs.append((a.name, options[int(rng.integers(len(options)))]))
        elif a.kind == "FLOAT" and a.required:
            attrs.append((a.name, 1.0))
        elif a.kind == "INTS" and a.required:
            # a short list of small ints (kernel_shape [2, 2], axes [1]); the rank probes
            # then find the input ranks it fits, if any
            n = int(rng.integers(1, 3))
            attrs.append((a.name, [int(x) for x in rng.integers(1, 3, n)]))
        elif a.kind == "INTS" and a.name == "kernel_shape" and structured > 0 and structured % 2:
            # optional in the schema, but a pooling kernel may need it (MaxpoolWithMask):
            # on odd structured draws (a conv infers it from its weights on even ones);
            # structured_attrs sizes it to the input's spatial rank
            attrs.append((a.name, [2]))
    attrs = sorted(attrs + strings)
    n_out = sum(1 for f in s.outputs if not f.optional) or 1
    if structured > 0 and structured % 2:
        # odd structured draws also ask for the first optional output: a schema's shape
        # inference may set it regardless (EmbedLayerNormalization's mask_index)
        n_out = min(len(s.outputs), n_out + 1)
    # value inputs leave the tensors whose dims are drawn: their values are set per variant
    # (const_draws), after the ranks (the same random draws as before for any other op)
    consts = tuple(
        (i, t, None, None) for i, t in zip(present, dtypes, strict=True) if value_input(s, i)
    )
    keep = [j for j, i in enumerate(present) if not value_input(s, i)]
    return Draw(
        tuple(present[j] for j in keep),
        tuple(dtypes[j] for j in keep),
        (),
        tuple(attrs),
        n_out,
        consts=consts,
    )


# --- value inputs -------------------------------------------------------------------------------
# Small integer inputs whose VALUES decide the output shape (ExpandDims' axis, Pad's pads,
# Range's start/limit/delta, CropAndResize's crop_size): by name, an integer tensor, or a
# scalar by its description (Range's T takes floats too)
VALUE_NAMES = frozenset({"axis", "axes", "pads", "start", "limit", "delta", "crop_size"})
MAX_CONST_OPTIONS = 4  # value draws per rank tuple


def value_input(s: Schema, pos: int) -> bool:
    """Is the input at ``pos`` a value input (drawn as a constant, see ``VALUE_NAMES``)?"""
    f = formal_of(s, pos)
    if f.variadic or f.name.lower() not in VALUE_NAMES:
        return False
    types = s.type_sets.get(f.type_str)
    if types is None:
        one = dt.from_schema_str(f.type_str)
        types = (one,) if one is not None else ()
    return bool(types) and (all(t in dt.INTS for t in types) or "scalar" in f.doc.lower())


def _const_options(
    name: str, r0: int, rng: np.random.Generator, k: int, ends: dict[str, int]
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Candidate (shape, values) of a value input named ``name`` (lower case): small values
    valid on a first input of rank ``r0`` where the name says what they are; the draw
    number ``k`` moves them, so variants differ."""
    if name == "axis":  # a scalar axis: drawn one, then the first (valid on any rank)
        drawn = [0, -1, r0, 1][k % 4]
        return [((), (v,)) for v in dict.fromkeys((drawn, 0))]
    if name == "axes":
        return [((1,), (v,)) for v in dict.fromkeys((k % max(r0, 1), 0))]
    if name == "pads":  # before and after each axis (Pad), or each spatial axis (a conv)
        lengths = [n for n in dict.fromkeys((2 * r0, 2 * (r0 - 2))) if n > 0]
        return [((n,), tuple(int(x) for x in rng.integers(0, 2, n))) for n in lengths]
    if name == "crop_size":
        return [((2,), tuple(int(x) for x in rng.integers(2, 5, 2)))]
    if name in ends:  # a range: start, limit above it, a step (a length of 1..6)
        return [((), (ends[name],))]
    return []


def const_draws(s: Schema, d: Draw, k: int) -> list[Draw]:
    """The draw with its value inputs set: each to its candidate values (``_const_options``,
    seeded by the op, the draw number and the draw, so a rerun asks for the same records);
    [d] without value inputs; [] when one has no candidate."""
    if not d.consts:
        return [d]
    r0 = d.ranks[0] if d.ranks else 0
    rng = np.random.default_rng(zlib.crc32(f"{s.op}|{k}|{d.key()}".encode()))
    start = int(rng.integers(0, 3))
    ends = {"start": start, "limit": start + int(rng.integers(2, 7)), "delta": 1 + k % 2}
    options = []
    for pos, _, _, _ in d.consts:
        o = _const_options(formal_of(s, pos).name.lower(), r0, rng, k, ends)
        if not o:
            return []
        options.append(o)
    out = []
    for combo in itertools.islice(itertools.product(*options), MAX_CONST_OPTIONS):
        consts = tuple(
            (pos, dtype, shape, values)
            for (pos, dtype, _, _), (shape, values) in zip(d.consts, combo, strict=True)
        )
        out.append(replace(d, consts=consts))
    return out


def _role_rank(name: str, r: int) -> int:
    """The rank an input plays by its name: scales, zero points, lengths and flags are
    scalars; biases, gammas, betas and norm weights vectors; the rest data of rank r."""
    n = name.lower()
    if re.search(r"scale|zero_point|ratio|training_mode|sequence_length$|_count$", n):
        return 0
    if re.search(r"bias|gamma|beta|norm_weight", n):
        return 1
    return r


def structured_ranks(s: Schema, d: Draw, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Rank tuples by the inputs' roles (``_role_rank``), data inputs of one rank or the
    later ones matrices (weights), scalars also as vectors; then the common tuples."""
    names = [role_name(s, i) for i in d.present]
    out: list[tuple[int, ...]] = []
    optional = [formal_of(s, i).optional for i in d.present]
    for r in (3, 2, 4, 1):
        base = [_role_rank(n, r) for n in names]
        out.append(tuple(base))
        out.append(tuple(base[:1] + [2 if x == r else x for x in base[1:]]))
        out.append(tuple(1 if x == 0 else x for x in base))
        # an optional data-named input as a vector (QLinearConv's bias "B")
        out.append(tuple(1 if x == r and o else x for x, o in zip(base, optional, strict=True)))
    first = formal_of(s, d.present[0]).type_str if d.present else ""
    same = tuple(formal_of(s, i).type_str == first for i in d.present)
    out += rank_candidates(len(d.present), rng, same)
    return list(dict.fromkeys(out))[:STRUCTURED_RANKS]


def structured_attrs(d: Draw, ranks: tuple[int, ...]) -> tuple[tuple[str, Any], ...] | None:
    """List attributes sized to the first input's spatial rank (kernel_shape [2, 2] on an
    NCHW input); None when it has no spatial axis."""
    spatial = (ranks[0] if ranks else 0) - 2
    out = []
    for name, v in d.attrs:
        if isinstance(v, list):
            if name in ("kernel_shape", "strides", "dilations", "pads"):
                if spatial < 1:
                    return None
                v = (
                    [0] * (2 * spatial)
                    if name == "pads"
                    else [1 if name != "kernel_shape" else 2] * spatial
                )
            elif name == "axes":
                v = [1]
        out.append((name, v))
    return tuple(out)


def structured_probes(d: Draw, same: tuple[bool, ...]) -> list[tuple[int, ...]]:
    """Probe dims: each the same (4, 6, 2, 3); then all 4 with the last axis of each later
    input typed like the first, or of the last such input alone, 3x, 2x, half or 1 (packed
    weights [H, 3H], a rotary cache [., H/2], a grid's [., 2], a gate's [., 1])."""
    n = sum(d.ranks)
    out = [(v,) * n for v in (4, 6, 2, 3)]
    final = max((j for j, r in enumerate(d.ranks) if r and j > 0 and same[j]), default=-1)
    for only_final in (False, True):  # every such input, or the last one alone (a gate)
        for last in (12, 8, 2, 1):
            dims: list[int] = []
            for j, r in enumerate(d.ranks):
                x = [4] * r
                if j > 0 and r and same[j] and (j == final or not only_final):
                    x[-1] = last
                dims += x
            out.append(tuple(dims))
    return list(dict.fromkeys(out))


def rank_candidates(
    n: int, rng: np.random.Generator, same: tuple[bool, ...] = ()
) -> list[tuple[int, ...]]:
    """Rank tuples to probe, the common shapes of contrib ops first: all inputs of one
    rank; the first of rank r with the rest vectors (biases, gammas) or scalars (scales,
    zero points); the first two of rank r (skip inputs); inputs typed like the first of
    rank r and the others scalars or vectors (QLinear* scales); then random tuples."""
    out: list[tuple[int, ...]] = []
    for r in (2, 3, 1, 4):
        if len(same) == n:
            for other in (0, 1):
                out.append(tuple(r if m else other for m in same))
        for rest in (r, 1, 0):
            out.append((r,) + (rest,) * (n - 1))
            out.append((r, r)[:n] + (rest,) * (n - 2))
    for _ in range(RANK_TRIES):
        out.append(
            (int(rng.integers(1, MAX_RANK + 1)),)
            + tuple(int(x) for x in rng.integers(0, MAX_RANK + 1, n - 1))
        )
    return list(dict.fromkeys(t for t in out if len(t) == n))


# Int attributes that name a dim of the inputs (NeuRI's "attribute = dim" form): ``K`` the
# features (the first input's last axis), ``N`` the rows of the packed weight (the first
# axis of the first later input of rank >= 2 typed unlike the first input)
DIM_ATTRS = ("K", "N")
MIN_BLOCK = 16  # the smallest block_size the schemas allow ("a power of two and >= 16")
BLOCKED_TRIES = 4


def blocked(s: Schema) -> bool:
    """A block-quantized op: an int ``block_size`` attribute."""
    return any(a.name == "block_size" and a.kind == "INT" for a in s.attrs)


def _packed(s: Schema, d: Draw, j: int) -> bool:
    """Is the j-th present input a packed weight: a later one typed unlike the first, not a
    scale or zero point?"""
    if j == 0 or not d.present:
        return False
    f = formal_of(s, d.present[j])
    first = formal_of(s, d.present[0]).type_str
    return f.type_str != first and not re.search(r"scale|zero_point", f.name.lower())


def dim_binds(s: Schema, d: Draw, ranks: tuple[int, ...]) -> tuple[tuple[str, int], ...] | None:
    """The flat dim each required dim attribute (``DIM_ATTRS``) takes; None if one has none."""
    offsets = [sum(ranks[:j]) for j in range(len(ranks))]
    out = []
    for a in s.attrs:
        if a.kind != "INT" or a.name not in DIM_ATTRS or not a.required:
            continue
        if a.name == "K":
            if not ranks or ranks[0] < 1:
                return None
            out.append((a.name, ranks[0] - 1))
        else:
            j = next((j for j, r in enumerate(ranks) if r >= 2 and _packed(s, d, j)), None)
            if j is None:
                return None
            out.append((a.name, offsets[j]))
    return tuple(out)


def blocked_ranks(s: Schema, d: Draw) -> list[tuple[int, ...]]:
    """The first input of rank r (2, 3); packed weights of rank 3 ([N, blocks, blob]) or r;
    scales and zero points vectors or of rank r (block-wise: [N, blocks]); biases vectors;
    other inputs (indices) of rank r."""
    out = []
    for r in (2, 3):
        for packed_r in (3, r):
            for scale_r in (1, r):
                ranks = []
                for j, i in enumerate(d.present):
                    n = formal_of(s, i).name.lower()
                    if j == 0:
                        ranks.append(r)
                    elif re.search(r"scale|zero_point|absmax", n):
                        ranks.append(scale_r)
                    elif _packed(s, d, j):
                        ranks.append(packed_r)
                    else:
                        ranks.append(_role_rank(n, r))
                out.append(tuple(ranks))
    return list(dict.fromkeys(out))


def blocked_probes(s: Schema, d: Draw, block: int, bits: int) -> list[tuple[int, ...]]:
    """Probe dims, every axis 3 but: a packed weight of rank 3 ``[3, ceil(3 / block),
    block * bits / 8]`` (one block of packed ``bits``-bit values per row), and the last
    axis of scales and zero points of rank >= 2 ``ceil(3 / block)`` (one per block). 3, not
    4: the blob (8 for 4-bit blocks of 16) is then no multiple of the other dims, and the
    group mutations move the dims without it."""
    blocks = -(-3 // block)
    out: list[tuple[int, ...]] = []
    for layout in (True, False):
        dims: list[int] = []
        for j, (i, r) in enumerate(zip(d.present, d.ranks, strict=True)):
            n = formal_of(s, i).name.lower()
            x = [3] * r
            if layout and r == 3 and _packed(s, d, j):
                x = [3, blocks, block * bits // 8]
            elif j > 0 and r >= 2 and re.search(r"scale|zero_point|absmax", n):
                x[-1] = blocks
            dims += x
        out.append(tuple(dims))
    return list(dict.fromkeys(out))


def blocked_plans(
    s: Schema, base: Draw, k: int = 0
) -> Iterable[tuple[Draw, list[tuple[int, ...]]]]:
    """A block-quantized op's draws: ``block_size`` the smallest allowed (it must be set),
    the dim attributes bound to their dims (``dim_binds``), the packed layout's probes."""
    defaults = {a.name: a.default for a in s.attrs}
    attrs = dict(base.attrs)
    if any(a.name == "block_size" and a.required for a in s.attrs):
        attrs["block_size"] = MIN_BLOCK
    block = int(attrs.get("block_size") or defaults.get("block_size") or MIN_BLOCK)
    bits = int(attrs.get("bits") or defaults.get("bits") or 4)
    for ranks in blocked_ranks(s, base):
        bind = dim_binds(s, base, ranks)
        if bind is None:
            continue
        bound = {n for n, _ in bind}
        kept = tuple(sorted((n, v) for n, v in attrs.items() if n not in bound))
        d = Draw(base.present, base.dtypes, ranks, kept, base.n_out, bind, base.consts)
        yield d, blocked_probes(s, d, block, bits)


def recurrent(s: Schema) -> bool:
    """A recurrent op sized by an int ``hidden_size`` (the LSTM-style contrib ops)."""
    return any(a.name == "hidden_size" and a.kind == "INT" for a in s.attrs)


def recurrent_plans(
    s: Schema, base: Draw, k: int = 0
) -> Iterable[tuple[Draw, list[tuple[int, ...]]]]:
    """A recurrent op's draws: its required inputs only; X ``[3, 3, 3]``; the weights W and
    R with one direction and the four gates, ``[1, H, 4H]`` (DynamicQuantizeLSTM) or ``[1,
    4H, H]`` (ONNX's LSTM layout), H = 3; scales and zero points ``[1]`` (per tensor);
    ``hidden_size`` bound to R's H axis."""
    keep = [j for j, i in enumerate(base.present) if not formal_of(s, i).optional]
    present = tuple(base.present[j] for j in keep)
    dtypes = tuple(base.dtypes[j] for j in keep)
    names = [formal_of(s, i).name for i in present]
    if not names or "R" not in names:
        return
    attrs = tuple(x for x in base.attrs if x[0] != "hidden_size")
    for h_axis in (1, 2):  # R = [1, H, 4H] or [1, 4H, H]
        weight = [1, 3, 12] if h_axis == 1 else [1, 12, 3]
        ranks: list[int] = []
        dims: list[int] = []
        bind = ()
        for j, n in enumerate(names):
            if j == 0:
                x = [3, 3, 3]
            elif n in ("W", "R"):
                if n == "R":
                    bind = (("hidden_size", len(dims) + h_axis),)
                x = weight
            elif re.search(r"scale|zero_point", n.lower()):
                x = [1]
            else:
                break  # an input with no known layout: not this plan
            ranks.append(len(x))
            dims += x
        else:
            yield (
                Draw(present, dtypes, tuple(ranks), attrs, base.n_out, bind, base.consts),
                [tuple(dims)],
            )


SHAPE_RE = re.compile(r"shape[^(\[.;]{0,24}?[(\[]([^)\]]*)[)\]]")
MAX_DESCRIBED_PLANS = 8


def described_shape(doc: str) -> list[str] | None:
    """The axes of the first shape a description states ("with shape (batch_size,
    sequence_length, hidden_size)": three named axes; "(channels, 1, k_1, ...)": a
    constant axis and an ellipsis), or None if it states none."""
    m = SHAPE_RE.search(doc)
    if not m:
        return None
    items = [x.strip().strip("`").strip() for x in m.group(1).split(",")]
    items = ["..." if x in ("...", "\u2026") else x for x in items if x]
    if not items or not all(x == "..." or re.fullmatch(r"[A-Za-z0-9_ *]+", x) for x in items):
        return None
    return items


def _axis_value(item: str, names: dict[str, int], named: bool, product: bool) -> int:
    """A probe value for a described axis: a literal is itself; a name 3, or (``named``) a
    value of its own, the same for the same name; a product ``a * b`` the product of its
    factors' values, or (not ``product``) its last factor's (the others 1: a fusion
    factor, one head)."""
    if item.isdigit():
        return int(item)
    factors = [f.strip() for f in item.split("*")]
    vals = []
    for f in factors:
        if f.isdigit():
            vals.append(int(f))
        elif named:
            vals.append(names.setdefault(f, 2 + len(names) % 7))
        else:
            vals.append(3)
    return math.prod(vals) if product else vals[-1]


def described_plans(
    s: Schema, base: Draw, k: int = 0
) -> Iterable[tuple[Draw, list[tuple[int, ...]]]]:
    """Draws with the ranks the inputs' descriptions state (required inputs only; an
    ellipsis as no axis or one), probe dims from the named axes (``_axis_value``); on odd
    draws ``k`` an optional string attribute also takes a value its description quotes
    (LinearAttention's default update rule needs an input its 'linear' one does not)."""
    keep = [j for j, i in enumerate(base.present) if not formal_of(s, i).optional]
    present = tuple(base.present[j] for j in keep)
    dtypes = tuple(base.dtypes[j] for j in keep)
    shapes = [described_shape(formal_of(s, i).doc) for i in present]
    if not present or any(x is None for x in shapes):
        return
    options = [[[x for x in sh if x != "..."]] for sh in shapes]  # type: ignore[union-attr]
    for o, sh in zip(options, shapes, strict=True):
        if "..." in sh:  # type: ignore[operator]
            o.append([x if x != "..." else "_ellipsis" for x in sh])  # type: ignore[union-attr]
    attrs = base.attrs
    if k % 2:
        set_ = dict(attrs)
        for a in s.attrs:
            cands = string_candidates(a) if a.kind == "STRING" and not a.required else ()
            if cands and a.name not in set_:
                set_[a.name] = cands[(k // 2) % len(cands)]
        attrs = tuple(sorted(set_.items()))
    plans = [[]]
    for o in options:
        plans = [p + [x] for p in plans for x in o][:MAX_DESCRIBED_PLANS]
    for plan in plans:
        ranks = tuple(len(x) for x in plan)
        probes: list[tuple[int, ...]] = []
        for named in (False, True):
            for product in (False, True):
                names: dict[str, int] = {}
                dims = [_axis_value(x, names, named, product) for sh in plan for x in sh]
                probes.append(tuple(dims))
        yield (
            Draw(present, dtypes, ranks, attrs, base.n_out, consts=base.consts),
            list(dict.fromkeys(probes)),
        )
