"""User models as seeds: lifted into blocks the solver instantiates and mutates.

The mutation primitive (``onnxfuzz.generate.build.mutate``) edits a model's recorded choices, and
a user's model has none. Recovering choices that rebuild it exactly would mean inverting
every spec (its shapes, attributes and values), which the specs do not support. A user
model is lifted instead into what the generator already instantiates: *blocks*
(``onnxfuzz.generate.build.blocks``), one per window of up to ``window`` consecutive nodes in
the model's (topological) order, each step naming the node's op type and linking each
input to the earlier step in the window that produced it. The solver instantiates such a
block as it does the library's (the same op types, wired the same way where the specs can
honour the link, at shapes, types and attributes it draws), so every instance, and every
mutant of one, is valid by construction. What is kept: the ops and the data flow between
them. What is not: the user's shapes, attribute values, dtypes and weights.

Bad input never stops a campaign; each model's problems are reported by name:
- a model that cannot be read or fails the ONNX checker is skipped;
- a model whose external data lies outside its own folder is skipped, unread;
- control flow (If, Loop, Scan, any node with a subgraph) and ops without a spec (or
  left out by the options) are skipped node by node, and the links through them dropped;
- a model with no liftable node is skipped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from onnxfuzz.generate.build.blocks import Ref, Step

CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})


@dataclass
class Lifted:
    """What ``lift_folder`` made of a folder of models."""

    blocks: dict[str, tuple[Step, ...]] = field(default_factory=dict)  # "file#k" -> steps
    skipped: dict[str, str] = field(default_factory=dict)  # model -> why (all of it)
    notes: dict[str, str] = field(default_factory=dict)  # model -> what was left out

    def report(self) -> list[str]:
        lines = [f"{name}: skipped: {why}" for name, why in sorted(self.skipped.items())]
        lines += [f"{name}: {note}" for name, note in sorted(self.notes.items())]
        return lines


def external_outside(model: onnx.ModelProto, folder: Path) -> list[str]:
    """The external-data locations of ``model`` that resolve outside ``folder``."""
    root = folder.resolve()
    bad = []
    tensors = list(model.graph.initializer)
    for node in model.graph.node:
        tensors += [a.t for a in node.attribute if a.HasField("t")]
    for t in tensors:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        loc = next((e.value for e in t.external_data if e.key == "location"), "")
        target = (root / loc).resolve()
        if not loc or Path(loc).is_absolute() or not target.is_relative_to(root):
            bad.append(loc or "(no location)")
    return bad


def lift_model(
    model: onnx.ModelProto, ops: set[str], window: int
) -> tuple[list[tuple[Step, ...]], Counter[str]]:
    """The blocks of ``model`` (windows of up to ``window`` liftable nodes) and the op
    types left out (not in ``ops``, another domain, control flow)."""
    left_out: Counter[str] = Counter()
    steps: list[Step] = []
    made_by: dict[str, tuple[int, int]] = {}  # tensor -> (step, output position)
    blocks: list[tuple[Step, ...]] = []
    for node in model.graph.node:
        op = node.op_type
        subgraph = any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
            for a in node.attribute
        )
        if node.domain not in ("", "ai.onnx") or op in CONTROL_FLOW or subgraph or op not in ops:
            left_out[op if node.domain in ("", "ai.onnx") else f"{node.domain}:{op}"] += 1
            continue
        if len(steps) == window:  # a new window: links do not cross it
            blocks.append(tuple(steps))
            steps, made_by = [], {}
        links = {
            pos: Ref(made_by[name][0], made_by[name][1])
            for pos, name in enumerate(node.input)
            if name and name in made_by
        }
        for k, name in enumerate(node.output):
            if name:
                made_by[name] = (len(steps), k)
        steps.append(Step(op, links))
    if steps:
        blocks.append(tuple(steps))
    return blocks, left_out


def lift_folder(folder: Path, ops: set[str], window: int) -> Lifted:
    """Every ``*.onnx`` under ``folder``, lifted (``lift_model``), problems reported."""
    out = Lifted()
    for path in sorted(folder.rglob("*.onnx")):
        name = str(path.relative_to(folder))
        try:
            # External data is not loaded: lifting needs the structure only, and a
            # location that escapes the model's folder must never be opened.
            model = onnx.load(path, load_external_data=False)
        except Exception as e:  # noqa: BLE001 - any unreadable file: reported, skipped
            out.skipped[name] = f"cannot be read ({type(e).__name__}: {str(e)[:200]})"
            continue
        outside = external_outside(model, path.parent)
        if outside:
            out.skipped[name] = (
                f"external data outside its folder ({', '.join(outside[:3])}); not read"
            )
            continue
        try:
            onnx.checker.check_model(_without_external(model))
        except Exception as e:  # noqa: BLE001 - the checker's message says why
            out.skipped[name] = f"invalid ({str(e).splitlines()[0][:200]})"
            continue
        blocks, left_out = lift_model(model, ops, window)
        if left_out:
            out.notes[name] = "left out (control flow, or no spec under these options): " + (
                ", ".join(f"{op} x{n}" for op, n in sorted(left_out.items()))
            )
        if not blocks:
            out.skipped[name] = "no node with a spec to lift"
            continue
        for k, b in enumerate(blocks):
            out.blocks[f"{name}#{k}"] = b
    return out


def _without_external(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with external tensors emptied: the checker would otherwise look for their
    files (data the lift never reads)."""
    if not any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
    return m


# --- as plain data (stored with a campaign, so that --resume uses the same blocks) -------
def blocks_to_record(blocks: dict[str, tuple[Step, ...]]) -> dict[str, Any]:
    return {
        name: [
            [s.op, {str(p): [r.step, r.output, r.input] for p, r in s.links.items()}] for s in steps
        ]
        for name, steps in blocks.items()
    }


def blocks_from_record(rec: dict[str, Any]) -> dict[str, tuple[Step, ...]]:
    return {
        name: tuple(
            Step(op, {int(p): Ref(r[0], r[1], r[2]) for p, r in links.items()})
            for op, links in steps
        )
        for name, steps in rec.items()
    }
