"""Sliding-window geometry shared by the convolution, pooling and sampling specs: output
lengths, the Conv attribute domains over an input, and value bounds of a weighted sum.
"""

from __future__ import annotations

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.spec_api import SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Each, divisors

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
SAME = ("SAME_UPPER", "SAME_LOWER")
CONV_KERNEL = 5  # largest Conv kernel dim (keeps the fan-in, hence W's bound, sane)
CONV_PAD = 2  # largest explicit Conv pad
STRIDE = 3  # largest stride
DILATION = 3  # largest dilation


# --- geometry -------------------------------------------------------------------------------
def window_out(
    size: int, k: int, stride: int, dilation: int, pb: int, pe: int, ceil_mode: int = 0
) -> int:
    """Output length of a sliding window (Conv, pools) over explicit padding.
    With ceil_mode the last window must start inside the input or its left padding
    (ONNX and ONNX Runtime drop a window that would start in the right padding)."""
    span = size + pb + pe - ((k - 1) * dilation + 1)
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pb:
        out -= 1
    return out


def same_out(size: int, stride: int) -> int:
    """auto_pad SAME_UPPER / SAME_LOWER: ceil(size / stride)."""
    return -(-size // stride)


def ones(n: int) -> list[int]:
    return [1] * n


def weight_values(x: Interval, dtype: int, max_fan_in: int) -> Values:
    """|W| such that max_fan_in * |X| * |W| <= bound / 2 (and |W| <= 1)."""
    w = min(1.0, dt.value_range(dtype)[1] / 2 / (max_fan_in * max(x.mag, 1.0)))
    return Values(-w, w)


def bias_values(dtype: int) -> Values:
    half = dt.value_range(dtype)[1] / 2
    return Values(-half, half)


def conv_interval(x: Interval, w: Interval, fan_in: int, bias: Interval | None) -> Interval:
    """A sum of at most fan_in products x*w (padding adds zeros), plus the bias."""
    t = x * w
    iv = Interval(min(t.lo, 0.0) * fan_in, max(t.hi, 0.0) * fan_in)
    return iv + bias if bias is not None else iv


def conv_geometry(b: SpecBuilder, x: Tensor) -> tuple[int, list, list, list, str, list[int]]:
    """Conv's attributes over X (N, C, D1..Dn): group, strides, dilations, pads, auto_pad,
    and the largest kernel dims that keep every output >= 1 (the dilated kernel fits the
    padded input). Shared by Conv, ConvInteger and QLinearConv."""
    n, c, spatial = x.rank - 2, x.shape[1], x.shape[2:]
    group = b.attr("group", OneOf(divisors(c)), 1)
    auto_pad = b.attr("auto_pad", OneOf(AUTO_PADS), "NOTSET")
    strides = b.attr("strides", Each([Ints(1, STRIDE)] * n), ones(n))
    if auto_pad in SAME:
        # ONNX Runtime rejects dilations with SAME_UPPER/SAME_LOWER for Conv.
        dilations = b.attr("dilations", OneOf([ones(n)]), ones(n))
    else:
        dilations = b.attr("dilations", Each([Ints(1, DILATION)] * n), ones(n))
    pads = [0] * (2 * n)
    if auto_pad == "NOTSET":
        pads = b.attr("pads", Each([Ints(0, CONV_PAD)] * (2 * n)), pads)
    if auto_pad in SAME:
        k_hi = [min(CONV_KERNEL, d) for d in spatial]
    else:
        k_hi = [
            min(CONV_KERNEL, (d + pads[i] + pads[n + i] - 1) // dilations[i] + 1)
            for i, d in enumerate(spatial)
        ]
    return group, strides, dilations, pads, auto_pad, k_hi


def conv_out_shape(x: Tensor, w: Tensor, geometry: tuple) -> list[int]:
    """(N, M, out dims) of a Conv of X with W under ``geometry``."""
    _, strides, dilations, pads, auto_pad, _ = geometry
    n, kernel = x.rank - 2, w.shape[2:]
    if auto_pad in SAME:
        out = [same_out(d, s) for d, s in zip(x.shape[2:], strides, strict=True)]
    else:
        out = [
            window_out(d, kernel[i], strides[i], dilations[i], pads[i], pads[n + i])
            for i, d in enumerate(x.shape[2:])
        ]
    return [x.shape[0], w.shape[0]] + out
