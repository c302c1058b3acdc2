"""Report rendering time and page size on a large synthetic campaign.

Builds a campaign.db of ``--tests`` tests (default 200,000) through the Store API (meta,
diversity snapshots) with the tests, results and bugs bulk-inserted in the Store's own
schema: four backends, a realistic spread of verdicts, ``--bugs`` distinct bugs with
Zipf-like hit counts (each with a bundle: meta.json, log.txt, a reduced model of 1-6
nodes or an unreduced one of 8-24), ~80 tests/s with one two-hour pause (a resume), a
diversity snapshot every 400 tests, and probe results for every backend. Then it prints:

- render: ``write_report`` in this process (queries, bundles, SVG, HTML), median of
  ``--repeat`` runs;
- cli: ``python -m onnxfuzz report DIR`` end to end in a fresh process (imports included);
- the page's size;
- two references measured in the same run: a full scan of the tests and results tables
  (``SELECT COUNT(*), SUM(...)``), and the render of a 2,000-test campaign built the same
  way (``--bugs`` / 10 bugs), with the ratios to both.

Issue 13's targets: render < 2 s and page < 5 MB at 200,000 tests.

    .venv/bin/python tools/bench_report.py [--tests 200000] [--bugs 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from onnxfuzz.generate.build.single_op import single_op_pairs
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.judge.signature import bug_id
from onnxfuzz.store.db import Store
from onnxfuzz.store.html_report import write_report

BACKENDS = ["ort", "tvm", "torch", "openvino"]
VERSIONS = {"ort": "1.31.1", "tvm": "0.27.0", "torch": "2.14.1", "openvino": "2026.1"}
# verdict shares of a non-reference backend's results (the reference is mostly ok)
SPREAD = {
    "ok": 0.86,
    "unsupported": 0.06,
    "unstable": 0.03,
    "mismatch": 0.02,
    "crash": 0.01,
    "timeout": 0.003,
    "too-costly": 0.005,
    "known": 0.012,
}
UNARY = ["Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp", "Softplus", "Sqrt", "Floor", "Erf"]
RATE = 80.0  # tests/s
PAUSE = 7200.0  # seconds between the first run and its resume


def _model(rng: random.Random, nodes: int) -> onnx.ModelProto:
    """A chain with a side branch or two: what a reduced or unreduced model looks like."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    made, names = [], ["x"]
    for i in range(nodes):
        a = rng.choice(names[-3:])
        if i % 4 == 3 and len(names) > 1:
            made.append(helper.make_node("Add", [a, names[-1]], [f"t{i}"]))
        else:
            made.append(helper.make_node(rng.choice(UNARY), [a], [f"t{i}"]))
        names.append(f"t{i}")
    y = helper.make_tensor_value_info(names[-1], TensorProto.FLOAT, [2, 3])
    return helper.make_model(helper.make_graph(made, "g", [x], [y]))


def build(folder: Path, tests: int, n_bugs: int, seed: int = 0) -> Path:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    cfg = Config(opset=21)
    options = {"backends": BACKENDS, "reference": "ort", "seed": 0, "tests": tests}
    options |= {"generator": cfg.to_record(), "probe": "steer"}
    store = Store.create(folder / "campaign.db", {"options": options})
    store.names = {b: b for b in BACKENDS}
    store.set_meta("names", store.names)
    store.set_meta("versions", VERSIONS)
    store.set_meta("opset", 21)
    pairs = single_op_pairs(cfg)
    probe: dict[str, dict[str, dict[str, str]]] = {"ort": {}}
    for b in BACKENDS[1:]:
        lacks: dict[str, dict[str, str]] = {}
        for op, types in pairs.items():
            for t in types:
                if rng.random() < 0.08:
                    lacks.setdefault(op, {})[t] = f"{b}: no kernel for {op}({t})"
        probe[b] = lacks
    store.set_meta("probe_unsupported", probe)
    store.set_meta("probe_pairs", pairs)  # as a campaign that probed stores them

    # bugs: a signature and reduced pattern each, hit with Zipf-like weights
    bugs = []
    for k in range(n_bugs):
        b = rng.choice(BACKENDS[1:])
        verdict = rng.choice(["crash", "mismatch", "mismatch", "timeout"])
        stage = {"crash": rng.choice(["compile", "run"]), "timeout": "run"}.get(verdict, "run")
        ops = [rng.choice(UNARY) for _ in range(rng.randint(1, 3))]
        key = f"{b}|{verdict}|{stage}|message {k}|{'+'.join(ops)}"
        bugs.append((key, b, verdict, stage, ops, 1.0 / (k + 1) ** 0.8))
    weights = [w for *_, w in bugs]

    t0 = 1_780_000_000.0
    test_rows, result_rows = [], []
    hits: dict[str, list[int]] = {}
    verdicts, shares = list(SPREAD), list(SPREAD.values())
    for i in range(tests):
        finished = t0 + i / RATE + rng.random() * 0.01 + (PAUSE if i >= tests // 2 else 0.0)
        test_rows.append((i, i, json.dumps(rng.sample(UNARY, 3)), 21, 0.012, 0.008, finished))
        result_rows.append((i, "ort", "ok", None, None, None, ""))
        for b in BACKENDS[1:]:
            v = rng.choices(verdicts, shares)[0]
            key = sig = None
            if v in ("crash", "mismatch", "timeout"):
                key, b, v, stage, *_ = rng.choices(bugs, weights)[0]
                sig = key.rsplit("|", 1)[0]
                hits.setdefault(key, []).append(i)
                result_rows.append((i, b, v, stage, sig, key, "detail"))
                break  # one finding per test: its backend
            result_rows.append((i, b, v, None, None, None, ""))
    db = store.db
    db.execute("BEGIN")
    db.executemany("INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?, ?)", test_rows)
    db.executemany("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?)", result_rows)
    for key, b, verdict, stage, ops, _ in bugs:
        seen = hits.get(key)
        if not seen:
            continue
        bid = bug_id(key, store.names)
        first = seen[0]
        db.execute(
            "INSERT INTO bugs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                key.rsplit("|", 1)[0],
                bid,
                verdict,
                stage,
                b,
                b,
                "+".join(ops),
                first,
                test_rows[first][6],
                len(seen),
                json.dumps(seen[:1000]),
            ),
        )
        _bundle(folder / "bugs" / bid, rng, b, verdict, stage, bid)
    for n in range(0, tests + 1, 400):
        figures = {"ops": min(160, 20 + n // 500), "instances": n // 3, "edges": n // 40}
        figures |= {"triples": n // 12, "models": n}
        store.add_diversity_snapshot(
            n, {"all": figures, "backends": {b: figures for b in BACKENDS}}
        )
    store.close()
    return folder


def _bundle(folder: Path, rng: random.Random, backend: str, verdict: str, stage: str, bid: str):
    reduced = rng.random() < 0.9
    (folder / "reduced").mkdir(parents=True)
    model = _model(rng, rng.randint(1, 6) if reduced else rng.randint(8, 24))
    onnx.save(model, str(folder / ("reduced" if reduced else "") / "model.onnx"))
    (folder / ("reduced" if reduced else "") / "repro.py").write_text("# repro\n")
    meta = {"id": bid, "verdict": verdict, "stage": stage, "backend": backend}
    meta |= {"reference": "ort", "versions": VERSIONS, "onnxfuzz": "0.1.0"}
    (folder / "meta.json").write_text(json.dumps(meta))
    log = [f"{verdict} in {backend} at {stage} stage", "", "InternalError: <lowering> failed"]
    (folder / "log.txt").write_text("\n".join(log + [f"  frame {k}" for k in range(30)]))


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def render(folder: Path) -> Path:
    out = folder / "report.html"
    store = Store.open_existing(folder / "campaign.db")
    try:
        write_report(folder, store, out)
    finally:
        store.close()
    return out


def scan(folder: Path) -> None:
    store = Store.open_existing(folder / "campaign.db")
    store.db.execute("SELECT COUNT(*), SUM(seconds), MAX(finished) FROM tests").fetchone()
    store.db.execute("SELECT COUNT(*), SUM(LENGTH(verdict)) FROM results").fetchone()
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=200_000)
    ap.add_argument("--bugs", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        big = build(Path(tmp) / "big", args.tests, args.bugs)
        small = build(Path(tmp) / "small", 2_000, max(1, args.bugs // 10), seed=1)
        print(f"built in {time.perf_counter() - start:.1f} s")
        ours = timed(lambda: render(big), args.repeat)
        size = (big / "report.html").stat().st_size
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "onnxfuzz", "report", str(big)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        cli = time.perf_counter() - start
        ref_small = timed(lambda: render(small), args.repeat)
        ref_scan = timed(lambda: scan(big), args.repeat)
        store = Store.open_existing(big / "campaign.db")
        rows = store.db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        n_bugs = len(store.bugs())
        store.close()
    print(f"campaign: {args.tests:,} tests, {rows:,} results, {n_bugs} bugs, 4 backends")
    print(f"render (in process, median of {args.repeat}): {ours:.3f} s   (target < 2 s)")
    print(f"cli (fresh process, imports included):  {cli:.3f} s")
    print(f"page: {size / 1e6:.2f} MB ({size:,} bytes)   (target < 5 MB)")
    print(
        f"reference: render of a 2,000-test campaign {ref_small:.3f} s; "
        f"ratio {ours / ref_small:.1f}x"
    )
    print(f"reference: full scan of tests + results {ref_scan:.3f} s; ratio {ours / ref_scan:.1f}x")


if __name__ == "__main__":
    main()
