"""Pooling: MaxPool, AveragePool, LpPool over X of shape (N, C, D1, ..., Dn), n = 1..3,
and the global pools.

Order: X (every dim free) -> [p] -> auto_pad -> kernel_shape -> dilations -> strides
-> pads -> ceil_mode -> the op's own flags -> Y with ONNX's exact output shape.

Window domains: the dilated kernel fits the unpadded input ((k - 1) * d + 1 <= D) and every
pad is below the kernel (ONNX Runtime requires it). Together they put at least one input
element in every window, so no window is all padding: MaxPool never emits -inf and an
AveragePool without count_include_pad never divides by zero.
"""

from __future__ import annotations

import math

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Each, KernelDims
from onnxfuzz.specs.geometry import AUTO_PADS, DILATION, SAME, STRIDE, ones, same_out, window_out

LP_P = 4  # largest p of LpPool / GlobalLpPool drawn freely

_CEIL_WINDOW = (
    "ceil_mode's last window starts in the right padding: ONNX Runtime and the "
    "reference drop it, ONNX's shape inference keeps it (the output shapes differ)"
)
NOT_GENERATED = {
    "test_maxpool_2d_ceil_output_size_reduce_by_one": _CEIL_WINDOW,
    "test_averagepool_2d_ceil_last_window_starts_on_pad": _CEIL_WINDOW,
}


def _max_dilation(k: int, size: int) -> int:
    """Largest d with (k - 1) * d + 1 <= size (the dilated kernel fits the input)."""
    return DILATION if k == 1 else max(1, min(DILATION, (size - 1) // (k - 1)))


def _ceil_agrees(
    auto_pad: str,
    size: int,
    k: int,
    stride: int,
    dilation: int,
    pb: int,
    pe: int,
    partial_ok: bool = True,
) -> bool:
    """Do ONNX's shape inference, ONNX Runtime and the reference agree under ceil_mode?
    ONNX Runtime (and the reference) drop a last window that would start in the right
    padding, ONNX's shape inference keeps it. (Under SAME, strides <= kernel make the
    padded span a multiple of the stride: ceil and floor agree.)"""
    if auto_pad in SAME:
        return True
    span = size + pb + pe - ((k - 1) * dilation + 1)
    if span % stride and (pb or pe or not partial_ok):
        # An extra, partial last window over explicit padding: backends divide an average
        # by different counts there (ONNX Runtime vs the reference evaluator), so ceil_mode
        # is offered with padding only where it adds no window. LpPool's partial window is
        # left open too (the reference evaluator rescales it, ONNX Runtime zero-pads it).
        return False
    return -(-span // stride) * stride < size + pb


def _window(
    b: SpecBuilder,
    x: Tensor,
    *,
    dilations: bool,
    ceil_mode: bool,
    max_window: float = math.inf,
    partial_ok: bool = True,
) -> tuple[list[int], list[int]]:
    """The pooling attributes shared by MaxPool, AveragePool and LpPool; returns the kernel
    and the output's spatial dims."""
    n, spatial = x.rank - 2, x.shape[2:]
    auto_pad = b.attr("auto_pad", OneOf(AUTO_PADS), "NOTSET")
    kernel = b.attr("kernel_shape", KernelDims(spatial, max_window))
    dil = ones(n)
    if dilations:
        if auto_pad in SAME:
            # ONNX Runtime sizes SAME padding by the undilated kernel, ONNX by the dilated one.
            dil = b.attr("dilations", OneOf([ones(n)]), ones(n))
        else:
            dil = b.attr(
                "dilations",
                Each([Ints(1, _max_dilation(k, d)) for k, d in zip(kernel, spatial, strict=True)]),
                ones(n),
            )
    if auto_pad in SAME:
        # ONNX Runtime pads SAME by (ceil(D / s) - 1) * s + k - D, negative (an error) for
        # a kernel shorter than the stride.
        strides = b.attr("strides", Each([Ints(1, min(STRIDE, k)) for k in kernel]), ones(n))
    else:
        strides = b.attr("strides", Each([Ints(1, STRIDE)] * n), ones(n))
    pads = [0] * (2 * n)
    if auto_pad == "NOTSET":
        pads = b.attr("pads", Each([Ints(0, k - 1) for k in kernel] * 2), pads)
    ceil = 0
    if ceil_mode:
        safe = all(
            _ceil_agrees(
                auto_pad, d, kernel[i], strides[i], dil[i], pads[i], pads[n + i], partial_ok
            )
            for i, d in enumerate(spatial)
        )
        ceil = b.attr("ceil_mode", OneOf([0, 1] if safe else [0]), 0)
    if auto_pad in SAME:
        out = [same_out(d, s) for d, s in zip(spatial, strides, strict=True)]
    else:
        out = [
            window_out(d, kernel[i], strides[i], dil[i], pads[i], pads[n + i], ceil)
            for i, d in enumerate(spatial)
        ]
    return kernel, out


@op("MaxPool")
def max_pool(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=Ints(3, 5))
    _, out = _window(b, x, dilations=True, ceil_mode=True)
    # storage_order only orders the optional Indices output, which is not declared.
    b.attr("storage_order", OneOf([0, 1]), 0)
    b.output(list(x.shape[:2]) + out, interval=x.interval)  # every window holds an element


@op("AveragePool")
def average_pool(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=Ints(3, 5))
    # dilations arrived with AveragePool-19.
    _, out = _window(b, x, dilations=b.version >= 19, ceil_mode=True)
    include_pad = b.attr("count_include_pad", OneOf([0, 1]), 0)
    # A mean of input elements, and of zeros where padding counts.
    iv = x.interval.union(Interval(0, 0)) if include_pad else x.interval
    b.output(list(x.shape[:2]) + out, interval=iv)


def _lp_values(dtype: int, elsewhere: Values) -> Values:
    """An Lp pooling's input values: the sum of |x|**p over a window is what kernels hold
    before the root, in the input's type or wider (ONNX leaves it open). In float16 |x| <= 1
    keeps that sum within the window's size (TVM's float16 sum of 242.25**3 overflowed to
    inf where ORT's float32 one gave 330.2); in wider types ``elsewhere``."""
    return Values(-1.0, 1.0) if dtype == dt.FLOAT16 else elsewhere


def _half_range(dtype: int) -> Values:
    return Values(-dt.value_range(dtype)[1] / 2, dt.value_range(dtype)[1] / 2)


def _lp_window_bound(x: Interval, dtype: int, p: int) -> float:
    """Largest window size K with K**(1/p) * |X| <= bound: an Lp norm over K elements."""
    ratio = dt.value_range(dtype)[1] / max(x.mag, 1e-30)
    return math.floor(min(ratio, 1e6) ** p) if ratio >= 1 else 1


@op("LpPool")
def lp_pool(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=Ints(3, 5), values=lambda d: _lp_values(d, Values()))
    lp = b.attr("p", Ints(1, LP_P), 2)
    # ceil_mode and dilations arrived with LpPool-18.
    kernel, out = _window(
        b,
        x,
        dilations=b.version >= 18,
        ceil_mode=b.version >= 18,
        max_window=_lp_window_bound(x.interval, x.dtype, lp),
        partial_ok=False,
    )
    b.output(
        list(x.shape[:2]) + out,
        interval=Interval(0, math.prod(kernel) ** (1 / lp) * x.interval.mag),
    )


@op("GlobalAveragePool", "GlobalMaxPool")
def global_pool(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=Ints(3, 5))
    b.output(list(x.shape[:2]) + [1] * (x.rank - 2), interval=x.interval)


# until=21: ONNX Runtime 1.31 has no GlobalLpPool-22 kernel ("Could not find an
# implementation"), although onnxfuzz/data/ort_cpu_kernels.json lists one from version 2 on.
@op("GlobalLpPool", until=21)
def global_lp_pool(b: SpecBuilder, p: None) -> None:
    # |X| <= bound / 2 (or 1 in float16) leaves a p with size**(1/p) * |X| <= bound for
    # every spatial size.
    x = b.input("X", rank=Ints(3, 5), values=lambda d: _lp_values(d, _half_range(d)))
    size = math.prod(x.shape[2:])
    ratio = dt.value_range(x.dtype)[1] / max(x.interval.mag, 1e-30)
    p_min = max(1, math.ceil(math.log(size) / math.log(ratio))) if size > 1 else 1
    lp = b.attr("p", Ints(p_min, max(p_min, LP_P)), 2 if p_min <= 2 else MISSING)
    b.output(
        list(x.shape[:2]) + [1] * (x.rank - 2),
        interval=Interval(0, size ** (1 / lp) * x.interval.mag),
    )
