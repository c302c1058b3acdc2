"""Tell excess precision from a bug in float16 models.

CPU backends often compute float16 ops in float32 and keep the intermediate in float32
between ops (ONNX Runtime inserts Casts around kernels it lacks in float16 and removes the
Cast pairs between them: ORT #22866), while others round every op's output to float16. Both
are legitimate evaluations of the model, and they differ by more than any tolerance after
an amplifying op (``Sin`` of a value near 50, a comparison near a tie). Even exposing every
intermediate does not show it: the rounded copy goes to the graph output, the float32 one
to the next op.

A second check covers one op computed with float16 internals: a float16 GridSample's
sampling position (x = (g + 1) / 2 * (W - 1), rounded to float16) is off by a few ulps, so
its output is off by that times the image's gradient, beyond a tolerance fixed in advance.
``within_rounding`` measures the op's sensitivity instead: the reference runs the diverging
node on its own inputs nudged by ``NUDGE_ULPS`` float16 ulps (a few random draws); where
the two backends differ by no more than those nudges move the output (plus the tolerance),
the difference is float16 rounding inside the op, not a bug. A wrong kernel is off by far
more than a few ulps of its inputs can explain, except where the op is ill-conditioned.

The whole-model check (applied by ``onnxfuzz.judge.checks``) runs the model *upcast*
(every float16 tensor float32) on the reference backend: the float32 evaluation, rounded
to float16 at the outputs. A mismatch is excess precision, not a bug, when

- the backend's outputs match the float32 evaluation (it computes in float32), or
- the reference's outputs match it while the backend is consistent with the reference's
  own materialized values: its outputs do not change when every intermediate is exposed,
  and with every intermediate exposed the two backends agree everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.elements import outside

_HALF = TensorProto.FLOAT16
NUDGE_ULPS = 4  # how far float16 inputs are nudged: internal roundings are a few ulps
NUDGE_DRAWS = 3
_TYPE_ATTRS = ("to", "dtype")  # attributes that name an element type (Cast, EyeLike, ...)


def subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """A node's own subgraphs (If branches, Loop and Scan bodies)."""
    subs = [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
    return subs + [
        g for a in node.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs
    ]


def graphs(g: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``g`` and every subgraph inside it, depth first."""
    yield g
    for node in g.node:
        for sub in subgraphs(node):
            yield from graphs(sub)


def tensor_types(tp: onnx.TypeProto) -> Iterator[onnx.TypeProto.Tensor]:
    """The tensor types a value's type holds: a tensor's own; a sequence's or optional's
    element's; a map's value's."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        yield tp.tensor_type
    elif which == "sequence_type":
        yield from tensor_types(tp.sequence_type.elem_type)
    elif which == "optional_type":
        yield from tensor_types(tp.optional_type.elem_type)
    elif which == "map_type":
        yield from tensor_types(tp.map_type.value_type)


def _value_infos(g: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    return list(g.input) + list(g.value_info) + list(g.output)


def has_half(model: onnx.ModelProto) -> bool:
    """Whether float16 appears anywhere: a tensor, a sequence's or optional's element, an
    initializer, a constant or a type argument, in the graph or any subgraph (a Loop body
    that computes in float16 rounds its float32 or float64 results there)."""
    for g in graphs(model.graph):
        if any(tt.elem_type == _HALF for vi in _value_infos(g) for tt in tensor_types(vi.type)):
            return True
        if any(i.data_type == _HALF for i in g.initializer):
            return True
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.INT and a.name in _TYPE_ATTRS and a.i == _HALF:
                    return True
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == _HALF:
                    return True
    return False


def _upcast_tensor(t: TensorProto) -> TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)


def upcast(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float16 tensor, attribute and type argument made float32, in
    the graph and every subgraph, sequence and optional element types included (a
    sequence of float16 left as it was makes the upcast model invalid)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for g in graphs(m.graph):
        for vi in _value_infos(g):
            for tt in tensor_types(vi.type):
                if tt.elem_type == _HALF:
                    tt.elem_type = TensorProto.FLOAT
        for i, init in enumerate(g.initializer):
            if init.data_type == _HALF:
                g.initializer[i].CopyFrom(_upcast_tensor(init))
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.INT and a.name in _TYPE_ATTRS and a.i == _HALF:
                    a.i = TensorProto.FLOAT
                elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == _HALF:
                    a.t.CopyFrom(_upcast_tensor(a.t))
    return m


def float32_evaluation(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome],
) -> dict[str, np.ndarray] | None:
    """The reference backend's outputs of the upcast model, rounded back to float16 where
    the model's outputs are float16. None when the backend cannot run it."""
    feeds = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in inputs.items()}
    o = run_reference(upcast(model).SerializeToString(), feeds)
    if o.status != Status.OK or o.outputs is None:
        return None
    half = {vi.name for vi in model.graph.output if vi.type.tensor_type.elem_type == _HALF}
    return {
        k: v.astype(np.float16) if k in half and v.dtype == np.float32 else v
        for k, v in o.outputs.items()
    }


def within_rounding(
    node_model: onnx.ModelProto,
    node_inputs: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome],
    tolerance: Callable[[str], tuple[float, float] | None],
) -> str | None:
    """Why ``got`` differs from ``want`` on one node by no more than the node's outputs move
    when its float16 inputs move by NUDGE_ULPS ulps (see the module doc), or None.
    ``node_model``: the node alone (``localize.single_node``); ``tolerance(output)``: the
    (atol, rtol) each element has on its own (``oracle.tolerance`` unscaled), None for
    exact types."""
    half = [k for k, v in node_inputs.items() if v.dtype == np.float16 and v.size]
    names = [o.name for o in node_model.graph.output if o.name in want and o.name in got]
    if not half or not names:
        return None
    rng = np.random.default_rng(0)
    data = node_model.SerializeToString()

    def draws() -> Iterator[Outcome]:
        for _ in range(NUDGE_DRAWS):
            feeds = {k: _nudged(v, rng) if k in half else v for k, v in node_inputs.items()}
            yield run_reference(data, feeds)

    excused = _within_reach(draws(), names, want, got, tolerance)
    if excused is None:
        return None
    n, reach = excused
    return (
        f"each of the {n} elements outside its own tolerance (atol not scaled by the "
        f"tensor's largest magnitude) is within it widened by what nudging the node's "
        f"float16 inputs by {NUDGE_ULPS} ulps moves that element (up to {reach:.4g}): "
        "float16 rounding inside the op, not a bug"
    )


def within_constant_rounding(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome],
    tolerance: Callable[[str], tuple[float, float] | None],
) -> str | None:
    """Why ``got`` differs from ``want`` by no more than the model's outputs move when its
    float16 constants and inputs move by NUDGE_ULPS ulps, or None.

    An optimizer that folds float16 constants (BatchNormalization into Conv's weights and
    bias, a Mul into a MatMul) rounds the folded constants to float16 once more, and a
    fused kernel rounds its intermediates differently: a difference of that order that a
    later ill-conditioned op amplifies (Acosh just above 1) is beyond any fixed tolerance,
    and exposing the intermediates does not show it (the exposed model is not fused). The
    reference runs the model with its float16 leaves nudged (a few random draws); a wrong
    fusion is off by far more than rounding its constants can explain."""
    g = model.graph
    inits = [i for i, t in enumerate(g.initializer) if t.data_type == _HALF]
    consts = [
        (i, j)
        for i, n in enumerate(g.node)
        if n.op_type == "Constant"
        for j, a in enumerate(n.attribute)
        if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == _HALF
    ]
    half = [k for k, v in inputs.items() if v.dtype == np.float16 and v.size]
    names = [o.name for o in g.output if o.name in want and o.name in got]
    if not (inits or consts or half) or not names:
        return None
    rng = np.random.default_rng(0)

    def draws() -> Iterator[Outcome]:
        for _ in range(NUDGE_DRAWS):
            m = onnx.ModelProto()
            m.CopyFrom(model)
            for i in inits:
                t = m.graph.initializer[i]
                t.CopyFrom(numpy_helper.from_array(_nudged(numpy_helper.to_array(t), rng), t.name))
            for i, j in consts:
                a = m.graph.node[i].attribute[j]
                a.t.CopyFrom(numpy_helper.from_array(_nudged(numpy_helper.to_array(a.t), rng)))
            feeds = {k: _nudged(v, rng) if k in half else v for k, v in inputs.items()}
            yield run_reference(m.SerializeToString(), feeds)

    excused = _within_reach(draws(), names, want, got, tolerance)
    if excused is None:
        return None
    n, reach = excused
    return (
        f"each of the {n} output elements outside its own tolerance (atol not scaled by the "
        f"tensor's largest magnitude) is within it widened by what nudging the model's "
        f"float16 constants and inputs by {NUDGE_ULPS} ulps moves that element (up to "
        f"{reach:.4g}): a fused or folded computation rounds them differently, not a bug"
    )


def _nudged(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``a`` (float16) moved by NUDGE_ULPS ulps up or down, each element its own way."""
    x = a.astype(np.float32)
    step = np.spacing(np.abs(a)).astype(np.float32) * NUDGE_ULPS
    sign = rng.choice(np.array([-1.0, 1.0], np.float32), size=x.shape)
    return (x + sign * step).astype(np.float16)


def nudge_reach(
    draws: Iterable[Outcome], names: list[str], want: dict[str, np.ndarray]
) -> dict[str, np.ndarray] | None:
    """Per output in ``names``: the farthest, element by element, the nudged reference runs
    ``draws`` moved ``want`` (None as soon as a draw fails or changes an output's shape)."""
    reach = {k: np.zeros(want[k].shape) for k in names}
    for o in draws:
        if o.status != Status.OK or o.outputs is None:
            return None
        for k in names:
            moved = o.outputs.get(k)
            if moved is None or moved.shape != want[k].shape:
                return None
            delta = np.abs(moved.astype(np.float64) - want[k].astype(np.float64))
            reach[k] = np.maximum(reach[k], np.nan_to_num(delta, nan=np.inf))
    return reach


def _within_reach(
    draws: Iterable[Outcome],
    names: list[str],
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    tolerance: Callable[[str], tuple[float, float] | None],
) -> tuple[int, float] | None:
    """Whether every element of ``got`` lies within its own tolerance of ``want``
    (``tolerance(output)``, not scaled by the tensor's largest magnitude) widened by
    ``rounding_room``, with the reach the nudged reference runs ``draws`` moved that
    element: the number of elements outside their own tolerance so excused, and the
    largest reach among them. None where an element is beyond that, where none is outside
    its own tolerance (nothing here for rounding to explain), or where a draw fails or
    changes an output's shape.

    The float16 tolerance the oracle compares outputs by scales its atol with the
    tensor's largest magnitude; added to a tiny reach, it called a LeakyRelu off by 100 %
    on its small elements "float16 rounding inside the op" because the same tensor held
    values near 5 (audit 16, D3). Each element is now held to its own size."""
    reach = nudge_reach(draws, names, want)
    if reach is None:
        return None
    n, most = 0, 0.0
    for k in names:
        w, g = want[k].astype(np.float64), got[k].astype(np.float64)
        if w.shape != g.shape:
            return None
        tol = tolerance(k)
        atol, rtol = tol if tol is not None else (0.0, 0.0)
        off = outside(w, g, (atol, rtol))
        if not off.any():
            continue
        with np.errstate(invalid="ignore", over="ignore"):
            fits = np.abs(g - w) <= atol + rounding_room(want[k], rtol, reach[k])
        if not fits[off].all():
            return None
        n += int(off.sum())
        most = max(most, float(reach[k][off].max()))
    return (n, most) if n else None


def rounding_room(want: np.ndarray, rtol: float, reach: np.ndarray | float) -> np.ndarray:
    """How far, element by element, rounding can move ``want``: ``rtol`` of the element,
    ``reach`` (what nudging the op's float16 inputs by NUDGE_ULPS ulps moves it: the op's
    own amplification of its inputs' rounding, a cancellation's or a small divisor's
    included) and NUDGE_ULPS ulps of the element in its own type (its own rounding). Never
    another element's size: a 2x error on an element is beyond it unless the op is that
    sensitive there."""
    w = np.abs(want.astype(np.float64))
    ulp = np.spacing(np.abs(want)).astype(np.float64) if want.dtype.kind == "f" else 0.0
    return rtol * w + reach + NUDGE_ULPS * ulp


def beyond_rounding(
    node_model: onnx.ModelProto | None,
    node_inputs: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome] | None,
    tolerance: Callable[[str], tuple[float, float] | None],
) -> bool:
    """Whether an element of a float16 (or bfloat16) output of one node differs between
    ``want`` and ``got`` by more than its own tolerance (``tolerance(output)``: the
    dtype's, *not* scaled by the tensor's largest magnitude) plus ``rounding_room``, the
    reach measured by running ``node_model`` (the node alone) on the reference with
    ``node_inputs`` nudged (no runs where every element is inside its own tolerance).

    The oracle's float16 atol scales with the tensor's largest magnitude (accumulation
    error scales with the magnitudes summed): an element off by 100 % "agreed" when the
    tensor also held values near 7, and localization walked past the wrong LeakyRelu to
    blame, and excuse, the Div after it (audit 16, D3). An accumulation's legitimate
    error on a cancelled element is within the nudge's reach, which is measured on that
    element. Without a node model or runner, the reach is 0."""
    names = [
        k
        for k in want
        if k in got
        and np.asarray(want[k]).dtype.name in ("float16", "bfloat16")
        and np.shape(want[k]) == np.shape(got[k])
    ]
    suspect: dict[str, np.ndarray] = {}
    for k in names:
        tol = tolerance(k)
        if tol is None:
            continue
        w, g = np.asarray(want[k]), np.asarray(got[k])
        off = outside(w.astype(np.float64), g.astype(np.float64), tol) & ~(
            np.isnan(w.astype(np.float64)) & np.isnan(g.astype(np.float64))
        )
        if off.any():
            suspect[k] = off
    if not suspect:
        return False
    half = [k for k, v in node_inputs.items() if v.dtype == np.float16 and v.size]
    reach: dict[str, np.ndarray] | None = None
    if node_model is not None and run_reference is not None and half:
        rng = np.random.default_rng(0)
        data = node_model.SerializeToString()
        outs = [o.name for o in node_model.graph.output if o.name in suspect]

        def draws() -> Iterator[Outcome]:
            for _ in range(NUDGE_DRAWS):
                feeds = {k: _nudged(v, rng) if k in half else v for k, v in node_inputs.items()}
                yield run_reference(data, feeds)

        reach = nudge_reach(draws(), outs, {k: np.asarray(want[k]) for k in outs})
        if reach is None:  # the node alone does not run nudged: no gross error shown
            return False
    for k, off in suspect.items():
        w, g = np.asarray(want[k]), np.asarray(got[k])
        atol, rtol = tolerance(k) or (0.0, 0.0)
        r = reach.get(k, 0.0) if reach is not None else 0.0
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g.astype(np.float64) - w.astype(np.float64))
            gross = ~(err <= atol + rounding_room(w, rtol, r))
        if (gross & off).any():
            return True
    return False
