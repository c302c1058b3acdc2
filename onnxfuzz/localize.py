"""Localize a value mismatch to the first node whose output diverges.

The model is run again on both backends with every node output exposed as a graph output
(as ``polygraphy --onnx-outputs mark all`` does); walking the nodes in topological order,
the first whose output is outside tolerance is blamed. Exposing outputs can disable the
fusion that caused the bug: then the mismatch is not localized and the caller falls back
to the producer of the first mismatching graph output.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from onnxfuzz.oracle import OK_V, OracleConfig, compare
from onnxfuzz.sandbox import OK, Outcome


def expose_all(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    info = {vi.name: vi for vi in m.graph.value_info}
    for n in m.graph.node:
        for t in n.output:
            if t and t not in have and t in info:
                m.graph.output.append(info[t])
                have.add(t)
    return m


def first_divergence(model: onnx.ModelProto, reference: str, backend: str,
                     run: Callable[[bytes], dict[str, Outcome]],
                     cfg: OracleConfig) -> onnx.NodeProto | None:
    """The first node (topological order) whose output differs between the backends."""
    probe = expose_all(model)
    outcomes = run(probe.SerializeToString())
    ref, got = outcomes.get(reference), outcomes.get(backend)
    if ref is None or got is None or ref.status != OK or got.status != OK:
        return None
    want: dict[str, np.ndarray] = ref.outputs or {}
    have: dict[str, np.ndarray] = got.outputs or {}
    for node in probe.graph.node:
        names = [t for t in node.output if t in want]
        if names and compare(reference, want, backend, have, names, cfg).verdict != OK_V:
            return node
    return None
