"""Draws whose meaning ONNX itself leaves in dispute (``DISPUTED``): valid models whose
right outputs runtimes read the spec differently about, so a corpus stores none for them.

A corpus's expected outputs are a claim of what every right backend computes. Where the
spec is open to two readings and runtimes have taken both, ONNX Runtime's outputs are one
reading's, and a backend that took the other fails a case it does not get wrong (an audit
found TVM's RoiAlign mode='max' failing on exactly that). Such a case keeps its model and
inputs (a backend must still compile and run it) with ``reference_error`` in index.json
saying why, the mechanism the corpus already uses for the reference's known faults:
generating no such draws at all would change every later choice of the generator, and so
the bytes of every corpus made with the same seed, for one attribute value.

This is not ``reference_limits``: those are the ONNX reference evaluator's own faults (a
campaign takes its vote away there); here ONNX Runtime and the evaluator agree, and it is
the spec that does not settle who is right.
"""

from __future__ import annotations

import onnx

from onnxfuzz.generate.corpus.node_views import node_views
from onnxfuzz.generate.corpus.reference_limits import Limitation

DISPUTED: tuple[Limitation, ...] = (
    Limitation(
        "RoiAlign",
        lambda n: n.attr("mode", "avg") == "max",
        "mode='max' has two readings (onnx/onnx#4764, onnxruntime#6146): ONNX Runtime and "
        "the ONNX reference evaluator take the max of the bilinear weights times the four "
        "corner samples, TVM (and onnxruntime PR #27554's option) interpolates each sample "
        "point and then takes the max; outputs from either would call the other wrong",
    ),
)


def disputed(model: onnx.ModelProto) -> list[Limitation]:
    """The ``DISPUTED`` entries that apply to a node of ``model`` (a subgraph's included)."""
    return [
        d for n in node_views(model, bodies=True) for d in DISPUTED if d.op == n.op and d.applies(n)
    ]


def disputed_reason(model: onnx.ModelProto) -> str | None:
    """What a corpus's index says of a case whose semantics are disputed, or None."""
    found = disputed(model)
    if not found:
        return None
    return f"{found[0].op}: {found[0].reason}: no expected outputs"
