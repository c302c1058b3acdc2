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
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import UsageError
from onnxfuzz.generate.lang.features import node_features
from onnxfuzz.generate.lang.spec import op_info
from onnxfuzz.judge.oracle import Verdict
from onnxfuzz.judge.signature import (
    blamed_op,
    earlier_forms,
    family,
    family_id,
    root_signature,
)

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
    trigger: Trigger | None = None  # its first bundle's (files before "triggers" had one)
    # every bundle's trigger: one root cause reached through several ops or types (a TVM
    # converter's float16 constants through Sub, Mul and Elu) is avoided in each of them
    triggers: list[Trigger] = field(default_factory=list)

    def all_triggers(self) -> list[Trigger]:
        seen = [*([self.trigger] if self.trigger is not None else []), *self.triggers]
        return [t for k, t in enumerate(seen) if t not in seen[:k]]


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
                    trigger=trigger_from(t) if t else None,
                    triggers=[trigger_from(x) for x in f.get("triggers", [])],
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

    def absent_notes(self, labels: list[str]) -> list[str]:
        """A warning per backend of the file this campaign does not run (by its label):
        its families match nothing here, though their avoided triggers still apply. An
        adapter moved, renamed or given another class or options is another label."""
        absent: dict[str, int] = {}
        for f in self.families:
            if f.backend not in labels:
                absent[f.backend] = absent.get(f.backend, 0) + 1
        return [
            f"--known: {self.source}'s {n} famil{'y' if n == 1 else 'ies'} of {label} match "
            f"nothing here: this campaign runs no backend labelled {label} (an adapter "
            "moved, renamed, or of another class or options is another backend; export "
            "the file again from a campaign with this label)"
            for label, n in sorted(absent.items())
        ]

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
    def match(self, backend: str, signature: str, message: str = "") -> KnownFamily | None:
        """The entry a finding of ``backend`` with ``signature`` is known as, if any; with
        the error's ``message``, an entry written before a normalization rule changed
        matches it too (``judge.signature.earlier_forms``)."""
        forms = dict.fromkeys(earlier_forms(signature, message) if message else [])
        for sig in forms or [signature]:
            fam: str | None = None
            root = root_signature(sig)  # a precision finding is its op's wrong value
            for f in self.families:
                if f.backend != backend:
                    continue
                if root in {root_signature(s) for s in f.signatures}:
                    return f
                if f.verdict != Verdict.MISMATCH:
                    fam = fam or family(sig)
                    # the family stored, or its signatures' under today's rules (a file
                    # written before a family rule changed: torch's "Got Int" and "Got Long")
                    if fam == f.family or fam in {family(s) for s in f.signatures}:
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
            if f.hits >= avoid_after:
                avoid_triggers(f.all_triggers(), pairs, feats)
        return frozenset(pairs), frozenset(feats)


def avoid_triggers(
    triggers: list[Trigger], pairs: set[tuple[str, int]], feats: set[tuple[str, str]]
) -> None:
    """Add what generation avoids for ``triggers`` to ``pairs`` ((op, element type):
    ``Config.avoid``) and ``feats`` ((op, attribute value): ``Config.avoid_features``). A
    trigger with categorical attribute values avoids those forms of the op in every type;
    one without avoids the op in its element type, never the whole op."""
    for t in triggers:
        if t.features:
            feats.update((t.op, x) for x in t.features)
        elif t.dtype in dt.BY_NAME:
            pairs.add((t.op, dt.BY_NAME[t.dtype]))


def trigger_from(t: dict[str, Any]) -> Trigger:
    """A trigger from its record (``dataclasses.asdict``)."""
    return Trigger(str(t["op"]), t.get("dtype"), [str(x) for x in t["features"]])


def trigger_of(model: onnx.ModelProto, signature: str) -> Trigger | None:
    """The node of a (reduced) model that a bug of ``signature`` points at: for a value
    mismatch, the op its signature names; otherwise the last node (a reduction keeps what
    the failure needs, and the failing op comes last in its pattern)."""
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    if not nodes:
        return None
    node = nodes[-1]
    named = blamed_op(signature)
    if named is not None:
        node = next((n for n in reversed(nodes) if n.op_type == named), node)
    return node_trigger(model, node)


# How backends name the node they failed on: ONNX Runtime ("... while running Conv node.
# Name:'conv3' ...": the node's own name, matched below) and TVM's Relax importer ("Error
# converting operator ThresholdedRelu, with inputs: [lv1]", in the traceback's last line).
_NAMED_OP = re.compile(r"Error converting operator (\w+)|while running (\w+) node")
_OPERATOR = re.compile(r"\boperator \((\w+)\)")  # ONNX Runtime's type errors name the op


def named_triggers(model: onnx.ModelProto, text: str) -> list[Trigger]:
    """The triggers of the nodes a backend's error ``text`` (message and traceback) names:
    by the node's name, else by its op type (TVM names the op only: each node of that op).
    What a crash points at without reducing it: the op and its element type, not its
    attribute values (an unreduced model's attributes are whatever was drawn)."""
    nodes = [n for n in model.graph.node if n.op_type != "Constant"]
    if any(op not in {n.op_type for n in model.graph.node} for op in _OPERATOR.findall(text)):
        # ONNX Runtime names an optimizer-made node by a node it fused ("operator
        # (MatMulIntegerToFloat) in node (matmul0)"): that node is one of the pattern the
        # rewrite took, not the cause, and avoiding it (float MatMul) starved the campaign
        return []
    named = [n for n in nodes if n.name and re.search(rf"(?<![\w.]){re.escape(n.name)}\b", text)]
    if not named:
        ops = {a or b for a, b in _NAMED_OP.findall(text)}
        named = [n for n in nodes if n.op_type in ops]
    out: list[Trigger] = []
    for n in named:
        t = node_trigger(model, n)
        t = Trigger(t.op, t.dtype, [])
        if t.dtype is not None and t not in out:
            out.append(t)
    return out


def node_trigger(model: onnx.ModelProto, node: onnx.NodeProto) -> Trigger:
    """``node`` of ``model`` as a trigger: its op, main element type and categorical
    attribute values."""
    g = model.graph
    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in list(g.input) + list(g.value_info) + list(g.output)
    }
    types.update({i.name: i.data_type for i in g.initializer})
    constants = {i.name for i in g.initializer} | {
        t for n in g.node if n.op_type == "Constant" for t in n.output
    }
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    elem = _main_type(node, types, opset)
    valued = sorted(
        x for x in node_features(node, constants, opset) if x.startswith("attr:") and "=" in x
    )
    return Trigger(node.op_type, dt.NAMES.get(elem) if elem else None, valued)


def _main_type(node: onnx.NodeProto, types: dict[str, int], opset: int) -> int | None:
    """The element type of the node's main type variable (``OpInfo.main_type_var``: the one
    generation's (op, type) avoidance acts on; Where's is its X, not its bool condition),
    else of its first typed input or output."""
    info = op_info(node.op_type, opset) if not node.domain else None
    if info is not None and info.main_type_var is not None:
        for formal, k in info.input_pos.items():
            if info.input_type[formal] != info.main_type_var or k >= len(node.input):
                continue
            if types.get(node.input[k]):
                return types[node.input[k]]
        for k, tv in enumerate(info.output_type):
            if tv == info.main_type_var and k < len(node.output) and types.get(node.output[k]):
                return types[node.output[k]]
    return next((types[t] for t in [*node.input, *node.output] if t and types.get(t)), None)


def export(
    campaign_dir: Path,
    bugs: list[dict[str, Any]],
    versions: dict[str, str],
    known_hits: dict[tuple[str, str], int],
    previous: KnownFile | None,
    names: dict[str, str] | None = None,
    follow_ups: dict[str, list[dict[str, Any]]] | None = None,
) -> KnownFile:
    """The known file of a campaign: ``bugs`` (``Store.bugs``, grouped by family, each
    family's trigger from its first reduced bundle; the crash signatures joined to a bug,
    ``Store.follow_ups``, are its family's too: known, they are not filed again), and the
    entries of the file it ran with (``previous``) with ``known_hits`` ((backend, entry
    id) -> hits) added."""
    fams: dict[tuple[str, str], KnownFamily] = {}
    if previous is not None:
        for f in previous.families:
            hits = f.hits + known_hits.get((f.backend, f.id), 0)
            fams[(f.backend, f.family)] = replace(
                f, hits=hits, signatures=list(f.signatures), triggers=list(f.triggers)
            )
    for b in bugs:
        fam = family(b["signature"])
        key = (b["backend"], fam)
        k = fams.get(key)
        if k is None:
            fid = family_id(fam, names)
            k = fams[key] = KnownFamily(fam, fid, b["backend"], b["verdict"], 0, [])
        k.hits += int(b["hits"])
        joined = [u["signature"] for u in (follow_ups or {}).get(b["key"], [])]
        for sig in (b["signature"], *joined):
            if sig not in k.signatures:
                k.signatures.append(sig)
        if b["id"] not in k.bundles:
            k.bundles.append(b["id"])
        t = bundle_trigger(campaign_dir / "bugs" / b["id"], b["signature"])
        if k.trigger is None:
            k.trigger = t
        if t is not None and t not in k.all_triggers():
            k.triggers.append(t)
    merged = {**(previous.versions if previous is not None else {}), **versions}
    return KnownFile(merged, list(fams.values()))


def bundle_trigger(bundle: Path, signature: str) -> Trigger | None:
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
