"""Soundness check of the specs' value intervals.

Generates models, exposes every intermediate tensor as an output, runs ONNX Runtime, and
checks that each tensor's values lie inside the interval its spec declared (and are
finite). A violation is a spec bug: it names the op, the tensor and both intervals.

    .venv/bin/python tools/check_intervals.py [--count 500] [--nodes 1:25] [--opset 21]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from onnx import helper

from onnxfuzz.generate.config import DEFAULT_OPSET, Config
from onnxfuzz.generate.export import to_model
from onnxfuzz.generate.generator import Generator
from onnxfuzz.generate.validate import run_reference
from onnxfuzz.generate.values import inputs_for


def check(gen: Generator, seed: int) -> list[str]:
    g, _, _ = gen.graph(seed)
    model = to_model(g, gen.cfg.opset, gen.cfg.ir)
    tensors = {t.name: (n.op_type, t) for n in g.nodes for t in n.outputs}
    have = {o.name for o in model.graph.output}
    for name, (_, t) in tensors.items():
        if name not in have:
            model.graph.output.append(helper.make_tensor_value_info(name, t.dtype, t.shape))
    feeds = inputs_for(
        np.random.default_rng(seed), [(t.name, t.dtype, t.shape) for t in g.inputs], g.input_values
    )
    try:
        outs = run_reference(model, feeds)
    except Exception as e:  # noqa: BLE001 - ORT's own errors: report the seed, go on
        return [f"seed {seed}: onnxruntime failed: {str(e)[:300]}"]
    bad = []
    for name, (op, t) in tensors.items():
        v = outs[name].astype(np.float64)
        if not np.isfinite(v).all():
            bad.append(f"seed {seed}: {op} {name}: non-finite values")
            continue
        lo, hi = float(v.min()), float(v.max())
        slack = 1e-3 * max(1.0, abs(t.interval.lo), abs(t.interval.hi))
        if lo < t.interval.lo - slack or hi > t.interval.hi + slack:
            bad.append(
                f"seed {seed}: {op} {name}: values [{lo:.6g}, {hi:.6g}] outside "
                f"declared {t.interval}"
            )
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--nodes", default="1:25")
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.nodes.split(":"))
    gen = Generator(Config(min_nodes=lo, max_nodes=hi, opset=args.opset))
    bad = []
    for s in range(args.seed, args.seed + args.count):
        bad += check(gen, s)
    for line in bad[:50]:
        print(line)
    print(f"{args.count} models, {len(bad)} interval violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
