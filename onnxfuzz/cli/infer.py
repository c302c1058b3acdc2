"""``onnxfuzz infer``: NeuRI-style rules for a domain's ops (onnxfuzz.infer.learn)."""

from __future__ import annotations

from pathlib import Path

import click

from onnxfuzz.cli.options import duration


@click.command()
@click.option("--domain", required=True, help="Op domain, e.g. com.microsoft or ai.onnx.")
@click.option("--backend", "backend", default="ort", show_default=True, help="Backend that labels.")
@click.option("--ops", default=None, help="Only these ops of the domain (comma-separated).")
@click.option(
    "--budget", default="30m", show_default=True, callback=duration, help="Time budget (90s, 10m)."
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Rule file (default: specs/inferred/DOMAIN.json of the source tree).",
)
@click.option(
    "--cache",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Record cache, JSON lines (default: .onnxfuzz-cache/infer/DOMAIN.jsonl); a rerun "
    "resumes from it.",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
def infer(
    domain: str,
    backend: str,
    ops: str | None,
    budget: float,
    out: Path | None,
    cache: Path | None,
    seed: int,
) -> None:
    """Infer input constraints and output-shape rules of DOMAIN's ops from records the
    backend labels valid or invalid; write those verified on held-out records."""
    from onnxfuzz.errors import UsageError
    from onnxfuzz.infer.learn import run_inference
    from onnxfuzz.infer.rules import rules_dir

    if not domain.strip():
        # it ran ONNX's default domain as ".Abs", ".Acos", ...
        raise UsageError("--domain: name a domain, e.g. ai.onnx or com.microsoft (got '')")
    out = out or rules_dir() / f"{domain}.json"
    cache = cache or Path(".onnxfuzz-cache") / "infer" / f"{domain}.jsonl"
    names = [o.strip() for o in ops.split(",") if o.strip()] if ops else None
    summary = run_inference(
        domain,
        backend,
        out,
        cache,
        ops=names,
        budget_s=budget,
        seed=seed,
        progress=lambda line: click.echo(line, err=True),
    )
    for name, why in summary.left_out.items():
        click.echo(f"left out {domain}.{name}: {why}")
    click.echo(
        f"{len(summary.rules)} ops with rules, {len(summary.left_out)} left out, written to "
        f"{out} ({summary.runs} backend runs, {summary.seconds:.0f} s)"
    )
