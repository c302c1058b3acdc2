"""What a campaign found, for people: bug rows, the bug table, the end-of-campaign summary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from onnxfuzz.store.db import Store


def summary_rows(store: Store) -> list[dict[str, Any]]:
    rows = []
    for b in store.bugs():
        rows.append(
            {
                "id": b["id"],
                "verdict": b["verdict"],
                "stage": b["stage"],
                "backend": b["backend"],
                "suspect": b["suspect"],
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


# Verdicts of a backend that compiled and ran the test, and was compared.
COMPARED = ("ok", "mismatch", "unstable")


def print_summary(
    store: Store, out: Path, labels: list[str], reference: str, overhead: float | None = None
) -> None:
    """The end-of-campaign summary: verdicts per backend with the share of tests each
    actually ran and was compared on, the bug table, and this run's loop ``overhead``."""
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
        table.add_row(label + role, *[str(counts.get((label, v), 0)) for v in verdicts], share)
    console.print(table)
    rows = summary_rows(store)
    console.print(bug_table(rows, f"distinct bugs (bundles in {out / 'bugs'})"))
    if overhead is not None:
        console.print(
            f"fuzz-loop overhead: {overhead:.1%} of this run's wall time (reduction excluded) "
            "in which no backend compiled or ran"
        )
