"""Corpus export in ONNX's backend-test layout, resumable.

    DIR/test_<i>/model.onnx
    DIR/test_<i>/test_data_set_0/input_<k>.pb, output_<k>.pb   (outputs: ONNX Runtime CPU)
    DIR/test_<i>/data.json       (where a float16 tensor is computed, or a float32 output
                                  cancels (``tolerance``): its tolerance)
    DIR/index.json                                             (case -> seed, ops, dtypes, ...)
                                          (``ort_default_fault``: ORT's default session fails it)
    DIR/README.md        (how to run it: the reference, the tolerances, the cases without outputs)

Case folders are named ``test_*`` because ONNX's ``onnx.backend.test.runner.Runner`` loads
only those (``load_model_tests(data_dir=PARENT, kind=DIR's name)``), at rtol 1e-3 and
atol 1e-7 unless the case's ``data.json`` says otherwise. A model that computes in float16
cannot meet 1e-3 relative between two correct runtimes (ONNX Runtime's optimized graph
computes some float16 ops in float32, the reference session does not), so such a case's
``data.json`` carries the float16 tolerance the campaigns' oracle uses. A float32 case
whose output cancels to near zero, where a right answer can fail atol 1e-7, gets one
measured from the case (``tolerance.cancellation_tolerance``); every other case is
compared at the runner's own defaults.

ONNX Runtime runs in a child process (``ort_child``), which also runs each case through
ORT's default session (ORT_ENABLE_ALL): a crash there, or of the reference run, costs the
case, not the corpus, and a case the default session fails is named in the index.

Each case is written into a temporary folder and renamed into place, then appended to
``DIR/.journal.jsonl``; ``index.json`` is rewritten atomically from time to time and at
the end. Rerunning into the same DIR continues where the last run stopped (a killed run
loses at most the case it was writing) and refuses options that differ from the ones the
corpus was started with, and files in DIR that the corpus did not write: a case folder is
journaled as being written before it is renamed into place, so one found without a record
is someone else's and is left alone. A corpus begun with the older ``case_*`` names goes on
with them.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnxfuzz import __version__
from onnxfuzz.errors import UsageError
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.corpus.disputed import disputed_reason
from onnxfuzz.generate.corpus.ort_child import OrtChild
from onnxfuzz.generate.corpus.readme import NAME as README
from onnxfuzz.generate.corpus.readme import corpus_readme
from onnxfuzz.generate.corpus.testdata import write_outputs, write_test
from onnxfuzz.generate.corpus.tolerance import cancellation_tolerance
from onnxfuzz.generate.corpus.validate import (
    all_finite,
    half_step_doubt,
    model_opset,
    run_reference,
)
from onnxfuzz.generate.lang.config import OMITTED, ORT_MAX_OPSET, Config

JOURNAL = ".journal.jsonl"
INDEX = "index.json"
PREFIX = "test_"  # what onnx.backend.test.runner requires of a case's folder name
LEGACY_PREFIX = "case_"  # corpora written before: continued under their own names
TOLERANCE_FILE = "data.json"  # per-case rtol/atol, read by onnx.backend.test.loader
CAMPAIGN_DB = "campaign.db"  # what a folder of `onnxfuzz fuzz` holds (onnxfuzz.run.campaign)
# atol, rtol for a model that computes in float16: judge.oracle's float16 default, the
# field notes' 1e-2..2e-2 (CPU runtimes compute some float16 ops in float32, ORT #22866)
FLOAT16_TOLERANCE = {"atol": 1e-2, "rtol": 2e-2}

# option name in index.json -> the flag that sets it (for error messages; a record key
# without a flag, such as `avoid`, is named as it is)
FLAGS = {
    "seed": "--seed",
    "min_nodes": "--nodes",
    "max_nodes": "--nodes",
    "opset": "--opset",
    "ops": "--ops",
    "exclude_ops": "--exclude-ops",
    "dtypes": "--dtypes",
    "picking_rate": "--picking-rate",
    "connectivity": "--connectivity",
    "block_rate": "--blocks",
    "max_rank": "--max-rank",
    "max_dim": "--max-dim",
    "reference": "--no-reference",
    "weights_as_initializers": "--weights-as-inputs",
    "op_mix": "--op-mix",
    "wide_values": "--wide-values",
    "domains": "--domains",
    "opset_mix": "--opset",
}


def options_record(cfg: Config, seed: int, reference: bool) -> dict[str, Any]:
    return {"seed": seed, **cfg.to_record(), "reference": reference}


@dataclass
class Summary:
    written: int = 0
    total: int = 0
    skipped_existing: int = 0
    non_finite: int = 0
    reference_errors: int = 0
    seconds: float = 0.0
    op_types: set[str] = field(default_factory=set)


def computes_in_float16(model: onnx.ModelProto) -> bool:
    """Whether any tensor of ``model`` (an input, output, weight or intermediate, in any
    subgraph) is float16 or bfloat16: a model whose values are rounded to 11 or 8 bits."""
    half = (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)

    def graph_has(g: onnx.GraphProto) -> bool:
        infos = [*g.input, *g.output, *g.value_info]
        if any(v.type.tensor_type.elem_type in half for v in infos):
            return True
        if any(t.data_type in half for t in g.initializer):
            return True
        for node in g.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in half:
                    return True
                if a.type == onnx.AttributeProto.INT and a.name in ("to", "dtype") and a.i in half:
                    return True  # a Cast, EyeLike, ... into half precision
                subgraphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
                if any(graph_has(sub) for sub in subgraphs):
                    return True
        return False

    if graph_has(model.graph):
        return True  # inference only adds types: the inferred model has it too
    if _types_settled(model.graph):
        return False  # inference would add no element type: nothing more to find
    inferred = onnx.shape_inference.infer_shapes(model)
    return graph_has(inferred.graph)


def _types_settled(g: onnx.GraphProto) -> bool:
    """Whether ONNX shape inference has no element type to add to ``g`` or its subgraphs:
    every input, output and node output there is declared (a tensor's with its element
    type set). The generator declares every intermediate, so its models need no inference
    pass to tell whether they compute in float16."""
    declared = set()
    for v in (*g.input, *g.output, *g.value_info):
        which = v.type.WhichOneof("value")
        if which is None or (which == "tensor_type" and not v.type.tensor_type.elem_type):
            return False
        declared.add(v.name)
    for node in g.node:
        if any(o and o not in declared for o in node.output):
            return False
        for a in node.attribute:
            subgraphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            if not all(_types_settled(sub) for sub in subgraphs):
                return False
    return True


def _reference(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], ort: OrtChild | None
) -> tuple[dict[str, np.ndarray], str | None]:
    """The case's expected outputs (``run_reference``) and how ONNX Runtime's default
    session fails the model (None: it runs it, or was not tried). With ``ort``, ONNX
    Runtime runs in that child process (``ort_child``: a crash costs the case its outputs,
    not the corpus); without, or above the opsets ORT runs, in this one."""
    if ort is None or model_opset(model) > ORT_MAX_OPSET:
        return run_reference(model, feeds), None
    got = ort.run(model.SerializeToString(), feeds)
    if got.outputs is None:
        raise RuntimeError(got.error)
    return got.outputs, got.default_fault


def write_case(
    folder: Path, case: Case, reference: bool, ort: OrtChild | None = None
) -> dict[str, Any]:
    """Write one case's files into ``folder`` (which must not exist yet); ``ort``: where
    ONNX Runtime runs (``_reference``)."""
    feeds = case.make_inputs(case.seed)
    folder.mkdir()  # here, so write_test makes its data folder with one call
    data = write_test(folder, case.model, feeds, [name for name, _, _ in case.inputs])
    half = computes_in_float16(case.model)
    if half:
        (folder / TOLERANCE_FILE).write_text(json.dumps(FLOAT16_TOLERANCE))
    entry: dict[str, Any] = {
        "seed": case.seed,
        "ops": case.ops,
        "dtypes": case.dtypes,
        "nodes": len(case.ops),
        "opset": case.model.opset_import[0].version,
    }
    if reference:
        dispute = disputed_reason(case.model)
        if dispute is not None:  # either reading's outputs would fail the other's backends
            entry["reference_error"] = dispute
            return entry
        try:
            outs, default_fault = _reference(case.model, feeds, ort)
        except Exception as e:  # noqa: BLE001 - recorded, never fatal to the corpus
            entry["reference_error"] = str(e).splitlines()[0][:300]
            return entry
        if default_fault is not None:  # valid model, ORT's fault: a runner on it dies here
            entry["ort_default_fault"] = default_fault
        if half:  # a flipped comparison no tolerance absorbs: none rather than wrong ones
            tol = (FLOAT16_TOLERANCE["atol"], FLOAT16_TOLERANCE["rtol"])
            doubt = half_step_doubt(case.model, feeds, outs, tol)
            if doubt is not None:
                entry["reference_error"] = doubt
                return entry
        else:  # float32: where rounding measured on the way exceeds the defaults
            measured = cancellation_tolerance(case.model, feeds, outs)
            if measured is not None:
                (folder / TOLERANCE_FILE).write_text(json.dumps(measured))
                entry["cancellation_atol"] = measured["atol"]
        write_outputs(data, case.model, outs)
        entry["finite"] = all_finite(outs)
    return entry


def _load_state(
    out: Path, options: dict[str, Any]
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """The cases written so far (name -> index entry), and the names journaled as being
    written (renamed into place or not: this corpus's own, to redo)."""
    cases: dict[str, dict[str, Any]] = {}
    writing: set[str] = set()
    index = out / INDEX
    if index.exists():
        try:
            data = json.loads(index.read_text())
        except json.JSONDecodeError as e:
            raise UsageError(
                f"--out: {index} is not valid JSON ({e}); move it away to "
                "rebuild the index from the journal"
            ) from None
        if not isinstance(data, dict) or "options" not in data or "cases" not in data:
            raise UsageError(
                f"--out: {index} was not written by onnxfuzz generate; move it away or "
                "choose another --out"
            )
        old = dict(data.get("options", {}))
        if "nodes" in old:  # written before options were Config records: "MIN:MAX"
            lo, _, hi = str(old.pop("nodes")).partition(":")
            old.update(min_nodes=int(lo), max_nodes=int(hi or lo))
        for key in [*options, *(k for k in old if k not in options)]:
            # A key one record leaves out means what Config.OMITTED says (a corpus made
            # without wide values is not continued with them, nor the other way round);
            # any other option one of the two records lacks: as lenient as before.
            if key not in OMITTED and (key not in old or key not in options):
                continue
            was, now = old.get(key, OMITTED.get(key)), options.get(key, OMITTED.get(key))
            if was != now:
                raise UsageError(
                    f"{FLAGS.get(key, key)}: {out} was generated with {key}={was!r}, not "
                    f"{now!r}; pass the same options to continue it, or choose another --out"
                )
        cases.update(data.get("cases", {}))
    journal = out / JOURNAL
    if journal.exists():
        text = journal.read_text()
        if text and not text.endswith("\n"):  # cut short by a kill: drop the partial line
            text = text[: text.rfind("\n") + 1]
            journal.write_text(text)
        for line in text.splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a kill: that case is redone
            if "entry" in rec:
                cases[rec["case"]] = rec["entry"]
            else:  # {"case": ..., "writing": true}: about to be renamed into place
                writing.add(rec["case"])
    return cases, writing


def _case_names(cases: dict[str, dict[str, Any]], count: int) -> list[str]:
    """The folder name of each case index: ``test_<i>``, or ``case_<i>`` in a corpus
    begun with those."""
    legacy = any(name.startswith(LEGACY_PREFIX) for name in cases)
    prefix = LEGACY_PREFIX if legacy else PREFIX
    return [f"{prefix}{i:06d}" for i in range(count)]


def _refuse_foreign(
    out: Path, names: list[str], cases: dict[str, dict[str, Any]], writing: set[str]
) -> dict[str, bool]:
    """Stop before writing anything if a case's path is taken by something this corpus did
    not write (its own cases are in the index or the journal). Returns what is in ``out``
    (name -> whether it is a folder): one directory read instead of a look-up a case."""
    present = {e.name: e.is_dir() for e in os.scandir(out)}
    foreign = [
        out / name
        for name in names
        if name in present and name not in cases and name not in writing
    ]
    if foreign:
        more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
        raise UsageError(
            f"--out: {foreign[0]}{more} is already there and was not written by this corpus; "
            "move it away or choose another --out"
        )
    return present


# case name -> (its index entry, that entry's text in index.json): each entry is encoded
# once, not at every rewrite (json's indenting encoder is pure Python; a long run rewrites
# the whole index every 10 s)
EncodedCases = dict[str, tuple[dict[str, Any], str]]


def _case_text(name: str, entry: dict[str, Any]) -> str:
    """``"name": entry`` as json.dumps(index, indent=1) writes it inside ``"cases"``: the
    entry's own indented text, two levels deeper (a string's newlines are escaped, so every
    newline is the encoder's)."""
    return f"{json.dumps(name)}: " + json.dumps(entry, indent=1).replace("\n", "\n  ")


def index_text(
    options: dict[str, Any], cases: dict[str, dict[str, Any]], encoded: EncodedCases
) -> str:
    """``json.dumps({"onnxfuzz": ..., "options": options, "cases": cases sorted by name},
    indent=1)``, the same text, with each case's part taken from ``encoded`` where it holds
    that very entry (and put there where it does not)."""
    parts = []
    for name in sorted(cases):
        entry = cases[name]
        known = encoded.get(name)
        if known is None or known[0] is not entry:
            known = encoded[name] = (entry, _case_text(name, entry))
        parts.append(known[1])
    head = json.dumps({"onnxfuzz": __version__, "options": options}, indent=1)
    body = "{\n  " + ",\n  ".join(parts) + "\n }" if parts else "{}"
    return head.removesuffix("\n}") + ',\n "cases": ' + body + "\n}"


def _write_index(
    out: Path,
    options: dict[str, Any],
    cases: dict[str, dict[str, Any]],
    encoded: EncodedCases | None = None,
) -> None:
    tmp = out / (INDEX + ".tmp")
    tmp.write_text(index_text(options, cases, {} if encoded is None else encoded))
    os.replace(tmp, out / INDEX)


def corpus_mark(folder: Path) -> Path | None:
    """The file that shows ``folder`` holds a corpus of ``onnxfuzz generate``: its index,
    or the journal of a run stopped before writing one; None where neither is there."""
    journal = folder / JOURNAL
    if journal.is_file():
        return journal
    index = folder / INDEX
    try:
        data = json.loads(index.read_text())
    except (OSError, ValueError):  # none, or not JSON: not our index
        return None
    return index if isinstance(data, dict) and {"options", "cases"} <= data.keys() else None


def export_corpus(
    out: Path,
    cfg: Config,
    count: int,
    seed: int,
    reference: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Summary:
    if (out / CAMPAIGN_DB).exists():
        # cases beside a campaign's bundles and database: neither tool reads the mix
        raise UsageError(
            f"--out: {out} holds a fuzz campaign ({CAMPAIGN_DB}); a corpus goes in a "
            "folder of its own: choose another --out"
        )
    out.mkdir(parents=True, exist_ok=True)
    options = options_record(cfg, seed, reference)
    cases, writing = _load_state(out, options)
    names = _case_names(cases, count)
    present = _refuse_foreign(out, names, cases, writing)
    gen = Generator(cfg)
    for prefix in (PREFIX, LEGACY_PREFIX):  # cases a killed run was writing
        for stale in out.glob(f".tmp_{prefix}*"):
            shutil.rmtree(stale)
    summary = Summary()
    encoded: EncodedCases = {}
    # The options are recorded before the first case: the journal holds none, and a run
    # stopped before its first index write (Ctrl-C, a kill) let a rerun with other
    # options go on into the same corpus.
    _write_index(out, options, cases, encoded)
    start = time.perf_counter()
    last_index = start
    with open(out / JOURNAL, "a") as journal, OrtChild() as ort:
        for i, name in enumerate(names):
            if name in cases and present.get(name):
                summary.skipped_existing += 1
                if progress:
                    progress(i + 1, count)
                continue
            tmp = out / f".tmp_{name}"
            if name in present:  # ours (checked above): renamed, not journaled
                shutil.rmtree(out / name)
            case = gen.generate(seed + i)
            entry = write_case(tmp, case, reference, ort)
            journal.write(json.dumps({"case": name, "writing": True}) + "\n")
            journal.flush()
            os.replace(tmp, out / name)
            journal.write(json.dumps({"case": name, "entry": entry}) + "\n")
            journal.flush()
            cases[name] = entry
            summary.written += 1
            summary.op_types.update(case.ops)
            if progress:
                progress(i + 1, count)
            now = time.perf_counter()
            if now - last_index > 10:
                _write_index(out, options, cases, encoded)
                last_index = now
    _write_index(out, options, cases, encoded)
    halves = sum(
        "cancellation_atol" not in e and (out / name / TOLERANCE_FILE).exists()
        for name, e in cases.items()
    )
    (out / README).write_text(corpus_readme(options, cases, halves))
    (out / JOURNAL).unlink(missing_ok=True)
    summary.seconds = time.perf_counter() - start
    summary.total = len(cases)
    summary.non_finite = sum(e.get("finite") is False for e in cases.values())
    summary.reference_errors = sum("reference_error" in e for e in cases.values())
    return summary
