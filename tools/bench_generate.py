"""Generation throughput against a bare-proto floor, plus validity of what is generated.

For 5-, 20- and 100-node models this prints:
- models/s of onnxfuzz generation + serialization (no reference runs), one process;
- models/s of building the *same* graphs with bare onnx.helper calls from a prepared
  recipe (the floor: what serializing these graphs costs at minimum), measured in the
  same run, and the ratio of the two;
- validity on a sample (checker full + strict shape inference agreeing with the spec's
  shapes + an ONNX Runtime run matching them), the share of non-finite reference
  outputs, and the number of distinct op types;
- where generation's time goes, by stage (``--no-stages``: not measured): the choice
  stream, spec evaluation (the specs, the spec language), the solver (the builders'
  input choice: reuse, chaining, fresh tensors; the generator loop), glue, value domains
  (intervals, value sampling), proto building (export + serialization) and the inputs
  (``Case.make_inputs``, timed apart: not part of models/s). From a cProfile run of
  ``--profile-models`` models: each function's own time goes to its module's stage, and a
  library function's (numpy, onnx, random) to its callers' stages in proportion to what
  each call site spent. Profiling inflates Python-level work more than C-level, so read
  the shares as a ranking, not as exact fractions.

Rates are medians of ``--rounds`` alternating runs (onnxfuzz, floor, floor, onnxfuzz, ...)
of ``--seconds`` each: on a loaded machine the ratio compares, the rates do not
(``--clock cpu`` counts this process's CPU time instead of the wall clock).

    .venv/bin/python tools/bench_generate.py [--seconds 3] [--rounds 3] [--sample 200]
        [--opset 21] [--no-stages] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import time
from collections import Counter

from onnx import helper, numpy_helper

from onnxfuzz.generate.build.export import _attr_value
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.config import DEFAULT_OPSET, Config
from onnxfuzz.generate.lang.graph import Tensor, type_proto


def recipe(g) -> tuple:
    """Plain data for the floor: no onnxfuzz object is touched while timing it."""
    nodes = [
        (
            n.op_type,
            list(n.inputs),
            [t.name for t in n.outputs],
            n.name,
            {k: _attr_value(v) for k, v in n.attrs.items()},
        )
        for n in g.nodes
    ]
    # tensors as plain data; a sequence or optional as its TypeProto, made here
    vi = lambda ts: [  # noqa: E731
        (t.name, t.dtype, list(t.shape)) if isinstance(t, Tensor) else (t.name, type_proto(t))
        for t in ts
    ]
    inits = [(t.name, a) for t, a in g.initializers]
    return nodes, vi(g.inputs), vi(g.outputs()), vi(g.intermediates()), inits


def _vi(x: tuple):
    return helper.make_tensor_value_info(*x) if len(x) == 3 else helper.make_value_info(*x)


def build_floor(r: tuple, opset: int, ir: int) -> bytes:
    nodes, ins, outs, mids, inits = r
    graph = helper.make_graph(
        [helper.make_node(op, i, o, name=n, **a) for op, i, o, n, a in nodes],
        "g",
        [_vi(x) for x in ins],
        [_vi(x) for x in outs],
        initializer=[numpy_helper.from_array(a, name) for name, a in inits],
        value_info=[_vi(x) for x in mids],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)
    return model.SerializeToString()


def rate(fn, seconds: float, clock=time.perf_counter) -> float:
    """Calls of ``fn`` per second of ``clock`` (``--clock cpu``: ``time.process_time``)."""
    n, start = 0, clock()
    while True:
        fn(n)
        n += 1
        el = clock() - start
        if el >= seconds:
            return n / el


# Stages by where a function is defined (the first match wins); others are libraries,
# whose time goes to their callers.
STAGES: list[tuple[str, str]] = [
    ("onnxfuzz/generate/lang/choices.py", "choice stream"),
    ("onnxfuzz/generate/build/glue.py", "glue"),
    ("onnxfuzz/generate/lang/intervals.py", "value domains"),
    ("onnxfuzz/generate/lang/values.py", "value domains"),
    ("onnxfuzz/generate/build/export.py", "proto building"),
    ("/specs/", "spec evaluation"),
    ("onnxfuzz/generate/lang/", "spec evaluation"),  # domains, shapes, the spec API
    ("onnxfuzz/dtypes.py", "spec evaluation"),
    ("onnxfuzz/generate/build/builder.py", "solver"),  # inputs: reuse, chaining, fresh
    ("onnxfuzz/generate/", "solver"),  # the generator loop, blocks, bodies, sequences
    ("bench_generate.py", "proto building"),  # the timed lambda: SerializeToString's caller
]
STAGE_ORDER = [
    "choice stream",
    "spec evaluation",
    "solver",
    "glue",
    "value domains",
    "proto building",
]


def _stage(func: tuple[str, int, str]) -> str | None:
    path = func[0].replace(os.sep, "/")
    for part, stage in STAGES:
        if part in path:
            return stage
    return None


def stage_shares(gen: Generator, models: int) -> dict[str, float]:
    """Share of generation + serialization time per stage (see the module's docstring)."""
    prof = cProfile.Profile()
    prof.enable()
    for s in range(models):
        gen.generate(s).model.SerializeToString()
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    shares: Counter[str] = Counter()

    def attribute(func: tuple, amount: float, depth: int = 0) -> None:
        stage = _stage(func)
        if stage is not None:
            shares[stage] += amount
            return
        callers = stats.get(func, (0, 0, 0.0, 0.0, {}))[4]
        spent = sum(c[2] + c[3] for c in callers.values()) if callers else 0.0
        if depth > 20 or spent <= 0:
            shares["other"] += amount
            return
        for caller, c in callers.items():
            attribute(caller, amount * (c[2] + c[3]) / spent, depth + 1)

    for func, (_, _, tottime, _, _) in stats.items():
        if tottime > 0:
            attribute(func, tottime)
    total = sum(shares.values()) or 1.0
    return {k: v / total for k, v in shares.items()}


def inputs_rate(gen: Generator, seconds: float, clock=time.perf_counter) -> float:
    cases = [gen.generate(s) for s in range(50)]
    return rate(lambda s: cases[s % 50].make_inputs(s), seconds, clock)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    ap.add_argument("--profile-models", type=int, default=300)
    ap.add_argument("--no-stages", action="store_true")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="rates per second of wall time, or of this process's CPU time (a loaded machine)",
    )
    args = ap.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(
        f"{'nodes':>5} {'models/s':>9} {'floor/s':>9} {'ratio':>6} {'valid':>8} "
        f"{'non-finite':>10} {'op types':>8}"
    )
    breakdown: list[str] = []
    for n in (5, 20, 100):
        cfg = Config(min_nodes=n, max_nodes=n, opset=args.opset)
        gen = Generator(cfg)
        recipes = [recipe(gen.graph(s)[0]) for s in range(500)]
        timed = [
            lambda s, gen=gen: gen.generate(s).model.SerializeToString(),
            lambda s, r=recipes, c=cfg: build_floor(r[s % 500], c.opset, c.ir),
        ]
        rates: list[list[float]] = [[], []]
        for k in range(args.rounds):
            for which in (0, 1) if k % 2 == 0 else (1, 0):
                rates[which].append(rate(timed[which], args.seconds, clock))
        ours, floor = statistics.median(rates[0]), statistics.median(rates[1])
        if not args.no_stages:
            shares = stage_shares(gen, max(args.profile_models // (1 + n // 20), 20))
            per_model = 1e6 / ours
            parts = [
                f"{stage} {shares.get(stage, 0.0):.0%}"
                for stage in [*STAGE_ORDER, "other"]
                if shares.get(stage, 0.0) >= 0.005
            ]
            inputs_us = 1e6 / inputs_rate(gen, min(args.seconds, 1.0), clock)
            breakdown.append(
                f"{n:>5} nodes, {per_model:,.0f} us/model: " + ", ".join(parts)
                + f"; inputs (apart) {inputs_us:,.0f} us/model"
            )
        valid = finite = 0
        ops: set[str] = set()
        sample = args.sample if n < 100 else max(args.sample // 4, 20)
        problems: list[str] = []
        for s in range(sample):
            case = gen.generate(10_000 + s)
            ops.update(case.ops)
            v = validate(case.model, case.make_inputs(s))
            valid += v.ok
            finite += v.ok and v.finite
            if not v.ok and len(problems) < 3:
                problems.append(f"seed {10_000 + s}: {v.problems[0][:200]}")
        print(
            f"{n:>5} {ours:>9.0f} {floor:>9.0f} {ours / floor:>6.2f} "
            f"{valid}/{sample:<4} {(valid - finite) / max(valid, 1):>9.1%} {len(ops):>8}"
        )
        for p in problems:
            print("      invalid:", p)
    print(
        "ratio = onnxfuzz models/s / bare onnx.helper models/s for the same graphs "
        "(1.0 = no overhead; target >= 0.35)"
    )
    if breakdown:
        print("where generation + serialization time goes (cProfile shares):")
        for line in breakdown:
            print(line)
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
