"""Integer bit operations and the remainder: BitShift, BitwiseAnd/Or/Xor/Not, Mod, BitCast.

Order: A (any rank and dims, values narrowed so every result fits) -> attributes -> B
(broadcastable with A) -> output (the broadcast shape).

Intervals. ``value_range`` clips 64-bit types to +-2**62, so inputs are narrowed to a
two's-complement range ``[-2**k, 2**k - 1]`` (``[0, 2**k - 1]`` unsigned) that And, Or,
Xor and Not map into itself: the output interval is the smallest such range holding both
inputs, always inside the dtype's bound.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import OneOf
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.shapes import broadcast, broadcastable
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder
from onnxfuzz.generate.lang.spec_domains import is_int

NOT_GENERATED = {
    "test_bitcast_int32_to_float32": "integer-to-float BitCast is drawn only from integers "
    "whose bit patterns are normal, positive floats (NaN, inf and -0.0 patterns compare "
    "unequal or unordered across backends)",
    "test_bitcast_int64_to_float64": "as test_bitcast_int32_to_float32",
    "test_mod_mixed_sign_float64": "float Mod divisors are drawn as powers of two (1, 2, 4), "
    "so fmod of a dividend kept away from whole numbers never sits at a multiple of the "
    "divisor (a jump of |y| after float error)",
    "test_mod_mixed_sign_float32": "as test_mod_mixed_sign_float64",
    "test_mod_mixed_sign_float16": "as test_mod_mixed_sign_float64",
    **{
        f"test_mod_float{b}_mixed_sign_fmod_0": "as test_mod_mixed_sign_float64"
        for b in (16, 32, 64)
    },
    **{
        f"test_mod_float_edge_cases_fmod_0_float{b}": "infinite, NaN and zero operands (the "
        "special cases Mod-28 lists) are not generated: outputs are compared as finite values"
        for b in (16, 32, 64)
    },
    "test_bitshift_left_int8": "a left shift's amounts are bounded by the largest |X| of "
    "the whole tensor (16 << 3 would pass int8's sign bit), though this case pairs them "
    "elementwise",
    **{
        f"test_bitshift_left_int{b}_overflow": "left shifts that push set bits into or past "
        "the sign bit are not generated (BitShift-28 discards them; a signed overflow in C)"
        for b in (8, 32)
    },
    **{
        f"test_bitshift_{d}_int{b}_{k}": "shift amounts below 0 or at least the bit width "
        "are not generated (BitShift-28 defines them by sign extension; C shifts leave them "
        "undefined, so backends built on them differ)"
        for d in ("left", "right")
        for b in (8, 32)
        for k in ("shift_ge_width", "negative_shift")
    },
}


def _bits(dtype: int) -> int:
    return 8 * dt.np_dtype(dtype).itemsize


def _closed(dtype: int) -> Values:
    """The widest two's-complement range inside the dtype's bound: bitwise results of
    values in it stay in it. For 64-bit types 2**61 (a float holds 2**61 - 1 as 2**61,
    so a value of 2**61 may slip in: its results still lie inside +-2**62)."""
    lo, hi = dt.value_range(dtype)
    k = min(_bits(dtype) - (0 if dtype in dt.UNSIGNED_INTS else 1), 61)
    if dtype in dt.UNSIGNED_INTS:
        return Values(0, min(hi, 2**k - 1))
    return Values(max(lo, -(2**k)), min(hi, 2**k - 1))


def _span(*ivs: Interval) -> Interval:
    """The smallest range [-2**j, 2**j - 1] (or [0, 2**j - 1] for non-negative values)
    holding every interval: And, Or, Xor of values in it stay in it."""
    lo = min(int(i.lo) for i in ivs)
    hi = max(int(i.hi) for i in ivs)
    j = 0
    while hi > 2**j - 1 or lo < -(2**j):
        j += 1
    return Interval(0 if lo >= 0 else -(2**j), 2**j - 1)


@op("BitwiseAnd", "BitwiseOr", "BitwiseXor")
def bitwise_binary(b: SpecBuilder, p: None) -> None:
    a = b.input("A", values=_closed)
    y = b.input("B", dims=broadcastable(a.shape), values=_closed(a.dtype))
    iv = _span(a.interval, y.interval)
    if b.op == "BitwiseAnd" and a.interval.lo >= 0 and y.interval.lo >= 0:
        iv = Interval(0, min(a.interval.hi, y.interval.hi))  # And never sets a bit
    b.output(broadcast(a.shape, y.shape), interval=iv)


@op("BitwiseNot")
def bitwise_not(b: SpecBuilder, p: None) -> None:
    # ~x = -x - 1 (signed), MAX - x (unsigned). uint64's MAX - x lies above the 2**62
    # bound for every x inside it, so uint64 is not generated.
    x = b.input("X", dtype=set(b.types("T")) - {dt.UINT64}, values=_closed)
    iv = x.interval
    if x.dtype in dt.UNSIGNED_INTS:
        m = 2 ** _bits(x.dtype) - 1
        out = Interval(m - iv.hi, m - iv.lo)
    else:
        out = Interval(-iv.hi - 1, -iv.lo - 1)
    b.output(x.shape, interval=out)


@op("BitShift")
def bitshift(b: SpecBuilder, p: None) -> None:
    # Unsigned types (BitShift-11), signed ones too from BitShift-28 (a right shift
    # sign-extends). Shift amounts lie in [0, bits - 1] (28 defines wider ones, the C
    # backends may not); a left shift never pushes a set bit past the sign bit or the
    # dtype's bound: Y <= log2(bound / max|X|).
    x = b.input("X")
    bits = _bits(x.dtype)
    hi = dt.value_range(x.dtype)[1]
    direction = b.attr("direction", OneOf(["LEFT", "RIGHT"]))
    xlo, xhi = int(x.interval.lo), int(x.interval.hi)
    if direction == "LEFT":
        room = int(math.floor(math.log2(hi / max(xhi, -xlo, 1))))
        smax = max(0, min(bits - 1, room))
    else:
        smax = bits - 1
    y = b.input("Y", dims=broadcastable(x.shape), values=Values(0, smax))
    slo, shi = int(y.interval.lo), int(y.interval.hi)
    # x << s and x >> s (Python's >> is arithmetic) are monotone in x for a fixed s and
    # in s for a fixed x: the extremes lie at the corners.
    shift = (lambda v, s: v << s) if direction == "LEFT" else (lambda v, s: v >> s)
    corners = [shift(v, s) for v in (xlo, xhi) for s in (slo, shi)]
    b.output(broadcast(x.shape, y.shape), interval=Interval(min(corners), max(corners)))


class Pow2Divisors:
    """A float Mod divisor: a constant tensor of powers of two (+-1, 2, 4), broadcastable
    with the dividend. The dividend is k + f with f in [0.15, 0.85] (``avoid="integer"``),
    so x mod y = (k mod y) + f keeps 0.15 away from a multiple of y: fmod never jumps."""

    __slots__ = ("pattern", "max_rank")

    OPTIONS = (1.0, 2.0, 4.0, -1.0, -2.0, -4.0)

    def __init__(self, shape: tuple[int, ...], max_rank: int) -> None:
        self.pattern = broadcastable(shape)
        self.max_rank = max_rank

    def __repr__(self) -> str:
        return f"Pow2Divisors(rank<={self.max_rank})"

    def empty(self) -> bool:
        return self.max_rank < 0

    def draw(self, s: ChoiceStream) -> Any:
        rank = s.integer(0, self.max_rank)
        shape = []
        for e in self.pattern(rank):
            if e is None:
                shape.append(s.integer(1, 4))
            else:
                shape.append(e.draw(s))
        n = math.prod(shape)
        vals = [self.OPTIONS[s.index(len(self.OPTIONS))] for _ in range(n)]
        return np.asarray(vals, dtype=np.float64).reshape(shape).tolist()

    def contains(self, value: Any) -> bool:
        arr = np.asarray(value, dtype=np.float64)
        if arr.ndim > 8 or any(d < 1 for d in arr.shape):
            return False
        pat = self.pattern(arr.ndim)
        if any(e is not None and not e.contains(d) for e, d in zip(pat, arr.shape, strict=True)):
            return False
        return bool(np.isin(arr, self.OPTIONS).all())


@op("Mod")
def mod(b: SpecBuilder, p: None) -> None:
    def dividend(d: int) -> Values:
        if d in dt.FLOATS:
            return Values(avoid="integer")
        lo, hi = dt.value_range(d)
        # INT_MIN % -1 overflows in C: keep the dividend above the type's minimum.
        return Values(lo + 1 if d in dt.SIGNED_INTS else lo, hi)

    x = b.input("A", values=dividend)
    if x.dtype in dt.FLOATS:
        # Mod-13 requires fmod=1 for floats: the result has the dividend's sign, |r| < |y|.
        # Mod-28 defines fmod=0 for floats too (A - floor(A / B) * B: the divisor's sign).
        if b.version >= 28:
            fmod = b.attr("fmod", OneOf([1, 0]), 0)
        else:
            fmod = 1
            b.set_attr("fmod", 1)
        divs = b.draw("B", Pow2Divisors(x.shape, b.max_rank))
        y = b.const("B", divs, dtype=x.dtype)
        ym = y.interval.mag
        iv = x.interval
        if fmod == 1:
            out = Interval(max(min(iv.lo, 0), -ym), min(max(iv.hi, 0), ym))
        else:
            out = Interval(-ym if y.interval.lo < 0 else 0, ym if y.interval.hi > 0 else 0)
        b.output(broadcast(x.shape, y.shape), interval=out)
        return
    fmod = b.attr("fmod", OneOf([0, 1]), 0)
    if x.dtype in dt.UNSIGNED_INTS:
        y = b.input("B", dims=broadcastable(x.shape), values=Values(lo=1))
    else:
        y = b.input("B", dims=broadcastable(x.shape), values=Values(min_abs=1))
    r = y.interval.mag - 1  # |x mod y| < |y|
    if fmod == 0:
        # Python's rule: the result takes the divisor's sign.
        iv = Interval(-r if y.interval.lo < 0 else 0, r if y.interval.hi > 0 else 0)
    else:
        # C's fmod: the dividend's sign, and never larger than the dividend.
        xi = x.interval
        iv = Interval(max(min(xi.lo, 0), -r), min(max(xi.hi, 0), r))
    b.output(broadcast(x.shape, y.shape), interval=iv)


# --- BitCast ----------------------------------------------------------------------------
_HALF = frozenset({dt.FLOAT16, dt.BFLOAT16})
_TINY = 2.0**-6  # smallest float magnitude a bit pattern may stand for: no denormals


def _as(value: float, src: int, dst: int) -> int | float:
    """The value of ``value``'s bit pattern (as ``src``) read as ``dst``."""
    arr = np.asarray([value]).astype(dt.np_dtype(src))
    return arr.view(dt.np_dtype(dst))[0].item()


def _float_bits(dtype: int, itype: int, v: float) -> int:
    return int(_as(v, dtype, itype))


class ToType:
    """BitCast's ``to``: an element type of the same width as the input."""

    __slots__ = ("options",)

    def __init__(self, options: list[int]) -> None:
        self.options = tuple(options)

    def __repr__(self) -> str:
        return f"ToType({[dt.NAMES[o] for o in self.options]})"

    def empty(self) -> bool:
        return not self.options

    def draw(self, s: ChoiceStream) -> int:
        return self.options[s.index(len(self.options))]

    def contains(self, value: Any) -> bool:
        return is_int(value) and int(value) in self.options


@op("BitCast")
def bitcast(b: SpecBuilder, p: None) -> None:
    # Bit patterns must stay meaningful: a float read from an integer is kept a normal
    # number inside the float bound (no NaN, Inf or denormal: backends flush denormals
    # differently); an integer read from a float stays inside the integer's bound.
    # Positive floats order like their bit patterns, so intervals map monotonically.
    def values(d: int) -> Values:
        if d in dt.FLOATS:
            # Positive normal floats only (-0.0 reads as INT_MIN); for 64-bit patterns
            # the float stays <= 2 (bits(2.0) = 2**62, the int64 bound).
            return Values(_TINY, 2.0 if _bits(d) == 64 else None)
        if d in dt.INTS and _bits(d) == 64:
            return Values(0, None)  # a negative int64 reads as a uint64 above 2**62
        return Values()

    # No 16-bit floats on either side: ONNX Runtime 1.31 computes float16 ops that lack a
    # kernel in float32 (casts inserted even with optimizations off), and then rejects a
    # BitCast next to them ("input type has 32 bits and output type has 16 bits").
    x = b.input("input", dtype=set(b.types("T1")) - _HALF, values=values)
    width = _bits(x.dtype)
    # Float to another float of the same width (float16 <-> bfloat16) is left out: the
    # pattern of one is rarely a bounded number in the other.
    options = [
        t
        for t in b.types("T2")
        if t not in _HALF and _bits(t) == width and (t == x.dtype or not {t, x.dtype} <= dt.FLOATS)
    ]
    if x.dtype in dt.INTS:
        # An integer may only become a float if its values are patterns of normal
        # floats inside the bound; otherwise it is read as integers only.
        ok_float = []
        for t in options:
            if t in dt.FLOATS:
                itype = x.dtype
                lo = _float_bits(t, itype, _TINY)
                hi = _float_bits(t, itype, dt.value_range(t)[1])
                if lo <= x.interval.lo and x.interval.hi <= hi:
                    ok_float.append(t)
        options = [t for t in options if t not in dt.FLOATS or t in ok_float]
    to = b.attr("to", ToType(options))
    iv = x.interval
    if to == x.dtype:
        out = iv
    elif x.dtype in dt.FLOATS:
        # Positive floats: monotone; one step of slack for the interval's float rounding.
        out = Interval(_as(iv.lo, x.dtype, to) - 1, _as(iv.hi, x.dtype, to) + 1)
        out = out.clamp(*dt.value_range(to))
    elif to in dt.FLOATS:
        out = Interval(_as(iv.lo, x.dtype, to), _as(iv.hi, x.dtype, to))
    else:
        m = 2**width
        pieces = []
        if iv.lo < 0:  # negatives read as unsigned: + 2**width
            pieces.append(Interval(iv.lo + m, min(iv.hi, -1) + m))
        if iv.hi >= 0:
            nonneg = Interval(max(iv.lo, 0), iv.hi)
            if to in dt.SIGNED_INTS and nonneg.hi >= m // 2:  # the top half reads negative
                if nonneg.lo < m // 2:
                    pieces.append(Interval(nonneg.lo, m // 2 - 1))
                pieces.append(Interval(max(nonneg.lo, m // 2) - m, nonneg.hi - m))
            else:
                pieces.append(nonneg)
        out = Interval(min(q.lo for q in pieces), max(q.hi for q in pieces))
    b.output(x.shape, dtype=to, interval=out)
