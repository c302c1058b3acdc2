"""``onnxfuzz infer``: NeuRI-style rules for ops without a hand spec, from a backend's verdicts.

For each op of a domain (schemas from ``onnx.defs``, and from ONNX Runtime for its contrib
domains), draw *variants* (present inputs, element types, ranks, attributes); per variant,
record invocations (single-op models with random dims) labelled valid or invalid by running
them on the backend; infer the variant's input constraints and output-shape rule
(``onnxfuzz.generate.synth``) from training records, and keep the variant only if the rule
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
import re
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Status
from onnxfuzz.generate.config import DEFAULT_OPSET, ir_version_for
from onnxfuzz.generate.domains import Ints
from onnxfuzz.generate.inferred import (
    DIM_HI,
    DIM_LO,
    FORMAT,
    InputRule,
    OutputRule,
    Rule,
    Variant,
    class_domain,
    evaluate,
    rule_from_json,
    rule_to_json,
)
from onnxfuzz.generate.synth import Constraints, Record, infer_constraints, synth_dim

CACHE_VERSION = 2  # of the record format (2: input values seeded per value draw)
# Of the inference itself: an op's cached result is reused only from the same version
# (records are reused across versions: they depend on the draw and the backend only).
INFER_VERSION = 13  # 11: structured draws, scaled classes; 12: rule outputs of every variant;
# 13: block-quantized and recurrent draws (attributes bound to dims), described shapes
VARIANT_TRIES = 8  # variant draws (inputs, types, attributes) per op
RANK_TRIES = 8  # random rank tuples probed per variant draw, after the common ones
MAX_VARIANTS = 4  # verified variants kept per op
MAX_RANK = 4
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
# Structured draws (ops phase 1 found no valid record for): variant draws, rank tuples each.
STRUCTURED_TRIES, STRUCTURED_RANKS = 8, 12
# Candidate values of a required STRING attribute whose description quotes none: the
# activation names ONNX Runtime's fused contrib ops take (FusedConv, FusedMatMulActivation).
STRING_CANDIDATES = {"activation": ("Relu", "Tanh", "Sigmoid", "LeakyRelu")}
NO_KERNEL = "Could not find an implementation"
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


# --- schemas --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Formal:
    name: str
    type_str: str
    optional: bool
    variadic: bool
    doc: str = ""  # the schema's description (it may state the shape: "with shape (B, S, H)")


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str  # INT, FLOAT, STRING, INTS, ...
    required: bool
    default: Any = None  # the schema's default value, if any
    doc: str = ""  # the schema's description (quoted candidate values of a string)


def _default(a: Any) -> Any:
    """An attribute's default from an onnx.defs or ONNX Runtime schema (None if none)."""
    proto = getattr(a, "default_value", None)
    if proto is None:
        raw = getattr(a, "_default_value", b"")
        proto = onnx.AttributeProto()
        if raw:
            proto.ParseFromString(raw)
    if proto.type == onnx.AttributeProto.UNDEFINED:
        return None
    v = helper.get_attribute_value(proto)
    return v.decode() if isinstance(v, bytes) else v


@dataclass(frozen=True)
class Schema:
    op: str
    domain: str
    version: int
    inputs: tuple[Formal, ...]
    outputs: tuple[Formal, ...]
    type_sets: dict[str, tuple[int, ...]]
    attrs: tuple[Attr, ...]


def _formal(f: Any) -> Formal:
    opt = f.option.name
    type_str = getattr(f, "type_str", None) or f.typeStr
    return Formal(f.name, type_str, opt == "Optional", opt == "Variadic", f.description or "")


def _schema(s: Any, domain: str) -> Schema:
    type_sets = {
        tc.type_param_str: tuple(
            sorted(t for x in tc.allowed_type_strs if (t := dt.from_schema_str(x)) is not None)
        )
        for tc in s.type_constraints
    }
    return Schema(
        op=s.name,
        domain=domain,
        version=s.since_version,
        inputs=tuple(_formal(f) for f in s.inputs),
        outputs=tuple(_formal(f) for f in s.outputs),
        type_sets=type_sets,
        attrs=tuple(
            Attr(a.name, a.type.name, bool(a.required), _default(a), a.description or "")
            for a in sorted(s.attributes.values(), key=lambda a: a.name)
        ),
    )


def domain_schemas(domain: str, backend: str) -> dict[str, Schema]:
    """The newest schema of each op of ``domain``: ai.onnx (at the default opset) from
    onnx.defs; other domains from ONNX Runtime's registry (its contrib ops)."""
    if domain in ("", "ai.onnx"):
        out = {}
        for s in onnx.defs.get_all_schemas():
            if s.domain == "" and not s.deprecated:
                try:
                    v = onnx.defs.get_schema(s.name, DEFAULT_OPSET)
                except onnx.defs.SchemaError:
                    continue
                if not v.deprecated:
                    out[s.name] = _schema(v, "ai.onnx")
        return dict(sorted(out.items()))
    if not backend.startswith("ort"):
        raise ConfigError(
            f"--domain {domain}: only ONNX Runtime (--backend ort) exposes schemas of "
            "domains other than ai.onnx"
        )
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    newest: dict[str, Any] = {}
    for s in get_all_operator_schema():
        if (
            s.domain == domain
            and not s.deprecated
            and (s.name not in newest or s.since_version > newest[s.name].since_version)
        ):
            newest[s.name] = s
    if not newest:
        raise ConfigError(f"--domain {domain}: ONNX Runtime registers no op in that domain")
    return {n: _schema(s, domain) for n, s in sorted(newest.items())}


# --- variants and records ---------------------------------------------------------------------
@dataclass(frozen=True)
class Draw:
    """A variant before its dims: present inputs, their types and ranks, attributes."""

    present: tuple[int, ...]
    dtypes: tuple[int, ...]
    ranks: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    n_out: int
    # (attribute, flat dim index): an int attribute that takes that dim's value in each
    # record (MatMulNBits' K: A's last axis), so it moves with the dims
    bind: tuple[tuple[str, int], ...] = ()

    def key(self) -> str:
        k = [self.present, self.dtypes, self.ranks, self.attrs, self.n_out]
        return json.dumps(k + [self.bind] if self.bind else k)  # unbound: the old keys


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
    names = [""] * (max(d.present) + 1 if d.present else 0)
    graph_inputs, feeds = [], {}
    k = 0
    for pos, dtype, rank in zip(d.present, d.dtypes, d.ranks, strict=True):
        shape = tuple(dims[k : k + rank])
        k += rank
        name = f"x{pos}"
        names[pos] = name
        graph_inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        lo, hi = _values(dtype, formal_of(s, pos).name)
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
    graph = helper.make_graph([node], "infer", graph_inputs, outputs)
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


def formal_of(s: Schema, pos: int) -> Formal:
    """The formal input at position ``pos`` (a variadic last formal takes the rest)."""
    return s.inputs[min(pos, len(s.inputs) - 1)]


def string_candidates(a: Attr) -> tuple[str, ...]:
    """Values a string attribute may take: those its description quotes ('qsa', `zeros`),
    else a known list for its name (activation names)."""
    quoted = re.findall(r"""['`"]([A-Za-z_][A-Za-z0-9_]*)['`"]""", a.doc)
    return tuple(dict.fromkeys(quoted)) or STRING_CANDIDATES.get(a.name, ())


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
        # a variadic input: 1..3 tensors in this variant, of one element type
        present_l += [present_l[-1] + k for k in range(1, int(rng.integers(1, 4)))]
    present = tuple(present_l)
    bound: dict[str, int] = {}
    dtypes = []
    for i in present:
        f = formal_of(s, i)
        if f.type_str in s.type_sets:
            if f.type_str not in bound:
                usable = [t for t in s.type_sets[f.type_str] if t in USABLE]
                if not usable:
                    return f"input {f.name}: no usable element type"
                if structured >= 0:
                    # float on even draws, else each type in turn (a kernel may exist for
                    # one only: MulInteger's uint8)
                    j = structured // 2 + len(bound)
                    pick = dt.FLOAT if dt.FLOAT in usable and structured % 2 == 0 else None
                    bound[f.type_str] = pick or int(usable[j % len(usable)])
                else:
                    pick = dt.FLOAT if dt.FLOAT in usable and rng.random() < 0.6 else None
                    bound[f.type_str] = pick or int(usable[rng.integers(len(usable))])
            dtypes.append(bound[f.type_str])
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
    return Draw(present, tuple(dtypes), (), tuple(attrs), n_out)


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
    names = [formal_of(s, i).name for i in d.present]
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
    for k, (lo, hi) in enumerate(ranges):
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
        lo, hi = _values(dtype, formal_of(s, pos).name)
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
    return Variant(
        tuple(inputs), dict(sorted(attrs.items())), multiple, outputs, le, scaled, attr_dims
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
    for _ in range(VARIANT_TRIES):
        if len(variants) >= MAX_VARIANTS or time.monotonic() > deadline:
            break
        base = draw_variant(s, rng)
        if isinstance(base, str):
            first_why = base
            break
        first = formal_of(s, base.present[0]).type_str if base.present else ""
        same = tuple(formal_of(s, i).type_str == first for i in base.present)
        ranks_tried = rank_candidates(len(base.present), rng, same)
        found = False
        for ranks in ranks_tried:
            d = Draw(base.present, base.dtypes, ranks, base.attrs, base.n_out)
            if d.key() in seen_keys:
                continue
            seen_keys.add(d.key())
            n = sum(ranks)
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
        for ranks in structured_ranks(s, base, rng):
            attrs = structured_attrs(base, ranks)
            if attrs is None:
                continue
            d = Draw(base.present, base.dtypes, ranks, attrs, base.n_out)
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


# --- block-quantized ops: attributes bound to dims ----------------------------------------------
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
        d = Draw(base.present, base.dtypes, ranks, kept, base.n_out, bind)
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
            yield Draw(present, dtypes, tuple(ranks), attrs, base.n_out, bind), [tuple(dims)]


# --- shapes stated in the schema's descriptions -------------------------------------------------
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
        yield Draw(present, dtypes, ranks, attrs, base.n_out), list(dict.fromkeys(probes))


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
        for d, probes in plans(s, base, k):
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
                    r = infer_op(rec, s, seed, deadline)
                    runs += r.runs
                    rule = _rule(s, r.variants) if r.variants else None
                    done = {"rule": rule_to_json(rule) if rule else None, "reason": r.reason}
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
