"""issue.md's account of the passing neighbours (``reduce.neighbours``): which one-change
variants of the reduced model still fail, which pass, and the trigger that follows.

Only what was run is said: "of the N variants tried". A variant that failed another way,
or that no backend judged, is neither a pass nor a fail and is counted apart; where no
variant passes, no trigger is named.
"""

from __future__ import annotations

from typing import Any

from onnxfuzz.reduce.neighbours import FAILS, OTHER, PASSES, VALUES_CUT
from onnxfuzz.reduce.variants import attribute_words, elements, shape_words


def neighbours_text(meta: dict[str, Any], renamed: dict[str, str], backends: str) -> str:
    """The paragraph; "" where no variant was tried. ``renamed``: model.onnx's tensor
    names -> the model text's; ``backends``: "ort and planted"."""
    n = meta.get("neighbours") or {}
    tried = n.get("tried") or []
    if not tried:
        return ""

    def name(t: str) -> str:
        return f"`{renamed.get(t, t)}`"

    subjects: dict[tuple[str, str], list[dict[str, Any]]] = {}
    others = []
    for t in tried:
        if t["result"] == OTHER:
            others.append(t)
        else:
            subjects.setdefault((t["kind"], t["subject"]), []).append(t)
    lines = [
        f"**What the failure depends on.** Of {len(tried)} one-change "
        f"variant{'s' if len(tried) != 1 else ''} of this model "
        f"around {n.get('node', 'the blamed node')}, each run once on {backends} "
        '("fails": the same failure as above):',
        "",
    ]
    triggers: list[str] = []
    values_cut = False
    for (kind, subject), ts in subjects.items():
        was = _value(kind, ts[0]["was"])
        was = f"{subject}={was}" if kind == "attribute" else was
        # the nearest first: a shape's with the most elements
        ts = sorted(ts, key=lambda t: -elements(t["value"]) if kind == "shape" else 0)
        fails = [_shown(t, name) for t in ts if t["result"] == FAILS]
        passes = [_shown(t, name) for t in ts if t["result"] == PASSES]
        cut = [_shown(t, name) for t in ts if t["result"] == VALUES_CUT]
        what = {"attribute": f"`{subject}`", "shape": f"input {name(subject)}"}.get(
            kind, "element type"
        )
        if cut:
            values_cut = True
            many = len(cut) > 1
            lines.append(
                f"- {what}: {was} here; cut to {', '.join(cut)} it passes, but the same "
                f"cut{'s' if many else ''} keeping the last entries instead of the first "
                f"fail{'' if many else 's'}: the values cut away made it pass, not the size "
                "(the failure needs some of them)."
            )
            if not passes:
                continue
        if passes:
            triggers.append(was if kind == "attribute" else f"{what} {was}")
            also = f" (and {', '.join(fails)})" if fails else ""
            lines.append(
                f"- Trigger, {what}: fails with {was} (this model){also}; passes with "
                f"{', '.join(passes)}."
            )
        else:
            lines.append(
                f"- {what}: {was} here; still fails with {', '.join(fails)} (this change "
                "does not make it pass)."
            )
    if others:
        said = "; ".join(f"{_shown(t, name)}: {t.get('said') or 'no verdict'}" for t in others)
        lines.append(
            f"- {len(others)} variant{'s' if len(others) > 1 else ''} failed another way, "
            f"gave no verdict or showed nothing of the op, so "
            f"say{'' if len(others) > 1 else 's'} nothing either way: "
            f"{said}."
        )
    lines.append("")
    if len(triggers) > 1:
        # each change alone makes it pass: in this model the failure needs every one of
        # these values at once (a MaxPool wrong only with ceil_mode=1 and a stride > 1)
        lines.append(
            "Each trigger's change alone makes it pass: in this model the failure needs "
            f"all of {', '.join(triggers)} at once."
        )
    if not triggers and values_cut:
        lines.append(
            "No change tried makes it pass of itself: the failure depends on values of the "
            "input (those the cuts above removed), not on its size or an attribute. Not "
            "varied: the input's rank, and inputs the node does not read directly."
        )
    elif not triggers:
        lines.append(
            "No variant tried passes: the failure does not hinge on any one of the changes "
            "tried. Not varied: the input's rank, its values, and inputs the node does "
            "not read directly."
        )
    left = n.get("not_tried") or 0
    if left:
        lines.append(
            f"{left} more valid variant{'s were' if left > 1 else ' was'} not tried (at most "
            f"{n.get('bound', '?')} runs, `--neighbours`)."
        )
    best = n.get("passing")
    if best:
        at = best.get("tried")
        change = _shown(tried[at], name, True) if isinstance(at, int) else best["change"]
        lines.append(
            f"`{best['folder']}/` holds the nearest passing variant, {change}: its "
            "`model.onnx` and `test_data_set_0/`, which both backends ran and agree on."
        )
    return "\n".join(lines).rstrip()


def _value(kind: str, v: Any) -> str:
    if kind == "attribute":
        return attribute_words(v)
    if kind == "shape":
        return shape_words(v)
    return str(v)


def _axis_words(was: Any, value: Any) -> str:
    """ "[11, 5] (axis 0: 11; 55 elements)": a cut of one axis names it, since the length
    along one axis (a Softmax's, a reduction's) is what a tail-loop bug hinges on, and the
    element counts alone read as self-contradictory (46 fails, 55 passes, audit 16)."""
    if not isinstance(was, list) or not isinstance(value, list) or len(was) != len(value):
        return ""
    changed = [i for i, (a, b) in enumerate(zip(was, value, strict=True)) if a != b]
    if len(changed) != 1:
        return ""
    n = elements(value)
    i = changed[0]
    return f"{value} (axis {i}: {value[i]}; {n} element{'s' if n != 1 else ''})"


def _shown(t: dict[str, Any], name: Any, alone: bool = False) -> str:
    """A variant's value, with the inputs resized to fit it; ``alone``: said where its
    subject is not (an input's name, "element type")."""
    said = _value(t["kind"], t["value"])
    if t["kind"] == "shape":
        said = _axis_words(t["was"], t["value"]) or said
    if t["kind"] == "attribute":
        said = f"{t['subject']}={said}"
    elif alone:
        said = (
            f"input {name(t['subject'])} {said}" if t["kind"] == "shape" else f"element type {said}"
        )
    if t.get("outputs_change") and t["kind"] == "attribute":
        said += " (its output's shape or type changes)"  # expected of a smaller input
    refit = t.get("refit") or []
    if refit:
        said += " (" + ", ".join(f"{name(r['input'])} resized to {r['shape']}" for r in refit)
        said += " to fit)"
    return said
