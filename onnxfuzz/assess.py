"""From the backends' outcomes on one model to a verdict and a signature per backend.

Shared by campaigns and ``onnxfuzz replay`` so that both reach the same signature: the
oracle's verdict, then, for a value mismatch, localization to the first diverging node
and the instability check (see ``onnxfuzz.localize``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.declared import declared_outputs, departures
from onnxfuzz.localize import first_divergence, single_node
from onnxfuzz.oracle import (
    MISMATCH_V,
    OK_V,
    UNSTABLE_V,
    OracleConfig,
    Verdict,
    judge,
    own_verdict,
    precision_dtypes,
    tolerance,
    with_known,
)
from onnxfuzz.precision import excess_precision, within_rounding
from onnxfuzz.sandbox import OK, Outcome
from onnxfuzz.signature import signature

RunAll = Callable[[bytes], dict[str, Outcome]]  # a model on every backend
RunOne = Callable[[str, bytes, dict[str, np.ndarray]], Outcome]  # a model on one backend


@dataclass
class Assessed:
    verdict: Verdict
    signature: str | None  # for bugs
    probe_s: float = 0.0  # backend time spent localizing
    # When the backend departs from the model's declared output types or shapes: a backend
    # that meets the declaration there (the reference to reproduce the finding against).
    witness: str | None = None


def assess(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    outcomes: dict[str, Outcome],
    reference: str,
    cfg: OracleConfig,
    run_all: RunAll | None = None,
    run_one: RunOne | None = None,
) -> dict[str, Assessed]:
    ref = outcomes[reference]
    order = [o.name for o in model.graph.output]
    tol_dtypes: dict[str, str] | None = None  # computed on the first mismatch
    ran = {k: o.outputs for k, o in outcomes.items() if o.status == OK and o.outputs is not None}
    # Outputs departing from the model's declared types and shapes while another backend
    # meets them are that backend's fault, whatever the reference says (onnxfuzz.declared).
    off = departures(ran, declared_outputs(model)) if len(ran) > 1 else {}
    ref_off = off.get(reference, {})
    out: dict[str, Assessed] = {}
    for label, got in outcomes.items():
        spent: list[float] = []
        witness = None
        if label in off and own_verdict(got).verdict == OK_V:
            # Departing from the declaration is the verdict, wherever the reference stands;
            # the culprit is the output's producer (no localization: the same signature
            # whichever backend a reproduction compares against).
            name, what = next(iter(off[label].items()))
            witness = next(k for k in ran if k != label and name not in off.get(k, {}))
            v = with_known(
                label,
                Verdict(
                    MISMATCH_V,
                    "run",
                    what.split()[0],
                    name,
                    f"output {name}: {what}; {witness} meets the declaration",
                ),
                cfg,
            )
        elif label == reference:
            # The reference's own failure is a bug of the reference backend.
            v = with_known(label, own_verdict(ref), cfg)
        else:
            want = _excused(ref, got, ref_off) if ref_off else ref
            # Upstream float16 only ever loosens a tolerance: what passes without it passes.
            v = judge(reference, want, label, got, order, cfg, tol_dtypes)
            if v.verdict == MISMATCH_V and tol_dtypes is None:
                tol_dtypes = precision_dtypes(model)
                v = judge(reference, want, label, got, order, cfg, tol_dtypes)
        culprit = v.output
        if (
            v.verdict == MISMATCH_V
            and run_all is not None
            and (label != reference or witness is not None)
        ):
            # A departure from the declaration is localized against its witness.
            base = witness or reference

            def probe(data: bytes, spent: list[float] = spent) -> dict[str, Outcome]:
                outs = run_all(data)
                spent.append(max(o.backend_s for o in outs.values()))
                return outs

            def again(
                data: bytes, feeds: dict, spent: list[float] = spent, base: str = base
            ) -> Outcome:
                assert run_one is not None
                o = run_one(base, data, feeds)
                spent.append(o.backend_s)
                return o

            div = first_divergence(
                model,
                base,
                label,
                probe,
                cfg,
                inputs,
                again if run_one is not None else None,
                tol_dtypes,
            )
            if div is not None and div.node is not None:
                culprit = div.node.output[0]
                v.message += f"\nfirst diverging node: {div.node.name} ({div.node.op_type})"
                if div.unstable and witness is None:
                    v = Verdict(
                        UNSTABLE_V,
                        v.stage,
                        v.kind,
                        culprit,
                        v.message + f"\n{reference} fed {label}'s values of that node's inputs "
                        "reproduces its output: amplified rounding, not a bug",
                    )
            if (
                v.verdict == MISMATCH_V
                and run_one is not None
                and witness is None
                and div is not None
                and div.node is not None
            ):
                one = single_node(model, div.node)
                seen = {**inputs, **div.want_exposed}
                tols = {
                    t: tolerance(reference, label, t, div.want_exposed[t], cfg, tol_dtypes)
                    for t in div.node.output
                    if t in div.want_exposed
                }
                why = within_rounding(
                    one,
                    {i.name: seen[i.name] for i in one.graph.input if i.name in seen},
                    div.want_exposed,
                    div.got_exposed,
                    again,
                    tols.get,
                )
                if why is not None:
                    v = Verdict(UNSTABLE_V, v.stage, v.kind, culprit, v.message + "\n" + why)
            if v.verdict == MISMATCH_V and run_one is not None and witness is None:
                why = excess_precision(
                    model,
                    inputs,
                    reference,
                    ref.outputs or {},
                    label,
                    got.outputs or {},
                    again,
                    cfg,
                    tol_dtypes,
                    div.got_exposed if div is not None and div.node is None else None,
                )
                if why is not None:
                    v = Verdict(UNSTABLE_V, v.stage, v.kind, culprit, v.message + "\n" + why)
        sig = None
        if v.is_bug:
            producers = {t: n.op_type for n in model.graph.node for t in n.output}
            types = {
                vi.name: vi.type.tensor_type.elem_type
                for vi in list(model.graph.output) + list(model.graph.value_info)
            }
            sig = signature(
                label,
                v,
                producers.get(culprit, ""),
                dt.NAMES.get(types.get(culprit, 0), ""),
                got.trace,
            )
        out[label] = Assessed(v, sig, sum(spent), witness)
    return out


def _excused(ref: Outcome, got: Outcome, ref_off: dict[str, str]) -> Outcome:
    """The reference's outputs to judge ``got`` by, where the reference departs from the
    declaration: cast to ``got``'s type when only the type is off, else left out."""
    mine = dict(ref.outputs or {})
    theirs = got.outputs or {}
    for name in ref_off:
        r, g = mine.get(name), theirs.get(name)
        if r is not None and g is not None and r.shape == g.shape and r.dtype != g.dtype:
            mine[name] = r.astype(g.dtype)
        else:
            mine.pop(name, None)
    return replace(ref, outputs=mine)


@dataclass
class Attribution:
    majority: set[str]  # backends whose outputs agree (more than half of those that ran)
    reference_odd: bool  # the reference is outside the agreeing majority


def attribute(
    model: onnx.ModelProto, outcomes: dict[str, Outcome], reference: str, cfg: OracleConfig
) -> Attribution | None:
    """With three or more backends that ran, which of them agree? None without a majority."""
    from itertools import combinations

    from onnxfuzz.oracle import compare

    ran = [label for label, o in outcomes.items() if o.status == OK and o.outputs is not None]
    # A backend departing from the declared types and shapes where another meets them cannot
    # be in the majority, however many share its mistake (onnxfuzz.declared).
    off = departures({k: outcomes[k].outputs or {} for k in ran}, declared_outputs(model))
    ran = [label for label in ran if label not in off]
    if len(ran) < 3:
        return None
    order = [o.name for o in model.graph.output]
    tol_dtypes = precision_dtypes(model)
    agree: dict[str, set[str]] = {label: set() for label in ran}
    for a, b in combinations(ran, 2):
        v = compare(
            a, outcomes[a].outputs or {}, b, outcomes[b].outputs or {}, order, cfg, tol_dtypes
        )
        if v.verdict == OK_V:
            agree[a].add(b)
            agree[b].add(a)
    best = max(ran, key=lambda label: (len(agree[label]), label == reference))
    group = {best} | agree[best]
    if 2 * len(group) <= len(ran) or any(agree[x] < group - {x} for x in group):
        return None  # no agreeing majority
    return Attribution(group, reference not in group)
