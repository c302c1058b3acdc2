"""``onnxfuzz replay BUNDLE``: does a bug still reproduce?"""

from __future__ import annotations

from pathlib import Path

import click

from onnxfuzz.cli import exits


@click.command()
@click.argument("bundle", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--timeout", type=float, default=None, help="Override the bundle's timeout.")
def replay(bundle: Path, timeout: float | None) -> None:
    """Run a bug bundle again: exit 1 while it reproduces, 0 once it does not, 4 when it
    fails differently."""
    from onnxfuzz.run.replay import Replayed, replay_bundle

    verdict, message = replay_bundle(bundle, timeout)
    click.echo(message)
    codes = {
        Replayed.REPRODUCES: exits.FINDINGS,
        Replayed.FIXED: exits.CLEAN,
        Replayed.DIFFERENT: exits.DIFFERENT,
    }
    raise click.exceptions.Exit(codes[verdict])
