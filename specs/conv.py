"""Convolutions: Conv and ConvTranspose over X of shape (N, C, D1, ..., Dn), n = 1..3.

Order: B's presence -> X (batch, channels and spatial dims free) -> group (a divisor of C)
-> auto_pad, strides, dilations, pads (domains from X's spatial dims) -> W, whose spatial
dims are the kernel (``kernel_shape`` is optional and, when present, must equal them)
-> B -> Y with ONNX's exact output shape.

Value bounds: every output element is a sum of at most fan_in = (C/group) * prod(kernel)
products x*w (fewer at the borders: padding contributes zeros) plus the bias, so
|Y| <= fan_in * |X| * |W| + |B|. X is left unconstrained (so any tensor can feed a
convolution); W's value domain is computed from X's interval and the largest fan-in the
kernel domain allows, keeping fan_in * |X| * |W| <= bound / 2, and |B| <= bound / 2.

The geometry helpers (``Each``, ``KernelDims``, ``window_out``) are shared with the pools.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.choices import ChoiceStream
from onnxfuzz.generate.domains import Domain, Ints, OneOf
from onnxfuzz.generate.graph import Tensor
from onnxfuzz.generate.intervals import Interval, Values
from onnxfuzz.generate.spec import op
from onnxfuzz.generate.spec_api import WEIGHT, SpecBuilder

AUTO_PADS = ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER")
SAME = ("SAME_UPPER", "SAME_LOWER")
CONV_KERNEL = 5  # largest Conv kernel dim (keeps the fan-in, hence W's bound, sane)
CONV_PAD = 2  # largest explicit Conv pad
STRIDE = 3  # largest stride
DILATION = 3  # largest dilation
CT_KERNEL = 3  # ConvTranspose kernel, dilation, pad bounds: its output grows as
CT_DILATION = 2  # stride * (in - 1) + (kernel - 1) * dilation + 1, kept <= ~28
CT_PAD = 3


# --- domains of list attributes -----------------------------------------------------------
def _as_list(value: Any) -> list | None:
    try:
        return list(value)
    except TypeError:
        return None


class Each:
    """A list attribute (strides, pads, ...) whose i-th element lies in ``domains[i]``."""

    __slots__ = ("domains",)

    def __init__(self, domains: Sequence[Domain]) -> None:
        self.domains = tuple(domains)

    def __repr__(self) -> str:
        return f"Each({list(self.domains)!r})"

    def empty(self) -> bool:
        return any(d.empty() for d in self.domains)

    def draw(self, s: ChoiceStream) -> list:
        return [d.draw(s) for d in self.domains]

    def contains(self, value: Any) -> bool:
        v = _as_list(value)
        return (
            v is not None
            and len(v) == len(self.domains)
            and all(d.contains(x) for d, x in zip(self.domains, v, strict=True))
        )


class KernelDims:
    """Kernel dims with ``1 <= k[i] <= his[i]`` and ``prod(k) <= max_prod`` (LpPool's bound
    on the window size). All ones is always inside, so the domain is never empty."""

    __slots__ = ("his", "max_prod")

    def __init__(self, his: Sequence[int], max_prod: float = math.inf) -> None:
        self.his = tuple(max(1, int(h)) for h in his)
        self.max_prod = max_prod

    def __repr__(self) -> str:
        return f"KernelDims({list(self.his)}, prod<={self.max_prod:g})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> list[int]:
        out, left = [], self.max_prod
        for hi in self.his:
            k = s.integer(1, int(min(hi, left)))
            left = left // k if left != math.inf else left
            out.append(k)
        return out

    def contains(self, value: Any) -> bool:
        v = _as_list(value)
        return (
            v is not None
            and len(v) == len(self.his)
            and all(Ints(1, h).contains(k) for k, h in zip(v, self.his, strict=True))
            and math.prod(v) <= self.max_prod
        )


class PadPairs:
    """Pads ``[b_1..b_n, e_1..e_n]`` with ``0 <= b_i, e_i <= cap`` and ``b_i + e_i <= total[i]``
    (ConvTranspose: padding crops the output, which must keep a dim >= 1)."""

    __slots__ = ("cap", "totals")

    def __init__(self, cap: int, totals: Sequence[int]) -> None:
        self.cap, self.totals = cap, tuple(totals)

    def __repr__(self) -> str:
        return f"PadPairs(<={self.cap}, b+e<={list(self.totals)})"

    def empty(self) -> bool:
        return any(t < 0 for t in self.totals)

    def draw(self, s: ChoiceStream) -> list[int]:
        begins, ends = [], []
        for t in self.totals:
            pb = s.integer(0, min(self.cap, t))
            begins.append(pb)
            ends.append(s.integer(0, min(self.cap, t - pb)))
        return begins + ends

    def contains(self, value: Any) -> bool:
        v = _as_list(value)
        n = len(self.totals)
        if v is None or len(v) != 2 * n:
            return False
        return all(
            Ints(0, self.cap).contains(v[i])
            and Ints(0, self.cap).contains(v[n + i])
            and v[i] + v[n + i] <= self.totals[i]
            for i in range(n)
        )


class Multiples:
    """Positive multiples of ``step`` up to ``max(step, hi)`` (output channels: group | M)."""

    __slots__ = ("step", "hi")

    def __init__(self, step: int, hi: int) -> None:
        self.step, self.hi = step, max(step, hi)

    def __repr__(self) -> str:
        return f"Multiples({self.step}, <={self.hi})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> int:
        return self.step * s.integer(1, self.hi // self.step)

    def contains(self, value: Any) -> bool:
        return Ints(1, self.hi).contains(value) and int(value) % self.step == 0


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


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


# --- Conv -----------------------------------------------------------------------------------
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


@op("Conv")
def conv(b: SpecBuilder, p: None) -> None:
    has_bias = b.optional("B")
    x = b.input("X", rank=Ints(3, 5))
    geometry = conv_geometry(b, x)
    group, k_hi = geometry[0], geometry[-1]
    cg = x.shape[1] // group
    w = b.input(
        "W",
        dims=[Multiples(group, b.max_dim), cg] + [Ints(1, h) for h in k_hi],
        values=lambda d: weight_values(x.interval, d, cg * math.prod(k_hi)),
        kind=WEIGHT,
    )
    m, kernel = w.shape[0], list(w.shape[2:])
    b.attr("kernel_shape", OneOf([kernel]), None)  # optional: inferred from W when absent
    bias = b.input("B", dims=[m], values=bias_values, kind=WEIGHT) if has_bias else None
    fan_in = cg * math.prod(kernel)
    b.output(
        conv_out_shape(x, w, geometry),
        interval=conv_interval(
            x.interval, w.interval, fan_in, bias.interval if bias is not None else None
        ),
    )


# --- ConvTranspose ----------------------------------------------------------------------------
@op("ConvTranspose")
def conv_transpose(b: SpecBuilder, p: None) -> None:
    has_bias = b.optional("B")
    x = b.input("X", rank=Ints(3, 5))
    n, c, spatial = x.rank - 2, x.shape[1], x.shape[2:]
    group = b.attr("group", OneOf(divisors(c)), 1)
    auto_pad = b.attr("auto_pad", OneOf(AUTO_PADS), "NOTSET")
    strides = b.attr("strides", Each([Ints(1, STRIDE)] * n), ones(n))
    dilations = b.attr("dilations", Each([Ints(1, CT_DILATION)] * n), ones(n))
    # W is (C, M/group, k1..kn): its spatial dims are the kernel, which the output size
    # and the pads' domain depend on, so W comes before those attributes.
    # Under SAME the output is in * stride, which needs a padded span (k - 1) * d + 1 >=
    # stride: smaller kernels would need negative padding, where ONNX Runtime and the
    # reference evaluator disagree (ORT clamps the output to the unpadded size).
    kmin = [
        1 + -(-(s - 1) // d) if auto_pad in SAME else 1
        for s, d in zip(strides, dilations, strict=True)
    ]
    w = b.input(
        "W",
        dims=[c, Ints(1, max(1, b.max_dim // group))] + [Ints(k, CT_KERNEL) for k in kmin],
        values=lambda d: weight_values(x.interval, d, c // group * CT_KERNEL**n),
        kind=WEIGHT,
    )
    m, kernel = w.shape[1] * group, list(w.shape[2:])
    b.attr("kernel_shape", OneOf([kernel]), None)  # optional: inferred from W when absent
    # output_padding adds cells at the end of each axis; it must be below the stride. Under
    # SAME, ONNX adds it after the padding while ONNX Runtime absorbs it into the padding
    # (the output shapes differ), so SAME goes without it.
    if auto_pad in SAME:
        output_padding = b.attr("output_padding", OneOf([[0] * n]), [0] * n)
    else:
        output_padding = b.attr("output_padding", Each([Ints(0, s - 1) for s in strides]), [0] * n)
    # Unpadded output: stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1.
    full = [
        strides[i] * (d - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
        for i, d in enumerate(spatial)
    ]
    if auto_pad == "NOTSET":
        # Either output_shape, from which the pads are derived, or explicit pads that leave
        # a dim >= 1. output_shape >= in (ONNX's shape inference gives up below it) and may
        # exceed the unpadded size like output_padding does: by less than the stride in all.
        # The pads derived from output_shape split total = full - out between the two ends;
        # ONNX leaves an odd split to conventions backends do not share, so the total is
        # even (or negative: cells appended past the unpadded size, as output_padding does).
        out = b.attr(
            "output_shape",
            Each(
                [
                    OneOf([o for o in range(d, f + s - q) if o > f or (f - o) % 2 == 0])
                    for d, f, s, q in zip(spatial, full, strides, output_padding, strict=True)
                ]
            ),
            None,
        )
        if out is None:
            pads = b.attr("pads", PadPairs(CT_PAD, [f - 1 for f in full]), [0] * (2 * n))
            out = [f - pads[i] - pads[n + i] for i, f in enumerate(full)]
    elif auto_pad == "VALID":
        out = full
    else:
        # SAME pads the output down to in * stride (the kernel domain keeps it >= 0).
        out = [d * s for d, s in zip(spatial, strides, strict=True)]
    bias = b.input("B", dims=[m], values=bias_values, kind=WEIGHT) if has_bias else None
    # Each output cell sums at most (C/group) * prod(kernel) products.
    fan_in = c // group * math.prod(kernel)
    b.output(
        [x.shape[0], m] + list(out),
        interval=conv_interval(
            x.interval, w.interval, fan_in, bias.interval if bias is not None else None
        ),
    )
