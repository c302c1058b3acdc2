"""What a campaign found, for people: bug rows grouped by root-cause family (families
first: "4 families, 17 bundles"), the bug table, the end-of-campaign summary."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from onnxfuzz.execute.sandbox import EARLIER_MAX
from onnxfuzz.generate.measure.metrics import Diversity
from onnxfuzz.judge.attribution import DISPUTED_SEMANTICS, DOCUMENTED_FAULT
from onnxfuzz.judge.signature import family, family_id, normalize
from onnxfuzz.store.db import (
    EVALUATOR_SUSPECTS,
    FOLLOW_UPS,
    FOLLOWS,
    REDUCER_LOG,
    REDUCTION_FAILURES,
    REDUCTION_STOPPED,
    REFERENCE_BUGS,
    SETTLED_PATTERNS,
    Store,
)
from onnxfuzz.store.known import KnownFile

PIPE_WIDTH = 1000  # columns of a table printed into a pipe or file: never wrapped


# What a family is, under the families table (triage.md, the HTML report). A wrong value's
# family holds no words to tell causes apart: it groups, it does not say one cause (an audit
# read CumSum, NonZero and NonMaxSuppression bundles in one family as one root cause).
FAMILIES_NOTE = (
    "A family groups bundles of a likely common cause: the same backend, verdict and "
    "stage, and the same error once op names, shapes, element types and numbers are left "
    "out (a crash: the same frames); a crash that follows another node's wrong result (the "
    "model cut after that node shows it, and the rest runs on the right values) is of that "
    "result's family. A wrong value's family is only its backend, stage and kind (values, "
    "shape, element type): its bundles blame distinct ops, each a bug to read on its own."
)


def summary_rows(store: Store, reference_alone: bool = False) -> list[dict[str, Any]]:
    """A row per bug (``reference_alone``: per failure of the reference alone, set aside
    in a campaign of one reference and one target)."""
    rows = []
    failed = store.get_meta(REDUCTION_FAILURES) or {}
    # a crash that follows another node's wrong result is of that result's family
    follows = store.get_meta(FOLLOWS) or {}
    stopped = store.get_meta(REDUCTION_STOPPED) or {}
    joined = store.get_meta(FOLLOW_UPS) or {}
    # no majority: the side the ONNX reference evaluator does not agree with
    by_evaluator = store.get_meta(EVALUATOR_SUSPECTS) or {}
    for b in store.reference_bugs() if reference_alone else store.bugs():
        suspect = store.names.get(b["suspect"], b["suspect"])
        if suspect is None and (other := by_evaluator.get(b["signature"])):
            suspect = f"{store.names.get(other, other)} (by the evaluator)"
        rows.append(
            {
                "id": b["id"],
                "verdict": b["verdict"],
                "stage": b["stage"],
                "backend": store.names.get(b["backend"], b["backend"]),
                "suspect": suspect,
                "pattern": "unreduced" if reference_alone else b["pattern"],
                "hits": b["hits"],
                "first_test": b["first_test"],
                "first_seen": b["first_seen"],
                "seeds": json.loads(b["seeds"]),
                "family": family_id(family(follows.get(b["key"], b["signature"])), store.names),
                # the signature of the wrong result its crash follows (reduce.precursor)
                "follows": follows.get(b["key"]),
                # why its reduction raised (it is kept unreduced), if it did
                "reduction_failed": failed.get(b["signature"])
                if b["pattern"] == "unreduced"
                else None,
                # its reduction stopped at the budget with nodes left, if it did
                "reduction_stopped": stopped.get(b["key"]),
                # crash signatures joined to it (Store.follow_ups)
                "follow_ups": len(joined.get(b["key"], {})),
                # the backends that failed the same way on its test (a reference's failure)
                "shared_with": _shared_with(store, b["id"]) if reference_alone else [],
                # an intermittent or state-dependent bug's reduced ops: its pattern is that
                # word (one bundle per family), its bundle says what it was reduced to
                "reduced_ops": _reduced_ops(store, b["id"])
                if b["pattern"] in SETTLED_PATTERNS
                else None,
            }
        )
    return rows


def _bundle_meta(store: Store, where: str, bug: str) -> dict[str, Any]:
    """The meta.json of the bundle ``where/bug`` beside ``store`` ({} where unreadable)."""
    try:
        meta = json.loads((store.path.parent / where / bug / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _shared_with(store: Store, bug: str) -> list[str]:
    """The backends (display names) that failed as the reference did on the test of its
    set-aside failure ``bug``, from its bundle's meta.json (none where it is unreadable)."""
    labels = _bundle_meta(store, REFERENCE_BUGS, bug).get("shared_with") or []
    return [store.names.get(label, label) for label in labels]


def _reduced_ops(store: Store, bug: str) -> list[str] | None:
    """The ops ``bugs/bug``'s model was reduced to (None: not reduced, or unreadable)."""
    ops = _bundle_meta(store, "bugs", bug).get("reduced_ops")
    return ops if isinstance(ops, list) else None


def reference_title(name: str, alone: list[dict[str, Any]], where: Path) -> str:
    """The title of the table of a reference's set-aside failures (``summary_rows(...,
    reference_alone=True)``): "alone" only where no other backend failed the same way (a
    target wrapping the same runtime shares its crashes, and those are bugs of both)."""
    who = f"the reference {name}" if name else "the reference"
    shared = sum(1 for r in alone if r.get("shared_with"))
    if not shared:
        return f"failures of {who} alone (not reduced; bundles in {where})"
    return (
        f"failures of {who} (not reduced; in {shared} of {len(alone)} the target failed the "
        f"same way too: a bug of both; bundles in {where})"
    )


def reduced_ops(row: dict[str, Any]) -> str:
    """A bug row's reduced op pattern as tables show it: "-" for one kept unreduced, and
    "- (reduction failed)" where reduction raised rather than being off or not needed."""
    if row["pattern"] in SETTLED_PATTERNS and row.get("reduced_ops"):
        return f"{' '.join(row['reduced_ops'])} ({row['pattern']})"
    if row["pattern"] != "unreduced":
        stopped = " (budget spent: may reduce further)" if row.get("reduction_stopped") else ""
        return row["pattern"].replace("+", " ") + stopped
    return "- (reduction failed)" if row.get("reduction_failed") else "-"


def reduction_failures_line(rows: list[dict[str, Any]], out: Path) -> str | None:
    """One line naming the bugs whose reduction failed and the first reason, or None."""
    failed = [r for r in rows if r.get("reduction_failed")]
    if not failed:
        return None
    return (
        f"reduction failed for {len(failed)} of {len(rows)} bugs (kept unreduced, reduced ops "
        f"'-'): {failed[0]['id']}: {failed[0]['reduction_failed']}; tracebacks in "
        f"{out / REDUCER_LOG}"
    )


def reduction_stopped_line(rows: list[dict[str, Any]], out: Path) -> str | None:
    """One line naming the bugs whose reduction stopped at its budget with nodes left, and
    the command that goes on from the first's reduced model; None when there are none."""
    stopped = [r for r in rows if r.get("reduction_stopped")]
    if not stopped:
        return None
    first = stopped[0]["reduction_stopped"]
    model = out / "bugs" / stopped[0]["id"] / "reduced" / "model.onnx"
    command = shlex.join(
        ["onnxfuzz", "reduce", str(model), "--backend", first["reference"], "--backend"]
        + [first["backend"], "--budget", "5m"]
    )
    return (
        f"{len(stopped)} of {len(rows)} bugs kept two nodes or more when their reduction "
        f"spent its budget (--reduce-budget), a smaller model may show them: "
        f"{', '.join(r['id'] for r in stopped)}; to go on, e.g. `{command}`"
    )


def reduction_lines(rows: list[dict[str, Any]], out: Path) -> list[str]:
    """What the tables of bugs do not say about their reductions: those that failed, and
    those that spent their budget (``reduction_failures_line``, ``reduction_stopped_line``)."""
    lines = (reduction_failures_line(rows, out), reduction_stopped_line(rows, out))
    return [line for line in lines if line is not None]


def family_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``summary_rows`` grouped by root-cause family (``judge.signature.family``), in the
    order each family was first found: its bundles, hits and first test."""
    fams: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: r["first_test"]):
        f = fams.setdefault(
            r["family"],
            {
                "family": r["family"],
                "verdict": r["verdict"],
                "stage": r["stage"],
                "backend": r["backend"],
                "bundles": [],
                "hits": 0,
                "first_test": r["first_test"],
            },
        )
        f["bundles"].append(r["id"])
        f["hits"] += r["hits"]
        # a family of a wrong result and the crashes that follow it holds both verdicts
        for key in ("verdict", "stage"):
            if r[key] and r[key] not in (f[key] or "").split(", "):
                f[key] = f"{f[key]}, {r[key]}" if f[key] else r[key]
    return list(fams.values())


def families_title(rows: list[dict[str, Any]]) -> str:
    """ "4 families, 17 bundles", and the crash signatures joined to the wrong result
    they follow or the crash they repeat, where there are: "(and 9 crash signatures
    joined to a bundle of their cause, not filed)"."""
    n = len(family_rows(rows))
    joined = sum(r.get("follow_ups", 0) for r in rows)
    return (
        f"{n} {'family' if n == 1 else 'families'}, {len(rows)} "
        f"{'bundle' if len(rows) == 1 else 'bundles'}"
        + (
            f" (and {joined} crash signature{'s' if joined != 1 else ''} joined to a bundle "
            "of their cause, not filed)"
            if joined
            else ""
        )
    )


def family_table(rows: list[dict[str, Any]], where: str) -> object:
    """The families of ``rows`` (``summary_rows``), each with its bundles."""
    from rich.table import Table

    table = Table(title=f"{families_title(rows)} {where}")
    for col in ("family", "backend", "verdict", "stage", "bundles", "hits", "first test"):
        table.add_column(col, overflow="fold")
    for f in family_rows(rows):
        table.add_row(
            f["family"],
            f["backend"],
            f["verdict"],
            f["stage"] or "-",
            f"{len(f['bundles'])}: " + " ".join(f["bundles"]),
            str(f["hits"]),
            str(f["first_test"]),
        )
    return table


def console() -> Any:
    """A rich console for stdout: on a terminal, its width (120 at least); into a file or a
    pipe (a CI log), wide enough that no table wraps a bug id mid-word, since a log is
    searched for ids and read with ``less -S``, not at rich's default 80 columns."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console(width=max(120, shutil.get_terminal_size((120, 40)).columns))
    return Console(width=PIPE_WIDTH)


def known_rows(store: Store) -> list[dict[str, Any]]:
    """The known findings this campaign met (``fuzz --known``): per entry of the known
    file, its hits in this campaign, most hit first."""
    record = store.get_meta("known")
    if record is None:
        return []
    try:
        known = KnownFile.from_record(record)
    except (KeyError, TypeError, ValueError):  # another version's record: nothing to list
        return []
    rows = store.db.execute(
        "SELECT backend, signature, COUNT(*) FROM results "
        "WHERE verdict='known' AND signature IS NOT NULL GROUP BY backend, signature"
    )
    hits: dict[tuple[str, str], int] = {}
    entries = {}
    for backend, sig, n in rows:
        entry = known.match(backend, sig)
        if entry is not None:
            hits[(backend, entry.id)] = hits.get((backend, entry.id), 0) + n
            entries[(backend, entry.id)] = entry
    return [
        {
            "family": entry.id,
            "backend": store.names.get(entry.backend, entry.backend),
            "label": entry.backend,
            "verdict": entry.verdict,
            "hits": hits[key],
            "known_hits": entry.hits,
            "bundles": entry.bundles,
        }
        for key, entry in sorted(entries.items(), key=lambda kv: -hits[kv[0]])
    ]


def documented_fault_lines(store: Store) -> list[str]:
    """Per backend, the failures of the ONNX reference evaluator under test where one of
    its documented faults applies, and the wrong values of any backend on a node whose
    semantics ONNX leaves in dispute (both counted as known, neither reduced nor filed),
    by op."""
    lines = []
    for head, what in (
        (
            DOCUMENTED_FAULT,
            "failures of {name} on its documented faults "
            "(onnxfuzz/generate/corpus/reference_limits.py)",
        ),
        (
            DISPUTED_SEMANTICS,
            "wrong values of {name} on ops whose ONNX semantics are disputed, either "
            "reading taken (onnxfuzz/generate/corpus/disputed.py; a wrong value there that "
            "is neither reading is not told apart)",
        ),
    ):
        rows = store.db.execute(
            "SELECT backend, detail FROM results WHERE verdict='known' AND detail LIKE ?",
            (head + "%",),
        )
        by_backend: dict[str, dict[str, int]] = {}
        for backend, detail in rows:
            op = detail[len(head) :].split(":", 1)[0]
            ops = by_backend.setdefault(backend, {})
            ops[op] = ops.get(op, 0) + 1
        lines += [
            f"{sum(ops.values())} {what.format(name=store.names.get(backend, backend))}, "
            "known, neither reduced nor filed: "
            + ", ".join(
                f"{op} {n}" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            for backend, ops in sorted(by_backend.items())
        ]
    return lines


def known_table(rows: list[dict[str, Any]]) -> object:
    from rich.table import Table

    hits = sum(r["hits"] for r in rows)
    table = Table(
        title=f"{hits} hits of {len(rows)} known "
        f"{'family' if len(rows) == 1 else 'families'} (--known: neither reduced nor filed)"
    )
    for col in ("family", "backend", "verdict", "hits", "hits before", "bundles before"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            r["family"],
            r["backend"],
            r["verdict"],
            str(r["hits"]),
            str(r["known_hits"]),
            " ".join(r["bundles"]) or "-",
        )
    return table


def bug_table(rows: list[dict], title: str) -> object:
    from rich.table import Table

    bugs = Table(title=f"{len(rows)} {title}")
    for col in ("id", "family", "verdict", "stage", "suspect", "reduced ops", "hits", "first test"):
        bugs.add_column(col, overflow="fold")
    for r in rows:
        pattern = reduced_ops(r)
        bugs.add_row(
            r["id"],
            r.get("family", "-"),
            r["verdict"],
            r["stage"] or "-",
            r["suspect"] or "-",
            pattern,
            str(r["hits"]),
            str(r["first_test"]),
        )
    return bugs


def diversity_table(
    record: dict[str, Any] | None,
    labels: list[str] | None = None,
    reference: str | None = None,
    names: dict[str, str] | None = None,
) -> object | None:
    """The campaign's model diversity (campaign.db's ``diversity``, written by
    ``onnxfuzz.run.campaign``): over all tests, and per backend over the tests it compiled
    and ran. None when the campaign has none (one older than the metrics)."""
    from rich.table import Table

    if not record:
        return None
    try:
        rows = [("all tests", Diversity.from_record(record["all"]))]
        backends = record.get("backends", {})
        for label in labels if labels is not None else list(backends):
            if label in backends:
                role = " (reference)" if label == reference else ""
                name = (names or {}).get(label, label)
                rows.append((name + role, Diversity.from_record(backends[label])))
    except (KeyError, TypeError, ValueError):  # a record of another version: no table
        return None
    estimated = any(d.estimated() for _, d in rows)
    table = Table(title="model diversity" + (" (~: estimated)" if estimated else ""))
    for col in ("backend", "tests", "ops", "instances", "edges", "triples"):
        table.add_column(col, justify="left" if col == "backend" else "right")
    table.add_column("connectivity", justify="right")
    table.add_column("longest chain", justify="right")
    for name, d in rows:
        s, approx = d.summary(), set(d.estimated())
        counts = [
            ("~" if k in approx else "") + str(s[k]) for k in ("instances", "edges", "triples")
        ]
        table.add_row(
            name,
            str(s["models"]),
            str(s["ops"]),
            *counts,
            f"{s['connectivity']:.0%}",
            f"{s['longest']:.1f}",
        )
    return table


# Verdicts of a backend that compiled and ran the test, and was compared.
COMPARED = ("ok", "mismatch", "unstable")


def optimization_coverage(
    store: Store,
) -> dict[str, dict[str, tuple[list[tuple[str, int]], list[str]]]]:
    """backend -> kind -> ([(name, tests it fired in)], [names known that never fired]),
    from the adapters' optimization feedback (``onnxfuzz.run.optcov``)."""
    out: dict[str, dict[str, tuple[list[tuple[str, int]], list[str]]]] = {}
    for backend, kind, name, tests, _ in store.optimizations():
        fired, never = out.setdefault(backend, {}).setdefault(kind, ([], []))
        if tests:
            fired.append((name, tests))
        else:
            never.append(name)
    return out


def optimization_table(store: Store, labels: list[str]) -> Any:
    """Per backend and kind: how many optimizations fired, the most frequent, the ones
    that never fired, and the feedback hook's share of the backend's time (None: no
    backend gave feedback)."""
    from rich.table import Table

    coverage = optimization_coverage(store)
    costs = store.feedback_costs()
    if not coverage and not costs:
        return None
    table = Table(title="optimization coverage (what the backends' optimizers did)")
    for col in ("backend", "kind", "fired", "most tests", "never fired", "hook time"):
        table.add_column(col, justify="right" if col in ("fired", "hook time") else "left")
    for label in labels:
        tests, backend_s, feedback_s, errors, _ = costs.get(label, (0, 0.0, 0.0, 0, ""))
        cost = f"{feedback_s / backend_s:.1%}" if backend_s > 0 else "-"
        if errors:
            cost += f" ({errors} hook errors)"
        name = store.names.get(label, label)
        for kind, (fired, never) in sorted(coverage.get(label, {}).items()):
            top = ", ".join(f"{n} {k}" for n, k in fired[:4])
            shown = ", ".join(sorted(never)[:8]) + (" ..." if len(never) > 8 else "")
            table.add_row(name, kind, f"{len(fired)}/{len(fired) + len(never)}", top, shown, cost)
    return table


UNSUPPORTED_SHOWN = 3  # reasons shown per backend
# errors only their words call missing support: Python's generic exception types (an
# adapter's RuntimeError("kernel: unsupported broadcast"), 439 tests of a real crash that
# an audit's campaign counted as unsupported and never filed)
_GENERIC = re.compile(
    r"^(RuntimeError|Exception|ValueError|AssertionError|TypeError|KeyError|IndexError):"
)


def _clipped(text: str, chars: int = 120) -> str:
    return text if len(text) <= chars else text[: chars - 3] + "..."


def unsupported_lines(store: Store, labels: list[str]) -> list[str]:
    """Per backend, what it did not support, by reason (its error's first line, without
    the incidental: ``normalize``), most tests first: a count alone hid a crash counted as
    unsupported for its words. A generic Python exception among them is pointed out."""
    by: dict[str, Counter[str]] = {}
    for backend, detail, n in store.unsupported_reasons():
        by.setdefault(backend, Counter())[normalize(detail, lines=1)] += n
    lines = []
    for label in labels:
        reasons = by.get(label)
        if not reasons:
            continue
        name = store.names.get(label, label)
        total = sum(reasons.values())
        shown = [f"{n} {_clipped(r)!r}" for r, n in reasons.most_common(UNSUPPORTED_SHOWN)]
        more = len(reasons) - UNSUPPORTED_SHOWN
        lines.append(
            f"unsupported on {name}: {total} test{'s' if total != 1 else ''}, "
            f"{len(reasons)} reason{'s' if len(reasons) != 1 else ''}: {'; '.join(shown)}"
            + (f"; {more} more (campaign.db's results)" if more > 0 else "")
        )
        generic = [r for r in reasons if _GENERIC.match(r)]
        if generic:
            lines.append(
                f"  {sum(reasons[r] for r in generic)} of them raised a generic Python "
                f"error ({generic[0].split(':')[0]}) whose words read as missing support: if "
                "it is a bug and not a missing op, type or attribute, have the adapter raise "
                "onnxfuzz.backend.Unsupported for what it lacks, or answer is_unsupported("
                "error) itself (docs/adapters.md)"
            )
    return lines


def print_summary(
    store: Store,
    out: Path,
    labels: list[str],
    reference: str,
    overhead: float | None = None,
    wall: str = "reduction excluded",
) -> None:
    """The end-of-campaign summary: verdicts per backend with the share of tests each
    actually ran and was compared on, the bug table, and this run's loop ``overhead``
    (a share of the wall time that ``wall`` describes)."""
    from rich.table import Table

    out_console = console()
    counts = store.counts_by_backend()
    verdicts = sorted({v for _, v in counts})
    table = Table(title=f"{store.n_tests()} tests in {out}")
    table.add_column("backend")
    for v in verdicts:
        table.add_column(v, justify="right")
    table.add_column("compared", justify="right")
    for label in labels:
        role = " (reference)" if label == reference else ""
        total = sum(counts.get((label, v), 0) for v in verdicts)
        ran = sum(counts.get((label, v), 0) for v in COMPARED)
        share = f"{ran / total:.0%}" if total else "-"
        name = store.names.get(label, label)
        table.add_row(name + role, *[str(counts.get((label, v), 0)) for v in verdicts], share)
    out_console.print(table)
    diversity = diversity_table(store.get_meta("diversity"), labels, reference, store.names)
    if diversity is not None:
        out_console.print(diversity)
    optimizations = optimization_table(store, labels)
    if optimizations is not None:
        out_console.print(optimizations)
    rows = summary_rows(store)
    if rows:
        out_console.print(family_table(rows, f"(bundles in {out / 'bugs'})"))
    known = known_rows(store)
    if known:
        out_console.print(known_table(known))
    for line in unsupported_lines(store, labels):
        out_console.print(line, soft_wrap=True, markup=False)
    for line in documented_fault_lines(store):
        out_console.print(line, soft_wrap=True, markup=False)
    # bundles, not "distinct bugs": a family above may hold several of one root cause
    out_console.print(bug_table(rows, f"bundles, one per signature (in {out / 'bugs'})"))
    for line in reduction_lines(rows, out):
        out_console.print(line, soft_wrap=True, markup=False)
    alone = summary_rows(store, reference_alone=True)
    if alone:
        where = out / REFERENCE_BUGS
        name = store.names.get(reference, reference)
        out_console.print(bug_table(alone, reference_title(name, alone, where)))
    cost = store.get_meta("confirmation")
    if cost and cost.get("findings") and cost.get("wall"):
        seconds, spent = cost["wall"], cost["seconds"]
        without = f"{cost['tests'] / (seconds - spent):.1f}" if seconds > spent else "-"
        out_console.print(
            f"confirmation: {cost['findings']} finding(s) re-run in fresh processes, "
            f"{spent:.1f} s of this run's {seconds:.0f} s ({spent / seconds:.1%}); "
            f"{cost['tests'] / seconds:.1f} tests/s with it, {without} without"
        )
    lost = store.not_reproducible()
    if lost:
        out_console.print(
            f"{lost} finding(s) not reproducible: no fresh run re-created them, even after "
            f"the last {EARLIER_MAX} models their worker ran before and its first ones with "
            "the same inputs or op types (not filed as bugs; campaign.db's results keep them)"
        )
    unreplayed = (cost or {}).get("unreplayed")
    if unreplayed:
        out_console.print(
            f"  {unreplayed} of this run's were not replayed after earlier models: "
            f"{cost.get('replay_give_up')} such replays of their signature family had "
            "re-created nothing "
            "(a flaky kernel's hits, or state that no replayed model re-creates)"
        )
    if overhead is not None:
        out_console.print(
            f"fuzz-loop overhead: {overhead:.1%} of this run's wall time ({wall}) "
            "in which no backend compiled or ran"
        )
