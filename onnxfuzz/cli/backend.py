"""``onnxfuzz backend list|check``: inspect and check adapters."""

from __future__ import annotations

import click

from onnxfuzz.cli import exits


@click.group()
def backend() -> None:
    """Inspect and check backend adapters."""


@backend.command("list")
def backend_list() -> None:
    """Name, version, opsets and availability of every installed adapter."""
    from onnxfuzz.backend import entry_points
    from onnxfuzz.errors import BackendError
    from onnxfuzz.execute.sandbox import Worker, parse_backend

    rows = []
    for name in sorted(entry_points()):
        w = Worker(parse_backend(name), startup_timeout=300)
        try:
            info = w.start()
            state = "available" if not info.available else f"unavailable: {info.available}"
            rows.append((name, info.version, f"{info.opsets[0]}..{info.opsets[1]}", state))
        except BackendError as e:
            rows.append((name, "-", "-", f"unavailable: {e}"))
        finally:
            w.close()
    width = max(len(r[0]) for r in rows)
    for r in rows:
        click.echo(f"{r[0]:<{width}}  {r[1]:<14} {r[2]:<8} {r[3]}")


@backend.command("check")
@click.argument("name")
@click.option("--ops", default=None, help="Only node tests of these ops (comma-separated).")
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="At most this many node tests."
)
@click.option(
    "--smoke",
    type=click.IntRange(min=0),
    default=50,
    show_default=True,
    help="Tests of the smoke fuzz against ort afterwards (0: none).",
)
@click.option("--timeout", type=float, default=30.0, show_default=True)
def backend_check(
    name: str, ops: str | None, limit: int | None, smoke: int, timeout: float
) -> None:
    """Conformance kit for an adapter: ONNX's node tests through it, then a smoke fuzz.
    Exits 1 when a node test fails (wrong values, error, crash, timeout) or the smoke fuzz
    finds a bug."""
    from onnxfuzz.run.campaign import Campaign
    from onnxfuzz.run.conformance import node_tests, smoke_fuzz, smoke_reference

    report = node_tests(name, ops=ops, limit=limit, timeout=timeout)
    cols = ["pass", "fail", "error", "crash", "timeout", "unsupported", "skipped"]
    click.echo(f"{'op':<28}" + "".join(f"{c:>12}" for c in cols))
    for op in sorted(report.table):
        click.echo(f"{op:<28}" + "".join(f"{report.table[op][c]:>12}" for c in cols))
    totals = report.totals()
    click.echo(f"{'TOTAL':<28}" + "".join(f"{totals[c]:>12}" for c in cols))
    for why, n in report.skipped.most_common():
        click.echo(f"  skipped {n}: {why}")
    for line in report.failures[:40]:
        click.echo(f"  {line}")
    if len(report.failures) > 40:
        click.echo(f"  ... {len(report.failures) - 40} more")
    bugs = 0
    if smoke:
        click.echo(f"\nsmoke fuzz: {smoke} tests, {smoke_reference(name)} (reference) vs {name}")
        bugs = smoke_fuzz(name, smoke, timeout, Campaign.print_summary)
    failed = bool(report.failures) or bugs > 0
    raise click.exceptions.Exit(exits.FINDINGS if failed else exits.CLEAN)
