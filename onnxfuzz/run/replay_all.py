"""``onnxfuzz replay DIR``: every bundle of a campaign (``DIR/bugs/*``) or of a folder of
bundles (``DIR/*``) against the installed backends: still there, fixed, or different.

How a team checks a new release. Each bundle is judged exactly as ``replay_bundle`` judges
one (same reference, tolerances and signature), but bundles of the same (reference,
backend) pair share one ``BackendPool``: starting a TVM or torch worker costs seconds,
judging a bundle milliseconds. A damaged bundle is a row of its own ("damaged", with
the reason), never a lost row: the others are still replayed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import onnx

from onnxfuzz.errors import ModelError, OnnxFuzzError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.corpus.testdata import DATA_SET
from onnxfuzz.judge.signature import RULES
from onnxfuzz.run.replay import Replayed, _judge, earlier_models, load_bundle
from onnxfuzz.store.db import REFERENCE_BUGS

DAMAGED = "damaged"


@dataclass
class Row:
    bundle: str  # the bundle's folder name (its bug id)
    backend: str
    status: str  # "still" | "fixed" | "different" | "damaged"
    detail: str  # what the backend said now, or why the bundle could not be read


_STATUS = {Replayed.REPRODUCES: "still", Replayed.FIXED: "fixed", Replayed.DIFFERENT: "different"}


# A campaign folder's bundles: its bugs, and the failures of its reference alone (set
# aside unreduced; a new release may fix them as well as any bug).
CAMPAIGN_FOLDERS = ("bugs", REFERENCE_BUGS)


def find_bundles(folder: Path) -> list[Path]:
    """The bundles under a campaign folder (``bugs/*`` and ``reference-bugs/*``) or a folder
    of bundles; a folder that holds neither is refused by name."""
    roots = [folder / n for n in CAMPAIGN_FOLDERS if (folder / n).is_dir()] or [folder]
    found = [
        p
        for root in roots
        for p in sorted(root.iterdir())
        if p.is_dir() and not p.name.startswith(".") and _looks_like_bundle(p)
    ]
    if not found and (folder / "campaign.db").exists():
        return []  # a campaign that found nothing: nothing to replay, no error (a CI step)
    if not found:
        raise ModelError(
            f"{folder}: no bug bundles here (a campaign folder with bugs/ or reference-bugs/, "
            "a folder of bundles, or one bundle with meta.json and model.onnx)"
        )
    return found


def _looks_like_bundle(path: Path) -> bool:
    return any((path / name).exists() for name in ("meta.json", "model.onnx", DATA_SET))


def current_form(signature: str) -> str:
    """A stored signature under today's normalization rules: a bundle written before a rule
    was added (say, TVM's ``arguments=()`` read as a shape) is still the same bug. The rules
    are idempotent on normalized text, so a current signature is unchanged. Only error text
    is normalized so (``judge.signature``): not a mismatch's words nor a crash's frames."""
    parts = signature.split("|", 3)
    if len(parts) < 4 or parts[1] == "mismatch" or " | at " in parts[3]:
        return signature
    detail = parts[3]
    for rx, rep in RULES:  # not normalize(): its length cap would cut a longer detail
        detail = rx.sub(rep, detail)
    return "|".join(parts[:3]) + "|" + detail


def replay_all(
    folder: Path,
    timeout: float | None = None,
    progress: Callable[[Row], None] | None = None,
) -> list[Row]:
    """One row per bundle under ``folder``, in bundle-name order."""
    rows: dict[Path, Row] = {}
    loaded: dict[tuple[str, str], list[tuple[Path, dict, onnx.ModelProto, dict, list]]] = {}
    for bundle in find_bundles(folder):
        try:  # run.replay's reading: "bundle damaged: <file> (why)", as for one bundle
            meta, model, inputs = load_bundle(bundle)
            earlier = earlier_models(bundle, meta)
        except OnnxFuzzError as e:
            rows[bundle] = Row(bundle.name, "?", DAMAGED, str(e))
            if progress:
                progress(rows[bundle])
            continue
        meta["signature"] = current_form(meta["signature"])
        loaded.setdefault((meta["reference"], meta["backend"]), []).append(
            (bundle, meta, model, inputs, earlier)
        )
    for (reference, backend), group in loaded.items():
        limit = timeout or max(float(g[1].get("timeout", 30.0)) for g in group)
        with BackendPool([reference, backend], timeout=limit) as pool:
            for bundle, meta, model, inputs, earlier in group:
                # (a state-dependent bug's earlier models run first; in this shared pool
                # the earlier bundles' models ran before them too)
                verdict, message = _judge(meta, model, inputs, pool, earlier)
                line = message.splitlines()[0] if message else ""
                rows[bundle] = Row(bundle.name, backend, _STATUS[verdict], line)
                if progress:
                    progress(rows[bundle])
    return [rows[b] for b in sorted(rows)]


def as_json(rows: list[Row]) -> str:
    counts = {s: sum(r.status == s for r in rows) for s in ("still", "fixed", "different")}
    counts[DAMAGED] = sum(r.status == DAMAGED for r in rows)
    return json.dumps({"bundles": [asdict(r) for r in rows], "counts": counts}, indent=1)
