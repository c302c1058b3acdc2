"""Graph -> onnx.ModelProto at an explicit opset and IR version."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import __version__
from onnxfuzz.generate.lang.graph import Body, Graph, Node, Tensor, Value
from onnxfuzz.generate.lang.graph import type_proto
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
    # An op of another domain is named "domain.Op" (ai.onnx op names have no dot).
    domain, _, op = n.op_type.rpartition(".")
    return helper.make_node(
        op,
        n.inputs,
        [t.name for t in n.outputs],
        name=n.name,
        domain=domain or None,
        **{k: _attr_value(v) for k, v in n.attrs.items()},
    )


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
    """A subgraph: its formal inputs and outputs, the types of its other tensors; the
    constants it reads are the model's initializers (outer-scope names)."""
    results = {t.name for t in b.results}
    return helper.make_graph(
        [_node(n) for n in b.graph.nodes],
        b.name,
        [_vi(t) for t in b.formals],
        [_vi(t) for t in b.results],
        value_info=[_vi(t) for t in b.graph.intermediates() if t.name not in results],
    )


def to_model(
    g: Graph, opset: int, ir_version: int, *, name: str = "onnxfuzz", seed: int | None = None
) -> onnx.ModelProto:
    nodes = [_node(n) for n in g.nodes]
    domains = sorted(_domains(nodes))
    graph = helper.make_graph(
        nodes,
        name,
        [_vi(t) for t in g.inputs],
        [_vi(t) for t in g.outputs()],
        initializer=[numpy_helper.from_array(a, t.name) for t, a in g.initializers],
        value_info=[_vi(t) for t in g.intermediates()],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", opset)]
        + [helper.make_opsetid(d, DOMAIN_VERSIONS.get(d, 1)) for d in domains],
        ir_version=ir_version,
        producer_name="onnxfuzz",
        producer_version=__version__,
    )
    meta = {
        INPUTS_KEY: json.dumps(
            {k: v.to_json() for k, v in g.input_values.items()}, separators=(",", ":")
        )
    }
    if seed is not None:
        meta[SEED_KEY] = str(seed)
    helper.set_model_props(model, meta)
    return model
