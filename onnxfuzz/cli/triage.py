"""``onnxfuzz triage DIR``: a campaign's bugs as a table and DIR/triage.md."""

from __future__ import annotations

import datetime
from pathlib import Path

import click


@click.command()
@click.argument("campaign_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
def triage(campaign_dir: Path) -> None:
    """One table over a campaign's bugs, in the terminal and as DIR/triage.md."""
    from rich.console import Console

    from onnxfuzz.errors import UsageError
    from onnxfuzz.store.db import Store
    from onnxfuzz.store.report import bug_table, diversity_table, summary_rows

    db = campaign_dir / "campaign.db"
    if not db.exists():
        raise UsageError(f"{campaign_dir}: no campaign.db; give a folder made by onnxfuzz fuzz")
    store = Store.open_existing(db)
    try:
        rows = summary_rows(store)
        n = store.n_tests()
        diversity = diversity_table(store.get_meta("diversity"), names=store.names)
    finally:
        store.close()
    Console().print(bug_table(rows, f"bugs in {campaign_dir} ({n} tests)"))
    if diversity is not None:
        Console().print(diversity)
    lines = [
        f"# Bugs in {campaign_dir.name}",
        "",
        f"{n} tests, {len(rows)} distinct bugs.",
        "",
        "| id | verdict | stage | suspect | reduced ops | hits | first seen |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        when = datetime.datetime.fromtimestamp(r["first_seen"]).strftime("%Y-%m-%d %H:%M")
        pattern = r["pattern"].replace("+", " ") if r["pattern"] != "unreduced" else "-"
        lines.append(
            f"| [{r['id']}](bugs/{r['id']}/) | {r['verdict']} | {r['stage'] or '-'} | "
            f"{r['suspect'] or '-'} | {pattern} | {r['hits']} | "
            f"test {r['first_test']}, {when} |"
        )
    (campaign_dir / "triage.md").write_text("\n".join(lines) + "\n")
    click.echo(f"written to {campaign_dir / 'triage.md'}")
