"""``onnxfuzz fuzz``, ``replay`` and ``backend``: the differential-testing commands."""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import click

from onnxfuzz.cli import cli, generator_fields, generator_options


def _duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
    if not m:
        raise click.BadParameter(f"expected a duration like 90s, 10m or 2h, got {value!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


def _render(campaign, p) -> object:
    from rich.table import Table

    elapsed = time.perf_counter() - p.started
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "campaign",
        f"{campaign.out}  (reference {campaign.opts.reference_label}, opset {campaign.cfg.opset})",
    )
    t.add_row("tests", f"{p.tests}  ({p.tests / elapsed if elapsed else 0:.1f}/s, {elapsed:.0f} s)")
    t.add_row("verdicts", "  ".join(f"{k}={v}" for k, v in sorted(p.verdicts.items())) or "-")
    t.add_row("distinct bugs", str(p.bugs))
    if campaign.excluded:
        t.add_row(
            "left out",
            f"{len(campaign.excluded)} ops a backend lacks: "
            + ", ".join(sorted(campaign.excluded)[:10])
            + (" ..." if len(campaign.excluded) > 10 else ""),
        )
    overhead = 1 - p.backend / p.wall if p.wall else 0.0
    t.add_row(
        "loop overhead",
        f"{overhead:.1%} of wall time outside backend compile+run "
        f"(reduction: {p.reduction:.0f} s, not counted)",
    )
    t.add_row("op mix", ", ".join(f"{k} {v}" for k, v in p.ops.most_common(8)) or "-")
    t.add_row("last test", p.last)
    return t


def bug_table(rows: list[dict], title: str) -> object:
    from rich.table import Table

    bugs = Table(title=f"{len(rows)} {title}")
    for col in ("id", "verdict", "stage", "suspect", "reduced ops", "hits", "first test"):
        bugs.add_column(col, overflow="fold")
    for r in rows:
        pattern = r["pattern"].replace("+", " ") if r["pattern"] != "unreduced" else "-"
        bugs.add_row(
            r["id"],
            r["verdict"],
            r["stage"] or "-",
            r["suspect"] or "-",
            pattern,
            str(r["hits"]),
            str(r["first_test"]),
        )
    return bugs


def print_summary(campaign) -> None:
    from rich.console import Console
    from rich.table import Table

    from onnxfuzz.campaign import summary_rows

    console = Console(width=max(120, shutil.get_terminal_size((120, 40)).columns))
    store = campaign.store
    counts = store.counts_by_backend()
    verdicts = sorted({v for _, v in counts})
    table = Table(title=f"{store.n_tests()} tests in {campaign.out}")
    table.add_column("backend")
    for v in verdicts:
        table.add_column(v, justify="right")
    for label in campaign.labels:
        role = " (reference)" if label == campaign.opts.reference_label else ""
        table.add_row(label + role, *[str(counts.get((label, v), 0)) for v in verdicts])
    console.print(table)
    rows = summary_rows(store)
    console.print(bug_table(rows, f"distinct bugs (bundles in {campaign.out / 'bugs'})"))
    wall, backend = store.timing()
    if wall:
        console.print(
            f"fuzz-loop overhead: {1 - backend / wall:.1%} of wall time outside backend compile+run"
        )


@cli.command()
@click.option(
    "--backend",
    "backends",
    multiple=True,
    metavar="SPEC",
    help="A backend: a name (`onnxfuzz backend list`), name:key=value options, "
    "path/to/file.py:Class or package.module:Class. Repeat it.",
)
@click.option(
    "--reference",
    default=None,
    metavar="SPEC",
    help="The reference backend (default: the first --backend).",
)
@click.option(
    "--time", "seconds", callback=_duration, default=None, help="Time budget, e.g. 90s, 10m, 2h."
)
@click.option("--tests", type=click.IntRange(min=1), default=None, help="Number of tests.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Tests run concurrently (each with its own backend workers).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds per backend per test (compile + run).",
)
@click.option(
    "--memory-mb",
    type=click.FloatRange(min=64),
    default=8192.0,
    show_default=True,
    help="Resident memory cap of a backend worker.",
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="TOML file: tolerances per dtype and per backend pair, known issues.",
)
@click.option("--atol", type=float, default=None, help="Absolute tolerance for every dtype.")
@click.option("--rtol", type=float, default=None, help="Relative tolerance for every dtype.")
@click.option("--resume", is_flag=True, help="Continue the campaign in --out.")
@click.option(
    "--probe",
    type=click.Choice(["classify", "exclude", "off"]),
    default="classify",
    show_default=True,
    help="Probe what each backend supports per op and type: classify its failures there as "
    "unsupported, or exclude ops a backend lacks in every type, or off.",
)
@click.option("--no-reduce", is_flag=True, help="Do not reduce findings.")
@click.option(
    "--reduce-budget",
    type=click.FloatRange(min=1),
    default=30.0,
    show_default=True,
    help="Seconds of reduction per new bug.",
)
@click.option(
    "--pregen",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Generate tests ahead in a process of their own (auto: when the machine has a core "
    "for it besides the backend workers and the campaign).",
)
@generator_options(opset_default=None)
def fuzz(
    backends,
    reference,
    seconds,
    tests,
    out,
    workers,
    timeout,
    memory_mb,
    config,
    atol,
    rtol,
    resume,
    probe,
    no_reduce,
    reduce_budget,
    pregen,
    seed,
    **gen,
) -> None:
    """Differential fuzzing: run generated models on every --backend and compare."""
    from rich.live import Live

    from onnxfuzz.campaign import Campaign, CampaignOptions
    from onnxfuzz.errors import UsageError

    opts = None
    if not resume or backends:
        if seconds is None and tests is None:
            raise UsageError("--time or --tests: give a budget, e.g. --time 10m or --tests 500")
        opts = CampaignOptions(
            backends=list(backends),
            reference=reference,
            tests=tests,
            seconds=seconds,
            seed=seed,
            workers=workers,
            timeout=timeout,
            memory_mb=memory_mb,
            config=config,
            atol=atol,
            rtol=rtol,
            generator=generator_fields(**gen),
            probe=probe,
            reduce=not no_reduce,
            reduce_budget=reduce_budget,
            pregen={"auto": None, "on": True, "off": False}[pregen],
        )
    campaign = Campaign(out, opts, resume)
    try:
        campaign.start()
        live = sys.stdout.isatty()
        if live:
            with Live(_render(campaign, campaign.progress), refresh_per_second=4) as screen:
                campaign.run(lambda p: screen.update(_render(campaign, p)))
        else:
            last = [0.0]

            def tick(p) -> None:
                if time.perf_counter() - last[0] > 10:
                    last[0] = time.perf_counter()
                    click.echo(
                        f"{p.tests} tests, {p.bugs} bugs, "
                        + " ".join(f"{k}={v}" for k, v in sorted(p.verdicts.items()))
                    )

            campaign.run(tick)
        print_summary(campaign)
    finally:
        campaign.close()


@cli.command()
@click.argument("bundle", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--timeout", type=float, default=None, help="Override the bundle's timeout.")
def replay(bundle: Path, timeout: float | None) -> None:
    """Run a bug bundle again: exit 1 while it reproduces, 0 once it does not."""
    from onnxfuzz.replay import replay_bundle

    code, message = replay_bundle(bundle, timeout)
    click.echo(message)
    raise click.exceptions.Exit(code)


@cli.group()
def backend() -> None:
    """Inspect and check backend adapters."""


@backend.command("list")
def backend_list() -> None:
    """Name, version, opsets and availability of every installed adapter."""
    from onnxfuzz.backend import entry_points
    from onnxfuzz.errors import BackendError
    from onnxfuzz.sandbox import Worker, parse_backend

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
    """Conformance kit for an adapter: ONNX's node tests through it, then a smoke fuzz."""
    from onnxfuzz.conformance import check_backend

    check_backend(name, ops=ops, limit=limit, smoke=smoke, timeout=timeout)
