"""onnxfuzz generation against Isra's, side by side in one process and one run.

Isra (israProj/isra, the generator of "Isra: ... semantic specifications", its own
``g.work()``) is not part of onnxfuzz: keep a checkout in an ignored folder (``.isra/``) and
pass its path. Nothing of it is copied here; the benchmark only imports it, with a shim for
today's environment: ``settings`` parses ``sys.argv`` at import (given an empty command
line), ``criterion`` imports ``netron`` (a viewer it never calls in ``work()``: an empty
module stands in), and Isra reads its op lists from its own folder (imported from there).

For each node count both generate and serialize models for ``--seconds`` at a time, in
alternating order (Isra first in odd rounds), and the medians of ``--rounds`` rounds are
printed with their ratio: onnxfuzz is ``Generator(Config(min_nodes=n, max_nodes=n))
.generate(seed).model.SerializeToString()``; Isra is ``g.work()[0].SerializeToString()``
with ``MIN_NODE = MAX_NODE = n``. The 1-minute load average is printed as well: the
ratio, not the rates, is what compares across runs on a loaded machine (``--clock cpu``
times each by the CPU time it spent instead).

    .venv/bin/python tools/bench_isra.py --isra .isra [--nodes 5,20] [--seconds 4] [--rounds 3]
        [--clock wall|cpu] [--floor]

``--floor`` also prints each tool's rate as a share of its own bare-proto floor: the same
models (200 of each, made beforehand) rebuilt with bare ``onnx.helper`` calls and
serialized, the measure of ``tools/bench_generate.py``'s target (>= 0.35).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import onnx
from onnx import helper, numpy_helper

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config


@contextlib.contextmanager
def _inside(folder: Path) -> Iterator[None]:
    """Isra imports its modules by bare name and opens its JSON files relative to cwd."""
    old_cwd, old_argv = os.getcwd(), sys.argv
    sys.path.insert(0, str(folder))
    sys.argv = ["g.py"]  # settings.py parses the command line when imported
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(old_cwd)
        sys.argv = old_argv
        sys.path.remove(str(folder))


def load_isra(folder: Path) -> types.ModuleType:
    """Isra's ``g`` module, imported from its checkout."""
    if not (folder / "g.py").is_file():
        raise SystemExit(f"--isra: no g.py in {folder} (give the path of an Isra checkout)")
    sys.modules.setdefault("netron", types.ModuleType("netron"))  # imported, never used
    with _inside(folder):
        return importlib.import_module("g")


def rate(fn: Callable[[int], object], seconds: float, clock: Callable[[], float]) -> float:
    """Calls of ``fn`` per second of ``clock`` (wall time, or this process's CPU time: on a
    machine other jobs load, CPU time is what each generator itself spent)."""
    n, start = 0, clock()
    while True:
        fn(n)
        n += 1
        elapsed = clock() - start
        if elapsed >= seconds:
            return n / elapsed


def recipe(model: onnx.ModelProto) -> tuple:
    """A model as plain data (nodes, typed tensors, initializers as arrays), made before
    timing: the floor rebuilds it with bare ``onnx.helper`` calls (as
    ``tools/bench_generate.py`` does for onnxfuzz's graphs). Only tensors' types are kept
    (neither tool's models here hold a sequence or optional at the top level)."""
    g = model.graph

    def vi(values: Sequence[onnx.ValueInfoProto]) -> list[tuple]:
        out = []
        for v in values:
            t = v.type.tensor_type
            dims = [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim]
            out.append((v.name, t.elem_type, dims if t.HasField("shape") else None))
        return out

    nodes = [
        (
            n.op_type,
            list(n.input),
            list(n.output),
            n.name,
            {a.name: helper.get_attribute_value(a) for a in n.attribute},
        )
        for n in g.node
    ]
    inits = [(t.name, numpy_helper.to_array(t)) for t in g.initializer]
    opsets = [(o.domain, o.version) for o in model.opset_import]
    return nodes, vi(g.input), vi(g.output), vi(g.value_info), inits, opsets, model.ir_version


def build_floor(r: tuple) -> bytes:
    """``recipe``'s model built with bare ``onnx.helper`` calls and serialized."""
    nodes, ins, outs, mids, inits, opsets, ir = r
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node(op, i, o, name=n, **a) for op, i, o, n, a in nodes],
        "g",
        [vi(*x) for x in ins],
        [vi(*x) for x in outs],
        initializer=[numpy_helper.from_array(a, name) for name, a in inits],
        value_info=[vi(*x) for x in mids],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=ir
    )
    return model.SerializeToString()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isra", type=Path, required=True, help="path of an Isra checkout")
    ap.add_argument("--nodes", default="5,20", help="node counts, comma-separated")
    ap.add_argument("--seconds", type=float, default=4.0, help="length of one timed run")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (medians are printed)")
    ap.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="time rates by the wall clock or by this process's CPU time (a loaded machine)",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also time each tool's own graphs rebuilt with bare onnx.helper calls (the "
        "bare-proto floor of tools/bench_generate.py) and print each tool's share of it",
    )
    args = ap.parse_args()
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    g = load_isra(args.isra.resolve())
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"models per second of {'wall' if args.clock == 'wall' else 'CPU'} time")
    print(f"{'nodes':>5} {'onnxfuzz/s':>10} {'isra/s':>8} {'ratio':>6}  per round (ratio)")
    for n in (int(x) for x in args.nodes.split(",")):
        gen = Generator(Config(min_nodes=n, max_nodes=n))
        g.MIN_NODE = g.MAX_NODE = n

        def ours(seed: int, gen: Generator = gen) -> bytes:
            return gen.generate(seed).model.SerializeToString()

        def isra(_: int) -> bytes:
            return g.work()[0].SerializeToString()

        ours_rates: list[float] = []
        isra_rates: list[float] = []
        for r in range(args.rounds):
            order = [(isra, isra_rates), (ours, ours_rates)]
            for fn, out in order if r % 2 == 0 else order[::-1]:
                out.append(rate(fn, args.seconds, clock))
        a, b = statistics.median(ours_rates), statistics.median(isra_rates)
        rounds = " ".join(f"{x / y:.2f}" for x, y in zip(ours_rates, isra_rates, strict=True))
        print(f"{n:>5} {a:>10.0f} {b:>8.0f} {a / b:>6.2f}  {rounds}")
        if args.floor:
            # 200 models of each, made before timing; the floor rebuilds them in turn
            mine = [recipe(gen.generate(seed).model) for seed in range(200)]
            theirs = [recipe(g.work()[0]) for _ in range(200)]
            floors = {}
            for label, rs in (("onnxfuzz", mine), ("isra", theirs)):
                runs = [
                    rate(lambda k, rs=rs: build_floor(rs[k % len(rs)]), args.seconds, clock)
                    for _ in range(args.rounds)
                ]
                floors[label] = statistics.median(runs)
            print(
                f"{'':>5} floor/s: onnxfuzz's graphs {floors['onnxfuzz']:.0f}, isra's "
                f"{floors['isra']:.0f}; share of its own floor: onnxfuzz "
                f"{a / floors['onnxfuzz']:.2f}, isra {b / floors['isra']:.2f}"
            )
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
