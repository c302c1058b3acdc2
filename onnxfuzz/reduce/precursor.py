"""The wrong result a crash follows: one root cause behind several crash reports.

A backend that computes one op wrong often crashes further on, in whichever op reads the
wrong tensor: onnx2torch's Clip returns float32 for an int32 input and the Gather after it
raises "Expected types of indices"; TVM's BatchNormalization returns float32 in a float16
graph and the Div, Conv or Add after it fails type checking in ``LegalizeOps``. Each
consumer gives another signature, so one bug was filed as many crash bundles, in as many
families, each blaming an op that did nothing wrong.

On a reduced crash of two nodes or more, each node whose result another node reads is
checked in topological order, with two runs:

1. the model cut after that node (it and what it depends on, its results the outputs):
   the backend runs it and its result is wrong (an element type the model does not
   declare; for a crash at run time, a wrong shape or wrong values too);
2. the rest of the model, with that node's results (and whatever else the cut removed)
   fed as inputs of the values the reference computes: the backend compiles and runs it
   (a wrong result of its own there is another matter: the crash is gone).

Both together say the crash follows that wrong result: fix the node and the crash is
likely gone. The first such node is the precursor; none is claimed otherwise.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx

from onnxfuzz.execute.sandbox import Stage
from onnxfuzz.judge.localize import ancestors, inferred_types, reads
from onnxfuzz.judge.oracle import Verdict
from onnxfuzz.reduce.reproduce import Reproducer

# Nodes checked at most (two to three backend runs each): reduced crashes have a few.
MAX_CHECKED = 4

# Wrong results a crash can follow. A compile-time crash reads no values, and no shape that
# only the run decides (TVM's NonMaxSuppression came back [0, 3] for [4, 3] in a model whose
# compile failed for reasons of its own): element types alone, which every compiler infers
# before it runs anything.
AT_COMPILE = frozenset({"dtype"})
AT_RUN = AT_COMPILE | {"shape", "missing", "values"}

# The rest's verdicts that say it ran: it compiled and ran to the end, right or not.
RAN = frozenset({Verdict.OK, Verdict.MISMATCH, Verdict.UNSTABLE})


@dataclass(frozen=True)
class Precursor:
    """A node whose wrong result the crash follows."""

    node: str  # the node's name
    op: str
    kind: str  # the wrong result's kind: dtype, shape, missing or values
    signature: str  # the cut model's mismatch signature on the backend
    message: str  # what the cut model's comparison said

    def as_meta(self) -> dict[str, Any]:
        return asdict(self)


def find_precursor(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], rep: Reproducer, stage: str | None
) -> Precursor | None:
    """The first node of ``model`` (a crash of ``rep``'s backend at ``stage``) whose wrong
    result the crash follows, by the two runs above; None when no node is shown to be."""
    g = model.graph
    kinds = AT_COMPILE if stage == Stage.COMPILE else AT_RUN
    read = set().union(*(reads(n) for n in g.node))
    types = _types(model)
    checked = 0
    values: dict[str, np.ndarray] | None = None
    for k, node in enumerate(g.node):
        if not any(t in read for t in node.output if t):
            continue  # nothing reads its result: nothing can follow it
        if checked == MAX_CHECKED:
            break
        checked += 1
        cut = _cut_after(model, k, types)
        if cut is None:
            continue
        head, kept = cut
        if any(i.name not in inputs for i in head.graph.input):
            continue  # an input without a value (an initializer listed as an input)
        a = rep.assess(head, {i.name: inputs[i.name] for i in head.graph.input})
        if a.judgement.verdict != Verdict.MISMATCH or a.judgement.kind not in kinds:
            continue
        if values is None:
            values = rep.reference_values(model, inputs) or {}
        rest = _rest(model, kept, types)
        if rest is None:
            continue
        fed = {i.name: values.get(i.name) for i in rest.graph.input}
        if any(v is None for v in fed.values()):
            continue
        # A wrong result of its own there is another matter (an Abs after the wrong Abs is
        # wrong too): what counts is that the crash is gone.
        if rep.assess(rest, fed).judgement.verdict not in RAN:  # type: ignore[arg-type]
            continue  # it fails without the wrong result too: not what it follows
        message = a.judgement.message.strip().splitlines()
        return Precursor(
            node.name,
            node.op_type,
            a.judgement.kind,
            a.signature or "",
            (message[0] if message else "")[:300],
        )
    return None


def _types(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """Every tensor's type: declared, else inferred."""
    g = model.graph
    declared = (*g.value_info, *g.output, *g.input)
    return {vi.name: vi for vi in (*inferred_types(model), *declared)}


def _cut_after(
    model: onnx.ModelProto, k: int, types: dict[str, onnx.ValueInfoProto]
) -> tuple[onnx.ModelProto, set[int]] | None:
    """The model of node ``k`` and the nodes it depends on, with ``k``'s tensor results as
    its outputs, and those nodes' indices; None where a result has no known type."""
    g = model.graph
    outs = [t for t in g.node[k].output if t]
    if any(t not in types or not types[t].type.HasField("tensor_type") for t in outs):
        return None
    kept = ancestors(g, outs[0]) or {k}
    m = _subset(model, sorted(kept))
    del m.graph.output[:]
    m.graph.output.extend(types[t] for t in outs)
    _keep(m.graph.value_info, [vi for vi in m.graph.value_info if vi.name not in outs])
    return m, kept


def _rest(
    model: onnx.ModelProto, removed: set[int], types: dict[str, onnx.ValueInfoProto]
) -> onnx.ModelProto | None:
    """The model without the nodes ``removed``: what its other nodes read of theirs become
    graph inputs (the reference's values are fed there); None where one has no known type
    or no node is left."""
    g = model.graph
    left = [k for k in range(len(g.node)) if k not in removed]
    if not left:
        return None
    made = {t for k in removed for t in g.node[k].output if t}
    wanted = set().union(*(reads(g.node[k]) for k in left)) & made
    if any(t not in types or not types[t].type.HasField("tensor_type") for t in wanted):
        return None
    m = _subset(model, left)
    m.graph.input.extend(types[t] for t in sorted(wanted))
    outputs = [o for o in m.graph.output if o.name not in made]
    if not outputs:
        return None
    del m.graph.output[:]
    m.graph.output.extend(outputs)
    return m


def _subset(model: onnx.ModelProto, indices: list[int]) -> onnx.ModelProto:
    """A copy of ``model`` with only the nodes at ``indices`` (in order), and only the
    graph inputs and initializers they read."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    nodes = [g.node[k] for k in indices]
    read = set().union(*(reads(n) for n in nodes))
    made = {t for n in nodes for t in n.output if t}
    inputs = [i for i in g.input if i.name in read]
    inits = [i for i in g.initializer if i.name in read]
    infos = [vi for vi in g.value_info if vi.name in made]
    outputs = [o for o in g.output if o.name in made]
    for field, items in (
        (g.node, nodes),
        (g.input, inputs),
        (g.initializer, inits),
        (g.value_info, infos),
        (g.output, outputs),
    ):
        _keep(field, items)
    return m


def _keep(field: Any, items: list[Any]) -> None:
    """``field`` (a repeated message field) holding copies of ``items`` alone (copies: an
    element of a field is not to be used once the field is cleared)."""
    kept = [type(x)() for x in items]
    for new, old in zip(kept, items, strict=True):
        new.CopyFrom(old)
    del field[:]
    field.extend(kept)
