"""Sequence and optional ops (ONNX's "Sequence" and "Optional" sections).

Sequences and optionals are typed values in the graph (``onnxfuzz.generate.build.sequences``):
element type, length and every element's shape and interval are known when the model is
built, so positions and axes are drawn inside what the values allow. SequenceMap's body is
a chain of elementwise ops for now (not a solver-built subgraph).
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.graph import (
    CONCAT,
    MAX_LENGTH,
    Sequence,
    Tensor,
    concat_axes,
    same_shape,
    type_proto,
)
from onnxfuzz.generate.lang.intervals import Interval, hull
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder

NOT_GENERATED = {
    "test_optional_get_element_tensor": "the input's kind (optional, tensor or sequence, "
    "from version 18) is a draw the check mode cannot observe from a node",
}


def _position(b: SpecBuilder, dom: Ints) -> int:
    """A scalar position input (int32 or int64) drawn from ``dom``."""
    p = b.draw("position", dom)
    b.const("position", p, dtype=b.const_type("position"))
    return p


@op("SequenceEmpty")
def sequence_empty(b: SpecBuilder, p: None) -> None:
    """An empty sequence of element type ``dtype``."""
    d = b.attr("dtype", OneOf(sorted(b.cfg.dtypes)))
    b.output_seq(d, [], [])


@op("SequenceConstruct")
def sequence_construct(b: SpecBuilder, p: None) -> None:
    """A sequence of the inputs, all of one element type; their shapes may differ."""
    n = b.arity(1, MAX_LENGTH)
    xs = [b.input("inputs", index=i) for i in range(n)]
    b.output_seq(xs[0].dtype, [x.shape for x in xs], [x.interval for x in xs])


@op("SequenceAt")
def sequence_at(b: SpecBuilder, p: None) -> None:
    """The tensor at ``position`` in [-n, n-1] (negative: from the back)."""
    q = b.input_seq("input_sequence", dtype=b.types("T"), length=Ints(1, MAX_LENGTH))
    n = q.length
    k = _position(b, Ints(-n, n - 1)) % n
    b.output(q.shapes[k], dtype=q.dtype, interval=q.intervals[k])


@op("SequenceLength")
def sequence_length(b: SpecBuilder, p: None) -> None:
    """The number of tensors in the sequence (int64 scalar); the sequence may be empty."""
    q = b.input_seq("input_sequence")
    b.output((), dtype=dt.INT64, interval=Interval(q.length, q.length))


@op("SequenceInsert")
def sequence_insert(b: SpecBuilder, p: None) -> None:
    """``tensor`` inserted at ``position`` in [-n, n] (default: appended)."""
    q = b.input_seq("input_sequence", dtype=b.types("T"))
    x = b.input("tensor", dtype=q.dtype)
    n = q.length
    k = n
    if b.optional("position"):
        k = _position(b, Ints(-n, n))
        k = k + n if k < 0 else k
    shapes = list(q.shapes)
    ivs = list(q.intervals)
    shapes.insert(k, x.shape)
    ivs.insert(k, x.interval)
    b.output_seq(q.dtype, shapes, ivs)


@op("SequenceErase")
def sequence_erase(b: SpecBuilder, p: None) -> None:
    """The sequence without the tensor at ``position`` in [-n, n-1] (default: the last)."""
    q = b.input_seq("input_sequence", length=Ints(1, MAX_LENGTH))
    n = q.length
    k = n - 1
    if b.optional("position"):
        k = _position(b, Ints(-n, n - 1)) % n
    shapes = [s for i, s in enumerate(q.shapes) if i != k]
    ivs = [v for i, v in enumerate(q.intervals) if i != k]
    b.output_seq(q.dtype, shapes, ivs)


@op("SplitToSequence")
def split_to_sequence(b: SpecBuilder, p: None) -> None:
    """``input`` split along ``axis``: into chunks of size 1 without ``split`` (the axis
    dropped with keepdims=0), of size ``split`` (a scalar; the last may be smaller), or of
    the lengths a 1-D ``split`` lists (summing to the axis's dim)."""
    has_split = b.optional("split")
    x = b.input("input", rank=Ints(1, 8))
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), default=0)
    ax = axis % x.rank
    d = x.shape[ax]
    if not has_split:
        keep = b.attr("keepdims", OneOf([1, 0]), default=1)
        chunk = list(x.shape)
        if not keep:
            del chunk[ax]
        else:
            chunk[ax] = 1
        shapes = [tuple(chunk)] * d
    else:
        itype = b.const_type("split")
        scalar = b.draw("split.rank", OneOf([0, 1])) == 0
        if scalar:
            k = b.draw("split", Ints(1, d))
            b.const("split", k, dtype=itype)
            sizes = [k] * (d // k) + ([d % k] if d % k else [])
        else:
            m = b.draw("split.count", Ints(1, min(d, MAX_LENGTH)))
            sizes, left = [], d
            for i in range(m - 1):
                s = b.draw(f"split[{i}]", Ints(1, left - (m - 1 - i)))
                sizes.append(s)
                left -= s
            sizes.append(left)
            b.const("split", sizes, dtype=itype)
        shapes = [tuple(s if i == ax else e for i, e in enumerate(x.shape)) for s in sizes]
    b.output_seq(x.dtype, shapes, [x.interval] * len(shapes))


@op("ConcatFromSequence")
def concat_from_sequence(b: SpecBuilder, p: None) -> None:
    """The elements concatenated along ``axis`` (they agree but along it), or stacked
    along a new axis at ``axis`` in [-r-1, r] with new_axis=1 (they share one shape)."""
    q = b.input_seq("input_sequence", length=Ints(1, MAX_LENGTH), shapes=CONCAT)
    r = len(q.shapes[0])
    if r == 0:  # scalars only stack
        b.set_attr("new_axis", 1)
        new_axis = 1
    elif same_shape(q):
        new_axis = b.attr("new_axis", OneOf([0, 1]), default=0)
    else:
        new_axis = 0
    shape = list(q.shapes[0])
    if new_axis:
        axis = b.attr("axis", Ints(-r - 1, r))
        shape.insert(axis % (r + 1), q.length)
    else:
        axes = concat_axes(q)
        axis = b.attr("axis", OneOf(axes + [a - r for a in axes]))
        shape[axis % r] = sum(s[axis % r] for s in q.shapes)
    b.output(shape, dtype=q.dtype, interval=hull(q.intervals))


@op("Optional", since=15)
def optional(b: SpecBuilder, p: None) -> None:
    """An optional holding ``input`` (a tensor or a sequence), or, without it, an empty
    optional of the type ``type`` names."""
    if b.optional("input", p=0.75):
        if b.draw("input.kind", OneOf(["tensor", "sequence"])) == "tensor":
            elem: Tensor | Sequence = b.input("input")
        else:
            elem = b.input_seq("input")
        b.output_optional(elem, present=True)
        return
    d = b.draw("type.elem_type", OneOf(b.types("V")))
    if b.draw("type.kind", OneOf(["tensor", "sequence"])) == "tensor":
        rank = b.draw("type.rank", Ints(0, min(2, b.max_rank)))
        shape = tuple(b.draw(f"type.shape[{i}]", Ints(1, b.max_dim)) for i in range(rank))
        elem = Tensor("", d, shape, Interval(0, 0), "none")
    else:
        elem = Sequence("", d, (), (), "none")
    b.set_attr("type", type_proto(elem))
    b.output_optional(elem, present=False)


def _optional_or_plain(b: SpecBuilder, present: bool | None) -> tuple[bool, Tensor | Sequence]:
    """The input of OptionalHasElement/OptionalGetElement: an optional, or (from version 18,
    which also takes them) a plain tensor or sequence, which always holds a value."""
    kind = "optional"
    if b.version >= 18:
        kind = b.draw("input.kind", OneOf(["optional", "tensor", "sequence"]))
    if kind == "tensor":
        return True, b.input("input")
    if kind == "sequence":
        return True, b.input_seq("input")
    o = b.input_optional("input", present=present)
    return o.present, o.elem


@op("OptionalHasElement", since=15)
def optional_has_element(b: SpecBuilder, p: None) -> None:
    """Whether the optional holds a value (bool scalar); from opset 18 the input may be
    left out (false) or be a tensor or a sequence (true)."""
    present = False
    if b.version < 18 or b.optional("input", p=0.9):
        present = _optional_or_plain(b, None)[0]
    b.output((), dtype=dt.BOOL, interval=Interval(float(present), float(present)))


@op("OptionalGetElement", since=15)
def optional_get_element(b: SpecBuilder, p: None) -> None:
    """The value an optional holds (a tensor or a sequence; from opset 18 a tensor or a
    sequence itself); only optionals that hold one are drawn (ONNX Runtime fails on an
    empty one)."""
    _, e = _optional_or_plain(b, True)
    if isinstance(e, Sequence):
        b.output_seq(e.dtype, e.shapes, e.intervals)
    else:
        b.output(e.shape, dtype=e.dtype, interval=e.interval)


# SequenceMap's body: a chain of elementwise ops whose output interval is a function of the
# input's alone, so every element's interval follows. A body from the solver over the outer
# scope (as If/Loop/Scan bodies) is the plan; this one already exercises the op's lowering.
_BODY_OPS: dict[str, Callable[[Interval], Interval]] = {
    "Identity": lambda iv: iv,
    "Neg": lambda iv: -iv,
    "Abs": lambda iv: iv.abs(),
    "Relu": lambda iv: Interval(max(iv.lo, 0), max(iv.hi, 0)),
}


def _body_ops(b: SpecBuilder, dtype: int, ivs: list[Interval]) -> list[str]:
    """Body ops ONNX Runtime runs on ``dtype`` whose outputs stay inside its bound."""
    lo, hi = dt.value_range(dtype)
    out = []
    for name, f in _BODY_OPS.items():
        version = onnx.defs.get_schema(name, b.opset).since_version
        kernels = dt.ort_kernels(name, version, b.opset) or []
        if not any(dtype in ts for k in kernels for ts in k.values()):
            continue
        if all(f(iv).within(lo, hi) for iv in ivs):
            out.append(name)
    return out


@op("SequenceMap", since=17)
def sequence_map(b: SpecBuilder, p: None) -> None:
    """``body`` applied to each element: here a chain of one or two elementwise ops
    (Identity, Neg, Abs, Relu), no additional inputs; the sequence may be empty."""
    q = b.input_seq("input_sequence")
    ivs = list(q.intervals)
    x = f"{q.name}_elem"
    nodes, prev = [], x
    for i in range(b.draw("body.count", Ints(1, 2))):
        kind = b.draw(f"body.op[{i}]", OneOf(_body_ops(b, q.dtype, ivs)))
        out = f"{x}{i}"
        nodes.append(onnx.helper.make_node(kind, [prev], [out]))
        ivs = [_BODY_OPS[kind](iv) for iv in ivs]
        prev = out
    body = onnx.helper.make_graph(
        nodes,
        f"{q.name}_body",
        [onnx.helper.make_tensor_value_info(x, q.dtype, None)],
        [onnx.helper.make_tensor_value_info(prev, q.dtype, None)],
    )
    b.set_attr("body", body)
    b.output_seq(q.dtype, q.shapes, ivs)
