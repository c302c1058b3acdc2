"""Fuzz-loop throughput and overhead per backend pair.

For each pair it runs a campaign of N tests and prints tests/s and the fuzz-loop overhead:
the share of wall time not spent inside the backends' compile + run (measured inside the
worker processes). Backends of one test run concurrently, so per test the backend time is
the slowest backend's. Generation, input sampling, IPC, judging and storage overlap with
the backends' work (pipelined lanes) where they can. Probing and reduction are off: they are
phases of their own, not the loop.

    .venv/bin/python tools/bench_fuzz.py [--tests 300] [--nodes 5:20] [--max-dim 8]
        [--pairs ort:ort:opt=none,ort:tvm,ort:torch]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from onnxfuzz.campaign import Campaign, CampaignOptions

DEFAULT_PAIRS = "ort/ort:opt=none,ort/tvm,ort/torch"


def bench(
    pair: list[str],
    tests: int,
    nodes: tuple[int, int],
    max_dim: int,
    dtypes: list[str] | None = None,
) -> tuple:
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
        )
        c = Campaign(Path(tmp) / "c", opts, resume=False)
        try:
            c.start()
            t0 = time.perf_counter()
            p = c.run()
            wall = time.perf_counter() - t0
        finally:
            c.close()
    overhead = 1 - p.backend / wall
    return p.tests / wall, overhead, dict(p.verdicts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=300)
    ap.add_argument("--nodes", default="5:20")
    ap.add_argument("--max-dim", type=int, default=8)
    ap.add_argument("--dtypes", default=None, help="e.g. float32 (default: all)")
    ap.add_argument("--pairs", default=DEFAULT_PAIRS, help="comma-separated REF/BACKEND pairs")
    args = ap.parse_args()
    nodes = tuple(int(x) for x in args.nodes.split(":"))
    print(
        f"{args.tests} tests per pair, nodes {args.nodes}, max dim {args.max_dim}, "
        f"dtypes {args.dtypes or 'all'}"
    )
    print(f"{'pair':<24} {'tests/s':>8} {'overhead':>9}  verdicts")
    for pair in args.pairs.split(","):
        ref, backend = pair.split("/")
        dtypes = args.dtypes.split(",") if args.dtypes else None
        rate, overhead, verdicts = bench([ref, backend], args.tests, nodes, args.max_dim, dtypes)
        print(f"{pair:<24} {rate:>8.1f} {overhead:>9.1%}  {verdicts}")


if __name__ == "__main__":
    main()
