"""Soundness check of the specs' value intervals.

Generates models, exposes every intermediate tensor as an output, runs ONNX Runtime, and
checks that each tensor's values lie inside the interval its spec declared (and are
finite). A violation is a spec bug: it names the op, the tensor and both intervals.

    .venv/bin/python tools/check_intervals.py [--count 500] [--nodes 1:25] [--opset 21]
        [--wide-values 1]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from onnx import helper

from onnxfuzz.generate.build.export import to_model
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import run_reference
from onnxfuzz.generate.lang.config import DEFAULT_OPSET, Config
from onnxfuzz.generate.lang.graph import OptionalValue, Sequence, Value, type_proto
from onnxfuzz.generate.lang.intervals import Interval
from onnxfuzz.generate.lang.values import inputs_for


def check(gen: Generator, seed: int) -> list[str]:
    g, _, _ = gen.graph(seed)
    model = to_model(g, gen.cfg.opset, gen.cfg.ir)
    values = {t.name: (n.op_type, t) for n in g.nodes for t in n.outputs}
    have = {o.name for o in model.graph.output}
    for name, (_, t) in values.items():
        if name not in have:  # sequences and optionals with their types
            model.graph.output.append(helper.make_value_info(name, type_proto(t)))
    feeds = inputs_for(
        np.random.default_rng(seed), [(t.name, t.dtype, t.shape) for t in g.inputs], g.input_values
    )
    try:
        outs = run_reference(model, feeds)
    except Exception as e:  # noqa: BLE001 - ORT's own errors: report the seed, go on
        return [f"seed {seed}: onnxruntime failed: {str(e)[:300]}"]
    bad = []
    for name, (op, t) in values.items():
        bad += [f"seed {seed}: {op} {name}: {why}" for why in _violations(outs[name], t)]
    return bad


def _violations(out: object, t: Value) -> list[str]:
    """What in ``out`` (ORT's value) contradicts the facts the generator recorded for
    ``t``: a tensor's interval; a sequence's length and each element's shape and interval;
    whether an optional holds a value."""
    if isinstance(t, OptionalValue):
        if (out is not None) != t.present:
            return [f"holds a value: {out is not None}, declared {t.present}"]
        return _violations(out, t.elem) if out is not None else []
    if isinstance(t, Sequence):
        elems = list(out)  # type: ignore[call-overload]
        if len(elems) != t.length:
            return [f"sequence of {len(elems)}, declared {t.length}"]
        bad = []
        for k, (e, shape, iv) in enumerate(zip(elems, t.shapes, t.intervals, strict=True)):
            if tuple(e.shape) != shape:
                bad.append(f"element {k} has shape {list(e.shape)}, declared {list(shape)}")
            else:
                bad += [f"element {k}: {w}" for w in _interval(np.asarray(e), iv)]
        return bad
    return _interval(np.asarray(out), t.interval)


def _interval(arr: np.ndarray, iv: Interval) -> list[str]:
    v = arr.astype(np.float64)
    if not np.isfinite(v).all():
        return ["non-finite values"]
    if not v.size:
        return []
    lo, hi = float(v.min()), float(v.max())
    slack = 1e-3 * max(1.0, abs(iv.lo), abs(iv.hi))
    if lo < iv.lo - slack or hi > iv.hi + slack:
        return [f"values [{lo:.6g}, {hi:.6g}] outside declared {iv}"]
    return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--nodes", default="1:25")
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--wide-values", type=float, default=None, help="as the CLI's (default: its default)"
    )
    args = ap.parse_args()
    lo, hi = (int(x) for x in args.nodes.split(":"))
    wide = {} if args.wide_values is None else {"wide_values": args.wide_values}
    gen = Generator(Config(min_nodes=lo, max_nodes=hi, opset=args.opset, **wide))
    bad = []
    for s in range(args.seed, args.seed + args.count):
        bad += check(gen, s)
    for line in bad[:50]:
        print(line)
    print(f"{args.count} models, {len(bad)} interval violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
