"""Guided vs random generation at equal test counts (issue 9: guided >= 1.3x random on
op-type triples and on distinct bug signatures in equal-length ORT vs TVM campaigns).

Two parts, for each of ``--guides`` (default ``random,mcts,frontier``; the first is the
baseline the ratios divide by):
- ``--models N`` (no backends): N models made with the campaign's guide (rewards from
  the models' own triples and instances, as a campaign with no failures would give); the
  diversity of each and the generation rate (the guide's cost included); and the bound
  on triples a guide can reach at the baseline's density: the baseline's models' own
  triples summed, as if none repeated another model's.
- ``--campaign-tests N``: a campaign of N tests per guide, same seed and options, against
  ``--backends``; their triples (over every test, and over what each backend ran), mean
  nodes, and distinct failure signatures per backend, read from their campaign.db.

    .venv/bin/python tools/bench_guide.py --models 500 --campaign-tests 250 \\
        --backends ort,tvm --seed 9100
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.guide import Guided
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.measure.metrics import Diversity, features
from onnxfuzz.run.pregen import counted
from onnxfuzz.run.steer import LAG, Steering, reward_keys

FIGURES = ("ops", "instances", "edges", "triples", "connectivity", "longest")


def offline(models: int, seed: int, lo: int, hi: int, guide: str) -> tuple[dict, float]:
    """The diversity of ``models`` models made as a ``guide`` campaign would make them, and
    models/s (generation, features and the guide's bookkeeping). ``summary["per model"]``:
    the models' own distinct triples, summed (what the corpus would have if no model
    repeated another's triple)."""
    guided = Guided(Generator(Config(min_nodes=lo, max_nodes=hi)))
    steer = Steering(guided, seed, guide, [])
    d = Diversity()
    per_model = 0
    start = time.perf_counter()
    for i in range(models):
        decision = steer.decide(i) if steer.active else None
        case = guided.case(seed + i, decision)
        f = counted(features(case.model))
        if steer.active:
            steer.report(i, reward_keys(f, []))
        d.add_features(f)
        per_model += len(f.digests().get("triples", ()))
    rate = models / (time.perf_counter() - start)
    return {**d.summary(), "per model": per_model}, rate


def campaign(out: Path, backends: list[str], tests: int, seed: int, guide: str) -> dict:
    cmd = [sys.executable, "-m", "onnxfuzz", "fuzz", "--tests", str(tests), "--seed", str(seed)]
    for b in backends:
        cmd += ["--backend", b]
    cmd += ["--guide", guide, "--no-reduce", "--out", str(out)]
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    took = time.perf_counter() - start
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    db = sqlite3.connect(out / "campaign.db")
    div = json.loads(db.execute("SELECT value FROM meta WHERE key='diversity'").fetchone()[0])
    sigs = dict(
        db.execute(
            "SELECT backend, COUNT(DISTINCT signature) FROM results "
            "WHERE signature IS NOT NULL GROUP BY backend"
        ).fetchall()
    )
    tests_done = db.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
    db.close()
    whole = Diversity.from_record(div["all"]).summary()
    triples = {"all": whole["triples"]}
    for label, rec in div["backends"].items():
        triples[label] = Diversity.from_record(rec).summary()["triples"]
    return {
        "tests": tests_done,
        "seconds": round(took, 1),
        "nodes": round(whole["nodes"], 2),
        "ops": whole["ops"],
        "instances": whole["instances"],
        "triples": triples,
        "signatures": sigs,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=500, help="offline models (0: skip)")
    ap.add_argument("--nodes", default="1:10", help="offline node range MIN:MAX")
    ap.add_argument("--campaign-tests", type=int, default=0, help="tests per campaign (0: skip)")
    ap.add_argument("--backends", default="ort,tvm")
    ap.add_argument("--seed", type=int, default=9100)
    ap.add_argument("--keep", type=Path, default=None, help="keep the campaigns here")
    ap.add_argument("--guides", default="random,mcts,frontier", help="the first: baseline")
    args = ap.parse_args()
    guides = args.guides.split(",")
    base = guides[0]
    if args.models:
        lo, hi = (int(x) for x in args.nodes.split(":"))
        print(f"offline: {args.models} models, --nodes {lo}:{hi}, seed {args.seed}, lag {LAG}")
        print(f"{'':10}" + "".join(f"{f:>13}" for f in FIGURES) + f"{'models/s':>10}")
        rows = {g: offline(args.models, args.seed, lo, hi, g) for g in guides}
        for g, (s, rate) in rows.items():
            cells = "".join(
                f"{s[f]:>13.2%}" if f == "connectivity" else f"{s[f]:>13.4g}" for f in FIGURES
            )
            print(f"{g:10}{cells}{rate:>10.0f}")
        a, ra = rows[base]
        # A guide that made models as dense as the baseline's, each triple of each new,
        # would have the baseline's per-model sum: the most any guide can gain at the
        # baseline's density (more needs models with more triples each).
        print(
            f"{base}: {a['per model']} triples summed over its models, {a['triples']} "
            f"distinct: a guide at its density gains at most {a['per model'] / a['triples']:.2f}x"
        )
        for g in guides[1:]:
            b, rb = rows[g]
            ratio = "".join(f"{(b[f] / a[f] if a[f] else float('nan')):>12.2f}x" for f in FIGURES)
            print(f"{g[:4] + '/' + base[:4]:10}{ratio}{rb / ra:>9.2f}x")
    if args.campaign_tests:
        backends = args.backends.split(",")
        root = args.keep or Path(tempfile.mkdtemp(prefix="bench_guide_"))
        root.mkdir(parents=True, exist_ok=True)
        got = {}
        for g in guides:
            got[g] = campaign(root / g, backends, args.campaign_tests, args.seed, g)
            print(f"campaign --guide {g}: {json.dumps(got[g])}", flush=True)
        a = got[base]
        for g in guides[1:]:
            b = got[g]
            for k in a["triples"]:
                ta, tb = a["triples"][k], b["triples"].get(k, 0)
                x = tb / ta if ta else float("nan")
                print(f"triples {k:>12}: {base} {ta}, {g} {tb}, {x:.2f}x")
            for k in sorted(set(a["signatures"]) | set(b["signatures"])):
                sa, sb = a["signatures"].get(k, 0), b["signatures"].get(k, 0)
                x = sb / sa if sa else float("nan")
                print(f"signatures {k:>9}: {base} {sa}, {g} {sb}, {x:.2f}x")
        print(f"campaigns in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
