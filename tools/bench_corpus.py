"""Corpus writing with reference outputs (``onnxfuzz generate``): models/s and where the
time goes.

Runs ``export_corpus`` for ``--count`` cases into a temporary folder (after a 5-case
warm-up that pays the imports and ONNX Runtime's start), with each stage's functions
wrapped in a timer: generation (``Generator.generate``), the graph inputs
(``Case.make_inputs``), the model and input files (``write_test``), the float16 check
(``computes_in_float16``), the reference run (``run_reference``: one ONNX Runtime session
per model, the floor), the output files (``write_outputs``), the index (``_write_index``);
the rest is the journal, the rename into place and the loop. Each stage is given in CPU
time (this process, all threads) and wall time: on a loaded machine only the CPU figures
compare.

``--compare TREE`` times another checkout (its ``onnxfuzz`` package, e.g. an untouched
copy of HEAD) against this one, alternately, ``--rounds`` times each, in fresh processes,
and prints both and their ratio. A tree without ``onnxfuzz/specs`` takes the specs of the
editable install: the line naming where each side's code came from says so.

    .venv/bin/python tools/bench_corpus.py [--count 200] [--nodes 5:20] [--dir /tmp]
    .venv/bin/python tools/bench_corpus.py --compare /tmp/base [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REST = "journal, rename, loop"

CPU: Counter[str] = Counter()
WALL: Counter[str] = Counter()


def timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        c, t = time.process_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            CPU[stage] += time.process_time() - c
            WALL[stage] += time.perf_counter() - t

    return wrapper


def measure(count: int, nodes: str, folder: str | None) -> dict[str, Any]:
    """One timed corpus of ``count`` cases with the ``onnxfuzz`` on sys.path."""
    import onnxfuzz
    import onnxfuzz.specs
    from onnxfuzz.generate.build import generator
    from onnxfuzz.generate.corpus import write
    from onnxfuzz.generate.lang.config import Config

    lo, _, hi = nodes.partition(":")
    cfg = Config(min_nodes=int(lo), max_nodes=int(hi or lo))
    # the stages, wrapped where write.py calls them
    generator.Generator.generate = timed("generate", generator.Generator.generate)  # type: ignore[method-assign]
    generator.Case.make_inputs = timed("inputs", generator.Case.make_inputs)  # type: ignore[method-assign]
    for stage, name in [
        ("model + input files", "write_test"),
        ("float16 check", "computes_in_float16"),
        ("reference run (ORT)", "run_reference"),
        ("output files", "write_outputs"),
        ("index", "_write_index"),
    ]:
        setattr(write, name, timed(stage, getattr(write, name)))
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        write.export_corpus(Path(tmp) / "warm", cfg, 5, 10_000)  # imports, ORT's start
        CPU.clear()
        WALL.clear()
        out = Path(tmp) / "corpus"
        t, c = time.perf_counter(), time.process_time()
        write.export_corpus(out, cfg, count, 0)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        shutil.rmtree(out)
    CPU[REST] = cpu - sum(CPU.values())
    WALL[REST] = wall - sum(WALL.values())
    return {
        "code": f"{Path(onnxfuzz.__file__).parent}, specs {list(onnxfuzz.specs.__path__)[0]}",
        "count": count,
        "cpu": cpu,
        "wall": wall,
        "stages_cpu": dict(CPU),
        "stages_wall": dict(WALL),
    }


def report(r: dict[str, Any], nodes: str) -> None:
    n, cpu, wall = r["count"], r["cpu"], r["wall"]
    print(
        f"{n} cases, --nodes {nodes}: {n / cpu:.1f} models/s of CPU ({cpu:.2f} s), "
        f"{n / wall:.1f} models/s of wall ({wall:.2f} s)"
    )
    print(f"  {'stage':<24} {'CPU share':>9} {'CPU ms/case':>11} {'wall share':>10}")
    for stage, s in sorted(r["stages_cpu"].items(), key=lambda kv: -kv[1]):
        w = r["stages_wall"][stage]
        print(f"  {stage:<24} {s / cpu:9.1%} {s / n * 1e3:11.2f} {w / wall:10.1%}")


def compare(other: Path, args: argparse.Namespace) -> None:
    """Alternate fresh processes on ``other``'s onnxfuzz and this tree's, ``args.rounds``
    times each; sums their times."""
    trees = {"other": other.resolve(), "this": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {"other": [], "this": []}
    argv = [__file__, "--count", str(args.count), "--nodes", args.nodes, "--json"]
    if args.dir:
        argv += ["--dir", args.dir]
    print(f"load average (1 min) before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for _ in range(args.rounds):
        for side, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree)}
            done = subprocess.run(
                [sys.executable, *argv], cwd=tree, env=env, capture_output=True, text=True
            )
            if done.returncode != 0:
                sys.exit(f"bench_corpus: the run on {tree} failed:\n{done.stderr[-2000:]}")
            runs[side].append(json.loads(done.stdout.splitlines()[-1]))
    print(f"load average (1 min) after: {os.getloadavg()[0]:.1f}")
    total: dict[str, dict[str, Any]] = {}
    for side, rs in runs.items():
        merged: dict[str, Any] = {"count": sum(r["count"] for r in rs)}
        merged["cpu"] = sum(r["cpu"] for r in rs)
        merged["wall"] = sum(r["wall"] for r in rs)
        for key in ("stages_cpu", "stages_wall"):
            c: Counter[str] = Counter()
            for r in rs:
                c.update(r[key])
            merged[key] = dict(c)
        total[side] = merged
        print(f"\n{side}: {rs[0]['code']}")
        print(
            "  per round, models/s of CPU: " + ", ".join(f"{r['count'] / r['cpu']:.1f}" for r in rs)
        )
        report(merged, args.nodes)
    a, b = total["other"], total["this"]
    print(
        f"\nthis / other: {a['cpu'] / b['cpu']:.2f}x models/s of CPU, "
        f"{a['wall'] / b['wall']:.2f}x of wall ({args.rounds} alternating rounds)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--nodes", default="5:20")
    ap.add_argument("--dir", default=None, help="where the temporary corpus goes")
    ap.add_argument(
        "--compare",
        type=Path,
        default=None,
        metavar="TREE",
        help="another checkout to time against this one, alternately",
    )
    ap.add_argument("--rounds", type=int, default=3, help="runs of each side with --compare")
    ap.add_argument("--json", action="store_true", help="one JSON line (what --compare reads)")
    args = ap.parse_args()
    if args.compare is not None:
        if not (args.compare / "onnxfuzz" / "__init__.py").is_file():
            sys.exit(f"--compare: {args.compare} holds no onnxfuzz package; name a checkout")
        compare(args.compare, args)
        return
    if not args.json:
        print(f"load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    r = measure(args.count, args.nodes, args.dir)
    if args.json:
        print(json.dumps(r))
    else:
        print(r["code"])
        report(r, args.nodes)


if __name__ == "__main__":
    main()
