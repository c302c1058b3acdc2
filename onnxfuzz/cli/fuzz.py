"""``onnxfuzz fuzz``: a differential campaign."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from onnxfuzz.cli import exits
from onnxfuzz.cli.options import duration, generator_fields, generator_options

if TYPE_CHECKING:
    from onnxfuzz.run.campaign import Resumed


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def _progress(p, elapsed: float) -> str:
    """``45/300 tests (12.3/s, 14s, ETA 21s)``: done, budget, rate, time, time left."""
    done = f"{p.tests}/{p.total}" if p.total is not None else f"{p.tests}"
    rate = p.tests / elapsed if elapsed > 0 else 0.0
    eta = p.eta()
    left = f", ETA {_clock(eta)}" if eta is not None else ""
    return f"{done} tests ({rate:.1f}/s, {_clock(elapsed)}{left})"


def _probe_reporter() -> Callable[[str, int, int], None]:
    """A line every 10 s (and at the end) while a backend's support is probed: on a slow
    compiler it takes minutes before the first test, and a silent tool looks hung."""
    last = [time.perf_counter()]

    def report(name: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if done == total or now - last[0] > 10:
            last[0] = now
            # (op, type) pairs first, then each op's forms: one step per op
            click.echo(f"probing {name}: {done}/{total} (op, type) pairs and ops", err=True)

    return report


def _render(campaign, p) -> object:
    from rich.table import Table

    elapsed = time.perf_counter() - p.started
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "campaign",
        f"{campaign.out}  (reference "
        f"{campaign.names.get(campaign.opts.reference_label, campaign.opts.reference_label)}, "
        f"opset {campaign.cfg.opset})",
    )
    t.add_row("tests", _progress(p, elapsed))
    t.add_row("verdicts", "  ".join(f"{k}={v}" for k, v in sorted(p.verdicts.items())) or "-")
    t.add_row("distinct bugs", str(p.bugs))
    if campaign.excluded:
        t.add_row(
            "left out",
            f"{len(campaign.excluded)} ops a backend lacks: "
            + ", ".join(sorted(campaign.excluded)[:10])
            + (" ..." if len(campaign.excluded) > 10 else ""),
        )
    overhead = p.overhead()
    t.add_row(
        "loop overhead",
        f"{overhead:.1%} of wall time outside backend compile+run "
        f"(reduction: {p.reduction:.0f} s, not counted)",
    )
    t.add_row("op mix", ", ".join(f"{k} {v}" for k, v in p.ops.most_common(8)) or "-")
    t.add_row("last test", p.last)
    return t


# --resume: flags that only extend the budget (besides the campaign's RESUMABLE_SETTINGS);
# any other flag would change what it tests and is refused, naming the flag.
_RESUME_BUDGET = {"resume", "out", "tests", "seconds", "no_reduce", "executor", "address"}


def _resumed(ctx: click.Context, tests: int | None, seconds: float | None) -> Resumed:
    """What ``fuzz --resume`` may change, from the flags given on the command line."""
    from click.core import ParameterSource

    from onnxfuzz.errors import UsageError
    from onnxfuzz.run.campaign import RESUMABLE_SETTINGS, Resumed

    given = [
        p
        for p in ctx.command.params
        if ctx.get_parameter_source(p.name) == ParameterSource.COMMANDLINE
    ]
    allowed = _RESUME_BUDGET | set(RESUMABLE_SETTINGS)
    refused = [p.opts[0] for p in given if p.name not in allowed]
    if refused:
        raise UsageError(
            f"{', '.join(refused)}: --resume continues the stored campaign as it was made; "
            "only --tests, --time (more budget), --workers, --timeout, --memory-mb, "
            "--no-reduce, --reduce-budget, --executor and --address may be given. Start a new "
            "--out to change it."
        )
    names = {p.name for p in given}
    settings = {name: ctx.params[name] for name in RESUMABLE_SETTINGS if name in names}
    if "no_reduce" in names:  # the flag that sets the ``reduce`` setting
        settings["reduce"] = not ctx.params["no_reduce"]
    return Resumed(more_tests=tests, seconds=seconds, settings=settings)


@click.command()
@click.option(
    "--backend",
    "backends",
    multiple=True,
    metavar="SPEC",
    help="A backend: a name (`onnxfuzz backend list`), name:key=value options, "
    "path/to/file.py:Class or package.module:Class; NAME=SPEC names it in tables and "
    "bug ids (an ad hoc adapter is otherwise called by its `name`). Repeat it.",
)
@click.option(
    "--reference",
    default=None,
    metavar="SPEC",
    help="The reference backend (default: the first --backend).",
)
@click.option(
    "--time", "seconds", callback=duration, default=None, help="Time budget, e.g. 90s, 10m, 2h."
)
@click.option("--tests", type=click.IntRange(min=1), default=None, help="Number of tests.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Tests run concurrently (each with its own backend workers; --executor local).",
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
    type=click.Choice(["steer", "classify", "exclude", "off"]),
    default="steer",
    show_default=True,
    help="Probe what each backend supports per op and type, and per form of an op (an "
    "attribute value, a computed weight), first. steer: generate only the pairs and forms "
    "every backend supports, so that tests compare all backends; classify: generate "
    "everything, a failure on a pair or form a backend lacks is unsupported; exclude: leave "
    "out only ops a backend lacks in every type; off: no probe.",
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
    help="Generate tests ahead in a process per lane (auto: unless the machine has a single core).",
)
@click.option(
    "--guide",
    type=click.Choice(["mcts", "frontier", "random"]),
    default="random",
    show_default=True,
    help="What steers generation. random: every test is its seed's model; mcts: Monte Carlo "
    "tree search (UCT) picks the ops or blocks each model starts with (with --mutants, some "
    "tests are mutants of earlier ones that added coverage or found a failure), rewarded by "
    "new op-type triples, shape-attribute instances and failure signatures per backend; "
    "frontier: half the tests start with a chain of op types walked over the links the "
    "campaign has made, toward op-type triples it has not (and again over chains that "
    "found a new failure), the other half as under mcts. "
    "Neither is the default: in equal ORT vs TVM campaigns neither has beaten random on "
    "both op-type triples and failure signatures (see README).",
)
@click.option(
    "--mutants",
    type=click.FloatRange(0.0, 1.0),
    default=0.0,
    show_default=True,
    help="With --guide mcts: the share of tests that are mutants (GraphFuzzer's six "
    "mutations) of earlier tests that added an op-type triple or a failure signature.",
)
@click.option(
    "--seed-models",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Mutate these models (*.onnx under DIR): each is lifted into blocks of its ops and "
    "their data flow, which half of the tests instantiate and mutate (shapes, attributes and "
    "weights are drawn anew). Models that are invalid, have external data outside their "
    "folder, or have nothing liftable are skipped and named; control flow and ops without a "
    "spec are left out of a model.",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where tests run: local lanes (--workers), or a Ray cluster (one shard runner per "
    "CPU; needs `pip install onnxfuzz[ray]`). A campaign may be resumed with either.",
)
@click.option(
    "--address",
    default=None,
    metavar="HOST:PORT",
    help="With --executor ray: the cluster's head (`ray start --head` prints it); "
    "default: start a local Ray cluster.",
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
    guide,
    mutants,
    seed_models,
    executor,
    address,
    seed,
    **gen,
) -> None:
    """Differential fuzzing: run generated models on every --backend and compare."""
    from rich.live import Live

    from onnxfuzz.errors import UsageError
    from onnxfuzz.run.campaign import Campaign, CampaignOptions

    if address is not None and executor != "ray":
        raise UsageError("--address: only with --executor ray")
    opts = changes = None
    if resume:
        changes = _resumed(click.get_current_context(), tests, seconds)
    else:
        if seconds is None and tests is None:
            raise UsageError("--time or --tests: give a budget, e.g. --time 10m or --tests 500")
        if seed_models is not None and not seed_models.is_dir():
            raise UsageError(f"--seed-models: {seed_models} is not a folder")
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
            guide=guide,
            mutants=mutants,
            seed_models=str(seed_models) if seed_models is not None else None,
        )
    if executor == "ray":
        from onnxfuzz.run.ray_executor import RayCampaign

        campaign: Campaign = RayCampaign(out, opts, resume, changes, address=address)
    else:
        campaign = Campaign(out, opts, resume, changes)
    try:
        campaign.start(on_probe=_probe_reporter())
        for line in campaign.seed_report:
            click.echo(f"--seed-models: {line}", err=True)
        live = sys.stdout.isatty()
        if live:
            with Live(_render(campaign, campaign.progress), refresh_per_second=4) as screen:
                campaign.run(lambda p: screen.update(_render(campaign, p)))
        else:
            last = [0.0]

            def tick(p) -> None:
                if time.perf_counter() - last[0] > 10:
                    last[0] = time.perf_counter()
                    elapsed = time.perf_counter() - p.started
                    click.echo(
                        f"{_progress(p, elapsed)}, {p.bugs} bugs, "
                        + " ".join(f"{k}={v}" for k, v in sorted(p.verdicts.items()))
                    )

            campaign.run(tick)
        campaign.print_summary()
        found = bool(campaign.store is not None and campaign.store.bugs())
    finally:
        campaign.close()
    if campaign.progress.interrupted:
        click.echo(f"interrupted: continue with  onnxfuzz fuzz --resume --out {out}", err=True)
        raise click.exceptions.Exit(exits.INTERRUPTED)
    raise click.exceptions.Exit(exits.FINDINGS if found else exits.CLEAN)
