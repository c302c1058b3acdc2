"""What a model declares its outputs to be: the tie-breaker for dtype and shape mismatches.

Majority voting blames the wrong backend when two libraries share a mistake: the ONNX
reference evaluator and onnx2torch both promote int32 ReduceSumSquare to int64, and both
follow Python's slicing for ``Slice(start=INT64_MIN, step<0)``, where ONNX Runtime follows
the operator doc. The model's declared output types and static shapes (computed by the
specs and checked against strict ONNX shape inference) say which one is right. They only
ever *excuse* a backend that conforms, or blame one that does not while another does: a
declaration no backend meets is more likely onnxfuzz's mistake than every library's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from onnxfuzz import dtypes as dt


@dataclass(frozen=True)
class Declared:
    dtype: str | None  # numpy dtype name; None when unknown
    shape: tuple[int | None, ...] | None  # None: rank unknown; a None dim: symbolic


def declared_outputs(model: onnx.ModelProto) -> dict[str, Declared]:
    out: dict[str, Declared] = {}
    for vi in model.graph.output:
        tt = vi.type.tensor_type
        shape = None
        if tt.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
        out[vi.name] = Declared(dt.NAMES.get(tt.elem_type), shape)  # numpy's names too
    return out


def violations(outputs: dict[str, np.ndarray], declared: dict[str, Declared]) -> dict[str, str]:
    """output -> how it departs from the declaration (kind first: ``dtype ...``/``shape ...``)."""
    bad: dict[str, str] = {}
    for name, d in declared.items():
        a = outputs.get(name)
        if a is None:
            continue
        if d.dtype is not None and a.dtype.name != d.dtype:
            bad[name] = f"dtype {a.dtype.name}, the model declares {d.dtype}"
        elif d.shape is not None and (
            a.ndim != len(d.shape)
            or any(w is not None and w != g for w, g in zip(d.shape, a.shape, strict=True))
        ):
            bad[name] = f"shape {list(a.shape)}, the model declares {list(d.shape)}"
    return bad


def departures(
    outcomes: dict[str, dict[str, np.ndarray]], declared: dict[str, Declared]
) -> dict[str, dict[str, str]]:
    """Per backend, the outputs where it departs from the declaration *and* another
    backend meets it (only those count: see the module doc)."""
    bad = {label: violations(outs, declared) for label, outs in outcomes.items()}
    out: dict[str, dict[str, str]] = {}
    for label, mine in bad.items():
        kept = {
            name: msg
            for name, msg in mine.items()
            if any(
                name in outs and name not in bad[other]
                for other, outs in outcomes.items()
                if other != label
            )
        }
        if kept:
            out[label] = kept
    return out
