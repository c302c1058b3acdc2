"""Pad and Resize: ops whose output shape is set by constant inputs.

Order: data (any dims) -> mode attributes -> the constant inputs' elements, each drawn
from a domain computed from data's dims (so every output dim is >= 1 and bounded) ->
output with the exact shape ONNX's formulas give.
"""

from __future__ import annotations

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Floats, Ints, OneOf
from onnxfuzz.generate.lang.intervals import point
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import WEIGHT, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Axes

_NEAR_TIE = (
    "nearest with a non-exact scale, align_corners or an aspect-ratio policy puts "
    "sample positions within float error of rounding ties: backends legitimately "
    "pick different neighbours, so nearest keeps to scales 1/2, 1, 2, 3"
)
NOT_GENERATED = {
    "test_resize_tf_crop_and_resize_extrapolation_value": (
        "roi outside [0, 1] samples outside the image (extrapolation_value): not generated"
    ),
    **{
        f"test_resize_{name}": _NEAR_TIE
        for name in (
            "downsample_scales_nearest",
            "upsample_sizes_nearest",
            "downsample_sizes_nearest",
            "upsample_sizes_nearest_floor_align_corners",
            "upsample_sizes_nearest_axes_2_3",
            "upsample_sizes_nearest_axes_3_2",
            "upsample_sizes_nearest_not_larger",
            "upsample_sizes_nearest_not_smaller",
            "downsample_sizes_nearest_not_larger",
            "downsample_sizes_nearest_not_smaller",
        )
    },
}


# --- Pad -----------------------------------------------------------------------------


def _pad_begin(mode: str, d: int, most: int) -> Ints:
    """Pads before one axis of dim ``d``. Negative pads (crop) only in constant mode:
    the other modes' cropping differs between backends. reflect mirrors without the edge,
    so it needs pad < d; wrap stays within one copy, pad <= d."""
    if mode == "constant":
        return Ints(-(d - 1), most)
    if mode == "reflect":
        return Ints(0, min(d - 1, most))
    if mode == "wrap":
        return Ints(0, min(d, most))
    return Ints(0, most)


def _pad_end(mode: str, d: int, begin: int, most: int) -> Ints:
    if mode == "constant":
        return Ints(1 - d - begin, most)  # output dim d + begin + end >= 1
    return _pad_begin(mode, d, most)


@op("Pad")
def pad(b: SpecBuilder, p: None) -> None:
    # pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over `axes` (all axes before 18).
    data = b.input("data", rank=Ints(1, b.max_rank))
    modes = ["constant", "reflect", "edge"] + (["wrap"] if b.version >= 19 else [])
    mode = b.attr("mode", OneOf(modes), "constant")
    axes = list(range(data.rank))
    if b.version >= 18 and b.optional("axes"):
        axes = b.draw("axes", Axes(range(data.rank), data.rank, negative=0.3))
        b.const("axes", axes)
    most = max(1, b.max_dim // 2)  # output dims <= dim + max_dim
    k = len(axes)
    pads = [0] * (2 * k)
    for i, a in enumerate(axes):
        d = data.shape[a]
        pads[i] = b.draw(f"pads[{i}]", _pad_begin(mode, d, most))
        pads[k + i] = b.draw(f"pads[{k + i}]", _pad_end(mode, d, pads[i], most))
    b.const("pads", pads)
    shape = list(data.shape)
    for i, a in enumerate(axes):
        shape[a] += pads[i] + pads[k + i]
    iv = data.interval
    if mode == "constant":
        if b.optional("constant_value"):
            cv = b.input("constant_value", rank=0, kind=WEIGHT)
            iv = iv.union(cv.interval)
        else:
            iv = iv.union(point(0))
    b.output(shape, interval=iv)


# --- Resize --------------------------------------------------------------------------

SCALE_MAX = 3.0


def _scale_domain(d: int) -> Floats:
    """Scales with floor(d * scale) >= 1, on a grid of halves: 0.5, 1, 1.5, 2, 2.5, 3
    (linear and cubic interpolate: no rounding of the sample position)."""
    lo = 0.5 if d >= 2 else 1.0
    return Floats(lo, SCALE_MAX, round((SCALE_MAX - lo) * 2))


def _exact_scales(d: int) -> list[float]:
    """Scales whose sample positions are exact in float: whole up-scales, and halving."""
    return [1.0, 2.0, 3.0] + ([0.5] if d % 2 == 0 else [])


def _exact_sizes(d: int) -> list[int]:
    return [round(d * s) for s in _exact_scales(d)]


def _floor_scaled(d: int, s: float) -> int:
    # ONNX shape inference: floor(float(dim) * scale), in float32.
    return int(np.floor(np.float32(d) * np.float32(s)))


def _round_half_up(x: float) -> int:
    return int(np.floor(np.float32(x) + np.float32(0.5)))


def _resizable(mode: str, rank: int, axis: int) -> bool:
    """ONNX Runtime's linear (bi/trilinear) and cubic (bicubic) kernels resize the last
    2 or 3 axes: a 4-D or 5-D input keeps its two outermost dims (scale 1)."""
    return mode == "nearest" or rank <= 3 or axis >= 2


def _modes(x_rank: int, x_dtype: int, mag: float, cubic_gain: float) -> list[str]:
    modes = ["nearest"]
    # Linear on integers: ONNX leaves the rounding of interpolated values open (ONNX Runtime
    # rounds, the reference evaluator truncates), so only float inputs interpolate.
    if x_rank in (2, 3, 4, 5) and x_dtype in dt.FLOATS:
        modes.append("linear")
    # Cubic weights go negative: outputs overshoot the input range (up to cubic_gain per
    # resized axis), so float inputs only (integer outputs would need saturation rules
    # backends do not share), and only where the overshoot stays inside the bound.
    if (
        x_rank in (2, 4)
        and x_dtype in dt.FLOATS
        and mag * cubic_gain**2 <= dt.value_range(x_dtype)[1]
    ):
        modes.append("cubic")
    return modes


CUBIC_GAIN = 2.5  # bound on sum |w| of one axis' cubic weights (a in [-1, -0.5], renormalized)


@op("Resize")
def resize(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=Ints(1, b.max_rank))
    r = x.rank
    mode = b.attr("mode", OneOf(_modes(r, x.dtype, x.interval.mag, CUBIC_GAIN)), "nearest")
    nearest = mode == "nearest"
    ctms = ["half_pixel", "pytorch_half_pixel", "asymmetric"]
    if not nearest:
        # nearest rounds the sample position: where a mode or scale puts it within float
        # error of a tie (align_corners, half_pixel_symmetric, non-integer scales, crops),
        # backends legitimately pick different neighbours (FIELD_NOTES), so nearest keeps to
        # exact positions: the modes above with scales 1/2, 1, 2 and 3.
        ctms.append("align_corners")
        if b.version >= 19:
            ctms.append("half_pixel_symmetric")
        # tf_crop_and_resize samples the region of interest given by roi (in T2, a float
        # type).
        if b.types("T2"):
            ctms.append("tf_crop_and_resize")
    ctm = b.attr("coordinate_transformation_mode", OneOf(ctms), "half_pixel")
    crop = ctm == "tf_crop_and_resize"
    if mode == "nearest":
        b.attr(
            "nearest_mode",
            OneOf(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]),
            "round_prefer_floor",
        )
    if mode == "cubic":
        b.attr("cubic_coeff_a", Floats(-1.0, -0.5, 4), -0.75)
        b.attr("exclude_outside", OneOf([0, 1]), 0)
    if b.version >= 18 and mode != "nearest" and not crop:
        b.attr("antialias", OneOf([0, 1]), 0)

    axes = list(range(r))
    if b.version >= 18:
        axes = b.attr("axes", Axes(range(r), r, negative=0.3), list(range(r)))
    # ONNX Runtime 1.31 ignores negative axes under keep_aspect_ratio_policy (the output
    # keeps the input's dim): that policy is drawn only for axes written non-negative.
    negative = any(a < 0 for a in axes)
    axes = [a % r for a in axes]
    fixed = [not _resizable(mode, r, a) for a in axes]

    # Exactly one of scales and sizes (the other's name left empty). With tf_crop_and_resize
    # the output size is given directly: sizes.
    use_sizes = crop or b.optional("sizes")
    policy = "stretch"
    if b.version >= 18 and use_sizes and not any(fixed) and not negative and not nearest:
        policy = b.attr(
            "keep_aspect_ratio_policy", OneOf(["stretch", "not_larger", "not_smaller"]), "stretch"
        )

    if crop:
        # roi = [starts..., ends...] per listed axis, normalized to [0, 1]: the region lies
        # inside the image, so extrapolation_value is never sampled.
        k = len(axes)
        roi = [0.0] * (2 * k)
        for i in range(k):
            if fixed[i]:
                roi[i] = b.draw(f"roi[{i}]", Floats(0.0, 0.0))
                roi[k + i] = b.draw(f"roi[{k + i}]", Floats(1.0, 1.0))
            else:
                roi[i] = b.draw(f"roi[{i}]", Floats(0.0, 0.6, 3))
                roi[k + i] = b.draw(f"roi[{k + i}]", Floats(roi[i] + 0.2, 1.0, 4))
        t2 = b.types("T2")
        b.const("roi", roi, dtype=dt.FLOAT if dt.FLOAT in t2 else t2[0])

    shape = list(x.shape)
    if use_sizes:
        dmin = min(x.shape[a] for a in axes)
        dmax = max(x.shape[a] for a in axes)
        sizes = []
        for i, a in enumerate(axes):
            d = x.shape[a]
            if fixed[i]:
                dom = Ints(d, d)
            elif nearest:
                dom = OneOf(_exact_sizes(d))
            elif policy == "not_larger":
                # scale = min(sizes / dims) >= 1 / dmin keeps every round(scale * dim) >= 1
                dom = Ints(-(-d // dmin), max(3 * d, b.max_dim))
            elif policy == "not_smaller":
                # scale = max(sizes / dims) <= max(3, max_dim / dmax): every output dim
                # stays <= max(3 * dim, max_dim), as with stretch
                dom = Ints(1, max(3 * d, b.max_dim * d // dmax))
            else:
                dom = Ints(1, max(3 * d, b.max_dim))
            sizes.append(b.draw(f"sizes[{i}]", dom))
        b.const("sizes", sizes)
        if policy == "stretch":
            for a, n in zip(axes, sizes, strict=True):
                shape[a] = n
        else:
            ratios = [
                np.float32(n) / np.float32(x.shape[a]) for a, n in zip(axes, sizes, strict=True)
            ]
            scale = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                shape[a] = _round_half_up(scale * np.float32(x.shape[a]))
    else:
        scales = []
        for i, a in enumerate(axes):
            d = x.shape[a]
            dom = (
                Floats(1.0, 1.0)
                if fixed[i]
                else (OneOf(_exact_scales(d)) if nearest else _scale_domain(d))
            )
            scales.append(b.draw(f"scales[{i}]", dom))
        b.const("scales", np.asarray(scales, dtype=np.float32))
        for a, s in zip(axes, scales, strict=True):
            shape[a] = _floor_scaled(x.shape[a], s)

    iv = x.interval
    if mode == "cubic":
        gain = CUBIC_GAIN ** sum(1 for f in fixed if not f)
        iv = iv.symmetric(gain)
    # nearest copies elements; linear takes convex combinations of them (antialias too:
    # normalized weights >= 0): both stay inside the input's interval.
    b.output(shape, interval=iv)
