"""The ``onnxfuzz`` command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from onnxfuzz import __version__
from onnxfuzz import dtypes as dt
from onnxfuzz.config import DEFAULT_OPSET, Config
from onnxfuzz.errors import OnnxFuzzError


def _nodes(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, int]:
    try:
        lo, _, hi = value.partition(":")
        a, b = int(lo), int(hi or lo)
    except ValueError:
        raise click.BadParameter(f"expected MIN:MAX like 5:20, got {value!r}") from None
    if not 1 <= a <= b:
        raise click.BadParameter(f"need 1 <= MIN <= MAX, got {value!r}")
    return a, b


def _names(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(v.strip() for v in value.split(",") if v.strip())


def generator_options(f=None, *, opset_default: int | None = DEFAULT_OPSET):
    """The options every command that generates models shares."""
    if f is None:
        return lambda g: generator_options(g, opset_default=opset_default)
    opset_help = (
        "Model opset (ONNX Runtime 1.31 runs <= 26)."
        if opset_default
        else "Model opset (default: one every selected backend supports)."
    )
    opts = [
        click.option(
            "--seed",
            type=int,
            default=0,
            show_default=True,
            help="Seed of the first case; case i uses SEED + i.",
        ),
        click.option(
            "--nodes",
            default="1:10",
            show_default=True,
            callback=_nodes,
            help="Node count range MIN:MAX (or N).",
        ),
        click.option(
            "--opset",
            type=click.IntRange(13, 26),
            default=opset_default,
            show_default=opset_default is not None,
            help=opset_help,
        ),
        click.option("--ops", default=None, help="Only these ops (comma-separated)."),
        click.option("--exclude-ops", default=None, help="Never these ops (comma-separated)."),
        click.option(
            "--dtypes",
            default=None,
            help="Element types, e.g. float32,int64 (default: all but bfloat16).",
        ),
        click.option(
            "--picking-rate",
            type=click.FloatRange(0, 1),
            default=0.97,
            show_default=True,
            help="Chance an input reuses an existing tensor.",
        ),
        click.option("--max-rank", type=click.IntRange(0, 8), default=5, show_default=True),
        click.option("--max-dim", type=click.IntRange(1, 65536), default=8, show_default=True),
        click.option(
            "--weights-as-inputs",
            is_flag=True,
            help="Make fresh weights graph inputs instead of initializers.",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def generator_fields(
    nodes: tuple[int, int],
    opset: int | None,
    ops: str | None,
    exclude_ops: str | None,
    dtypes: str | None,
    picking_rate: float,
    max_rank: int,
    max_dim: int,
    weights_as_inputs: bool,
) -> dict:
    """Generator options as plain data (stored with a campaign)."""
    return {
        "min_nodes": nodes[0],
        "max_nodes": nodes[1],
        "opset": opset,
        "ops": sorted(_names(ops)) if ops is not None else None,
        "exclude_ops": sorted(_names(exclude_ops) or ()),
        "dtypes": sorted(dt.NAMES[d] for d in dt.parse_names(dtypes)) if dtypes else None,
        "picking_rate": picking_rate,
        "max_rank": max_rank,
        "max_dim": max_dim,
        "weights_as_initializers": not weights_as_inputs,
    }


def make_config(**gen: object) -> Config:
    f = generator_fields(**gen)  # type: ignore[arg-type]
    return Config(
        min_nodes=f["min_nodes"],
        max_nodes=f["max_nodes"],
        opset=f["opset"],
        ops=frozenset(f["ops"]) if f["ops"] is not None else None,
        exclude_ops=frozenset(f["exclude_ops"]),
        dtypes=frozenset(dt.BY_NAME[n] for n in f["dtypes"]) if f["dtypes"] else dt.DEFAULT,
        picking_rate=f["picking_rate"],
        max_rank=f["max_rank"],
        max_dim=f["max_dim"],
        weights_as_initializers=f["weights_as_initializers"],
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="onnxfuzz")
def cli() -> None:
    """Generate valid random ONNX models and test ONNX compilers and runtimes with them."""


@cli.command()
@click.option("--count", type=click.IntRange(min=1), required=True, help="Number of cases.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Corpus folder (rerun to continue it).",
)
@click.option("--no-reference", is_flag=True, help="Skip ONNX Runtime reference outputs.")
@generator_options
def generate(count: int, out: Path, no_reference: bool, seed: int, **gen: object) -> None:
    """Export a corpus in ONNX's backend-test layout (model.onnx + test_data_set_0/)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from onnxfuzz.corpus import export_corpus

    cfg = make_config(**gen)
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


@cli.command("specs")
@click.option("--opset", type=click.IntRange(13, 26), default=DEFAULT_OPSET, show_default=True)
@click.option(
    "--table",
    is_flag=True,
    help="The coverage table (markdown): versions, dtypes, backends, exclusions.",
)
def specs_cmd(opset: int, table: bool) -> None:
    """List the ops onnxfuzz generates at OPSET, with their element types."""
    if table:
        from onnxfuzz.coverage import markdown

        click.echo(markdown(), nl=False)
        return
    from onnxfuzz.coverage import _main_types
    from onnxfuzz.spec import load_specs, op_info

    rows = []
    for name, spec in load_specs().items():
        info = op_info(name, opset)
        if info is None or not spec.covers(opset):
            continue
        types = ",".join(dt.NAMES[t] for t in _main_types(name, opset)) or "-"
        rows.append(f"{name:<26} v{info.version:<3} {spec.family:<20} {types}")
    click.echo("\n".join(rows))
    click.echo(f"{len(rows)} ops at opset {opset}")


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error is one line naming the flag or thing at fault."""
    import onnxfuzz.cli_fuzz  # noqa: F401 - registers fuzz, replay and backend
    import onnxfuzz.cli_reduce  # noqa: F401 - registers reduce and triage

    try:
        rv = cli.main(args=argv, prog_name="onnxfuzz", standalone_mode=False)
        if isinstance(rv, int):  # click returns a command's Exit code in this mode
            return rv
    except click.exceptions.Exit as e:
        return e.exit_code
    except click.Abort:
        click.echo("onnxfuzz: interrupted", err=True)
        return 130
    except click.ClickException as e:
        click.echo(f"onnxfuzz: error: {e.format_message()}", err=True)
        return 2
    except OnnxFuzzError as e:
        click.echo(f"onnxfuzz: error: {e}", err=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
