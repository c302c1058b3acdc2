"""Precision at the diverging node: a lone op's error, judged by a per-op error budget.

The end-to-end tolerance (float32: atol 1e-3, rtol 1e-2) must absorb what a whole model
does to rounding differences, so a kernel that is wrong by 1e-3 relative (thousands of
ulps) passes it. Judged alone, with the very input values the backend used, one op has far
less excuse: the reference runs the first diverging node on the backend's values of its
inputs (``localize.single_node``), and the backend's output there must lie within the op's
budget::

    |got - want| <= rel * |want| + scale * S + atol

with ``S`` the largest finite magnitude among the node's float inputs and its output (a
contracted multiply-add, a different order of a few terms, or argument reduction err in
proportion to the inputs, not to the output). Budgets, float32 only, by op class:

================  =============  ==============  ======  ==================================
class             rel            scale           atol    source
================  =============  ==============  ======  ==================================
correctly         8 ulps         8 ulps          0       IEEE 754: +, -, *, /, sqrt and data
rounded                                                  movement are exact or correctly
                                                         rounded; 8 ulps leave room for a
                                                         reciprocal-multiply and contraction
math (default)    1e-4           8 ulps          1e-5    onnxruntime's own kernel tests
                                                         (test/providers/checkers.cc,
                                                         DefaultTolerance<float>: absolute
                                                         1e-5, relative 1e-4)
accumulating      1e-3           1e-3 of |out|   1e-5    ONNX's backend test runner and
                                                         onnxruntime's run of it
                                                         (onnx_backend_test_series.py:
                                                         rtol 1e-3, atol 1e-5); sums of many
                                                         terms cancel, so the scale is the
                                                         output's largest magnitude
================  =============  ==============  ======  ==================================

An ulp here is float32's machine epsilon, 2**-23, relative. Every relative budget is at
least ten times tighter than the end-to-end tolerance, and a few ulps pass every one of them;
a lone op off by 1e-3 relative is reported unless it accumulates (there 1e-3 is the budget's
edge: a different summation order of a long sum moves that far).

Ill-conditioned points. A budget bounds an op's own rounding where the op is well
conditioned; where it is not, the same rounding moves the output much further. A
LayerNormalization of a constant row is the case seen in a 30-minute campaign: the mean,
summed in float32 as the op's definition says (stash_type 1), lands an ulp away from the
row's value, and ``(x - mean) / sqrt(var + epsilon)`` turns that ulp into 3e-4 where the
exact result (and ONNX Runtime's) is 0. Backward error analysis says what a legitimate
float32 evaluation may give: a computed sum is the exact sum of its terms each perturbed by
a few units of roundoff (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed.,
section 4.2). So, before a lone op is reported, the reference runs the node alone again with
its float32 inputs moved by ``NUDGE_ULPS`` ulps (``NUDGE_DRAWS`` random draws, each element
its own way: ``onnxfuzz.judge.precision`` nudges float16 the same way), and the farthest
those runs moved its output is added to the budget, element by element. Where the op is
well conditioned this adds a few ulps (a 1e-3 error stays far beyond it); where it is not,
nothing there can tell a bug from rounding.

Nothing is re-run unless the model's float32 outputs differ from the reference's by more
than the math budget (``beyond_screen``); then one run of both backends with every
intermediate exposed, one run of the reference on the diverging node alone, and, only if
that node is beyond its budget, ``NUDGE_DRAWS`` runs of it on nudged inputs.

Not judged: models with float16 anywhere (CPU backends legitimately compute float16 ops in
float32: ``onnxfuzz.judge.precision`` handles them), float64 (onnxruntime's own tests allow
1e-5, no tighter than the end-to-end tolerance), integer and bool outputs (compared exactly
already).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import onnx

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.localize import (
    GUILTY_TRIES,
    expose_all,
    node_alone,
    run_alone,
    single_node,
)
from onnxfuzz.judge.oracle import outside
from onnxfuzz.judge.precision import NUDGE_DRAWS, NUDGE_ULPS, has_half, nudge_reach

EPS32 = float(np.finfo(np.float32).eps)  # one float32 ulp, relative: 2**-23


@dataclass(frozen=True)
class Budget:
    """How far one op's float32 output may be from the reference's on the same inputs."""

    name: str  # the op class, for the report
    rel: float  # of |want|, element by element
    scale: float  # of S, the largest finite magnitude ...
    atol: float
    scale_of_inputs: bool = True  # ... among the inputs and the output (else the output's)


CORRECTLY_ROUNDED = Budget("correctly rounded", 8 * EPS32, 8 * EPS32, 0.0)
MATH = Budget("math", 1e-4, 8 * EPS32, 1e-5)
ACCUMULATING = Budget("accumulating", 1e-3, 1e-3, 1e-5, scale_of_inputs=False)

_CORRECTLY_ROUNDED_OPS = frozenset(
    [
        "Abs",
        "Add",
        "BitShift",
        "Cast",
        "CastLike",
        "Ceil",
        "Clip",
        "Concat",
        "DepthToSpace",
        "Div",
        "Expand",
        "Flatten",
        "Floor",
        "Gather",
        "GatherElements",
        "GatherND",
        "GlobalMaxPool",
        "Identity",
        "LeakyRelu",
        "Max",
        "MaxPool",
        "Min",
        "Mul",
        "Neg",
        "PRelu",
        "Pad",
        "Reciprocal",
        "ReduceMax",
        "ReduceMin",
        "Relu",
        "Reshape",
        "ReverseSequence",
        "Round",
        "Shrink",
        "Sign",
        "Slice",
        "SpaceToDepth",
        "Split",
        "Sqrt",
        "Squeeze",
        "Sub",
        "ThresholdedRelu",
        "Tile",
        "Transpose",
        "Trilu",
        "Unsqueeze",
        "Where",
    ]
)
_ACCUMULATING_OPS = frozenset(
    [
        "Attention",
        "AveragePool",
        "BatchNormalization",
        "Conv",
        "ConvTranspose",
        "CumSum",
        "DFT",
        "Det",
        "Einsum",
        "GlobalAveragePool",
        "GlobalLpPool",
        "GridSample",
        "GroupNormalization",
        "GRU",
        "InstanceNormalization",
        "LayerNormalization",
        "LogSoftmax",
        "LpNormalization",
        "LpPool",
        "LRN",
        "LSTM",
        "MatMul",
        "Gemm",
        "Mean",
        "MeanVarianceNormalization",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceMean",
        "ReduceProd",
        "ReduceSum",
        "ReduceSumSquare",
        "Resize",
        "RMSNormalization",
        "RNN",
        "RoiAlign",
        "STFT",
        "Softmax",
        "Sum",
    ]
)


def budget_of(op_type: str) -> Budget:
    """The budget of an ONNX op's float32 output (the math class unless listed)."""
    if op_type in _CORRECTLY_ROUNDED_OPS:
        return CORRECTLY_ROUNDED
    if op_type in _ACCUMULATING_OPS:
        return ACCUMULATING
    return MATH


def _largest(arrays: list[np.ndarray]) -> float:
    biggest = 0.0
    for a in arrays:
        if a.dtype.kind != "f" or not a.size:
            continue
        mags = np.abs(a.astype(np.float64))
        mags = mags[np.isfinite(mags)]
        if mags.size:
            biggest = max(biggest, float(mags.max()))
    return biggest


def _outside(
    b: Budget, w: np.ndarray, g: np.ndarray, scale_of: float, reach: np.ndarray | float = 0.0
) -> np.ndarray:
    """Elements of float32 ``g`` outside budget ``b`` around ``w`` (``scale_of``: S), widened
    by ``reach`` (how far rounding the op's inputs moves ``w``: see the module doc)."""
    wf, gf = w.astype(np.float64), g.astype(np.float64)
    err = np.abs(gf - wf)
    allowed = b.rel * np.abs(wf) + b.scale * scale_of + b.atol + reach
    ok = (err <= allowed) | (np.isnan(wf) & np.isnan(gf))
    ok |= np.isinf(wf) & (wf == gf)
    return ~ok


def over_budget(
    node: onnx.NodeProto,
    inputs: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    reach: dict[str, np.ndarray] | None = None,
) -> str | None:
    """Why ``got`` (the backend's float32 outputs of ``node``) is beyond the op's budget
    around ``want`` (the reference's, on the same ``inputs``), or None when within it;
    ``reach``: per output, how far nudging the inputs moved ``want`` (``rounding_reach``),
    added to the budget."""
    b = budget_of(node.op_type)
    for name in node.output:
        w, g = want.get(name), got.get(name)
        if w is None or g is None or w.dtype != np.float32 or g.shape != w.shape or not w.size:
            continue
        magnitudes = [*inputs.values(), w] if b.scale_of_inputs else [w]
        widened = (reach or {}).get(name, 0.0)
        bad = _outside(b, w, g, _largest(magnitudes), widened)
        if not bad.any():
            continue
        wf, gf = w.astype(np.float64), g.astype(np.float64)
        err = np.abs(gf - wf)
        rel = err[bad] / np.maximum(np.abs(wf[bad]), np.finfo(np.float32).tiny)
        worst = float(np.nan_to_num(rel, nan=np.inf).max())
        ulps = float(np.nan_to_num(err[bad] / np.spacing(np.abs(w[bad])), nan=np.inf).max())
        nudged = f", and beyond what {NUDGE_ULPS}-ulp nudges of its inputs move" if reach else ""
        # the values too: "off by 0.00317 relative" alone read as rounding noise where
        # every element was off by exactly 1 (-314.124 for -315.124)
        at = np.unravel_index(int(np.argmax(np.where(bad, err, -1.0))), w.shape)
        return (
            f"{node.op_type} ({node.name or name}) alone, on the same input values, is off by up "
            f"to {worst:.3g} relative ({ulps:.3g} float32 ulps; max abs error "
            f"{float(err[bad].max()):.6g}, {float(g[at]):.7g} for {float(w[at]):.7g} at "
            f"{list(map(int, at))}) in {int(bad.sum())}/{w.size} "
            f"elements of {name}: beyond its {b.name} budget (rel {b.rel:.3g}, atol "
            f"{b.atol:.3g}{nudged}; see onnxfuzz.judge.budget)"
        )
    return None


def rounding_reach(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    fed: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome],
) -> dict[str, np.ndarray] | None:
    """Per float32 output of ``node``: the farthest the reference's output (``want``, on
    ``fed``) moves when the node alone runs on ``fed`` with every float32 input moved by
    ``NUDGE_ULPS`` ulps, each element up or down (``NUDGE_DRAWS`` draws). None when the node
    cannot be run alone or a run fails or changes a shape."""
    one = single_node(model, node)
    if one is None:
        return None
    data = one.SerializeToString()
    rng = np.random.default_rng(0)
    names = [t for t in node.output if t in want and want[t].dtype == np.float32]
    draws = (
        run_reference(
            data, {k: _nudged32(v, rng) if v.dtype == np.float32 else v for k, v in fed.items()}
        )
        for _ in range(NUDGE_DRAWS)
    )
    return nudge_reach(draws, names, want)


def _nudged32(a: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``a`` (float32) moved by NUDGE_ULPS ulps up or down, each element its own way."""
    step = np.spacing(np.abs(a)) * np.float32(NUDGE_ULPS)
    sign = rng.choice(np.array([-1.0, 1.0], np.float32), size=a.shape)
    return (a + sign * step).astype(np.float32)


def beyond_screen(want: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> bool:
    """Whether any float32 output of the model is beyond the math budget (the output's own
    magnitude as S): only then is the model worth localizing for a lone op's error."""
    for name, w in want.items():
        g = got.get(name)
        if (
            w.dtype == np.float32
            and g is not None
            and g.shape == w.shape
            and w.size
            and _outside(MATH, w, g, _largest([w])).any()
        ):
            return True
    return False


def lone_op_error(
    model: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    reference: str,
    backend: str,
    run: Callable[[bytes], dict[str, Outcome]],
    run_reference: Callable[[bytes, dict], Outcome],
    run_backend: Callable[[bytes, dict], Outcome] | None = None,
    tolerance: tuple[float, float] | None = None,
) -> LoneError | None:
    """The first diverging float32 node of ``model`` (every intermediate exposed, in
    topological order: the first whose output is beyond its op's budget) when, run alone
    by the reference on the backend's own values of its inputs, it is still beyond its
    budget: (node, why). None when there is none, when that node is within its budget on
    the same inputs (its inputs' differences were amplified), or when it cannot be judged
    (float16 in the model, an exposed or lone run that fails).

    With ``run_backend`` (a model and its feeds, on ``backend``) the backend runs the node
    alone on the same inputs as well, and ``why`` quotes that run: a node it gets right
    alone is passed over for a later one it gets wrong alone (``GUILTY_TRIES`` at most;
    ``localize``'s module doc says why), and without one there is no lone op's error.
    ``gross``: the node's error is beyond ``tolerance`` (float32's atol, rtol: the
    campaign's) as well, a wrong value that the model's later ops hid, not a precision
    finding (an audit's Softmax off by 0.25, 7x relative, was filed as "precision")."""
    if has_half(model):
        return None
    # declares every intermediate's type: nodes run alone
    probe = expose_all(model, rankless=False)
    outcomes = run(probe.SerializeToString())
    ref, got = outcomes.get(reference), outcomes.get(backend)
    if ref is None or got is None or ref.status != Status.OK or got.status != Status.OK:
        return None
    want: dict[str, np.ndarray] = {**feeds, **(ref.outputs or {})}
    have: dict[str, np.ndarray] = {**feeds, **(got.outputs or {})}
    passed_over = 0  # diverging nodes the backend got right alone
    for node in probe.graph.node:
        outs = [t for t in node.output if t in want and t in have]
        if not outs or over_budget(node, _ins(node, want), want, have) is None:
            continue
        alone = node_alone(probe, node, have, run_reference)
        if alone is None:
            if passed_over:
                continue
            return None
        fed, outputs = alone
        if over_budget(node, fed, outputs, have) is None:
            if passed_over:
                continue
            return None
        mine = have
        if run_backend is not None:
            alone_outputs = run_alone(probe, node, fed, run_backend)
            lone = None if alone_outputs is None else {**fed, **alone_outputs}
            if lone is not None and over_budget(node, fed, outputs, lone) is None:
                passed_over += 1  # right alone: the model around it makes it wrong
                if passed_over > GUILTY_TRIES:
                    return None
                continue
            mine = lone if lone is not None else have
        # beyond the budget: is the op ill-conditioned here? (see the module doc)
        reach = rounding_reach(probe, node, fed, outputs, run_reference)
        why = over_budget(node, fed, outputs, mine, reach)
        if why is None:
            return None
        return LoneError(node, why, _beyond(node, outputs, mine, tolerance))
    return None


class LoneError(NamedTuple):
    node: onnx.NodeProto
    why: str
    gross: bool  # beyond the per-type tolerance too: a wrong value, not a precision one


def _beyond(
    node: onnx.NodeProto,
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
    tolerance: tuple[float, float] | None,
) -> bool:
    """Whether an output of ``node`` in ``got`` is outside ``tolerance`` of ``want``."""
    if tolerance is None:
        return False
    for name in node.output:
        w, g = want.get(name), got.get(name)
        if w is None or g is None or g.shape != w.shape:
            continue
        if outside(w, g, tolerance).any():
            return True
    return False


def _ins(node: onnx.NodeProto, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {t: values[t] for t in node.input if t in values}


def repro_tolerance(model: onnx.ModelProto, output: str) -> tuple[float, float] | None:
    """(atol, rtol) for a reproducer to compare a precision finding's float32 outputs by:
    the budget of the op that produces ``output`` (None: no such node)."""
    node = next((n for n in model.graph.node if output in n.output), None)
    if node is None:
        return None
    b = budget_of(node.op_type)
    return (b.atol, b.rel)


def precision_again(want: Outcome, again: Outcome) -> bool:
    """Whether a fresh run of the backend (``again``) shows a precision finding once more,
    without localizing it anew: it runs, with the reference's (``want``) output shapes, and
    its float32 outputs are beyond the screen around the reference's (that they are within
    the end-to-end tolerance is the caller's check)."""
    if again.status != Status.OK or again.outputs is None or want.outputs is None:
        return False
    if any(
        k in again.outputs and again.outputs[k].shape != w.shape for k, w in want.outputs.items()
    ):
        return False
    return beyond_screen(want.outputs, again.outputs)
