"""Sizes of a test case. A reduction step is kept only if the case gets simpler."""

from __future__ import annotations

import math
from dataclasses import astuple, dataclass

import numpy as np
import onnx


def value_bytes(x: np.ndarray) -> bytes:
    """An array's values as bytes, for a cache key: an object array's ``tobytes`` holds its
    elements' addresses, which change with each copy, so its elements (strings) as text."""
    return repr(x.tolist()).encode() if x.dtype.kind == "O" else x.tobytes()


@dataclass(frozen=True, order=True)
class Size:
    """The measures of a case's size, most important first (``order`` compares them
    lexicographically); a reduction step must make them simpler (``simpler_than``).
    Leaf counts (graph inputs, initializers) are not among them: replacing a node by a
    new input trades a node for a leaf."""

    nodes: int
    elements: int  # of every tensor with a declared shape
    max_rank: int
    distinct_values: int  # across the input values: zeros everywhere is simplest

    def no_larger_than(self, other: Size) -> bool:
        return all(a <= b for a, b in zip(astuple(self), astuple(other), strict=True))

    def simpler_than(self, other: Size) -> bool:
        """A graph reduction step's test: fewer nodes, no tensor larger or of higher rank;
        or as many nodes and no measure grown, one shrunk. The input values are not
        weighed against a node: a node replaced by a new input carrying what it computed
        adds that input's values (a Transpose of a weight becomes an input holding the
        transposed weight), and is still the simpler case. Steps stay finite: each
        drops a node or shrinks a measure without growing one."""
        if self.nodes < other.nodes:
            return self.elements <= other.elements and self.max_rank <= other.max_rank
        return self != other and self.no_larger_than(other)


def _shape(vi: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def _walk(g: onnx.GraphProto, shapes: list[list[int]]) -> int:
    """The nodes of ``g`` and of its subgraphs (If branches, Loop and Scan bodies); the
    shapes of every tensor they declare are added to ``shapes``."""
    shapes += [_shape(vi) for vi in list(g.input) + list(g.value_info) + list(g.output)]
    shapes += [list(i.dims) for i in g.initializer]
    nodes = len(g.node)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                nodes += _walk(a.g, shapes)
            elif a.type == onnx.AttributeProto.GRAPHS:
                nodes += sum(_walk(sub, shapes) for sub in a.graphs)
    return nodes


def size_of(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Size:
    """Sizes over the model's graph and its subgraphs (a body node counts as a node)."""
    shapes: list[list[int]] = []
    nodes = _walk(model.graph, shapes)
    distinct = sum(len(np.unique(v)) for v in inputs.values() if v.size)
    return Size(
        nodes=nodes,
        elements=sum(math.prod(s) for s in shapes),
        max_rank=max((len(s) for s in shapes), default=0),
        distinct_values=distinct,
    )


def _ops(g: onnx.GraphProto) -> list[str]:
    out = []
    for n in g.node:
        out.append(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out += _ops(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                out += [op for sub in a.graphs for op in _ops(sub)]
    return out


def op_pattern(model: onnx.ModelProto) -> str:
    """The multiset of op types, e.g. ``Add+Mul``: a reduced model's identity for dedup
    (bodies' ops included: a Loop around a Sigmoid is not a Loop around an Add)."""
    return "+".join(sorted(_ops(model.graph))) or "-"
