"""The "not a bug" checks: each explains a localized value mismatch away, or does not.

A check sees one ``Mismatch`` and returns why it is not a bug (the text appended to the
verdict's message) or None. The ``Judge`` runs them in the order of ``NOT_A_BUG``; the
first that explains the mismatch makes it ``unstable``. No check loosens a tolerance:
each re-runs the reference to measure what legitimate evaluations of the model give.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from onnxfuzz.execute.sandbox import Outcome
from onnxfuzz.judge.localize import Divergence, single_node
from onnxfuzz.judge.oracle import OracleConfig, Verdict, compare, tolerance
from onnxfuzz.judge.precision import (
    float32_evaluation,
    has_half,
    within_constant_rounding,
    within_rounding,
)


@dataclass(frozen=True)
class Mismatch:
    """A value mismatch of ``backend`` against ``reference`` on one model, localized."""

    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    reference: str
    backend: str
    want: Outcome  # the reference's outcome
    got: Outcome  # the backend's
    divergence: Divergence | None  # None: the exposed model did not run on both
    tol_dtypes: dict[str, str] | None
    config: OracleConfig
    run_reference: Callable[[bytes, dict[str, np.ndarray]], Outcome]


Check = Callable[[Mismatch], str | None]


def amplified_rounding(m: Mismatch) -> str | None:
    """The reference, fed the backend's values of the first diverging node's inputs,
    reproduces the backend's output there: sub-tolerance differences were amplified.

    That those inputs' differences are rounding-sized, element by element, is the walk's
    to ensure (``localize.first_divergence``): a node whose float16 output holds an
    element beyond its own tolerance and what nudging its inputs moves it diverges, even
    inside the magnitude-scaled atol; and the reproduction is held to the same rule. A
    LeakyRelu off by 100 % on its small elements was walked past, and the Div after it
    called "amplified rounding" (audit 16, D3)."""
    d = m.divergence
    if d is None or d.node is None or not d.unstable:
        return None
    return (
        f"{m.reference} fed {m.backend}'s values of that node's inputs reproduces its "
        "output: amplified rounding, not a bug"
    )


def float16_rounding(m: Mismatch) -> str | None:
    """The difference at the diverging node is within what nudging its float16 inputs by a
    few ulps moves its output (``precision.within_rounding``)."""
    d = m.divergence
    if d is None or d.node is None:
        return None
    one = single_node(m.model, d.node)
    if one is None:  # an input's type is not declared: nothing to nudge
        return None
    seen = {**m.inputs, **d.want_exposed}
    tols = {
        # each element's own tolerance: the magnitude-scaled atol excused a 100 % error on
        # a LeakyRelu's small elements beside large ones (``precision._within_reach``)
        t: tolerance(
            m.reference, m.backend, t, d.want_exposed[t], m.config, m.tol_dtypes, scaled=False
        )
        for t in d.node.output
        if t in d.want_exposed
    }
    return within_rounding(
        one,
        {i.name: seen[i.name] for i in one.graph.input if i.name in seen},
        d.want_exposed,
        d.got_exposed,
        m.run_reference,
        tols.get,
    )


def float16_excess_precision(m: Mismatch) -> str | None:
    """In a float16 model, one side matches the model computed in float32 on the reference
    (``precision.float32_evaluation``): it keeps float16 intermediates in higher precision.
    The reference may be that side only if the backend agrees with it on every
    materialized intermediate (its outputs did not change when they were exposed)."""
    if not has_half(m.model):
        return None
    loose = float32_evaluation(m.model, m.inputs, m.run_reference)
    if loose is None:
        return None
    order = [o.name for o in m.model.graph.output]

    def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
        v = compare(m.reference, a, m.backend, b, order, m.config, m.tol_dtypes)
        return v.verdict == Verdict.OK

    want, got = m.want.outputs or {}, m.got.outputs or {}
    if same(loose, got):
        return (
            f"{m.backend} matches the model computed in float32 on {m.reference}: it keeps "
            "float16 intermediates in higher precision (excess precision, not a bug)"
        )
    d = m.divergence
    exposed = d.got_exposed if d is not None and d.node is None else None
    if exposed is not None and same(loose, want) and same(exposed, got):
        return (
            f"{m.reference} matches the model computed in float32 (it keeps float16 "
            f"intermediates in higher precision) while {m.backend} agrees with {m.reference} "
            "on every materialized intermediate: excess precision, not a bug"
        )
    return None


def float16_constant_rounding(m: Mismatch) -> str | None:
    """A float16 mismatch that vanishes when every intermediate is exposed (a fusion the
    exposed model does not get) and lies within what rounding the model's float16
    constants and inputs moves its outputs (``precision.within_constant_rounding``)."""
    d = m.divergence
    if not has_half(m.model) or (d is not None and d.node is not None):
        return None  # a localized divergence: the node-level checks decide
    if m.want.outputs is None or m.got.outputs is None:
        return None

    want, got = m.want.outputs, m.got.outputs

    def tol(name: str) -> tuple[float, float] | None:
        # each element's own tolerance (see ``precision._within_reach``)
        return tolerance(
            m.reference, m.backend, name, want[name], m.config, m.tol_dtypes, scaled=False
        )

    return within_constant_rounding(m.model, m.inputs, want, got, m.run_reference, tol)


# Ops whose output jumps at a boundary of their inputs' values: a comparison's at equal
# operands, Floor's and Ceil's at integers, Round's at halves, Sign's at 0.
_COMPARISONS = frozenset({"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"})
_STEPS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Floor": lambda x: np.abs(x - np.round(x)),
    "Ceil": lambda x: np.abs(x - np.round(x)),
    "Round": lambda x: np.abs(x - np.floor(x) - 0.5),
    "Sign": np.abs,
}


def tie_at_a_step(m: Mismatch) -> str | None:
    """The first diverging node jumps at a boundary of its inputs' values (a comparison,
    Floor, Ceil, Round, Sign), and every element it differs in has inputs within their
    type's tolerance of that boundary: which side they fall on is rounding's choice (ORT
    compared Atanh(x) with x in float32 where the float16 model rounds Atanh(x) to x: 55
    elements of GreaterOrEqual filed as ORT's bug)."""
    d = m.divergence
    if d is None or d.node is None:
        return None
    op = d.node.op_type
    if op not in _COMPARISONS and op not in _STEPS:
        return None
    seen = {**m.inputs, **d.want_exposed}
    out = d.node.output[0]
    want, got = d.want_exposed.get(out), d.got_exposed.get(out)
    names = list(d.node.input[: 2 if op in _COMPARISONS else 1])
    if want is None or got is None or np.shape(want) != np.shape(got):
        return None
    if any(t not in seen or np.asarray(seen[t]).dtype.kind != "f" for t in names):
        return None
    differ = np.asarray(want) != np.asarray(got)
    if not differ.any():
        return None
    args, slack = [], []
    for t in names:
        v = np.asarray(seen[t])
        tol = tolerance(m.reference, m.backend, t, v, m.config, m.tol_dtypes) or (0.0, 0.0)
        wide = np.broadcast_to(v.astype(np.float64), differ.shape)
        args.append(wide)
        slack.append(tol[0] + tol[1] * np.abs(wide))
    if op in _COMPARISONS:
        gap, room = np.abs(args[0] - args[1]), np.maximum(slack[0], slack[1])
        where = "its operands are equal"
    else:
        gap, room = _STEPS[op](args[0]), slack[0]
        where = "its input is at the step"
    with np.errstate(invalid="ignore"):
        near = gap <= room
    if not near[differ].all():
        return None
    return (
        f"{op} differs only where {where} within the inputs' tolerance "
        f"({int(differ.sum())} elements): a tie rounding decides, not a bug"
    )


NOT_A_BUG: tuple[Check, ...] = (
    amplified_rounding,
    tie_at_a_step,
    float16_rounding,
    float16_excess_precision,
    float16_constant_rounding,
)
