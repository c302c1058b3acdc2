"""``onnxfuzz triage DIR``: a campaign's bugs as a table, as DIR/triage.{md,json,sarif},
and each bundle's issue.md written (again) for filing."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("campaign_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "json", "sarif"]),
    default="md",
    show_default=True,
    help="DIR/triage.md (a table), triage.json (every bug's record) or triage.sarif "
    "(SARIF 2.1.0, for code-scanning dashboards); json and sarif also go to stdout.",
)
def triage(campaign_dir: Path, fmt: str) -> None:
    """One table over a campaign's bugs, and a ready-to-file issue.md per bundle."""
    from rich.console import Console

    from onnxfuzz.errors import UsageError
    from onnxfuzz.store import triage as report
    from onnxfuzz.store.db import Store
    from onnxfuzz.store.issue import write_issue
    from onnxfuzz.store.report import bug_table, diversity_table, summary_rows

    db = campaign_dir / "campaign.db"
    if not db.exists():
        raise UsageError(f"{campaign_dir}: no campaign.db; give a folder made by onnxfuzz fuzz")
    store = Store.open_existing(db)
    try:
        rows = summary_rows(store)
        n = store.n_tests()
        diversity = diversity_table(store.get_meta("diversity"), names=store.names)
        versions = store.get_meta("versions") or {}
    finally:
        store.close()
    issues = 0
    for r in rows:
        bundle = campaign_dir / "bugs" / r["id"]
        if (bundle / "meta.json").exists():
            write_issue(bundle)
            issues += 1
    if fmt == "md":
        Console().print(bug_table(rows, f"bugs in {campaign_dir} ({n} tests)"))
        if diversity is not None:
            Console().print(diversity)
        text = report.markdown(campaign_dir, rows, n)
    elif fmt == "json":
        text = report.as_json(campaign_dir, rows, n, versions)
        click.echo(text)
    else:
        text = report.as_sarif(campaign_dir, rows, versions)
        click.echo(text)
    path = campaign_dir / f"triage.{fmt}"
    path.write_text(text)
    click.echo(f"written to {path}; {issues} bundles' issue.md ready to file", err=fmt != "md")
