"""Bug bundles: ``DIR/bugs/<id>/`` with everything needed to see the bug again.

model.onnx
test_data_set_0/input_<k>.pb                 the inputs
test_data_set_0/<backend>/output_<k>.pb      each backend's outputs, where it had any (a
                                             bug of the second run: the culprit's second)
meta.json                                    signature, verdict, stage, backend, seed, ...
log.txt                                      the backend's error text / mismatch statistics
repro.py                                     standalone: 1 REPRODUCES, 0 FIXED, 4 DIFFERENT,
                                             2 SETUP ERROR (see the template)
earlier/<k>/{model.onnx,test_data_set_0/}    a bug that depends on an earlier model: the
                                             models to run first, in order, in one process
reduced/{model.onnx,test_data_set_0/,repro.py[,earlier/<k>/]}   the reduced model (with the
                                             earlier models again, for a state-dependent one)
[reduced/]passing/{model.onnx,test_data_set_0/}   the nearest one-change variant of the
                                             reduced model that passes (``reduce.neighbours``)

An intermittent bundle's repro.py runs the model ``confirmed.attempts`` times in one process
and reports the rate; a state-dependent one runs the earlier models first.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnxfuzz import __version__
from onnxfuzz.backend import UNSUPPORTED_PATTERNS, entry_points, parse_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.execute.messages import Test
from onnxfuzz.execute.sandbox import Outcome, Stage
from onnxfuzz.generate.build.generator import Case
from onnxfuzz.generate.corpus.testdata import DATA_SET, write_outputs, write_test
from onnxfuzz.judge.oracle import Judgement, Verdict, precision_dtypes
from onnxfuzz.judge.second_opinion import sides_with_backend, undecided
from onnxfuzz.judge.signature import RULES, WHERE_HINTS, WHERE_ONLY, normalize, same_fault
from onnxfuzz.reduce.neighbours import PASSING, Neighbours
from onnxfuzz.reduce.reducer import Reduced
from onnxfuzz.store.issue import write_issue
from onnxfuzz.store.plain_repro import (
    PlainRepro,
    error_words,
    exit_note,
    hook_source,
    supported,
    write_plain,
)
from onnxfuzz.store.readable import what_went_wrong

TEMPLATE = Path(__file__).parents[1] / "data" / "repro.py.tmpl"


def safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", label)


@dataclass
class Finding:
    signature: str
    bug_id: str
    judgement: Judgement
    backend: str
    reference: str
    seed: int
    opset: int
    ops: list[str]
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    outcomes: dict[str, Outcome]
    versions: dict[str, str]
    tolerance: dict[str, tuple[float, float]]
    timeout: float
    extra: dict[str, Any] = field(default_factory=dict)
    memory_mb: float = 8192.0
    case: Case | None = None  # the generated case (its choices shrink), when there is one
    names: dict[str, str] = field(default_factory=dict)  # label -> display name
    # the models the backend's process had run before this one (a stale-cache bug needs
    # them); after confirmation, of a state-dependent finding: the fewest that re-create it
    earlier: list[Test] = field(default_factory=list)
    runs: int = 1  # runs repro.py makes: an intermittent finding's attempts
    # the one-change variants of the reduced model tried (``reduce.neighbours``), if any
    neighbours: Neighbours | None = None

    def name(self, label: str) -> str:
        return self.names.get(label, label)


@functools.cache
def adapter_source(label: str) -> tuple[str, str, dict[str, str]]:
    """The source of the module defining the adapter behind ``label``, its class name and
    options: repro.py embeds it so that it runs without onnxfuzz. The module is located,
    not imported: importing an adapter imports its library (seconds for TVM or torch), and
    the campaign process never needs it."""
    ref = parse_backend(label)
    target = ref.target
    if ":" not in target:
        eps = entry_points()
        if target not in eps:
            raise BackendError(f"--backend {label}: no backend named {target!r}")
        target = eps[target].value
    where, _, cls_name = target.rpartition(":")
    if where.endswith(".py"):
        return Path(where).read_text(), cls_name, dict(ref.options)
    spec = importlib.util.find_spec(where)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise BackendError(f"--backend {label}: cannot find the source of {where}")
    return Path(spec.origin).read_text(), cls_name, dict(ref.options)


@functools.cache
def plain_hook(label: str) -> str | None:
    """A user adapter's own compile-and-run code for its plain reproducer
    (``plain_repro.HOOK``), read from its source; None for a shipped adapter, one without
    it, or one whose source is not found (its other errors are said elsewhere). A malformed
    hook raises ``BackendError`` naming the adapter: the campaign checks it first."""
    if supported(label):
        return None
    try:
        source, cls_name, _ = adapter_source(label)
    except (BackendError, OSError):
        return None
    return hook_source(source, cls_name, label)


def adapter_libraries(source: str, cls_name: str) -> list[str]:
    """The modules adapter class ``cls_name`` imports unconditionally (not under a ``try``
    or an ``if``: those are optional or guarded), in its module's top level and functions
    and in its own and its base classes' methods (not other classes'), less the standard
    library and onnxfuzz. repro.py's set-up check imports each (those imported inside
    methods too), so that a missing one is a set-up error and not a failure of the backend."""
    tree = ast.parse(source)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    mine: set[str] = set()
    todo = [cls_name]
    while todo:
        name = todo.pop()
        if name in classes and name not in mine:
            mine.add(name)
            todo += [b.id for b in classes[name].bases if isinstance(b, ast.Name)]
    skipped = [n for name, n in classes.items() if name not in mine]
    skipped += [n for n in ast.walk(tree) if isinstance(n, ast.Try | ast.If)]
    skip = {id(inner) for node in skipped for inner in ast.walk(node)}
    names: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [
        n
        for n in dict.fromkeys(names)
        if n.split(".")[0] not in sys.stdlib_module_names and n.split(".")[0] != "onnxfuzz"
    ]


def _sided(f: Finding) -> bool:
    """Whether the evaluator sided with the finding's backend against the comparison's
    reference (``second_opinion.as_reported``)."""
    return (
        f.judgement.verdict == Verdict.MISMATCH
        and f.reference != f.backend
        and sides_with_backend(f.extra.get("second_opinion"), f.backend)
    )


def _write_repro(
    folder: Path,
    f: Finding,
    model: onnx.ModelProto,
    reference_outputs: str | None,
    earlier: list[str] | None = None,
    judgement: Judgement | None = None,
) -> None:
    """``repro.py``: standalone, it says REPRODUCES only for the same normalized signature
    (see the template). ``reference_outputs``: the folder, relative to ``folder``, of the
    reference's stored outputs (None: the script runs the reference); ``earlier``: the
    folders, relative to ``folder``, of models to run first in the same process."""
    adapters = {label: adapter_source(label) for label in dict.fromkeys([f.reference, f.backend])}
    # The evaluator sided with the backend: the reference is the likely culprit, so the
    # script runs it now (its stored outputs are the wrong values: against them a fix of
    # the reference still read REPRODUCES) and says who sided with whom.
    sided_with = f.backend if _sided(f) else None
    if sided_with:
        reference_outputs = None
    libraries = {label: adapter_libraries(a[0], a[1]) for label, a in adapters.items()}
    j = judgement or f.judgement
    outputs = [o.name for o in model.graph.output]
    loosest = precision_dtypes(model)
    # A precision finding's blamed tensor inside the model (not one of its outputs): the
    # script exposes it and compares it alone by the op's budget, against the reference run
    # now (its stored outputs lack it). Comparing the model's outputs by that budget said
    # REPRODUCES of rounding well inside the tolerance once the bug was gone.
    expose = None
    if (
        j.kind == "precision"
        and j.output not in outputs
        and any(v.name == j.output for v in model.graph.value_info)
    ):
        expose, outputs, reference_outputs = j.output, [j.output], None
    # Plain data: the script is standalone (the enums' reprs would need onnxfuzz).
    expect = {
        "verdict": str(j.verdict),
        "stage": None if j.stage is None else str(j.stage),
        "kind": j.kind,
        # A reduced model may have lost the output the bug showed on: then any output.
        "output": j.output if j.output in outputs else None,
        "expose": expose,
        "message": normalize(j.message),  # onnxfuzz's own normalization, done here
        "backend": f.backend,
        "reference": f.reference,
        "reference_outputs": reference_outputs,
        "outputs": outputs,
        "loosest": {name: loosest[name] for name in outputs if name in loosest},
        "libraries": libraries,
        "timeout": f.timeout,
        "memory_mb": f.memory_mb,
        "tolerance": {k: list(v) for k, v in f.tolerance.items()},
        "runs": f.runs,
        "earlier": earlier or [],
        "confirmed": f.extra.get("confirmed"),  # {runs, failed} when it was found
        "sided_with": sided_with,
    }
    mode_note = ""
    if earlier:
        mode_note = (
            f"The bug depends on an earlier model: {', '.join(earlier)} run first, in the same "
            "process, then the model."
        )
    if f.runs > 1:
        mode_note += (
            f" The bug is intermittent: the model runs {f.runs} times in one process; "
            "REPRODUCES when any run fails the same way, with the rate."
        )
    needed = [lib.split(".")[0] for lib in sum(libraries.values(), [])]
    text = TEMPLATE.read_text().format(
        bug_id=f.bug_id,
        headline=(
            f"{f.backend} and {f.reference} disagree; the ONNX reference evaluator sides with "
            f"{f.backend}, so {f.reference} is the likely culprit"
            if sided_with
            else f"{j.verdict} in {f.backend} at {j.stage} stage"
        ),
        libraries=", ".join(dict.fromkeys(n for n in needed if n not in ("numpy", "onnx")))
        or "none besides onnx",
        expect=expect,
        mode_note=mode_note.strip(),
        adapters=adapters,
        rules=[(rx.pattern, rep) for rx, rep in RULES],
        where_only=WHERE_ONLY,
        where_hints=WHERE_HINTS,
        unsupported=(UNSUPPORTED_PATTERNS.pattern, int(UNSUPPORTED_PATTERNS.flags)),
    )
    (folder / "repro.py").write_text(text)


def _write_plain(
    folder: Path,
    f: Finding,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    outcomes: dict[str, Outcome],
) -> None:
    """``repro_plain.py`` (store.plain_repro) for a shipped adapter's finding."""
    j = f.judgement
    culprit, against = f.backend, f.reference
    if _sided(f):
        # the evaluator agrees with the backend: the script shows the reference's values
        # against the evaluator's (``second_opinion.as_reported``)
        culprit, against = f.reference, f.backend
    hook = None if supported(culprit) else plain_hook(culprit)
    if not supported(culprit) and hook is None:
        return
    ops = " -> ".join(n.op_type for n in model.graph.node) or "-"
    facts = {"verdict": str(j.verdict), "stage": j.stage and str(j.stage), "kind": j.kind}
    what = what_went_wrong({**facts, "backend": culprit, "signature": f.signature})
    title = f"{f.name(culprit)} {what} on {ops}"
    facts |= {"backend": f.backend, "reference": f.reference}
    if undecided({**f.extra, **facts}):  # no majority, no side taken: either may be wrong
        title = (
            f"{f.name(culprit)} and {f.name(against)} disagree on {ops} (either may be "
            "wrong: check the operator's definition)"
        )
    stored = outcomes.get(against) if against != culprit else None
    if against == culprit and j.verdict != Verdict.MISMATCH:
        # the reference's own failure: another backend's outputs are the expected ones
        # where the evaluator cannot run the model (ORT's optimizer crash on a QDQ model
        # against ORT unoptimized)
        against, stored = next(
            ((k, o) for k, o in outcomes.items() if k != culprit and o.outputs is not None),
            (against, None),
        )
    write_plain(
        folder,
        PlainRepro(
            culprit,
            title,
            tolerance=dict(f.tolerance),
            exits=exit_note(str(j.verdict), f.signature),
            shows="input" if j.kind == "input" else ("rerun" if j.stage == Stage.RERUN else ""),
            error=_raised(j, outcomes.get(culprit)),
            hook=hook,
        ),
        model,
        inputs,
        stored.outputs if stored is not None else None,
        f.name(against),
    )


def _raised(j: Judgement, outcome: Outcome | None) -> list[str] | None:
    """The words of the exception a crash finding's backend raised (``error_words``), for
    its plain reproducer to tell the bug from another error; None for any other finding,
    and for a process crash (no exception: any one is another failure)."""
    if j.verdict != Verdict.CRASH or outcome is None or not outcome.message:
        return None
    if "killed by signal" in outcome.message or "worker exited" in outcome.message:
        return None
    return error_words(outcome.message)


def _reduced_message(f: Finding, reduced: Reduced) -> str:
    """The reduced model's failure in words; a hang's says which time limit it ran under
    (the reduction tries each candidate under a limit of its own, shorter than the
    campaign's: "no result within 2 s" read as a contradiction of --timeout 5)."""
    message = reduced.message
    within = re.match(r"no result within ([0-9.e+-]+) s", message)
    if f.judgement.verdict == Verdict.TIMEOUT and within and float(within[1]) != f.timeout:
        message += (
            f" (the reduction's per-candidate limit; the campaign's --timeout, which "
            f"repro.py uses, is {f.timeout:g} s)"
        )
    return message


def _write_outcomes(
    data: Path, f: Finding, model: onnx.ModelProto, outcomes: dict[str, Outcome]
) -> None:
    """Each backend's outputs on the data set's inputs, as ``data/<label>/output_<k>.pb``."""
    for label, out in outcomes.items():
        # a bug of the second run shows in that run's outputs
        second = label == f.backend and f.judgement.stage == Stage.RERUN and out.second
        outputs = out.second if second else out.outputs
        if outputs is None:
            continue
        sub = data / safe(label)
        sub.mkdir()
        write_outputs(sub, model, outputs)


def write_bundle(
    root: Path, f: Finding, reduced: Reduced | None = None, where: str = "bugs"
) -> Path:
    """Write ``DIR/<where>/<id>/`` (into a temporary folder first, renamed into place);
    ``where`` is ``bugs``, or ``reference-bugs`` for a failure of the reference alone."""
    folder = root / where / f.bug_id
    tmp = root / where / f".tmp_{f.bug_id}"
    if tmp.exists():
        shutil.rmtree(tmp)
    _write_outcomes(write_test(tmp, f.model, f.inputs), f, f.model, f.outcomes)
    meta: dict[str, Any] = {
        "id": f.bug_id,
        "signature": f.signature,
        "verdict": f.judgement.verdict,
        "stage": f.judgement.stage,
        "kind": f.judgement.kind,
        "output": f.judgement.output,
        "backend": f.backend,
        "name": f.name(f.backend),
        "reference": f.reference,
        "reference_name": f.name(f.reference),
        "seed": f.seed,
        "seeds": [f.seed],
        "opset": f.opset,
        "ops": f.ops,
        "nodes": len(f.ops),
        "versions": f.versions,
        "onnxfuzz": __version__,
        "tolerance": f.tolerance,
        "timeout": f.timeout,
        **f.extra,
    }
    earlier = []
    for k, t in enumerate(f.earlier):
        write_test(tmp / "earlier" / str(k), onnx.load_from_string(t.model_bytes), t.inputs)
        earlier.append(f"earlier/{k}")
    if earlier:
        meta["earlier"] = earlier
    if reduced is not None:
        data = write_test(tmp / "reduced", reduced.model, reduced.inputs)
        # what each backend gave on them, shown side by side in issue.md
        _write_outcomes(data, f, reduced.model, reduced.outcomes)
        # A state-dependent bug's reduced model needs the same earlier models first: copied
        # in, so that reduced/ works alone, wherever it is copied.
        for k, t in enumerate(f.earlier):
            model = onnx.load_from_string(t.model_bytes)
            write_test(tmp / "reduced" / "earlier" / str(k), model, t.inputs)
        # a reduced model that shows the op's wrong output as another kind (a NonZero's
        # wrong values after a Slice, its wrong shape alone): its repro.py expects that kind
        last = reduced.final.judgement if reduced.final is not None else None
        shown = reduced.signature or ""
        twin = None
        if last is not None and last.kind != f.judgement.kind and same_fault(f.signature, shown):
            twin = last
        _write_repro(tmp / "reduced", f, reduced.model, None, earlier, twin)
        _write_plain(tmp / "reduced", f, reduced.model, reduced.inputs, reduced.outcomes)
        meta.update(
            reduced_ops=reduced.ops,
            reduced_nodes=len(reduced.ops),
            **({"reduced_message": _reduced_message(f, reduced)} if reduced.message else {}),
            pattern=reduced.pattern,
            reduction=reduced.record(),
        )
    if f.neighbours is not None:
        meta["neighbours"] = f.neighbours.as_meta()
        best = f.neighbours.passing()
        if best is not None:  # beside the model the variants were made from
            beside = tmp / "reduced" if reduced is not None else tmp
            write_test(beside / PASSING, best.variant.model, best.variant.inputs)
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    log = [
        f"{f.judgement.verdict} in {f.name(f.backend)} at {f.judgement.stage} stage",
        "",
        f.judgement.message,
        "",
    ]
    for label, out in f.outcomes.items():
        if out.trace:
            log += [f"--- {f.name(label)} ---", out.trace, ""]
    (tmp / "log.txt").write_text("\n".join(log))
    stored = f.outcomes.get(f.reference)
    has_ref = f.reference != f.backend and stored is not None and stored.outputs is not None
    _write_repro(tmp, f, f.model, f"{DATA_SET}/{safe(f.reference)}" if has_ref else None, earlier)
    _write_plain(tmp, f, f.model, f.inputs, f.outcomes)
    write_issue(tmp)
    if folder.exists():
        shutil.rmtree(folder)
    tmp.rename(folder)
    return folder


def sync_meta(
    root: Path,
    bugs: list[dict[str, Any]],
    where: str = "bugs",
    follow_ups: dict[str, list[dict[str, Any]]] | None = None,
) -> None:
    """Bring each bundle's meta.json up to date with the store: hits, every seed, and the
    crashes joined to the bug (``Store.follow_ups``), which its issue.md then names."""
    for b in bugs:
        path = root / where / b["id"] / "meta.json"
        if not path.exists():
            continue
        meta = json.loads(path.read_text())
        meta.update(hits=b["hits"], seeds=json.loads(b["seeds"]))
        joined = (follow_ups or {}).get(b["key"])
        if joined:
            meta["follow_ups"] = joined
        path.write_text(json.dumps(meta, indent=1))
        if joined:  # after meta.json: issue.md is written from it
            write_issue(path.parent)
