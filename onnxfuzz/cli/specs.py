"""``onnxfuzz specs``: the ops onnxfuzz generates."""

from __future__ import annotations

import click

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.config import DEFAULT_OPSET, MAX_OPSET, MIN_OPSET


@click.command("specs")
@click.option(
    "--opset", type=click.IntRange(MIN_OPSET, MAX_OPSET), default=DEFAULT_OPSET, show_default=True
)
@click.option(
    "--table",
    is_flag=True,
    help="The coverage table (markdown): versions, dtypes, backends, exclusions.",
)
@click.option("--blocks", "show_blocks", is_flag=True, help="The blocks (real-model patterns).")
def specs_cmd(opset: int, table: bool, show_blocks: bool) -> None:
    """List the ops onnxfuzz generates at OPSET, with their element types."""
    if show_blocks:
        from onnxfuzz.generate.build.blocks import BLOCKS, OPTIMIZER_BLOCKS

        for name, steps in BLOCKS.items():
            click.echo(f"{name:<28} {' -> '.join(s.op for s in steps)}")
        click.echo(f"{len(BLOCKS)} blocks (--blocks P: the chance a drawn op starts one)")
        for name, steps in OPTIMIZER_BLOCKS.items():
            click.echo(f"{name:<28} {' -> '.join(s.op for s in steps)}")
        click.echo(f"{len(OPTIMIZER_BLOCKS)} more with --op-mix layers (the optimizers' patterns)")
        return
    if table:
        from onnxfuzz.generate.measure.coverage import markdown

        click.echo(markdown(), nl=False)
        return
    from onnxfuzz.generate.lang.spec import load_specs, op_info
    from onnxfuzz.generate.measure.coverage import main_types

    rows = []
    for name, spec in load_specs().items():
        info = op_info(name, opset)
        if info is None or not spec.covers(opset):
            continue
        types = ",".join(dt.NAMES[t] for t in main_types(name, opset)) or "-"
        rows.append(f"{name:<26} v{info.version:<3} {spec.family:<20} {types}")
    click.echo("\n".join(rows))
    click.echo(f"{len(rows)} ops at opset {opset}")
