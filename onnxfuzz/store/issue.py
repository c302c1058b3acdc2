"""A bundle as a bug report to paste: ``DIR/bugs/<id>/issue.md``, in the form of the
tracker of the backend at fault (ONNX Runtime's, TVM's, onnx2torch's, ONNX's, or a
generic one for an ad hoc adapter).

Everything comes from the bundle itself (meta.json, log.txt, the reduced model and its
inputs), so ``onnxfuzz triage`` can write it again for any bundle, old ones included.
"""

from __future__ import annotations

import itertools
import json
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.generate.corpus.testdata import DATA_SET
from onnxfuzz.judge.second_opinion import sentence

MAX_MODEL_TEXT = 6000  # characters of the model as text; a larger one is attached as a file
MAX_LOG_LINES = 25


def tracker(label: str) -> str:
    """Which tracker a backend's bugs go to, from its label."""
    try:
        name = parse_backend(label).target
    except BackendError:
        return "generic"
    if ":" in name:  # an ad hoc adapter (file.py:Class, pkg.mod:Class): its own project
        return "generic"
    if name.startswith("ort"):
        return "onnxruntime"
    if name.startswith("tvm"):
        return "tvm"
    if name.startswith("torch"):
        return "onnx2torch"
    if name == "onnx-reference":
        return "onnx"
    return "generic"


def issue_markdown(bundle: Path) -> str:
    meta = json.loads((bundle / "meta.json").read_text())
    folder = bundle / "reduced" if (bundle / "reduced" / "model.onnx").exists() else bundle
    model = onnx.load(str(folder / "model.onnx"))
    name = meta.get("name") or meta["backend"]
    ops = meta.get("reduced_ops") or meta.get("ops") or []
    stage = meta.get("stage") or "run"
    what = {
        "crash": f"crashes while {'compiling' if stage == 'compile' else 'running'}",
        "timeout": f"hangs while {'compiling' if stage == 'compile' else 'running'}",
        "mismatch": "returns wrong results",
    }.get(meta["verdict"], f"fails ({meta['verdict']})")
    reference = meta.get("reference")
    blamed = meta.get("suspect") is not None or meta["verdict"] != "mismatch"
    if not blamed:  # no majority: the two disagree, and either may be wrong
        what = f"and {reference} disagree"
    title = f"{name} {what} on a {len(ops)}-node model: {' -> '.join(ops) or '-'}"
    log = (bundle / "log.txt").read_text().splitlines() if (bundle / "log.txt").exists() else []
    # beside the reduced model, what the reduced model's run said (the original's
    # message names its own shapes, element counts and values)
    said = meta.get("reduced_message") if folder != bundle else None
    actual = _actual(log, said) or meta.get("signature", "")
    if meta["verdict"] == "mismatch":
        tol = meta.get("tolerance", {})
        expected = (
            f"The outputs of {reference} (the reference in this comparison) within the "
            f"per-type tolerances (atol, rtol) {tol}; the model's declared output types and "
            "shapes."
        )
    elif reference and reference != meta["backend"]:
        expected = f"The model compiles and runs, as it does in {reference}."
    else:  # the reference itself failed: no backend to point to
        expected = (
            "The model compiles and runs: it is valid ONNX (the ONNX checker with full "
            "shape inference accepts it)."
        )
    repro = f"cd {folder.name if folder != bundle else '.'} && python repro.py"
    text = _model_text(model)
    sections = {
        "summary": f"{name} {what} on this model (found by onnxfuzz, reduced to "
        f"{len(ops)} node{'s' if len(ops) != 1 else ''})."
        + (
            ""
            if blamed
            else f" No other backend in the comparison decided which of {name} and "
            f"{reference} is wrong. {_opinion(meta, name)}Check the values against the "
            "operator's definition before filing."
        ),
        "repro": "\n".join(
            [
                "```",
                f"{repro}    # exit 1 and REPRODUCES while the bug is there, 0 and FIXED after",
                "```",
                "The model (`model.onnx` beside `repro.py`), as ONNX text:",
                "```",
                text,
                "```",
                "Inputs (`test_data_set_0/input_*.pb`):",
                "",
                _inputs_table(folder),
            ]
        ),
        "expected": expected,
        "actual": f"```\n{actual}\n```",
        "versions": _versions(meta),
    }
    return _FORMS[tracker(meta["backend"])](title, sections)


def write_issue(bundle: Path) -> Path:
    path = bundle / "issue.md"
    path.write_text(issue_markdown(bundle))
    return path


# --- parts -----------------------------------------------------------------------------
def _opinion(meta: dict[str, Any], name: str) -> str:
    """The second opinion on a no-majority mismatch (``judge.second_opinion``), if any."""
    opinion = meta.get("second_opinion")
    if not opinion:
        return ""
    names = {meta["backend"]: name}
    return sentence(opinion, meta["backend"], meta.get("reference", ""), names) + " "


def _actual(log: list[str], message_text: str | None = None) -> str:
    """log.txt's message (after its title line; ``message_text`` in its place where
    given), and the crash site's frames where the evidence has them; not the adapter's
    Python traceback (onnxfuzz's own code)."""
    if message_text:
        message = [*message_text.splitlines(), ""]
    else:
        message = list(itertools.takewhile(lambda line: not line.startswith("--- "), log[2:]))
    site: list[str] = []
    for i, line in enumerate(log):
        if line.startswith("crash site"):
            for frame in log[i : i + 8]:
                if not frame.strip() or frame.startswith("---"):
                    break
                site.append(frame)
            break
    return "\n".join((message + ([""] if site else []) + site)[:MAX_LOG_LINES]).strip()


def _model_text(model: onnx.ModelProto) -> str:
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.metadata_props[:]  # onnxfuzz's own notes: noise in a report
    text = onnx.printer.to_text(bare)
    if len(text) > MAX_MODEL_TEXT:
        return text[:MAX_MODEL_TEXT] + "\n... (truncated: see model.onnx)"
    return text


def _inputs_table(folder: Path) -> str:
    rows = ["| input | type | shape | values |", "|---|---|---|---|"]
    for path in sorted((folder / DATA_SET).glob("input_*.pb")):
        t = onnx.TensorProto()
        t.ParseFromString(path.read_bytes())
        a = numpy_helper.to_array(t)
        if a.size and a.dtype.kind in "biuf":
            values = f"[{np.min(a):.6g}, {np.max(a):.6g}]"
            if a.size <= 8:
                values = np.array2string(a.ravel(), precision=6, separator=", ")
        else:
            values = "-"
        rows.append(f"| {t.name} | {a.dtype} | {list(a.shape)} | {values} |")
    return "\n".join(rows) if len(rows) > 2 else "(none)"


def _versions(meta: dict[str, Any]) -> str:
    lines = [f"- {k}: {v}" for k, v in sorted(meta.get("versions", {}).items())]
    lines += [
        f"- onnx: {onnx.__version__}, numpy: {np.__version__}",
        f"- Python {sys.version.split()[0]}, {platform.platform()}, {platform.machine()}",
        f"- onnxfuzz {meta.get('onnxfuzz', '?')}, opset {meta.get('opset', '?')}, "
        f"bug {meta['id']}, seed {meta.get('seed')}",
    ]
    return "\n".join(lines)


def _form(title: str, headings: list[tuple[str, str]], s: dict[str, str]) -> str:
    out = [f"# {title}", ""]
    if "summary" not in {key for _, key in headings}:
        # a form without a summary field (TVM's) still says what the finding is, and
        # that no one is accused where no majority decided
        out += [s["summary"], ""]
    for heading, key in headings:
        out += [f"### {heading}", "", s.get(key, key), ""]  # a key, or literal text
    return "\n".join(out)


_FORMS = {
    # github.com/microsoft/onnxruntime: the "Bug report" issue form's fields
    "onnxruntime": lambda t, s: _form(
        t,
        [
            ("Describe the issue", "summary"),
            ("To reproduce", "repro"),
            ("Expected behavior", "expected"),
            ("Actual behavior", "actual"),
            ("Urgency", "Found by fuzzing; no production deadline."),
            ("Platform / OS / versions", "versions"),
            ("ONNX Runtime API", "Python"),
            ("Execution Provider", "Default CPU"),
        ],
        s,
    ),
    # github.com/apache/tvm: the bug report template
    "tvm": lambda t, s: _form(
        t,
        [
            ("Expected behavior", "expected"),
            ("Actual behavior", "actual"),
            ("Environment", "versions"),
            ("Steps to reproduce", "repro"),
            ("Triage", "* frontend:onnx"),
        ],
        s,
    ),
    # github.com/ENOT-AutoDL/onnx2torch (the torch adapter converts with it)
    "onnx2torch": lambda t, s: _form(
        t,
        [
            ("Describe the bug", "summary"),
            ("To Reproduce", "repro"),
            ("Expected behavior", "expected"),
            ("Actual behavior", "actual"),
            ("Environment", "versions"),
        ],
        s,
    ),
    # github.com/onnx/onnx: the bug report template (the reference evaluator lives there)
    "onnx": lambda t, s: _form(
        t,
        [
            ("Bug Report", "summary"),
            ("Describe the bug", "actual"),
            ("System information", "versions"),
            ("Reproduction instructions", "repro"),
            ("Expected behavior", "expected"),
        ],
        s,
    ),
    "generic": lambda t, s: _form(
        t,
        [
            ("Summary", "summary"),
            ("Steps to reproduce", "repro"),
            ("Expected behavior", "expected"),
            ("Actual behavior", "actual"),
            ("Versions", "versions"),
        ],
        s,
    ),
}
