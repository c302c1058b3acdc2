"""Graph surgery on control flow: subgraphs (If branches, Loop and Scan bodies) for the
reduction passes in ``graph_passes``.

A subgraph reads the enclosing graphs' tensors by name (ONNX's outer-scope references),
so a node's uses are its inputs *and* what its subgraphs read (``reads``). The passes:

- ``inline_ifs``: an If replaced by one branch's nodes (the then-branch first, then the
  else-branch: whichever the failing input takes survives the reproducer);
- ``unroll_loops``: a Loop with a constant trip count replaced by its body run once (the
  iteration number 0, the loop's condition and initial values as the body's inputs), when
  that keeps every output's shape: no scan outputs, or a trip count of one (a scan output
  then gets its leading axis back with Unsqueeze);
- ``trim_unused`` (part of every prune): an output of an If (both branches), or a scan
  output of a Loop or Scan, that nothing reads, dropped from the node and its body;
- ``shrink_bodies``: a body node bypassed (its output replaced by a tensor of the same
  type and shape the body already has: a formal input, an earlier body tensor, a graph
  input or initializer), what only fed it pruned (``prune_bodies``).

Each yields whole candidate models; the caller prunes and checks them (checker, strict
shape inference) and keeps those that still fail.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz.generate.corpus.node_views import defined as _defined
from onnxfuzz.generate.corpus.node_views import node_subgraphs as subgraphs
from onnxfuzz.generate.corpus.node_views import reads
from onnxfuzz.judge.localize import inferred_types

_G, _GS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS
_STRING = onnx.TensorProto.STRING


def rename_reads(node: onnx.NodeProto, old: str, new: str) -> None:
    """``node`` (and its subgraphs) read ``new`` where they read ``old``. Names are unique
    across a model's graphs (ONNX forbids shadowing), so no scope check is needed."""
    for i, t in enumerate(node.input):
        if t == old:
            node.input[i] = new
    for sub in subgraphs(node):
        if old in _defined(sub):
            continue
        for n in sub.node:
            rename_reads(n, old, new)
        for o in sub.output:
            if o.name == old:  # an outer tensor as the body's output
                o.name = new


def prune_bodies(g: onnx.GraphProto, keep: frozenset[str] = frozenset()) -> None:
    """Drop, in every subgraph of ``g`` (recursively), the nodes its outputs do not need,
    but those making a tensor of ``keep``, and the value_info of what is gone."""
    for node in g.node:
        for sub in subgraphs(node):
            _prune_graph(sub, keep)
            prune_bodies(sub, keep)


def _prune_graph(g: onnx.GraphProto, keep: frozenset[str] = frozenset()) -> None:
    prune_nodes(g, keep)
    if trim_unused(g):
        prune_nodes(g, keep)
    produced = {t for n in g.node for t in n.output}
    vis = [vi for vi in g.value_info if vi.name in produced]
    del g.value_info[:]
    g.value_info.extend(vis)


def prune_nodes(g: onnx.GraphProto, keep: frozenset[str] = frozenset()) -> set[str]:
    """Keep the nodes some graph output needs (reads from bodies count), and those making
    a tensor of ``keep``; returns the tensors they read."""
    live, needed = _live(g, keep)
    nodes = [g.node[k] for k in live]
    del g.node[:]
    g.node.extend(nodes)
    return needed


def _live(g: onnx.GraphProto, keep: frozenset[str]) -> tuple[list[int], set[str]]:
    """The indices of the nodes ``prune_nodes`` keeps, and the tensors they read."""
    needed = {o.name for o in g.output}
    live = []
    for k in reversed(range(len(g.node))):
        node = g.node[k]
        if any(t in needed or t in keep for t in node.output):
            live.append(k)
            needed.update(reads(node))
    live.reverse()
    return live, needed


def unneeded_in_bodies(g: onnx.GraphProto) -> frozenset[str]:
    """The outputs of subgraph nodes (at any depth) that their body's outputs do not need:
    a generated body computes some tensors for nothing, and a backend that converts
    every node may still fail on one (TVM's converters do), so the reduction keeps them
    until dropping them is tried (``graph_passes.drop_unneeded``)."""
    out: set[str] = set()
    for node in g.node:
        for sub in subgraphs(node):
            live = set(_live(sub, frozenset())[0])
            out.update(t for k, n in enumerate(sub.node) if k not in live for t in n.output if t)
            out |= unneeded_in_bodies(sub)
    return frozenset(out)


def body_outputs(g: onnx.GraphProto) -> list[tuple[str, ...]]:
    """What each node of ``g``'s subgraphs (at any depth) makes."""
    out: list[tuple[str, ...]] = []
    for node in g.node:
        for sub in subgraphs(node):
            out.extend(tuple(t for t in n.output if t) for n in sub.node)
            out.extend(body_outputs(sub))
    return out


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    return m


def _fresh(g: onnx.GraphProto, base: str, taken: set[str]) -> str:
    k = 0
    while f"{base}{k}" in taken:
        k += 1
    name = f"{base}{k}"
    taken.add(name)
    return name


def _all_names(g: onnx.GraphProto) -> set[str]:
    names = _defined(g) | {o.name for o in g.output}
    for n in g.node:
        for sub in subgraphs(n):
            names |= _all_names(sub)
    return names


def _splice(
    m: onnx.ModelProto,
    k: int,
    body: onnx.GraphProto,
    feeds: dict[str, str],
    results: list[tuple[str, str]],
) -> None:
    """Replace node ``k`` of ``m``'s graph by ``body``'s nodes: the body's inputs read
    ``feeds`` (formal -> outer name), and each (body output, outer name) of ``results``
    becomes that outer name."""
    g = m.graph
    taken = _all_names(g)
    nodes: list[onnx.NodeProto] = []
    made = {o for n in body.node for o in n.output if o}
    renamed: dict[str, str] = {}  # body output -> the outer name it becomes
    for b_out, outer in results:
        if b_out in made and b_out not in renamed:
            renamed[b_out] = outer
    for n in body.node:
        c = onnx.NodeProto()
        c.CopyFrom(n)
        for old, new in list(feeds.items()) + list(renamed.items()):
            rename_reads(c, old, new)
        for i, o in enumerate(c.output):
            if o in renamed:
                c.output[i] = renamed[o]
        nodes.append(c)
    for b_out, outer in results:
        if renamed.get(b_out) == outer:
            continue
        src = renamed.get(b_out) or feeds.get(b_out, b_out)  # a formal, an outer tensor
        nodes.append(
            helper.make_node("Identity", [src], [outer], name=_fresh(g, "reduce_identity", taken))
        )
    vis = {vi.name for vi in g.value_info} | {o.name for o in g.output}
    for vi in body.value_info:
        if vi.name not in renamed and vi.name not in vis:
            g.value_info.append(vi)
    for vi in body.output:  # body outputs read inside the body keep their type outside
        if vi.name in made and vi.name not in renamed and vi.name not in vis:
            g.value_info.append(vi)
    typed = {vi.name: vi for vi in body.output}
    for b_out, outer in results:  # each outer name typed (an earlier prune may have left
        if outer not in vis and b_out in typed:  # an output nothing read untyped)
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(typed[b_out])
            vi.name = outer
            g.value_info.append(vi)
            vis.add(outer)
    g.initializer.extend(body.initializer)
    rest = list(g.node)
    del g.node[:]
    g.node.extend(rest[:k] + nodes + rest[k + 1 :])
    _expose_unread(m, nodes)


def _expose_unread(m: onnx.ModelProto, spliced: list[onnx.NodeProto]) -> None:
    """The spliced body nodes' outputs nothing reads become graph outputs, typed by shape
    inference: a node a body computes for nothing still runs there (a converter or the
    reference evaluator may fail on it), and out of the body a prune would drop it (a
    generated model's top level keeps such outputs as graph outputs too)."""
    g = m.graph
    read = {t for n in g.node for t in reads(n)} | {o.name for o in g.output}
    unread = [o for n in spliced for o in n.output if o and o not in read]
    if not unread:
        return
    # an output inference cannot type stays unread (and a prune drops it); so does one it
    # gives an element type without a shape (a Loop's carried value: the checker wants a
    # graph output's shape field)
    typed = {vi.name: vi for vi in (*g.value_info, *inferred_types(m, static=False))}
    exposed = [
        typed[o]
        for o in unread
        if o in typed
        and typed[o].type.HasField("tensor_type")
        and typed[o].type.tensor_type.HasField("shape")
    ]
    g.output.extend(exposed)
    names = {vi.name for vi in exposed}
    kept = [vi for vi in g.value_info if vi.name not in names]  # outputs now
    del g.value_info[:]
    g.value_info.extend(kept)


def _attr(node: onnx.NodeProto, name: str) -> onnx.AttributeProto | None:
    return next((a for a in node.attribute if a.name == name), None)


def inline_ifs(model: onnx.ModelProto) -> Iterator[onnx.ModelProto]:
    for k, node in enumerate(model.graph.node):
        if node.op_type != "If":
            continue
        for branch in ("then_branch", "else_branch"):
            m = _copy(model)
            a = _attr(m.graph.node[k], branch)
            if a is None:
                continue
            body = onnx.GraphProto()
            body.CopyFrom(a.g)
            outs = list(m.graph.node[k].output)
            results = [(b.name, o) for b, o in zip(body.output, outs, strict=False) if o]
            _splice(m, k, body, {}, results)
            yield m


def _constant(model: onnx.ModelProto, name: str) -> np.ndarray | None:
    for t in model.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for n in model.graph.node:
        if n.op_type == "Constant" and name in n.output:
            a = _attr(n, "value")
            return numpy_helper.to_array(a.t) if a is not None else None
    return None


def unroll_loops(model: onnx.ModelProto) -> Iterator[onnx.ModelProto]:
    for k, node in enumerate(model.graph.node):
        if node.op_type != "Loop" or not node.input or not node.input[0]:
            continue
        trips = _constant(model, node.input[0])
        a = _attr(node, "body")
        if trips is None or trips.size != 1 or int(trips.reshape(())) < 1 or a is None:
            continue
        n_carried = len(node.input) - 2
        n_scan = len(a.g.output) - 1 - n_carried
        if n_scan and int(trips.reshape(())) != 1:
            # A scan output has M rows: one iteration changes its shape, which only a
            # graph output may do (nothing reads it). Then the trip count becomes 1 first.
            one = _one_trip(model, k, n_carried)
            if one is not None:
                yield one
            continue
        m = _copy(model)
        g = m.graph
        loop = g.node[k]
        body = onnx.GraphProto()
        body.CopyFrom(a.g)
        taken = _all_names(g)
        formals = [i.name for i in body.input]
        it = _fresh(g, "reduce_iter", taken)
        g.initializer.append(numpy_helper.from_array(np.array(0, dtype=np.int64), it))
        if len(loop.input) > 1 and loop.input[1]:
            cond = loop.input[1]
        else:
            cond = _fresh(g, "reduce_cond", taken)
            g.initializer.append(numpy_helper.from_array(np.array(True), cond))
        feeds = {formals[0]: it, formals[1]: cond}
        feeds.update({f: v for f, v in zip(formals[2:], loop.input[2:], strict=True)})
        outs = list(loop.output)
        results = [
            (b.name, o)
            for b, o in zip(body.output[1 : 1 + n_carried], outs[:n_carried], strict=True)
            if o
        ]
        unsqueeze = []
        for b, o in zip(body.output[1 + n_carried :], outs[n_carried:], strict=False):
            if not o:
                continue
            row = _fresh(g, "reduce_row", taken)
            results.append((b.name, row))
            unsqueeze.append((row, o))
            vi = onnx.ValueInfoProto()
            vi.CopyFrom(b)
            vi.name = row
            g.value_info.append(vi)  # typed: a pass may make it the graph's output
        del body.output[0]  # the condition: no longer needed
        _splice(m, k, body, feeds, results)
        if unsqueeze:
            axes = _fresh(g, "reduce_axes", taken)
            g.initializer.append(numpy_helper.from_array(np.array([0], dtype=np.int64), axes))
            rows = {row for row, _ in unsqueeze}
            at = max(i for i, n in enumerate(g.node) if rows.intersection(n.output)) + 1
            rest = list(g.node)
            new = [
                helper.make_node("Unsqueeze", [row, axes], [o], name=_fresh(g, "reduce_u", taken))
                for row, o in unsqueeze
            ]
            del g.node[:]
            g.node.extend(rest[:at] + new + rest[at:])
        yield m


def _one_trip(model: onnx.ModelProto, k: int, n_carried: int) -> onnx.ModelProto | None:
    """Loop ``k`` with a trip count of one, its scan outputs (graph outputs nothing
    reads) one row long; None when some node reads a scan output."""
    g = model.graph
    scans = [o for o in g.node[k].output[n_carried:] if o]
    read = {t for n in g.node for t in reads(n)}
    if read.intersection(scans):
        return None
    m = _copy(model)
    g = m.graph
    loop = g.node[k]
    one = _fresh(g, "reduce_trips", _all_names(g))
    g.initializer.append(numpy_helper.from_array(np.array(1, dtype=np.int64), one))
    loop.input[0] = one
    for vi in list(g.output) + list(g.value_info):
        if vi.name in scans and vi.type.tensor_type.shape.dim:
            vi.type.tensor_type.shape.dim[0].dim_value = 1
    return m


def trim_unused(g: onnx.GraphProto) -> bool:
    """Drop the outputs of If, Loop and Scan nodes of ``g`` that nothing reads (an If's
    from both branches, a Loop's or Scan's scan outputs from the body; a node keeps one
    output); returns whether any went."""
    used = {o.name for o in g.output} | {t for n in g.node for t in reads(n)}
    changed = False
    for n in g.node:
        if n.op_type not in ("If", "Loop", "Scan"):
            continue
        first = 0
        if n.op_type == "Loop":
            first = len(n.input) - 2  # loop-carried outputs stay
        elif n.op_type == "Scan":
            a = _attr(n, "num_scan_inputs")
            first = len(n.input) - (a.i if a is not None else 0)
        skip = 1 if n.op_type == "Loop" else 0  # a Loop body's first output is cond
        for j in reversed(range(first, len(n.output))):
            if n.output[j] in used or len(n.output) == 1:
                continue
            for sub in subgraphs(n):
                del sub.output[skip + j]
            if n.op_type == "Scan":
                for name in ("scan_output_axes", "scan_output_directions"):
                    a = _attr(n, name)
                    if a is not None and len(a.ints) > j - first:
                        del a.ints[j - first]
            del n.output[j]
            changed = True
    return changed


def _types(g: onnx.GraphProto, out: dict[str, tuple[int, tuple[int, ...]]]) -> None:
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        out[vi.name] = (tt.elem_type, tuple(d.dim_value for d in tt.shape.dim))
    for i in g.initializer:
        out[i.name] = (i.data_type, tuple(i.dims))
    for n in g.node:
        for sub in subgraphs(n):
            _types(sub, out)


def _bodies(g: onnx.GraphProto, path: tuple = ()) -> Iterator[tuple[tuple, onnx.GraphProto]]:
    """(path, subgraph) for every subgraph, outermost first; a path is (node index,
    attribute name, graph index) steps from the model's graph."""
    for k, node in enumerate(g.node):
        for a in node.attribute:
            subs = [a.g] if a.type == _G else list(a.graphs) if a.type == _GS else []
            for i, sub in enumerate(subs):
                step = (*path, (k, a.name, i))
                yield step, sub
                yield from _bodies(sub, step)


def _at(m: onnx.ModelProto, path: tuple) -> onnx.GraphProto:
    g = m.graph
    for k, name, i in path:
        a = _attr(g.node[k], name)
        assert a is not None
        g = a.g if a.type == _G else a.graphs[i]
    return g


def shrink_bodies(
    model: onnx.ModelProto, keep: frozenset[str] = frozenset()
) -> Iterator[onnx.ModelProto]:
    types: dict[str, tuple[int, tuple[int, ...]]] = {}
    _types(model.graph, types)
    top = [i.name for i in model.graph.input] + [i.name for i in model.graph.initializer]
    for path, body in _bodies(model.graph):
        results = {o.name for o in body.output}
        available = top + [i.name for i in body.input] + [i.name for i in body.initializer]
        for j, bn in enumerate(body.node):
            if bn.op_type == "Identity" and bn.output[0] in results:
                available += list(bn.output)
                continue  # already the least a body output can be
            for out in bn.output:
                want = types.get(out)
                if want is None or len(bn.output) != 1:
                    continue
                fits = [c for c in available if c != out and types.get(c) == want]
                if fits:  # the first fitting tensor: one candidate per node
                    yield _bypass(model, path, j, out, fits[0], out in results, keep=keep)
                elif bn.op_type != "Constant" and want[0] != _STRING and want[1] and all(want[1]):
                    # nothing has its type: a constant of zeros stands in (a body's
                    # result often needs a shape only the node it replaces makes)
                    yield _bypass(model, path, j, out, "", out in results, want, keep)
            available += list(bn.output)


def _bypass(
    model: onnx.ModelProto,
    path: tuple,
    j: int,
    out: str,
    cand: str,
    is_result: bool,
    zeros: tuple[int, tuple[int, ...]] | None = None,
    keep: frozenset[str] = frozenset(),
) -> onnx.ModelProto:
    """Node ``j`` of the body at ``path`` replaced by ``cand`` (or, given ``zeros``'s
    element type and shape, by a new initializer of the model's graph holding zeros);
    what only fed it goes, but the nodes making ``keep`` (but node ``j`` itself: a body
    node no output needs stays while it may be the trigger, yet in its place a tensor of
    its type is a smaller candidate like any other, refused where it was the trigger)."""
    keep = keep - {out}
    m = _copy(model)
    if zeros is not None:
        cand = _fresh(m.graph, f"{out}_zeros", _all_names(m.graph))
        np_type = helper.tensor_dtype_to_np_dtype(zeros[0])
        m.graph.initializer.append(numpy_helper.from_array(np.zeros(zeros[1], np_type), cand))
    body = _at(m, path)
    if is_result:  # the body's output stays made in the body: Identity of the tensor
        node = helper.make_node("Identity", [cand], [out], name=f"{body.node[j].name}_bypass")
        body.node[j].CopyFrom(node)
    else:
        for n in body.node[j + 1 :]:
            rename_reads(n, out, cand)
    _prune_graph(body, keep)
    prune_bodies(body, keep)
    return m
