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

The geometry (``specs/geometry.py``) is shared with the pools, QLinearConv and sampling.
"""

from __future__ import annotations

import math

from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import WEIGHT, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Each, Multiples, PadPairs, divisors
from onnxfuzz.specs.geometry import (
    AUTO_PADS,
    SAME,
    STRIDE,
    bias_values,
    conv_geometry,
    conv_interval,
    conv_out_shape,
    ones,
    weight_values,
)

CT_KERNEL = 3  # ConvTranspose kernel, dilation, pad bounds: its output grows as
CT_DILATION = 2  # stride * (in - 1) + (kernel - 1) * dilation + 1, kept <= ~28
CT_PAD = 3


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
            pads = b.attr("pads", PadPairs([CT_PAD] * n, [f - 1 for f in full]), [0] * (2 * n))
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
