"""``onnxfuzz backend list|check``: inspect and check adapters."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from onnxfuzz.cli import exits
from onnxfuzz.cli.options import Finite

if TYPE_CHECKING:
    from onnxfuzz.run.campaign import Campaign


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
        w = Worker(parse_backend(name))
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


def _every_10s() -> Callable[[int, int], None]:
    """``node tests: 300/1884`` on stderr every 10 s: ~1,900 tests take minutes on a slow
    compiler, and a silent command looks hung."""
    last = [time.perf_counter()]

    def report(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 10 or done == total:
            last[0] = now
            click.echo(f"node tests: {done}/{total}", err=True)

    return report


def _smoke_summary(campaign: Campaign) -> None:
    """The smoke campaign's summary, and where it is kept (only when it found bugs)."""
    campaign.print_summary()
    if campaign.store is not None and campaign.store.bugs():
        click.echo(
            f"smoke campaign kept in {campaign.out}: onnxfuzz triage {campaign.out}; "
            f"onnxfuzz replay {campaign.out}/bugs/<id>"
        )


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
@click.option(
    "--timeout",
    type=Finite(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds per test (compile + run) before the adapter is stopped and it counts as a "
    "timeout.",
)
@click.option(
    "--no-probe-cache",
    is_flag=True,
    help="The smoke fuzz probes the backend afresh instead of reusing the probe's cache.",
)
def backend_check(
    name: str,
    ops: str | None,
    limit: int | None,
    smoke: int,
    timeout: float,
    no_probe_cache: bool,
) -> None:
    """Conformance kit for an adapter: ONNX's node tests through it, then a smoke fuzz.
    Exits 1 when a node test fails (wrong values, error, crash, timeout) or the smoke fuzz
    finds a bug."""
    from onnxfuzz.cli.options import resolvable_backend
    from onnxfuzz.run.conformance import node_tests, smoke_fuzz, smoke_reference

    name = resolvable_backend(name)  # the smoke campaign, kept, is replayed from anywhere
    report = node_tests(name, ops=ops, limit=limit, timeout=timeout, progress=_every_10s())
    cols = ["pass", "fail", "error", "crash", "timeout", "unsupported", "skipped"]
    click.echo(f"{'op':<28}" + "".join(f"{c:>12}" for c in cols))
    for op in sorted(report.table):
        click.echo(f"{op:<28}" + "".join(f"{report.table[op][c]:>12}" for c in cols))
    totals = report.totals()
    click.echo(f"{'TOTAL':<28}" + "".join(f"{totals[c]:>12}" for c in cols))
    restamped, converted = report.restamped, report.converted
    if restamped or converted:
        targets = sorted({now for _, now in [*restamped, *converted]})
        click.echo(
            f"  run at opset {' and '.join(map(str, targets))}, stamped outside the adapter's "
            f"opsets: {sum(restamped.values())} tests as they are (their ops are defined the "
            f"same there), {sum(converted.values())} converted by ONNX's version converter "
            "(each converted model checked on the reference evaluator)"
        )
    for why, n in report.skipped.most_common():
        click.echo(f"  skipped {n}: {why}")
    for line in report.failures[:40]:
        click.echo(f"  {line}")
    if len(report.failures) > 40:
        click.echo(f"  ... {len(report.failures) - 40} more")
    bugs = 0
    if smoke:
        click.echo(f"\nsmoke fuzz: {smoke} tests, {smoke_reference(name)} (reference) vs {name}")
        bugs = smoke_fuzz(name, smoke, timeout, _smoke_summary, probe_cache=not no_probe_cache)
    failed = bool(report.failures) or bugs > 0
    raise click.exceptions.Exit(exits.FINDINGS if failed else exits.CLEAN)
