"""Audit generated models against the ONNX operator definitions, beyond the checker.

A spec that draws something ONNX does not allow makes every backend that rightly rejects
it look broken: the worst report this tool can print (a spec once gave CumSum's ``axis``
as a 1-element tensor; the reference evaluator rejected it and the campaign filed that as
its crash). ``onnx.checker`` and shape inference do not check everything an operator's
documentation states, so this module checks a model four ways:

1. ``static``: the full checker, strict shape inference with type checks and data
   propagation on the model as generated, and the repository's own gate
   (``validate.check_static``: inferred shapes and types equal the declared ones);
2. ``input_rules``: the rank and size the operator documentation requires of inputs the
   checker does not look at (scalars given as 0-D tensors, 1-D shape and axes vectors,
   per-channel vectors), from ``INPUT_RULES``, each quoting the doc;
3. ``run_reference``: the ONNX reference evaluator runs the model to outputs of exactly
   the declared shapes and types, finite and inside the spec's value intervals wherever
   the spec declared bounded ones (``check_outputs``);
4. ``run_ort``: ONNX Runtime does the same: the second opinion on a rejection.

Where the reference evaluator is itself wrong on a valid draw (``REFERENCE_LIMITS``: each
entry says what it does wrong and where in its source), that draw's reference run is kept
apart (``Audit.known``) instead of counted against the spec.

``audit`` runs them all on one model. Used by ``tests/quality/test_spec_audit.py``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, shape_inference

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.corpus.audit_rules import INPUT_RULES
from onnxfuzz.generate.corpus.node_views import NodeView, Rule, Shape, node_views
from onnxfuzz.generate.corpus.reference_limits import REFERENCE_LIMITS, Limitation, reference_limits
from onnxfuzz.generate.corpus.validate import check_static, model_opset, ort_session
from onnxfuzz.generate.lang.config import ORT_MAX_OPSET
from onnxfuzz.generate.lang.graph import Graph, Tensor
from onnxfuzz.generate.lang.intervals import Interval

__all__ = [
    "INPUT_RULES",
    "REFERENCE_LIMITS",
    "Audit",
    "Limitation",
    "NodeView",
    "Rule",
    "Shape",
    "audit",
    "check_outputs",
    "input_rules",
    "node_views",
    "output_intervals",
    "reference_limits",
    "run_ort",
    "run_reference",
    "static",
]


def input_rules(model: onnx.ModelProto) -> list[str]:
    """Every input's rank and size against ``INPUT_RULES``."""
    problems = []
    for n in node_views(model):
        for name, rule in INPUT_RULES.get(n.op, {}).items():
            if name in n.inputs and (why := rule(n, n.inputs[name])):
                problems.append(f"schema: {n.op}-{n.version} input {name!r} {why}")
    return problems


def static(model: onnx.ModelProto) -> list[str]:
    """The checker, strict shape inference with type checks on the model as generated
    (declared outputs must agree), and ``validate.check_static``."""
    problems = check_static(model)
    if problems:
        return problems
    try:
        shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001 - inference raises several types
        problems.append(f"shape inference (declared types): {e}")
    return problems


def check_outputs(
    who: str,
    model: onnx.ModelProto,
    outs: Mapping[str, np.ndarray],
    intervals: Mapping[str, Interval | None],
) -> list[str]:
    """Outputs of exactly the declared types and shapes; where the spec declared a bounded
    interval, finite (NaN or inf is a spec defect: the value domains are there to keep
    values finite) and inside it (give or take rounding)."""
    problems = []
    for name, (et, shape) in _declared_outputs(model).items():
        if name not in outs:
            problems.append(f"{who}: no output {name}")
            continue
        arr = np.asarray(outs[name])
        got = helper.np_dtype_to_tensor_dtype(arr.dtype)
        if (got, tuple(arr.shape)) != (et, shape):
            problems.append(
                f"{who}: {name} is {dt.NAMES.get(got, got)}{list(arr.shape)}, "
                f"declared {dt.NAMES.get(et, et)}{list(shape)}"
            )
            continue
        iv = intervals.get(name)
        if iv is None or not (math.isfinite(iv.lo) and math.isfinite(iv.hi)) or not arr.size:
            continue
        v = arr.astype(np.float64)
        bad = ~np.isfinite(v)
        if bad.any():
            problems.append(
                f"{who}: {name} has {int(bad.sum())} non-finite values of {arr.size} "
                f"(the spec declared {iv})"
            )
            continue
        lo, hi = float(v.min()), float(v.max())
        slack = SLACK * max(1.0, abs(iv.lo), abs(iv.hi))
        if lo < iv.lo - slack or hi > iv.hi + slack:
            problems.append(
                f"{who}: {name} has values in [{lo:.6g}, {hi:.6g}], outside the declared {iv}"
            )
    return problems


SLACK = 1e-3  # relative room for rounding outside a declared interval (tools/check_intervals)


def _declared_outputs(model: onnx.ModelProto) -> dict[str, tuple[int, Shape]]:
    return {
        o.name: (
            o.type.tensor_type.elem_type,
            tuple(d.dim_value for d in o.type.tensor_type.shape.dim),
        )
        for o in model.graph.output
    }


def run_reference(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    names = [o.name for o in model.graph.output]
    # Its numpy kernels warn where they divide by zero: the outputs are judged instead.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outs = ReferenceEvaluator(model).run(None, dict(inputs))
    return dict(zip(names, outs, strict=True))


def run_ort(model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    sess = ort_session(model)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(inputs)), strict=True))


def output_intervals(graph: Graph) -> dict[str, Interval | None]:
    """Every node output's declared value interval (None: bool, no interval); tensors
    only (graph outputs are tensors: sequences and optionals are consumed inside)."""
    return {t.name: t.interval for n in graph.nodes for t in n.outputs if isinstance(t, Tensor)}


@dataclass
class Audit:
    """What the gates found about one model. ``reference`` and ``ort`` hold each
    runtime's problems (a rejection or a wrong output), kept apart so a caller can tell
    "both reject" (a spec defect for certain) from one runtime's own limitation.
    ``known`` holds what the reference evaluator got wrong on a draw a ``REFERENCE_LIMITS``
    entry covers (reason -> problems; an empty list: it ran right this time)."""

    static: list[str] = field(default_factory=list)
    schema: list[str] = field(default_factory=list)
    reference: list[str] = field(default_factory=list)
    ort: list[str] = field(default_factory=list)
    known: dict[str, list[str]] = field(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        return self.static + self.schema + self.reference + self.ort


def _run_checked(
    who: str,
    run: Callable[[onnx.ModelProto, Mapping[str, np.ndarray]], dict[str, np.ndarray]],
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    intervals: Mapping[str, Interval | None],
) -> list[str]:
    try:
        outs = run(model, inputs)
    except Exception as e:  # noqa: BLE001 - each runtime raises its own types
        return [f"{who} rejects: {type(e).__name__}: {str(e)[:400]}"]
    return check_outputs(who, model, outs, intervals)


def audit(
    model: onnx.ModelProto,
    inputs: Mapping[str, np.ndarray],
    intervals: Mapping[str, Interval | None],
    *,
    reference: bool = True,
    ort: bool = True,
) -> Audit:
    """All gates on one model (``intervals``: ``output_intervals`` of its graph)."""
    a = Audit(static=static(model), schema=input_rules(model))
    if a.static:  # an invalid model: running it tells nothing more
        return a
    if ort and model_opset(model) <= ORT_MAX_OPSET:  # above it ONNX Runtime cannot load it
        a.ort = _run_checked("onnxruntime", run_ort, model, inputs, intervals)
    if reference:
        got = _run_checked("onnx-reference", run_reference, model, inputs, intervals)
        limits = reference_limits(model)
        if limits:
            a.known = {lim.reason: got for lim in limits}
        else:
            a.reference = got
    return a
