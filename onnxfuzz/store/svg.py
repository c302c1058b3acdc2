"""Inline SVG charts for the campaign report: line charts and stacked bars, drawn here (no
library, no network) so that the page stands alone. Every text is escaped."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

# Colour-blind-safe categorical palette (Okabe-Ito), then greys.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000")
VERDICT_COLOURS = {
    "ok": "#009E73",
    "mismatch": "#D55E00",
    "crash": "#B00020",
    "timeout": "#CC79A7",
    "unsupported": "#bbbbbb",
    "unstable": "#E69F00",
    "known": "#56B4E9",
    "invalid-reference": "#F0E442",
    "too-costly": "#8c8c8c",
    "not-reproducible": "#E0B0C8",  # a finding no fresh run re-created
    "generator-error": "#000000",
}


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def verdict_colour(verdict: str) -> str:
    return VERDICT_COLOURS.get(verdict, "#666666")


@dataclass(frozen=True)
class Series:
    name: str
    points: list[tuple[float, float]]  # (x, y), x ascending
    colour: str


def number(v: float) -> str:
    """A short, deterministic label for an axis tick or a value."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6:
        return f"{v / 1e6:.3g}M"
    if a >= 1e4:
        return f"{v / 1e3:.3g}k"
    if a >= 100 or float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.3g}"


def ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 5 x 10^k steps) covering lo..hi."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        if v >= lo - step * 1e-9:
            out.append(round(v, 12))
        v += step
    return out


def _f(v: float) -> str:
    return f"{v:.1f}"


def line_chart(
    series: list[Series],
    x_label: str,
    y_label: str,
    width: int = 640,
    height: int = 220,
    breaks: list[float] | None = None,
    step: bool = False,
) -> str:
    """Lines over a shared x axis. ``breaks``: x positions drawn as dashed verticals (e.g.
    where a campaign was paused and resumed). ``step``: a staircase (cumulative counts)."""
    left, right, top, bottom = 52, 12, 10, 34
    pw, ph = width - left - right, height - top - bottom
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    x0, x1 = (min(xs), max(xs)) if xs else (0.0, 1.0)
    y1 = max(ys) if ys else 1.0
    if x1 <= x0:
        x1 = x0 + 1
    yt = ticks(0.0, y1 if y1 > 0 else 1.0)
    y1 = max(yt[-1], y1) or 1.0

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * pw

    def py(y: float) -> float:
        return top + ph - y / y1 * ph

    out = [
        f'<svg class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(y_label)} by {escape(x_label)}">'
    ]
    for t in yt:
        y = _f(py(t))
        out.append(f'<line class="grid" x1="{left}" x2="{left + pw}" y1="{y}" y2="{y}"/>')
        out.append(f'<text class="tick" x="{left - 4}" y="{y}" text-anchor="end" dy="3">')
        out.append(f"{number(t)}</text>")
    for t in ticks(x0, x1):
        x = _f(px(t))
        out.append(f'<text class="tick" x="{x}" y="{top + ph + 14}" text-anchor="middle">')
        out.append(f"{number(t)}</text>")
    for b in breaks or []:
        x = _f(px(b))
        out.append(f'<line class="break" x1="{x}" x2="{x}" y1="{top}" y2="{top + ph}"/>')
    out.append(
        f'<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{top + ph}"/>'
        f'<line class="axis" x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}"/>'
    )
    for s in series:
        pts: list[str] = []
        prev_y: float | None = None
        for x, y in s.points:
            if step and prev_y is not None:
                pts.append(f"{_f(px(x))},{_f(py(prev_y))}")
            pts.append(f"{_f(px(x))},{_f(py(y))}")
            prev_y = y
        last = number(s.points[-1][1]) if s.points else "-"
        if len(s.points) == 1:  # a line needs two points: a dot
            x, y = s.points[0]
            out.append(f'<circle cx="{_f(px(x))}" cy="{_f(py(y))}" r="3" fill="{s.colour}"/>')
        out.append(
            f'<polyline fill="none" stroke="{s.colour}" stroke-width="1.6" '
            f'points="{" ".join(pts)}"><title>{escape(s.name)}: {last}</title></polyline>'
        )
    out.append(
        f'<text class="label" x="{left + pw / 2:.0f}" y="{height - 4}" '
        f'text-anchor="middle">{escape(x_label)}</text>'
        f'<text class="label" x="12" y="{top + ph / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + ph / 2:.0f})">{escape(y_label)}</text></svg>'
    )
    return "".join(out)


def stacked_bars(rows: list[tuple[str, list[tuple[str, int]]]], width: int = 640) -> str:
    """One horizontal bar per row, split into (verdict, count) segments by share."""
    label_w, bar_h, gap = 150, 18, 6
    height = len(rows) * (bar_h + gap) + gap
    out = [
        f'<svg class="bars" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="verdicts per backend">'
    ]
    for i, (label, parts) in enumerate(rows):
        y = gap + i * (bar_h + gap)
        out.append(
            f'<text class="tick" x="{label_w - 6}" y="{y + bar_h - 5}" text-anchor="end">'
            f"{escape(label)}</text>"
        )
        total = sum(n for _, n in parts) or 1
        x = float(label_w)
        for verdict, n in parts:
            w = n / total * (width - label_w - 4)
            if w <= 0:
                continue
            out.append(
                f'<rect x="{_f(x)}" y="{y}" width="{_f(w)}" height="{bar_h}" '
                f'fill="{verdict_colour(verdict)}"><title>{escape(label)}: {escape(verdict)} '
                f"{n} ({n / total:.1%})</title></rect>"
            )
            x += w
    out.append("</svg>")
    return "".join(out)
