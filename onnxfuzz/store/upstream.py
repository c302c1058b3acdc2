"""Bug families already confirmed upstream: a shipped table (``onnxfuzz/data/upstream.json``)
plus the user's rows (``DIR/upstream.json`` beside a campaign's ``bugs/``), matched to a
bundle by backend, verdict, a regex on its signature family and, where a row says so, the
reduced model's op types and element types, and attribute values a node of those ops has
(``attrs_all``: a spec change that only some backends followed shows only there). issue.md
links the matches, so that a user sees a known bug before filing it again.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import onnx

from onnxfuzz.errors import ModelError
from onnxfuzz.judge.signature import family

SHIPPED = Path(__file__).parents[1] / "data" / "upstream.json"
USER_FILE = "upstream.json"


def load_rows(campaign: Path | None = None) -> list[dict[str, Any]]:
    """The shipped rows, then the campaign folder's own (if it has ``upstream.json``)."""
    rows = list(json.loads(SHIPPED.read_text())["rows"])
    if campaign is not None and (campaign / USER_FILE).is_file():
        path = campaign / USER_FILE
        try:
            rows += json.loads(path.read_text())["rows"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ModelError(
                f'{path}: not an upstream table ({e}); it needs {{"rows": [...]}} as in {SHIPPED}'
            ) from None
    return rows


def _type_name(elem: int) -> str:
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(elem).name
    except (KeyError, TypeError, ValueError):
        return ""


def _model_facts(model: onnx.ModelProto) -> tuple[set[str], set[str]]:
    """The model's op types and the element types of its tensors (numpy names)."""
    g = model.graph
    elems = [vi.type.tensor_type.elem_type for vi in [*g.input, *g.output, *g.value_info]]
    elems += [t.data_type for t in g.initializer]
    return {n.op_type for n in g.node}, {_type_name(e) for e in elems if e} - {""}


def _has_attrs(model: onnx.ModelProto, ops: list[str] | None, attrs: dict[str, Any]) -> bool:
    """Whether a node (of one of ``ops``, if given) has every attribute of ``attrs`` at
    that value."""
    for n in model.graph.node:
        if ops and n.op_type not in ops:
            continue
        have = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        if all(k in have and have[k] == v for k, v in attrs.items()):
            return True
    return False


def matches(
    meta: dict[str, Any], model: onnx.ModelProto, rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The rows that match a bundle (its meta.json and reduced model)."""
    target = meta["backend"].split(":")[0]
    signature = meta.get("signature", "")
    fam = family(signature)
    ops, types = _model_facts(model)
    found = []
    for row in rows:
        backends = row.get("backend") or []  # one target, or a list of them
        if backends and target not in ([backends] if isinstance(backends, str) else backends):
            continue
        if row.get("verdict") and row["verdict"] != meta.get("verdict"):
            continue
        pattern = row.get("match", "")
        if pattern and not (re.search(pattern, fam) or re.search(pattern, signature)):
            continue
        if row.get("ops_any") and not ops & set(row["ops_any"]):
            continue
        if row.get("dtypes_any") and not types & set(row["dtypes_any"]):
            continue
        if row.get("attrs_all") and not _has_attrs(model, row.get("ops_any"), row["attrs_all"]):
            continue
        found.append(row)
    return found


def markdown(found: list[dict[str, Any]]) -> str:
    """The matches as a paragraph for issue.md ("" for none)."""
    lines = []
    for row in found:
        lines.append(f"Probably known upstream: {row['title']}.")
        for link in row.get("links", []):
            seen = f", {link['seen_in']}" if link.get("seen_in") else ""
            lines.append(f"- {link['url']} ({link['title']}; {link.get('state', '?')}{seen})")
        if row.get("workaround"):
            lines.append(f"- workaround: `{row['workaround']}`")
        if row.get("note"):
            lines.append(f"- {row['note']}")
    return "\n".join(lines)
