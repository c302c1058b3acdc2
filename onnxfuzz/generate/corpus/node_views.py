"""What the audit sees of a node: its inputs' static shapes, types and constant values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

Shape = tuple[int, ...]


@dataclass(frozen=True)
class NodeView:
    """One node with the static shapes, element types and (for initializers) values of its
    inputs, by formal name (variadic: ``name``, ``name[1]``, ...; absent: not given)."""

    op: str
    version: int
    inputs: dict[str, Shape]
    types: dict[str, int]
    consts: dict[str, np.ndarray]
    attrs: dict[str, object]
    outputs: tuple[Shape, ...] = ()

    def attr(self, name: str, default: object = None) -> object:
        return self.attrs.get(name, default)


Rule = Callable[[NodeView, Shape], str | None]  # the node, the input's shape -> problem


def _shapes(g: onnx.GraphProto, out: dict[str, tuple[Shape, int]] | None = None):
    """Declared shapes and types by name, of ``g`` and (names being unique across a
    model's graphs) of every subgraph in it."""
    out = {} if out is None else out
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        out[vi.name] = (tuple(d.dim_value for d in tt.shape.dim), tt.elem_type)
    out.update({t.name: (tuple(t.dims), t.data_type) for t in g.initializer})
    for sub in subgraphs(g):
        _shapes(sub, out)
    return out


def node_subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The subgraphs a node holds (an If's branches, a Loop's or Scan's body)."""
    subs: list[onnx.GraphProto] = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            subs.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            subs.extend(a.graphs)
    return subs


def subgraphs(g: onnx.GraphProto) -> list[onnx.GraphProto]:
    """The subgraphs of ``g``'s nodes (If branches, Loop and Scan bodies), one level down."""
    return [sub for node in g.node for sub in node_subgraphs(node)]


def defined(g: onnx.GraphProto) -> set[str]:
    """The names ``g`` itself makes: its inputs, initializers and nodes' outputs."""
    return (
        {i.name for i in g.input}
        | {i.name for i in g.initializer}
        | {o for n in g.node for o in n.output if o}
    )


def outer_reads(g: onnx.GraphProto) -> set[str]:
    """The names a subgraph reads from the graphs around it."""
    used = {o.name for o in g.output}
    for n in g.node:
        used.update(reads(n))
    return used - defined(g)


def reads(node: onnx.NodeProto) -> list[str]:
    """Every tensor ``node`` uses: its inputs, then what its subgraphs read from outside."""
    out = [t for t in node.input if t]
    for sub in node_subgraphs(node):
        out.extend(sorted(outer_reads(sub)))
    return out


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def _attr(a: onnx.AttributeProto) -> object:
    v = helper.get_attribute_value(a)
    return v.decode() if isinstance(v, bytes) else v


def node_views(model: onnx.ModelProto, bodies: bool = False) -> list[NodeView]:
    """A view of each ai.onnx node of the model's graph (and, with ``bodies``, of every
    node in its If branches and Loop and Scan bodies, nested ones included); a node of
    another domain, or unknown at the model's opset, has none (a model with a custom op
    raised SchemaError from deep inside `onnxfuzz reduce`)."""
    shapes = _shapes(model.graph)
    graphs = [model.graph]
    if bodies:
        k = 0
        while k < len(graphs):
            graphs += subgraphs(graphs[k])
            k += 1
    inits = {t.name: t for g in graphs for t in g.initializer}
    opset = _opset(model)
    views = []
    for node in (n for g in graphs for n in g.node):
        if node.domain not in ("", "ai.onnx"):
            continue  # another domain's op (com.microsoft, a user's): no ai.onnx schema
        try:
            schema = onnx.defs.get_schema(node.op_type, opset)
        except onnx.defs.SchemaError:  # not an op of this opset: the checker says so
            continue
        formals = list(schema.inputs)
        ins: dict[str, Shape] = {}
        types: dict[str, int] = {}
        consts: dict[str, np.ndarray] = {}
        for i, name in enumerate(node.input):
            if not name:
                continue
            k = min(i, len(formals) - 1)  # a variadic last input takes the rest
            key = formals[k].name if i == k else f"{formals[k].name}[{i - k}]"
            if name not in shapes:  # a body's intermediate may have no declared type
                continue
            ins[key], types[key] = shapes[name]
            if name in inits:
                consts[key] = numpy_helper.to_array(inits[name])
        attrs = {a.name: _attr(a) for a in node.attribute}
        outs = tuple(shapes[o][0] for o in node.output if o in shapes)
        views.append(NodeView(node.op_type, schema.since_version, ins, types, consts, attrs, outs))
    return views
