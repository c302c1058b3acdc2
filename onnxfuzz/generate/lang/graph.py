"""The graph under construction: tensors, nodes, and the index the solver reuses from."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
from onnx import helper

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.intervals import Interval, Values


class Tensor:
    """A typed, statically shaped tensor with a sound value interval."""

    __slots__ = ("name", "dtype", "shape", "interval", "origin")

    def __init__(
        self, name: str, dtype: int, shape: tuple[int, ...], interval: Interval, origin: str
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.interval = interval
        self.origin = origin  # "input" | "init" | "node"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"Tensor({self.name}, dtype={self.dtype}, shape={self.shape}, {self.interval})"


class Sequence:
    """A sequence of tensors of one element type, every element's shape and value interval
    known when the model is built (so positions and axes can be drawn validly)."""

    __slots__ = ("name", "dtype", "shapes", "intervals", "origin")

    def __init__(
        self,
        name: str,
        dtype: int,
        shapes: tuple[tuple[int, ...], ...],
        intervals: tuple[Interval, ...],
        origin: str = "node",
    ) -> None:
        self.name = name
        self.dtype = dtype
        self.shapes = shapes
        self.intervals = intervals
        self.origin = origin

    @property
    def length(self) -> int:
        return len(self.shapes)

    @property
    def union_shape(self) -> tuple[int | None, ...] | None:
        """The shape ONNX's inference gives the elements: dims all elements share, None
        where they differ; None when the ranks differ (or the sequence is empty)."""
        if not self.shapes or len({len(s) for s in self.shapes}) != 1:
            return None
        return tuple(ds[0] if len(set(ds)) == 1 else None for ds in zip(*self.shapes, strict=True))

    def __repr__(self) -> str:
        return f"Sequence({self.name}, dtype={self.dtype}, shapes={self.shapes})"


class OptionalValue:
    """An optional holding a tensor or a sequence (``elem``: its type, and its facts when
    ``present``); whether it holds one is known when the model is built."""

    __slots__ = ("name", "elem", "present", "origin")

    def __init__(self, name: str, elem: Tensor | Sequence, present: bool, origin: str = "node"):
        self.name = name
        self.elem = elem
        self.present = present
        self.origin = origin

    def __repr__(self) -> str:
        return f"OptionalValue({self.name}, {self.elem!r}, present={self.present})"


Value = Tensor | Sequence | OptionalValue  # what a node output may be


class Node:
    __slots__ = ("op_type", "name", "inputs", "outputs", "attrs")

    def __init__(
        self,
        op_type: str,
        name: str,
        inputs: list[str],
        outputs: list[Value],
        attrs: dict[str, Any],
    ) -> None:
        self.op_type = op_type
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs


class Graph:
    """Mutable graph state; ``pool`` indexes reusable tensors by (dtype, rank)."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.inputs: list[Tensor] = []
        self.input_values: dict[str, Values] = {}
        self.initializers: list[tuple[Tensor, np.ndarray]] = []
        self.pool: dict[tuple[int, int], list[Tensor]] = {}
        self.produced: list[Tensor] = []  # reusable node outputs, in order: glue sources
        # ``produced`` by (dtype, rank), each with its position there: glue costs a
        # bucket's sources only where the bucket's floor cost can still win
        self.produced_by: dict[tuple[int, int], list[tuple[int, Tensor]]] = {}
        self.consumed: set[str] = set()
        # a node output's producer and how many distinct nodes feed that producer: a
        # consumer that reads a merged tensor closes more a -> b -> c paths (chaining)
        self.made_by: dict[str, tuple[str, int]] = {}
        # tensors whose shape ONNX's shape inference cannot know: a Loop's outputs (it
        # drops loop-carried shapes) and whatever is computed from them
        self.unshaped: set[str] = set()
        # sequence and optional node outputs, in order (onnxfuzz.generate.build.sequences)
        self.seqs: list[Sequence] = []
        self.optionals: list[OptionalValue] = []
        self._counts: dict[str, int] = {}

    def fresh_name(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}{n}"

    def add_node(self, node: Node) -> None:
        """Append ``node``: its inputs are consumed, its outputs' producer recorded."""
        self.nodes.append(node)
        names = [n for n in node.inputs if n]
        self.consumed.update(names)
        made_by = self.made_by
        fan_in = len({m[0] for n in names if (m := made_by.get(n)) is not None})
        made = (node.name, fan_in)  # one tuple for every output (it is never changed)
        for v in node.outputs:
            made_by[v.name] = made
        if node.op_type == "Loop" or (self.unshaped and not self.unshaped.isdisjoint(names)):
            self.unshaped.update([v.name for v in node.outputs])

    def fan_in(self, name: str) -> int:
        """How many distinct nodes feed the node that produced ``name`` (0 for a graph
        input, an initializer or an outer-scope tensor)."""
        m = self.made_by.get(name)
        return m[1] if m else 0

    def add_reusable(self, t: Tensor) -> None:
        key = (t.dtype, len(t.shape))
        if t.origin == "node":
            made = self.produced_by.get(key)
            if made is None:
                self.produced_by[key] = [(len(self.produced), t)]
            else:
                made.append((len(self.produced), t))
            self.produced.append(t)
        bucket = self.pool.get(key)
        if bucket is None:
            self.pool[key] = [t]
        else:
            bucket.append(t)

    def child(self) -> Graph:
        """The scope of a subgraph (an If branch, a Loop or Scan body) inside this graph:
        nodes of its own, this graph's tensors readable by name (ONNX's outer-scope
        references), and the model's inputs, initializers and names shared, so every name
        stays unique across the model and a fresh input or constant lands in the model."""
        c = Graph()
        c.inputs, c.input_values, c.initializers = self.inputs, self.input_values, self.initializers
        c._counts = self._counts
        c.pool = {k: list(v) for k, v in self.pool.items()}
        c.produced = list(self.produced)
        c.produced_by = {k: list(v) for k, v in self.produced_by.items()}
        c.consumed = set(self.consumed)
        c.made_by = dict(self.made_by)
        c.unshaped = set(self.unshaped)
        return c

    def outputs(self) -> list[Value]:
        """Node outputs nothing consumes: the graph's outputs."""
        return [t for n in self.nodes for t in n.outputs if t.name not in self.consumed]

    def intermediates(self) -> list[Value]:
        return [t for n in self.nodes for t in n.outputs if t.name in self.consumed]


class Body:
    """A graph-valued attribute (If's branches, Loop's and Scan's body): the subgraph's
    nodes (``graph``, a ``Graph.child``), its formal inputs and its outputs in order."""

    __slots__ = ("name", "graph", "formals", "results")

    def __init__(
        self, name: str, graph: Graph, formals: list[Tensor], results: list[Tensor]
    ) -> None:
        self.name = name
        self.graph = graph
        self.formals = formals
        self.results = results

    def nodes(self) -> list[Node]:
        """Every node of the body and of the bodies nested in it."""
        out: list[Node] = []
        for n in self.graph.nodes:
            out.append(n)
            for v in n.attrs.values():
                if isinstance(v, Body):
                    out.extend(v.nodes())
        return out


# --- facts of a sequence (specs and the solver read them) ------------------------------
MAX_LENGTH = 4  # the longest sequence a SequenceConstruct made for an input has
# How the shapes of a sequence's elements relate (``input_seq(shapes=...)``):
ANY_SHAPES = "any"  # independent shapes (SequenceAt, SequenceInsert, ...)
SAME_SHAPE = "same"  # one shape for all
CONCAT = "concat"  # one rank, all dims shared but along one axis (ConcatFromSequence)


def concat_axes(q: Sequence) -> list[int]:
    """The axes ConcatFromSequence (new_axis=0) may join ``q``'s elements along: those
    where the elements' other dims agree."""
    if not q.shapes or len({len(s) for s in q.shapes}) != 1:
        return []
    r = len(q.shapes[0])
    return [
        a
        for a in range(r)
        if len({tuple(d for i, d in enumerate(s) if i != a) for s in q.shapes}) == 1
    ]


def same_shape(q: Sequence) -> bool:
    return len(set(q.shapes)) <= 1


def fits_shapes(q: Sequence, mode: str) -> bool:
    if mode == SAME_SHAPE:
        return same_shape(q)
    if mode == CONCAT:
        return bool(q.shapes) and (same_shape(q) or bool(concat_axes(q)))
    return True


def elem_types(type_strs: Iterable[str]) -> frozenset[int]:
    """``seq(tensor(float))`` -> FLOAT, for every string of a schema's type constraint."""
    out = set()
    for s in type_strs:
        if s.startswith("seq(") and s.endswith(")"):
            t = dt.from_schema_str(s[4:-1])
            if t is not None:
                out.add(t)
    return frozenset(out)


def type_proto(v: Tensor | Sequence | OptionalValue) -> onnx.TypeProto:
    """The ONNX type of a value: a sequence's element shape is the shape its elements
    share (``union_shape``), as ONNX's inference merges it."""
    if isinstance(v, Tensor):
        return helper.make_tensor_type_proto(v.dtype, v.shape)
    if isinstance(v, Sequence):
        u = v.union_shape
        return helper.make_sequence_type_proto(
            helper.make_tensor_type_proto(v.dtype, list(u) if u is not None else None)
        )
    return helper.make_optional_type_proto(type_proto(v.elem))
