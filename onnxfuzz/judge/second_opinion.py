"""A second opinion on a disagreement that no majority decided.

With two backends, a mismatch says only that they differ: either may be wrong, and the
report accuses no one (``attribution``). Before such a finding is filed, the ONNX
reference evaluator (``onnx.reference``, in its own sandboxed worker) runs the reduced
model, and the report says which side it agrees with, within the campaign's tolerances.
It is an opinion, not a verdict: the evaluator has faults of its own (where a documented
one applies to the model it is not asked), so the finding's suspect stays unset and the
report says what the evaluator said, for the user to check against the operator's
definition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx

from onnxfuzz.errors import OnnxFuzzError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.attribution import (
    REFERENCE_EVALUATOR,
    is_reference_evaluator,
    reference_fault,
)
from onnxfuzz.judge.oracle import OracleConfig, Verdict, compare, precision_dtypes

STARTUP_S = 60.0  # for the evaluator's worker to import onnx and numpy


@dataclass
class Opinion:
    by: str  # the backend asked (the ONNX reference evaluator's adapter)
    agrees: list[str]  # the disagreeing backends it agrees with (none, one or both)
    said: str  # what it did: "ran", or why it did not ("crash: ...")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def needed(backends: list[str], model: onnx.ModelProto) -> bool:
    """Whether a no-majority finding of a campaign over ``backends`` can get an opinion:
    the evaluator did not vote already, and no documented fault of it applies."""
    return not any(is_reference_evaluator(b) for b in backends) and reference_fault(model) is None


def second_opinion(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    outcomes: dict[str, Outcome],
    cfg: OracleConfig,
    timeout: float,
    memory_mb: float = 8192.0,
) -> Opinion:
    """The evaluator's outputs on ``model`` compared with each backend's in ``outcomes``
    (those that ran), as the campaign compares (``oracle.compare``: the evaluator's
    values as the expected ones)."""
    try:
        with BackendPool([REFERENCE_EVALUATOR], timeout, memory_mb, STARTUP_S) as pool:
            o = pool.run_one(REFERENCE_EVALUATOR, model.SerializeToString(), inputs)
    except OnnxFuzzError as e:  # the worker did not start: no opinion, said so
        return Opinion(REFERENCE_EVALUATOR, [], f"did not start: {e}")
    if o.status != Status.OK or o.outputs is None:
        first = (o.message or "").strip().splitlines()[:1]
        return Opinion(REFERENCE_EVALUATOR, [], f"{o.status}: {' '.join(first)[:300]}")
    order = [out.name for out in model.graph.output]
    dtypes = precision_dtypes(model)
    agrees = [
        label
        for label, got in outcomes.items()
        if got.status == Status.OK
        and got.outputs is not None
        and compare(REFERENCE_EVALUATOR, o.outputs, label, got.outputs, order, cfg, dtypes).verdict
        == Verdict.OK
    ]
    return Opinion(REFERENCE_EVALUATOR, agrees, "ran")


def sentence(opinion: dict[str, Any], backend: str, reference: str, names: dict[str, str]) -> str:
    """What issue.md says of an opinion (``Opinion.as_dict``, as meta.json keeps it), the
    backends by their display ``names``."""
    agrees = list(opinion.get("agrees") or [])
    b, r = names.get(backend, backend), names.get(reference, reference)
    who = "The ONNX reference evaluator (onnx.reference), run on the reduced model,"
    if opinion.get("said") != "ran":
        return f"{who} gave no opinion ({opinion.get('said')})."
    if agrees == [reference]:
        return f"{who} agrees with {r} and not with {b}: {b} is the likely culprit."
    if agrees == [backend]:
        return f"{who} agrees with {b} and not with {r}: {r} is the likely culprit."
    if agrees:
        return f"{who} agrees with both within the tolerances (their difference is at its edge)."
    return f"{who} agrees with neither."
