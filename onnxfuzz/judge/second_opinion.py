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
from onnx import version_converter

from onnxfuzz.errors import OnnxFuzzError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.generate.corpus.validate import model_opset
from onnxfuzz.judge.attribution import (
    REFERENCE_EVALUATOR,
    is_reference_evaluator,
    reference_fault,
)
from onnxfuzz.judge.oracle import OracleConfig, Verdict, compare, precision_dtypes

STARTUP_S = 60.0  # for the evaluator's worker to import onnx and numpy
# Where a documented fault of the evaluator applies at the model's own opset (it has no
# DequantizeLinear-13: every quantized model of opsets 13..18), it is asked about the
# model converted to this opset by ONNX's own version converter, if none applies there.
CONVERT_TO = 21


@dataclass
class Opinion:
    by: str  # the backend asked (the ONNX reference evaluator's adapter)
    agrees: list[str]  # the disagreeing backends it agrees with (none, one or both)
    said: str  # what it did: "ran", or why it did not ("crash: ...")
    converted: int = 0  # the opset it ran the model converted to (0: the model as it is)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluable(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int] | None:
    """The model the evaluator is asked about, and the opset it was converted to: the
    model itself (0) where no documented fault of the evaluator applies, else the model
    converted to ``CONVERT_TO`` where none applies there; None where one applies either
    way, or the conversion fails."""
    if reference_fault(model) is None:
        return model, 0
    if model_opset(model) >= CONVERT_TO:
        return None
    try:
        converted = version_converter.convert_version(model, CONVERT_TO)
        onnx.checker.check_model(converted)
    except Exception:  # noqa: BLE001 - an op without an adapter, a checker's objection
        return None
    return (converted, CONVERT_TO) if reference_fault(converted) is None else None


def needed(backends: list[str], model: onnx.ModelProto) -> bool:
    """Whether a no-majority finding of a campaign over ``backends`` can get an opinion:
    the evaluator did not vote already, and it can be asked (``evaluable``)."""
    return not any(is_reference_evaluator(b) for b in backends) and evaluable(model) is not None


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
    values as the expected ones); the model as ``evaluable`` gives it."""
    asked = evaluable(model)
    if asked is None:
        fault = reference_fault(model)
        return Opinion(REFERENCE_EVALUATOR, [], f"a documented fault applies: {fault}")
    asked_model, converted = asked
    try:
        with BackendPool([REFERENCE_EVALUATOR], timeout, memory_mb, STARTUP_S) as pool:
            o = pool.run_one(REFERENCE_EVALUATOR, asked_model.SerializeToString(), inputs)
    except OnnxFuzzError as e:  # the worker did not start: no opinion, said so
        return Opinion(REFERENCE_EVALUATOR, [], f"did not start: {e}", converted)
    if o.status != Status.OK or o.outputs is None:
        first = (o.message or "").strip().splitlines()[:1]
        said = f"{o.status}: {' '.join(first)[:300]}"
        return Opinion(REFERENCE_EVALUATOR, [], said, converted)
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
    return Opinion(REFERENCE_EVALUATOR, agrees, "ran", converted)


def sided_one(opinion: dict[str, Any] | None) -> bool:
    """Whether an opinion (``Opinion.as_dict``) took a side: it ran and agrees with exactly
    one of the two backends."""
    return bool(opinion) and opinion.get("said") == "ran" and len(opinion.get("agrees") or []) == 1


def sides_with_backend(opinion: dict[str, Any] | None, backend: str) -> bool:
    """Whether an opinion (``Opinion.as_dict``) agrees with the finding's backend alone:
    the comparison's reference is then the likely culprit."""
    return sided_one(opinion) and opinion is not None and opinion["agrees"] == [backend]


def undecided(meta: dict[str, Any]) -> bool:
    """Whether a finding (meta.json's fields) is a mismatch of two backends nothing
    decided: no majority named a suspect, it is not the backend at odds with itself (its
    second run, its caller's inputs) and no opinion took a side. The culprit search then
    says where inside the backend the difference arises, not that the backend is wrong."""
    own = meta.get("stage") == "rerun" or meta.get("kind") == "input"
    return (
        meta.get("verdict") == "mismatch"
        and meta.get("suspect") is None
        and meta.get("reference") != meta.get("backend")
        and not own
        and not sided_one(meta.get("second_opinion"))
    )


def as_reported(meta: dict[str, Any]) -> dict[str, Any]:
    """A bundle's meta.json as its report tells it: where the evaluator agrees with the
    finding's backend and not with the comparison's reference, the reference is the side
    the report is about (its tracker, its plain reproducer, its culprit search, its values
    as the actual ones), with ``evaluator_sides_with`` naming the backend. A buggy adapter
    given as the first --backend (the default reference) had ORT's correct Softmax filed
    in ORT's tracker, "ort returns wrong results", with the adapter's doubled values as
    the expected ones. meta.json itself keeps the comparison as it ran: the signature,
    repro.py and replay judge the backend against the reference."""
    backend, reference = meta.get("backend", ""), meta.get("reference") or ""
    if (
        meta.get("verdict") != "mismatch"
        or not reference
        or reference == backend
        or not sides_with_backend(meta.get("second_opinion"), backend)
    ):
        return meta
    return {
        **meta,
        "backend": reference,
        "name": meta.get("reference_name") or reference,
        "reference": backend,
        "reference_name": meta.get("name") or backend,
        "evaluator_sides_with": backend,
    }


def sentence(opinion: dict[str, Any], backend: str, reference: str, names: dict[str, str]) -> str:
    """What issue.md says of an opinion (``Opinion.as_dict``, as meta.json keeps it), the
    backends by their display ``names``."""
    agrees = list(opinion.get("agrees") or [])
    b, r = names.get(backend, backend), names.get(reference, reference)
    who = "The ONNX reference evaluator (onnx.reference), run on the reduced model,"
    if opinion.get("converted"):  # a documented fault at the model's own opset
        who = (
            "The ONNX reference evaluator (onnx.reference), run on the reduced model "
            f"converted to opset {opinion['converted']} by onnx.version_converter (at the "
            "model's own opset a documented fault of it applies),"
        )
    if opinion.get("said") != "ran":
        return f"{who} gave no opinion ({opinion.get('said')})."
    if agrees == [reference]:
        return f"{who} agrees with {r} and not with {b}: {b} is the likely culprit."
    if agrees == [backend]:
        return f"{who} agrees with {b} and not with {r}: {r} is the likely culprit."
    if agrees:
        return f"{who} agrees with both within the tolerances (their difference is at its edge)."
    return f"{who} agrees with neither."
