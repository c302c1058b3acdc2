"""Normalizations: BatchNormalization (inference), LayerNormalization, InstanceNormalization,
GroupNormalization, LpNormalization, LRN, MeanVarianceNormalization.

Value bounds: a value standardized over N elements, (x - mean) / sqrt(var + eps), has
magnitude <= sqrt(N - 1) < sqrt(N) (eps only shrinks it). The affine parameters are WEIGHT
inputs whose value domains keep |scale| * sqrt(N) <= bound / 2 and |bias| <= bound / 2, so
the outputs stay inside the element type's bound.
"""

from __future__ import annotations

import math
from typing import Any

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Floats, Ints, OneOf, Subset
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, WEIGHT, SpecBuilder

NOT_GENERATED = {
    "test_batchnorm_example_training_mode": "training mode (running-statistics outputs) is "
    "not generated: inference only",
    "test_batchnorm_epsilon_training_mode": "as test_batchnorm_example_training_mode",
}

EPSILON = Floats(1e-5, 0.1)  # > 0: a constant slice has variance 0


def half_precision_spread(dtype: int) -> Values:
    """In float16 a normalized slice whose values are nearly equal is ill-conditioned:
    (x - mean) / std amplifies rounding, and an implementation computing the statistics in
    float16 (the reference evaluator) and one computing them in float32 (ONNX Runtime)
    legitimately disagree. Such inputs get values spread along the last (normalized) axis."""
    return Values(distinct_axis=-1) if dtype in (dt.FLOAT16, dt.BFLOAT16) else Values()


# A normalized slice's values within +-NORM_MAG (float32, float64): an implementation that
# folds the statistics into one affine x * a + b (scale / std, B - mean * scale / std) loses
# |mean| * |scale| / sqrt(var + eps) * 2**-23 to rounding, and for a constant slice (var 0,
# where the spec gives B exactly) 1 / sqrt(eps) is 316: at |mean| 16 and |scale| 2 that is
# 6e-4, within the float32 tolerance. A constant slice of 10000s (glue's Clip saturating
# a cast int64 at its bound) made ORT give 1.125 and torch 1.140 for B = 1.0957, filed as
# torch's bug.
NORM_MAG = 16.0


def normalized_input(dtype: int) -> Values:
    """The values a normalization's input takes: spread in float16 and bfloat16
    (``half_precision_spread``), within +-NORM_MAG otherwise."""
    if dtype in (dt.FLOAT16, dt.BFLOAT16):
        return half_precision_spread(dtype)
    return Values(-NORM_MAG, NORM_MAG)


def _half(dtype: int) -> float:
    return dt.value_range(dtype)[1] / 2


def _scale_values(dtype: int, gain: float) -> Values:
    """|scale| with |scale| * gain <= bound / 2 (and |scale| <= 2)."""
    s = min(2.0, _half(dtype) / max(gain, 1e-30))
    return Values(-s, s)


def _bias_values(dtype: int) -> Values:
    return Values(-_half(dtype), _half(dtype))


def _affine(normalized: float, scale: Interval, bias: Interval | None) -> Interval:
    """normalized * scale + bias with |normalized| <= ``normalized``."""
    iv = Interval(-normalized, normalized) * scale
    return iv + bias if bias is not None else iv


# --- BatchNormalization -----------------------------------------------------------------------
@op("BatchNormalization")
def batch_norm(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=Ints(2, 5))
    c = x.shape[1]
    b.attr("epsilon", EPSILON, 1e-5)
    b.attr("momentum", Floats(0.0, 1.0), 0.9)  # used by training mode only
    if b.version >= 14:  # training_mode arrived with BatchNormalization-14
        b.attr("training_mode", OneOf([0]), 0)
    # Y = scale * (X - mean) / sqrt(var + eps) + B, per channel. mean in [-4, 4] and
    # var in [0.5, 2] keep 1 / sqrt(var + eps) <= sqrt(2); scale's domain follows from X.
    gain = (x.interval.mag + 4.0) * math.sqrt(2.0)
    half = _half(x.dtype)  # Y has X's type; scale/B/mean/var may have their own
    scale = b.input("scale", dims=[c], values=_scale_values(x.dtype, gain), kind=WEIGHT)
    bias = b.input("B", dims=[c], values=Values(-half, half), kind=WEIGHT)
    # By position: BatchNormalization-9 names them mean/var, -14 input_mean/input_var.
    mean = b.input(3, dims=[c], values=Values(-4.0, 4.0), kind=WEIGHT)
    var = b.input(4, dims=[c], values=Values(0.5, 2.0), kind=WEIGHT)
    inv_std = Interval(0.0, 1.0 / math.sqrt(var.interval.lo))
    b.output(
        x.shape, interval=(x.interval - mean.interval) * inv_std * scale.interval + bias.interval
    )


# --- LayerNormalization -----------------------------------------------------------------------
@op("LayerNormalization", since=17)
def layer_norm(b: SpecBuilder, p: None) -> None:
    has_bias = b.optional("B")
    x = b.input("X", rank=Ints(1, 5), values=normalized_input)
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), -1)
    b.attr("epsilon", EPSILON, 1e-5)
    b.attr("stash_type", OneOf([1]), 1)  # float statistics: the one ONNX Runtime runs
    # Normalized over X.shape[axis:]; Scale and B have exactly that shape.
    norm_shape = list(x.shape[axis % x.rank :])
    root_n = math.sqrt(math.prod(norm_shape))
    scale = b.input(
        "Scale", dims=norm_shape, values=lambda d: _scale_values(d, root_n), kind=WEIGHT
    )
    bias = b.input("B", dims=norm_shape, values=_bias_values, kind=WEIGHT) if has_bias else None
    b.output(
        x.shape,
        interval=_affine(root_n, scale.interval, bias.interval if bias is not None else None),
    )


# --- InstanceNormalization / GroupNormalization -----------------------------------------------
@op("InstanceNormalization")
def instance_norm(b: SpecBuilder, p: None) -> None:
    x = b.input("input", rank=Ints(3, 5), values=normalized_input)
    c = x.shape[1]
    b.attr("epsilon", EPSILON, 1e-5)
    # Each (n, c) slice is normalized over the spatial dims.
    root_n = math.sqrt(math.prod(x.shape[2:]))
    scale = b.input("scale", dims=[c], values=lambda d: _scale_values(d, root_n), kind=WEIGHT)
    bias = b.input("B", dims=[c], values=_bias_values, kind=WEIGHT)
    b.output(x.shape, interval=_affine(root_n, scale.interval, bias.interval))


# since=21: GroupNormalization-18 took per-group scale and bias. ONNX's shape inference
# (1.23) gives its output only an element type; the ONNX Runtime run checks the shape.
@op("GroupNormalization", since=21)
def group_norm(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=Ints(3, 5), values=normalized_input)
    c = x.shape[1]
    groups = b.attr("num_groups", OneOf([g for g in range(1, c + 1) if c % g == 0]))
    b.attr("epsilon", EPSILON, 1e-5)
    b.attr("stash_type", OneOf([1]), 1)
    # Each group of C / num_groups channels is normalized over its channels and spatial dims;
    # scale and bias are per channel (shape [C]) since GroupNormalization-21.
    root_n = math.sqrt(c // groups * math.prod(x.shape[2:]))
    scale = b.input("scale", dims=[c], values=lambda d: _scale_values(d, root_n), kind=WEIGHT)
    bias = b.input("bias", dims=[c], values=_bias_values, kind=WEIGHT)
    b.output(x.shape, interval=_affine(root_n, scale.interval, bias.interval))


# --- LpNormalization ----------------------------------------------------------------------------
@op("LpNormalization")
def lp_norm(b: SpecBuilder, p: None) -> None:
    # A slice with a zero norm (e.g. after Relu) maps to zeros: the ONNX reference defines
    # it so and ONNX Runtime agrees, so any input is fine and no guard narrows reuse.
    x = b.input("input", rank=Ints(1, 5))
    b.attr("axis", Ints(-x.rank, x.rank - 1), -1)
    b.attr("p", OneOf([2, 1]), 2)
    # |x_i| <= ||x||_p for p >= 1 (and 0 for a zero norm); the sign is kept.
    lo = 0.0 if x.interval.lo >= 0 else -1.0
    hi = 0.0 if x.interval.hi <= 0 else 1.0
    b.output(x.shape, interval=Interval(lo, hi))


# --- LRN ------------------------------------------------------------------------------------------
@op("LRN")
def lrn(b: SpecBuilder, p: None) -> None:
    x = b.input("X", rank=4)  # (N, C, H, W): ONNX Runtime's kernel is 4-D
    b.attr("alpha", Floats(1e-5, 1e-3), 1e-4)  # ONNX Runtime requires alpha > 0
    b.attr("beta", Floats(0.05, 1.0, 19), 0.75)  # ONNX Runtime requires beta > 0
    # bias >= 1 makes the divisor (bias + alpha / size * sum of squares) ** beta >= 1:
    # |Y| <= |X| with X's sign.
    b.attr("bias", Floats(1.0, 2.0), 1.0)
    b.attr("size", OneOf([3, 1, 5, 7]))  # odd: a window centred on the channel
    iv = x.interval
    b.output(x.shape, interval=Interval(min(iv.lo, 0.0), max(iv.hi, 0.0)))


# --- MeanVarianceNormalization ------------------------------------------------------------------
class AxesWith:
    """Sorted distinct axes of a rank-``rank`` tensor that include axis ``must``."""

    __slots__ = ("rank", "must")

    def __init__(self, rank: int, must: int) -> None:
        self.rank, self.must = rank, must

    def __repr__(self) -> str:
        return f"AxesWith({self.rank}, {self.must})"

    def empty(self) -> bool:
        return not 0 <= self.must < self.rank

    def draw(self, s: ChoiceStream) -> list[int]:
        rest = Subset([a for a in range(self.rank) if a != self.must]).draw(s)
        return sorted(rest + [self.must])

    def contains(self, value: Any) -> bool:
        try:
            v = [int(a) for a in value]
        except (TypeError, ValueError):
            return False
        return self.must in v and len(set(v)) == len(v) and all(0 <= a < self.rank for a in v)


@op("MeanVarianceNormalization")
def mvn(b: SpecBuilder, p: None) -> None:
    # ONNX Runtime (like the op's function body) computes Var = E[x^2] - E[x]^2, which rounds
    # below zero for a (near-)constant slice: sqrt -> NaN. So the axes always include axis 0,
    # X's first dim is >= 2 and X's values are distinct along axis 0 (a fresh input): no
    # normalized slice is constant.
    x = b.input(
        "X",
        rank=Ints(1, 5),
        values=Values(distinct_axis=0),
        dims=lambda r: [Ints(2, max(2, b.max_dim))] + [None] * (r - 1),
    )
    # The default axes [0, 2, 3] need rank >= 4. They are written out explicitly: ONNX's
    # function-body inference fails on the body's Constant(value_ints=@axes) without them.
    axes = b.attr("axes", AxesWith(x.rank, 0), [0, 2, 3] if x.rank >= 4 else MISSING)
    b.set_attr("axes", axes)
    n = math.prod(x.shape[a] for a in axes)
    b.output(x.shape, interval=Interval(-math.sqrt(n), math.sqrt(n)))
