"""``onnxfuzz fuzz``: a differential campaign."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from onnxfuzz.cli import exits
from onnxfuzz.cli.options import (
    MAX_TESTS,
    Finite,
    duration,
    generator_fields,
    generator_options,
    neighbours_option,
    resolvable_backend,
)

if TYPE_CHECKING:
    from onnxfuzz.run.campaign import Campaign, Resumed


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


def _results(p, backends: int) -> str:
    """The verdicts so far, which count one per test and backend: said so, since 40 "ok"
    after 20 tests of two backends reads as 40 tests otherwise."""
    counts = " ".join(f"{k}={v}" for k, v in sorted(p.verdicts.items())) or "-"
    return f"{counts} (one per test and backend: {p.tests} tests x {backends})"


def _probe_reporter() -> Callable[[str, int, int], None]:
    """A line when a backend's probe starts, every 10 s, and at its end, with the rate and
    an ETA: on a slow compiler (or a hung adapter) it takes minutes before the first
    test, and a silent tool looks hung. Answers from the probe's cache come first, at
    once: the rate counts only those asked of the backend."""
    state: dict[str, tuple[float, int, float]] = {}  # name -> (started, base, last line)

    def report(name: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if name not in state:  # the probe starts, with what its cache answered
            state[name] = (now, done, float("-inf"))
        started, base, last = state[name]
        if done < total and now - last < 10:
            return
        state[name] = (started, base, now)
        asked, elapsed = done - base, now - started
        line = f"probing {name}: {done}/{total} (op, type) pairs and ops"
        if base:
            line += f" ({base} from the cache)"
        if done < total and asked > 0 and elapsed > 0:
            rate = asked / elapsed
            line += f", {rate:.1f}/s, ETA {_clock((total - done) / rate)}"
        elif done >= total:
            line += f", {_clock(elapsed)}"
            del state[name]  # done: a next probe of this name (another opset) starts afresh
        click.echo(line, err=True)

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
        f"opset {','.join(map(str, campaign.cfg.opsets))})",
    )
    t.add_row("tests", _progress(p, elapsed))
    t.add_row("backend results", _results(p, len(campaign.labels)))
    t.add_row("bundles", str(p.bugs))
    fired = campaign.optcov.summary() if campaign.optcov is not None else ""
    if fired:
        t.add_row("optimizations fired", fired)
    if p.confirmed:
        t.add_row(
            "confirmed",
            f"{p.confirmed} findings in fresh processes ({p.confirming:.0f} s, in the "
            "reduction time)",
        )
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
            "--no-reduce, --reduce-budget, --neighbours, --executor and --address may be "
            "given. Start a new --out to change it."
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
    help="The reference backend: the one whose outputs count as expected when two "
    "backends disagree (default: the first --backend, or a backend given with its "
    "optimizations off beside itself with them on, as ort:opt=none beside ort or "
    "tvm:opt_level=0 beside tvm). Put a backend under test second, or name a trusted one here.",
)
@click.option(
    "--time",
    "seconds",
    callback=duration,
    default=None,
    help="Time budget, e.g. 90s, 10m, 2h. No test starts after it; the tests in flight "
    "end (a hang at its --timeout), and a new bug one of them finds is still confirmed "
    "and reduced (--reduce-budget), so the campaign may end that much later.",
)
@click.option("--tests", type=click.IntRange(1, MAX_TESTS), default=None, help="Number of tests.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Campaign folder: campaign.db, bugs/<id>/ bundles, logs (--resume continues it).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Tests run concurrently (each with its own backend workers; --executor local).",
)
@click.option(
    "--timeout",
    type=Finite(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds per backend per test (compile + run).",
)
@click.option(
    "--memory-mb",
    type=Finite(min=64),
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
@click.option(
    "--atol", type=Finite(min=0), default=None, help="Absolute tolerance for every dtype."
)
@click.option(
    "--rtol", type=Finite(min=0), default=None, help="Relative tolerance for every dtype."
)
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
@click.option(
    "--no-probe-cache",
    is_flag=True,
    help="Probe every backend afresh instead of reusing what earlier campaigns and "
    "`backend check` found (per adapter, version, options and opset, under "
    "$ONNXFUZZ_CACHE or ~/.cache/onnxfuzz).",
)
@click.option("--no-reduce", is_flag=True, help="Do not reduce findings.")
@click.option(
    "--confirm",
    "confirm_runs",
    type=click.IntRange(min=0, max=50),
    default=5,
    show_default=True,
    help="Fresh-process runs of a finding before it is filed (its reproduction rate; "
    "intermittent and state-dependent findings are told apart); 0 files unconfirmed.",
)
@click.option(
    "--reduce-reference",
    is_flag=True,
    help="With one reference and one target, reduce and file failures of the reference "
    "alone as bugs too (by default they are set aside in reference-bugs/, unreduced).",
)
@click.option(
    "--reduce-budget",
    callback=duration,
    default="30s",
    metavar="DURATION",
    show_default=True,
    help="Reduction time per new bug, e.g. 30s, 2m.",
)
@neighbours_option("each new bug's reduced model")
@click.option(
    "--pregen",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Generate tests ahead in a process per lane (auto: unless the machine has a single core).",
)
@click.option(
    "--guide",
    type=click.Choice(["mcts", "frontier", "optcov", "random"]),
    default="random",
    show_default=True,
    help="What steers generation. random: every test is its seed's model; mcts: Monte Carlo "
    "tree search (UCT) picks the ops or blocks each model starts with (with --mutants, some "
    "tests are mutants of earlier ones that added coverage or found a failure), rewarded by "
    "new op-type triples, shape-attribute instances and failure signatures per backend; "
    "frontier: half the tests start with a chain of op types walked over the links the "
    "campaign has made, toward op-type triples it has not (and again over chains that "
    "found a new failure), the other half as under mcts; optcov: a bandit over ops and "
    "blocks (30 % of the tests start with a fusable chain, MatMul/Conv/Gemm then "
    "elementwise ops, 20 % with two blocks, 50 % with the op such tests forced least), "
    "rewarded by what fired first in the backends' optimizers (ORT "
    "transformers and rules, TVM passes and fused patterns: use --op-mix layers for the "
    "optimizers' patterns as blocks) and new bug families. None is the default: mcts and "
    "frontier have not beaten random on both op-type triples and failure signatures; "
    "optcov with --op-mix layers finds 1.5x random's ORT optimizer bug families, and "
    "against TVM about as many bug families as random and 1.1x its fused patterns (see "
    "README).",
)
@click.option(
    "--mutants",
    type=Finite(0.0, 1.0),
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
    "--known",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Known findings (written by `onnxfuzz triage DIR --export-known FILE`): a finding "
    "that matches one is counted as known, listed with its hits, and neither reduced nor "
    "filed; generation avoids the trigger of a family hit --avoid-after times.",
)
@click.option(
    "--avoid-after",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    metavar="K",
    help="With --known: avoid generating the trigger (op and type, or attribute value) of a "
    "bug hit K times or more: a known family from the start (the file's hits), and any bug "
    "as soon as this campaign brings it to K hits; 0: never.",
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
    no_probe_cache,
    no_reduce,
    confirm_runs,
    reduce_reference,
    reduce_budget,
    neighbours,
    pregen,
    guide,
    mutants,
    seed_models,
    known,
    avoid_after,
    executor,
    address,
    seed,
    **gen,
) -> None:
    """Differential fuzzing: run generated models on every --backend and compare."""
    from rich.live import Live

    from onnxfuzz.backend import default_reference
    from onnxfuzz.errors import UsageError
    from onnxfuzz.run.campaign import Campaign, CampaignOptions

    if address is not None and executor != "ray":
        raise UsageError("--address: only with --executor ray")
    opts = changes = None
    chosen = ""  # the default reference, where it is not the first --backend
    third = ""  # a --reference beside the --backend flags
    if resume:
        changes = _resumed(click.get_current_context(), tests, seconds)
    else:
        if seconds is None and tests is None:
            raise UsageError("--time or --tests: give a budget, e.g. --time 10m or --tests 500")
        if seed_models is not None and not seed_models.is_dir():
            raise UsageError(f"--seed-models: {seed_models} is not a folder")
        labels = [resolvable_backend(b) for b in backends]
        if reference is not None:
            reference = resolvable_backend(reference)
            if len(set(labels)) >= 2 and reference not in labels:
                # documented (one --backend and a --reference make a pair), yet easy to
                # miss beside two: a third backend's start and probe can take minutes
                third = (
                    f"--reference {reference} is not among the --backend flags: it is run "
                    "as a third backend (started, probed and compared like them); to "
                    "compare the two alone, name one of them as --reference"
                )
        elif labels and (twin := default_reference(labels)) != labels[0]:
            reference = twin  # stored as given: a resumed campaign keeps it
            # said once the campaign has started (an error stays its one line)
            chosen = (
                f"reference: {twin}, the same backend with its optimizations off (--reference "
                f"{labels[0]} to compare against {labels[0]} instead)"
            )
        opts = CampaignOptions(
            backends=labels,
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
            probe_cache=not no_probe_cache,
            reduce=not no_reduce,
            confirm=confirm_runs,
            reduce_reference=reduce_reference,
            reduce_budget=reduce_budget,
            neighbours=neighbours,
            pregen={"auto": None, "on": True, "off": False}[pregen],
            guide=guide,
            mutants=mutants,
            seed_models=str(seed_models) if seed_models is not None else None,
            known=str(known) if known is not None else None,
            avoid_after=avoid_after,
        )
    if executor == "ray":
        from onnxfuzz.run.ray_executor import RayCampaign

        campaign: Campaign = RayCampaign(out, opts, resume, changes, address=address)
    else:
        campaign = Campaign(out, opts, resume, changes)
    if third:  # before the backends start: it is why a third one does
        click.echo(third, err=True)
    try:
        campaign.start(on_probe=_probe_reporter())
        if chosen:
            click.echo(chosen, err=True)
        for line in campaign.seed_report:
            click.echo(f"--seed-models: {line}", err=True)
        for line in campaign.probe_notes + campaign.known_notes:
            click.echo(line, err=True)
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
                    fired = campaign.optcov.summary() if campaign.optcov is not None else ""
                    click.echo(
                        f"{_progress(p, elapsed)}, {p.bugs} bugs; "
                        f"{_results(p, len(campaign.labels))}"
                        + (f"; optimizations fired: {fired}" if fired else "")
                    )

            campaign.run(tick)
        campaign.print_summary()
        if campaign.avoidance is not None:
            for line in campaign.avoidance.describe():
                click.echo(line)
        found = bool(campaign.store is not None and campaign.store.bugs())
    except KeyboardInterrupt:
        # outside run(), which stops on its own: the backends starting, the probe, the summary
        campaign.progress.interrupted = True
        found = False
    finally:
        campaign.close()
    if campaign.progress.interrupted:
        click.echo(_how_to_go_on(campaign, out), err=True)
        raise click.exceptions.Exit(exits.INTERRUPTED)
    raise click.exceptions.Exit(exits.FINDINGS if found else exits.CLEAN)


def _how_to_go_on(campaign: Campaign, out: Path) -> str:
    """After a Ctrl-C: --resume where campaign.db was written (from the probe on), else
    the same command again (the backends were starting: nothing was stored)."""
    if campaign.store is None:
        return (
            "interrupted before the campaign started (its backends were starting): nothing "
            "to resume; run the same command again"
        )
    return f"interrupted: continue with  onnxfuzz fuzz --resume --out {out}"
