"""Diversity benchmark: what corpora of N models cover, at matched mean node counts.

For each node range it generates the same number of models with the generator as it was
before glue and blocks (``--connectivity 0 --blocks 0 --op-mix uniform``), with glue only,
with glue and blocks (``--op-mix uniform``: the defaults until issue 24), and with the
defaults (``--op-mix chains``), and prints the diversity metrics of each
(onnxfuzz.generate.measure.metrics) and the ratio of the defaults to the first; then the
defaults again over as many models as make the same nodes in all as the first ("as many
nodes"), and as the uniform mix (issue 24: the chains mix must not lose op types,
instances or triples at matched nodes). Issue 9's figures: at ~12 mean
nodes (200 models) >= 1,350 op-type triples, at ~31 >= 8,000, op types and instances not
dropping, >= 60 % of node inputs produced by a node and a mean longest chain >= 8 at 20
nodes.

    .venv/bin/python tools/bench_diversity.py [--models 200] [--ranges 5:19,15:47,20:20]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.measure.metrics import Diversity

UNIFORM = "glue + blocks, uniform"
VARIANTS: dict[str, dict] = {
    "before (no glue, no blocks)": {"connectivity": 0.0, "block_rate": 0.0, "op_mix": "uniform"},
    "glue": {"block_rate": 0.0, "op_mix": "uniform"},
    UNIFORM: {"op_mix": "uniform"},
    "glue + blocks + chains (default)": {},
}
FIGURES = ("models", "nodes", "ops", "instances", "edges", "triples", "connectivity", "longest")


def measure(lo: int, hi: int, models: int, seed: int, **options: Any) -> tuple[dict, float]:
    gen = Generator(Config(min_nodes=lo, max_nodes=hi, **options))
    d = Diversity()
    start = time.perf_counter()
    cases = [gen.generate(seed + i) for i in range(models)]
    rate = models / (time.perf_counter() - start)
    for c in cases:
        d.add(c.model)
    return d.summary(), rate


def matched(lo: int, hi: int, nodes: int, seed: int, **options: Any) -> dict:
    """The figures of the first models (seeds from ``seed`` on) whose nodes add up to
    ``nodes`` or more: a corpus of the same total size in nodes as another, so that a
    variant with fewer nodes a model (glue instead of the ops that bring helper nodes) is
    compared on the work a compiler gets, not on the model count."""
    gen = Generator(Config(min_nodes=lo, max_nodes=hi, **options))
    d = Diversity()
    i = 0
    while d.nodes < nodes:
        d.add(gen.generate(seed + i).model)
        i += 1
    return d.summary()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=200)
    ap.add_argument("--ranges", default="5:19,15:47,20:20", help="node ranges MIN:MAX")
    ap.add_argument("--seed", type=int, default=1000)
    args = ap.parse_args()
    for spec in args.ranges.split(","):
        lo, hi = (int(x) for x in spec.split(":"))
        print(f"\n--nodes {lo}:{hi}, {args.models} models")
        print(f"{'':30}" + "".join(f"{f:>13}" for f in FIGURES) + f"{'models/s':>10}")
        base = None
        summaries = {}
        for name, options in VARIANTS.items():
            s, rate = measure(lo, hi, args.models, args.seed, **options)
            base = base or s
            summaries[name] = s
            cells = "".join(
                f"{s[f]:>13.2%}" if f == "connectivity" else f"{s[f]:>13.4g}" for f in FIGURES
            )
            print(f"{name:30}{cells}{rate:>10.0f}")
        ratio = "".join(f"{(s[f] / base[f] if base[f] else float('nan')):>12.2f}x" for f in FIGURES)
        print(f"{'default / before':30}{ratio}")
        # the defaults again, with as many nodes in all as "before" had
        m = matched(lo, hi, round(base["nodes"] * base["models"]), args.seed)
        cells = "".join(
            f"{m[f]:>13.2%}" if f == "connectivity" else f"{m[f]:>13.4g}" for f in FIGURES
        )
        print(f"{'default, as many nodes':30}{cells}")
        ratio = "".join(f"{(m[f] / base[f] if base[f] else float('nan')):>12.2f}x" for f in FIGURES)
        print(f"{'  / before':30}{ratio}")
        # and with as many nodes in all as the uniform mix had
        u = summaries[UNIFORM]
        m = matched(lo, hi, round(u["nodes"] * u["models"]), args.seed)
        cells = "".join(
            f"{m[f]:>13.2%}" if f == "connectivity" else f"{m[f]:>13.4g}" for f in FIGURES
        )
        print(f"{'default, nodes as uniform':30}{cells}")
        ratio = "".join(f"{(m[f] / u[f] if u[f] else float('nan')):>12.2f}x" for f in FIGURES)
        print(f"{'  / uniform':30}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
