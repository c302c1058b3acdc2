"""Ops that make tensors from constants: ConstantOfShape, Range, Constant.

Their values are known exactly when the model is built, so every output interval is exact.
An element type a spec chooses itself (ConstantOfShape's ``value``, Range's ``start``) is
drawn together with the value by a domain (``TypedValue``), from the types the builder
allows (schema, ONNX Runtime's kernels and --dtypes), so --dtypes still applies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.intervals import Interval, point
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import is_int, types_or_skip

NOT_GENERATED = {
    "test_range_float_type_positive_delta": "(limit - start) / delta is a whole number (2): "
    "float Range counts are drawn half-way between whole numbers, so float error in the "
    "division cannot change the count",
    "test_range_float16_type_positive_delta": "as test_range_float_type_positive_delta",
}


def _tensor_dtype(value: Any) -> int | None:
    """The element type of a drawn value (None for a plain Python number, as check mode
    observes it: the builder takes the type from the node then)."""
    if isinstance(value, np.ndarray | np.generic):
        return helper.np_dtype_to_tensor_dtype(value.dtype)
    if isinstance(value, onnx.TensorProto):
        return value.data_type
    return None


def _elem_values(dtype: int) -> tuple[float, float]:
    """Values of a generated constant element: small, inside the dtype's bound."""
    lo, hi = dt.value_range(dtype)
    if dtype == dt.BOOL:
        return 0, 1
    return max(lo, -8), min(hi, 8)


def _draw_elem(s: ChoiceStream, dtype: int) -> float:
    lo, hi = _elem_values(dtype)
    if dtype in dt.FLOATS:
        return s.integer(int(lo) * 4, int(hi) * 4) / 4  # quarters: exact in every float type
    return s.integer(int(lo), int(hi))


class TensorValue:
    """A tensor attribute (``value``): an element type from ``types``, a shape (rank
    ``0..max_rank``, or exactly ``shape``), and small elements. Drawn as an
    ``onnx.TensorProto``; observed (check mode) as a numpy array."""

    __slots__ = ("types", "shape", "max_rank", "max_dim")

    def __init__(
        self,
        types: Sequence[int],
        shape: tuple[int, ...] | None = None,
        max_rank: int = 0,
        max_dim: int = 1,
    ) -> None:
        self.types = tuple(types)
        self.shape, self.max_rank, self.max_dim = shape, max_rank, max_dim

    def __repr__(self) -> str:
        where = self.shape if self.shape is not None else f"rank<={self.max_rank}"
        return f"TensorValue({[dt.NAMES[t] for t in self.types]}, {where})"

    def empty(self) -> bool:
        return not self.types

    def draw(self, s: ChoiceStream) -> onnx.TensorProto:
        dtype = self.types[s.index(len(self.types))]
        if self.shape is not None:
            shape = self.shape
        else:
            shape = tuple(s.integer(1, self.max_dim) for _ in range(s.integer(0, self.max_rank)))
        # One choice for all elements (zeros, the simplest, or values from a recorded seed):
        # a choice per element would cost more than the rest of a model.
        n = math.prod(shape)
        if s.chance(0.1):
            vals = np.zeros(n)
        else:
            lo, hi = _elem_values(dtype)
            rng = np.random.default_rng(s.seed32())
            if dtype in dt.FLOATS:  # quarters: exact in every float type
                vals = rng.integers(int(lo) * 4, int(hi) * 4, size=n, endpoint=True) / 4
            else:
                vals = rng.integers(int(lo), int(hi), size=n, endpoint=True)
        arr = np.asarray(vals).astype(dt.np_dtype(dtype)).reshape(shape)
        return numpy_helper.from_array(arr)

    def contains(self, value: Any) -> bool:
        if isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        if not isinstance(value, np.ndarray):
            return False
        try:
            dtype = helper.np_dtype_to_tensor_dtype(value.dtype)
        except (KeyError, ValueError):
            return False
        if dtype not in self.types or not value.size:
            return False
        if self.shape is not None:
            return tuple(value.shape) == tuple(self.shape)
        return value.ndim <= self.max_rank and all(d <= self.max_dim for d in value.shape)


def _interval(arr: np.ndarray) -> Interval:
    f = arr.astype(np.float64)
    return Interval(float(f.min()), float(f.max()))


class ShapeValues:
    """A target shape: 0..``max_rank`` dims, each in 1..``max_dim``."""

    __slots__ = ("max_rank", "max_dim")

    def __init__(self, max_rank: int, max_dim: int) -> None:
        self.max_rank, self.max_dim = max_rank, max_dim

    def __repr__(self) -> str:
        return f"ShapeValues(rank<={self.max_rank}, dims<={self.max_dim})"

    def empty(self) -> bool:
        return self.max_rank < 0 or self.max_dim < 1

    def draw(self, s: ChoiceStream) -> list[int]:
        return [s.integer(1, self.max_dim) for _ in range(s.integer(0, self.max_rank))]

    def contains(self, value: Any) -> bool:
        vals = list(np.asarray(value).reshape(-1).tolist())
        return len(vals) <= self.max_rank and all(
            is_int(v) and 1 <= v <= self.max_dim for v in vals
        )


@op("ConstantOfShape")
def constant_of_shape(b: SpecBuilder, p: None) -> None:
    # input: the output's shape, a 1-D int64 constant (an empty one makes a scalar).
    shape = b.draw("input", ShapeValues(b.max_rank, b.max_dim))
    b.const("input", np.asarray(shape, dtype=np.int64).reshape(len(shape)))
    types = types_or_skip(b, "T2")
    # Without `value` the output is float32 zeros: only where float32 is allowed.
    default = None if dt.FLOAT in types else MISSING
    value = b.attr("value", TensorValue(types, shape=(1,)), default)
    if value is None:
        b.output(shape, dtype=dt.FLOAT, interval=point(0))
        return
    arr = numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value
    dtype = _tensor_dtype(value)
    b.output(shape, dtype=dtype, interval=None if dtype == dt.BOOL else _interval(arr))


@op("Constant")
def constant(b: SpecBuilder, p: None) -> None:
    # No inputs: the `value` attribute is the output (the value_* forms are spellings of
    # the same tensors and are not drawn).
    types = types_or_skip(b, "T")
    value = b.attr("value", TensorValue(types, max_rank=b.max_rank, max_dim=b.max_dim))
    arr = numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value
    dtype = _tensor_dtype(value)
    b.output(arr.shape, dtype=dtype, interval=None if dtype == dt.BOOL else _interval(arr))


# --- Range ------------------------------------------------------------------------------
class TypedScalar:
    """Range's ``start``: an element type from ``types`` and a small value of it (floats
    in quarters, exact in every float type); drawn as a 0-d numpy array."""

    __slots__ = ("types",)

    def __init__(self, types: Sequence[int]) -> None:
        self.types = tuple(types)

    def __repr__(self) -> str:
        return f"TypedScalar({[dt.NAMES[t] for t in self.types]})"

    def empty(self) -> bool:
        return not self.types

    def draw(self, s: ChoiceStream) -> np.ndarray:
        dtype = self.types[s.index(len(self.types))]
        return np.asarray(_draw_elem(s, dtype)).astype(dt.np_dtype(dtype))

    def contains(self, value: Any) -> bool:
        v = np.asarray(value, dtype=np.float64)
        return v.ndim == 0 and bool(np.isfinite(v)) and abs(float(v)) <= 1e3


class Delta:
    """Range's ``delta``: non-zero; drawn from small integers or quarters."""

    __slots__ = ("is_float",)

    def __init__(self, is_float: bool) -> None:
        self.is_float = is_float

    def __repr__(self) -> str:
        return f"Delta(float={self.is_float})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> float:
        mag = s.integer(1, 12) / 4 if self.is_float else s.integer(1, 4)
        return -mag if s.chance(0.5) else mag

    def contains(self, value: Any) -> bool:
        v = float(np.asarray(value, dtype=np.float64))
        return math.isfinite(v) and v != 0 and (self.is_float or is_int(v))


class Limit:
    """Range's ``limit``: the element count ceil((limit - start) / delta) lies in
    1..``max_count``. Drawn as start + (n - 1/2) * delta for floats (half-way between
    counts: float error in the division cannot change the count; quarters keep every value
    exact) and start + (n - 1) * delta + r, 0 < r <= |delta| in delta's direction, for
    integers."""

    __slots__ = ("start", "delta", "is_float", "max_count")

    def __init__(self, start: float, delta: float, is_float: bool, max_count: int) -> None:
        self.start, self.delta, self.is_float, self.max_count = start, delta, is_float, max_count

    def __repr__(self) -> str:
        return f"Limit(start={self.start}, delta={self.delta}, count<={self.max_count})"

    def empty(self) -> bool:
        return self.max_count < 1

    def draw(self, s: ChoiceStream) -> float:
        n = s.integer(1, self.max_count)
        if self.is_float:
            return self.start + (n - 0.5) * self.delta
        r = s.integer(1, abs(int(self.delta)))
        return self.start + (n - 1) * self.delta + (r if self.delta > 0 else -r)

    def contains(self, value: Any) -> bool:
        v = float(np.asarray(value, dtype=np.float64))
        if not math.isfinite(v):
            return False
        q = (v - self.start) / self.delta
        if self.is_float and abs(q - round(q)) < 0.1:
            return False  # too near a whole count: float error may change it
        return 1 <= math.ceil(q) <= self.max_count


@op("Range")
def range_(b: SpecBuilder, p: None) -> None:
    # Range-27 adds float16 (and bfloat16) with stash_type, the accumulation type; it stays
    # at its default 1 (float): float16 accumulation drifts from start + i * delta.
    start = b.draw("start", TypedScalar(types_or_skip(b, "T")))
    b.const("start", start, dtype=_tensor_dtype(start))
    dtype = b.bound[b.info.input_type["start"]]
    is_float = dtype in dt.FLOATS
    s0 = float(np.asarray(start))
    delta = b.draw("delta", Delta(is_float))
    limit = b.draw("limit", Limit(s0, float(delta), is_float, b.max_dim))
    b.const("limit", np.asarray(limit).astype(dt.np_dtype(dtype)))
    b.const("delta", np.asarray(delta).astype(dt.np_dtype(dtype)))
    n = math.ceil((float(limit) - s0) / float(delta))
    last = s0 + (n - 1) * float(delta)
    b.output((n,), interval=Interval(min(s0, last), max(s0, last)))
