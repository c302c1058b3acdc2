"""Graph -> onnx.ModelProto at an explicit opset and IR version."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import __version__
from onnxfuzz.generate.lang.graph import Body, Graph, Node, Tensor, Value, type_proto
from onnxfuzz.generate.lang.spec import DOMAIN_VERSIONS

INPUTS_KEY = "onnxfuzz.inputs"  # metadata: each graph input's value domain (JSON)
SEED_KEY = "onnxfuzz.seed"


def _vi(t: Value) -> onnx.ValueInfoProto:
    if isinstance(t, Tensor):
        return helper.make_tensor_value_info(t.name, t.dtype, t.shape)
    return helper.make_value_info(t.name, type_proto(t))  # a sequence or an optional


def _attr_value(v: Any) -> Any:
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, list | tuple):
        return [_attr_value(x) for x in v]
    if isinstance(v, Body):
        return _body(v)
    return v


def _node(n: Node) -> onnx.NodeProto:
    node = onnx.NodeProto()
    _fill_node(node, n)
    return node


# The model is filled in place, field by field as onnx.helper sets them (so the bytes are
# the ones helper.make_model would give): the helpers build every node, value info and
# subgraph as a message of its own and copy it into its parent, twice for the graph
# (make_graph, then make_model), a third of generation's time at 5 nodes.
def _fill_node(node: onnx.NodeProto, n: Node) -> None:
    # An op of another domain is named "domain.Op" (ai.onnx op names have no dot).
    domain, _, op = n.op_type.rpartition(".")
    node.op_type = op
    node.input.extend(n.inputs)
    node.output.extend([t.name for t in n.outputs])
    if n.name:
        node.name = n.name
    if domain:
        node.domain = domain
    attrs = n.attrs
    for key in sorted(attrs):  # make_node's order
        v = attrs[key]
        if isinstance(v, Body):
            a = node.attribute.add()
            a.name = key
            _fill_graph(a.g, v)
            a.type = onnx.AttributeProto.GRAPH
            continue
        v = _attr_value(v)
        if v is not None:
            _fill_attr(node.attribute.add(), key, v)


def _fill_attr(a: onnx.AttributeProto, key: str, v: Any) -> None:
    """``helper.make_attribute(key, v)``, in place; the common types directly."""
    t = type(v)
    if t is int:
        a.name, a.i, a.type = key, v, onnx.AttributeProto.INT
    elif t is float:
        a.name, a.f, a.type = key, v, onnx.AttributeProto.FLOAT
    elif t is str:
        a.name, a.s, a.type = key, v.encode("utf-8"), onnx.AttributeProto.STRING
    elif t is list and v and all(type(x) is int for x in v):
        a.name = key
        a.ints.extend(v)
        a.type = onnx.AttributeProto.INTS
    elif t is list and v and all(type(x) is float for x in v):
        a.name = key
        a.floats.extend(v)
        a.type = onnx.AttributeProto.FLOATS
    else:
        a.CopyFrom(helper.make_attribute(key, v))


def _fill_vi(vi: onnx.ValueInfoProto, t: Value) -> None:
    """``_vi(t)``, in place."""
    if not isinstance(t, Tensor):
        vi.CopyFrom(_vi(t))
        return
    vi.name = t.name
    tt = vi.type.tensor_type
    tt.elem_type = t.dtype
    shape = tt.shape
    shape.SetInParent()  # a scalar's shape is there, with no dims (make_tensor_type_proto)
    for d in t.shape:
        shape.dim.add().dim_value = d


def _fill_value_infos(field: Any, values: list[Value]) -> None:
    for t in values:
        _fill_vi(field.add(), t)


def _domains(nodes: list[onnx.NodeProto]) -> set[str]:
    """The op domains other than ai.onnx that ``nodes`` use, in subgraphs too."""
    out: set[str] = set()
    for n in nodes:
        if n.domain:
            out.add(n.domain)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out |= _domains(list(a.g.node))
    return out


def _body(b: Body) -> onnx.GraphProto:
    g = onnx.GraphProto()
    _fill_graph(g, b)
    return g


def _fill_graph(g: onnx.GraphProto, b: Body) -> None:
    """A subgraph: its formal inputs and outputs, the types of its other tensors; the
    constants it reads are the model's initializers (outer-scope names)."""
    results = {t.name for t in b.results}
    for n in b.graph.nodes:
        _fill_node(g.node.add(), n)
    g.name = b.name
    _fill_value_infos(g.input, b.formals)
    _fill_value_infos(g.output, b.results)
    _fill_value_infos(g.value_info, [t for t in b.graph.intermediates() if t.name not in results])


def to_model(
    g: Graph, opset: int, ir_version: int, *, name: str = "onnxfuzz", seed: int | None = None
) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.ir_version = ir_version
    graph = model.graph
    for n in g.nodes:
        _fill_node(graph.node.add(), n)
    graph.name = name
    _fill_value_infos(graph.input, g.inputs)
    _fill_value_infos(graph.output, g.outputs())
    graph.initializer.extend([numpy_helper.from_array(a, t.name) for t, a in g.initializers])
    _fill_value_infos(graph.value_info, g.intermediates())
    for domain, version in [("", opset)] + [
        (d, DOMAIN_VERSIONS.get(d, 1)) for d in sorted(_domains(list(graph.node)))
    ]:
        imp = model.opset_import.add()
        imp.domain, imp.version = domain, version
    model.producer_name = "onnxfuzz"
    model.producer_version = __version__
    meta = {
        INPUTS_KEY: json.dumps(
            {k: v.to_json() for k, v in g.input_values.items()}, separators=(",", ":")
        )
    }
    if seed is not None:
        meta[SEED_KEY] = str(seed)
    helper.set_model_props(model, meta)
    return model
