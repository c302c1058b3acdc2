"""A float32 case's tolerance, measured against the exact answer where cancellation needs it.

ONNX's runner compares at rtol 1e-3, atol 1e-7 unless a case's ``data.json`` says
otherwise. Where a float32 output is the difference of much larger terms (x - mean(x)
fed into a MatMul, an STFT bin, a normalization of nearly opposite values), its exact
value is about 0 and each runtime's float32 result is rounding error: an audit found ONNX
Runtime storing -1.0e-7 where the exact answer is -1.8e-16 and TVM returned 0.0, a right
answer failing at atol 1e-7 (eight such cases in 1,800). Raising atol for every case
would blunt every case for the sake of a few; this measures the few.

The rule (``cancellation_tolerance``), for a model that computes in float32 (float16 cases
keep their own tolerance), where the ONNX reference evaluator runs it with no documented
fault (``reference_limits``):

1. the exact answer: the model run by the reference evaluator with every float32 tensor,
   weight and cast made float64 (``as_float64``), its rounding 2**29 times finer;
2. a second float32 implementation: the reference evaluator on the model as it is;
3. the spread: the largest difference from the exact answer, over the elements of the
   float32 outputs, of the expected outputs and of the evaluator's float32 ones: the
   rounding error two float32 implementations were measured to make in this case;
4. nothing is written unless the exact answer or the evaluator's float32 outputs fail the
   runner's defaults against the expected outputs at some element (|got - expected| >
   1e-7 + 1e-3 |expected|): a right answer that the corpus would call wrong. Most cases
   keep the defaults;
5. the spread must be rounding: for every float32 output it is at most ``ROUNDING_ULPS``
   float32 ulps of 1 (2**-23) times the largest magnitude among the float tensors that
   feed that output (its graph inputs, weights and intermediates, exact values). A
   difference beyond that is not float32 rounding of those magnitudes (a fault of the
   evaluator the list does not know, an op whose output jumps, such as Floor or a
   comparison, on a value that cancelled): the case keeps the defaults;
6. the case's ``data.json`` gets atol = ``SAFETY`` x the spread (rounded up to two
   significant digits) and the runner's rtol 1e-3. Another right float32 implementation
   rounds differently: its error is of the size of those measured, of either sign, so it
   may differ from the expected value by twice the spread; twice that again leaves room
   for a different summation order or a fused multiply-add.

A wrong value still fails: the atol is a small multiple of the rounding error measured
in this very case, below 2**-9 (``ROUNDING_ULPS`` x 2**-23 x ``SAFETY``) of the magnitudes
that fed the output, where an off-by-one, a wrong sign or a dropped term is of their size.
Above opset 26 the expected outputs are the evaluator's float32 ones, so the exact answer
is the only other measurement: a cancellation it computes as the evaluator does (an exact
0 where ONNX Runtime, relabelled, leaves 1.6e-6) is not seen.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.corpus.node_views import reads, subgraphs
from onnxfuzz.generate.corpus.reference_limits import reference_limits
from onnxfuzz.generate.corpus.validate import model_opset
from onnxfuzz.generate.lang.config import ORT_MAX_OPSET

DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-7  # onnx.backend.test.loader's defaults
FLOAT32_EPS = 2.0**-23
# float32 rounding of magnitude M, through a model's few dozen ops and reductions of a
# few hundred terms, stays well within 2**12 ulps of M (measured on the audit's cases and
# the others the rule picks in their corpora: at most 3.4)
ROUNDING_ULPS = 2**12
SAFETY = 4.0

_F32, _F64 = TensorProto.FLOAT, TensorProto.DOUBLE


def _retype(tp: onnx.TypeProto) -> None:
    which = tp.WhichOneof("value")
    if which == "tensor_type" and tp.tensor_type.elem_type == _F32:
        tp.tensor_type.elem_type = _F64
    elif which == "sequence_type":
        _retype(tp.sequence_type.elem_type)
    elif which == "optional_type":
        _retype(tp.optional_type.elem_type)


def _as_double(t: onnx.TensorProto) -> onnx.TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name)


def _widen(g: onnx.GraphProto) -> None:
    for vi in (*g.input, *g.output, *g.value_info):
        _retype(vi.type)
    for i, t in enumerate(g.initializer):
        if t.data_type == _F32:
            g.initializer[i].CopyFrom(_as_double(t))
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == _F32:
                a.t.CopyFrom(_as_double(a.t))
            elif a.type == onnx.AttributeProto.INT and a.name in dt.TYPE_ATTRIBUTES and a.i == _F32:
                a.i = _F64
            elif a.type == onnx.AttributeProto.TYPE_PROTO:
                _retype(a.tp)
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            # value_float(s) always make float32: the same numbers as a float64 tensor
            for a in list(node.attribute):
                if a.name in ("value_float", "value_floats"):
                    values = [a.f] if a.name == "value_float" else list(a.floats)
                    shape = () if a.name == "value_float" else (len(values),)
                    node.attribute.remove(a)
                    arr = np.array(values, np.float32).astype(np.float64).reshape(shape)
                    node.attribute.append(
                        onnx.helper.make_attribute("value", numpy_helper.from_array(arr))
                    )
    for sub in subgraphs(g):
        _widen(sub)


def as_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float32 tensor (inputs, outputs, intermediates, weights,
    constants, cast targets; subgraphs too) made float64: the same computation, rounded
    2**29 times finer. Not valid ONNX everywhere (some ops' schemas take float32 only):
    for the reference evaluator, which computes in whatever numpy type it is given."""
    # Function ops (MeanVarianceNormalization, ...) are expanded first: their bodies' own
    # constants are float32 (value_float), which the evaluator would add to float64 values.
    # The inliner asks every input its type: the weights' are declared for it.
    typed = onnx.ModelProto()
    typed.CopyFrom(model)
    declared = {v.name for v in (*typed.graph.input, *typed.graph.value_info)}
    typed.graph.value_info.extend(
        onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in typed.graph.initializer
        if t.name not in declared
    )
    try:
        wide = onnx.inliner.inline_selected_functions(typed, [], True, inline_schema_functions=True)
    except RuntimeError:  # a body it cannot type (nested functions): left to the evaluator
        wide = typed
    _widen(wide.graph)
    return wide


def _evaluate(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """Every top-level tensor of ``model`` (its intermediates included) as the reference
    evaluator computes it, or None where it cannot run the model."""
    from onnx.reference import ReferenceEvaluator

    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = ReferenceEvaluator(model).run(
                None, inputs, intermediate=True, check_shape_annotations=False
            )
    except Exception:  # noqa: BLE001 - no evidence from it
        return None
    return dict(got) if isinstance(got, dict) else None


def _feeders(g: onnx.GraphProto, output: str) -> set[str]:
    """The names ``output`` is computed from in ``g`` (itself included)."""
    need, seen = [output], {output}
    producer = {o: n for n in g.node for o in n.output}
    while need:
        node = producer.get(need.pop())
        if node is None:
            continue
        for name in reads(node):  # a subgraph's outer-scope reads feed it too
            if name and name not in seen:
                seen.add(name)
                need.append(name)
    return seen


def _magnitude(values: list[Any]) -> float:
    """The largest finite |v| of the floating arrays among ``values`` (0 if none)."""
    top = 0.0
    for v in values:
        if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size:
            a = np.abs(v[np.isfinite(v)])
            if a.size:
                top = max(top, float(a.max()))
    return top


def _round_up(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant digits (a readable data.json)."""
    scale = 10.0 ** (math.floor(math.log10(x)) - digits + 1)
    return float(f"{math.ceil(x / scale - 1e-9) * scale:.{digits}g}")


def _error(a: Any, exact: Any) -> float | None:
    """The largest |a - exact| over the elements both hold finite, 0 where neither holds
    a floating value; None where they disagree on shape or on a NaN or an infinity (that
    is no rounding)."""
    if not (isinstance(a, np.ndarray) and isinstance(exact, np.ndarray)):
        return 0.0
    if a.dtype.kind != "f" or exact.dtype.kind != "f" or not a.size:
        return 0.0
    if a.shape != exact.shape:
        return None
    x, y = a.astype(np.float64), exact.astype(np.float64)
    finite = np.isfinite(x) & np.isfinite(y)
    if not np.array_equal(x[~finite], y[~finite], equal_nan=True):
        return None
    return float(np.abs(x - y)[finite].max()) if finite.any() else 0.0


def _fails_default(want: np.ndarray, got: Any) -> bool:
    """Whether ``got`` (float32-rounded, as a backend returns it) fails the runner's
    defaults against ``want`` at some element both hold finite."""
    if not isinstance(got, np.ndarray) or got.shape != want.shape or got.dtype.kind != "f":
        return False
    g = got.astype(np.float32).astype(np.float64)
    finite = np.isfinite(g) & np.isfinite(want)
    allowed = DEFAULT_ATOL + DEFAULT_RTOL * np.abs(want[finite])
    return bool((np.abs(g[finite] - want[finite]) > allowed).any())


def cancellation_tolerance(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    expected: dict[str, np.ndarray],
) -> dict[str, float] | None:
    """The ``data.json`` tolerance of a float32 case where float32 rounding measured on the
    way to an output exceeds what the runner's defaults allow at some element of it (the
    rule in this module's docstring), or None: the defaults stand."""
    float32_outputs = [
        o.name
        for o in model.graph.output
        if o.type.tensor_type.elem_type == _F32
        and isinstance(expected.get(o.name), np.ndarray)
        and expected[o.name].dtype == np.float32
    ]
    if not float32_outputs or reference_limits(model):
        return None
    wide = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in inputs.items()}
    exact = _evaluate(as_float64(model), wide)
    if exact is None:
        return None
    # a second float32 implementation, where it runs and did not make the expected outputs
    # (above ORT_MAX_OPSET it did: its run again would be the same numbers)
    single = {} if model_opset(model) > ORT_MAX_OPSET else _evaluate(model, inputs) or {}
    initializers = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    spread, needed = 0.0, False
    for name in float32_outputs:
        want = expected[name].astype(np.float64)
        samples = [exact.get(name), single.get(name)]  # the exact answer, the evaluator's
        errors = [_error(want, exact.get(name)), _error(single.get(name), exact.get(name))]
        if errors[0] is None:
            return None  # a shape, NaN or infinity differs from the exact: not rounding
        error = max(e for e in errors if e is not None)  # (the evaluator's may not run)
        feeders = _feeders(model.graph, name)
        scale = _magnitude(
            [exact.get(f, initializers.get(f)) for f in feeders]
            + [v for f, v in wide.items() if f in feeders]
        )
        if error > ROUNDING_ULPS * FLOAT32_EPS * scale:
            return None  # more than float32 rounding of those magnitudes can explain
        spread = max(spread, error)
        needed |= any(_fails_default(want, s) for s in samples)
    if not needed:
        return None
    return {"atol": _round_up(SAFETY * spread), "rtol": DEFAULT_RTOL}
