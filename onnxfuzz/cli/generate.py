"""``onnxfuzz generate``: export a valid corpus."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from onnxfuzz.cli import exits
from onnxfuzz.cli.options import generator_options, make_config

if TYPE_CHECKING:
    from onnxfuzz.generate.corpus.write import Summary


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
        done = [0]  # cases in place, for the line a Ctrl-C leaves

        def progress(at: int, total: int) -> None:
            done[0] = at
            bar.update(task, completed=at)

        try:
            summary = export_corpus(
                out, cfg, count, seed, reference=not no_reference, progress=progress
            )
        except KeyboardInterrupt:
            # the corpus is journaled case by case: the same command goes on from here
            click.echo(
                f"interrupted: {done[0]} of {count} cases are in {out}; run the same "
                "command again to continue it",
                err=True,
            )
            raise click.exceptions.Exit(exits.INTERRUPTED) from None
    click.echo(summary_line(summary, out, count, no_reference))


def summary_line(summary: Summary, out: Path, count: int, no_reference: bool) -> str:
    """What a finished run says: the cases in the corpus, new and already there, the
    rate, the reference's non-finite outputs and errors. A corpus that held more than
    --count says so (it read "400 cases (0 new, 300 already there)": the 300 of --count)."""
    rate = summary.written / summary.seconds if summary.seconds else 0.0
    if summary.total > count:
        there = summary.total - summary.written
        said = f"{summary.written} new; {there} were already there, more than --count {count}"
    else:
        said = f"{summary.written} new, {summary.skipped_existing} already there"
    line = f"{summary.total} cases in {out} ({said}; {rate:.0f} cases/s)"
    if not no_reference:
        share = summary.non_finite / max(summary.total, 1)
        line += (
            f"; non-finite reference outputs: {summary.non_finite} ({share:.1%}); "
            f"reference errors: {summary.reference_errors}"
        )
    return line
