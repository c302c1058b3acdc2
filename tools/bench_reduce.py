"""Reduction of planted-bug findings from 20-node models: time and closeness to the trigger.

Planted bugs (adapters in tests/campaign/adapters.py wrapping ONNX Runtime): a wrong Sigmoid
(mismatch), a segfault on a Mul feeding an Add (two-op crash), a wrong Conv, a hang on Tanh.
For each, N findings from 20-node models are reduced (choice shrinking + graph passes),
backend time included. Prints the time distribution and how many ended within one node of
the trigger (exactly the trigger's op types, plus at most one more node).

    .venv/bin/python tools/bench_reduce.py [--findings 10] [--budget 60]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.reduce.reducer import reduce_case
from onnxfuzz.reduce.reproduce import Reproducer, Target

ADAPTERS = Path(__file__).resolve().parents[1] / "tests" / "campaign" / "adapters.py"
OPS = frozenset(
    {
        "Mul",
        "Add",
        "Relu",
        "Sigmoid",
        "Tanh",
        "Neg",
        "Abs",
        "Exp",
        "Sub",
        "Conv",
        "Transpose",
        "Reshape",
        "Concat",
        "Softmax",
        "MatMul",
        "ReduceSum",
        "MaxPool",
    }
)
PLANTED = {  # name -> (adapter, trigger op types, timeout)
    "wrong Sigmoid": ("WrongOp:op=Sigmoid", ["Sigmoid"], 10.0),
    "wrong Conv": ("WrongOp:op=Conv", ["Conv"], 10.0),
    "Mul->Add segfault": ("PairCrash:first=Mul,then=Add", ["Add", "Mul"], 10.0),
    "Tanh hang": ("Hang:op=Tanh", ["Tanh"], 1.0),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--findings", type=int, default=10, help="per planted bug")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds per reduction")
    args = ap.parse_args()
    gen = Generator(Config(min_nodes=20, max_nodes=20, ops=OPS, dtypes=frozenset({1})))
    times: list[float] = []
    within = exact = total = 0
    print(
        f"{'planted bug':<20} {'n':>3} {'median s':>9} {'max s':>7} {'exact':>6} "
        f"{'<=+1':>5}  reduced to"
    )
    for name, (adapter, trigger, timeout) in PLANTED.items():
        label = f"{ADAPTERS}:{adapter}"
        pool = BackendPool(["ort", label], timeout=timeout)
        pool.start()
        rep = Reproducer(pool, Target(label, "ort"))
        mine: list[float] = []
        ends: Counter = Counter()
        n_exact = n_within = 0
        for seed in range(2000):
            if len(mine) == args.findings:
                break
            case = gen.generate(seed)
            a = rep.assess(case.model, case.make_inputs(seed))
            if a.signature is None:
                continue
            rep.target.signature = a.signature
            r = reduce_case(gen, case, rep, args.budget)
            mine.append(r.seconds)
            ops = sorted(r.ops)
            ends[" ".join(ops)] += 1
            rest = Counter(ops)
            rest.subtract(trigger)
            covered = all(v >= 0 for v in rest.values())
            n_exact += ops == sorted(trigger)
            n_within += covered and sum(rest.values()) <= 1
        pool.close()
        times += mine
        exact += n_exact
        within += n_within
        total += len(mine)
        print(
            f"{name:<20} {len(mine):>3} {statistics.median(mine):>9.2f} {max(mine):>7.2f} "
            f"{n_exact:>6} {n_within:>5}  {dict(ends)}"
        )
    q = statistics.quantiles(times, n=10)
    print(
        f"all: {total} findings; reduction time median {statistics.median(times):.2f} s, "
        f"p10 {q[0]:.2f} s, p90 {q[-1]:.2f} s, max {max(times):.2f} s; exactly the trigger "
        f"{exact}/{total} ({exact / total:.0%}); within one node {within}/{total} "
        f"({within / total:.0%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
