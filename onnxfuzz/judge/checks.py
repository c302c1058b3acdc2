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
from onnxfuzz.judge.oracle import OracleConfig, tolerance
from onnxfuzz.judge.precision import excess_precision, within_rounding


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
    reproduces the backend's output there: sub-tolerance differences were amplified."""
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
    seen = {**m.inputs, **d.want_exposed}
    tols = {
        t: tolerance(m.reference, m.backend, t, d.want_exposed[t], m.config, m.tol_dtypes)
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
    """One side matches the float16 model computed in float32 (``precision``)."""
    d = m.divergence
    return excess_precision(
        m.model,
        m.inputs,
        m.reference,
        m.want.outputs or {},
        m.backend,
        m.got.outputs or {},
        m.run_reference,
        m.config,
        m.tol_dtypes,
        d.got_exposed if d is not None and d.node is None else None,
    )


NOT_A_BUG: tuple[Check, ...] = (amplified_rounding, float16_rounding, float16_excess_precision)
