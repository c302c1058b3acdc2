"""The nodes a failure's own words name, tried alone first by the graph reduction.

A backend's error usually says where it failed: the judge's "first diverging node:
unsqueeze0 (Unsqueeze)" of a wrong value, ONNX Runtime's "Node (relu3)", onnx2torch's
module names (``reducel10 = self.reducel10(...)``, node names) and converter files
(``node_converters/reshape.py``), OpenVINO's "<Node(GatherElements): gatherelements0>".
Such a node alone, fed what the reference computed for its inputs, is often the whole
reproducer: one candidate where the passes would take a run per node dropped, which a
compiler that takes seconds a model cannot afford in a reduction's budget (torch.compile
left a 7-node Reshape crash at its 30 s budget; the node alone showed it).
"""

from __future__ import annotations

import re

import onnx

MAX_SUSPECTS = 3  # a guess costs a backend run when it is wrong
_DIVERGING = re.compile(r"first diverging node: (\S+) \(")


def _position(message: str, word: str, flags: int = 0) -> int | None:
    """Where ``word`` first stands alone in ``message`` (not inside a longer name)."""
    m = re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", message, flags)
    return m.start() if m else None


def named_nodes(model: onnx.ModelProto, message: str) -> list[int]:
    """Indices of the top-level nodes ``message`` names, most telling first: the first
    diverging node of a wrong value; nodes by their names, in the order the message names
    them; then nodes of an op type it spells (``Reshape``, or its converter's file
    ``reshape.py``). At most ``MAX_SUSPECTS``; none for a model of one node."""
    nodes = model.graph.node
    if len(nodes) < 2 or not message:
        return []
    by_name = {n.name: k for k, n in enumerate(nodes) if n.name}
    found: dict[int, None] = {}
    if (m := _DIVERGING.search(message)) and m.group(1) in by_name:
        found[by_name[m.group(1)]] = None
    ranked: list[tuple[int, int, int]] = []  # (kind, position, node)
    for name, k in by_name.items():
        if (at := _position(message, name)) is not None:
            ranked.append((0, at, k))
    for k, n in enumerate(nodes):
        spelled = [_position(message, n.op_type), _position(message, n.op_type.lower() + ".py")]
        at = min((p for p in spelled if p is not None), default=None)
        if at is not None:
            ranked.append((1, at, k))
    for _, _, k in sorted(ranked):
        found.setdefault(k, None)
    return list(found)[:MAX_SUSPECTS]
