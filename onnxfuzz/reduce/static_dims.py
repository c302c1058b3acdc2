"""A model from elsewhere with symbolic dims (``batch``, ``seq_len``), made static at the
sizes its inputs have: every tensor then has one shape, which is what the reducer matches
(a node bypassed for a tensor of the same shape), exposes and replaces. ``onnxfuzz reduce``
reduces the static model when it fails as the model does, else the model as it is (a bug
of the dynamic-shape path stays where it shows)."""

from __future__ import annotations

import numpy as np
import onnx


def symbolic_inputs(model: onnx.ModelProto) -> list[str]:
    """The graph inputs (initializers aside) with a dim of no fixed size."""
    g = model.graph
    inits = {i.name for i in g.initializer}
    return [
        vi.name
        for vi in g.input
        if vi.name not in inits
        and vi.type.HasField("tensor_type")
        and not all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)
    ]


def with_static_inputs(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray]
) -> onnx.ModelProto | None:
    """``model`` with each graph input's dims those of its value in ``feeds``, and the
    shapes of its intermediates and outputs inferred again from them; None where shape
    inference refuses the result (the model stays as it is)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    for vi in g.input:
        if vi.name not in feeds or not vi.type.HasField("tensor_type"):
            continue
        shape = vi.type.tensor_type.shape
        del shape.dim[:]
        for n in np.shape(feeds[vi.name]):
            shape.dim.add().dim_value = int(n)
    # what the model declared of its intermediates was in terms of the symbols: inferred anew
    del g.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True).graph
    except Exception:  # noqa: BLE001 - inference raises several types; the model stays as is
        return None
    g.value_info.extend(
        vi for vi in inferred.value_info if vi.type.HasField("tensor_type") and _static(vi)
    )
    outs = {vi.name: vi for vi in inferred.output}
    for vi in g.output:
        got = outs.get(vi.name)
        if got is not None and vi.type.HasField("tensor_type") and _static(got):
            vi.type.tensor_type.shape.CopyFrom(got.type.tensor_type.shape)
    try:
        onnx.checker.check_model(m)
    except Exception:  # noqa: BLE001
        return None
    return m


def _static(vi: onnx.ValueInfoProto) -> bool:
    tt = vi.type.tensor_type
    return tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim)
