"""``onnxfuzz infer``: NeuRI-style rules for ops without a hand spec, from a backend's verdicts.

For each op of a domain (schemas from ``onnx.defs``, and from ONNX Runtime for its contrib
domains), draw *variants* (present inputs, element types, ranks, attributes); per variant,
record invocations (single-op models with random dims) labelled valid or invalid by running
them on the backend; infer the variant's input constraints and output-shape rule
(``onnxfuzz.infer.synth``) from training records, and keep the variant only if the rule
holds on fresh held-out records: every held-out draw that meets the constraints runs, with
the predicted output shapes and element types, and outputs inside the recorded range.

Records and per-op results are cached in a JSON-lines file, so an interrupted run resumes
where it stopped (the draws are seeded by op name: a rerun asks for the same records).
An op with no verified variant is listed with the reason and left out of the rule file.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Status
from onnxfuzz.generate.lang.config import DEFAULT_OPSET, ir_version_for
from onnxfuzz.generate.lang.domains import Ints
from onnxfuzz.infer.draws import (
    BLOCKED_TRIES,
    STRUCTURED_TRIES,
    blocked,
    blocked_plans,
    const_draws,
    described_plans,
    draw_variant,
    rank_candidates,
    recurrent,
    recurrent_plans,
    structured_attrs,
    structured_probes,
    structured_ranks,
)
from onnxfuzz.infer.rules import (
    DIM_HI,
    DIM_LO,
    FORMAT,
    ConstRule,
    InputRule,
    OutputRule,
    Rule,
    Variant,
    class_domain,
    evaluate,
    rule_from_json,
    rule_to_json,
)
from onnxfuzz.infer.schema import Draw, Schema, domain_schemas, formal_of, role_name
from onnxfuzz.infer.synth import Constraints, Record, infer_constraints, synth_dim

CACHE_VERSION = 2  # of the record format (2: input values seeded per value draw)
# Of the inference itself: an op's cached result is reused only from the same version
# (records are reused across versions: they depend on the draw and the backend only).
INFER_VERSION = 14  # 11: structured draws, scaled classes; 12: rule outputs of every variant;
# 13: block-quantized and recurrent draws (attributes bound to dims), described shapes;
# 14: value inputs as constants, exact integer outputs, (tensor, scale, zero point) triples
VARIANT_TRIES = 8  # variant draws (inputs, types, attributes) per op
MAX_VARIANTS = 4  # verified variants kept per op
TRAIN_POOL, HELDOUT_FROM_RULE, HELDOUT_POOL = 10, 10, 6
MUTATION_BASES = 3
MIN_HELDOUT_VALID = 5
SHARE_SLACK = 4.0  # an op's deadline: this many times its even share of the budget left
GIVE_UP = 3  # variant draws in a row with no valid record at any rank: the op is left out
MAX_MAGNITUDE = 1e3  # outputs beyond it on inputs in [-2, 2]: value-unstable (Inverse)
# Value domains the records draw from, and generation then draws from (inferred ops know no
# value semantics): small floats; integers 0..1 (valid as indices and counts into dims >= 2).
FLOAT_VALUES = (-2.0, 2.0)
INT_VALUES = (0.0, 1.0)
# A float input named as a scale (QLinear*'s x_scale, y_scale) takes positive values: a
# quantization scale of 0 or below is invalid (QLinearLeakyRelu rejects it).
SCALE_VALUES = (0.5, 2.0)
NO_KERNEL = "Could not find an implementation"


# --- variants and records ---------------------------------------------------------------------


def _values(dtype: int, name: str = "") -> tuple[float, float]:
    """The value domain of an input (``name``: its formal name)."""
    if dtype in dt.FLOATS:
        return SCALE_VALUES if "scale" in name.lower() else FLOAT_VALUES
    return INT_VALUES


class Recorder:
    """Runs invocations on the backend, each once: results cached in a JSON-lines file."""

    def __init__(self, pool: BackendPool, label: str, cache: Path) -> None:
        self.pool, self.label, self.path = pool, label, cache
        self.cache: dict[str, Any] = {}
        self.runs = 0
        if cache.is_file():
            for line in cache.read_text().splitlines():
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill: run it again
                    continue
                if d.get("v") == CACHE_VERSION:
                    self.cache[d["k"]] = d["r"]
        cache.parent.mkdir(parents=True, exist_ok=True)
        self._out = cache.open("a")

    def close(self) -> None:
        self._out.close()

    def put(self, key: str, result: Any) -> None:
        self.cache[key] = result
        self._out.write(json.dumps({"v": CACHE_VERSION, "k": key, "r": result}) + "\n")
        self._out.flush()

    def run(self, s: Schema, d: Draw, dims: tuple[int, ...], values: int = 0) -> dict[str, Any]:
        """The outcome of one invocation (``values``: which draw of input values)."""
        vkey = f"|coarse{values}" if values else ""
        if s.domain == "ai.onnx":
            vkey += "|shape-inference"  # labelled by both (shape_inference_disagrees)
        key = hashlib.sha1(f"{s.domain}|{s.op}|{d.key()}|{list(dims)}{vkey}".encode()).hexdigest()
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        model, feeds = single_op_model(s, d, dims, values)
        outcome = self.pool.run_one(self.label, model.SerializeToString(), feeds)
        self.runs += 1
        result: dict[str, Any] = {"ok": False}
        if outcome.status == Status.OK and outcome.outputs is not None:
            outs = [outcome.outputs[f"y{k}"] for k in range(d.n_out) if f"y{k}" in outcome.outputs]
            if len(outs) == d.n_out:
                result = {"ok": True, "outs": [_summary(a) for a in outs]}
                why = shape_inference_disagrees(model, outs) if s.domain == "ai.onnx" else None
                if why:
                    result = {"ok": False, "msg": why}
        else:
            result["msg"] = (outcome.message or outcome.status.value).splitlines()[0][:160]
        self.put(key, result)
        return result


def shape_inference_disagrees(model: onnx.ModelProto, outs: list[np.ndarray]) -> str | None:
    """ONNX's strict shape inference as a second labeller (ai.onnx ops; ONNX Runtime runs
    its own schemas' inference for its contrib ops when it loads a model): a record it
    rejects, or whose output shapes it infers otherwise, is invalid."""
    from onnx import shape_inference

    try:
        inferred = shape_inference.infer_shapes(model, strict_mode=True)
    except Exception as e:  # noqa: BLE001 - inference raises several types
        return f"shape inference: {str(e).splitlines()[0][:120]}"
    for vi, a in zip(inferred.graph.output, outs, strict=False):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = [x.dim_value if x.HasField("dim_value") else -1 for x in t.shape.dim]
        if len(dims) != a.ndim or any(g not in (-1, d) for g, d in zip(dims, a.shape, strict=True)):
            return f"shape inference says {dims}, ONNX Runtime made {list(a.shape)}"
    return None


def _summary(a: np.ndarray) -> dict[str, Any]:
    f = a.astype(np.float64) if a.dtype != np.bool_ else a.astype(np.float64)
    finite = bool(np.isfinite(f).all()) if f.size else True
    return {
        "shape": list(a.shape),
        "dtype": dt.NAMES.get(helper.np_dtype_to_tensor_dtype(a.dtype), str(a.dtype)),
        "lo": float(f.min()) if f.size and finite else 0.0,
        "hi": float(f.max()) if f.size and finite else 0.0,
        "finite": finite,
    }


def single_op_model(
    s: Schema, d: Draw, dims: tuple[int, ...], values: int = 0
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One node of ``s`` on graph inputs of the draw's types and ``dims`` (flattened)."""
    rng = np.random.default_rng([zlib.crc32(f"{s.op}|{dims}".encode()), values])
    positions = list(d.present) + [c[0] for c in d.consts]
    names = [""] * (max(positions) + 1 if positions else 0)
    graph_inputs, feeds = [], {}
    inits = []
    for pos, dtype, shape, vals in d.consts:  # value inputs: initializers, as generated
        names[pos] = f"c{pos}"
        arr = np.asarray(vals, dtype=dt.np_dtype(dtype)).reshape(shape)
        inits.append(numpy_helper.from_array(arr, f"c{pos}"))
    k = 0
    for pos, dtype, rank in zip(d.present, d.dtypes, d.ranks, strict=True):
        shape = tuple(dims[k : k + rank])
        k += rank
        name = f"x{pos}"
        names[pos] = name
        graph_inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        lo, hi = _values(dtype, role_name(s, pos))
        feeds[name] = _draw_values(rng, dtype, shape, values, lo, hi)
    node = helper.make_node(
        s.op,
        names,
        [f"y{k}" for k in range(d.n_out)],
        domain="" if s.domain == "ai.onnx" else s.domain,
        **dict(d.attrs),
        **{name: int(dims[i]) for name, i in d.bind},
    )
    outputs = [helper.make_value_info(f"y{k}", onnx.TypeProto()) for k in range(d.n_out)]
    graph = helper.make_graph([node], "infer", graph_inputs, outputs, initializer=inits)
    imports = [helper.make_opsetid("", DEFAULT_OPSET)]
    if s.domain != "ai.onnx":
        imports.append(helper.make_opsetid(s.domain, s.version))
    model = helper.make_model(graph, opset_imports=imports, ir_version=ir_version_for(21))
    return model, feeds


def _draw_values(
    rng: np.random.Generator,
    dtype: int,
    shape: tuple[int, ...],
    values: int = 0,
    lo: float = 0.0,
    hi: float = 1.0,
) -> np.ndarray:
    """Input values in the record domain. ``values`` 0: uniform; 1: whole numbers only, so
    values repeat and reach the domain's ends (an op whose output shape depends on its
    values, such as Unique, then shows it); 2: every element 1 (a constant tensor, as Pad,
    Expand and Tile make: a singular matrix for Inverse)."""
    npd = dt.np_dtype(dtype)
    if values == 2:
        return np.ones(shape, dtype=npd)
    if dtype == dt.BOOL:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype in dt.FLOATS and values == 0:
        return rng.uniform(lo, hi, shape).astype(npd)
    return rng.integers(math.ceil(lo), math.floor(hi) + 1, shape).astype(npd)


def _pool_dims(rng: np.random.Generator, n: int, size: int) -> tuple[int, ...]:
    pool = rng.choice(np.arange(DIM_LO, DIM_HI + 1), size=size, replace=False)
    return tuple(int(pool[rng.integers(size)]) for _ in range(n))


def _from_constraints(
    rng: np.random.Generator, c: Constraints, largest: bool = False
) -> tuple[int, ...]:
    """Dims drawn as the generator draws them: each class in order of appearance, inside
    the domain the classes before it leave (``largest``: the largest value of each)."""
    env: dict[str, int] = {}

    def draw(cls: str) -> None:
        dom = class_domain(cls, env, c.multiple_of, c.le, DIM_LO, DIM_HI)
        options = list(range(dom.lo, dom.hi + 1)) if isinstance(dom, Ints) else list(dom.options)
        env[cls] = int(options[-1] if largest else options[rng.integers(len(options))])

    for cls in c.classes:
        if isinstance(cls, str) and cls not in env:
            if cls in c.scaled:  # derived: its base is drawn (if not yet), it follows
                base, k = c.scaled[cls]
                if base not in env:
                    draw(base)
                env[cls] = k * env[base]
            else:
                draw(cls)
    return tuple(x if isinstance(x, int) else env[x] for x in c.classes)


# --- inference of one op ---------------------------------------------------------------------
@dataclass
class OpResult:
    op: str
    variants: list[Variant]
    reason: str = ""  # why the op is left out (no variant)
    runs: int = 0


def _records(rec: Recorder, s: Schema, d: Draw, dims_list: Iterable[tuple[int, ...]]) -> list:
    out = []
    for dims in dims_list:
        r = rec.run(s, d, dims)
        out.append((dims, r))
    return out


def _as_record(dims: tuple[int, ...], r: dict[str, Any]) -> Record:
    return Record(dims, bool(r["ok"]), tuple(tuple(o["shape"]) for o in r.get("outs", ())))


def _group_mutations(dims: tuple[int, ...], rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Per distinct value v of a valid record: every dim v becomes w, and every dim k*v
    (k = 2, 3, 4) k*w, so dims that must stay equal, or k times another, move together."""
    out = []
    for v in sorted(set(dims)):
        if v < DIM_LO:
            continue
        w = int(rng.choice([x for x in range(DIM_LO, DIM_HI + 1) if x != v]))
        remap = {v: w} | {k * v: k * w for k in (2, 3, 4) if k * v in dims}
        out.append(tuple(remap.get(x, x) for x in dims))
    return out


def infer_variant(
    rec: Recorder,
    s: Schema,
    d: Draw,
    rng: np.random.Generator,
    seeds: Iterable[tuple[int, ...]] = (),
) -> Variant | str:
    """Records of one variant -> a verified rule, or the reason there is none. ``seeds``:
    valid probe records (structured draws), mutated first, also in groups of dims."""
    n = sum(d.ranks)
    seeds = list(seeds)
    train = _records(rec, s, d, [_pool_dims(rng, n, 1 + k % 3) for k in range(TRAIN_POOL)])
    valid_train = [x for x in train if x[1]["ok"]]
    bases = sorted(valid_train, key=lambda x: -len(set(x[0])))[:MUTATION_BASES]
    if seeds:
        train += _records(rec, s, d, seeds)
        bases = ([(x, {}) for x in seeds] + bases)[:MUTATION_BASES]
        for dims, _ in bases:
            train += _records(rec, s, d, _group_mutations(dims, rng))
    for dims, _ in bases:  # NeuRI-style: mutate one dim of a valid record at a time
        muts = []
        for i in range(n):
            m = list(dims)
            m[i] = int(rng.choice([v for v in range(DIM_LO, DIM_HI + 1) if v != dims[i]]))
            muts.append(tuple(m))
        train += _records(rec, s, d, muts)
    records = [_as_record(dims, r) for dims, r in train]
    cons = infer_constraints(records)
    if isinstance(cons, str):
        return cons
    valid = [(dims, r) for dims, r in train if r["ok"]]
    out_dtypes = {tuple(o["dtype"] for o in r["outs"]) for _, r in valid}
    out_ranks = {tuple(len(o["shape"]) for o in r["outs"]) for _, r in valid}
    if len(out_dtypes) != 1 or len(out_ranks) != 1:
        return "output element types or ranks vary with the dims"
    envs = [cons.env(dims) for dims, _ in valid]
    candidates: list[list[list[str]]] = []
    for k, rank in enumerate(next(iter(out_ranks))):
        per_axis = []
        for axis in range(rank):
            fits = synth_dim(envs, [r["outs"][k]["shape"][axis] for _, r in valid])
            if not fits:
                return f"output {k} axis {axis}: no expression in the grammar fits"
            per_axis.append(fits)
        candidates.append(per_axis)
    # The value range: each valid training record also runs on whole-number inputs, which
    # repeat, cancel and reach the domain's ends, and on constant inputs (all ones): a
    # singular matrix makes Inverse's outputs infinite, and the op is left out.
    coarse = [rec.run(s, d, dims, values=1) for dims, _ in valid]
    coarse += [rec.run(s, d, dims, values=2) for dims, _ in valid]
    if not all(r["ok"] for r in coarse):
        return "validity depends on the input values"
    outs_seen = [r["outs"] for _, r in valid] + [r["outs"] for r in coarse]
    ranges = []
    for k in range(d.n_out):
        if not all(o[k]["finite"] for o in outs_seen):
            return f"output {k} is not finite on inputs in the record domain"
        lo = min(o[k]["lo"] for o in outs_seen)
        hi = max(o[k]["hi"] for o in outs_seen)
        w = max(hi - lo, 1.0)
        ranges.append((lo - w / 2, hi + w / 2))
    # held-out: fresh draws from the inferred constraints, and fresh pool draws
    if any(c in cons.multiple_of for pair in cons.le for c in pair):
        return "a class is both a multiple and ordered (its domain could be empty)"
    extra: list[tuple[int, ...]] = []
    if d.bind:
        # an attribute bound to a dim: a kernel may check a size the forms do not state
        # (MatMulBnb4's packed weight holds N*K/2 values): the largest dims, and more draws
        extra = [_from_constraints(rng, cons, largest=True)]
        extra += [_from_constraints(rng, cons) for _ in range(2 * HELDOUT_FROM_RULE)]
    held = _records(
        rec,
        s,
        d,
        [_from_constraints(rng, cons) for _ in range(HELDOUT_FROM_RULE)]
        + [_pool_dims(rng, n, 1 + k % 3) for k in range(HELDOUT_POOL)]
        + extra,
    )
    chosen = [[None] * len(axes) for axes in candidates]
    n_ok = 0
    for dims, r in held:
        if not cons.holds(dims):
            continue
        if not r["ok"]:
            return (
                f"held-out record {list(dims)} meets the constraints but fails: {r.get('msg', '')}"
            )
        other = rec.run(s, d, dims, values=1)  # the same dims, other input values
        if not other["ok"] or [o["shape"] for o in other["outs"]] != [
            o["shape"] for o in r["outs"]
        ]:
            return "validity or output shapes depend on the input values"
        for k, o in enumerate(other["outs"]):
            # whole numbers in the domain repeat and cancel (a singular matrix for Inverse):
            # outputs must stay finite and in the recorded range on them too
            if not o["finite"] or not ranges[k][0] <= o["lo"] <= o["hi"] <= ranges[k][1]:
                return f"output {k} leaves the recorded range on whole numbers (value-unstable)"
        n_ok += 1
        env = cons.env(dims)
        for k, o in enumerate(r["outs"]):
            if tuple(o["dtype"] for o in r["outs"]) != next(iter(out_dtypes)):
                return "held-out output element type differs"
            if len(o["shape"]) != len(candidates[k]):
                return "held-out output rank differs"
            if not o["finite"] or not ranges[k][0] <= o["lo"] <= o["hi"] <= ranges[k][1]:
                return f"held-out output {k} leaves the recorded value range"
            for axis, fits in enumerate(candidates[k]):
                keep = [e for e in fits if evaluate(e, env) == o["shape"][axis]]
                if not keep:
                    return f"held-out output {k} axis {axis}: no candidate expression holds"
                candidates[k][axis] = keep
    if n_ok < MIN_HELDOUT_VALID:
        return f"only {n_ok} held-out records meet the constraints (need {MIN_HELDOUT_VALID})"
    for k, axes in enumerate(candidates):
        for axis, fits in enumerate(axes):
            chosen[k][axis] = fits[0]  # the smallest expression that held everywhere
    dtypes = [dt.BY_NAME[x] for x in next(iter(out_dtypes))]
    # An integer output of integer inputs is compared exactly and its interval is clamped
    # to its type (below): large magnitudes (MurmurHash3's hashes) are no instability
    # there. A float input could differ by an ulp upstream and flip a hash: not exempt.
    exact = all(t in dt.INTS for t in d.dtypes)
    for k, (lo, hi) in enumerate(ranges):
        if dtypes[k] in dt.INTS and exact:
            continue
        if dtypes[k] != dt.BOOL and max(abs(lo), abs(hi)) > MAX_MAGNITUDE:
            big = max(abs(lo), abs(hi))
            return f"output {k} reaches {big:.3g} on inputs in [-2, 2] (value-unstable)"
    for k, t in enumerate(dtypes):
        lo, hi = dt.value_range(t)
        if t in dt.INTS and t not in (dt.INT64, dt.UINT64):
            # the type's own range bounds it (saturating QLinear* outputs): widening past it
            # says nothing (64-bit types: value_range stops short of the type's extremes)
            ranges[k] = (max(lo, ranges[k][0]), min(hi, ranges[k][1]))
        if t != dt.BOOL and not lo <= ranges[k][0] <= ranges[k][1] <= hi:
            return f"output {k}'s recorded range {ranges[k]} exceeds the {dt.NAMES[t]} bound"
    inputs = []
    k = 0
    for pos, dtype, rank in zip(d.present, d.dtypes, d.ranks, strict=True):
        lo, hi = _values(dtype, role_name(s, pos))
        inputs.append(
            InputRule(pos, formal_of(s, pos).name, dtype, tuple(cons.classes[k : k + rank]), lo, hi)
        )
        k += rank
    outputs = tuple(
        OutputRule(
            dtypes[k],
            tuple(chosen[k]),  # type: ignore[arg-type]
            *_round_range(ranges[k], dtypes[k]),
        )
        for k in range(d.n_out)
    )
    used = {c for i in inputs for c in i.dims if isinstance(c, str)}
    scaled = {b: ak for b, ak in cons.scaled.items() if b in used}
    multiple = {c: m for c, m in cons.multiple_of.items() if c in used}
    le = tuple((a, b) for a, b in cons.le if a in used and b in used)
    if any(c in multiple for pair in le for c in pair):
        return "a class is both a multiple and ordered (its domain could be empty)"
    attrs = dict(d.attrs)
    attr_dims: dict[str, str] = {}
    for name, i in d.bind:
        c = cons.classes[i]
        if isinstance(c, int):
            attrs[name] = c  # its dim is a constant: so is the attribute
        else:
            attr_dims[name] = c
    consts = tuple(
        ConstRule(pos, formal_of(s, pos).name, dtype, tuple(shape), tuple(vals))
        for pos, dtype, shape, vals in d.consts
    )
    return Variant(
        tuple(inputs), dict(sorted(attrs.items())), multiple, outputs, le, scaled, attr_dims, consts
    )


def _round_range(r: tuple[float, float], dtype: int) -> tuple[float, float]:
    if dtype in dt.FLOATS:
        return (round(r[0], 4), round(r[1], 4))
    return (float(math.floor(r[0])), float(math.ceil(r[1])))


def infer_op(rec: Recorder, s: Schema, seed: int, deadline: float) -> OpResult:
    rng = np.random.default_rng([seed, zlib.crc32(f"{s.domain}.{s.op}".encode())])
    start_runs = rec.runs
    variants: list[Variant] = []
    seen_keys: set[str] = set()
    reasons: dict[str, int] = {}
    messages: list[str] = []  # of failed probes: a missing kernel says so on every one
    misses = 0
    first_why = ""
    for k in range(VARIANT_TRIES):
        if len(variants) >= MAX_VARIANTS or time.monotonic() > deadline:
            break
        base = draw_variant(s, rng)
        if isinstance(base, str):
            first_why = base
            break
        first = formal_of(s, base.present[0]).type_str if base.present else ""
        same = tuple(formal_of(s, i).type_str == first for i in base.present)
        # no tensor input (Range: its inputs are all values): one empty rank tuple
        ranks_tried = rank_candidates(len(base.present), rng, same) if base.present else [()]
        found = False
        draws = (
            x
            for ranks in ranks_tried
            for x in const_draws(s, replace(base, ranks=ranks), k)  # value inputs set
        )
        for d in draws:
            if d.key() in seen_keys:
                continue
            seen_keys.add(d.key())
            n = sum(d.ranks)
            probes = [tuple([v] * n) for v in (6, 4)] + [_pool_dims(rng, n, 2)]
            probed = _records(rec, s, d, probes)
            messages += [r.get("msg", "") for _, r in probed if not r["ok"]]
            if not any(r["ok"] for _, r in probed):
                continue
            found = True
            v = infer_variant(rec, s, d, rng)
            if isinstance(v, str):
                reasons[v] = reasons.get(v, 0) + 1
            else:
                variants.append(v)
            break  # one rank tuple per variant draw: spread over types and attributes
        if not found:
            reasons["no valid record"] = reasons.get("no valid record", 0) + 1
            misses += 1
            if misses >= GIVE_UP and not variants:
                break  # nothing runs at all (no CPU kernel, or constraints outside reach)
    no_kernel = bool(messages) and all(NO_KERNEL in m for m in messages)
    blind = set(reasons) <= {"no valid record"} and (
        not first_why or "no candidate values" in first_why
    )
    if not variants and blind and not no_kernel and time.monotonic() <= deadline:
        # Nothing valid from the random draws (or a required string stopped them): the
        # structured draws, by the inputs' roles
        got, why2, drawn = _structured(rec, s, seed, deadline)
        variants += got
        if not drawn:
            first_why = why2 or first_why
        elif why2:
            first_why, reasons = "", {why2: 1}
    kind = "blocked" if blocked(s) else "recurrent" if recurrent(s) else ""
    if not variants and not no_kernel and kind and time.monotonic() <= deadline:
        # a block-quantized op (MatMulNBits, GatherBlockQuantized) or a recurrent one
        # (DynamicQuantizeLSTM): its layout and its dim attributes, which no draw above
        # states
        plans = blocked_plans if kind == "blocked" else recurrent_plans
        got, why3 = _bound_draws(rec, s, seed, deadline, kind, plans)
        variants += got
        if why3 and not got:
            first_why, reasons = "", {why3: 1}
    if not variants and not no_kernel and not first_why and time.monotonic() <= deadline:
        # the shapes the schema's descriptions state: mixed ranks (EngramGate's keys of
        # rank 4 and value of rank 3) and constant axes (a depthwise weight's [C, 1, K])
        got, why4 = _bound_draws(rec, s, seed, deadline, "described", described_plans)
        variants += got
        if why4 and why4 != "no valid record" and not got:
            reasons = {why4: 1}
    runs = rec.runs - start_runs
    if variants:
        return OpResult(s.op, variants, runs=runs)
    if first_why:
        return OpResult(s.op, [], first_why, runs)
    if no_kernel:
        return OpResult(s.op, [], "no CPU kernel for the drawn element types", runs)
    why = _commonest(reasons) or "budget spent"
    if time.monotonic() > deadline and not reasons:
        why = "budget spent"
    return OpResult(s.op, [], f"no verified variant ({why})", runs)


def _structured(
    rec: Recorder, s: Schema, seed: int, deadline: float
) -> tuple[list[Variant], str, bool]:
    """Structured draws for an op the random ones found nothing valid for: present inputs by
    schedule, ranks by the inputs' roles, list attributes sized to the spatial rank, probe
    dims with one input's last axis a multiple or a fraction of the first's; a valid probe
    seeds the records. Returns the verified variants, if none the commonest reason, and
    whether any variant could be drawn (else the reason is why none can be)."""
    rng = np.random.default_rng([seed, zlib.crc32(f"{s.domain}.{s.op}|structured".encode())])
    variants: list[Variant] = []
    reasons: dict[str, int] = {}
    seen: set[str] = set()
    misses = 0
    for k in range(STRUCTURED_TRIES):
        if len(variants) >= MAX_VARIANTS or time.monotonic() > deadline:
            break
        base = draw_variant(s, rng, structured=k)
        if isinstance(base, str):
            return [], base, False
        first = formal_of(s, base.present[0]).type_str if base.present else ""
        same = tuple(formal_of(s, i).type_str == first for i in base.present)
        found = kernel_missing = False
        draws = (
            x
            for ranks in structured_ranks(s, base, rng)
            if (attrs := structured_attrs(base, ranks)) is not None
            for x in const_draws(s, replace(base, ranks=ranks, attrs=attrs), k)
        )
        for d in draws:
            if d.key() in seen or time.monotonic() > deadline:
                continue
            seen.add(d.key())
            probed = _records(rec, s, d, structured_probes(d, same))
            ok = [dims for dims, r in probed if r["ok"]]
            if not ok:
                if all(NO_KERNEL in r.get("msg", "") for _, r in probed):
                    kernel_missing = True
                    break  # no kernel for these element types: the next draw
                continue
            found = True
            # Seed groups, each tried alone: the uniform probes together, then each other
            # one (a broadcast [., 1] next to a [., 3x] would blur both relations)
            uniform = [x for x in ok if len(set(x)) == 1]
            groups = ([uniform] if uniform else []) + [[x] for x in ok if len(set(x)) > 1]
            v = _first_variant(rec, s, d, rng, groups, reasons)
            if v is not None:
                variants.append(v)
            break
        if not found:
            reasons["no valid record"] = reasons.get("no valid record", 0) + 1
            misses += not kernel_missing  # a missing kernel is cheap to see: not a miss
            if misses >= GIVE_UP + 1 and not variants:
                break
    return variants, _commonest(reasons), True


def _bound_draws(
    rec: Recorder,
    s: Schema,
    seed: int,
    deadline: float,
    tag: str,
    plans: Callable[[Schema, Draw, int], Iterable[tuple[Draw, list[tuple[int, ...]]]]],
) -> tuple[list[Variant], str]:
    """Draws with attributes bound to dims (``plans``: per base draw, the draws and their
    probe dims); a valid probe seeds the records as a structured draw's does."""
    rng = np.random.default_rng([seed, zlib.crc32(f"{s.domain}.{s.op}|{tag}".encode())])
    variants: list[Variant] = []
    reasons: dict[str, int] = {}
    seen: set[str] = set()
    for k in range(BLOCKED_TRIES):
        if len(variants) >= MAX_VARIANTS or time.monotonic() > deadline:
            break
        base = draw_variant(s, rng, structured=k)
        if isinstance(base, str):
            return [], base
        found = False
        planned = ((x, p) for d0, p in plans(s, base, k) for x in const_draws(s, d0, k))
        for d, probes in planned:
            if d.key() in seen or time.monotonic() > deadline:
                continue
            seen.add(d.key())
            probed = _records(rec, s, d, probes)
            ok = [dims for dims, r in probed if r["ok"]]
            if not ok:
                continue
            found = True
            # the probe with the most distinct dims first: its mutations separate the most
            # classes (EngramGate's named axes, not all of them one)
            groups = [[x] for x in sorted(ok, key=lambda x: -len(set(x)))]
            v = _first_variant(rec, s, d, rng, groups, reasons)
            if v is not None:
                variants.append(v)
            break
        if not found:
            reasons["no valid record"] = reasons.get("no valid record", 0) + 1
    return variants, _commonest(reasons)


def _first_variant(
    rec: Recorder,
    s: Schema,
    d: Draw,
    rng: np.random.Generator,
    groups: list[list[tuple[int, ...]]],
    reasons: dict[str, int],
) -> Variant | None:
    """The first verified variant inferred from a group of valid probes, each group tried
    in turn; each failed group's reason is counted in ``reasons``."""
    for seeds in groups:
        v = infer_variant(rec, s, d, rng, seeds=seeds)
        if not isinstance(v, str):
            return v
        reasons[v] = reasons.get(v, 0) + 1
    return None


def _commonest(reasons: dict[str, int]) -> str:
    """The reason to report: the commonest one a variant with a valid record gave (it says
    more than "no valid record", which is reported only when it is all there is)."""
    told = {k: n for k, n in reasons.items() if k != "no valid record"} or reasons
    return max(told, key=lambda k: told[k]) if told else ""


# --- the job ----------------------------------------------------------------------------------
@dataclass
class InferSummary:
    rules: list[Rule]
    left_out: dict[str, str]
    runs: int
    seconds: float


def run_inference(
    domain: str,
    backend: str,
    out: Path,
    cache: Path,
    *,
    ops: Iterable[str] | None = None,
    budget_s: float = 1800.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> InferSummary:
    """Infer rules for the ops of ``domain`` and write them to ``out`` (JSON)."""
    t0 = time.monotonic()
    schemas = domain_schemas(domain, backend)
    if ops is not None:
        wanted = list(dict.fromkeys(ops))
        unknown = [o for o in wanted if o not in schemas]
        if unknown:
            raise ConfigError(f"--ops: {', '.join(unknown)} not in the {domain} schemas")
        schemas = {o: schemas[o] for o in wanted}
    rules: list[Rule] = []
    left_out: dict[str, str] = {}
    runs = 0
    with BackendPool([backend], timeout=20.0, memory_mb=4096.0) as pool:
        pool.start()
        rec = Recorder(pool, backend, cache)
        try:
            names = list(schemas)
            for k, name in enumerate(names):
                s = schemas[name]
                key = f"op|{INFER_VERSION}|{domain}|{name}|{seed}"
                done = rec.cache.get(key)
                if done is None:
                    left = budget_s - (time.monotonic() - t0)
                    if left <= 0:
                        left_out[name] = "budget spent before the op was reached"
                        continue
                    # An op may take up to SHARE_SLACK times its even share of what is
                    # left: most ops end well inside theirs (cache hits, a missing
                    # kernel), and one whose kernel crashes on many probes needs more
                    share = SHARE_SLACK * left / (len(names) - k)
                    deadline = time.monotonic() + min(left, share)
                    try:
                        r = infer_op(rec, s, seed, deadline)
                    except (ValueError, TypeError, IndexError, KeyError) as e:
                        # one op's draws failing leaves that op out; it ended the run, and
                        # the rules verified before it were never written
                        done = {"rule": None, "reason": f"draws failed: {type(e).__name__}: {e}"}
                    else:
                        runs += r.runs
                        rule = _rule(s, r.variants) if r.variants else None
                        reason = r.reason
                        done = {"rule": rule_to_json(rule) if rule else None, "reason": reason}
                        if r.reason != "no verified variant (budget spent)":
                            rec.put(key, done)  # a budget-cut op is tried again on resume
                if done["rule"]:
                    rules.append(rule_from_json(done["rule"]))
                else:
                    left_out[name] = done["reason"]
                if progress:
                    state = "rule" if done["rule"] else f"left out: {done['reason']}"
                    progress(f"{domain}.{name}: {state}")
        finally:
            rec.close()
    write_rules(out, domain, rules, left_out)
    return InferSummary(rules, left_out, runs, time.monotonic() - t0)


def _rule(s: Schema, variants: list[Variant]) -> Rule:
    return Rule(
        op=s.op,
        domain=s.domain,
        version=s.version,
        inputs=tuple((f.name, f.type_str) for f in s.inputs),
        # as many as the variant with the most (the builder names a node's outputs by
        # their count: two variants' outputs under one name would be a duplicate)
        outputs=tuple(f.type_str for f in s.outputs[: max(len(v.outputs) for v in variants)]),
        type_sets={k: frozenset(v) for k, v in s.type_sets.items()},
        variants=tuple(variants),
    )


def write_rules(out: Path, domain: str, rules: list[Rule], left_out: dict[str, str]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "format": FORMAT,
        "domain": domain,
        "made_by": "onnxfuzz infer (NeuRI-style: records labelled by the backend, rules "
        "verified on held-out records)",
        "rules": [rule_to_json(r) for r in sorted(rules, key=lambda r: r.op)],
        "left_out": dict(sorted(left_out.items())),
    }
    out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
