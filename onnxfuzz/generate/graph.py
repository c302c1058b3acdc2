"""The graph under construction: tensors, nodes, and the index the solver reuses from."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxfuzz.generate.intervals import Interval, Values


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
        self.consumed: set[str] = set()
        # sequence and optional node outputs, in order (onnxfuzz.generate.sequences)
        self.seqs: list[Sequence] = []
        self.optionals: list[OptionalValue] = []
        self._counts: dict[str, int] = {}

    def fresh_name(self, prefix: str) -> str:
        n = self._counts.get(prefix, 0)
        self._counts[prefix] = n + 1
        return f"{prefix}{n}"

    def add_reusable(self, t: Tensor) -> None:
        if t.origin == "node":
            self.produced.append(t)
        key = (t.dtype, len(t.shape))
        bucket = self.pool.get(key)
        if bucket is None:
            self.pool[key] = [t]
        else:
            bucket.append(t)

    def outputs(self) -> list[Value]:
        """Node outputs nothing consumes: the graph's outputs."""
        return [t for n in self.nodes for t in n.outputs if t.name not in self.consumed]

    def intermediates(self) -> list[Value]:
        return [t for n in self.nodes for t in n.outputs if t.name in self.consumed]
