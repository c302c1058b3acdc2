"""``onnxfuzz replay BUNDLE``: does a bug still reproduce?"""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("bundle", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--timeout", type=float, default=None, help="Override the bundle's timeout.")
def replay(bundle: Path, timeout: float | None) -> None:
    """Run a bug bundle again: exit 1 while it reproduces, 0 once it does not."""
    from onnxfuzz.run.replay import replay_bundle

    code, message = replay_bundle(bundle, timeout)
    click.echo(message)
    raise click.exceptions.Exit(code)
