"""``onnxfuzz generate``: export a valid corpus."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from onnxfuzz.cli.options import generator_options, make_config


@click.command()
@click.option("--count", type=click.IntRange(min=1), required=True, help="Number of cases.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Corpus folder (rerun to continue it).",
)
@click.option(
    "--no-reference",
    is_flag=True,
    help="Skip reference outputs (ONNX Runtime's; above opset 26 the ONNX reference evaluator's).",
)
@generator_options
def generate(count: int, out: Path, no_reference: bool, seed: int, **gen: object) -> None:
    """Export a corpus in ONNX's backend-test layout (model.onnx + test_data_set_0/)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from onnxfuzz.generate.corpus.write import export_corpus
    from onnxfuzz.store.folders import writable_folder

    cfg = make_config(**gen)
    writable_folder(out, keep=True)  # the corpus is written into it
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        transient=True,
        disable=not sys.stderr.isatty(),
    ) as bar:
        task = bar.add_task("generating", total=count)
        summary = export_corpus(
            out,
            cfg,
            count,
            seed,
            reference=not no_reference,
            progress=lambda done, total: bar.update(task, completed=done),
        )
    rate = summary.written / summary.seconds if summary.seconds else 0.0
    line = (
        f"{summary.total} cases in {out} ({summary.written} new, "
        f"{summary.skipped_existing} already there; {rate:.0f} cases/s)"
    )
    if not no_reference:
        share = summary.non_finite / max(summary.total, 1)
        line += (
            f"; non-finite reference outputs: {summary.non_finite} ({share:.1%}); "
            f"reference errors: {summary.reference_errors}"
        )
    click.echo(line)
