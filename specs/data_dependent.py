"""Ops whose output shape depends on data, made static by constant inputs.

Compress, NonZero and Unique size their outputs by values. When the values that decide
the shape are constants (an initializer condition for Compress, a constant input for
NonZero and Unique), the output shape is known when the model is built: a static-shape
generator can express them, and compilers meet them as they appear after constant folding
or in exported models with fixed masks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.choices import ChoiceStream
from onnxfuzz.generate.domains import Ints, OneOf
from onnxfuzz.generate.intervals import Interval
from onnxfuzz.generate.spec import op
from onnxfuzz.generate.spec_api import SpecBuilder


class Mask:
    """A 1-D boolean condition of length 1..``n`` with at least one true (Compress keeps the
    selected slices; a condition shorter than the axis drops the rest)."""

    __slots__ = ("n",)

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Mask(<= {self.n}, some true)"

    def empty(self) -> bool:
        return self.n < 1

    def draw(self, s: ChoiceStream) -> list[bool]:
        length = s.integer(1, self.n)
        bits = [not s.chance(0.5) for _ in range(length)]
        bits[s.index(length)] = True  # at least one slice kept: no zero-size output
        return bits

    def contains(self, value: Any) -> bool:
        v = list(np.asarray(value).reshape(-1))
        return 1 <= len(v) <= self.n and any(bool(x) for x in v)


class SmallTensor:
    """A constant tensor of rank 1..``max_rank`` with dims 1..``max_dim`` and small integer
    values (exact in every type) of which at least one is nonzero; ``repeats`` favours
    repeated values (Unique)."""

    __slots__ = ("max_rank", "max_dim", "repeats")

    def __init__(self, max_rank: int, max_dim: int, repeats: bool = False) -> None:
        self.max_rank, self.max_dim, self.repeats = max(1, max_rank), max(1, max_dim), repeats

    def __repr__(self) -> str:
        return f"SmallTensor(rank <= {self.max_rank}, dims <= {self.max_dim})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> np.ndarray:
        rank = s.integer(1, min(self.max_rank, 3))
        shape = [s.integer(1, min(self.max_dim, 5)) for _ in range(rank)]
        top = 3 if self.repeats else 4
        vals = [s.integer(0, top) for _ in range(math.prod(shape))]
        vals[s.index(len(vals))] = s.integer(1, top)  # at least one nonzero
        return np.asarray(vals, dtype=np.int64).reshape(shape)

    def contains(self, value: Any) -> bool:
        a = np.asarray(value)
        return 1 <= a.ndim <= self.max_rank and a.size > 0 and bool(np.any(a != 0))


@op("Compress")
def compress(b: SpecBuilder, p: None) -> None:
    x = b.input("input", rank=Ints(1, 8))
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), None)
    n = math.prod(x.shape) if axis is None else x.shape[axis % x.rank]
    cond = b.draw("condition", Mask(n))
    b.const("condition", np.asarray(cond, dtype=bool))
    kept = int(np.count_nonzero(cond))
    if axis is None:  # the flattened input
        shape = [kept]
    else:
        shape = list(x.shape)
        shape[axis % x.rank] = kept
    b.output(shape, interval=x.interval)


def _constant(b: SpecBuilder, name: str, repeats: bool = False) -> np.ndarray:
    dtype = b.const_type(name)
    values = b.draw(name, SmallTensor(b.max_rank, b.max_dim, repeats))
    arr = np.asarray(values).astype(dt.np_dtype(dtype))
    b.const(name, arr, dtype=dtype)
    return arr


@op("NonZero")
def nonzero(b: SpecBuilder, p: None) -> None:
    x = _constant(b, "X")
    nnz = int(np.count_nonzero(x))
    b.output([x.ndim, nnz], interval=Interval(0, max(x.shape) - 1))


@op("Unique")
def unique(b: SpecBuilder, p: None) -> None:
    x = _constant(b, "X", repeats=True)
    sorted_ = b.attr("sorted", OneOf([1, 0]), 1)
    axis = b.attr("axis", Ints(-x.ndim, x.ndim - 1), None)
    if axis is None:
        uniq = np.unique(x.reshape(-1))
        k, n = len(uniq), x.size
        y_shape = [k]
    else:
        ax = axis % x.ndim
        moved = np.moveaxis(x, ax, 0).reshape(x.shape[ax], -1)
        k = len(np.unique(moved, axis=0))
        n = x.shape[ax]
        y_shape = list(x.shape)
        y_shape[ax] = k
    del sorted_  # the order of Y changes with it, not the shapes
    lo, hi = float(x.min()), float(x.max())
    b.output(y_shape, interval=Interval(lo, hi))
    b.output([k], interval=Interval(0, n - 1))  # indices of first occurrences
    b.output([n], interval=Interval(0, k - 1))  # inverse_indices
    b.output([k], interval=Interval(1, n))  # counts
