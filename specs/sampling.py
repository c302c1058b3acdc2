"""Sampling ops: GridSample, RoiAlign, MaxRoiPool, AffineGrid, DeformConv.

Each reads an image X at computed (fractional) positions. Bilinear interpolation is a
convex combination of X's values and of 0 (samples in zero padding), so outputs of
linear/bilinear sampling lie in hull(X, 0); bicubic weights go negative and overshoot.

False alarms avoided: nearest sampling rounds a position, and a position within float
error of x.5 legitimately rounds either way between backends (FIELD_NOTES): GridSample's
nearest mode gets a constant grid whose positions sit well away from ties. RoiAlign's
adaptive sampling count is ceil(roi size / output size): rois, scales and sizes are dyadic
(multiples of 1/2 over powers of two), so that ratio is computed exactly everywhere.
MaxRoiPool rounds roi corners to whole pixels and bins by floor/ceil of roi size / pooled
size: corners are whole pixels over a power-of-two scale and pooled sizes powers of two, so
neither rounding ever meets a tie.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints, Linked, OneOf
from onnxfuzz.generate.lang.intervals import Values, point
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import WEIGHT, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Each, Multiples, divisors
from onnxfuzz.specs.geometry import conv_interval, ones, weight_values, window_out

_NEAR_TIE = (
    "nearest mode with grid positions exactly at x.5 (rounding ties: backends legitimately "
    "pick different neighbours); generated nearest grids keep positions off ties"
)
NOT_GENERATED = {
    "test_roialign_mode_max": "max mode with sampling_ratio 2: ONNX Runtime's max is wrong "
    "with more than one sample per bin axis (its own warning); max uses sampling_ratio 1",
    **{
        f"test_gridsample_{name}": _NEAR_TIE
        for name in (
            "nearest",
            "nearest_align_corners_0_additional_1",
            "nearest_align_corners_1_additional_1",
            "volumetric_nearest_align_corners_0",
            "volumetric_nearest_align_corners_1",
        )
    },
}

# --- GridSample ---------------------------------------------------------------------------
GRID = 0.95  # grid values of linear/cubic sampling lie in [-GRID, GRID]
CUBIC_GAIN = 1.5  # >= sum |w| of one axis' cubic weights (A = -0.75: at most 1.375)
TIE_OFF = 0.3  # nearest: positions lie within TIE_OFF of a whole pixel index


def _to_pixel(g: float, size: int, align: int) -> float:
    """A normalized grid coordinate in [-1, 1] as a pixel index along an axis of ``size``."""
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _to_grid(x: float, size: int, align: int) -> float:
    if align:
        return 2 * x / (size - 1) - 1 if size > 1 else 0.0
    return (2 * x + 1) / size - 1


class NearestGrid:
    """A grid (batch, *out_dims, nd) for an image of spatial dims ``sizes`` ((H, W) or
    (D, H, W); grid[..., 0] indexes the last of them): any output dims up to ``max_dim``,
    and every pixel position within TIE_OFF of a whole index inside the image, so
    nearest rounding is never near a tie and never reaches the padding."""

    def __init__(self, batch: int, sizes: list[int], align: int, max_dim: int) -> None:
        self.batch, self.sizes, self.align, self.max_dim = batch, list(sizes), align, max_dim

    def __repr__(self) -> str:
        return f"NearestGrid({self.batch}, {self.sizes}, align={self.align})"

    def empty(self) -> bool:
        return False

    def _axis_size(self, k: int) -> int:
        return self.sizes[len(self.sizes) - 1 - k]

    def draw(self, s: ChoiceStream) -> list:
        nd = len(self.sizes)
        dims = [s.integer(1, self.max_dim) for _ in range(nd)]
        out = []
        for _ in range(self.batch * math.prod(dims)):
            for k in range(nd):
                size = self._axis_size(k)
                i = s.integer(0, size - 1)
                # An offset in [-TIE_OFF, TIE_OFF] in tenths (align_corners with a single
                # pixel maps every grid value to index 0: no offset needed there).
                f = (s.integer(0, 6) - 3) / 10 if size > 1 or not self.align else 0.0
                out.append(_to_grid(i + f, size, self.align))
        return np.asarray(out, dtype=np.float64).reshape([self.batch] + dims + [nd]).tolist()

    def contains(self, value: Any) -> bool:
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        nd = len(self.sizes)
        if a.ndim != nd + 2 or a.shape[0] != self.batch or a.shape[-1] != nd:
            return False
        for k in range(nd):
            size = self._axis_size(k)
            x = _to_pixel(a[..., k], size, self.align)
            if np.any(x < -TIE_OFF - 1e-6) or np.any(x > size - 1 + TIE_OFF + 1e-6):
                return False
            if np.any(np.abs(x - np.round(x)) > TIE_OFF + 1e-6):
                return False
        return True


@op("GridSample", since=16)
def grid_sample(b: SpecBuilder, p: None) -> None:
    # X is (N, C, H, W) (GridSample-16) or (N, C, D, H, W) too (from 20; ONNX Runtime's
    # kernel does 4-D and 5-D). grid is (N, H_out, W_out, 2) / (N, D_out, H_out, W_out, 3).
    x = b.input("X", rank=Ints(4, 5 if b.version >= 20 else 4))
    spatial = list(x.shape[2:])
    nd = len(spatial)
    bound = dt.value_range(x.dtype)[1]
    linear, cubic = ("linear", "cubic") if b.version >= 20 else ("bilinear", "bicubic")
    modes = [linear, "nearest"]
    # Cubic overshoots X's range by up to CUBIC_GAIN per axis; 2-D only in ONNX Runtime.
    if nd == 2 and x.interval.mag * CUBIC_GAIN**2 <= bound:
        modes.append(cubic)
    mode = b.attr("mode", OneOf(modes), "linear" if b.version >= 20 else "bilinear")
    padding = b.attr("padding_mode", OneOf(["zeros", "border", "reflection"]), "zeros")
    align = b.attr("align_corners", OneOf([0, 1]), 0)
    t2 = b.types("T2")
    if not t2:
        raise ConfigError(f"{b.op}: no element type for the grid under --dtypes")
    gdt = x.dtype if x.dtype in t2 else t2[0]
    if mode == "nearest":
        # A constant grid whose pixel positions sit within 0.3 of whole indices inside the
        # image: no rounding ties, no padding.
        g = b.draw("grid", NearestGrid(x.shape[0], spatial, align, b.max_dim))
        grid = b.const("grid", np.asarray(g, dtype=dt.np_dtype(gdt)), dtype=gdt)
    else:
        # Any grid values in [-0.95, 0.95]: linear and cubic interpolation is continuous.
        grid = b.input(
            "grid",
            dtype=gdt,
            dims=[x.shape[0]] + [None] * nd + [nd],
            values=Values(-GRID, GRID),
        )
    out = [x.shape[0], x.shape[1]] + list(grid.shape[1:-1])
    iv = x.interval
    if mode == cubic:
        iv = iv.symmetric(CUBIC_GAIN**2)
    if padding == "zeros" or mode == cubic:
        iv = iv.union(point(0.0))
    b.output(out, interval=iv)


# --- RoiAlign -------------------------------------------------------------------------------
SCALES = (1.0, 0.5, 2.0, 0.25)  # spatial_scale: powers of two keep roi arithmetic exact
MAX_ROIS = 4


class Rois:
    """(num_rois, 4) boxes [x1, y1, x2, y2] in input coordinates (pixel / spatial_scale) with
    0 <= x1 < x2 <= W and 0 <= y1 < y2 <= H in pixels, on a grid of half pixels: every
    sample lies inside the image, and the adaptive sampling count ceil(roi / output size)
    is computed exactly.

    ``legacy`` (output_half_pixel): the roi is stretched to at least one pixel from x1, so
    x1 <= W - 1 (and y1 <= H - 1) keeps the stretched box inside too. Otherwise a sample can
    land exactly on x = W, where the op switches from clamping to 0: float32 and float64
    roi arithmetic then fall on either side (seen: ORT 0, the reference evaluator X[W-1])."""

    def __init__(self, h: int, w: int, scale: float, legacy: bool = False) -> None:
        self.h, self.w, self.scale, self.legacy = h, w, scale, legacy

    def __repr__(self) -> str:
        return f"Rois(H={self.h}, W={self.w}, scale={self.scale}, legacy={self.legacy})"

    def _last_start(self, size: int) -> int:
        return 2 * size - 2 if self.legacy else 2 * size - 1

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> list[list[float]]:
        out = []
        for _ in range(s.integer(1, MAX_ROIS)):
            x1, y1 = s.integer(0, self._last_start(self.w)), s.integer(0, self._last_start(self.h))
            x2, y2 = s.integer(x1 + 1, 2 * self.w), s.integer(y1 + 1, 2 * self.h)
            out.append([v / 2 / self.scale for v in (x1, y1, x2, y2)])
        return out

    def contains(self, value: Any) -> bool:
        try:
            a = np.asarray(value, dtype=np.float64) * self.scale * 2
        except (TypeError, ValueError):
            return False
        if a.ndim != 2 or a.shape[1] != 4 or a.shape[0] < 1:
            return False
        x1, y1, x2, y2 = a.T
        return bool(
            np.all(a == np.round(a))
            and np.all((x1 >= 0) & (x1 < x2) & (x2 <= 2 * self.w))
            and np.all((y1 >= 0) & (y1 < y2) & (y2 <= 2 * self.h))
            and np.all(x1 <= self._last_start(self.w))
            and np.all(y1 <= self._last_start(self.h))
        )


# until=21: ONNX Runtime 1.31 registers RoiAlign 10 and 16 only (no kernel for RoiAlign-22).
@op("RoiAlign", until=21)
def roi_align(b: SpecBuilder, p: None) -> None:
    # X is (N, C, H, W); each roi is pooled to (output_height, output_width) by averaging
    # (or taking the max of) bilinear samples: Y is (num_rois, C, out_h, out_w).
    x = b.input("X", rank=4)
    n, c, h, w = x.shape
    mode = b.attr("mode", OneOf(["avg", "max"]), "avg")
    out_h = b.attr("output_height", Ints(1, b.max_dim), 1)
    out_w = b.attr("output_width", Ints(1, b.max_dim), 1)
    # 0: adaptive, ceil(roi size / output size) samples per bin (exact here, see Rois).
    # ONNX Runtime's max mode is wrong with more than one sample per bin axis (it says so
    # in a warning; the reference evaluator copies it): max takes exactly one.
    if mode == "max":
        b.attr("sampling_ratio", OneOf([1]))
    else:
        b.attr("sampling_ratio", Ints(0, 3), 0)
    scale = b.attr("spatial_scale", OneOf(SCALES), 1.0)
    legacy = True  # before 16 the behaviour of output_half_pixel, without the name
    if b.version >= 16:
        mode_t = b.attr(
            "coordinate_transformation_mode",
            OneOf(["half_pixel", "output_half_pixel"]),
            "half_pixel",
        )
        legacy = mode_t == "output_half_pixel"
    rois = b.draw("rois", Rois(h, w, scale, legacy))
    b.const("rois", np.asarray(rois, dtype=dt.np_dtype(x.dtype)), dtype=x.dtype)
    idx = [b.draw(f"batch_indices[{i}]", Ints(0, n - 1)) for i in range(len(rois))]
    b.const("batch_indices", idx)
    # Averages and maxima of bilinear samples (0 outside the image) of X.
    b.output([len(rois), c, out_h, out_w], interval=x.interval.union(point(0.0)))


# --- MaxRoiPool -----------------------------------------------------------------------------
POOLED = (1, 2, 4)  # pooled sizes: powers of two keep roi size / pooled size exact


class PoolRois:
    """(num_rois, 5) rois [batch_id, x1, y1, x2, y2]: batch ids in [0, N), corners on whole
    pixels (coordinate * spatial_scale is an integer: no rounding ties) with
    0 <= x1 <= x2 < W and 0 <= y1 <= y2 < H."""

    def __init__(self, n: int, h: int, w: int, scale: float) -> None:
        self.n, self.h, self.w, self.scale = n, h, w, scale

    def __repr__(self) -> str:
        return f"PoolRois(N={self.n}, H={self.h}, W={self.w}, scale={self.scale})"

    def empty(self) -> bool:
        return False

    def draw(self, s: ChoiceStream) -> list[list[float]]:
        out = []
        for _ in range(s.integer(1, MAX_ROIS)):
            x1, y1 = s.integer(0, self.w - 1), s.integer(0, self.h - 1)
            x2, y2 = s.integer(x1, self.w - 1), s.integer(y1, self.h - 1)
            out.append(
                [float(s.integer(0, self.n - 1))] + [v / self.scale for v in (x1, y1, x2, y2)]
            )
        return out

    def contains(self, value: Any) -> bool:
        try:
            a = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            return False
        if a.ndim != 2 or a.shape[1] != 5 or a.shape[0] < 1:
            return False
        ids, c = a[:, 0], a[:, 1:] * self.scale
        x1, y1, x2, y2 = c.T
        return bool(
            np.all(ids == np.round(ids))
            and np.all((ids >= 0) & (ids < self.n))
            and np.all(c == np.round(c))
            and np.all((x1 >= 0) & (x1 <= x2) & (x2 < self.w))
            and np.all((y1 >= 0) & (y1 <= y2) & (y2 < self.h))
        )


# until=21: ONNX Runtime 1.31 registers MaxRoiPool-1 only (no kernel for MaxRoiPool-22).
@op("MaxRoiPool", until=21)
def max_roi_pool(b: SpecBuilder, p: None) -> None:
    # X is (N, C, H, W); each roi [batch_id, x1, y1, x2, y2] is rounded to whole pixels
    # (times spatial_scale), cut into pooled_shape bins, and each bin max-pooled (an empty
    # bin gives 0): Y is (num_rois, C, pooled_h, pooled_w).
    x = b.input("X", rank=4)
    n, c, h, w = x.shape
    pooled = b.attr("pooled_shape", Each([OneOf(POOLED), OneOf(POOLED)]))
    scale = b.attr("spatial_scale", OneOf(SCALES), 1.0)
    rois = b.draw("rois", PoolRois(n, h, w, scale))
    b.const("rois", np.asarray(rois, dtype=dt.np_dtype(x.dtype)), dtype=x.dtype)
    b.output([len(rois), c, *pooled], interval=x.interval.union(point(0.0)))


# --- AffineGrid ------------------------------------------------------------------------------
def _theta_values(dtype: int) -> Values:
    """|theta| <= bound / 4: a row dotted with (x, y[, z], 1), |x|, |y|, |z| <= 1, fits."""
    m = dt.value_range(dtype)[1] / 4
    return Values(-m, m)


@op("AffineGrid", since=20)
def affine_grid(b: SpecBuilder, p: None) -> None:
    # theta is (N, 2, 3) (2-D) or (N, 3, 4) (3-D); size is (N, C, H, W) / (N, C, D, H, W);
    # grid[n, ..., :] = theta[n] @ (x, y[, z], 1) over normalized coordinates in [-1, 1].
    def dims(r: int) -> list:
        rows, cols = Linked(OneOf([2, 3]), lambda k: k + 1).pair()  # theta (2, 3) or (3, 4)
        return [None, rows, cols]

    theta = b.input("theta", rank=3, dims=dims, values=_theta_values)
    n, nd = theta.shape[0], theta.shape[1]
    align = b.attr("align_corners", OneOf([0, 1]), 0)
    # align_corners puts the first and last sample at -1 and 1: a dim of 1 divides by zero.
    lo = 2 if align else 1
    size = [b.draw("size[0]", OneOf([n])), b.draw("size[1]", Ints(1, b.max_dim))]
    size += [b.draw(f"size[{i}]", Ints(lo, max(lo, b.max_dim))) for i in range(2, nd + 2)]
    b.const("size", size)
    b.output([n] + size[2:] + [nd], interval=theta.interval.symmetric(nd + 1))


# --- DeformConv ------------------------------------------------------------------------------
KERNEL = 3
PAD = 2
STRIDE = 2
DILATION = 2
OFFSET = 2.0  # |offset| in pixels
MASK = 1.0  # |mask|


@op("DeformConv", since=19)
def deform_conv(b: SpecBuilder, p: None) -> None:
    # Conv whose kernel taps are moved by per-position offsets (bilinear samples, 0
    # outside the image) and scaled by an optional mask. 2-D: X is (N, C, H, W).
    has_bias = b.optional("B")
    has_mask = b.optional("mask")
    x = b.input("X", rank=4)
    batch, c, spatial = x.shape[0], x.shape[1], list(x.shape[2:])
    group = b.attr("group", OneOf(divisors(c)), 1)
    offset_group = b.attr("offset_group", OneOf(divisors(c)), 1)
    strides = b.attr("strides", Each([Ints(1, STRIDE)] * 2), ones(2))
    dilations = b.attr("dilations", Each([Ints(1, DILATION)] * 2), ones(2))
    pads = b.attr("pads", Each([Ints(0, PAD)] * 4), [0] * 4)
    k_hi = [
        min(KERNEL, (d + pads[i] + pads[2 + i] - 1) // dilations[i] + 1)
        for i, d in enumerate(spatial)
    ]
    cg = c // group
    # Each output sums cg * kh * kw products sample * w * mask, |sample| <= |X|, |mask| <= 1.
    w = b.input(
        "W",
        dims=[Multiples(group, b.max_dim), cg] + [Ints(1, k) for k in k_hi],
        values=lambda d: weight_values(x.interval, d, cg * math.prod(k_hi)),
        kind=WEIGHT,
    )
    m, kernel = w.shape[0], list(w.shape[2:])
    b.attr("kernel_shape", OneOf([kernel]), None)
    out = [
        window_out(d, kernel[i], strides[i], dilations[i], pads[i], pads[2 + i])
        for i, d in enumerate(spatial)
    ]
    taps = math.prod(kernel)
    b.input("offset", dims=[batch, offset_group * 2 * taps] + out, values=Values(-OFFSET, OFFSET))
    half = dt.value_range(x.dtype)[1] / 2
    bias = b.input("B", dims=[m], values=Values(-half, half), kind=WEIGHT) if has_bias else None
    wiv = w.interval
    if has_mask:
        mask = b.input("mask", dims=[batch, offset_group * taps] + out, values=Values(-MASK, MASK))
        wiv = wiv * mask.interval
    # Samples are convex combinations of X and 0.
    xiv = x.interval.union(point(0.0))
    b.output(
        [batch, m] + out,
        interval=conv_interval(xiv, wiv, cg * taps, bias.interval if bias is not None else None),
    )
