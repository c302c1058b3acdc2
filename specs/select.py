"""Ops that normalize or select along an axis: Softmax, LogSoftmax, Hardmax, ArgMax, ArgMin,
TopK, and the running/triangular ops CumSum and Trilu.

Tie-sensitive ops (Hardmax, ArgMax, ArgMin, TopK) pick an element by comparison. ONNX does
specify exact ties (TopK: the lower index first; ArgMax/ArgMin: the first occurrence, or the
last with select_last_index; Hardmax: the first maximum), but a tie between values a model
computed can be made or broken by one backend's last-ulp rounding and not another's, so
that two right backends pick different indices. Their input is drawn tie-free along the
axis, so the axis comes first, then a fresh input of a rank that has that axis (such inputs
are never reused anyway: no interval promises distinct values). The cost, said plainly: a
backend that breaks exact ties against the spec (or ignores select_last_index, drawn but
without effect on tie-free values) is not found.
"""

from __future__ import annotations

import math

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import WEIGHT, SpecBuilder

NOT_GENERATED = {
    # Ties along the axis: ONNX specifies which index wins, but onnxfuzz draws tie-free
    # values for all of these ops (the module doc says why), so it makes none of these.
    "test_argmax_no_keepdims_example": "ties along the axis (2, 2): inputs are drawn tie-free",
    "test_argmax_keepdims_example": "ties along the axis (2, 2): inputs are drawn tie-free",
    "test_argmax_negative_axis_keepdims_example": "ties along the axis (2, 2): inputs are "
    "drawn tie-free",
    "test_argmax_no_keepdims_example_select_last_index": "ties along the axis: inputs are "
    "drawn tie-free",
    "test_argmax_keepdims_example_select_last_index": "ties along the axis: inputs are drawn "
    "tie-free",
    "test_argmax_negative_axis_keepdims_example_select_last_index": "ties along the axis: "
    "inputs are drawn tie-free",
    "test_argmin_no_keepdims_example_select_last_index": "ties along the axis: inputs are "
    "drawn tie-free",
    "test_argmin_keepdims_example_select_last_index": "ties along the axis: inputs are drawn "
    "tie-free",
    "test_argmin_negative_axis_keepdims_example_select_last_index": "ties along the axis: "
    "inputs are drawn tie-free",
    "test_hardmax_one_hot": "ties along the axis (3, 3, 3): inputs are drawn tie-free",
    "test_top_k_same_values": "all values equal (ONNX: the lower index first); inputs are "
    "drawn tie-free",
    "test_top_k_same_values_largest": "as test_top_k_same_values",
    "test_top_k_same_values_2d": "as test_top_k_same_values",
}


def _reduced_shape(shape: tuple[int, ...], ax: int, keepdims: int) -> list[int]:
    if keepdims:
        return [1 if i == ax else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i != ax]


def _tie_free(b: SpecBuilder, name: str, default_axis: int) -> tuple[Tensor, int]:
    """The axis attribute, then a fresh input without ties along it; returns (x, axis >= 0)."""
    r = b.max_rank
    if r < 1:
        raise ConfigError(f"{b.op}: needs an input of rank >= 1, but --max-rank is 0")
    axis = b.attr("axis", Ints(-r, r - 1), default_axis)
    need = axis + 1 if axis >= 0 else -axis  # the least rank that has this axis
    # distinct_axis may be negative here (the rank is drawn inside b.input): it counts from
    # the end, as numpy's axis does.
    x = b.input(name, rank=Ints(need, r), values=Values(distinct_axis=axis))
    return x, axis % x.rank


# --- Softmax family (opset 13 semantics: along one axis) ------------------------------------
def _log_softmax_values(dtype: int) -> Values:
    # Output >= lo - hi - log(N): keep the input's spread inside 0.9 of the bound, and
    # inside 0.9 of the spread where exp(x - max) is still a normal number: past it the
    # ONNX reference evaluator, which takes log(softmax(x)) (op_log_softmax.py), gives -inf
    # or a value off by up to ~1 where the definition is finite (wide values found it).
    m = 0.45 * min(dt.value_range(dtype)[1], dt.exp_normal_range(dtype))
    return Values(-m, m)


@op("Softmax", "LogSoftmax")
def softmax(b: SpecBuilder, p: None) -> None:
    values = _log_softmax_values if b.op == "LogSoftmax" else Values()
    x = b.input("input", rank=Ints(1, b.max_rank), values=values)
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), -1)
    if b.op == "Softmax":
        iv = Interval(0, 1)
    else:
        # x_i - logsumexp(x) lies in [x_i - max - log N, 0].
        n = x.shape[axis % x.rank]
        iv = Interval(x.interval.lo - x.interval.hi - math.log(n), 0)
    b.output(x.shape, interval=iv)


@op("Hardmax")
def hardmax(b: SpecBuilder, p: None) -> None:
    x, _ = _tie_free(b, "input", -1)
    b.output(x.shape, interval=Interval(0, 1))


# --- ArgMax / ArgMin / TopK ------------------------------------------------------------------
@op("ArgMax", "ArgMin")
def arg_extreme(b: SpecBuilder, p: None) -> None:
    x, ax = _tie_free(b, "data", 0)
    keepdims = b.attr("keepdims", OneOf([0, 1]), 1)
    b.attr("select_last_index", OneOf([0, 1]), 0)  # no ties: either picks the same index
    b.output(_reduced_shape(x.shape, ax, keepdims), interval=Interval(0, x.shape[ax] - 1))


@op("TopK")
def top_k(b: SpecBuilder, p: None) -> None:
    x, ax = _tie_free(b, "X", -1)
    b.attr("largest", OneOf([1, 0]), 1)
    # sorted=0 leaves the order of the K results to the implementation.
    b.attr("sorted", OneOf([1]), 1)
    d = x.shape[ax]
    k = b.draw("K[0]", Ints(1, d))
    b.const("K", [k])
    shape = list(x.shape)
    shape[ax] = k
    b.output(shape, interval=x.interval)
    b.output(shape, interval=Interval(0, d - 1))


# --- CumSum --------------------------------------------------------------------------------
@op("CumSum")
def cumsum(b: SpecBuilder, p: None) -> None:
    cap = b.cfg.max_reuse_dim

    def values(dtype: int) -> Values:
        # A running sum of up to ``cap`` (the largest dim) terms stays inside the bound.
        m = 0.999 * dt.value_range(dtype)[1] / cap
        return Values(-math.floor(m), math.floor(m)) if dtype in dt.INTS else Values(-m, m)

    x = b.input("x", rank=Ints(1, b.max_rank), values=values)
    exclusive = b.attr("exclusive", OneOf([0, 1]), 0)
    b.attr("reverse", OneOf([0, 1]), 0)
    # The axis: "A 0-D tensor", int32/int64 in [-r, r-1] (a 1-element 1-D one is outside
    # the standard: the reference evaluator rightly rejects it). It is an input like any
    # other (ONNX's own tests feed it at run time); a fresh one is a constant initializer.
    # The spec does not see its value, so the sum may run along the longest axis.
    b.input("axis", dims=[], values=Values(-x.rank, x.rank - 1), kind=WEIGHT)
    d = max(x.shape)
    terms = (0, d - 1) if exclusive else (1, d)  # fewest and most terms in a running sum
    lo = min(k * x.interval.lo for k in terms)
    hi = max(k * x.interval.hi for k in terms)
    b.output(x.shape, interval=Interval(lo, hi))


# --- Trilu ---------------------------------------------------------------------------------
@op("Trilu", since=14)
def trilu(b: SpecBuilder, p: None) -> None:
    x = b.input("input", rank=Ints(2, b.max_rank))
    b.attr("upper", OneOf([1, 0]), 1)
    if b.optional("k"):
        n, m = x.shape[-2:]
        # Any diagonal, and some beyond the matrix (keeps all or nothing) on both sides.
        k = b.draw("k", Ints(-(n + m), n + m))
        b.const("k", k)
    # Elements off the kept triangle become 0.
    b.output(x.shape, interval=Interval(min(x.interval.lo, 0), max(x.interval.hi, 0)))
