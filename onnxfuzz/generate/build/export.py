"""Graph -> onnx.ModelProto at an explicit opset and IR version."""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import __version__
from onnxfuzz.generate.lang.graph import Body, Graph, Node, Tensor, Value, type_proto
from onnxfuzz.generate.lang.spec import DOMAIN_VERSIONS

# One encoder for every model: json.dumps with separators builds a new one per call.
_JSON = json.JSONEncoder(separators=(",", ":"))
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
    _fill_node(node, n, set())
    return node


# The model is filled in place, field by field as onnx.helper sets them (so the bytes are
# the ones helper.make_model would give): the helpers build every node, value info and
# subgraph as a message of its own and copy it into its parent, twice for the graph
# (make_graph, then make_model), a third of generation's time at 5 nodes.
def _fill_node(node: onnx.NodeProto, n: Node, domains: set[str]) -> None:
    """``domains``: where the op domains other than ai.onnx that the node and its
    subgraphs use are gathered (the model's opset imports), while the node is at hand."""
    # An op of another domain is named "domain.Op" (ai.onnx op names have no dot).
    domain, _, op = n.op_type.rpartition(".")
    node.op_type = op
    node.input.extend(n.inputs)
    node.output.extend([t.name for t in n.outputs])
    if n.name:
        node.name = n.name
    if domain:
        node.domain = domain
        domains.add(domain)
    attrs = n.attrs
    for key in sorted(attrs):  # make_node's order
        v = attrs[key]
        t = type(v)
        # Python ints, floats, strings and lists of ints are what _attr_value gives back
        # unchanged (it rebuilds a list element by element): most attributes are these.
        if t is int:  # _fill_attr's first case, inlined: the commonest attribute
            a = node.attribute.add()
            a.name, a.i, a.type = key, v, onnx.AttributeProto.INT
            continue
        if t is float or t is str or (t is list and all(type(x) is int for x in v)):
            _fill_attr(node.attribute.add(), key, v)
            continue
        if isinstance(v, Body):
            a = node.attribute.add()
            a.name = key
            _fill_graph(a.g, v, domains)
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
    key = (t.dtype, t.shape)
    tp = _TENSOR_TYPES.get(key)
    if tp is None:
        if len(_TENSOR_TYPES) >= MAX_TENSOR_TYPES:
            _TENSOR_TYPES.clear()
        tp = _TENSOR_TYPES[key] = tensor_type(t.dtype, t.shape)
    vi.type.CopyFrom(tp)


# A model's tensors share a few (element type, shape) pairs, and copying a built TypeProto
# costs half of building it field by field: one per pair, kept for every model (bounded).
_TENSOR_TYPES: dict[tuple[int, tuple[int, ...]], onnx.TypeProto] = {}
MAX_TENSOR_TYPES = 20_000


def tensor_type(dtype: int, shape: tuple[int, ...]) -> onnx.TypeProto:
    """``helper.make_tensor_type_proto(dtype, shape)``, field by field."""
    tp = onnx.TypeProto()
    tt = tp.tensor_type
    tt.elem_type = dtype
    dims = tt.shape
    dims.SetInParent()  # a scalar's shape is there, with no dims (make_tensor_type_proto)
    for d in shape:
        dims.dim.add().dim_value = d
    return tp


def _fill_value_infos(field: Any, values: list[Value]) -> None:
    types = _TENSOR_TYPES
    for t in values:
        vi = field.add()
        if type(t) is not Tensor:  # a sequence or an optional (or a Tensor's subclass)
            _fill_vi(vi, t)
            continue
        # _fill_vi, inlined: a model has a value info per tensor
        vi.name = t.name
        tp = types.get((t.dtype, t.shape))
        if tp is None:
            _fill_vi(vi, t)
        else:
            vi.type.CopyFrom(tp)


# Element types from_array writes as the array's bytes (the others: strings, packed 2-,
# 4- and 6-bit types, big-endian arrays, go through from_array itself).
_PACKED = {
    onnx.TensorProto.STRING,
    onnx.TensorProto.INT4,
    onnx.TensorProto.UINT4,
    onnx.TensorProto.FLOAT4E2M1,
    onnx.TensorProto.UINT2,
    onnx.TensorProto.INT2,
    onnx.TensorProto.FLOAT6E2M3,
    onnx.TensorProto.FLOAT6E3M2,
}
_RAW_TYPES: dict[np.dtype, int | None] = {}


def _raw_type(dtype: np.dtype) -> int | None:
    """The TensorProto type from_array gives an array of ``dtype`` where it writes the
    array's bytes as they are (a little-endian machine, a little-endian or one-byte type);
    None where it does more."""
    if dtype in _RAW_TYPES:
        return _RAW_TYPES[dtype]
    code: int | None = None
    if dtype.kind not in "OUS" and sys.byteorder == "little":  # not objects, not strings
        c = helper.np_dtype_to_tensor_dtype(dtype)
        if c not in _PACKED and dtype.byteorder != ">":
            code = c
    _RAW_TYPES[dtype] = code
    return code


def _fill_initializers(field: Any, inits: list[tuple[Tensor, np.ndarray]]) -> None:
    """``numpy_helper.from_array(a, name)`` for each, in place (the same fields)."""
    for t, a in inits:
        code = _raw_type(a.dtype)
        if code is None:
            field.append(numpy_helper.from_array(a, t.name))
            continue
        p = field.add()
        p.dims.extend(a.shape)
        if t.name:
            p.name = t.name
        p.raw_data = a.tobytes()
        p.data_type = code


def _body(b: Body) -> onnx.GraphProto:
    g = onnx.GraphProto()
    _fill_graph(g, b, set())
    return g


def _fill_graph(g: onnx.GraphProto, b: Body, domains: set[str]) -> None:
    """A subgraph: its formal inputs and outputs, the types of its other tensors; the
    constants it reads are the model's initializers (outer-scope names)."""
    results = {t.name for t in b.results}
    for n in b.graph.nodes:
        _fill_node(g.node.add(), n, domains)
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
    domains: set[str] = set()  # the op domains other than ai.onnx, in subgraphs too
    for n in g.nodes:
        _fill_node(graph.node.add(), n, domains)
    graph.name = name
    _fill_value_infos(graph.input, g.inputs)
    # g.outputs() and g.intermediates(), in one walk over the nodes' outputs
    consumed = g.consumed
    outputs: list[Value] = []
    intermediates: list[Value] = []
    for n in g.nodes:
        for t in n.outputs:
            (intermediates if t.name in consumed else outputs).append(t)
    _fill_value_infos(graph.output, outputs)
    _fill_initializers(graph.initializer, g.initializers)
    _fill_value_infos(graph.value_info, intermediates)
    for domain, version in [("", opset)] + [
        (d, DOMAIN_VERSIONS.get(d, 1)) for d in sorted(domains)
    ]:
        imp = model.opset_import.add()
        imp.domain, imp.version = domain, version
    model.producer_name = "onnxfuzz"
    model.producer_version = __version__
    meta = {INPUTS_KEY: _JSON.encode({k: v.to_json() for k, v in g.input_values.items()})}
    if seed is not None:
        meta[SEED_KEY] = str(seed)
    for key, value in meta.items():  # helper.set_model_props, on a model that has none
        entry = model.metadata_props.add()
        entry.key = key
        entry.value = value
    return model
