"""A bundle as a bug report to paste: ``DIR/bugs/<id>/issue.md``, in the form of the
tracker of the backend at fault (ONNX Runtime's, TVM's, onnx2torch's, ONNX's, or a
generic one for an ad hoc adapter).

Everything comes from the bundle itself (meta.json, log.txt, the reduced model and its
inputs), so ``onnxfuzz triage`` can write it again for any bundle, old ones included.
"""

from __future__ import annotations

import functools
import importlib.util
import itertools
import json
import platform
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.generate.corpus.testdata import DATA_SET
from onnxfuzz.judge.oracle import OracleConfig, Verdict, compare, outside
from onnxfuzz.judge.second_opinion import as_reported, sentence, undecided
from onnxfuzz.store.plain_repro import NAME as PLAIN
from onnxfuzz.store.plain_repro import exit_note
from onnxfuzz.store.readable import (
    doc_sentence,
    model_text,
    numpy_expected,
    short_names,
    value_errors,
    what_went_wrong,
)
from onnxfuzz.store.trigger import neighbours_text
from onnxfuzz.store.upstream import load_rows, markdown, matches

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
    # the evaluator's second opinion may turn the report to the comparison's reference
    meta = as_reported(json.loads((bundle / "meta.json").read_text()))
    folder = bundle / "reduced" if (bundle / "reduced" / "model.onnx").exists() else bundle
    model = onnx.load(str(folder / "model.onnx"))
    name = meta.get("name") or meta["backend"]
    # a reduced model of no nodes is one (a fault whatever the model), not the original
    reduced_ops = meta.get("reduced_ops") if folder != bundle else None
    ops = reduced_ops if reduced_ops is not None else meta.get("ops") or []
    what = what_went_wrong(meta)
    reference = meta.get("reference_name") or meta.get("reference")
    sided = meta.get("evaluator_sides_with")
    # a backend at odds with itself needs no majority: its second run, or its caller's inputs
    own = meta.get("stage") == "rerun" or meta.get("kind") == "input"
    blamed = meta.get("suspect") is not None or meta["verdict"] != "mismatch" or own
    if not blamed:  # no majority: the two disagree, and either may be wrong
        what = f"and {reference} disagree"
    # body nodes count: an If whose branches hold six nodes is no 1-node model
    nodes = max(len(ops), (meta.get("reduction") or {}).get("after", {}).get("nodes", 0))
    inner = f"{nodes - len(ops)} of them in subgraphs" if nodes > len(ops) else ""
    culprit = meta.get("culprit") or {}
    # Nothing decided which side is wrong (``second_opinion.undecided``): the culprit's
    # stage is no claim (ORT's right NonMaxSuppression against TVM's was titled "[kernel]",
    # "File with ONNX Runtime", where a documented fault kept the evaluator from a say)
    neither = undecided(meta)
    subject = _subject(name, meta, culprit) if blamed and not neither else name
    title = (
        f"{subject} {what} on a {nodes}-node model: {' -> '.join(ops)}"
        if nodes
        else f"{subject} {what} on a model of no nodes (its outputs are its inputs)"
    )
    title += f" ({inner})" if inner else ""
    if culprit.get("stage") not in (None, "", "unknown") and not neither:
        where = culprit["stage"] + (f": {culprit['component']}" if culprit.get("component") else "")
        title += f" [{where}]"
    follows = meta.get("follows")
    if follows and follows.get("op"):  # the root cause comes first (``_follows_text``)
        kind = _KIND_WORDS.get(follows.get("kind", ""), "result")
        title += f", after {follows['op']}'s wrong {kind}"
    if sided:
        title += f"; the ONNX reference evaluator sides with {reference}"
    log = (bundle / "log.txt").read_text().splitlines() if (bundle / "log.txt").exists() else []
    plain = folder / PLAIN
    # beside the reduced model, what the reduced model's run said (the original's
    # message names its own shapes, element counts and values)
    said = meta.get("reduced_message") if folder != bundle else None
    actual = _actual(log, said) or meta.get("signature", "")
    if meta["verdict"] == "mismatch":
        tol = meta.get("tolerance", {})
        whose = (
            f"{reference}, which the ONNX reference evaluator agrees with (the comparison "
            f"ran {name} as its reference)"
            if sided
            else f"{reference} (the reference in this comparison)"
        )
        expected = (
            f"The outputs of {whose} within the "
            f"per-type tolerances (atol, rtol) {tol}; the model's declared output types and "
            "shapes."
        )
        expected = _expected_values(plain, reference) or expected
        expected += _expected_sources(folder, model, meta)
        if meta.get("kind") == "input":
            expected = (
                "Running the model leaves the caller's input arrays as they were (the model's "
                "outputs are new arrays; a kernel may work in place only on its own buffers)."
            )
        elif meta.get("stage") == "rerun":
            expected = (
                "The same compiled model run again on the same inputs gives the same "
                f"outputs: its first run's, which agree with {reference}. " + expected
            )
    elif meta.get("reference") and meta["reference"] != meta["backend"]:
        expected = f"The model compiles and runs, as it does in {reference}."
        # the values it should give; no schema sentence: a crash violates no one property
        expected += _expected_sources(folder, model, {**meta, "kind": "crash"})
    else:  # the reference itself failed: no backend to point to
        expected = (
            "The model compiles and runs: it is valid ONNX (the ONNX checker with full "
            "shape inference accepts it)."
        ) + _expected_sources(folder, model, {**meta, "kind": "crash"})
    repro = f"cd {folder.name} && python repro.py" if folder != bundle else "python repro.py"
    text, renamed = model_text(model)
    whose_names = "original" if meta.get("reduced_from") else "generator's"
    if len(text) > MAX_MODEL_TEXT:
        text = text[:MAX_MODEL_TEXT] + "\n... (truncated: see model.onnx)"
    reduced_here = folder != bundle or bool(meta.get("reduced_from"))
    found = _found_text(meta, folder != bundle, nodes, inner)
    sections = {
        "summary": f"{subject} {what} on this model ({found})."
        + (_stopped_text(meta, nodes) if reduced_here else "")
        + (
            ""
            if blamed
            else f" No other backend in the comparison decided which of {name} and "
            f"{reference} is wrong. {_opinion(meta, name)}Check the values against the "
            "operator's definition before filing."
        )
        + _reproducibility(meta)
        + (
            f" If {name} is the wrong one (nothing here decided it):{_culprit_text(culprit)}"
            if neither and _culprit_text(culprit)
            else _culprit_text(culprit)
        )
        + _follows_text(meta, renamed)
        + _follow_ups_text(meta)
        + _upstream_text(bundle, meta, model),
        "repro": "\n".join(
            [
                *_plain_text(plain, folder != bundle, meta),
                "onnxfuzz's own check (the same failure signature, the backend sandboxed):",
                "```",
                f"{repro}    # exit 1 and REPRODUCES while the bug is there, 0 and FIXED after",
                "```",
                "The model (`model.onnx` beside `repro.py`), as ONNX text"
                + (
                    " (tensors renamed x, t1, ..., y for reading; model.onnx keeps the"
                    f" {whose_names} names):"
                    if renamed
                    else ":"
                ),
                "```",
                text,
                "```",
                "Inputs (`test_data_set_0/input_*.pb`):",
                "",
                _inputs_table(folder, renamed),
                *_neighbours(meta, renamed, f"{reference} and {name}"),
            ]
        ),
        "expected": expected,
        "actual": (
            f'As onnxfuzz compared them, {reference} against {name} ("reference" below '
            f"is {name}):\n\n"
            if sided
            else ""
        )
        + f"```\n{actual}\n```"
        + _names_said(actual, renamed)
        + _side_by_side(folder, meta, model)
        + _value_errors(bundle, meta),
        "triage": _tvm_triage(culprit),
        "versions": _versions(meta),
    }
    form = tracker(meta["backend"])
    if form == "onnx2torch" and culprit.get("project") in ("torch", "torch-compile"):
        form = "pytorch"  # torch eager fails the same way on the same tensors
    return _FORMS[form](title, sections)


def write_issue(bundle: Path) -> Path:
    path = bundle / "issue.md"
    path.write_text(issue_markdown(bundle))
    return path


# --- parts -----------------------------------------------------------------------------
def _subject(name: str, meta: dict[str, Any], culprit: dict[str, Any]) -> str:
    """Who fails, as the project filed with sees it: a torch bundle whose culprit is
    onnx2torch's conversion is about the model onnx2torch made ("torch returns ..." was
    the title of onnx2torch issues, 23 of an audit's 25 torch root causes)."""
    if culprit.get("project") == "onnx2torch" and tracker(meta["backend"]) == "onnx2torch":
        made = "onnx2torch's converted model"
        return made if name == "torch" else f"{made} ({name})"
    return name


def _found_text(meta: dict[str, Any], reduced: bool, nodes: int, inner: str) -> str:
    """How the model shown came to be: reduced, or not and why (a report that said
    "reduced to 8 nodes" of a model nothing reduced would send its reader looking for a
    smaller one that does not exist, or trust a size that was never minimized)."""
    size = f"{nodes} node{'s' if nodes != 1 else ''}{', ' + inner if inner else ''}"
    if meta.get("reduced_from"):  # `onnxfuzz reduce` of a model from elsewhere
        before = meta.get("reduced_from_nodes")
        if before == nodes:
            return f"`{meta['reduced_from']}` as it is, {size}: onnxfuzz found no smaller model"
        return f"reduced by onnxfuzz from `{meta['reduced_from']}`" + (
            f", {before} nodes, to {size}" if before else f" to {size}"
        )
    if reduced:
        return f"found by onnxfuzz, reduced to {size}"
    failed = meta.get("reduction_failed")
    why = (
        (f"its reduction failed ({failed})" if failed else "")
        or meta.get("reduction_dropped")
        or meta.get("unreduced")
        or "no reduction was recorded"
    )
    return f"found by onnxfuzz; not reduced, the model as generated, {size}: {why}"


def _stopped_text(meta: dict[str, Any], nodes: int) -> str:
    """That the reduction spent its time budget with nodes left: a smaller model may show
    the bug ("" where it reached its end, or one node is left)."""
    red = meta.get("reduction") or {}
    if nodes < 2 or red.get("fixed_point", True):
        return ""
    return (
        f" The reduction spent its time budget ({red.get('backend_runs', '?')} backend runs "
        f"in {red.get('seconds', 0):.0f} s) before trying every smaller model: a smaller one "
        "may show the bug too."
    )


def _reproducibility(meta: dict[str, Any]) -> str:
    """How the finding reproduced in fresh processes (``onnxfuzz.run.confirm``): " Reproduced
    3 of 5 runs ...", or that it depends on an earlier model; "" for a bundle from before."""
    seen = meta.get("confirmed")
    kind = meta.get("reproducibility")
    if not seen or not kind:
        return ""
    runs, failed = seen.get("runs", 0), seen.get("failed", 0)
    if kind == "intermittent":
        varies = (
            ", wrong on the first run of the compiled model in some and only on its second "
            "in others (its outputs vary from run to run)"
            if seen.get("mixed")
            else ""
        )
        # a "run" here is a fresh process that compiles the model and runs it up to
        # ``attempts`` times: "reproduced 5 of 5 runs" read as "always" (an audit's kernel
        # was wrong on 3 runs in 10)
        attempts = seen.get("attempts") or 1
        each = (
            f", each compiling the model and running it up to {attempts} times"
            if attempts > 1
            else ""
        )
        first = seen.get("first_run")
        on_first = (
            f"; on the first run of the compiled model in {first} of them"
            if isinstance(first, int) and attempts > 1
            else ""
        )
        return (
            f" Intermittent: seen in {failed} of {runs} fresh processes{each}{on_first}"
            f"{varies}; it does not show on every run. `repro.py` compiles and runs the model "
            "several times in one process and reports in how many tries it showed."
        )
    if kind == "depends on an earlier model":
        earlier = meta.get("earlier", [])
        names = ", ".join(f"`{e}/model.onnx`" for e in earlier)
        return (
            f" It depends on an earlier model: alone in a fresh process it reproduced 0 of "
            f"{runs} runs; after {len(earlier)} earlier model(s) ran in the same process "
            f"({names}) it fails. `repro.py` runs them in order, then this model, in one "
            "process."
        )
    return f" Reproduced {failed} of {runs} runs in a fresh process."


def _plain_text(plain: Path, reduced: bool, meta: dict[str, Any]) -> list[str]:
    """The plain reproducer, shown whole (it is at most ``MAX_LINES`` lines)."""
    if not plain.exists():
        return []
    where = "cd reduced && " if reduced else ""
    ends = exit_note(meta.get("verdict", ""), meta.get("signature", ""))
    return [
        f"`{where}python {PLAIN}`: onnx, numpy and the backend's own API only; prints actual "
        f"vs expected; {ends}.",
        "```python",
        plain.read_text().rstrip(),
        "```",
    ]


def _culprit_text(culprit: dict[str, Any]) -> str:
    """Where inside the backend (``run.culprit``) and the workaround, if one was found."""
    if not culprit.get("stage"):
        return ""
    parts = [f" Stage: {culprit['stage']}"]
    if culprit.get("component"):
        parts.append(f" ({culprit['component']})")
    if culprit.get("level"):
        parts.append(f", at {culprit['level']}")
    text = "".join(parts) + "."
    if culprit.get("workaround"):
        text += f" Workaround, checked: `{culprit['workaround']}`."
    if culprit.get("unchecked") and culprit.get("project") == "onnx2torch":
        # the op was not run in torch eager: neither side is shown at fault
        text += (
            " File with onnx2torch (github.com/ENOT-AutoDL/onnx2torch) first: the converted "
            "model fails or computes it wrong; whether its conversion or torch's own op is at "
            "fault was not checked (the op was not run in torch eager on the same tensors)."
        )
        if culprit.get("note"):
            text += f" ({culprit['note']})"
        return text
    if culprit.get("project") in _PROJECTS:
        text += f" File with {_PROJECTS[culprit['project']]}."
    if culprit.get("project") == "torch-compile" and culprit.get("note"):
        text += f" ({culprit['note']})"
    elif (
        culprit.get("project") in ("onnx2torch", "torch")
        and culprit.get("note")
        and (" on the same tensors: " in culprit["note"])
    ):  # the failing op was run in torch eager on the same tensors (run.culprit)
        text += f" {culprit['note']}."
    elif culprit.get("project") == "onnx2torch" and culprit.get("component"):
        # the module that failed or first gave a wrong type was onnx2torch's conversion
        text += f" The converted module is onnx2torch's: {culprit.get('note', '')}"
    elif culprit.get("note") and (
        not culprit.get("component") or len(culprit.get("disabled", [])) > 1
    ):
        text += f" ({culprit['note']})"  # why nothing was named, or why several were
    return text


_PROJECTS = {
    "onnx2torch": "onnx2torch (github.com/ENOT-AutoDL/onnx2torch): its conversion is at fault",
    "torch": "PyTorch (github.com/pytorch/pytorch): torch's own op is at fault",
    "torch-compile": "PyTorch (github.com/pytorch/pytorch): torch.compile is at fault",
    "onnxruntime": "ONNX Runtime (github.com/microsoft/onnxruntime)",
    "tvm": "TVM (github.com/apache/tvm)",
}


_KIND_WORDS = {"dtype": "element type", "shape": "shape", "values": "values", "missing": "outputs"}


def _names_said(said: str, renamed: dict[str, str]) -> str:
    """Which tensor of the renamed model text each name in ``said`` (a run's own words,
    model.onnx's names, as the reproducers print them) is: "output conv0_out" under a
    model text that calls it y read as two naming schemes."""
    found = [
        f"{old} is `{new}`"
        for old, new in renamed.items()
        if re.search(rf"(?<![\w.]){re.escape(old)}(?![\w.])", said)
    ]
    if not found:
        return ""
    return (
        "\n\n(Names as model.onnx and the reproducers say them; in the model text above, "
        f"{', '.join(found)}.)"
    )


def _follows_text(meta: dict[str, Any], renamed: dict[str, str]) -> str:
    """The wrong result a crash follows (``reduce.precursor``), if one was shown: a
    compiler engineer fixes that node first, and files one report, not one per consumer."""
    follows = meta.get("follows")
    if not follows:
        return ""
    name = meta.get("name") or meta["backend"]
    said = follows.get("message", "")
    for old, new in sorted(renamed.items(), key=lambda kv: -len(kv[0])):
        said = re.sub(rf"(?<![\w.]){re.escape(old)}(?![\w.])", new, said)
    node = f" (node `{follows['node']}`)" if follows.get("node") else ""
    return (
        f"\n\nThe crash follows a wrong result of {follows['op']}{node}: the model cut "
        f"after that node runs on {name}, and its result is wrong ({said.rstrip('.')}); "
        "the rest of the model, fed the values "
        f"{meta.get('reference_name') or meta.get('reference') or 'the reference'} computes "
        f"there, runs on {name} without crashing. Fix {follows['op']}'s "
        f"{_KIND_WORDS.get(follows['kind'], 'result')} first: this crash is likely of the "
        "same root cause."
    )


MAX_FOLLOW_UPS = 8  # crashes named in issue.md (meta.json keeps them all)


def _follow_ups_text(meta: dict[str, Any]) -> str:
    """The crashes joined to this bug once it was filed, not filed again
    (``Store.follow_ups``): those its wrong result was shown to cause further on, and the
    same crash in other words (its family, reduced to its ops or more); named here so the
    report says what else the bug breaks, and how else it shows."""
    joined = meta.get("follow_ups") or []
    name = meta.get("name") or meta["backend"]
    follows = [c for c in joined if c.get("why", "follows") == "follows"]
    same = [c for c in joined if c.get("why") == "same crash"]
    state = [c for c in joined if c.get("why") == "same state"]
    text = ""
    if follows:
        text += (
            f"\n\nThis wrong result also made {name} crash in the ops that read it: "
            f"{_crashes(follows)}, each reduced and shown to follow it (the rest of its "
            "model, fed the right values there, runs), so joined to this bug, not filed "
            f"again: {_named(follows)}."
        )
    if same:
        text += (
            f"\n\nThe same crash in other words: {_crashes(same)} of its family, reduced "
            f"to this bug's ops (or to those and more), joined to this bug, not filed again: "
            f"{_named(same)}."
        )
    if state:
        tests = sum(c["hits"] for c in state)
        shown = [
            f"{_error(c)} ({c['hits']} test{'s' if c['hits'] != 1 else ''}, seed {c['seed']})"
            for c in sorted(state, key=lambda c: -c["hits"])[:MAX_FOLLOW_UPS]
        ]
        more = len(state) - len(shown)
        text += (
            f"\n\nThe same state-dependent failure of {name} showed in other ways after "
            f"other models: {len(state)} other signature{'s' if len(state) != 1 else ''} in "
            f"{tests} test{'s' if tests != 1 else ''}, confirmed to depend on earlier models "
            "and joined to this bug, not filed again (a stale state shows as whatever meets "
            "it): " + "; ".join(shown) + (f"; and {more} more (meta.json)" if more else "") + "."
        )
    return text


def _error(joined: dict[str, Any]) -> str:
    """A joined signature's error (after backend|verdict|stage): its first line, cut short."""
    error = joined["signature"].split("|", 3)[-1].split(" | ")[0]
    return error if len(error) <= 120 else error[:120].rsplit(" ", 1)[0] + " ..."


def _crashes(joined: list[dict[str, Any]]) -> str:
    """ "3 crash signatures in 15 tests"."""
    tests = sum(c["hits"] for c in joined)
    return (
        f"{len(joined)} crash signature{'s' if len(joined) != 1 else ''} in {tests} "
        f"test{'s' if tests != 1 else ''}"
    )


def _named(joined: list[dict[str, Any]]) -> str:
    """The joined crashes, most tests first: ops, error, tests, a seed."""
    shown = []
    for c in sorted(joined, key=lambda c: -c["hits"])[:MAX_FOLLOW_UPS]:
        tests = f"{c['hits']} test{'s' if c['hits'] != 1 else ''}"
        shown.append(f"{' -> '.join(c['ops'])} ({_error(c)}; {tests}, seed {c['seed']})")
    more = len(joined) - len(shown)
    return "; ".join(shown) + (f"; and {more} more (meta.json)" if more else "")


def _upstream_text(bundle: Path, meta: dict[str, Any], model: onnx.ModelProto) -> str:
    found = matches(meta, model, load_rows(bundle.parent.parent))
    return "\n\n" + markdown(found) if found else ""


def _expected_values(plain: Path, reference: str | None) -> str:
    """Where the plain reproducer's expected values come from."""
    if not plain.exists():
        return ""
    if "ReferenceEvaluator(model).run(None, inputs)  # the ONNX spec's" in plain.read_text():
        return (
            "The ONNX reference evaluator's outputs (`onnx.reference.ReferenceEvaluator`, the "
            f"operator definitions' executable form; {reference} agrees with it on this model), "
            "within the per-type tolerances the script states."
        )
    return (
        f"{reference}'s outputs, stored as `test_data_set_0/output_*.pb` (the ONNX reference "
        "evaluator fails on this model or disagrees), within the script's tolerances."
    )


SHOWN_VALUES = 8  # a table cell's values: the first, in order


def _show(a: object) -> str:
    if isinstance(a, list | tuple):  # a sequence where a tensor was declared: said as such
        more = " ..." if len(a) > 3 else ""
        return f"a sequence of {len(a)}: " + "; ".join(_show(x) for x in a[:3]) + more
    if a is None:
        return "None"
    a = np.asarray(a)
    # each value as it reads, on one line: a table cell holds it (numpy's own text wraps
    # and pads: "[0.      , 5.333333,\n 0.      ]" broke issue.md's table)
    head = a.ravel()[:SHOWN_VALUES].tolist()
    shown = [f"{float(v):.6g}" if a.dtype.kind == "f" else str(v) for v in head]
    values = "[" + ", ".join(shown) + "]"
    return f"{a.dtype}{list(a.shape)} {values}" + (" ..." if a.size > SHOWN_VALUES else "")


def _expected_sources(folder: Path, model: onnx.ModelProto, meta: dict[str, Any]) -> str:
    """The expected values on the reduced model's inputs from the ONNX reference evaluator
    and, for a single node of a simple op, numpy beside them; and the operator schema's
    sentence for the property violated (``readable.doc_sentence``), quoted."""
    inputs = {}
    for path in sorted((folder / DATA_SET).glob("input_*.pb")):
        t = onnx.load_tensor(str(path))
        inputs[t.name] = numpy_helper.to_array(t)
    rows: list[str] = []
    from onnxfuzz.judge.attribution import reference_fault

    fault = reference_fault(model)
    try:
        from onnx.reference import ReferenceEvaluator

        if len(model.graph.node) > 40:
            raise ValueError("too large to evaluate here")
        if fault is not None:  # its values would be shown as expected, and they are wrong
            raise ValueError(f"the evaluator's documented fault: {fault.op}: {fault.reason}")
        # numpy's warnings (a Pad casting NaN, a Sqrt of -1) are the values' business,
        # not lines on the campaign's screen
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = ReferenceEvaluator(model).run(None, inputs)
    except Exception:
        ref = None
    try:
        with np.errstate(all="ignore"):
            mine = numpy_expected(model, inputs)
    except Exception:  # numpy refusing these tensors (shapes, exotic types): no column
        mine = None
    names = short_names(model)  # as the model text shows them
    if ref is not None:
        head = "| output | ONNX reference evaluator |" + (" numpy |" if mine else "")
        rows = [head, "|---|---|" + ("---|" if mine else "")]
        for k, out in enumerate(model.graph.output):
            row = f"| {names.get(out.name, out.name)} | {_show(ref[k])} |"
            if mine:
                row += f" {_show(mine[k])} |" if k < len(mine) else " - |"
            rows.append(row)
    text = ""
    if fault is not None:
        text = (
            "\n\nNo values from the ONNX reference evaluator here: it is known to get this "
            f"model wrong ({fault.op}: {fault.reason})."
        )
    if rows:
        what = (
            "the reference evaluator's and numpy's (one elementwise op, computed with "
            "numpy's own functions)"
            if mine
            else "the reference evaluator's"
        )
        which = "the reduced model's" if folder.name == "reduced" else "the model's"
        text = f"\n\nValues on {which} inputs, {what}:\n\n" + "\n".join(rows)
    op = model.graph.node[0].op_type if len(model.graph.node) == 1 else ""
    found = re.search(r"first diverging node: \S+ \((\w+)\)", meta.get("reduced_message") or "")
    op = op or (found[1] if found else "")
    if op:
        said = doc_sentence(op, int(meta.get("opset") or 17), meta.get("kind", ""))
        if said:
            text += f"\n\nThe operator's definition, {said}"
    return text


def _value_errors(bundle: Path, meta: dict[str, Any]) -> str:
    """For a value mismatch: max abs/rel error and ulps of the stored outputs."""
    if meta["verdict"] != "mismatch" or meta.get("kind") not in ("values", ""):
        return ""
    data = bundle / DATA_SET
    lines = []
    for got in sorted((data / _safe(meta["backend"])).glob("output_*.pb")):
        want = data / _safe(meta.get("reference", "")) / got.name
        if not want.exists():
            continue
        a, e = (numpy_helper.to_array(onnx.load_tensor(str(p))) for p in (got, want))
        said = value_errors(a, e)
        if said and _within(a, e, meta.get("tolerance", {})):
            # rounding beside the wrong output, not a second wrong one (it read "101 of 240
            # elements differ, up to 255 ulps" of a float16 HardSwish inside the tolerance)
            said += "; all within the tolerance"
        if said:
            lines.append(f"- `{onnx.load_tensor(str(got)).name}` (original model): {said}")
    return "\n\n" + "\n".join(lines) if lines else ""


MAX_POSITIONS = 4  # differing positions named per output, beside the side-by-side table


def _side_by_side(folder: Path, meta: dict[str, Any], model: onnx.ModelProto) -> str:
    """A wrong value, shape or type: each output as the backend gave it beside the
    reference's, on the inputs shown (``test_data_set_0/<label>/output_*.pb``), and, where
    an output has more elements than its cell shows, the first positions outside the
    tolerance (the message above names the worst one alone)."""
    if meta["verdict"] != "mismatch" or meta.get("kind") == "input":
        return ""
    data = folder / DATA_SET
    mine, theirs = (data / _safe(meta.get(k) or "") for k in ("backend", "reference"))
    if meta.get("reference") in (None, meta["backend"]) or not (mine.is_dir() and theirs.is_dir()):
        return ""
    names = short_names(model)
    name = meta.get("name") or meta["backend"]
    reference = meta.get("reference_name") or meta["reference"]
    rows = [f"| output | {name} | {reference} |", "|---|---|---|"]
    notes = []
    for k, out in enumerate(model.graph.output):
        got, want = mine / f"output_{k}.pb", theirs / f"output_{k}.pb"
        if not (got.exists() and want.exists()):
            continue
        try:
            a, e = (numpy_helper.to_array(onnx.load_tensor(str(p))) for p in (got, want))
        except Exception:  # noqa: BLE001 - not a tensor file (a sequence's): no row
            continue
        shown = names.get(out.name, out.name)
        rows.append(f"| {shown} | {_show(a)} | {_show(e)} |")
        if a.shape != e.shape or a.dtype != e.dtype or a.size <= SHOWN_VALUES:
            continue
        tol = meta.get("tolerance", {}).get(str(e.dtype)) if e.dtype.kind == "f" else None
        bad = outside(e, a, (float(tol[0]), float(tol[1])) if tol else None)
        if not bad.any():
            continue
        at = [tuple(int(i) for i in p) for p in np.argwhere(bad)[:MAX_POSITIONS]]
        where = "; ".join(f"{list(p)}: {_value(a[p])} vs {_value(e[p])}" for p in at)
        more = ", first" if int(bad.sum()) > len(at) else ""
        notes.append(
            f"- `{shown}`: {int(bad.sum())} of {a.size} elements outside the tolerance{more} "
            f"at {where}"
        )
    if len(rows) == 2:
        return ""
    which = "the reduced model's" if folder.name == "reduced" else "the model's"
    table = "\n".join(rows + ([""] + notes if notes else []))
    where = f"`{DATA_SET}/<backend>/output_*.pb`"
    return f"\n\nThe outputs on {which} inputs, side by side ({where}):\n\n{table}"


def _value(v: object) -> str:
    """One element as a table or a sentence shows it."""
    return f"{float(v):.6g}" if np.asarray(v).dtype.kind == "f" else str(v)


def _within(a: np.ndarray, e: np.ndarray, tolerance: dict[str, Any]) -> bool:
    """Whether ``a`` differs from ``e`` somewhere but only within ``tolerance`` (the
    bundle's, per type), judged as the oracle judges one output."""
    if a.shape != e.shape or e.dtype.kind != "f" or np.array_equal(a, e):
        return False
    cfg = OracleConfig(tolerance={k: tuple(v) for k, v in tolerance.items()})
    return compare("reference", {"y": e}, "backend", {"y": a}, ["y"], cfg).verdict == Verdict.OK


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label)


def _tvm_triage(culprit: dict[str, Any]) -> str:
    """TVM's triage tags, from the stage the culprit search found."""
    stage = culprit.get("stage", "")
    if stage == "import":
        return "* frontend:onnx"
    return "* needs-triage" + (f" (failing stage: {stage})" if stage else "")


def _opinion(meta: dict[str, Any], name: str) -> str:
    """The second opinion on a no-majority mismatch (``judge.second_opinion``), if any."""
    opinion = meta.get("second_opinion")
    if not opinion:
        return ""
    reference = meta.get("reference", "")
    names = {meta["backend"]: name, reference: meta.get("reference_name") or reference}
    return sentence(opinion, meta["backend"], reference, names) + " "


def _actual(log: list[str], message_text: str | None = None) -> str:
    """log.txt's message (after its title line; ``message_text`` in its place where
    given), and the crash site's frames where the evidence has them: a native crash's, or
    the Python traceback's last frames outside onnxfuzz's own code (a user adapter's
    compile that raised was shown by its message alone, its file and line only in
    log.txt)."""
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
    if not site:
        site = _raised_at(log)
    return "\n".join((message + ([""] if site else []) + site)[:MAX_LOG_LINES]).strip()


PYTHON_FRAMES = 4  # a traceback's last frames outside onnxfuzz shown in issue.md


@functools.cache
def _own_code() -> tuple[str, ...]:
    """Where onnxfuzz's code lives, as a traceback names it: the package and its shipped
    adapters (``onnxfuzz.backends``, a folder of its own in a source checkout)."""
    places = {str(Path(__file__).resolve().parents[1]) + "/", "/site-packages/onnxfuzz/"}
    spec = importlib.util.find_spec("onnxfuzz.backends")
    for where in (spec.submodule_search_locations or []) if spec else []:
        places.add(str(Path(where).resolve()) + "/")
    return tuple(sorted(places))


def _raised_at(log: list[str]) -> list[str]:
    """The last ``PYTHON_FRAMES`` frames (file line and its code) of log.txt's first
    Python traceback that are not onnxfuzz's own code, under a heading; none without."""
    start = next((i for i, line in enumerate(log) if line.startswith("Traceback (")), None)
    if start is None:
        return []
    frames: list[list[str]] = []
    for line in log[start + 1 :]:
        if line.startswith('  File "'):
            frames.append([line])
        elif line.startswith("    ") and frames and len(frames[-1]) == 1:
            if line.strip().strip("^~ "):  # the code, not the carets under it
                frames[-1].append(line)
        elif not line.startswith(" "):
            break  # the exception's own line: the traceback ends
    theirs = [f for f in frames if not any(part in f[0] for part in _own_code())]
    if not theirs:
        return []
    # a file by its name: a path is this machine's (and a user's home folder)
    shown = [[re.sub(r'File "[^"]*/([^"/]+)"', r'File "\1"', f[0]), *f[1:]] for f in theirs]
    return ["Raised at (Python traceback, onnxfuzz's own frames left out):"] + [
        line for f in shown[-PYTHON_FRAMES:] for line in f
    ]


def _inputs_table(folder: Path, names: dict[str, str] | None = None) -> str:
    rows = ["| input | type | shape | values |", "|---|---|---|---|"]
    for path in sorted((folder / DATA_SET).glob("input_*.pb")):
        t = onnx.TensorProto()
        t.ParseFromString(path.read_bytes())
        a = numpy_helper.to_array(t)
        if a.size and a.dtype.kind in "biuf":
            # a range, said as one: "[1, 1]" of twelve ones read as two values
            low, high = np.min(a), np.max(a)
            values = f"all {low:.6g}" if low == high else f"from {low:.6g} to {high:.6g}"
            if a.size <= 8:
                values = np.array2string(a.ravel(), precision=6, separator=", ")
        else:
            values = "-"
        name = (names or {}).get(t.name, t.name)
        rows.append(f"| {name} | {a.dtype} | {list(a.shape)} | {values} |")
    return "\n".join(rows) if len(rows) > 2 else "(none)"


def _neighbours(meta: dict[str, Any], renamed: dict[str, str], backends: str) -> list[str]:
    """The one-change variants tried and what they say of the trigger (``store.trigger``)."""
    text = neighbours_text(meta, renamed, backends)
    return ["", text] if text else []


def _versions(meta: dict[str, Any]) -> str:
    """The culprit backend's version and the settings that matter for it (ORT's graph
    optimization level; TVM's target, opt level and LLVM), and the reference's version,
    not every backend compared."""
    backend = meta["backend"]
    target = backend.split(":")[0]
    versions = meta.get("versions", {})
    mine = {k: v for k, v in versions.items() if k == backend or k.split(":")[0] == target}
    lines = [f"- {k}: {v}" for k, v in sorted(mine.items())]
    reference = meta.get("reference")
    if reference and reference != backend and reference in versions:
        # what the outputs were compared with: a mismatch is against that version
        lines.append(f"- compared with {reference}: {versions[reference]}")
    try:
        options = dict(parse_backend(backend).options)
    except BackendError:
        options = {}
    if target in ("ort", "ort-cuda"):
        level = {"none": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC"}.get(
            options.get("opt", "all"), f"ORT_ENABLE_{options.get('opt', 'all').upper()}"
        )
        provider = "CUDAExecutionProvider" if target == "ort-cuda" else "CPUExecutionProvider"
        lines.append(f"- graph optimization level {level}, {provider}")
    elif target == "tvm":
        llvm = (meta.get("culprit") or {}).get("llvm")
        lines.append(
            f"- target {options.get('target', 'llvm')}, PassContext opt_level "
            f"{options.get('opt_level', '3')}" + (f", LLVM {llvm}" if llvm else "")
        )
    lines += [
        f"- onnx: {onnx.__version__}, numpy: {np.__version__}",
        f"- Python {sys.version.split()[0]}, {platform.platform()}, {platform.machine()}",
        f"- onnxfuzz {meta.get('onnxfuzz', '?')}, opset {meta.get('opset', '?')}, "
        f"bug {meta['id']}, "
        + ("by onnxfuzz reduce" if meta.get("reduced_from") else f"seed {meta.get('seed')}"),
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
            ("Triage", "triage"),
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
    # github.com/pytorch/pytorch: the bug report form's fields
    "pytorch": lambda t, s: _form(
        t,
        [
            ("🐛 Describe the bug", "summary"),
            ("To reproduce", "repro"),
            ("Expected behavior", "expected"),
            ("Actual behavior", "actual"),
            ("Versions", "versions"),
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
