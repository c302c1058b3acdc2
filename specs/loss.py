"""Losses and Det: NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, Det.

The losses take scores of shape (N, C, d1, ..., dk) and class indices of shape
(N, d1, ..., dk) in [0, C); an element equal to ``ignore_index`` contributes nothing.
Per element, loss = -weight[t] * input[n, t, d...] (NLL; SCE applies log_softmax over C
first); ``reduction`` none keeps the per-element losses, sum adds them, mean divides the sum
by the sum of the weights of the elements not ignored.

Order: weight's presence -> input (wide) -> reduction, ignore_index -> target (index values,
fresh where an ignored element must be avoided) -> weight -> outputs.

Value bounds: with K = N * d1 * ... * dk target elements, a sum adds at most K products of
one input value and one weight, so sum is offered only where K * |input| fits the bound,
and the weights' domain keeps K * |input| * |w| inside it. mean uses positive weights: the
weighted mean is a convex combination of the per-element values -input[...] (or
-log_prob), so it stays in their hull. A mean over elements that are
all ignored divides 0 by 0: where ignore_index can match a target, the targets are distinct
along axis 0 (N >= 2), so at least one element is never ignored. Its kernels sum before
dividing: mean is offered where that sum stays finite (float16 only limits it).
"""

from __future__ import annotations

import math

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Ints, Linked, OneOf
from onnxfuzz.generate.lang.intervals import Interval, Values, point
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, WEIGHT, SpecBuilder

_OUTSIDE_II = (
    "a target equal to an ignore_index outside [-1, C]: targets are drawn in [0, C) plus "
    "an ignore_index next to that range"
)
NOT_GENERATED = {
    "test_nllloss_NCd1d2d3_none_no_weight_negative_ii": _OUTSIDE_II,
    "test_nllloss_NCd1d2d3_sum_weight_high_ii": _OUTSIDE_II,
    "test_sce_NCd1d2d3_none_no_weight_negative_ii": _OUTSIDE_II,
    "test_sce_NCd1d2d3_none_no_weight_negative_ii_log_prob": _OUTSIDE_II,
    "test_sce_NCd1d2d3_sum_weight_high_ii": _OUTSIDE_II,
    "test_sce_NCd1d2d3_sum_weight_high_ii_log_prob": _OUTSIDE_II,
}

# |weight| <= 2 (and, for sums, what keeps K * |value| * |weight| inside the bound); mean's
# weights are positive so that the sum of the counted weights is >= MEAN_WEIGHT_LO.
WEIGHT_MAX = 2.0
MEAN_WEIGHT_LO = 0.25
_FINITE = {dt.FLOAT16: 65504.0, dt.BFLOAT16: 3.3e38}


def _loss(b: SpecBuilder, log_softmax: bool) -> None:
    has_weight = b.optional(2)
    x = b.input(0, rank=Ints(2, 8), values=_score_values if log_softmax else Values())
    n, c = x.shape[0], x.shape[1]
    k = math.prod(x.shape) // c  # target elements
    bound = dt.value_range(x.dtype)[1]
    if log_softmax:
        # -log_softmax(x)[c] = logsumexp(x) - x[c] lies in [0, (x.hi - x.lo) + log C].
        # (>= 0 in float too: log(sum exp) >= log 1; a hair below 0 is allowed anyway.)
        per = Interval(-1e-6, x.interval.hi - x.interval.lo + math.log(c))
    else:
        per = -x.interval  # -input[n, t, d...]
    # sum: K products |value| * |weight| must stay in the bound. mean ends inside the
    # values' hull, but its kernels sum first: that sum must stay finite (float16: 65504).
    w_sum = min(WEIGHT_MAX, bound / (k * max(per.mag, 1.0)))
    finite = k * max(per.mag, 1.0) * WEIGHT_MAX <= _FINITE.get(x.dtype, 1e38) / 2
    reductions = ["none"] + (["sum"] if w_sum >= 1.0 else []) + (["mean"] if finite else [])
    # The default (mean) may be left implicit only where mean is offered.
    reduction = b.attr("reduction", OneOf(reductions), "mean" if "mean" in reductions else MISSING)

    # ignore_index in [-1, C]: inside [0, C) it matches drawn targets sometimes; -1 and C
    # are added to the targets' range so they match too. mean needs some element counted:
    # distinct targets along axis 0 (N >= 2) guarantee it, where N <= C leaves room for that.
    # (When mean cannot have that, an ignore_index above C that never matches.)
    ii_dom = Ints(c + 1, 2 * c) if reduction == "mean" and not 2 <= n <= c else Ints(-1, c)
    ii = b.attr("ignore_index", ii_dom, None)
    lo, hi = 0, c - 1
    if ii is not None and ii in (-1, c):
        lo, hi = min(lo, ii), max(hi, ii)
    distinct = 0 if reduction == "mean" and ii is not None and ii <= c else None
    b.input(
        1,
        dims=[n] + list(x.shape[2:]),
        values=Values(lo, hi, distinct_axis=distinct),
    )

    if reduction == "none":
        w_max = min(WEIGHT_MAX, bound / max(per.mag, 1.0))
        w_dom = Values(-w_max, w_max)
    elif reduction == "sum":
        w_dom = Values(-w_sum, w_sum)
    else:
        w_dom = Values(MEAN_WEIGHT_LO, WEIGHT_MAX)
    w = b.input(2, dims=[c], values=w_dom, kind=WEIGHT) if has_weight else None
    wiv = w.interval if w is not None else point(1.0)

    ignored = ii is not None
    if reduction == "none":
        iv = per * wiv
        iv = iv.union(point(0.0)) if ignored else iv
        b.output([n] + list(x.shape[2:]), interval=iv)
    elif reduction == "sum":
        t = (per * wiv).union(point(0.0))
        b.output([], interval=Interval(k * t.lo, k * t.hi))
    else:
        b.output([], interval=per)  # a weighted mean with positive weights
    if log_softmax:
        # The optional log_prob output (log_softmax over C): always produced, since the
        # builder has no choice for optional outputs; a test without it is still inside.
        b.output(x.shape, interval=Interval(-per.hi, 0.0))


def _score_values(dtype: int) -> Values:
    """Scores spanning at most bound - 32: -log_softmax <= span + log C stays in the bound;
    and at most 0.9 of the spread where exp(x - max) is a normal number, as LogSoftmax's
    input (specs/select.py: the reference evaluator takes log(softmax(x)) here too)."""
    m = min(dt.value_range(dtype)[1] / 2 - 16, 0.45 * dt.exp_normal_range(dtype))
    return Values(-m, m)


@op("NegativeLogLikelihoodLoss")
def nll_loss(b: SpecBuilder, p: None) -> None:
    _loss(b, log_softmax=False)


@op("SoftmaxCrossEntropyLoss")
def sce_loss(b: SpecBuilder, p: None) -> None:
    _loss(b, log_softmax=True)


# --- Det ---------------------------------------------------------------------------------
DET_N = 4  # largest matrix
DET_A = 1.5  # |a_ij| <= DET_A


def hadamard(n: int, m: float) -> float:
    """Hadamard's inequality: |det A| <= prod_i ||row_i|| <= (sqrt(n) * max |a_ij|)^n."""
    return (math.sqrt(n) * m) ** n


@op("Det")
def det(b: SpecBuilder, p: None) -> None:
    # X is (*, M, M). A near-singular matrix amplifies rounding error relative to det, but
    # the absolute error of an LU determinant stays around n * eps * prod ||row_i||, i.e.
    # eps times the Hadamard bound: with M <= 4 and |a_ij| <= 1.5 that bound is <= 81, so the
    # error is ~1e-5, far inside the comparison's atol, whatever the conditioning.
    def dims(r: int) -> list:
        first, second = Linked(Ints(1, DET_N)).pair()  # a square matrix per batch
        return [None] * (r - 2) + [first, second]

    x = b.input("X", rank=Ints(2, 8), dims=dims, values=Values(-DET_A, DET_A))
    m = x.shape[-1]
    h = hadamard(m, x.interval.mag)
    b.output(x.shape[:-2], interval=Interval(-h, h))
