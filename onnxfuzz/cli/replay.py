"""``onnxfuzz replay BUNDLE|DIR``: does a bug still reproduce? Over a campaign folder or
a folder of bundles: a table still / fixed / different (``run.replay_all``)."""

from __future__ import annotations

from pathlib import Path

import click

from onnxfuzz.cli import exits
from onnxfuzz.cli.options import Finite


@click.command()
@click.argument("bundle", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--timeout",
    type=Finite(min=0.1),
    default=None,
    help="Seconds per backend (compile + run) instead of the bundle's own timeout.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    help="For a folder of bundles: a table (default) or JSON.",
)
def replay(bundle: Path, timeout: float | None, fmt: str) -> None:
    """Run a bug bundle again: exit 1 while it reproduces, 0 once it does not, 4 when it
    fails differently. Given a campaign folder (or a folder of bundles), replay each and
    print still / fixed / different: exit 2 if a bundle is damaged, else 4 if one fails
    differently, else 1 if one is still there, else 0 (all fixed)."""
    from onnxfuzz.run.replay import Replayed, replay_bundle

    if not (bundle / "meta.json").exists() and not (bundle / "model.onnx").exists():
        raise click.exceptions.Exit(_replay_folder(bundle, timeout, fmt))

    verdict, message = replay_bundle(bundle, timeout)
    click.echo(message)
    codes = {
        Replayed.REPRODUCES: exits.FINDINGS,
        Replayed.FIXED: exits.CLEAN,
        Replayed.DIFFERENT: exits.DIFFERENT,
    }
    raise click.exceptions.Exit(codes[verdict])


def _replay_folder(folder: Path, timeout: float | None, fmt: str) -> int:
    from onnxfuzz.run.replay_all import DAMAGED, as_json, replay_all

    def progress(row: object) -> None:
        if fmt == "table":
            click.echo(".", nl=False, err=True)

    rows = replay_all(folder, timeout, progress)
    if fmt == "json":
        click.echo(as_json(rows))
    else:
        click.echo("", err=True)
        if not rows:
            click.echo(f"{folder}: a campaign with no bug bundles: nothing to replay")
            return exits.CLEAN
        width = max(len(r.bundle) for r in rows)
        click.echo(f"{'bundle':<{width}}  {'status':<9}  {'backend':<8}  now")
        for r in rows:
            click.echo(f"{r.bundle:<{width}}  {r.status:<9}  {r.backend:<8}  {r.detail[:120]}")
        counts = {s: sum(r.status == s for r in rows) for s in ("still", "fixed", "different")}
        counts[DAMAGED] = sum(r.status == DAMAGED for r in rows)
        click.echo(", ".join(f"{n} {s}" for s, n in counts.items()))
    statuses = {r.status for r in rows}
    if DAMAGED in statuses:
        return exits.USAGE
    if "different" in statuses:
        return exits.DIFFERENT
    return exits.FINDINGS if "still" in statuses else exits.CLEAN
