"""Reduction of real findings: the current strategy against the earlier one, in one run.

The earlier strategy (the reference, measured beside it on the same findings): each pass
starts again from its first candidate after every kept one, choices are zeroed one at a
time, a candidate that two passes or two choice records make alike runs again, and every
candidate is compiled and run. The current one goes on from the kept candidate, zeroes
runs of choices that grow while they are kept, runs each distinct candidate once, and
checks the candidates of a failure the importer raises by the import alone
(``onnxfuzz.reduce.passes.EARLIER``, ``choice_passes._ZeroRuns``, ``Reproducer.remember``,
``Reproducer.use_frontend``).

Findings: the first ``--findings`` of distinct families among default models from
``--seed`` on, failing on ``--backend`` against ``--reference`` (unsupported ops are not
findings). Each is reduced by both, alternating which goes first; prints per finding the
time, backend runs and nodes left, then the sums and ratios.

    .venv/bin/python tools/bench_reduce_strategy.py [--backend tvm] [--findings 10]
"""

from __future__ import annotations

import argparse
import sys
import time

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.judge.signature import family
from onnxfuzz.reduce import passes
from onnxfuzz.reduce.reducer import Reduced, reduce_case
from onnxfuzz.reduce.reproduce import Reproducer, Target


def findings(gen: Generator, pool: BackendPool, args: argparse.Namespace) -> list[tuple[Case, str]]:
    scout = Reproducer(pool, Target(args.backend, args.reference))
    seen: set[str] = set()
    out: list[tuple[Case, str]] = []
    for seed in range(args.seed, args.seed + args.scan):
        case = gen.generate(seed)
        a = scout.assess(case.model, case.make_inputs(seed))
        sig = a.signature
        if sig is None or "unsupported" in sig or family(sig) in seen:
            continue
        seen.add(family(sig))
        out.append((case, sig))
        if len(out) == args.findings:
            break
    return out


def reduce_with(
    current: bool,
    gen: Generator,
    pool: BackendPool,
    args: argparse.Namespace,
    case: Case,
    sig: str,
) -> tuple[Reduced, float]:
    """``case`` reduced by the current strategy (or the earlier one), and its seconds."""
    passes.EARLIER = not current
    rep = Reproducer(
        pool,
        Target(args.backend, args.reference, sig),
        remember=current,
        use_frontend=current,
    )
    t0 = time.perf_counter()
    r = reduce_case(gen, case, rep, args.budget)
    return r, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="tvm")
    ap.add_argument("--reference", default="ort")
    ap.add_argument("--findings", type=int, default=10)
    ap.add_argument("--seed", type=int, default=700000)
    ap.add_argument("--scan", type=int, default=3000, help="seeds to look through at most")
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per reduction")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--timeout", type=float, default=10.0, help="per backend run")
    args = ap.parse_args()
    gen = Generator(Config(opset=args.opset))
    pool = BackendPool([args.reference, args.backend], timeout=args.timeout)
    pool.start()
    try:
        found = findings(gen, pool, args)
        sums = {False: [0.0, 0, 0, 0], True: [0.0, 0, 0, 0]}  # seconds, runs, nodes, done
        print(
            f"{'seed':>8} {'signature':<52} {'earlier s':>9} {'runs':>5} {'nodes':>5} "
            f"{'now s':>7} {'runs':>5} {'nodes':>5}"
        )
        for k, (case, sig) in enumerate(found):
            order = (False, True) if k % 2 == 0 else (True, False)
            row: dict[bool, tuple[Reduced, float]] = {}
            for current in order:
                row[current] = reduce_with(current, gen, pool, args, case, sig)
            for current, (r, secs) in row.items():
                s = sums[current]
                s[0] += secs
                s[1] += r.runs
                s[2] += len(r.ops)
                s[3] += r.complete
            (a, ta), (b, tb) = row[False], row[True]
            print(
                f"{case.seed:>8} {sig[:52]:<52} {ta:>9.2f} {a.runs:>5} {len(a.ops):>5} "
                f"{tb:>7.2f} {b.runs:>5} {len(b.ops):>5}",
                flush=True,
            )
    finally:
        passes.EARLIER = False
        pool.close()
    e, n = sums[False], sums[True]
    print(
        f"{len(found)} findings of {args.backend}: earlier {e[0]:.1f} s, {e[1]} runs, "
        f"{e[2]} nodes left, {e[3]} at a fixed point; now {n[0]:.1f} s, {n[1]} runs, "
        f"{n[2]} nodes left, {n[3]} at a fixed point; time x{n[0] / max(e[0], 1e-9):.2f}, "
        f"runs x{n[1] / max(e[1], 1):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
