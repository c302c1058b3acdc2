"""Ray executor scaling: campaign tests/s on one Ray node, then with a second node of the
same size, and the local executor's tests/s in the same run.

A local Ray cluster stands in for machines: each node (its raylet, its workers and the
backends' worker processes they spawn) is pinned to a core of its own with
``sched_setaffinity`` (children inherit it) and offers Ray one CPU, so a node is one core.
The campaign process (the driver: it stores, and it would reduce) runs on the head node's
core (``--driver head``, the default), as ``onnxfuzz fuzz`` runs on the head machine in the
README's commands: without it (``--driver free``) the one-node run would get a second core
for its driver that a one-machine cluster does not have. Each repeat measures, back to
back so that they see the same machine load: one node, two nodes (the second node joined,
then removed again), and the local executor (``--workers 1``, the campaign's defaults,
unpinned: the figure that must not change without Ray).

Each run has a time budget (``--seconds``), as a campaign usually has: every node works
until the deadline, so the figure is the steady rate, not the wait for the last shard of a
fixed test count (``--tests N`` measures that instead). tests/s counts from when the
campaign's workers are ready (actors started, lanes started) to the end of its run, as
``Progress`` does; probing and reduction are off (a phase of their own, not the loop).
The ratio is the 2-node rate over the 1-node rate of the same repeat (median printed).
The machine's load average is printed too: other work on these cores slows one node less
than two (it has a core to itself while one node runs).

    PYTHONPATH=. .venv/bin/python tools/bench_ray.py [--seconds 20 | --tests N]
        [--repeat 3] [--driver head|free] [--pair ort/ort:opt=none] [--nodes 5:20]
        [--max-dim 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from onnxfuzz.run.campaign import Campaign, CampaignOptions
from onnxfuzz.run.ray_executor import RayCampaign


@contextmanager
def pinned(cores: set[int] | None) -> Iterator[None]:
    """Processes started inside run on ``cores`` only (None: unchanged)."""
    if cores is None:
        yield
        return
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, mine)


def rate(campaign: Campaign) -> tuple[float, int]:
    """Run a started campaign to its end: tests/s from its run's start, and tests done."""
    try:
        p = campaign.run()
        elapsed = time.perf_counter() - p.started
    finally:
        campaign.close()
    return p.tests / elapsed, p.tests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="time budget per run")
    ap.add_argument("--tests", type=int, default=None, help="a test budget per run instead")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pair", default="ort/ort:opt=none", help="REF/BACKEND")
    ap.add_argument("--nodes", default="5:20")
    ap.add_argument("--max-dim", type=int, default=8)
    ap.add_argument(
        "--driver",
        choices=("head", "free"),
        default="head",
        help="the campaign process on the head node's core, or on any core",
    )
    args = ap.parse_args()

    from ray.cluster_utils import Cluster

    lo, hi = (int(x) for x in args.nodes.split(":"))
    opts = CampaignOptions(
        backends=args.pair.split("/"),
        tests=args.tests,
        seconds=None if args.tests else args.seconds,
        seed=1,
        probe="off",
        reduce=False,
        generator={"min_nodes": lo, "max_nodes": hi, "max_dim": args.max_dim},
    )
    cores = sorted(os.sched_getaffinity(0))
    pins: list[set[int] | None] = [{cores[0]}, {cores[1]}] if len(cores) >= 2 else [None, None]
    print(
        f"{f'{args.tests} tests' if args.tests else f'{args.seconds:g} s'} per run, "
        f"{args.repeat} repeat(s), pair {args.pair}, nodes "
        f"{args.nodes}, max dim {args.max_dim}; Ray nodes pinned to cores "
        f"{[sorted(p) if p else 'all' for p in pins]}, one CPU each; driver on "
        f"{'the head' if args.driver == 'head' else 'any core'}; {len(cores)} cores here"
    )
    # Ray's threads in the driver start with ray.init in RayCampaign.start: pinned around
    # the whole campaign, every one of them runs on the head's core.
    driver = pins[0] if args.driver == "head" else None
    rows: dict[str, list[float]] = {"ray, 1 node": [], "ray, 2 nodes": [], "local": []}
    with pinned(pins[0]):
        cluster = Cluster(
            initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
        )
    try:
        for r in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                with pinned(driver):
                    c = RayCampaign(Path(tmp) / "one", opts, address=cluster.address)
                    c.start()
                    rows["ray, 1 node"].append(rate(c)[0])
                with pinned(pins[1]):
                    second = cluster.add_node(num_cpus=1)
                cluster.wait_for_nodes()
                with pinned(driver):
                    c = RayCampaign(Path(tmp) / "two", opts, address=cluster.address)
                    c.start()
                    rows["ray, 2 nodes"].append(rate(c)[0])
                cluster.remove_node(second)
                local = Campaign(Path(tmp) / "local", opts, resume=False)
                local.start()
                rows["local"].append(rate(local)[0])
            print(
                f"repeat {r + 1}: "
                + ", ".join(f"{k} {v[-1]:.1f} tests/s" for k, v in rows.items())
                + f"; load average {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    finally:
        cluster.shutdown()
    ratios = [two / one for one, two in zip(rows["ray, 1 node"], rows["ray, 2 nodes"], strict=True)]
    print(f"{'executor':<14} {'tests/s':>8}  runs")
    for k, v in rows.items():
        print(f"{k:<14} {statistics.median(v):>8.1f}  [{' '.join(f'{x:.1f}' for x in v)}]")
    print(
        f"2 nodes / 1 node: {statistics.median(ratios):.2f}x "
        f"(per repeat: {' '.join(f'{x:.2f}' for x in ratios)}; target >= 1.8x)"
    )


if __name__ == "__main__":
    main()
