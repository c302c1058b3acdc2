"""The builders: the two implementations of ``spec_api.SpecBuilder``, the one interface a
spec talks to (declared there, with every member's signature).

A spec states its variables in Isra's order through these calls:

* ``arity`` / ``optional``  - how many inputs, which optional ones are present;
* ``input``                 - an input tensor: type variable, rank, per-axis dims, value domain;
* ``attr`` / ``draw``       - attributes and other variables, each from a ``Domain``;
* ``const``                 - a constant input whose values the spec derived (shape, axes, pads);
* ``output``                - each output's shape, and its value interval.

Two builders implement them. ``GenBuilder`` draws every variable from the choice stream
and reuses existing tensors (the solver). ``CheckBuilder`` takes every variable from an
observed node (e.g. an ONNX node test) and raises ``OutOfDomain`` when one lies outside
the domain the spec offers: the spec-completeness check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import numpy as np
import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError, SpecError
from onnxfuzz.generate.build.blocks import Const
from onnxfuzz.generate.build.control import Formal, Nest, Scope
from onnxfuzz.generate.build.glue import Glue, Need, adapt, fits_values
from onnxfuzz.generate.build.sequences import SeqBuilder, SeqCheck, register
from onnxfuzz.generate.lang import features
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.config import MAX_RANK, Config
from onnxfuzz.generate.lang.domains import Domain, Ints, OneOf
from onnxfuzz.generate.lang.graph import Graph, Node, Tensor, Value
from onnxfuzz.generate.lang.intervals import ANY, Interval, Values, rounding_room
from onnxfuzz.generate.lang.spec import OpInfo, OpSpec, restricted_by_dtypes
from onnxfuzz.generate.lang.spec_api import (
    DATA,
    MISSING,
    WEIGHT,
    DimEntry,
    Dims,
    SpecBuilder,
    ValuesArg,
    fits_dim,
    fits_pattern,
)
from onnxfuzz.generate.lang.values import interval_of, sample

FRESH_FLOAT = 4.0  # fresh float tensors are drawn inside [-4, 4] where the domain allows
FRESH_INT = 8  # fresh integer tensors inside [-8, 8]
_NARROW_TYPES = frozenset({dt.BOOL, dt.FLOAT16, dt.BFLOAT16})  # never wide (GenBuilder._spread)
# Chaining. Each a -> b -> c path is an edge into b times an edge out of it, so an op
# input takes, among the node outputs that fit: for an op's first input, an output nothing
# consumes yet only now and then (DANGLING_FIRST), most often the one whose producer merged
# the most branches (a residual stream read again); for its further inputs, a dangling
# output (DANGLING_LATER), so branches join instead of ending as graph outputs.
# Measured with tools/bench_diversity.py (README, "Connected graphs").
DANGLING_FIRST = 0.25
DANGLING_LATER = 0.95
MERGED_FIRST = 1.0
# Weights are constants in most real models (and compilers fold them: Conv-BatchNorm),
# so a weight input is computed by glue less often than a data input.
COMPUTED_WEIGHTS = 0.25
# An op's further inputs take another node's output than its first ones this often,
# where one fits: an edge more (x + y rather than x + x), so branches merge.
OTHER_SOURCE = 0.9
# A data input that no node output fits as it is is adapted by glue this many times as
# eagerly as ops chain (always at --connectivity 0.8 and above): a fresh data input
# would start a new chain, leaving the graph wide and shallow.
GLUE_DATA = 1.25
_TYPES_CACHE: dict[tuple, tuple[int, ...]] = {}
_PLAIN_SEQUENCES = (list, tuple)


class OutOfDomain(Exception):
    """Check mode: an observed variable lies outside the spec's domain."""

    def __init__(self, op: str, variable: str, reason: str, bounds: bool = False) -> None:
        self.op, self.variable, self.reason, self.bounds = op, variable, reason, bounds
        super().__init__(f"{op}.{variable}: {reason}")


class Builder:
    """The shared part of the two ``SpecBuilder``s (``onnxfuzz.generate.lang.spec_api``, what
    specs see): the facts. ``GenBuilder`` and ``CheckBuilder`` implement the variables and
    tensors, deciding where values come from."""

    def __init__(self, spec: OpSpec, info: OpInfo, cfg: Config) -> None:
        self.spec = spec
        self.info = info
        self.cfg = cfg
        self.op = spec.op_type
        self.opset = cfg.opset
        self.version = info.version
        self.bound: dict[str, int] = {}
        self.attrs: dict[str, Any] = {}
        self.in_names: dict[int, str] = {}
        self.outs: list[Value] = []

    # --- facts ---------------------------------------------------------------------
    @property
    def max_rank(self) -> int:
        return self.cfg.max_rank

    @property
    def max_dim(self) -> int:
        return self.cfg.max_dim

    def types(self, type_var: str) -> tuple[int, ...]:
        """Element types allowed for ``type_var`` now: the schema's, those ONNX Runtime's
        CPU kernels register (consistent with type variables already bound), and
        ``--dtypes`` (see ``restricted_by_dtypes``)."""
        bound = tuple(sorted(self.bound.items())) if self.bound else ()
        key = (self.op, self.version, self.opset, type_var, bound, self.cfg.dtypes, self.cfg.avoid)
        hit = _TYPES_CACHE.get(key)
        if hit is not None:
            return hit
        schema_set = self.info.type_sets.get(type_var)
        if schema_set is None:
            raise SpecError(self.op, type_var, "no such type variable in the schema")
        allowed = set(schema_set)
        kernels = dt.ort_kernels(self.op, self.version, self.opset)
        if kernels:
            union: set[int] = set()
            for entry in kernels:
                if all(
                    self.bound[b] in entry[b] for b in self.bound if b in entry and b != type_var
                ) and self._completes(entry, type_var):
                    union |= entry.get(type_var, schema_set)
            allowed &= union
        if type_var in self.bound:
            allowed &= {self.bound[type_var]}
        if restricted_by_dtypes(schema_set):
            allowed &= self.cfg.dtypes
        if self.cfg.avoid and type_var == self.info.main_type_var:
            # (op, type) pairs a campaign's backend lacks (the probe's steering)
            allowed -= {d for op, d in self.cfg.avoid if op == self.op}
        out = tuple(sorted(allowed))
        _TYPES_CACHE[key] = out
        return out

    def _completes(self, entry: dict[str, frozenset[int]], type_var: str) -> bool:
        """Does a kernel entry leave every other unbound type variable of a required input
        a type under --dtypes? One that does not is a dead end for a backtrack-free solver
        (OneHot's indices bound to int32 under --dtypes int32,int64 left its values no
        type). Variables of outputs and optional inputs only are not asked: those may go
        untyped (LayerNormalization's float Mean under --dtypes float16)."""
        required = _required_vars(self.info)
        for var, types in entry.items():
            if var == type_var or var in self.bound or var not in required:
                continue
            schema_set = self.info.type_sets.get(var)
            restricted = schema_set is not None and restricted_by_dtypes(schema_set)
            if restricted and not types & self.cfg.dtypes:
                return False
        return True

    def _formal(self, name: str | int) -> str:
        """Inputs are named as in the schema, or by position (``b.input(0)``)."""
        if isinstance(name, int):
            names = self.info.input_names
            if not 0 <= name < len(names):
                raise SpecError(self.op, f"input {name}", f"the schema has {len(names)} inputs")
            return names[name]
        return name

    def _position(self, name: str, index: int) -> int:
        pos = self.info.input_pos.get(name)
        if pos is None:
            raise SpecError(
                self.op,
                name,
                f"no input named {name!r}; the schema's inputs are {list(self.info.input_pos)}",
            )
        return pos + index

    def pinned(self, name: str | int) -> float | None:
        links = getattr(self, "links", None)  # a block's (GenBuilder only)
        if not links:
            return None
        link = links.get(self._position(self._formal(name), 0))
        return link.value if isinstance(link, Const) else None

    def _allowed(self, name: str, dtype: int | Iterable[int] | None) -> tuple[int, ...]:
        allowed = self.types(self.info.input_type[name])
        if dtype is not None:
            want = {dtype} if isinstance(dtype, int) else set(dtype)
            allowed = tuple(d for d in allowed if d in want)
        if not allowed:
            raise ConfigError(f"{self.op}: no element type for input {name!r} under --dtypes")
        return allowed

    def _rank_range(self, name: str, rank: int | Ints | None, dims: Dims) -> tuple[int, int]:
        # dims: None, a callable (per rank) or a sequence; ``isinstance(dims, Sequence)``
        # asks an ABC, slow on the hot path, so only what is neither is asked it
        if dims is not None and (
            type(dims) in _PLAIN_SEQUENCES or (not callable(dims) and isinstance(dims, Sequence))
        ):
            if len(dims) > self.cfg.max_rank:
                raise ConfigError(
                    f"{self.op}: input {name!r} has rank {len(dims)}, "
                    f"but --max-rank is {self.cfg.max_rank}"
                )
            return len(dims), len(dims)
        if rank is None:
            lo, hi = 0, self.cfg.max_rank
        elif isinstance(rank, int):
            lo = hi = rank
        else:
            lo, hi = rank.lo, rank.hi
        if lo > hi:
            raise SpecError(self.op, f"{name}.rank", f"empty domain {lo}..{hi}")
        hi = min(hi, self.cfg.max_rank)
        if lo > hi:
            raise ConfigError(
                f"{self.op}: input {name!r} needs rank >= {lo}, "
                f"but --max-rank is {self.cfg.max_rank}"
            )
        return lo, hi

    def _bind(self, name: str, t: Tensor, pos: int) -> None:
        tv = self.info.input_type[name]
        if tv in self.info.schema_type_vars:
            self.bound[tv] = t.dtype
        self.in_names[pos] = t.name

    def _out_dtype(self, dtype: int | None) -> int:
        if dtype is not None:
            return dtype
        k = len(self.outs)
        types = self.info.output_type
        if k >= len(types) and not self.info.variadic_output:
            raise SpecError(self.op, f"output {k}", "more outputs than the schema declares")
        tv = types[min(k, len(types) - 1)]
        if tv in self.bound:
            return self.bound[tv]
        only = self.info.type_sets.get(tv, frozenset())
        if len(only) == 1:
            return next(iter(only))
        raise SpecError(self.op, f"output {k}", f"type variable {tv} is not bound; pass dtype=")

    def _check_output(
        self, shape: tuple[int, ...], dtype: int, interval: Interval | None
    ) -> Interval:
        if shape and min(shape) < 1:
            raise SpecError(self.op, f"output {len(self.outs)}", f"shape {shape} has a dim < 1")
        if interval is None:
            if dtype != dt.BOOL:
                raise SpecError(
                    self.op, f"output {len(self.outs)}", "give the output's value interval"
                )
            interval = Interval(0, 1)
        if not interval.lo <= interval.hi:
            raise SpecError(self.op, f"output {len(self.outs)}", f"empty interval {interval}")
        lo, hi = dt.value_range(dtype)
        if not (lo <= interval.lo and interval.hi <= hi):  # Interval.within, inlined
            # Interval arithmetic in Python floats rounds: a spec that fills the bound
            # exactly (K * bound / K) may land an ulp outside it. That is noise, not
            # unsoundness.
            slack = 1e-9 * max(abs(lo), abs(hi))
            if not interval.within(lo - slack, hi + slack):
                raise SpecError(
                    self.op,
                    f"output {len(self.outs)}",
                    f"interval {interval} exceeds the {dt.NAMES[dtype]} bound "
                    f"[{lo:g}, {hi:g}]: narrow the inputs' value domains",
                )
            interval = interval.clamp(lo, hi)
        if dtype in dt.FLOATS:
            interval = rounding_room(interval, dtype, lo, hi)
        return interval

    @staticmethod
    def _dims_at(dims: Dims, rank: int) -> Sequence[DimEntry] | None:
        if dims is None:
            return None
        if callable(dims):
            return dims(rank)
        return dims


class GenBuilder(Builder, SeqBuilder, SpecBuilder):
    """Draws every variable from the choice stream; reuses tensors from the graph."""

    def __init__(
        self,
        spec: OpSpec,
        info: OpInfo,
        cfg: Config,
        graph: Graph,
        stream: ChoiceStream,
        glue: Glue | None = None,
        budget: int = 0,
        links: dict[int, Tensor | Const] | None = None,
        nest: Nest | None = None,
    ) -> None:
        """``glue``: the glue ops this builder may emit to adapt a node's output to an
        input, at most ``budget`` nodes of them (see ``onnxfuzz.generate.build.glue``);
        ``links``: input position -> the tensor a block asks that input to take;
        ``nest``: how deep this graph is and how bodies are filled (control flow)."""
        super().__init__(spec, info, cfg)
        op = self.op
        self.g = graph
        self.s = stream
        self.glue = glue
        self.budget = budget
        self.links = links or {}
        # a block step's variables fixed by name (``blocks.Step.fixed``), where the domain
        # the spec offers holds the value (else drawn as ever); set by the generator
        self.fixed: dict[str, Any] = {}
        self.taken: dict[int, Tensor] = {}  # input position -> the tensor it took
        self.data_taken = 0  # data (not weight) inputs: 2 or more merge branches
        self.nest = nest
        self.scopes: list[Scope] = []
        self.name = graph.fresh_name(_lower(op))
        # The features this op's draws could have pinned, when asked for (the probe's
        # discovery sets a list); None keeps feature names off the generation hot path.
        self.offered: list[str] | None = None
        self.probing = bool(cfg.pin) and any(p == op for p, _ in cfg.pin)
        self.steered = bool(cfg.avoid_features)  # some op's forms are avoided

    # --- variables -------------------------------------------------------------------
    def arity(self, lo: int, hi: int, name: str | int = 0) -> int:
        if hi < lo:
            raise SpecError(self.op, f"{name}.count", f"empty domain {lo}..{hi}")
        if self.fixed and lo <= self.fixed.get(f"{self._formal(name)}.count", -1) <= hi:
            return self.fixed[f"{self._formal(name)}.count"]  # a block's input count
        return self.s.integer(lo, hi)

    def optional(self, name: str | int, p: float = 0.5) -> bool:
        """Is the optional input ``name`` present? (Shrinks toward absent.)"""
        formal = self._formal(name)
        self._position(formal, 0)
        if self.fixed and formal in self.fixed:
            return True  # a fixed value for the input: it is there
        if self.probing or self.steered or self.offered is not None:
            left_out = (self.op, features.omitted(formal))
            if self.offered is not None:
                self.offered.append(left_out[1])
            if self.probing:  # the probe's model of one feature (see ``attr``)
                pin = self.cfg.pin
                if left_out in pin:
                    return False
                if (self.op, features.dynamic(formal)) in pin or any(
                    op == self.op and f.startswith("omitted:") for op, f in pin
                ):
                    return True  # the input it is about, or a later one, must be there
            elif left_out in self.cfg.avoid_features:
                return True  # left out with a later one there: a form a backend lacks
        return not self.s.chance(1.0 - p)

    def draw(self, name: str, domain: Domain) -> Any:
        if domain.empty():
            raise SpecError(self.op, name, f"empty domain {domain!r}")
        if self.fixed and name in self.fixed and domain.contains(self.fixed[name]):
            v = self.fixed[name]
            return list(v) if isinstance(v, (list, tuple)) else v
        return domain.draw(self.s)

    def attr(self, name: str, domain: Domain, default: Any = MISSING) -> Any:
        if self.fixed and name in self.fixed:
            v = self.fixed[name]
            if default is not MISSING and v == default:
                return default  # left out: always valid
            if domain.contains(v):
                v = self.draw(name, domain)
                self.attrs[name] = v
                return v
        if not (self.probing or self.steered or self.offered is not None):
            if default is not MISSING and self.s.chance(0.5):
                return default
            v = self.draw(name, domain)
            self.attrs[name] = v
            return v
        pin, avoid = self.cfg.pin, self.cfg.avoid_features
        # The probe's model of one feature: every other feature-bearing draw takes its
        # simplest form (default, first option, constant), so a failure is the feature's.
        pinned = self.probing and any(
            op == self.op and (f == f"attr:{name}" or f.startswith(f"attr:{name}="))
            for op, f in pin
        )
        if default is not MISSING:
            if self.offered is not None:
                self.offered.append(features.present(name))
            if not pinned and (
                self.probing or (self.op, features.present(name)) in avoid or self.s.chance(0.5)
            ):
                return default
        if isinstance(domain, OneOf):
            named = [(o, features.valued(name, o)) for o in domain.options]
            if self.offered is not None:
                self.offered.extend(f for _, f in named if f is not None)
            if self.probing:
                o = next((o for o, f in named if (self.op, f) in pin), domain.options[0])
                self.attrs[name] = o
                return o
            if avoid:  # the values some backend lacks, unless that leaves none
                kept = [o for o, f in named if (self.op, f) not in avoid]
                if kept and len(kept) < len(named):
                    domain = OneOf(kept)
        v = self.draw(name, domain)
        self.attrs[name] = v
        return v

    def set_attr(self, name: str, value: Any) -> None:
        self.attrs[name] = value

    # --- tensors ---------------------------------------------------------------------
    def input(
        self,
        name: str | int,
        *,
        index: int = 0,
        dtype: int | Iterable[int] | None = None,
        rank: int | Ints | None = None,
        dims: Dims = None,
        values: ValuesArg = ANY,
        kind: str = DATA,
        inferable_shape: bool = False,
    ) -> Tensor:
        # _formal, _position and (below) _bind, inlined: a model takes a few inputs per node
        info = self.info
        if type(name) is not str:
            name = self._formal(name)
        pos = info.input_pos.get(name)
        if pos is None:
            pos = self._position(name, index)  # raises: no such input
        pos += index
        allowed = self._allowed(name, dtype)
        lo, hi = self._rank_range(name, rank, dims)
        if self.fixed:  # a block's rank, dims or element type for this input, where allowed
            if lo <= self.fixed.get(f"{name}.rank", -1) <= hi:
                lo = hi = self.fixed[f"{name}.rank"]
            shape = self.fixed.get(f"{name}.dims")
            if (
                dims is None
                and shape
                and lo <= len(shape) <= hi
                and all(1 <= n <= self.cfg.max_dim for n in shape)
            ):
                lo = hi = len(shape)
                dims = list(shape)
            if self.fixed.get(f"{name}.dtype") in allowed:
                allowed = (self.fixed[f"{name}.dtype"],)
        t = None
        if kind == WEIGHT and (self.probing or self.steered or self.offered is not None):
            # A weight computed or fed in is a feature a backend may lack (onnx2torch's
            # Clip takes constant bounds only): the probe pins it, steering avoids it.
            feature = (self.op, features.dynamic(name))
            if self.offered is not None:
                self.offered.append(feature[1])
            if feature in self.cfg.pin:  # a graph input
                t = self._fresh(name, index, allowed, lo, hi, dims, values, DATA)
            elif self.cfg.weights_as_initializers and (
                self.probing or feature in self.cfg.avoid_features
            ):
                t = self._fresh(name, index, allowed, lo, hi, dims, values, kind)
        if t is None and self.links and not isinstance(self.links.get(pos), Const):
            # an op with a block's constant: its other inputs in a type that holds it (the
            # constant follows their type), where the input may take one
            consts = [c.value for c in self.links.values() if isinstance(c, Const)]
            allowed = tuple(d for d in allowed if all(_holds(d, v) for v in consts)) or allowed
        if t is None and pos in self.links:
            link = self.links[pos]
            if isinstance(link, Const):
                t = self._pinned(f"{name}{index or ''}", link, allowed, lo, hi, dims, values)
            else:
                t = self._linked(link, allowed, lo, hi, dims, values)
        if t is None:
            t = self._reuse(allowed, lo, hi, dims, values, kind, inferable_shape)
        if t is None:
            t = self._fresh(name, index, allowed, lo, hi, dims, values, kind)
        tv = info.input_type[name]
        if tv in info.schema_type_vars:
            self.bound[tv] = t.dtype
        self.in_names[pos] = t.name
        self.taken[pos] = t
        if kind == DATA:
            self.data_taken += 1
        return t

    def _linked(
        self,
        src: Tensor,
        allowed: tuple[int, ...],
        lo: int,
        hi: int,
        dims: Dims,
        values_arg: ValuesArg,
    ) -> Tensor | None:
        """The tensor a block links to this input, as it is where it fits, else adapted
        by glue; None where neither can be (the input is then chosen as any other)."""
        d = src.dtype
        values = values_arg(d) if callable(values_arg) else values_arg
        # As it is only within the reuse cap, as a pooled tensor would be: specs bound
        # their value domains by it (CumSum's running sum over the longest axis; a guide's
        # chain once linked a [1344] Reshape output into CumSum, whose cap was 32).
        small = all(n <= self.cfg.max_reuse_dim for n in src.shape)
        if d in allowed and lo <= src.rank <= hi and small and not values.fresh_only(d):
            pattern = self._dims_at(dims, src.rank)
            if fits_values(src.interval, *values.bounds(d), values.min_abs) and (
                not pattern or (len(pattern) == src.rank and fits_pattern(src.shape, pattern))
            ):
                return src
        if self.glue is None or self.budget <= 0:
            return None
        t, emitted = adapt(
            self.glue,
            self.g,
            self.s,
            self._need(allowed, lo, hi, dims, values_arg),
            self.budget,
            sources=[src],
        )
        self.budget -= emitted
        return t

    def _pinned(
        self,
        label: str,
        c: Const,
        allowed: tuple[int, ...],
        lo: int,
        hi: int,
        dims: Dims,
        values_arg: ValuesArg,
    ) -> Tensor | None:
        """A block's constant of a fixed value (``blocks.Const``) as an initializer, where
        this input admits it: its rank, dims pattern and value domain, in a type that holds
        the value exactly (the type of a tensor this op took already, where it may be, so
        the constant follows the link); None where it does not (the input is then chosen as
        any other). It draws no choice: a block's constants go when its choice shrinks."""
        shape = tuple(c.shape)
        if not lo <= len(shape) <= hi:
            return None
        pattern = self._dims_at(dims, len(shape))
        if pattern and not (len(pattern) == len(shape) and fits_pattern(shape, pattern)):
            return None
        kept = []
        for d in allowed if c.dtype is None else [d for d in allowed if d == c.dtype]:
            values = values_arg(d) if callable(values_arg) else values_arg
            vlo, vhi = values.bounds(d)
            if d == dt.BOOL or values.fresh_only(d) or not vlo <= c.value <= vhi:
                continue
            if abs(c.value) >= values.min_abs and _holds(d, c.value):
                kept.append(d)
        if not kept:
            return None
        taken = [t.dtype for t in self.taken.values() if t.dtype in kept]
        dtype = taken[0] if taken else kept[0]
        arr = np.full(shape, c.value, dtype=dt.np_dtype(dtype))
        held = float(np.asarray(c.value, dtype=arr.dtype))  # as the type rounds it
        t = Tensor(f"{self.name}_{label}", dtype, shape, Interval(held, held), "init")
        self.g.initializers.append((t, arr))
        return t

    def _need(
        self, allowed: tuple[int, ...], lo: int, hi: int, dims: Dims, values_arg: ValuesArg
    ) -> Need:
        # Glue asks for the pattern of each source's rank and the domain of each type,
        # once per source: the spec's callables are pure, so each is computed once.
        patterns: dict[int, Sequence[DimEntry] | None] = {}
        domains: dict[int, Values] = {}

        def pattern(r: int) -> Sequence[DimEntry] | None:
            if r in patterns:
                return patterns[r]
            p = patterns[r] = self._dims_at(dims, r)
            return p

        def values(d: int) -> Values:
            if not callable(values_arg):
                return values_arg
            v = domains.get(d)
            if v is None:
                v = domains[d] = values_arg(d)
            return v

        return Need(
            allowed=allowed,
            lo=lo,
            hi=hi,
            pattern=pattern,
            values=values,
            fits=fits_dim,
            draw_dim=lambda axis, e: self._draw_dim("glue", axis, e),
            max_dim=self.cfg.max_dim,
            cap=self.cfg.max_reuse_dim,
            domain=None if callable(values_arg) else values_arg,
        )

    def _reuse(
        self,
        allowed: tuple[int, ...],
        lo: int,
        hi: int,
        dims: Dims,
        values_arg: ValuesArg,
        kind: str,
        shaped: bool = False,
    ) -> Tensor | None:
        cands: list[Tensor] = []
        patterns: dict[int, Sequence[DimEntry]] = {}
        # The pool has few (dtype, rank) keys; walking them beats probing every pair.
        for (d, r), bucket in self.g.pool.items():
            if not lo <= r <= hi or d not in allowed:
                continue
            values = values_arg(d) if callable(values_arg) else values_arg
            if values.fresh_only(d):
                continue
            pattern = patterns.get(r)
            if pattern is None:
                pattern = patterns[r] = self._dims_at(dims, r) or ()
            # Every pooled tensor's dims are <= max_reuse_dim and its interval lies in
            # the dtype's range, so an open pattern and open values admit the bucket.
            open_values = values.lo is None and values.hi is None and not values.min_abs
            if not pattern and open_values:
                cands.extend(bucket)
                continue
            vlo, vhi = values.bounds(d)
            m = values.min_abs
            fitted: dict[tuple[int, ...], bool] = {}  # the bucket's tensors share shapes
            for t in bucket:
                iv = t.interval
                if iv.lo < vlo or iv.hi > vhi or iv.min_abs < m:
                    continue
                if not pattern:
                    cands.append(t)
                    continue
                ok = fitted.get(t.shape)
                if ok is None:
                    ok = fitted[t.shape] = fits_pattern(t.shape, pattern)
                if ok:
                    cands.append(t)
        if shaped and self.g.unshaped:
            cands = [t for t in cands if t.name not in self.g.unshaped]
        if self.glue is not None:  # chain: a node's output before a graph input
            chained = self._chain(cands, allowed, lo, hi, dims, values_arg, kind, shaped)
            if chained is not None:
                return chained
        if cands and self.s.chance(self.cfg.picking_rate):
            return cands[self.s.index(len(cands))]
        return None

    def _chain(
        self,
        cands: list[Tensor],
        allowed: tuple[int, ...],
        lo: int,
        hi: int,
        dims: Dims,
        values_arg: ValuesArg,
        kind: str,
        shaped: bool = False,
    ) -> Tensor | None:
        """A node's output for this input: one that fits (a dangling one, most often),
        or, for a data input, one adapted with glue ops; None leaves the choice to the
        plain reuse-or-fresh rule."""
        s, rate = self.s, self.cfg.connectivity
        produced = [t for t in cands if t.origin == "node"]
        if produced:
            if not s.chance(rate):
                return None
            mine = {t.name for t in self.taken.values()}
            other = [t for t in produced if t.name not in mine] if mine else produced
            if other and len(other) < len(produced) and s.chance(OTHER_SOURCE):
                produced = other
            dangling = [t for t in produced if t.name not in self.g.consumed]
            p_dangling = DANGLING_LATER if mine else DANGLING_FIRST
            if dangling and len(dangling) < len(produced) and s.chance(p_dangling):
                produced = dangling
            if len(produced) > 1 and s.chance(MERGED_FIRST):
                made_by = self.g.made_by  # ``Graph.fan_in``, inlined (one per output)
                fan = [m[1] if (m := made_by.get(t.name)) else 0 for t in produced]
                top = max(fan)
                merged = [t for t, f in zip(produced, fan, strict=True) if f == top]
                if len(merged) < len(produced):
                    produced = merged
            return produced[s.index(len(produced))]
        if self.budget <= 0 or not self.g.produced:
            return None
        if not s.chance(min(1.0, rate * GLUE_DATA) if kind == DATA else rate * COMPUTED_WEIGHTS):
            return None
        assert self.glue is not None
        need = self._need(allowed, lo, hi, dims, values_arg)
        skip = self.g.unshaped if shaped else frozenset()
        t, emitted = adapt(self.glue, self.g, s, need, self.budget, skip=skip)
        self.budget -= emitted
        return t

    def _fresh(
        self,
        name: str,
        index: int,
        allowed: tuple[int, ...],
        lo: int,
        hi: int,
        dims: Dims,
        values_arg: ValuesArg,
        kind: str,
    ) -> Tensor:
        dtype = allowed[self.s.index(len(allowed))]
        values = values_arg(dtype) if callable(values_arg) else values_arg
        rank = self.s.integer(lo, hi)
        pattern = self._dims_at(dims, rank)
        integer, max_dim = self.s.integer, self.cfg.max_dim
        if pattern is None:
            shape = tuple([integer(1, max_dim) for _ in range(rank)])
        else:
            if len(pattern) != rank:
                raise SpecError(
                    self.op, f"{name}.shape", f"dims for rank {rank} has {len(pattern)} entries"
                )
            # an open dim drawn here, as _draw_dim would (a call less per axis)
            shape = tuple(
                [
                    integer(1, max_dim) if e is None else self._draw_dim(name, i, e)
                    for i, e in enumerate(pattern)
                ]
            )
        iv = _fresh_interval(self.op, name, dtype, values, shape, self._spread(dtype, values))
        label = name if index == 0 else f"{name}{index}"
        if kind == WEIGHT and self.cfg.weights_as_initializers:
            t = Tensor(f"{self.name}_{label}", dtype, shape, iv, "init")
            rng = np.random.Generator(np.random.PCG64(self.s.seed32()))
            self.g.initializers.append((t, sample(rng, dtype, shape, iv, values)))
            return t
        t = Tensor(self.g.fresh_name("in"), dtype, shape, iv, "input")
        self.g.inputs.append(t)
        self.g.input_values[t.name] = Values(
            iv.lo,
            iv.hi,
            iv.min_abs if iv.lo < 0 < iv.hi else 0.0,
            values.distinct_axis,
            values.avoid,
        )
        self.g.add_reusable(t)
        return t

    def _spread(self, dtype: int, values: Values) -> float | None:
        """The magnitude a fresh tensor's values reach: None for the small default
        (``FRESH_FLOAT``, ``FRESH_INT``), or for a share ``Config.wide_values`` of them a
        power of two up to the domain's bound, drawn uniformly over the exponents so that
        every scale comes up (2**16 past int16, 2**24 past float32's whole numbers, 2**31
        past int32). Both choices shrink to the small default.

        float16 and bfloat16 stay small: their bound (1e3) leaves room for the values but
        not for the squares and sums kernels compute in the type. A wide float16 slice
        overflowed the sum of squares of TVM's InstanceNormalization and of the reference
        evaluator's, which then agreed on the bias alone, and ONNX Runtime, right in float32,
        was blamed."""
        rate = self.cfg.wide_values
        if not rate or dtype in _NARROW_TYPES:
            return None
        vlo, vhi = values.bounds(dtype)
        small = FRESH_FLOAT if dtype in dt.FLOATS else FRESH_INT
        top = max(abs(vlo), abs(vhi))
        if top <= small or self.s.chance(1.0 - rate):  # recorded 0: the narrow draw
            return None
        first = int(math.log2(small)) + 1
        return 2.0 ** self.s.integer(first, max(first, math.ceil(math.log2(top))))

    def _draw_dim(self, name: str, axis: int, e: DimEntry) -> int:
        if e is None:
            return self.s.integer(1, self.cfg.max_dim)
        if isinstance(e, int):
            if e < 1:
                raise SpecError(self.op, f"{name}.shape[{axis}]", f"fixed dim {e} < 1")
            return e
        if e.empty():
            raise SpecError(self.op, f"{name}.shape[{axis}]", f"empty domain {e!r}")
        return int(e.draw(self.s))

    def const(
        self, name: str | int, value: Any, *, index: int = 0, dtype: int | None = None
    ) -> Tensor:
        """A constant input (initializer) with values the spec derived."""
        name = self._formal(name)
        pos = self._position(name, index)
        if dtype is None:
            allowed = self._allowed(name, None)
            dtype = dt.INT64 if dt.INT64 in allowed else allowed[0]
        arr = np.asarray(value, dtype=dt.np_dtype(dtype))
        label = name if index == 0 else f"{name}{index}"
        iv = interval_of(arr)
        t = Tensor(f"{self.name}_{label}", dtype, tuple(arr.shape), iv, "init")
        self.g.initializers.append((t, arr))
        self._bind(name, t, pos)
        return t

    def const_type(self, name: str | int, index: int = 0) -> int:
        """The element type of a constant input, a choice among its type variable's."""
        name = self._formal(name)
        allowed = self._allowed(name, None)
        return allowed[self.s.index(len(allowed))]

    def output(
        self, shape: Sequence[int], *, dtype: int | None = None, interval: Interval | None = None
    ) -> Tensor:
        dtype = self._out_dtype(dtype)
        shape = tuple(map(int, shape))
        interval = self._check_output(shape, dtype, interval)
        many = len(self.info.output_type) > 1 or self.info.variadic_output
        suffix = str(len(self.outs)) if many else ""
        t = Tensor(f"{self.name}_out{suffix}", dtype, shape, interval, "node")
        self.outs.append(t)
        return t

    def body(self, attr: str, formals: Sequence[Formal]) -> Scope:
        """A subgraph for the graph attribute ``attr``, its nodes drawn one level deeper
        (``onnxfuzz.generate.build.control``)."""
        if attr not in self.info.attribute_names:
            raise SpecError(self.op, attr, "no such graph attribute in the schema")
        depth = self.nest.depth if self.nest is not None else 0
        if self.nest is None or depth >= self.cfg.max_depth:
            raise ConfigError(
                f"{self.op}: a subgraph at depth {depth + 1} exceeds "
                f"--max-depth {self.cfg.max_depth}"
            )
        scope = Scope(
            self.g, self.s, self.cfg, self.glue, self.nest, f"{self.name}_{attr}", formals
        )
        self.scopes.append(scope)
        return scope

    def commit(self) -> Node:
        if not self.outs:
            raise SpecError(self.op, "outputs", "the spec declared no output")
        if self.scopes and any(not sc.closed for sc in self.scopes):
            raise SpecError(self.op, "body", "a body was not closed")
        n = max(self.in_names) + 1 if self.in_names else 0
        inputs = [self.in_names.get(i, "") for i in range(n)]
        node = Node(self.op, self.name, inputs, self.outs, self.attrs)
        self.g.add_node(node)
        cap = self.cfg.max_reuse_dim
        for t in self.outs:
            if not isinstance(t, Tensor):  # a sequence or an optional
                register(self.g, t)
            elif not t.shape or max(t.shape) <= cap:
                self.g.add_reusable(t)
        return node

    def pick_existing(self, cands: list[Value]) -> Value | None:
        """One of ``cands`` (a dangling one now and then, as an op's first input takes
        one), or None: then the caller makes one (a sequence or an optional input)."""
        s = self.s
        if not s.chance(max(self.cfg.connectivity, self.cfg.picking_rate)):
            return None
        dangling = [v for v in cands if v.name not in self.g.consumed]
        if dangling and len(dangling) < len(cands) and s.chance(DANGLING_FIRST):
            cands = dangling
        return cands[s.index(len(cands))]


@cache
def _lower(op: str) -> str:
    """An op's node-name prefix (``Conv`` -> ``conv``)."""
    return op.lower()


def _required_vars(info: OpInfo) -> frozenset[str]:
    """The type variables of an op's required inputs (none known for an op without an
    ONNX schema: an inferred rule's, whose types come from its observations)."""
    return frozenset() if info.schema is None else _vars_of_required(info.schema)


@cache
def _vars_of_required(schema: onnx.defs.OpSchema) -> frozenset[str]:
    return frozenset(
        i.type_str
        for i in schema.inputs
        if i.option != onnx.defs.OpSchema.FormalParameterOption.Optional
    )


def _holds(dtype: int, value: float) -> bool:
    """Does ``dtype`` hold ``value``: a float type within its rounding (float16's sqrt(2)
    is 1.414), an integer type where the value is an integer in its range."""
    if dtype in dt.FLOATS:
        return bool(np.isclose(float(np.asarray(value, dt.np_dtype(dtype))), value, rtol=1e-3))
    if dtype == dt.BOOL or dtype not in dt.INTS:
        return False
    info = np.iinfo(dt.np_dtype(dtype))
    return value == int(value) and info.min <= value <= info.max


def _fresh_interval(
    op: str,
    name: str,
    dtype: int,
    values: Values,
    shape: tuple[int, ...],
    spread: float | None = None,
) -> Interval:
    """The interval a fresh tensor's values are drawn from: inside the input's value
    domain, near zero where the domain allows (small values keep chains bounded), or
    within ``spread`` of zero (``GenBuilder._spread``)."""
    vlo, vhi = values.bounds(dtype)
    if vlo > vhi:
        raise SpecError(op, f"{name}.values", f"empty value domain for {dt.NAMES[dtype]}")
    if dtype == dt.BOOL:
        return Interval(vlo, vhi)
    is_float = dtype in dt.FLOATS
    f = spread or (FRESH_FLOAT if is_float else FRESH_INT)
    lo, hi = max(vlo, -f), min(vhi, f)
    if lo > hi:
        lo, hi = (vlo, min(vhi, vlo + f)) if vlo > f else (max(vlo, vhi - f), vhi)
    if not is_float:
        lo, hi = math.ceil(lo), math.floor(hi)
        if values.distinct_axis is not None and shape:
            need = shape[values.distinct_axis] - 1
            if hi - lo < need:
                hi = min(vhi, lo + need)
                lo = max(vlo, hi - need)
        if lo > hi:
            raise SpecError(op, f"{name}.values", f"no integer in [{vlo:g}, {vhi:g}]")
    m = values.min_abs
    if m and hi < m and lo > -m:
        if vhi >= m:
            hi = min(vhi, 2 * m)
        elif vlo <= -m:
            lo = max(vlo, -2 * m)
        else:
            raise SpecError(op, f"{name}.values", f"no value with |x| >= {m:g} in the domain")
    return Interval(lo, hi, m)


class CheckBuilder(Builder, SeqCheck, SpecBuilder):
    """Takes each variable from an observed node; raises ``OutOfDomain`` where the spec's
    domain does not contain it."""

    def __init__(
        self,
        spec: OpSpec,
        info: OpInfo,
        cfg: Config,
        attrs: dict[str, Any],
        inputs: Sequence[tuple[int, tuple[int, ...], np.ndarray | None] | None],
        outputs: Sequence[tuple[int, tuple[int, ...]]] | None = None,
    ) -> None:
        super().__init__(spec, info, cfg)
        self.observed_attrs = attrs
        self.consumed: set[str] = set()  # attributes the spec drew, read or derived
        self.observed_inputs = list(inputs)
        self.observed_outputs = list(outputs) if outputs is not None else None
        # float inputs whose observed values lie outside the spec's value domain (not
        # refused: a user's model may feed any; the reducer refuses to create them)
        self.value_faults: list[str] = []

    def check_consumed(self) -> None:
        """An attribute of the node that the spec never drew or derived is a configuration
        the spec does not generate."""
        for name in sorted(set(self.observed_attrs) - self.consumed):
            raise self._fail(name, "attribute not generated by the spec")

    def _fail(self, variable: str, reason: str, bounds: bool = False) -> OutOfDomain:
        return OutOfDomain(self.op, variable, reason, bounds)

    def _obs_input(self, pos: int):
        return self.observed_inputs[pos] if pos < len(self.observed_inputs) else None

    def arity(self, lo: int, hi: int, name: str | int = 0) -> int:
        first = self._position(self._formal(name), 0)
        n = sum(1 for o in self.observed_inputs[first:] if o is not None)
        if not lo <= n <= hi:
            raise self._fail(f"{name}.count", f"{n} not in {lo}..{hi}")
        return n

    def optional(self, name: str | int, p: float = 0.5) -> bool:
        return self._obs_input(self._position(self._formal(name), 0)) is not None

    def _observed(self, name: str) -> Any:
        base, _, rest = name.partition("[")
        if base in self.observed_attrs:
            self.consumed.add(base)
            v = self.observed_attrs[base]
        elif base in self.info.input_pos:
            o = self._obs_input(self.info.input_pos[base])
            if o is None or o[2] is None:
                raise self._fail(name, "input has no observed values")
            v = o[2].tolist()
        else:
            raise self._fail(name, "not observable: draw it under an attribute or input name")
        for part in rest.rstrip("]").split("][") if rest else ():
            v = v[int(part)]
        return v

    def draw(self, name: str, domain: Domain) -> Any:
        v = self._observed(name)
        if not domain.contains(v):
            raise self._fail(name, f"{v!r} not in {domain!r}")
        return v

    def attr(self, name: str, domain: Domain, default: Any = MISSING) -> Any:
        self.consumed.add(name)
        if name not in self.observed_attrs:
            if default is MISSING:
                raise self._fail(name, "required attribute missing")
            return default
        v = self.observed_attrs[name]
        if not domain.contains(v):
            raise self._fail(name, f"{v!r} not in {domain!r}")
        self.attrs[name] = v
        return v

    def set_attr(self, name: str, value: Any) -> None:
        self.consumed.add(name)
        obs = self.observed_attrs.get(name, MISSING)
        if obs is not MISSING and not _same(obs, value):
            raise self._fail(name, f"spec derives {value!r}, node has {obs!r}")
        self.attrs[name] = value

    def input(
        self,
        name: str | int,
        *,
        index: int = 0,
        dtype: int | Iterable[int] | None = None,
        rank: int | Ints | None = None,
        dims: Dims = None,
        values: ValuesArg = ANY,
        kind: str = DATA,
        inferable_shape: bool = False,  # a generation constraint: nothing to check
    ) -> Tensor:
        name = self._formal(name)
        pos = self._position(name, index)
        o = self._obs_input(pos)
        var = name if index == 0 else f"{name}[{index}]"
        if o is None:
            raise self._fail(var, "input absent")
        odt, shape, data = o
        if callable(values):
            values = values(odt)
        if odt not in self.types(self.info.input_type[name]):
            raise self._fail(f"{var}.dtype", f"{dt.NAMES.get(odt, odt)} not allowed")
        if dtype is not None:
            want = {dtype} if isinstance(dtype, int) else set(dtype)
            if odt not in want:
                raise self._fail(f"{var}.dtype", f"{dt.NAMES.get(odt, odt)} not in spec's dtypes")
        if any(d == 0 for d in shape):
            raise self._fail(f"{var}.shape", f"{shape} has a zero-size dim", bounds=True)
        r = len(shape)
        if isinstance(dims, Sequence):
            lo = hi = len(dims)
        elif rank is None:
            lo, hi = 0, MAX_RANK
        elif isinstance(rank, int):
            lo = hi = rank
        else:
            lo, hi = rank.lo, rank.hi
        if not lo <= r <= hi:
            raise self._fail(f"{var}.rank", f"{r} not in {lo}..{hi}")
        if r > self.cfg.max_rank and not isinstance(dims, Sequence):
            raise self._fail(f"{var}.rank", f"{r} > --max-rank {self.cfg.max_rank}", bounds=True)
        pattern = self._dims_at(dims, r) or ()
        for i, d in enumerate(shape):
            e = pattern[i] if pattern else None
            if e is None:
                if d > self.cfg.max_dim:
                    raise self._fail(
                        f"{var}.shape[{i}]", f"{d} > --max-dim {self.cfg.max_dim}", bounds=True
                    )
            elif isinstance(e, int):
                if d != e:
                    raise self._fail(f"{var}.shape[{i}]", f"{d} != {e}")
            elif not e.contains(d):
                raise self._fail(f"{var}.shape[{i}]", f"{d} not in {e!r}")
        # Observed values stand for the tensor's interval where they lie in the spec's
        # value domain; integer values outside it (indices, divisors) are out of domain,
        # float values are the test's choice and the spec reasons about its own domain.
        vlo, vhi = values.bounds(odt)
        iv = Interval(vlo, vhi, values.min_abs)
        if data is not None and data.size and odt != dt.BOOL:
            f = data.astype(np.float64)
            if np.isfinite(f).all():
                seen = Interval(float(f.min()), float(f.max()), float(np.abs(f).min()))
                if seen.within(vlo, vhi) and seen.min_abs >= values.min_abs:
                    iv = seen
                elif odt in dt.INTS:
                    raise self._fail(f"{var}.values", f"{seen} outside [{vlo:g}, {vhi:g}]")
                else:
                    self.value_faults.append(f"{var}.values")
            else:
                self.value_faults.append(f"{var}.values")  # NaN or infinity
        t = Tensor(f"in{pos}", odt, tuple(shape), iv, "input")
        self._bind(name, t, pos)
        return t

    def body(self, attr: str, formals: Sequence[Formal]) -> Scope:
        raise self._fail(attr, "subgraph bodies are generated, not checked against a node")

    def const_type(self, name: str | int, index: int = 0) -> int:
        name = self._formal(name)
        o = self._obs_input(self._position(name, index))
        if o is None:
            raise self._fail(f"{name}.dtype", "constant input absent")
        if o[0] not in self.types(self.info.input_type[name]):
            raise self._fail(f"{name}.dtype", f"{dt.NAMES.get(o[0], o[0])} not allowed")
        return o[0]

    def const(
        self, name: str | int, value: Any, *, index: int = 0, dtype: int | None = None
    ) -> Tensor:
        name = self._formal(name)
        pos = self._position(name, index)
        o = self._obs_input(pos)
        if o is None or o[2] is None:
            raise self._fail(name, "constant input absent or without values")
        want = np.asarray(value)
        if want.shape != o[2].shape or not np.array_equal(want.astype(o[2].dtype), o[2]):
            raise self._fail(name, f"spec derives {want.tolist()}, node has {o[2].tolist()}")
        t = Tensor(f"in{pos}", o[0], tuple(o[2].shape), Interval(0, 0), "init")
        self._bind(name, t, pos)
        return t

    def output(
        self, shape: Sequence[int], *, dtype: int | None = None, interval: Interval | None = None
    ) -> Tensor:
        dtype = self._out_dtype(dtype)
        shape = tuple(int(d) for d in shape)
        k = len(self.outs)
        if self.observed_outputs is not None and k < len(self.observed_outputs):
            odt, oshape = self.observed_outputs[k]
            if (odt, tuple(oshape)) != (dtype, shape):
                raise SpecError(
                    self.op,
                    f"output {k}",
                    f"spec says {dt.NAMES.get(dtype)}{list(shape)}, the node "
                    f"produces {dt.NAMES.get(odt)}{list(oshape)}",
                )
        t = Tensor(f"out{k}", dtype, shape, interval or Interval(0, 0), "node")
        self.outs.append(t)
        return t


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) or isinstance(b, float):
        return abs(float(a) - float(b)) <= 1e-6
    return a == b
