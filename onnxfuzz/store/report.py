"""What a campaign found, for people: bug rows, the bug table, the end-of-campaign summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from onnxfuzz.generate.measure.metrics import Diversity
from onnxfuzz.store.db import Store


def summary_rows(store: Store) -> list[dict[str, Any]]:
    rows = []
    for b in store.bugs():
        rows.append(
            {
                "id": b["id"],
                "verdict": b["verdict"],
                "stage": b["stage"],
                "backend": store.names.get(b["backend"], b["backend"]),
                "suspect": store.names.get(b["suspect"], b["suspect"]),
                "pattern": b["pattern"],
                "hits": b["hits"],
                "first_test": b["first_test"],
                "first_seen": b["first_seen"],
                "seeds": json.loads(b["seeds"]),
            }
        )
    return rows


def bug_table(rows: list[dict], title: str) -> object:
    from rich.table import Table

    bugs = Table(title=f"{len(rows)} {title}")
    for col in ("id", "verdict", "stage", "suspect", "reduced ops", "hits", "first test"):
        bugs.add_column(col, overflow="fold")
    for r in rows:
        pattern = r["pattern"].replace("+", " ") if r["pattern"] != "unreduced" else "-"
        bugs.add_row(
            r["id"],
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
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(120, shutil.get_terminal_size((120, 40)).columns))
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
    console.print(table)
    diversity = diversity_table(store.get_meta("diversity"), labels, reference, store.names)
    if diversity is not None:
        console.print(diversity)
    rows = summary_rows(store)
    console.print(bug_table(rows, f"distinct bugs (bundles in {out / 'bugs'})"))
    if overhead is not None:
        console.print(
            f"fuzz-loop overhead: {overhead:.1%} of this run's wall time ({wall}) "
            "in which no backend compiled or ran"
        )
