"""Sequence- and optional-typed values in the generated graph.

A ``Sequence`` (``graph.py``) knows its element type, its length and every element's shape
and value interval when the model is built, so a consumer draws positions and axes that
are valid (SequenceAt's position inside ``[-n, n-1]``, ConcatFromSequence's axis where the
elements agree); an ``OptionalValue`` knows whether it holds a value.

* ``SeqBuilder`` is the part of ``GenBuilder`` that asks for these values
  (``input_seq`` / ``input_optional``) and declares them (``output_seq`` /
  ``output_optional``). An input takes an existing value that fits (a dangling one most
  often) or one made for it, as tensors are: a sequence from tensors with
  ``SequenceConstruct``, an optional with ``Optional``. There are no sequence or optional
  graph inputs: not every backend feeds them, and made values keep input making
  (``values.py``) tensor-only. A made node (named ``make_*``, one ``make`` span each)
  counts toward the node count as glue does; the last op may need one with no budget
  left, one node over.
* ``close`` runs after the last op: every sequence or optional nothing consumed is
  consumed into a tensor (``SequenceAt``, ``ConcatFromSequence``, ``SequenceLength``,
  ``OptionalGetElement``, ``OptionalHasElement``), so graph outputs stay tensors, every
  backend can return them, and the oracle compares tensors only.

Everything is drawn from the choice stream: byte-identical per seed, replayable, shrinkable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import TYPE_CHECKING

import numpy as np
import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError, SpecError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints
from onnxfuzz.generate.lang.graph import (
    ANY_SHAPES,
    CONCAT,
    MAX_LENGTH,
    SAME_SHAPE,
    Graph,
    Node,
    OptionalValue,
    Sequence,
    Tensor,
    Value,
    concat_axes,
    elem_types,
    fits_shapes,
    same_shape,
    type_proto,
)
from onnxfuzz.generate.lang.intervals import Interval, hull
from onnxfuzz.generate.lang.spec_api import fits_pattern

if TYPE_CHECKING:
    from onnxfuzz.generate.build.builder import GenBuilder
    from onnxfuzz.generate.lang.spec_api import Dims

# The ops whose inputs or outputs are sequences or optionals (specs/sequence.py)
OPS = frozenset(
    [
        "SequenceEmpty",
        "SequenceConstruct",
        "SequenceAt",
        "SequenceLength",
        "SequenceInsert",
        "SequenceErase",
        "SequenceMap",
        "SplitToSequence",
        "ConcatFromSequence",
        "Optional",
        "OptionalHasElement",
        "OptionalGetElement",
    ]
)
MAKE = "make"  # span label: one per node made for a sequence or optional input
CLOSE = "close"  # span label: one per node that consumes a dangling sequence or optional



def register(g: Graph, v: Value) -> None:
    """A committed node's sequence or optional output becomes available to consumers."""
    if isinstance(v, Sequence):
        g.seqs.append(v)
    elif isinstance(v, OptionalValue):
        g.optionals.append(v)


# --- the builder's part ----------------------------------------------------------------------
class SeqBuilder:
    """``GenBuilder``'s sequence and optional inputs and outputs (a mixin: it uses the
    builder's graph ``g``, stream ``s``, options and glue budget)."""

    def input_seq(
        self: GenBuilder,
        name: str | int,
        *,
        dtype: int | Iterable[int] | None = None,
        length: Ints | None = None,
        rank: int | Ints | None = None,
        dims: Dims = None,
        shapes: str = ANY_SHAPES,
    ) -> Sequence:
        """A sequence input: element type among ``dtype`` (default: the schema's, under
        --dtypes), length in ``length``, each element's rank and dims as ``input`` takes
        them, and the elements' shapes related as ``shapes`` says."""
        name = self._formal(name)
        pos = self._position(name, 0)
        length = length if length is not None else Ints(0, MAX_LENGTH)
        allowed = self._seq_types(name, dtype)
        lo, hi = self._rank_range(name, rank, dims)

        def fits(q: Sequence) -> bool:
            if q.dtype not in allowed or not length.lo <= q.length <= length.hi:
                return False
            if not fits_shapes(q, shapes):
                return False
            cap = self.cfg.max_reuse_dim
            for sh in q.shapes:
                if not lo <= len(sh) <= hi or max(sh, default=1) > cap:
                    return False
                pattern = self._dims_at(dims, len(sh))
                if pattern and not (len(pattern) == len(sh) and fits_pattern(sh, pattern)):
                    return False
            return True

        cands = [q for q in self.g.seqs if fits(q)]
        q = self.pick_existing(cands) if cands else None
        if q is None:
            q = self._make_seq(allowed, length, lo, hi, dims, shapes)
        self.in_names[pos] = q.name
        return q

    def _seq_types(self: GenBuilder, name: str, dtype: int | Iterable[int] | None) -> list[int]:
        allowed = set(_seq_elem_types(self.info.schema, self.info.input_type[name]))
        allowed &= self.cfg.dtypes
        if dtype is not None:
            allowed &= {dtype} if isinstance(dtype, int) else set(dtype)
        if not allowed:
            raise ConfigError(f"{self.op}: no element type for sequence {name!r} under --dtypes")
        return sorted(allowed)

    def _make_seq(
        self: GenBuilder,
        allowed: list[int],
        length: Ints,
        lo: int,
        hi: int,
        dims: Dims,
        shapes: str,
    ) -> Sequence:
        """SequenceConstruct over tensors the solver finds or makes, as glue."""
        if length.hi < 1:
            raise SpecError(self.op, "sequence", f"no sequence of length {length!r} is made")
        n_lo = max(1, length.lo)
        sub = self._sub("SequenceConstruct")
        n = self.s.integer(n_lo, max(n_lo, min(length.hi, MAX_LENGTH)))
        first = sub.input("inputs", dtype=allowed, rank=Ints(lo, hi), dims=dims)
        elems = [first]
        axis = self.s.index(first.rank) if shapes == CONCAT and first.rank else None
        for i in range(1, n):
            if shapes == SAME_SHAPE or (shapes == CONCAT and axis is None):
                want: Dims = list(first.shape)
            elif shapes == CONCAT:
                pattern = self._dims_at(dims, first.rank)
                want = [
                    d if a != axis else (pattern[a] if pattern else None)
                    for a, d in enumerate(first.shape)
                ]
            else:
                want = dims
            elems.append(sub.input("inputs", index=i, rank=Ints(lo, hi), dims=want))
        q = sub.output_seq(first.dtype, [t.shape for t in elems], [t.interval for t in elems])
        self._commit_sub(sub)
        return q

    def input_optional(
        self: GenBuilder, name: str | int, *, present: bool | None = None
    ) -> OptionalValue:
        """An optional input; ``present`` True asks for one that holds a value (ONNX
        Runtime fails OptionalGetElement on an empty one), None takes either."""
        name = self._formal(name)
        pos = self._position(name, 0)
        cands = [
            o
            for o in self.g.optionals
            if (present is None or o.present == present) and o.elem.dtype in self.cfg.dtypes
        ]
        o = self.pick_existing(cands) if cands else None
        if o is None:
            o = self._make_optional(present)
        self.in_names[pos] = o.name
        return o

    def _make_optional(self: GenBuilder, present: bool | None) -> OptionalValue:
        """Optional(tensor), or (where ``present`` allows) an empty Optional of a tensor
        type, as glue."""
        has = present if present is not None else not self.s.chance(0.3)
        sub = self._sub("Optional")
        if has:
            x = sub.input("input")
            o = sub.output_optional(x, present=True)
        else:
            types = sub.types("V")
            if not types:
                raise ConfigError(f"{self.op}: no element type for an optional under --dtypes")
            d = types[self.s.index(len(types))]
            shape = tuple(self.s.integer(1, self.cfg.max_dim) for _ in range(self.s.integer(0, 2)))
            elem = Tensor("", d, shape, Interval(0, 0), "none")
            sub.set_attr("type", type_proto(elem))
            o = sub.output_optional(elem, present=False)
        self._commit_sub(sub)
        return o

    def _sub(self: GenBuilder, op: str) -> GenBuilder:
        """A builder for one made node, spending this builder's glue budget."""
        from onnxfuzz.generate.lang.spec import load_specs, op_info

        spec, info = load_specs()[op], op_info(op, self.cfg.opset)
        if info is None:
            raise ConfigError(f"{self.op}: {op} does not exist at opset {self.cfg.opset}")
        self.s.start_span(MAKE)
        self.s.stop_span()
        sub = type(self)(spec, info, self.cfg, self.g, self.s, self.glue, self.budget - 1)
        sub.name = self.g.fresh_name(f"make_{op.lower()}")
        return sub

    def _commit_sub(self: GenBuilder, sub: GenBuilder) -> None:
        self.budget = sub.budget  # one node less, and what its own inputs' glue spent
        sub.commit()

    def output_seq(
        self: GenBuilder,
        dtype: int,
        shapes: Iterable[Iterable[int]],
        intervals: Iterable[Interval],
    ) -> Sequence:
        """The next output, a sequence: its element type, each element's shape and
        sound value interval."""
        shapes_t = tuple(tuple(int(d) for d in s) for s in shapes)
        ivs = tuple(intervals)
        if len(ivs) != len(shapes_t):
            raise SpecError(self.op, f"output {len(self.outs)}", "one interval per element")
        for s in shapes_t:
            if any(d < 1 for d in s):
                raise SpecError(self.op, f"output {len(self.outs)}", f"element shape {s}")
        q = Sequence(f"{self.name}_out{self._suffix()}", dtype, shapes_t, ivs)
        self.outs.append(q)
        return q

    def output_optional(
        self: GenBuilder, elem: Tensor | Sequence, *, present: bool
    ) -> OptionalValue:
        """The next output, an optional holding ``elem`` (or, not ``present``, empty of
        ``elem``'s type)."""
        o = OptionalValue(f"{self.name}_out{self._suffix()}", elem, present)
        self.outs.append(o)
        return o

    def _suffix(self: GenBuilder) -> str:
        many = len(self.info.output_type) > 1 or self.info.variadic_output
        return str(len(self.outs)) if many else ""


# --- closing dangling values ------------------------------------------------------------------
def close(g: Graph, s: ChoiceStream, ops: set[str] | None = None) -> int:
    """Consume every sequence and optional nothing consumed into a tensor (graph outputs
    stay tensors); ``ops``: the generator's op set, preferred where one of them can close
    the value. Returns the nodes added."""
    added = 0
    for o in list(g.optionals):
        if o.name in g.consumed:
            continue
        choices = [("OptionalHasElement", _has_element)]
        if o.present:
            choices.append(("OptionalGetElement", _get_element))
        added += _close_one(g, s, o, choices, ops)
    for q in list(g.seqs):  # OptionalGetElement may have added one
        if q.name in g.consumed:
            continue
        choices = [("SequenceLength", _length)]
        if q.length:
            choices = [("SequenceAt", _at)]
            if fits_shapes(q, CONCAT) and (q.shapes[0] or same_shape(q)):
                choices.append(("ConcatFromSequence", _concat))
            choices.append(("SequenceLength", _length))
        added += _close_one(g, s, q, choices, ops)
    return added


Closer = Callable[[Graph, ChoiceStream, str, Value], tuple[list[str], list[Value], dict]]


def _close_one(
    g: Graph,
    s: ChoiceStream,
    v: Value,
    choices: list[tuple[str, Closer]],
    ops: set[str] | None,
) -> int:
    preferred = [c for c in choices if ops is None or c[0] in ops] or choices[:1]
    s.start_span(CLOSE)
    op, make = preferred[s.index(len(preferred))]
    name = g.fresh_name(f"close_{op.lower()}")
    inputs, outputs, attrs = make(g, s, name, v)
    s.stop_span()
    g.add_node(Node(op, name, inputs, outputs, attrs))
    for out in outputs:
        register(g, out)
    return 1


def _scalar_const(g: Graph, name: str, value: int) -> str:
    t = Tensor(name, dt.INT64, (), Interval(value, value), "init")
    g.initializers.append((t, np.asarray(value, dtype=np.int64)))
    return t.name


def _at(g: Graph, s: ChoiceStream, name: str, q: Value) -> tuple[list[str], list[Value], dict]:
    assert isinstance(q, Sequence)
    n = q.length
    p = s.integer(-n, n - 1)
    k = p + n if p < 0 else p
    out = Tensor(f"{name}_out", q.dtype, q.shapes[k], q.intervals[k], "node")
    return [q.name, _scalar_const(g, f"{name}_position", p)], [out], {}


def _concat(g: Graph, s: ChoiceStream, name: str, q: Value) -> tuple[list[str], list[Value], dict]:
    assert isinstance(q, Sequence)
    r = len(q.shapes[0])
    stack = same_shape(q) and (r == 0 or s.chance(0.5))
    if stack:  # new_axis=1: a new axis of length n
        axis = s.integer(-r - 1, r)
        k = axis + r + 1 if axis < 0 else axis
        shape = list(q.shapes[0])
        shape.insert(k, q.length)
        attrs = {"axis": axis, "new_axis": 1}
    else:
        axes = concat_axes(q)
        axis = axes[s.index(len(axes))]
        shape = list(q.shapes[0])
        shape[axis] = sum(sh[axis] for sh in q.shapes)
        attrs = {"axis": axis}
    out = Tensor(f"{name}_out", q.dtype, tuple(shape), hull(q.intervals), "node")
    return [q.name], [out], attrs


def _length(g: Graph, s: ChoiceStream, name: str, q: Value) -> tuple[list[str], list[Value], dict]:
    assert isinstance(q, Sequence)
    out = Tensor(f"{name}_out", dt.INT64, (), Interval(q.length, q.length), "node")
    return [q.name], [out], {}


def _has_element(
    g: Graph, s: ChoiceStream, name: str, o: Value
) -> tuple[list[str], list[Value], dict]:
    assert isinstance(o, OptionalValue)
    iv = Interval(float(o.present), float(o.present))
    return [o.name], [Tensor(f"{name}_out", dt.BOOL, (), iv, "node")], {}


def _get_element(
    g: Graph, s: ChoiceStream, name: str, o: Value
) -> tuple[list[str], list[Value], dict]:
    assert isinstance(o, OptionalValue) and o.present
    e = o.elem
    out: Value
    if isinstance(e, Sequence):
        out = Sequence(f"{name}_out", e.dtype, e.shapes, e.intervals)
    else:
        out = Tensor(f"{name}_out", e.dtype, e.shape, e.interval, "node")
    return [o.name], [out], {}


class SeqCheck:
    """``CheckBuilder``'s part: the completeness check replays tensor inputs only (node
    tests with sequence or optional inputs are excluded before a spec runs)."""

    def input_seq(
        self,
        name: str | int,
        *,
        dtype: int | Iterable[int] | None = None,
        length: Ints | None = None,
        rank: int | Ints | None = None,
        dims: Dims = None,
        shapes: str = ANY_SHAPES,
    ) -> Sequence:
        raise ConfigError("the completeness check does not replay sequence inputs")

    def input_optional(self, name: str | int, *, present: bool | None = None) -> OptionalValue:
        raise ConfigError("the completeness check does not replay optional inputs")

    def output_seq(
        self, dtype: int, shapes: Iterable[Iterable[int]], intervals: Iterable[Interval]
    ) -> Sequence:
        outs: list = self.outs  # type: ignore[attr-defined]
        q = Sequence(f"out{len(outs)}", dtype, tuple(tuple(s) for s in shapes), tuple(intervals))
        outs.append(q)
        return q

    def output_optional(self, elem: Tensor | Sequence, *, present: bool) -> OptionalValue:
        outs: list = self.outs  # type: ignore[attr-defined]
        o = OptionalValue(f"out{len(outs)}", elem, present)
        outs.append(o)
        return o


@cache
def _seq_elem_types(schema: onnx.defs.OpSchema, type_var: str) -> frozenset[int]:
    """The element types of a sequence type variable (``seq(tensor(float))`` -> FLOAT):
    read off the schema once, not per input (each read of ``type_constraints`` builds its
    Python objects anew)."""
    strs = next(
        tc.allowed_type_strs for tc in schema.type_constraints if tc.type_param_str == type_var
    )
    return elem_types(strs)
