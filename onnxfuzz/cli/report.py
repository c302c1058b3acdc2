"""``onnxfuzz report DIR [--out FILE]``: a campaign as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("campaign_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the page (default: DIR/report.html).",
)
def report(campaign_dir: Path, out: Path | None) -> None:
    """One HTML page for a campaign: verdicts per backend, tests/s and findings over time,
    coverage curves, what each backend supports, and every bug with its reduced model,
    repro command and versions. Opens offline; share the file."""
    from onnxfuzz.errors import UsageError
    from onnxfuzz.store.db import Store
    from onnxfuzz.store.folders import writable_folder
    from onnxfuzz.store.html_report import write_report

    db = campaign_dir / "campaign.db"
    if not db.exists():
        raise UsageError(f"{campaign_dir}: no campaign.db; give a folder made by onnxfuzz fuzz")
    out = out if out is not None else campaign_dir / "report.html"
    if not out.parent.is_dir():
        raise UsageError(f"--out: {out.parent} is not a folder")
    writable_folder(out.parent, "--out", keep=True)
    store = Store.open_existing(db)
    try:
        if store.get_meta("options") is None:
            raise UsageError(f"{db} holds no campaign options (not a campaign)")
        path = write_report(campaign_dir, store, out)
    finally:
        store.close()
    size = path.stat().st_size
    click.echo(f"written to {path} ({size / 1024:.0f} KiB)")
