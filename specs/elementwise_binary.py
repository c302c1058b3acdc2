"""Binary and variadic elementwise ops with multidirectional (numpy) broadcasting.

Order: A (any rank and dims) -> attributes -> B (a rank and dims that broadcast with A)
-> output (the broadcast shape). Value domains keep every result inside the dtype's
bound: B's domain is computed from A's interval.
"""

from __future__ import annotations

import math

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Ints
from onnxfuzz.generate.lang.intervals import ANY, INT64_CLIP_SAFE, Interval, Values, hull
from onnxfuzz.generate.lang.shapes import broadcast, broadcastable, unidirectional
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder

NOT_GENERATED = {
    "test_div_int32_trunc": "integer Div operands are kept non-negative: truncating and "
    "flooring division differ on negatives and backends disagree",
    "test_pow_types_int64_float32": "an integer base takes integer exponents only: a fractional "
    "power truncated to int flips at exact powers",
    "test_pow_types_int32_float32": "as test_pow_types_int64_float32",
}


def _half(dtype: int) -> Values:
    """Half the dtype's range: the sum or difference of two such values still fits."""
    lo, hi = dt.value_range(dtype)
    if dtype in dt.UNSIGNED_INTS:
        return Values(0, math.floor(hi / 2))
    return Values(math.ceil(lo / 2), math.floor(hi / 2))


@op("Add", "Sub")
def add_sub(b: SpecBuilder, p: None) -> None:
    a = b.input("A", values=_half)
    if b.op == "Sub" and a.dtype in dt.UNSIGNED_INTS:
        domain = Values(0, a.interval.lo)  # no unsigned wrap-around
    else:
        domain = _half(a.dtype)
    y = b.input("B", rank=None, dims=broadcastable(a.shape), values=domain)
    iv = a.interval + y.interval if b.op == "Add" else a.interval - y.interval
    b.output(broadcast(a.shape, y.shape), interval=iv)


@op("Mul")
def mul(b: SpecBuilder, p: None) -> None:
    a = b.input("A")
    bound = dt.value_range(a.dtype)[1] / max(a.interval.mag, 1.0)
    y = b.input("B", dims=broadcastable(a.shape), values=Values(-bound, bound))
    b.output(broadcast(a.shape, y.shape), interval=a.interval * y.interval)


@op("Div")
def div(b: SpecBuilder, p: None) -> None:
    # Integer division: both operands non-negative, so truncation and floor agree.
    a = b.input("A", values=lambda d: Values(lo=0) if d in dt.INTS else Values())
    if a.dtype in dt.INTS:
        y = b.input("B", dims=broadcastable(a.shape), values=Values(lo=1))
        iv = Interval(0, a.interval.hi)
    else:
        m = max(0.5, a.interval.mag / dt.value_range(a.dtype)[1])
        y = b.input("B", dims=broadcastable(a.shape), values=Values(-1e3, 1e3, min_abs=m))
        q = a.interval.mag / y.interval.min_abs
        iv = Interval(-q, q)
    b.output(broadcast(a.shape, y.shape), interval=iv)


@op("Pow")
def pow_(b: SpecBuilder, p: None) -> None:
    # A block's whole exponent (LayerNorm's x^2, blocks.Const): a base of any sign.
    e = b.pinned("Y")
    whole = e is not None and e == int(e) and 1 <= e <= 4

    def base(d: int) -> Values:
        if d in dt.INTS:
            return Values(0, 8)
        if whole:
            assert e is not None
            r = min(10.0, 0.99 * dt.value_range(d)[1] ** (1 / e))
            return Values(-r, r)
        return Values(0.1, 10)

    x = b.input("X", values=base)
    out_bound = dt.value_range(x.dtype)[1]
    if whole and x.dtype not in dt.INTS:
        assert e is not None
        y = b.input("Y", dims=broadcastable(x.shape), values=Values(e, e))
        m = x.interval.mag**e
        b.output(broadcast(x.shape, y.shape), interval=Interval(0 if e % 2 == 0 else -m, m))
        return
    if x.dtype in dt.INTS:
        # Integer base: integer exponent only (a fractional one truncates at ties).
        k = max(0, math.floor(math.log(out_bound) / math.log(max(x.interval.hi, 2))))
        y = b.input("Y", dtype=dt.INTS, dims=broadcastable(x.shape), values=Values(0, min(k, 8)))
        iv = Interval(0, max(x.interval.hi, 1) ** y.interval.hi)
    else:
        base = max(x.interval.hi, 1 / x.interval.lo, 1.01)
        k = min(8.0, math.log(out_bound) / math.log(base))
        y = b.input("Y", dims=broadcastable(x.shape), values=Values(-k, k))
        e = y.interval.mag
        iv = Interval(0, base**e)
    b.output(broadcast(x.shape, y.shape), interval=iv)


@op("Max", "Min", "Sum", "Mean")
def variadic(b: SpecBuilder, p: None) -> None:
    n = b.arity(1, 4)
    share = (lambda d: _quarter(d)) if b.op == "Sum" else None
    first = b.input(0, index=0, values=share) if share else b.input(0, index=0)
    xs = [first]
    shape = first.shape
    for i in range(1, n):
        x = b.input(
            0,
            index=i,
            dims=broadcastable(shape),
            values=_quarter(first.dtype) if b.op == "Sum" else Values(),
        )
        xs.append(x)
        shape = broadcast(shape, x.shape)
    ivs = [x.interval for x in xs]
    if b.op == "Max":
        iv = Interval(max(i.lo for i in ivs), max(i.hi for i in ivs))
    elif b.op == "Min":
        iv = Interval(min(i.lo for i in ivs), min(i.hi for i in ivs))
    elif b.op == "Sum":
        iv = Interval(sum(i.lo for i in ivs), sum(i.hi for i in ivs))
    else:
        iv = hull(ivs)
    b.output(shape, interval=iv)


def _quarter(dtype: int) -> Values:
    lo, hi = dt.value_range(dtype)
    return Values(math.ceil(lo / 4), math.floor(hi / 4))


@op("PRelu")
def prelu(b: SpecBuilder, p: None) -> None:
    x = b.input("X")
    # slope * x for x < 0 stays inside the bound: |slope| <= bound / |min(x)|.
    k = min(4.0, dt.value_range(x.dtype)[1] / max(-x.interval.lo, 1.0))
    slope = b.input(
        "slope",
        rank=Ints(0, x.rank),
        dims=unidirectional(x.shape),
        values=Values(-k, k),
        kind="weight",
    )
    neg = Interval(min(x.interval.lo, 0), 0) * slope.interval
    b.output(x.shape, interval=Interval(min(neg.lo, 0), max(x.interval.hi, neg.hi, 0)))


@op("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor")
def compare(b: SpecBuilder, p: None) -> None:
    a = b.input("A")
    y = b.input("B", dims=broadcastable(a.shape))
    b.output(broadcast(a.shape, y.shape))


@op("Where")
def where(b: SpecBuilder, p: None) -> None:
    cond = b.input("condition")
    x = b.input("X", dims=broadcastable(cond.shape))
    shape = broadcast(cond.shape, x.shape)
    y = b.input("Y", dims=broadcastable(shape))
    b.output(broadcast(shape, y.shape), interval=x.interval.union(y.interval))


def _clip_values(dtype: int) -> Values:
    """int64 inside the int32 range: ONNX Runtime 1.31's CPU Clip leaves some int64 values
    beyond it unclipped (onnxfuzz.generate.lang.intervals.INT64_CLIP_SAFE)."""
    if dtype == dt.INT64:
        return Values(-INT64_CLIP_SAFE, INT64_CLIP_SAFE)
    return ANY


@op("Clip")
def clip(b: SpecBuilder, p: None) -> None:
    x = b.input("input", values=_clip_values)
    mn, mx = Interval(-math.inf, -math.inf), Interval(math.inf, math.inf)  # absent: no clip
    if b.optional("min"):
        mn = b.input("min", rank=0, values=Values(hi=0), kind="weight").interval
    if b.optional("max"):
        # max >= min everywhere: ONNX leaves min > max undefined across backends.
        floor_ = max(mn.hi, 0.0)
        mx = b.input("max", rank=0, values=Values(lo=floor_), kind="weight").interval
    # y = min(max(x, min), max), bound by bound.
    iv = x.interval
    b.output(
        x.shape, interval=Interval(min(max(iv.lo, mn.lo), mx.lo), min(max(iv.hi, mn.hi), mx.hi))
    )
