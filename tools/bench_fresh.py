"""What a fresh process of a backend costs: forked from its fork server
(``onnxfuzz.execute.zygote``) against spawned (``ONNXFUZZ_FORK=0``: the next one launched
ahead, as before the fork server), in the same run.

For each backend, ``--calls`` confirmations' worth of ``BackendPool.fresh_runs`` (a small
model run ``--runs`` times in a new process of the backend), first with fork servers, then
without, alternating ``--rounds`` times; a call follows the last one at once (a campaign
that confirms and reduces one finding after another: the spare launched ahead has not
always loaded yet) or after ``--gap`` seconds (time to load it). The first call of each
side (the server's or the first process's load) is left out: the medians are of the calls
after it, and the ratio is spawned / forked.

    .venv/bin/python tools/bench_fresh.py [--backend tvm --backend torch ...] [--calls 6]
        [--runs 5] [--gap 0] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from onnx import TensorProto, helper

from onnxfuzz.execute.pool import BackendPool, Spares
from onnxfuzz.execute.sandbox import Status


def _model() -> tuple[bytes, dict[str, np.ndarray]]:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])]
    g = helper.make_graph(nodes, "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return m.SerializeToString(), {"x": np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)}


def _side(label: str, fork: bool, calls: int, runs: int, gap: float) -> tuple[list[float], str]:
    data, inputs = _model()
    spares = Spares(fork=fork)
    times = []
    with BackendPool([label], spares=spares) as pool:
        for _ in range(calls + 1):
            t = time.perf_counter()
            got = pool.fresh_runs(label, data, inputs, runs)
            times.append(time.perf_counter() - t)
            assert all(o.status == Status.OK for o in got), [o.message for o in got]
            time.sleep(gap)
    spares.close()
    how = "forked" if fork and label not in spares.unforkable else "spawned"
    note = spares.unforkable.get(label, "")
    return times[1:], how + (f" ({note})" if fork and note else "")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", action="append", help="default: ort, tvm, torch, onnx-reference")
    ap.add_argument("--calls", type=int, default=6)
    ap.add_argument("--runs", type=int, default=5, help="runs per call (confirmation: 5)")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds between calls")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    backends = a.backend or ["ort", "tvm", "torch", "onnx-reference"]
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{a.calls} calls of fresh_runs({a.runs} runs) per side and round, {a.gap:g} s apart")
    print(f"{'backend':16} {'forked s':>9} {'spawned s':>10} {'ratio':>6}  fork server")
    for label in backends:
        forked: list[float] = []
        spawned: list[float] = []
        how = ""
        for _ in range(a.rounds):
            f, how = _side(label, True, a.calls, a.runs, a.gap)
            s, _ = _side(label, False, a.calls, a.runs, a.gap)
            forked += f
            spawned += s
        mf, ms = statistics.median(forked), statistics.median(spawned)
        print(f"{label:16} {mf:9.3f} {ms:10.3f} {ms / mf:6.2f}  {how}")
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
