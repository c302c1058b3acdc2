"""Graph -> onnx.ModelProto at an explicit opset and IR version."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import __version__
from onnxfuzz.generate.graph import Graph, Tensor, Value
from onnxfuzz.generate.sequences import type_proto

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
    return v


def to_model(
    g: Graph, opset: int, ir_version: int, *, name: str = "onnxfuzz", seed: int | None = None
) -> onnx.ModelProto:
    nodes = [
        helper.make_node(
            n.op_type,
            n.inputs,
            [t.name for t in n.outputs],
            name=n.name,
            **{k: _attr_value(v) for k, v in n.attrs.items()},
        )
        for n in g.nodes
    ]
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
        opset_imports=[helper.make_opsetid("", opset)],
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
