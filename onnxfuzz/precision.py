"""Tell excess precision from a bug in float16 models.

CPU backends often compute float16 ops in float32 and keep the intermediate in float32
between ops (ONNX Runtime inserts Casts around kernels it lacks in float16 and removes the
Cast pairs between them: ORT #22866), while others round every op's output to float16. Both
are legitimate evaluations of the model, and they differ by more than any tolerance after
an amplifying op (``Sin`` of a value near 50, a comparison near a tie). Even exposing every
intermediate does not show it: the rounded copy goes to the graph output, the float32 one
to the next op.

The check runs the model *upcast* (every float16 tensor float32) on the reference backend:
the float32 evaluation, rounded to float16 at the outputs. A mismatch is excess precision,
not a bug, when

- the backend's outputs match the float32 evaluation (it computes in float32), or
- the reference's outputs match it while the backend is consistent with the reference's
  own materialized values: its outputs do not change when every intermediate is exposed,
  and with every intermediate exposed the two backends agree everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from onnxfuzz.oracle import OK_V, OracleConfig, compare
from onnxfuzz.sandbox import OK, Outcome

_HALF = TensorProto.FLOAT16
_TYPE_ATTRS = ("to", "dtype")  # attributes that name an element type (Cast, EyeLike, ...)


def has_half(model: onnx.ModelProto) -> bool:
    g = model.graph
    infos = list(g.input) + list(g.value_info) + list(g.output)
    return any(vi.type.tensor_type.elem_type == _HALF for vi in infos) or any(
        i.data_type == _HALF for i in g.initializer
    )


def _upcast_tensor(t: TensorProto) -> TensorProto:
    out = numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)
    return out


def upcast(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float16 tensor, attribute and type argument made float32."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        tt = vi.type.tensor_type
        if tt.elem_type == _HALF:
            tt.elem_type = TensorProto.FLOAT
    for i, init in enumerate(g.initializer):
        if init.data_type == _HALF:
            g.initializer[i].CopyFrom(_upcast_tensor(init))
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.INT and a.name in _TYPE_ATTRS and a.i == _HALF:
                a.i = TensorProto.FLOAT
            elif a.type == onnx.AttributeProto.TENSOR and a.t.data_type == _HALF:
                a.t.CopyFrom(_upcast_tensor(a.t))
    return m


def float32_evaluation(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome],
) -> dict[str, np.ndarray] | None:
    """The reference backend's outputs of the upcast model, rounded back to float16 where
    the model's outputs are float16. None when the backend cannot run it."""
    feeds = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in inputs.items()}
    o = run_reference(upcast(model).SerializeToString(), feeds)
    if o.status != OK or o.outputs is None:
        return None
    half = {vi.name for vi in model.graph.output if vi.type.tensor_type.elem_type == _HALF}
    return {
        k: v.astype(np.float16) if k in half and v.dtype == np.float32 else v
        for k, v in o.outputs.items()
    }


def excess_precision(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    reference: str,
    want: dict[str, np.ndarray],
    backend: str,
    got: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
    got_exposed: dict[str, np.ndarray] | None = None,
) -> str | None:
    """Why this float16 mismatch is excess precision (see the module doc), or None."""
    if not has_half(model):
        return None
    loose = float32_evaluation(model, inputs, run_reference)
    if loose is None:
        return None
    order = [o.name for o in model.graph.output]

    def same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
        return compare(reference, a, backend, b, order, cfg, tol_dtypes).verdict == OK_V

    if same(loose, got):
        return (
            f"{backend} matches the model computed in float32 on {reference}: it keeps "
            "float16 intermediates in higher precision (excess precision, not a bug)"
        )
    if got_exposed is not None and same(loose, want) and same(got_exposed, got):
        return (
            f"{reference} matches the model computed in float32 (it keeps float16 "
            f"intermediates in higher precision) while {backend} agrees with {reference} on "
            "every materialized intermediate: excess precision, not a bug"
        )
    return None
