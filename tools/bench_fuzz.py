"""Fuzz-loop throughput and overhead per backend pair, with one lane and with N.

For each pair it runs campaigns of T tests with ``--workers 1`` and ``--workers N`` (runs
alternate, ``--repeat`` times each, so that both see the same machine load) and prints,
per row, the median over the repeats of:

- tests/s;
- overhead: the share of wall time during which no backend was compiling or running, i.e.
  ``1 - busy / wall`` where ``busy`` is the union of the backends' compile + run intervals
  (measured inside the worker processes on the system-wide monotonic clock; backends of one
  test run in parallel). Generation, input sampling, IPC, judging and storage overlap with
  the backends' work (pipelined lanes) where they can; what does not overlap is overhead;
- cpu: the share of all CPU time (campaign process, workers, generator processes) spent
  outside the backends' compile + run. On a machine with fewer free cores than processes,
  the others' work steals cycles inside a backend's interval: this column shows what the
  wall figure hides;
- cores: CPU seconds per wall second of the whole loop;
- xW1: tests/s of the row over the pair's ``--workers 1`` row (median of the per-repeat
  ratios: each ratio compares two runs taken back to back).

Probing and reduction are off: they are phases of their own, not the loop.

    .venv/bin/python tools/bench_fuzz.py [--tests 300] [--workers 2] [--repeat 1]
        [--nodes 5:20] [--max-dim 8] [--pairs ort/ort:opt=none,ort/tvm,ort/torch]
        [--dtypes float32] [--pregen auto]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from onnxfuzz.run.campaign import Campaign, CampaignOptions

DEFAULT_PAIRS = "ort/ort:opt=none,ort/tvm,ort/torch"


@dataclass
class Measured:
    rate: float  # tests/s
    overhead: float  # wall share with no backend compiling or running
    cpu_overhead: float  # CPU share outside the backends' compile + run
    cores: float  # CPU seconds per wall second
    verdicts: dict


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _processes(c: Campaign) -> list:
    """Everything of the campaign that has a process: workers and generator processes."""
    procs: list = [w for lane in c.lanes for w in lane.workers.values()]
    gens = getattr(c, "pregens", None)  # one generator process per lane
    if gens is None:  # an onnxfuzz with one shared generator process
        gens = [c.pregen] if getattr(c, "pregen", None) is not None else []
    return procs + [g for g in gens if g is not None]


def bench(
    pair: list[str],
    tests: int,
    nodes: tuple[int, int],
    max_dim: int,
    dtypes: list[str] | None = None,
    pregen: bool | None = None,
    workers: int = 1,
) -> Measured:
    with tempfile.TemporaryDirectory() as tmp:
        opts = CampaignOptions(
            backends=pair,
            tests=tests,
            seed=1,
            workers=workers,
            generator={
                "min_nodes": nodes[0],
                "max_nodes": nodes[1],
                "max_dim": max_dim,
                "dtypes": dtypes,
            },
            probe="off",  # the loop itself: no probe, no reduction
            reduce=False,
            pregen=pregen,
        )
        c = Campaign(Path(tmp) / "c", opts, resume=False)
        try:
            c.start()
            procs = _processes(c)
            cpu0 = _own_cpu() + sum(w.cpu_seconds() for w in procs)
            restarts0 = sum(w.restarts for w in procs)
            t0 = time.perf_counter()
            p = c.run()
            wall = time.perf_counter() - t0
            cpu = _own_cpu() + sum(w.cpu_seconds() for w in procs) - cpu0
            if sum(w.restarts for w in procs) != restarts0:
                cpu = float("nan")  # a respawned worker's CPU time is lost: no CPU figure
        finally:
            c.close()
    return Measured(
        p.tests / wall,
        max(0.0, 1 - p.busy / wall),
        1 - p.backend_cpu / cpu,
        cpu / wall,
        {str(k): v for k, v in p.verdicts.items()},
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=300)
    ap.add_argument(
        "--workers", type=int, default=2, help="lanes of the second row (the first has 1)"
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per row, alternating")
    ap.add_argument("--nodes", default="5:20")
    ap.add_argument("--max-dim", type=int, default=8)
    ap.add_argument("--dtypes", default=None, help="e.g. float32 (default: all)")
    ap.add_argument("--pairs", default=DEFAULT_PAIRS, help="comma-separated REF/BACKEND pairs")
    ap.add_argument(
        "--pregen",
        choices=("auto", "on", "off"),
        default="auto",
        help="generate in processes of their own (auto: the campaign's default)",
    )
    args = ap.parse_args()
    pregen = {"auto": None, "on": True, "off": False}[args.pregen]
    nodes = tuple(int(x) for x in args.nodes.split(":"))
    dtypes = args.dtypes.split(",") if args.dtypes else None
    lanes = sorted({1, max(1, args.workers)})
    print(
        f"{args.tests} tests per run, {args.repeat} run(s) per row, nodes {args.nodes}, "
        f"max dim {args.max_dim}, dtypes {args.dtypes or 'all'}, pregen {args.pregen}"
    )
    print(
        f"{'pair':<24} {'workers':>7} {'tests/s':>8} {'xW1':>5} {'overhead':>9} {'cpu':>6} "
        f"{'cores':>6}  runs (tests/s)  verdicts"
    )
    for pair in args.pairs.split(","):
        ref, backend = pair.split("/")
        runs: dict[int, list[Measured]] = {w: [] for w in lanes}
        for _ in range(args.repeat):  # alternate: each repeat sees both rows back to back
            for w in lanes:
                m = bench([ref, backend], args.tests, nodes, args.max_dim, dtypes, pregen, w)
                runs[w].append(m)
        for w in lanes:
            ms = runs[w]
            ratio = statistics.median(m.rate / one.rate for m, one in zip(ms, runs[1], strict=True))
            rates = " ".join(f"{m.rate:.1f}" for m in ms)
            print(
                f"{pair:<24} {w:>7} {statistics.median(m.rate for m in ms):>8.1f} "
                f"{ratio:>5.2f} {statistics.median(m.overhead for m in ms):>9.1%} "
                f"{statistics.median(m.cpu_overhead for m in ms):>6.1%} "
                f"{statistics.median(m.cores for m in ms):>6.2f}  [{rates}]  {ms[-1].verdicts}"
            )


if __name__ == "__main__":
    main()
