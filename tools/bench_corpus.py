"""Corpus writing with reference outputs (``onnxfuzz generate``): models/s and where the
wall time goes.

Runs ``export_corpus`` for ``--count`` cases into a temporary folder (twice by default:
the first run pays the imports and ONNX Runtime's start, the second is timed), with each
stage's functions wrapped in a wall-clock timer: generation (``Generator.generate``), the
graph inputs (``Case.make_inputs``), the model and input files (``write_test``), the
float16 check (``computes_in_float16``: an ONNX shape inference), the reference run
(``run_reference``: one ONNX Runtime session per model, the floor), the output files
(``write_outputs``); the rest is the journal, the rename into place and the index.

    .venv/bin/python tools/bench_corpus.py [--count 200] [--nodes 5:20] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from onnxfuzz.generate.build import generator
from onnxfuzz.generate.corpus import write
from onnxfuzz.generate.lang.config import Config

SPENT: Counter[str] = Counter()


def timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            SPENT[stage] += time.perf_counter() - t

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--nodes", default="5:20")
    ap.add_argument("--dir", default=None, help="where the temporary corpus goes")
    args = ap.parse_args()
    lo, _, hi = args.nodes.partition(":")
    cfg = Config(min_nodes=int(lo), max_nodes=int(hi or lo))
    # the stages, wrapped where write.py calls them
    generator.Generator.generate = timed("generate", generator.Generator.generate)  # type: ignore[method-assign]
    generator.Case.make_inputs = timed("inputs", generator.Case.make_inputs)  # type: ignore[method-assign]
    write.write_test = timed("model + input files", write.write_test)
    write.computes_in_float16 = timed("float16 check", write.computes_in_float16)
    write.run_reference = timed("reference run (ORT)", write.run_reference)
    write.write_outputs = timed("output files", write.write_outputs)
    print(f"load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        write.export_corpus(Path(tmp) / "warm", cfg, 5, 10_000)  # imports, ORT's start
        SPENT.clear()
        out = Path(tmp) / "corpus"
        t, c = time.perf_counter(), time.process_time()
        write.export_corpus(out, cfg, args.count, 0)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        shutil.rmtree(out)
    print(f"{args.count} cases, --nodes {args.nodes}: {args.count / wall:.1f} models/s "
          f"({wall:.2f} s wall, {cpu:.2f} s CPU in this process)")
    rest = wall - sum(SPENT.values())
    for stage, s in [*SPENT.most_common(), ("journal, rename, index, loop", rest)]:
        print(f"  {stage:<30} {s / wall:6.1%}  {s / args.count * 1e3:7.2f} ms/case")


if __name__ == "__main__":
    main()
