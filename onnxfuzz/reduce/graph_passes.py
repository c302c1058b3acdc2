"""Graph reduction passes for any ONNX model (ours or a user's; no recorded choices needed).

- the node the failure's message names, alone (``onnxfuzz.reduce.suspects``), first;
- cut outputs: keep one graph output (then each one fewer), dropping what only fed the rest;
- bypass a node: wire a tensor of the same type and shape that exists earlier in its place;
- replace a node by a new graph input carrying the reference's values of its output (what
  the node computed, so the failure downstream usually survives), or fold it to a constant;
- simplify input values: zeros, then ones, then each value's sign;
- control flow (``onnxfuzz.reduce.control``): inline an If branch, replace a Loop by its
  body run once, shrink a body; pruning also drops an If's, Loop's or Scan's outputs that
  nothing reads (and the body nodes only they needed);
- drop what a body computes for nothing: kept until then, since a backend that converts
  every node may fail on one of them (all at once, then each).

Subgraphs read outer tensors by name: every pass counts those reads as uses (``reads``),
so pruning keeps what a body needs and rewiring renames inside bodies too.
Every candidate is checked (checker + strict shape inference) before it is tried, and a
failing one is kept only if no node reads values its spec does not allow where the
model the reduction started from had none (``onnxfuzz.reduce.domains``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from onnxfuzz.generate.corpus.validate import check_static
from onnxfuzz.judge.localize import has_static_shape, inferred_types, single_node
from onnxfuzz.reduce import control
from onnxfuzz.reduce.control import prune_nodes, reads, rename_reads
from onnxfuzz.reduce.domains import Fault, value_faults
from onnxfuzz.reduce.measure import Size, size_of, value_bytes
from onnxfuzz.reduce.passes import Pass, fixed_point
from onnxfuzz.reduce.suspects import named_nodes


@dataclass(frozen=True)
class State:
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    # Tensors body nodes make for nothing, which pruning keeps: TVM converts every node,
    # and a crash in one a body does not need vanished with the first prune, leaving
    # the reduction nothing it could keep (a 7-node If filed as "1 node").
    unneeded: frozenset[str] = frozenset()

    @property
    def size(self) -> Size:
        return size_of(self.model, self.inputs)


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    return m


def prune(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], keep: frozenset[str] = frozenset()
) -> State:
    """Drop nodes no graph output needs (control-flow outputs nothing reads, and the body
    nodes only they needed, too; not the body nodes making ``keep``), then unused inputs,
    initializers and value_info."""
    g = model.graph
    prune_nodes(g)
    control.trim_unused(g)
    control.prune_bodies(g, keep)
    needed = prune_nodes(g)
    for field_ in (g.input, g.initializer):
        kept = [x for x in field_ if x.name in needed]
        del field_[:]
        field_.extend(kept)
    produced = {t for n in g.node for t in n.output}
    vis = [vi for vi in g.value_info if vi.name in produced and vi.name in needed]
    del g.value_info[:]
    g.value_info.extend(vis)
    names = {i.name for i in g.input}
    kept = keep & {t for ts in control.body_outputs(g) for t in ts} if keep else keep
    return State(model, {k: v for k, v in inputs.items() if k in names}, kept)


def _types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple[int, ...]]]:
    g = model.graph
    infos = [*g.input, *g.value_info, *g.output, *inferred_types(model)]
    out = {
        vi.name: (
            vi.type.tensor_type.elem_type,
            tuple(d.dim_value for d in vi.type.tensor_type.shape.dim),
        )
        for vi in infos
        if vi.type.HasField("tensor_type")  # a sequence is neither rewired nor made an output
    }
    out.update({i.name: (i.data_type, tuple(i.dims)) for i in g.initializer})
    return out


def cut_outputs(s: State) -> Iterator[State]:
    outs = [o.name for o in s.model.graph.output]
    if len(outs) < 2:
        return
    for keep in ([o] for o in outs):
        yield _keep_outputs(s, keep)
    for drop in outs:
        yield _keep_outputs(s, [o for o in outs if o != drop])


def _keep_outputs(s: State, keep: list[str]) -> State:
    m = _copy(s.model)
    kept = [o for o in m.graph.output if o.name in keep]
    dropped = [o for o in m.graph.output if o.name not in keep]
    del m.graph.output[:]
    m.graph.output.extend(kept)
    # A dropped output a node still reads stays an intermediate: its type moves to
    # value_info (prune drops it where nothing needs it).
    m.graph.value_info.extend(dropped)
    return prune(m, s.inputs, s.unneeded)


def cut_at_tensors(s: State) -> Iterator[State]:
    """Each tensor a node makes, alone as the graph's output (what only the rest needed
    goes), the fewest nodes first: a hang's first pass. The message of a hang names no node
    (``isolate-named`` has none to try), and every candidate that still hangs costs the
    per-candidate limit while one that does not is cheap: tried smallest first, the
    candidates without the hanging node end quickly and the first one kept is the smallest
    cut that holds it. The other passes reach no tensor behind a sequence: a Resize hang
    read by SequenceConstruct -> SequenceLength kept all three, where drop-sink needs a
    tensor input and bypass-node a tensor of SequenceLength's type (audit 16, D4). Graph
    outputs stay tensors."""
    g = s.model.graph
    infos = {vi.name: vi for vi in (*g.value_info, *g.output) if vi.type.HasField("tensor_type")}
    outs = [o.name for o in g.output]
    producer: dict[str, int] = {}
    needs: list[frozenset[int]] = []  # the nodes each node needs, itself included
    cuts = []
    for k, node in enumerate(g.node):
        upstream = {k}
        for t in reads(node):
            if t in producer:
                upstream |= needs[producer[t]]
        needs.append(frozenset(upstream))
        for t in node.output:
            if t:
                producer[t] = k
                if t in infos and outs != [t]:
                    cuts.append((len(upstream), k, t))
    for _, _, t in sorted(cuts):
        m = _copy(s.model)
        mg = m.graph
        vi = onnx.ValueInfoProto()
        vi.CopyFrom(infos[t])
        # the outputs dropped stay intermediates where a node still reads them (prune
        # drops what nothing needs)
        kept = [x for x in mg.value_info if x.name != t]
        kept += [o for o in mg.output if o.name != t]
        del mg.value_info[:]
        mg.value_info.extend(kept)
        del mg.output[:]
        mg.output.append(vi)
        yield prune(m, s.inputs, s.unneeded)


def _typed_by_values(s: State, vals: dict[str, np.ndarray] | None) -> State | None:
    """``s`` with each graph node output that has no static type declared typed by the
    reference's value of it (its element type and shape); None where none is added."""
    if not vals:
        return None
    g = s.model.graph
    declared = {vi.name: vi for vi in (*g.input, *g.value_info, *g.output)}
    outputs = {o.name for o in g.output}
    added = {}
    for node in g.node:
        for t in node.output:
            v = vals.get(t)
            if not t or t in outputs or not isinstance(v, np.ndarray) or v.dtype.kind == "O":
                continue
            if t in declared and has_static_shape(declared[t]):
                continue
            try:
                elem = onnx.helper.np_dtype_to_tensor_dtype(v.dtype)
            except (KeyError, TypeError, ValueError):
                continue
            added[t] = onnx.helper.make_tensor_value_info(t, elem, list(v.shape))
    if not added:
        return None
    m = _copy(s.model)
    kept = [vi for vi in m.graph.value_info if vi.name not in added]
    del m.graph.value_info[:]
    m.graph.value_info.extend([*kept, *added.values()])
    return State(m, s.inputs, s.unneeded)


def bypass_nodes(s: State) -> Iterator[State]:
    """Replace a node's output by an earlier tensor of the same type and shape."""
    g = s.model.graph
    types = _types(s.model)
    available = [i.name for i in g.input] + [i.name for i in g.initializer]
    for k, node in enumerate(g.node):
        for out in node.output:
            want = types.get(out)
            for cand in available:
                if cand != out and types.get(cand) == want:
                    yield _rewire(s, k, out, cand)
        available += list(node.output)


def drop_sinks(s: State) -> Iterator[State]:
    """Remove a node only graph outputs read (a Concat or Reshape at the end of the
    failing path), its inputs that nodes feed becoming the outputs: the failure may be
    upstream of it, where no tensor of its type and shape is. (A graph input made an output
    would only echo itself, and the larger output count would keep the sink.)"""
    g = s.model.graph
    read = {t for n in g.node for t in reads(n)}
    types = _types(s.model)
    feeds = {t for n in g.node for t in n.output}
    for k, node in enumerate(g.node):
        if any(t in read for t in node.output):
            continue
        new = [t for t in dict.fromkeys(node.input) if t in feeds and t in types]
        if not new:
            continue
        m = _copy(s.model)
        mg = m.graph
        kept = [o for o in mg.output if o.name not in node.output]
        have = {o.name for o in kept}
        kept += [onnx.helper.make_tensor_value_info(t, *types[t]) for t in new if t not in have]
        del mg.output[:]
        mg.output.extend(kept)
        vis = [vi for vi in mg.value_info if vi.name not in new]  # outputs now
        del mg.value_info[:]
        mg.value_info.extend(vis)
        del mg.node[k]
        yield prune(m, s.inputs, s.unneeded)


def _rewire(s: State, k: int, old: str, new: str) -> State:
    m = _copy(s.model)
    g = m.graph
    for node in g.node[k + 1 :]:
        rename_reads(node, old, new)
    for o in g.output:
        if o.name == old:
            o.name = new  # an output can be renamed to a tensor it now aliases
    if sum(1 for o in g.output if o.name == new) > 1:
        kept = list({o.name: o for o in g.output}.values())
        del g.output[:]
        g.output.extend(kept)
    return prune(m, s.inputs, s.unneeded)


def isolate_named(
    values: Callable[[State], dict[str, np.ndarray] | None], message: Callable[[State], str]
) -> Callable[[State], Iterator[State]]:
    """The node the failure's message names (``reduce.suspects``) alone: its inputs that
    other nodes computed become graph inputs holding the reference's values there, its
    initializers stay, its outputs are the graph's."""

    def candidates(s: State) -> Iterator[State]:
        named = [
            k
            for k in named_nodes(s.model, message(s))
            if not any(
                a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                for a in s.model.graph.node[k].attribute
            )  # a body reads outer names
        ]
        vals = values(s) if named else None
        if vals is None:
            return
        for k in named:
            one = single_node(s.model, s.model.graph.node[k])
            if one is None:
                continue
            feeds = {i.name: np.asarray(vals[i.name]) for i in one.graph.input if i.name in vals}
            if len(feeds) != len(one.graph.input) or not one.graph.output:
                continue
            m = _copy(s.model)  # its opsets, IR version and metadata
            name = m.graph.name
            m.graph.CopyFrom(one.graph)
            m.graph.name = name
            yield prune(m, feeds, s.unneeded)

    return candidates


def replace_nodes(
    values: Callable[[State], dict[str, np.ndarray] | None], as_constant: bool
) -> Callable[[State], Iterator[State]]:
    """A node's outputs become new graph inputs (or initializers) holding the values the
    reference computed for them: the node goes, and whatever only fed it."""

    def candidates(s: State) -> Iterator[State]:
        vals = values(s)
        if vals is None:
            return
        g0 = s.model.graph
        nodes = list(g0.node)
        infos = {vi.name: vi for vi in list(g0.value_info) + list(g0.output)}
        # an output nothing reads (TopK's indices, often) just goes with its node
        used = {t for n in nodes for t in reads(n)} | {o.name for o in g0.output}
        structural = set() if as_constant else _structural(nodes)
        for k in reversed(range(len(nodes))):
            node = nodes[k]
            outs = [t for t in node.output if t in used]
            if not all(t in vals and t in infos for t in outs):
                continue
            if outs and set(outs) <= structural:
                continue
            m = _copy(s.model)
            g = m.graph
            del g.node[k]
            feeds = dict(s.inputs)
            for t in outs:
                if as_constant:
                    g.initializer.append(numpy_helper.from_array(np.asarray(vals[t]), t))
                else:
                    vi = onnx.ValueInfoProto()
                    vi.CopyFrom(infos[t])
                    g.input.append(vi)
                    feeds[t] = np.asarray(vals[t])
            vis = [vi for vi in g.value_info if vi.name not in node.output]
            del g.value_info[:]
            g.value_info.extend(vis)
            yield prune(m, feeds, s.unneeded)

    return candidates


def _structural(nodes: list[onnx.NodeProto]) -> set[str]:
    """What a Loop takes as its trip count and condition, and an If as its condition: as a
    graph input it is no constant, and the loop can no longer be unrolled nor the branch
    taken known (a Loop around a wrong Slice kept the Loop, its trip count made an input,
    where unrolled it is the Slice alone)."""
    taken = {"Loop": 2, "If": 1}
    return {t for n in nodes for t in n.input[: taken.get(n.op_type, 0)] if t}


def _fills(v: np.ndarray) -> tuple[Any, Any]:
    """The simplest value, then the next simplest, of ``v``'s elements: 0 and 1, or for a
    string tensor (an object array of str or bytes) the empty string and "a": a 0 in a
    string tensor is a model no runtime takes, nor ``numpy_helper.from_array``."""
    if v.dtype.kind != "O":
        return 0, 1
    if v.size and isinstance(v.flat[0], bytes):
        return b"", b"a"
    return "", "a"


def _pruned(s: State, model: onnx.ModelProto) -> State:
    return prune(model, s.inputs, s.unneeded)


def drop_unneeded(s: State) -> Iterator[State]:
    """The body nodes no output needs dropped: all of them, then each in turn (what only
    fed it goes with it)."""
    if not s.unneeded:
        return
    yield _pruned_keeping(s, frozenset())
    made = [ts for ts in control.body_outputs(s.model.graph) if s.unneeded.intersection(ts)]
    if len(made) > 1:
        for ts in made:
            yield _pruned_keeping(s, s.unneeded.difference(ts))


def _pruned_keeping(s: State, keep: frozenset[str]) -> State:
    return prune(_copy(s.model), s.inputs, keep)


def simplify_values(s: State) -> Iterator[State]:
    """Zeros, then ones, then each value's sign (-1, 0, 1): a bug that needs a negative
    input (an Abs, a Floor, a Relu that is wrong only there) keeps it, in the fewest
    distinct values."""
    for k in (0, 1):
        for name, v in s.inputs.items():
            fill = _fills(v)[k]
            if v.size and not (v == fill).all():
                yield State(
                    s.model, {**s.inputs, name: np.full(v.shape, fill, v.dtype)}, s.unneeded
                )
    for name, v in s.inputs.items():
        if v.size and v.dtype.kind in "iuf":
            signs = np.sign(v).astype(v.dtype)
            if not np.array_equal(signs, v, equal_nan=v.dtype.kind == "f"):
                yield State(s.model, {**s.inputs, name: signs}, s.unneeded)


def reduce_graph(
    state: State,
    still_fails: Callable[[State], bool],
    reference_values: Callable[[State], dict[str, np.ndarray] | None],
    deadline: float,
    message: Callable[[State], str] = lambda s: "",
    on_kept: Callable[[State], None] | None = None,
    hang: bool = False,
) -> tuple[State, list[Pass], bool]:
    """``state`` reduced by the passes below to their fixed point or ``deadline``;
    ``message(state)``: what the failure of a state that still fails said (the node it
    names is tried alone first); ``on_kept``: each smaller state that still fails;
    ``hang``: the failure is a hang, whose candidates are first cut at each tensor, fewest
    nodes first (``cut_at_tensors``); a crash's or a wrong value's passes are as before."""
    cache: dict[bytes, dict[str, np.ndarray] | None] = {}

    def values(s: State) -> dict[str, np.ndarray] | None:
        # by model and inputs: simplify-values keeps the model and changes the inputs
        key = s.model.SerializeToString() + b"".join(
            k.encode() + str(v.dtype).encode() + value_bytes(v) for k, v in sorted(s.inputs.items())
        )
        if key not in cache:
            cache[key] = reference_values(s)
        return cache[key]

    def faults(s: State) -> frozenset[Fault] | None:
        vals = values(s)
        return None if vals is None else value_faults(s.model, vals)

    # A node output the model gives no type (a model from elsewhere) is typed once, here,
    # so that every pass can expose, replace or bypass it.
    typed = inferred_types(state.model)
    if typed:
        model = _copy(state.model)
        model.graph.value_info.extend(typed)
        state = State(model, state.inputs, state.unneeded)
    state = State(state.model, state.inputs, control.unneeded_in_bodies(state.model.graph))
    # Shapes computed at run time (an exporter's Shape -> Gather -> Concat -> Reshape) leave
    # shape inference no static type, and without one a node is neither isolated, replaced
    # nor bypassed: a 161-node encoder kept 17 nodes where its static twin kept 1. The
    # reference's values type them, where the model so typed still fails the same way.
    valued = _typed_by_values(state, values(state))
    if valued is not None and still_fails(valued):
        state = valued
    start = faults(state)  # None: the reference gives no values to judge by

    def keep(old: State, new: State) -> State | None:
        if not new.size.simpler_than(old.size):
            return None
        if check_static(new.model):
            return None
        if not still_fails(new):
            return None
        if start is not None:
            found = faults(new)
            if found is None:
                # No backend runs it, where one ran the model the reduction started
                # from: an index past its axis, a shape that does not hold at run time.
                # The target's failure in the same words proves nothing then (an
                # unchecked kernel faults on any index out of range).
                return None
            if found - start:
                return None  # it fails, but on values its nodes' specs do not allow
        return new

    passes: list[Pass[State]] = [Pass("cut-at-tensor", cut_at_tensors)] if hang else []
    passes += [
        Pass("isolate-named", isolate_named(values, message)),
        Pass("drop-unneeded", drop_unneeded),
        Pass("cut-outputs", cut_outputs),
        Pass("bypass-node", bypass_nodes),
        Pass("drop-sink", drop_sinks),
        Pass("node-to-input", replace_nodes(values, as_constant=False)),
        Pass("node-to-constant", replace_nodes(values, as_constant=True)),
        Pass("simplify-values", simplify_values),
        Pass("inline-if", lambda s: (_pruned(s, m) for m in control.inline_ifs(s.model))),
        Pass("unroll-loop", lambda s: (_pruned(s, m) for m in control.unroll_loops(s.model))),
        Pass(
            "shrink-body",
            lambda s: (_pruned(s, m) for m in control.shrink_bodies(s.model, s.unneeded)),
        ),
    ]
    final, complete = fixed_point(state, passes, keep, deadline, on_kept)
    return final, passes, complete
