"""The support probe's cost: pairs tried side by side in groups against each pair alone.

For each backend, the probe of every (op, element type) pair of the options (``--ops``,
``--dtypes``; no cache read or written) runs with ``--group`` pairs per model and with
one pair per model (the reference, today's cost before group testing), alternating which
goes first, in one process and one backend pool. It prints each one's wall time, the
model runs it made, the ratio, and whether both found the same unsupported pairs with the
same reasons (they must: a pair's answer is its own single-op run's).

    .venv/bin/python tools/bench_probe.py --backend tvm [--backend torch-compile]
        [--ops Add,Relu,...] [--dtypes float32,int64,...] [--group 8] [--rounds 1]
"""

from __future__ import annotations

import argparse
import time

from onnxfuzz import dtypes as dt
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.probe import probe_backend


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", action="append", required=True)
    ap.add_argument("--ops", default=None, help="comma-separated ops (default: all)")
    ap.add_argument("--dtypes", default=None, help="comma-separated element types")
    ap.add_argument("--opset", type=int, default=None)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0)
    a = ap.parse_args()
    kw: dict = {}
    if a.ops:
        kw["ops"] = frozenset(a.ops.split(","))
    if a.dtypes:
        kw["dtypes"] = frozenset(dt.BY_NAME[n] for n in a.dtypes.split(","))
    if a.opset:
        kw["opset"] = a.opset
    with BackendPool(a.backend, a.timeout) as pool:
        counted = [0]
        run_one = pool.run_one

        def counting(*args, **kwargs):  # the model runs each probe makes
            counted[0] += 1
            return run_one(*args, **kwargs)

        pool.run_one = counting  # type: ignore[method-assign]
        for label in a.backend:
            info = pool.infos[label]
            cfg = Config(**kw)
            top = info.preferred or info.opsets[1]
            if "opset" not in kw and cfg.opset > top:  # as a campaign negotiates it
                cfg = Config(**{**kw, "opset": top})
            times: dict[int, list[float]] = {a.group: [], 1: []}
            runs: dict[int, int] = {}
            found: dict[int, dict] = {}
            for r in range(a.rounds):
                order = (a.group, 1) if r % 2 == 0 else (1, a.group)
                for g in order:
                    before = counted[0]
                    t = time.perf_counter()
                    probed = probe_backend(pool, label, cfg, use_cache=False, group=g)
                    times[g].append(time.perf_counter() - t)
                    runs[g] = counted[0] - before
                    found[g] = probed.support
            alone, grouped = min(times[1]), min(times[a.group])
            print(
                f"{label}: {probed.total} pairs and ops at opset {cfg.opset}; "
                f"alone {alone:.1f} s ({runs[1]} runs), "
                f"{a.group} a model {grouped:.1f} s ({runs[a.group]} runs): "
                f"{alone / grouped:.2f}x; same answers: {found[1] == found[a.group]}"
            )
            if found[1] != found[a.group]:
                for op in sorted(set(found[1]) | set(found[a.group])):
                    if found[1].get(op) != found[a.group].get(op):
                        alone_, grouped_ = found[1].get(op), found[a.group].get(op)
                        print(f"  {op}: alone {alone_} / grouped {grouped_}")


if __name__ == "__main__":
    main()
