"""Cast and CastLike: convert every element to another element type.

The input's value domain depends on the target type, so the target is chosen first
(Cast's ``to`` attribute; CastLike's ``target_type`` tensor, whose element type is the
target), and the input after it with values the conversion keeps defined:

* to bool: any value (non-zero -> true);
* to a float type: inside the target's bound (int -> float16 stays within +-1e3);
* to an integer type: inside the target's range (no out-of-range conversion: undefined
  for float -> int, wrap-around for int -> narrower int); float inputs also keep away
  from whole numbers, where truncation of a value computed slightly differently by two
  backends flips.

float8/int4/float4/int2 targets are not generated, so ``saturate`` (float8 targets only:
ONNX Runtime rejects it on any other cast) and ``round_mode`` (float8e8m0 only) are not drawn.
"""

from __future__ import annotations

import math

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import ANY, Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import WEIGHT, SpecBuilder

# CastLike's function body is one Cast with saturate=1 written out; saturate only matters
# for float8 targets, which onnxfuzz does not generate, so it is never drawn.
NOT_GENERATED = {
    f"test_castlike_{a}_to_{b}_expanded": "Cast's saturate attribute (float8 targets only) "
    "is not generated"
    for a, b in (
        ("FLOAT", "FLOAT16"),
        ("FLOAT", "DOUBLE"),
        ("FLOAT16", "FLOAT"),
        ("FLOAT16", "DOUBLE"),
        ("DOUBLE", "FLOAT"),
        ("DOUBLE", "FLOAT16"),
    )
}


def _source_values(target: int):
    """The value domain of an input cast to ``target``, per source element type."""

    def at(src: int) -> Values:
        if target == dt.BOOL or src == dt.BOOL:
            return ANY
        lo, hi = dt.value_range(target)
        if target in dt.INTS and src in dt.FLOATS:
            return Values(lo, hi, avoid="integer")
        return Values(lo, hi)

    return at


def _output(b: SpecBuilder, x: Tensor, target: int) -> None:
    if target == dt.BOOL:
        b.output(x.shape, dtype=target)
        return
    iv = x.interval
    if x.dtype == dt.BOOL:
        iv = Interval(0, 1)
    elif x.dtype in dt.FLOATS and target in dt.INTS:
        # Truncation toward zero is monotone.
        iv = Interval(math.trunc(iv.lo), math.trunc(iv.hi))
    b.output(x.shape, dtype=target, interval=iv)


@op("Cast")
def cast(b: SpecBuilder, p: None) -> None:
    to = b.attr("to", OneOf(b.types("T2")))
    x = b.input("input", values=_source_values(to))
    _output(b, x, to)


@op("CastLike", since=15)
def cast_like(b: SpecBuilder, p: None) -> None:
    # target_type only contributes its element type: any existing tensor of a small
    # rank serves, and a fresh one is a small initializer.
    target = b.input("target_type", rank=Ints(0, 2), kind=WEIGHT)
    x = b.input("input", values=_source_values(target.dtype))
    _output(b, x, target.dtype)
