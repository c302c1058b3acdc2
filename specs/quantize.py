"""Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
ConvInteger, QLinearMatMul, QLinearConv (8- and 16-bit integer types; float8/int4/int2/
float4 are not generated).

Rounding ties are the false alarm of quantization: ``round(v)`` of a v within float error
of k + 0.5 flips between backends that compute v slightly differently. So:

* QuantizeLinear: x is a fresh input kept away from x.5 (``avoid="half"``) and the scales
  are powers of two, so x / scale is exact and (for scales >= 1) never a tie.
* QLinearMatMul / QLinearConv: the integer accumulator ``acc`` is exact; it is requantized
  by M = a_scale * b_scale / y_scale. The scales are powers of two and y_scale is chosen so
  that M = 2**j / q with q odd and j >= 0: acc * M then has a fraction j'/q, never 1/2 (at
  least 1/(2q) away), while the float error of acc * M stays far below that.
* DynamicQuantizeLinear: x is fresh (identical in every backend) and kept away from x.5.

* QuantizeLinear of a computed x, in a block only (``blocks.OPTIMIZER_BLOCKS``: ONNX
  Runtime's QDQ clean-ups match a DequantizeLinear -> QuantizeLinear, a Relu or Where between
  them): a block that pins y_scale (``blocks.Const``) to a power of two links x to a
  DequantizeLinear's output at that scale (or to a Relu, a Where with a constant 0, or a
  Conv with weights 1 and a bias on the scale, of it). Its values are then exact multiples
  of the scale, so x / scale is an exact integer in every backend: no tie can arise. The
  spec checks that x is such an op's output (``REQUANT_SOURCES``); the block's constants
  are what keep that op's output on the scale (tests/backends/test_optimizer_blocks.py
  checks the values).

Zero points keep results unsaturated where they are given (values inside the type's range);
an unsigned QuantizeLinear without a zero point clamps negative values to 0, which is
deterministic even at a tie (-0.5 rounds to -0 or -1: both clamp to 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import SpecError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import ANY, Interval, Values
from onnxfuzz.generate.lang.shapes import broadcast, broadcastable
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, WEIGHT, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Multiples, types_or_skip
from onnxfuzz.specs.geometry import conv_geometry, conv_out_shape

_NON_POW2 = "a scale that is not a power of two: x / scale is inexact, so values near a "
_NON_POW2 += "rounding tie flip between backends"
_REQUANT = "arbitrary float scales: the requantized accumulator can land within float error "
_REQUANT += "of a rounding tie (onnxfuzz derives y_scale so that ties cannot arise)"
_NO_Y = "the node omits an optional output before a present one"
NOT_GENERATED = {
    "test_quantizelinear_axis": _NON_POW2 + " (scale 5)",
    "test_quantizelinear_blocked_asymmetric": _NON_POW2,
    "test_quantizelinear_blocked_symmetric": _NON_POW2,
    "test_qlinearmatmul_2D_uint8_float32": _REQUANT,
    "test_qlinearmatmul_3D_uint8_float32": _REQUANT,
    "test_qlinearmatmul_2D_uint8_float16": _REQUANT,
    "test_qlinearmatmul_3D_uint8_float16": _REQUANT,
    "test_qlinearmatmul_2D_int8_float32": _REQUANT,
    "test_qlinearmatmul_3D_int8_float32": _REQUANT,
    "test_qlinearmatmul_2D_int8_float16": _REQUANT,
    "test_qlinearmatmul_3D_int8_float16": _REQUANT,
    "test_qlinearconv": _REQUANT,
    "test_convinteger_with_padding": "a per-channel w_zero_point: ONNX Runtime's ConvInteger "
    "runs per-tensor zero points only",
}

POW2 = (1.0, 2.0, 4.0, 0.5, 0.25)  # QuantizeLinear scales (first = simplest)
X_RANGE = 4.0  # |x| of QuantizeLinear's fresh input
QUANT_TYPES = frozenset({dt.INT8, dt.UINT8, dt.INT16, dt.UINT16})


# --- domains ------------------------------------------------------------------------------
class Pow2Array:
    """A tensor of ``shape`` (a nested list; a number for shape ()) of powers of two."""

    __slots__ = ("shape", "options")

    def __init__(self, shape: tuple[int, ...], options: tuple[float, ...] = POW2) -> None:
        self.shape, self.options = tuple(shape), options

    def __repr__(self) -> str:
        return f"Pow2Array({list(self.shape)})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> Any:
        n = math.prod(self.shape)
        flat = [self.options[s.index(len(self.options))] for _ in range(n)]
        return np.asarray(flat, dtype=np.float64).reshape(self.shape).tolist()

    def contains(self, value: Any) -> bool:
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        return a.shape == self.shape and bool(np.isin(a, self.options).all())


class RequantScale:
    """y_scale = base * q / 2**j with q odd in 1..255 and j in 0..3, so that the
    requantization multiplier base / y_scale = 2**j / q (see the module docstring)."""

    __slots__ = ("base",)

    def __init__(self, base: float) -> None:
        self.base = base

    def __repr__(self) -> str:
        return f"RequantScale({self.base:g} * odd / 2**j)"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> float:
        q = 2 * s.integer(0, 127) + 1
        return self.base * q / 2 ** s.integer(0, 3)

    def contains(self, value: Any) -> bool:
        try:
            r = float(value) / self.base
        except (TypeError, ValueError):
            return False
        for j in range(4):
            q = r * 2**j
            if q == int(q) and int(q) % 2 == 1 and q <= 255:
                return True
        return False


# --- helpers ------------------------------------------------------------------------------
def _range(dtype: int) -> tuple[int, int]:
    lo, hi = dt.value_range(dtype)
    return int(lo), int(hi)


def _clamp(iv: Interval, dtype: int) -> Interval:
    lo, hi = _range(dtype)
    return iv.clamp(lo, hi)


def _scale_shape(x: Tensor, axis: int | None, block: int) -> list[tuple[int, ...]]:
    """Scale shapes: per tensor (), per axis (d,), or blocked (x's shape, ceil(d / block)
    on the axis)."""
    if axis is None:
        return [()]
    ax = axis % x.rank
    if block:
        return [tuple(-(-d // block) if i == ax else d for i, d in enumerate(x.shape))]
    return [(), (x.shape[ax],)]


def _axis_block(b: SpecBuilder, x: Tensor) -> tuple[int | None, int]:
    """The ``axis`` attribute (default 1, meaningful only with a 1-D or blocked scale)
    and, from version 21, ``block_size`` (0: not blocked). Returns (axis or None when
    per-axis scales are impossible, block_size)."""
    if x.rank == 0:
        return None, 0
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), 1)
    if not -x.rank <= axis < x.rank:  # the default 1 on a 1-D x: per tensor only
        return None, 0
    block = 0
    d = x.shape[axis % x.rank]
    # ONNX Runtime takes a one-element scale for per-tensor quantization and then rejects
    # block_size: the blocked scale keeps >= 2 elements (ceil(d / block) >= 2 when x's
    # other dims are all 1).
    top = d if math.prod(x.shape) > d else d - 1
    if b.version >= 21 and top >= 1:
        block = b.attr("block_size", Ints(1, top), 0)
    return axis, block


def _prefer(types: Sequence[int], want: int) -> int:
    return want if want in types else types[0]


def _zp_values(dtype: int, q: Interval) -> Values:
    """Zero points that keep q + zp inside ``dtype`` (no saturation), q the rounded
    quotient's interval; the whole range where q does not fit (never for fresh x)."""
    if dtype not in QUANT_TYPES:  # check mode: float8/int4 zero points (not generated)
        return Values()
    lo, hi = _range(dtype)
    zlo, zhi = max(lo, lo - math.floor(q.lo)), min(hi, hi - math.ceil(q.hi))
    return Values(zlo, zhi) if zlo <= zhi else Values(lo, hi)


# --- QuantizeLinear -----------------------------------------------------------------------
@op("QuantizeLinear")
def quantize_linear(b: SpecBuilder, p: None) -> None:
    # y = saturate(round(x / y_scale) + y_zero_point), round half to even.
    has_zp = b.optional("y_zero_point")
    out_tv = b.info.input_type["y_zero_point"]
    outs = types_or_skip(b, out_tv, QUANT_TYPES)
    requant = b.pinned("y_scale")  # a block's re-quantization (see the module docstring)
    if requant not in POW2:
        requant = None
    if requant is None:
        x = b.input("x", values=Values(-X_RANGE, X_RANGE, avoid="half"))
        axis, block = _axis_block(b, x)
    else:
        x = b.input("x")
        _check_requantized(x)
        axis, block = None, 0  # per tensor: the scale the block pins
    out = MISSING
    if b.version >= 21:
        # output_dtype: with a zero point it must equal the zero point's type.
        default = 0 if has_zp or dt.UINT8 in outs else MISSING
        out = b.attr("output_dtype", OneOf(outs), default)
        if out == 0:
            out = MISSING
    shapes = _scale_shape(x, axis, block)
    scale_tv = b.info.input_type["y_scale"]
    scale_dt = _prefer(types_or_skip(b, scale_tv), x.dtype)
    scales = b.draw("y_scale", _ScaleChoice(shapes)) if requant is None else requant
    b.const("y_scale", scales, dtype=scale_dt)
    arr = np.asarray(scales, dtype=np.float64)
    # round(x / s) over every scale s.
    q = Interval(
        math.floor(min(x.interval.lo / arr.min(), x.interval.lo / arr.max())),
        math.ceil(max(x.interval.hi / arr.min(), x.interval.hi / arr.max())),
    )
    if has_zp:
        zp = b.input(
            "y_zero_point",
            dtype=outs if out is MISSING else out,
            rank=len(arr.shape),
            dims=list(arr.shape),
            values=lambda d: _zp_values(d, q),
            kind=WEIGHT,
        )
        y_dt, iv = zp.dtype, q + zp.interval
    else:
        y_dt, iv = (dt.UINT8 if out is MISSING else out), q
    b.output(x.shape, dtype=y_dt, interval=_clamp(iv, y_dt))


# The ops whose output a block's re-quantizing QuantizeLinear may take: a DequantizeLinear
# at the pinned scale, a Relu of it, a Where of it and the constant 0, a one-channel Conv
# of it with weights 1 and a bias on the scale (ORT's QDQ patterns, blocks.py).
REQUANT_SOURCES = ("DequantizeLinear", "Relu", "Where", "Conv")


def _check_requantized(x: Tensor) -> None:
    """A block pinned y_scale: x must be the output of one of ``REQUANT_SOURCES`` (the
    block's link, not glue and not another tensor; node outputs are named after their op),
    else the block is wrong (x / scale could fall within float error of a tie)."""
    made_by = x.name.split("_out")[0].rstrip("0123456789")
    if x.origin == "node" and made_by in {op.lower() for op in REQUANT_SOURCES}:
        return
    raise SpecError(
        "QuantizeLinear",
        "x",
        f"a block pinned y_scale but x is {x.name} ({x.origin}): link x to the output of "
        f"one of {', '.join(REQUANT_SOURCES)} at that scale (blocks.OPTIMIZER_BLOCKS)",
    )


class _ScaleChoice:
    """A power-of-two scale tensor of one of the offered shapes."""

    __slots__ = ("shapes",)

    def __init__(self, shapes: list[tuple[int, ...]]) -> None:
        self.shapes = shapes

    def __repr__(self) -> str:
        return f"_ScaleChoice({self.shapes})"

    def empty(self) -> bool:
        return not self.shapes

    def draw(self, s: ChoiceStream) -> Any:
        return Pow2Array(self.shapes[s.index(len(self.shapes))]).draw(s)

    def contains(self, value: Any) -> bool:
        return any(Pow2Array(sh).contains(value) for sh in self.shapes)


# --- DequantizeLinear ---------------------------------------------------------------------
# An int32 x within 2**18: DequantizeLinear's scale stays >= bound / 2 / 2**18, so a
# float16 scale's least value (1 / 16 of it) is still a normal number. A subnormal one
# does not hold its drawn value (an x near 2**31 asked for 1e-8) and a backend that
# flushes subnormals to zero would differ by the whole output.
_INT32_X = Values(-(2**18), 2**18)


def _dequantized_values(dtype: int) -> Values:
    return _INT32_X if dtype == dt.INT32 else ANY


@op("DequantizeLinear")
def dequantize_linear(b: SpecBuilder, p: None) -> None:
    # y = (x - x_zero_point) * x_scale.
    has_zp = b.optional("x_zero_point")
    x = b.input("x", values=_dequantized_values)
    axis, block = _axis_block(b, x)
    out = MISSING
    if b.version >= 23 and dt.FLOAT in b.types("T3"):
        # An explicit float16 output_dtype makes some graphs fail at session start in ONNX
        # Runtime 1.31 (its fp16 cast insertion retypes the output but keeps the attribute:
        # "Type (tensor(float)) of output arg (InsertedPrecisionFreeCast_...) does not match
        # expected type (tensor(float16))"): only float32 is written out; a float16 output
        # comes from a float16 x_scale without the attribute.
        out = b.attr("output_dtype", OneOf([dt.FLOAT]), 0)
        if out == 0:
            out = MISSING
    shapes = _scale_shape(x, axis, block)
    # |x - zp| <= |x| + |zp|; the scale keeps |y| <= bound / 2.
    lo, hi = _range(x.dtype)
    diff = x.interval.mag + (0 if x.dtype == dt.INT32 else max(-lo, hi))

    def scale_values(d: int) -> Values:
        bound = dt.value_range(d if out is MISSING else out)[1]
        s = min(1.0, bound / 2 / max(diff, 1.0))
        return Values(s / 16, s)

    scale = b.input(
        "x_scale",
        rank=Ints(0, 1) if len(shapes) > 1 else len(shapes[0]),
        dims=lambda r: list(next(s for s in shapes if len(s) == r)),
        values=scale_values,
        kind=WEIGHT,
    )
    centered = x.interval
    if has_zp:
        # An int32 x takes a zero point of 0 only.
        zp = b.input(
            "x_zero_point",
            rank=scale.rank,
            dims=list(scale.shape),
            values=Values(0, 0) if x.dtype == dt.INT32 else Values(),
            kind=WEIGHT,
        )
        centered = x.interval - zp.interval
    b.output(
        x.shape,
        dtype=scale.dtype if out is MISSING else out,
        interval=centered * scale.interval,
    )


# --- DynamicQuantizeLinear ----------------------------------------------------------------
@op("DynamicQuantizeLinear")
def dynamic_quantize_linear(b: SpecBuilder, p: None) -> None:
    # y_scale = (max(x, 0) - min(x, 0)) / 255, y_zero_point = round(-min(x, 0) / y_scale),
    # y = saturate(round(x / y_scale) + y_zero_point): uint8. x is fresh (so every backend
    # sees the same values) and away from x.5.
    x = b.input("x", values=Values(-X_RANGE, X_RANGE, avoid="half"))
    span = max(x.interval.hi, 0.0) - min(x.interval.lo, 0.0)
    b.output(x.shape, interval=Interval(0, 255))
    b.output((), interval=Interval(0.0, span / 255))
    b.output((), interval=Interval(0, 255))


# --- MatMulInteger / QLinearMatMul --------------------------------------------------------
def _matmul_b_dims(a: Tensor):
    """B of a batched matmul with A (rank >= 2): batch dims broadcast, then (K, N)."""
    k, batch = a.shape[-1], a.shape[:-2]
    return lambda r: list(broadcastable(batch)(r - 2)) + [k, None]


def _matmul_shape(a: Tensor, w: Tensor) -> tuple[int, ...]:
    return broadcast(a.shape[:-2], w.shape[:-2]) + (a.shape[-2], w.shape[-1])


def _acc(x: Interval, w: Interval, k: int) -> Interval:
    """A sum of ``k`` products x*w."""
    t = x * w
    return Interval(min(t.lo, 0.0) * k, max(t.hi, 0.0) * k)


@op("MatMulInteger")
def matmul_integer(b: SpecBuilder, p: None) -> None:
    # Y = (A - a_zero_point) @ (B - b_zero_point) in int32; A and B are 8-bit, so with
    # K <= max_dim the sum stays far inside int32.
    has_azp = b.optional("a_zero_point")
    has_bzp = b.optional("b_zero_point")
    a = b.input("A", rank=Ints(2, 4))
    w = b.input("B", rank=Ints(2, 4), dims=_matmul_b_dims(a))
    ca, cw = a.interval, w.interval
    if has_azp:
        # ONNX Runtime takes a per-tensor zero point for A (a scalar or one element).
        zp = b.input("a_zero_point", rank=Ints(0, 1), dims=lambda r: [1] * r, kind=WEIGHT)
        ca = ca - zp.interval
    if has_bzp:
        # B's zero point: per tensor, or per column (N) for a 2-D B (ONNX Runtime).
        cols = OneOf((1, w.shape[-1])) if w.rank == 2 else 1
        zp = b.input("b_zero_point", rank=Ints(0, 1), dims=lambda r: [cols] * r, kind=WEIGHT)
        cw = cw - zp.interval
    b.output(_matmul_shape(a, w), interval=_acc(ca, cw, a.shape[-1]))


def _requant_out(acc: Interval, ms: list[float], zp: Interval, dtype: int) -> Interval:
    """saturate(round(acc * M) + zp) over the multipliers ``ms``."""
    lo = min(math.floor(acc.lo * m) for m in ms)
    hi = max(math.ceil(acc.hi * m) for m in ms)
    return _clamp(Interval(lo, hi) + zp, dtype)


def _qscale(b: SpecBuilder, name: str, shapes: list[tuple[int, ...]] | None = None) -> list[float]:
    """A power-of-two scale constant of one of ``shapes`` (default: a scalar); float32,
    or the TS type from QLinearMatMul-21."""
    v = b.draw(name, _ScaleChoice(shapes or [()]))
    tv = b.info.input_type[name]
    b.const(name, v, dtype=_prefer(types_or_skip(b, tv), dt.FLOAT))
    return np.asarray(v, dtype=np.float64).reshape(-1).tolist()


@op("QLinearMatMul")
def qlinear_matmul(b: SpecBuilder, p: None) -> None:
    # y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp).
    a = b.input("a", rank=Ints(2, 4))
    a_s = _qscale(b, "a_scale")[0]
    azp = b.input("a_zero_point", rank=0, kind=WEIGHT)
    w = b.input("b", rank=Ints(2, 4), dims=_matmul_b_dims(a))
    b_s = _qscale(b, "b_scale")[0]
    bzp = b.input("b_zero_point", rank=0, kind=WEIGHT)
    y_s = b.draw("y_scale", RequantScale(a_s * b_s))
    tv = b.info.input_type["y_scale"]
    b.const("y_scale", y_s, dtype=_prefer(types_or_skip(b, tv), dt.FLOAT))
    yzp = b.input("y_zero_point", rank=0, kind=WEIGHT)
    acc = _acc(a.interval - azp.interval, w.interval - bzp.interval, a.shape[-1])
    out = _requant_out(acc, [a_s * b_s / y_s], yzp.interval, yzp.dtype)
    b.output(_matmul_shape(a, w), interval=out)


# --- ConvInteger / QLinearConv ------------------------------------------------------------
def _conv_weight(b: SpecBuilder, name: str, x: Tensor, group: int, k_hi: list[int]) -> Tensor:
    dims = [Multiples(group, b.max_dim), x.shape[1] // group] + [Ints(1, h) for h in k_hi]
    w = b.input(name, dims=dims, kind=WEIGHT)
    b.attr("kernel_shape", OneOf([list(w.shape[2:])]), None)
    return w


@op("ConvInteger")
def conv_integer(b: SpecBuilder, p: None) -> None:
    # Y = conv(x - x_zero_point, w - w_zero_point) in int32 (padding contributes zeros);
    # |Y| <= fan_in * 255 * 255, far inside int32 for the kernel bounds.
    has_xzp = b.optional("x_zero_point")
    has_wzp = b.optional("w_zero_point")
    x = b.input("x", rank=Ints(3, 5))
    geometry = conv_geometry(b, x)
    w = _conv_weight(b, "w", x, geometry[0], geometry[5])
    cx, cw = x.interval, w.interval
    if has_xzp:
        cx = cx - b.input("x_zero_point", rank=0, kind=WEIGHT).interval
    if has_wzp:
        # "a scalar or a 1-D tensor ... If it's a 1-D tensor, its number of elements should
        # be equal to the number of output channels (M)": per tensor or per channel. ONNX
        # Runtime runs a per-tensor zero point only: a scalar, or a 1-element vector where
        # M = 1 (one element for M > 1 is outside the standard).
        m = w.shape[0]
        rank = Ints(0, 1) if m == 1 else 0
        zp = b.input("w_zero_point", rank=rank, dims=lambda r: [1] * r, kind=WEIGHT)
        cw = cw - zp.interval
    fan_in = w.shape[1] * math.prod(w.shape[2:])
    b.output(conv_out_shape(x, w, geometry), interval=_acc(cx, cw, fan_in))


@op("QLinearConv")
def qlinear_conv(b: SpecBuilder, p: None) -> None:
    # y = saturate(round((conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale / y_scale) + y_zp),
    # w_scale per tensor or per output channel.
    has_bias = b.optional("B")
    x = b.input("x", rank=Ints(3, 5))
    geometry = conv_geometry(b, x)
    x_s = _qscale(b, "x_scale")[0]
    xzp = b.input("x_zero_point", rank=0, kind=WEIGHT)
    w = _conv_weight(b, "w", x, geometry[0], geometry[5])
    m = w.shape[0]
    w_s = _qscale(b, "w_scale", [(), (m,)])  # per tensor or per output channel
    wzp = b.input("w_zero_point", rank=0, kind=WEIGHT)
    y_s = b.draw("y_scale", RequantScale(x_s * min(w_s)))
    b.const("y_scale", y_s, dtype=dt.FLOAT)
    yzp = b.input("y_zero_point", rank=0, kind=WEIGHT)
    fan_in = w.shape[1] * math.prod(w.shape[2:])
    acc = _acc(x.interval - xzp.interval, w.interval - wzp.interval, fan_in)
    if has_bias:
        bias = b.input("B", dims=[m], values=Values(-(1 << 16), 1 << 16), kind=WEIGHT)
        acc = acc + bias.interval
    out = _requant_out(acc, [x_s * s / y_s for s in w_s], yzp.interval, yzp.dtype)
    b.output(conv_out_shape(x, w, geometry), interval=out)
