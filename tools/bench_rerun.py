"""What running each compiled model twice costs: per backend, the second run's share of its
backend time (compile + run + second run) over default generated models, measured in one
run (every outcome times its own second run).

    python tools/bench_rerun.py --backend ort --backend tvm --count 150
"""

from __future__ import annotations

import argparse

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Status
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", action="append", default=[], help="repeatable (default: ort)")
    ap.add_argument("--count", type=int, default=150, help="models (default 150)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=17, help="17: every shipped adapter takes it")
    args = ap.parse_args()
    labels = args.backend or ["ort"]
    gen = Generator(Config(opset=args.opset))
    spent = {label: [0, 0.0, 0.0, 0.0] for label in labels}  # ok tests, compile, run, rerun
    with BackendPool(labels) as pool:
        pool.start()
        for seed in range(args.seed, args.seed + args.count):
            case = gen.generate(seed)
            outcomes = pool.run_all(case.model.SerializeToString(), case.make_inputs(seed))
            for label, o in outcomes.items():
                if o.status == Status.OK:
                    s = spent[label]
                    s[0] += 1
                    s[1] += o.compile_s
                    s[2] += o.run_s
                    s[3] += o.rerun_s
    total = [sum(s[k] for s in spent.values()) for k in range(4)]
    print(f"{'backend':16} {'tests':>6} {'compile s':>10} {'run s':>8} {'rerun s':>8} {'share':>7}")
    for label, (n, c, r, rr) in [*spent.items(), ("all", total)]:
        share = rr / (c + r + rr) if c + r + rr else 0.0
        print(f"{label:16} {n:>6} {c:>10.2f} {r:>8.2f} {rr:>8.2f} {share:>7.1%}")


if __name__ == "__main__":
    main()
