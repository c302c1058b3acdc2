"""A small ONNX model drawn as a layered SVG graph: graph inputs on top, each node one
layer below the deepest node it reads, graph outputs at the bottom; op types as labels.

Meant for reduced models (a handful of nodes): past ``MAX_NODES`` only the first nodes are
drawn and the picture says how many were left out, so a page of hundreds of bugs stays
small.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import onnx

MAX_NODES = 40
ROW_H = 44  # px between layers
BOX_H = 22
CHAR_W = 7  # px per label character (the page's 11px sans-serif, rounded up)
GAP = 12  # px between boxes of one layer
MAX_LABEL = 18  # characters of a tensor name or op type shown


@dataclass
class _Box:
    key: str
    label: str
    kind: str  # "op" | "io"
    layer: int
    title: str
    x: float = 0.0  # centre
    width: float = 0.0


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _layout(model: onnx.ModelProto) -> tuple[list[_Box], list[tuple[str, str]], int]:
    """Boxes with their layers, edges (from key, to key), and the nodes left out."""
    g = model.graph
    initializers = {i.name for i in g.initializer}
    nodes = list(g.node)[:MAX_NODES]
    boxes: dict[str, _Box] = {}
    producer: dict[str, str] = {}  # tensor -> box key
    for i in g.input:
        if i.name not in initializers:
            boxes[f"in:{i.name}"] = _Box(f"in:{i.name}", _short(i.name), "io", 0, i.name)
            producer[i.name] = f"in:{i.name}"
    edges: list[tuple[str, str]] = []
    for n, node in enumerate(nodes):
        key = f"n{n}"
        sources = [producer[t] for t in node.input if t in producer]
        layer = 1 + max((boxes[s].layer for s in sources), default=0)
        title = f"{node.op_type} {node.name}".strip()
        boxes[key] = _Box(key, _short(node.op_type), "op", layer, title)
        edges += [(s, key) for s in dict.fromkeys(sources)]
        for t in node.output:
            if t:
                producer[t] = key
    last = max((b.layer for b in boxes.values()), default=0) + 1
    for o in g.output:
        if o.name in producer:
            key = f"out:{o.name}"
            boxes[key] = _Box(key, _short(o.name), "io", last, o.name)
            edges.append((producer[o.name], key))
    return list(boxes.values()), edges, len(g.node) - len(nodes)


def _place(boxes: list[_Box], edges: list[tuple[str, str]]) -> float:
    """x positions: each layer ordered by the mean x of what feeds it (fewer crossings),
    centred on the widest layer; returns the drawing's width."""
    by_layer: dict[int, list[_Box]] = {}
    for b in boxes:
        b.width = len(b.label) * CHAR_W + 14
        by_layer.setdefault(b.layer, []).append(b)
    feeds: dict[str, list[str]] = {}
    for s, d in edges:
        feeds.setdefault(d, []).append(s)
    where: dict[str, float] = {}
    widths = {k: sum(b.width for b in v) + GAP * (len(v) - 1) for k, v in by_layer.items()}
    total = max(widths.values(), default=0.0) + 2 * GAP
    for layer in sorted(by_layer):
        row = by_layer[layer]
        if layer > 0:
            row.sort(
                key=lambda b: (
                    sum(where.get(s, 0.0) for s in feeds.get(b.key, []))
                    / max(1, len(feeds.get(b.key, [])))
                )
            )
        x = (total - widths[layer]) / 2
        for b in row:
            b.x = x + b.width / 2
            where[b.key] = b.x
            x += b.width + GAP
    return total


def model_svg(model: onnx.ModelProto) -> str:
    boxes, edges, left_out = _layout(model)
    width = _place(boxes, edges)
    layers = max((b.layer for b in boxes), default=0) + 1
    height = layers * ROW_H + (16 if left_out else 0)
    at = {b.key: b for b in boxes}

    def top(b: _Box) -> float:
        return b.layer * ROW_H + 6

    out = [
        f'<svg class="graph" width="{width:.0f}" height="{height}" '
        f'viewBox="0 0 {width:.0f} {height}" role="img" aria-label="reduced model">'
    ]
    for s, d in edges:
        a, b = at[s], at[d]
        y0, y1 = top(a) + BOX_H, top(b)
        mid = (y0 + y1) / 2
        out.append(
            f'<path class="edge" d="M{a.x:.1f},{y0:.1f} C{a.x:.1f},{mid:.1f} '
            f'{b.x:.1f},{mid:.1f} {b.x:.1f},{y1 - 1:.1f}" marker-end="url(#arrow)"/>'
        )
    for b in boxes:
        rx = 11 if b.kind == "io" else 3
        out.append(
            f'<g class="{b.kind}"><title>{escape(b.title)}</title>'
            f'<rect x="{b.x - b.width / 2:.1f}" y="{top(b):.1f}" width="{b.width:.1f}" '
            f'height="{BOX_H}" rx="{rx}"/><text x="{b.x:.1f}" y="{top(b) + 15:.1f}" '
            f'text-anchor="middle">{escape(b.label)}</text></g>'
        )
    if left_out:
        out.append(
            f'<text class="tick" x="4" y="{height - 4}">… {left_out} more nodes not drawn</text>'
        )
    out.append("</svg>")
    return "".join(out)


# One arrow head for every graph on the page (ids are document-wide).
ARROW_DEFS = (
    '<svg width="0" height="0" style="position:absolute" aria-hidden="true"><defs>'
    '<marker id="arrow" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="6" markerHeight="6" '
    'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#777"/></marker></defs></svg>'
)
