"""Fuzz-loop throughput and overhead per backend pair.

For each pair it runs a campaign of N tests (one lane) and prints:

- tests/s;
- overhead: the share of wall time during which no backend was compiling or running, i.e.
  ``1 - busy / wall`` where ``busy`` is the union of the backends' compile + run intervals
  (measured inside the worker processes on the system-wide monotonic clock; backends of one
  test run in parallel). Generation, input sampling, IPC, judging and storage overlap with
  the backends' work (pipelined lanes) where they can; what does not overlap is overhead;
- cpu: the share of all CPU time (campaign process, workers, generator process) spent
  outside the backends' compile + run. On a machine with fewer free cores than processes,
  the others' work steals cycles inside a backend's interval: this column shows what the
  wall figure hides;
- cores: CPU seconds per wall second of the whole loop.

Probing and reduction are off: they are phases of their own, not the loop.

    .venv/bin/python tools/bench_fuzz.py [--tests 300] [--nodes 5:20] [--max-dim 8]
        [--pairs ort/ort:opt=none,ort/tvm,ort/torch] [--dtypes float32] [--pregen auto]
"""

from __future__ import annotations

import argparse
import resource
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


def bench(
    pair: list[str],
    tests: int,
    nodes: tuple[int, int],
    max_dim: int,
    dtypes: list[str] | None = None,
    pregen: bool | None = None,
) -> Measured:
    with tempfile.TemporaryDirectory() as tmp:
        opts = CampaignOptions(
            backends=pair,
            tests=tests,
            seed=1,
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
            workers: list = [w for lane in c.lanes for w in lane.workers.values()]
            if c.pregen is not None:
                workers.append(c.pregen)
            cpu0 = _own_cpu() + sum(w.cpu_seconds() for w in workers)
            restarts0 = sum(w.restarts for w in workers)
            t0 = time.perf_counter()
            p = c.run()
            wall = time.perf_counter() - t0
            cpu = _own_cpu() + sum(w.cpu_seconds() for w in workers) - cpu0
            if sum(w.restarts for w in workers) != restarts0:
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
    ap.add_argument("--nodes", default="5:20")
    ap.add_argument("--max-dim", type=int, default=8)
    ap.add_argument("--dtypes", default=None, help="e.g. float32 (default: all)")
    ap.add_argument("--pairs", default=DEFAULT_PAIRS, help="comma-separated REF/BACKEND pairs")
    ap.add_argument(
        "--pregen",
        choices=("auto", "on", "off"),
        default="auto",
        help="generate in a process of its own (auto: when there is a core for it)",
    )
    args = ap.parse_args()
    pregen = {"auto": None, "on": True, "off": False}[args.pregen]
    nodes = tuple(int(x) for x in args.nodes.split(":"))
    print(
        f"{args.tests} tests per pair, nodes {args.nodes}, max dim {args.max_dim}, "
        f"dtypes {args.dtypes or 'all'}, pregen {args.pregen}"
    )
    print(f"{'pair':<24} {'tests/s':>8} {'overhead':>9} {'cpu':>6} {'cores':>6}  verdicts")
    for pair in args.pairs.split(","):
        ref, backend = pair.split("/")
        dtypes = args.dtypes.split(",") if args.dtypes else None
        m = bench([ref, backend], args.tests, nodes, args.max_dim, dtypes, pregen)
        print(
            f"{pair:<24} {m.rate:>8.1f} {m.overhead:>9.1%} {m.cpu_overhead:>6.1%} "
            f"{m.cores:>6.2f}  {m.verdicts}"
        )


if __name__ == "__main__":
    main()
