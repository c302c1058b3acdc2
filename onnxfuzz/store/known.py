"""Known findings carried from one campaign to the next, as sanitizer suppression files are.

``onnxfuzz triage DIR --export-known FILE`` writes the campaign's bug families (with the
families of the known file the campaign itself ran with, their hits added up) and the
versions of the backends that found them; ``onnxfuzz fuzz --known FILE`` reads it: a
finding that matches an entry is stored as ``known`` (counted, listed with its hits in the
summary) and is neither reduced nor filed, so the campaign's time goes to new bugs.

A finding matches an entry of its own backend (by label) when its signature is one of the
entry's, or, for a crash or timeout, when its root-cause family is the entry's
(``judge.signature.family``: one converter bug reached through many ops). A value mismatch
matches by signature only: its family holds no words but its kind.

Each entry also records its *trigger*: the op, element type and categorical attributes of
the node it was reduced to. A family hit ``avoid_after`` times or more (over the campaigns
the file counts) is avoided by generation (``Config.avoid`` for the op and type, or
``Config.avoid_features`` for its attribute values), so the tests go to new territory.

The file is JSON::

    {"format": "onnxfuzz-known/1", "versions": {"tvm": "0.27.0", ...},
     "families": [{"family": "tvm|crash|compile|...", "id": "tvm-crash-F4e9263",
                   "backend": "tvm", "verdict": "crash", "hits": 187,
                   "signatures": ["tvm|crash|compile|..."], "bundles": ["..."],
                   "trigger": {"op": "Elu", "dtype": "float16", "features": []}}]}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import UsageError
from onnxfuzz.generate.lang.features import node_features
from onnxfuzz.judge.oracle import Verdict
from onnxfuzz.judge.signature import family, family_id

FORMAT = "onnxfuzz-known/1"
AVOID_AFTER = 5  # hits of a family after which generation avoids its trigger


@dataclass
class Trigger:
    """The node a family's bug was reduced to: what generation avoids."""

    op: str
    dtype: str | None = None  # its main element type (None: not declared)
    features: list[str] = field(default_factory=list)  # categorical attribute values


@dataclass
class KnownFamily:
    family: str
    id: str
    backend: str  # the label the findings were of
    verdict: str
    hits: int
    signatures: list[str]
    bundles: list[str] = field(default_factory=list)
    trigger: Trigger | None = None


@dataclass
class KnownFile:
    versions: dict[str, str]  # label -> the backend's version when the file was written
    families: list[KnownFamily]
    source: str = ""  # the path it was read from (for messages)

    # --- reading ------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path) -> KnownFile:
        """The file at ``path``; a one-line error naming it when it is missing or not one."""
        try:
            doc = json.loads(path.read_text())
        except OSError as e:
            raise UsageError(
                f"--known: cannot read {path} ({e.strerror or e}); write one with "
                "onnxfuzz triage DIR --export-known FILE"
            ) from None
        except ValueError as e:
            raise UsageError(f"--known: {path} is not JSON ({e}); export it again") from None
        try:
            return cls.from_record(doc, str(path))
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(
                f"--known: {path} is not an onnxfuzz known-findings file ({e}); write one with "
                "onnxfuzz triage DIR --export-known FILE"
            ) from None

    @classmethod
    def from_record(cls, doc: Any, source: str = "") -> KnownFile:
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, this onnxfuzz reads {FORMAT!r}")
        fams = []
        for f in doc["families"]:
            t = f.get("trigger")
            fams.append(
                KnownFamily(
                    family=str(f["family"]),
                    id=str(f["id"]),
                    backend=str(f["backend"]),
                    verdict=str(f["verdict"]),
                    hits=int(f["hits"]),
                    signatures=[str(s) for s in f["signatures"]],
                    bundles=[str(b) for b in f.get("bundles", [])],
                    trigger=(
                        Trigger(str(t["op"]), t.get("dtype"), [str(x) for x in t["features"]])
                        if t
                        else None
                    ),
                )
            )
        versions = doc["versions"]
        if not isinstance(versions, dict):
            raise TypeError("versions is not an object")
        return cls({str(k): str(v) for k, v in versions.items()}, fams, source)

    def to_record(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "versions": self.versions,
            "families": [asdict(f) for f in self.families],
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_record(), indent=1) + "\n")

    # --- checks against a campaign ------------------------------------------------------
    def check_backends(self, labels: list[str]) -> None:
        """A one-line error when none of the file's backends is in the campaign."""
        mine = sorted({f.backend for f in self.families} | set(self.versions))
        if mine and not set(mine) & set(labels):
            raise UsageError(
                f"--known: {self.source} holds findings of {', '.join(mine)}; this campaign "
                f"runs {', '.join(labels)}: none of them (give a --backend of the file, or "
                "another file)"
            )

    def version_notes(self, versions: dict[str, str]) -> list[str]:
        """A warning per backend whose version differs from the one the file records:
        its entries still apply (a root cause often outlives a release), but may be fixed."""
        return [
            f"--known: {self.source} was written with {label} {self.versions[label]}, this "
            f"campaign runs {label} {v}: its {label} entries may be fixed (export a new file "
            "with onnxfuzz triage DIR --export-known FILE)"
            for label, v in sorted(versions.items())
            if label in self.versions and self.versions[label] != v
        ]

    # --- use ----------------------------------------------------------------------------
    def match(self, backend: str, signature: str) -> KnownFamily | None:
        """The entry a finding of ``backend`` with ``signature`` is known as, if any."""
        fam: str | None = None
        for f in self.families:
            if f.backend != backend:
                continue
            if signature in f.signatures:
                return f
            if f.verdict != Verdict.MISMATCH:
                fam = fam or family(signature)
                if fam == f.family:
                    return f
        return None

    def avoided(
        self, avoid_after: int
    ) -> tuple[frozenset[tuple[str, int]], frozenset[tuple[str, str]]]:
        """What generation avoids: the triggers of families hit ``avoid_after`` times or
        more (0: none). A trigger with categorical attribute values avoids those forms of
        the op; one without avoids the op in its element type."""
        pairs: set[tuple[str, int]] = set()
        feats: set[tuple[str, str]] = set()
        if avoid_after <= 0:
            return frozenset(), frozenset()
        for f in self.families:
            t = f.trigger
            if t is None or f.hits < avoid_after:
                continue
            if t.features:
                feats.update((t.op, x) for x in t.features)
            elif t.dtype in dt.BY_NAME:
                pairs.add((t.op, dt.BY_NAME[t.dtype]))
        return frozenset(pairs), frozenset(feats)


def trigger_of(model: onnx.ModelProto, signature: str) -> Trigger | None:
    """The node of a (reduced) model that a bug of ``signature`` points at: for a value
    mismatch, the op its signature names; otherwise the last node (a reduction keeps what
    the failure needs, and the failing op comes last in its pattern)."""
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    if not nodes:
        return None
    node = nodes[-1]
    parts = signature.split("|", 3)
    if len(parts) == 4 and parts[1] == Verdict.MISMATCH:
        named = parts[3].split(" in ", 1)[-1].removesuffix(" output")
        node = next((n for n in reversed(nodes) if n.op_type == named), node)
    g = model.graph
    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in list(g.input) + list(g.value_info) + list(g.output)
    }
    types.update({i.name: i.data_type for i in g.initializer})
    elem = next((types[t] for t in [*node.input, *node.output] if t and types.get(t)), None)
    constants = {i.name for i in g.initializer} | {
        t for n in g.node if n.op_type == "Constant" for t in n.output
    }
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    valued = sorted(
        x for x in node_features(node, constants, opset) if x.startswith("attr:") and "=" in x
    )
    return Trigger(node.op_type, dt.NAMES.get(elem) if elem else None, valued)


def export(
    campaign_dir: Path,
    bugs: list[dict[str, Any]],
    versions: dict[str, str],
    known_hits: dict[tuple[str, str], int],
    previous: KnownFile | None,
    names: dict[str, str] | None = None,
) -> KnownFile:
    """The known file of a campaign: ``bugs`` (``Store.bugs``, grouped by family, each
    family's trigger from its first reduced bundle), and the entries of the file it ran
    with (``previous``) with ``known_hits`` ((backend, entry id) -> hits) added."""
    fams: dict[tuple[str, str], KnownFamily] = {}
    if previous is not None:
        for f in previous.families:
            hits = f.hits + known_hits.get((f.backend, f.id), 0)
            fams[(f.backend, f.family)] = replace(f, hits=hits, signatures=list(f.signatures))
    for b in bugs:
        fam = family(b["signature"])
        key = (b["backend"], fam)
        k = fams.get(key)
        if k is None:
            fid = family_id(fam, names)
            k = fams[key] = KnownFamily(fam, fid, b["backend"], b["verdict"], 0, [])
        k.hits += int(b["hits"])
        if b["signature"] not in k.signatures:
            k.signatures.append(b["signature"])
        if b["id"] not in k.bundles:
            k.bundles.append(b["id"])
        if k.trigger is None:
            k.trigger = _bundle_trigger(campaign_dir / "bugs" / b["id"], b["signature"])
    merged = {**(previous.versions if previous is not None else {}), **versions}
    return KnownFile(merged, list(fams.values()))


def _bundle_trigger(bundle: Path, signature: str) -> Trigger | None:
    """The trigger of a bundle's reduced model, or of its model for a value mismatch (its
    signature names the op); None otherwise (an unreduced crash's failing node is not
    known) and when the model is unreadable."""
    path = bundle / "reduced" / "model.onnx"
    if not path.exists():
        path = bundle / "model.onnx"
        if signature.split("|", 2)[1:2] != [Verdict.MISMATCH] or not path.exists():
            return None
    try:
        return trigger_of(onnx.load(str(path)), signature)
    except Exception:  # noqa: BLE001 - an unreadable model: the family without a trigger
        return None
