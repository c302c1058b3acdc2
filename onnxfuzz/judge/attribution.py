"""Who is to blame: with three or more backends, the one that departs from the agreeing
majority; when the reference is the odd one out, the finding is the reference's.

``blame`` is the policy a campaign applies to a judged test: each backend's verdict, its
suspect, and the backend a finding of it is reproduced against.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from itertools import combinations

import numpy as np
import onnx

from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import OnnxFuzzError
from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.generate.corpus.disputed import disputed
from onnxfuzz.generate.corpus.reference_limits import Limitation, reference_limits
from onnxfuzz.judge.declared import declared_outputs, departures
from onnxfuzz.judge.judge import Assessed, Judge
from onnxfuzz.judge.oracle import Judgement, OracleConfig, Verdict, compare, precision_dtypes
from onnxfuzz.judge.signature import normalize


@dataclass
class Attribution:
    majority: set[str]  # backends whose outputs agree (more than half of those that ran)
    reference_odd: bool  # the reference is outside the agreeing majority


def attribute(
    model: onnx.ModelProto, outcomes: dict[str, Outcome], reference: str, cfg: OracleConfig
) -> Attribution | None:
    """With three or more backends that ran, which of them agree? None without a majority."""
    ran = [
        label for label, o in outcomes.items() if o.status == Status.OK and o.outputs is not None
    ]
    # A backend departing from the declared types and shapes where another meets them cannot
    # be in the majority, however many share its mistake (onnxfuzz.judge.declared).
    off = departures({k: outcomes[k].outputs or {} for k in ran}, declared_outputs(model))
    ran = [label for label in ran if label not in off]
    # The ONNX reference evaluator's vote does not count on a model where one of its
    # documented faults applies (onnxfuzz.generate.corpus.reference_limits): with another backend
    # sharing the fault (numpy-style Slice with a negative step in onnx2torch too), the two
    # would outvote the one that follows the spec.
    if any(is_reference_evaluator(label) for label in ran) and reference_fault(model) is not None:
        ran = [label for label in ran if not is_reference_evaluator(label)]
    if len(ran) < 3:
        return None
    order = [o.name for o in model.graph.output]
    tol_dtypes = precision_dtypes(model)
    agree: dict[str, set[str]] = {label: set() for label in ran}
    for a, b in combinations(ran, 2):
        v = compare(
            a, outcomes[a].outputs or {}, b, outcomes[b].outputs or {}, order, cfg, tol_dtypes
        )
        if v.verdict == Verdict.OK:
            agree[a].add(b)
            agree[b].add(a)
    best = max(ran, key=lambda label: (len(agree[label]), label == reference))
    group = {best} | agree[best]
    if 2 * len(group) <= len(ran) or any(agree[x] < group - {x} for x in group):
        return None  # no agreeing majority
    return Attribution(group, reference not in group)


REFERENCE_EVALUATOR = "onnx-reference"  # the adapter of onnx.reference.ReferenceEvaluator


def reference_fault(model: onnx.ModelProto) -> Limitation | None:
    """The first documented fault of the reference evaluator that applies to ``model``;
    None where none does or that cannot be told (a model without the value_info the check
    reads: the reference's values then count, as they did before the check)."""
    try:
        faults = reference_limits(model)
    except (KeyError, IndexError, ValueError, TypeError):
        return None
    return faults[0] if faults else None


def is_reference_evaluator(label: str) -> bool:
    try:
        return parse_backend(label).target == REFERENCE_EVALUATOR
    except OnnxFuzzError:
        return False


@dataclass
class Blamed:
    """One backend's verdict on a test, with the campaign's attribution."""

    assessed: Assessed
    suspect: str | None  # the backend at fault, where one can be named
    against: str  # the backend a finding of this one reproduces against
    odd_one_out: bool  # the reference, departing from an agreeing majority
    shared_with: list[str] = field(default_factory=list)  # backends failing the same way


def _failure(j: Judgement) -> tuple[str, str | None, str]:
    return (j.verdict, j.stage, normalize(j.message))


def _shared(assessed: dict[str, Assessed], reference: str) -> list[str]:
    """Backends that fail exactly as the reference does on this test (same verdict, stage
    and normalized message): one failure of a shared component, not one bug each."""
    ref = assessed[reference]
    if ref.signature is None or ref.judgement.verdict not in (Verdict.CRASH, Verdict.TIMEOUT):
        return []
    return [
        label
        for label, a in assessed.items()
        if label != reference
        and a.signature is not None
        and _failure(a.judgement) == _failure(ref.judgement)
    ]


def _excuse_faulted_reference(
    model: onnx.ModelProto, reference: str, assessed: dict[str, Assessed]
) -> None:
    """Where the reference is the ONNX reference evaluator and one of its documented faults
    applies to ``model`` (``reference_limits``: LRN's window over the batch, ...), a backend
    whose values depart from it is measured against wrong values: invalid-reference, as
    when the reference crashes, not a bug of every other backend (a departure from the
    model's declaration is still the backend's)."""
    if not is_reference_evaluator(reference) or not any(
        a.judgement.verdict == Verdict.MISMATCH and a.witness is None
        for label, a in assessed.items()
        if label != reference
    ):
        return
    fault = reference_fault(model)
    if fault is None:
        return
    why = f"{reference} is wrong on this model's {fault.op}, not the backend: {fault.reason}"
    for label, a in assessed.items():
        if label != reference and a.judgement.verdict == Verdict.MISMATCH and a.witness is None:
            assessed[label] = Assessed(
                Judgement(Verdict.INVALID_REFERENCE, message=why), None, a.probe_s
            )


# How a failure of the reference evaluator on one of its documented faults begins (the
# campaign summary counts them by op).
DOCUMENTED_FAULT = "a documented fault of the ONNX reference evaluator's "


def known_if_documented(model: onnx.ModelProto, label: str, a: Assessed) -> Assessed:
    """The ONNX reference evaluator under test failing where one of its documented faults
    applies (``reference_limits``) is known, not a new bug: a campaign of ORT against it
    filed 43 of its 47 bundles on such faults. A mismatch is judged by the node it was
    localized to and the sequences and optionals it reads (another node's documented
    fault does not explain it), a crash by the whole model (its message does not name
    the node). The reducer asks it of each candidate too: a reduction that slid from an
    undocumented fault to a documented one (an LSTM's input_forget to its clip, both
    "values in LSTM") filed the documented one."""
    v = a.judgement
    if not is_reference_evaluator(label) or v.verdict not in (Verdict.CRASH, Verdict.MISMATCH):
        return a
    where = a.culprit if v.verdict == Verdict.MISMATCH else ""
    fault = reference_fault(_producer_alone(model, where) if where else model)
    if fault is None:
        return a
    message = f"{DOCUMENTED_FAULT}{fault.op}: {fault.reason}\n{v.message}"
    return replace(a, judgement=replace(v, verdict=Verdict.KNOWN, message=message), signature=None)


# How a wrong value on a node whose ONNX semantics are disputed begins (the campaign
# summary counts them by op, as it does the documented faults).
DISPUTED_SEMANTICS = "semantics the ONNX spec leaves in dispute, "


def known_if_disputed(model: onnx.ModelProto, a: Assessed) -> Assessed:
    """A wrong value localized to a node whose meaning ONNX leaves open to two readings
    that runtimes have both taken (``generate.corpus.disputed``: RoiAlign mode='max') is
    known, not a new bug: the backend may have taken the other reading, and a report of it
    would be closed as such. A wrong shape or type there, a crash, or a wrong value first
    seen elsewhere stays a finding. Values only where the mismatch was localized to a node
    (an unlocalized one names no node to excuse)."""
    v = a.judgement
    if v.verdict != Verdict.MISMATCH or v.kind not in ("values", "precision") or not a.culprit:
        return a
    g = model.graph
    if not any(a.culprit in n.output for n in g.node):
        return a
    found = disputed(_producer_alone(model, a.culprit))
    if not found:
        return a
    message = f"{DISPUTED_SEMANTICS}{found[0].op}: {found[0].reason}\n{v.message}"
    return replace(a, judgement=replace(v, verdict=Verdict.KNOWN, message=message), signature=None)


def _producer_alone(model: onnx.ModelProto, tensor: str) -> onnx.ModelProto:
    """``model`` with only the node making ``tensor`` and, upstream of it, the nodes making
    the sequences and optionals it reads (localization compares tensors alone, so their
    divergence first shows in the tensor made from them), declared types kept; the whole
    model where no node of its graph makes ``tensor``."""
    g = model.graph
    makers = {t: k for k, n in enumerate(g.node) for t in n.output}
    if tensor not in makers:
        return model
    kinds = {vi.name: vi.type.WhichOneof("value") for vi in (*g.input, *g.value_info, *g.output)}
    kept: set[int] = set()
    todo = [makers[tensor]]
    while todo:
        k = todo.pop()
        if k in kept:
            continue
        kept.add(k)
        todo += [
            makers[t]
            for t in g.node[k].input
            if t in makers and kinds.get(t) in ("sequence_type", "optional_type")
        ]
    alone = onnx.ModelProto()
    alone.CopyFrom(model)
    del alone.graph.node[:]
    alone.graph.node.extend(g.node[k] for k in sorted(kept))
    return alone


def blame(
    judge: Judge,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    outcomes: dict[str, Outcome],
) -> dict[str, Blamed]:
    """Judge every backend and attribute the faults. A crash or timeout is its backend's,
    except that backends failing exactly as the reference does (same verdict, stage and
    normalized message) make one finding, the reference's, listing them. A mismatch is the
    backend's that departs from the declaration or from an agreeing majority; when the
    others agree and the reference departs, the reference is blamed (localized against a
    backend of the majority) rather than every other backend; without a majority, where the
    reference is the ONNX reference evaluator and a documented fault of it applies to the
    model, the others' departures are invalid-reference; and where the evaluator is the
    one failing on such a model, its failure is known (``known_if_documented``)."""
    ref_label = judge.reference
    assessed = judge.assess(model, inputs, outcomes)
    attribution = None
    if any(a.judgement.verdict == Verdict.MISMATCH for a in assessed.values()):
        attribution = attribute(model, outcomes, ref_label, judge.config)
    anchor = None
    if attribution is not None and attribution.reference_odd:
        anchor = sorted(attribution.majority)[0]
        assessed[ref_label] = judge.against(anchor).assess(model, inputs, outcomes)[ref_label]
        for label in attribution.majority:
            if assessed[label].judgement.verdict == Verdict.MISMATCH:
                assessed[label] = Assessed(
                    Judgement(Verdict.OK, message=f"agrees with the majority; {ref_label} departs"),
                    None,
                )
    if attribution is None:
        _excuse_faulted_reference(model, ref_label, assessed)
    shared = _shared(assessed, ref_label)
    for label in shared:
        a = assessed[label]
        assessed[label] = Assessed(
            replace(a.judgement, message=f"the same failure as {ref_label}: {a.judgement.message}"),
            None,
            a.probe_s,
        )
    for label, a in assessed.items():
        assessed[label] = known_if_disputed(model, known_if_documented(model, label, a))
    out: dict[str, Blamed] = {}
    for label, a in assessed.items():
        v = a.judgement.verdict
        suspect = None
        if label in shared:
            pass  # not a finding of its own: the reference's stands for it
        elif v in (Verdict.CRASH, Verdict.TIMEOUT) or (v == Verdict.MISMATCH and a.witness):
            suspect = label
        elif v == Verdict.MISMATCH and attribution is not None:
            suspect = label if label not in attribution.majority else None
        against = ref_label
        if a.witness is not None:  # departs from the declaration; the witness meets it
            against = a.witness
        elif label == ref_label and anchor is not None:
            against = anchor
        out[label] = Blamed(
            a,
            suspect,
            against,
            anchor is not None and label == ref_label,
            shared if label == ref_label else [],
        )
    return out
