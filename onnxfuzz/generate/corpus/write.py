"""Corpus export in ONNX's backend-test layout, resumable.

    DIR/<case>/model.onnx
    DIR/<case>/test_data_set_0/input_<k>.pb, output_<k>.pb   (outputs: ONNX Runtime CPU)
    DIR/index.json                                           (case -> seed, ops, dtypes, ...)

Each case is written into a temporary folder and renamed into place, then appended to
``DIR/.journal.jsonl``; ``index.json`` is rewritten atomically from time to time and at
the end. Rerunning into the same DIR continues where the last run stopped (a killed run
loses at most the case it was writing) and refuses options that differ from the ones the
corpus was started with.
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

from onnxfuzz import __version__
from onnxfuzz.errors import UsageError
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.corpus.testdata import write_outputs, write_test
from onnxfuzz.generate.corpus.validate import all_finite, run_reference
from onnxfuzz.generate.lang.config import Config

JOURNAL = ".journal.jsonl"
INDEX = "index.json"

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


def write_case(folder: Path, case: Case, reference: bool) -> dict[str, Any]:
    """Write one case's files into ``folder`` (which must not exist yet)."""
    feeds = case.make_inputs(case.seed)
    data = write_test(folder, case.model, feeds, [name for name, _, _ in case.inputs])
    entry: dict[str, Any] = {
        "seed": case.seed,
        "ops": case.ops,
        "dtypes": case.dtypes,
        "nodes": len(case.ops),
        "opset": case.model.opset_import[0].version,
    }
    if reference:
        try:
            outs = run_reference(case.model, feeds)
        except Exception as e:  # noqa: BLE001 - recorded, never fatal to the corpus
            entry["reference_error"] = str(e).splitlines()[0][:300]
            return entry
        write_outputs(data, case.model, outs)
        entry["finite"] = all_finite(outs)
    return entry


def _load_state(out: Path, options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = {}
    index = out / INDEX
    if index.exists():
        try:
            data = json.loads(index.read_text())
        except json.JSONDecodeError as e:
            raise UsageError(
                f"--out: {index} is not valid JSON ({e}); move it away to "
                "rebuild the index from the journal"
            ) from None
        old = dict(data.get("options", {}))
        if "nodes" in old:  # written before options were Config records: "MIN:MAX"
            lo, _, hi = str(old.pop("nodes")).partition(":")
            old.update(min_nodes=int(lo), max_nodes=int(hi or lo))
        for key, value in options.items():
            if key in old and old[key] != value:
                raise UsageError(
                    f"{FLAGS.get(key, key)}: {out} was generated with {key}={old[key]!r}, not "
                    f"{value!r}; pass the same options to continue it, or choose another --out"
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
            cases[rec["case"]] = rec["entry"]
    return cases


def _write_index(out: Path, options: dict[str, Any], cases: dict[str, dict[str, Any]]) -> None:
    tmp = out / (INDEX + ".tmp")
    tmp.write_text(
        json.dumps(
            {"onnxfuzz": __version__, "options": options, "cases": dict(sorted(cases.items()))},
            indent=1,
        )
    )
    os.replace(tmp, out / INDEX)


def export_corpus(
    out: Path,
    cfg: Config,
    count: int,
    seed: int,
    reference: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Summary:
    out.mkdir(parents=True, exist_ok=True)
    options = options_record(cfg, seed, reference)
    cases = _load_state(out, options)
    gen = Generator(cfg)
    for stale in out.glob(".tmp_case_*"):  # cases a killed run was writing
        shutil.rmtree(stale)
    summary = Summary()
    start = time.perf_counter()
    last_index = start
    with open(out / JOURNAL, "a") as journal:
        for i in range(count):
            name = f"case_{i:06d}"
            if name in cases and (out / name).is_dir():
                summary.skipped_existing += 1
                if progress:
                    progress(i + 1, count)
                continue
            tmp = out / f".tmp_{name}"
            if (out / name).exists():
                shutil.rmtree(out / name)  # written but not journaled: redo it
            case = gen.generate(seed + i)
            entry = write_case(tmp, case, reference)
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
                _write_index(out, options, cases)
                last_index = now
    _write_index(out, options, cases)
    (out / JOURNAL).unlink(missing_ok=True)
    summary.seconds = time.perf_counter() - start
    summary.total = len(cases)
    summary.non_finite = sum(e.get("finite") is False for e in cases.values())
    summary.reference_errors = sum("reference_error" in e for e in cases.values())
    return summary
