#!/usr/bin/env python3
"""Measure what a known-findings file buys a campaign (issue 22's target: a second ORT vs
TVM campaign run with the first one's known file finds >= 1.5x the new families of the
same campaign run without it).

1. ``first`` (seed ``--seed``): its families are exported with ``onnxfuzz triage
   --export-known`` (``--first DIR`` reuses a finished campaign instead);
2. with ``--warm-probe``, the probe's cache is completed first (a one-test campaign
   without a time limit): with ``--time`` the probe is outside a campaign's budget (its
   clock starts after it) but not outside the machine's time;
3. per pair k (``--pairs``, seed ``--seed + k * SECOND``): ``plain``, the second campaign
   without the known file, and ``known``, the same with ``--known`` (known findings
   skipped, not reduced; triggers of bugs hit ``--avoid-after`` times avoided, from the
   start and during the campaign); one ``known`` campaign per ``--avoid-after`` value
   given (``known-K2``...). ``--parallel`` runs a pair's campaigns at the same time, so
   that all see the same load from other work on the machine.

A *new family* of a second campaign is a family of a bug it filed that the known file does
not hold (``onnxfuzz.judge.signature.family``). Per campaign the figures say where the
time went: tests run, seconds in the test loop and in confirming and reducing findings,
hits of known families (in ``plain`` too, matched afterwards) and bundles of known
families that ``plain`` confirmed, reduced and filed again. Printed as JSON and written to
``OUT/known_gain.json``.

    nice -n 10 .venv/bin/python tools/known_gain.py --out /tmp/gain --time 10m \\
        --backend ort --backend tvm --pairs 1 --parallel --avoid-after 5 --avoid-after 2
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from onnxfuzz.judge.signature import family
from onnxfuzz.store.known import KnownFile

ONNXFUZZ = [sys.executable, "-m", "onnxfuzz"]
SECOND = 1_000_000  # the second campaigns' seed offset: test i has seed SEED + i


def _fuzz_cmd(out: Path, backends: list[str], seed: int, budget: list[str]) -> list[str]:
    cmd = [*ONNXFUZZ, "fuzz", "--out", str(out), "--seed", str(seed), *budget]
    for b in backends:
        cmd += ["--backend", b]
    return cmd


def _finish(cmd: list[str], proc: subprocess.Popen, began: float) -> float:
    _, err = proc.communicate()
    if proc.returncode not in (0, 1):  # 0 clean, 1 findings; anything else: the tool failed
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-2000:]}")
    return time.monotonic() - began


def _run(cmds: list[list[str]]) -> list[float]:
    """Run ``cmds`` at the same time; the wall seconds each took."""
    began = time.monotonic()
    procs = [
        subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for c in cmds
    ]
    return [_finish(c, p, began) for c, p in zip(cmds, procs, strict=True)]


def _campaign(out: Path, known: KnownFile) -> dict[str, Any]:
    db = sqlite3.connect(out / "campaign.db")
    try:
        tests, loop_s = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(seconds), 0) FROM tests"
        ).fetchone()
        bugs = db.execute("SELECT backend, signature FROM bugs").fetchall()
        verdicts = dict(
            db.execute("SELECT backend || ' ' || verdict, COUNT(*) FROM results GROUP BY 1")
        )
        hit = db.execute("SELECT backend, signature FROM results WHERE signature IS NOT NULL")
        known_hits = sum(1 for b, s in hit if known.match(b, s) is not None)
        meta = dict(
            db.execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?)", ("confirmation", "avoidance")
            )
        )
    finally:
        db.close()
    run = json.loads(meta.get("confirmation", "{}"))
    wall = float(run.get("wall", 0.0))
    avoid = json.loads(meta.get("avoidance", "{}")).get("updates", [])
    return {
        "tests": tests,
        "run_seconds": round(wall, 1),
        "loop_seconds": round(loop_s, 1),
        # a single lane: what the run did outside the test loop is confirming and reducing
        "finding_seconds": round(max(0.0, wall - loop_s), 1),
        "confirm_seconds": run.get("seconds"),
        "verdicts": verdicts,
        "known_family_hits": known_hits,
        "known_family_bundles": sum(1 for b, s in bugs if known.match(b, s) is not None),
        "families": sorted({family(s) for _, s in bugs}),
        "bundles": len(bugs),
        "avoidance_updates": [
            {"from": u["from"], "avoid": u["avoid"], "forms": u["forms"]} for u in avoid[1:]
        ],
    }


def _finished(out: Path) -> bool:
    """Whether ``out`` holds a campaign that ran to its end (it stored its run's figures)."""
    if not (out / "campaign.db").exists():
        return False
    db = sqlite3.connect(out / "campaign.db")
    try:
        row = db.execute("SELECT 1 FROM meta WHERE key='confirmation'").fetchone()
    finally:
        db.close()
    return row is not None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--time", default="3m", help="each campaign's budget (onnxfuzz --time)")
    ap.add_argument("--backend", action="append", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--avoid-after", type=int, action="append", help="K (repeat: one each)")
    ap.add_argument("--pairs", type=int, default=1, help="second campaigns, each seed its own")
    ap.add_argument("--parallel", action="store_true", help="a pair's two campaigns at once")
    ap.add_argument("--first", type=Path, help="a finished first campaign to reuse")
    ap.add_argument("--warm-probe", action="store_true", help="complete the probe cache first")
    args = ap.parse_args()
    avoid_after: list[int] = args.avoid_after or [5]
    args.out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    first = args.first or args.out / "first"
    if args.first is None:
        cmd = _fuzz_cmd(first, args.backend, args.seed, ["--time", args.time])
        (seconds["first"],) = _run([cmd])
    known_file = args.out / "known.json"
    subprocess.run(
        [*ONNXFUZZ, "triage", str(first), "--export-known", str(known_file)],
        check=True,
        capture_output=True,
    )
    known = KnownFile.load(known_file)
    known_families = {f.family for f in known.families}
    warm = args.out / "probe-warm-up"
    if args.warm_probe and not warm.exists():
        (seconds["probe"],) = _run([_fuzz_cmd(warm, args.backend, 0, ["--tests", "1"])])
    report: dict[str, Any] = {
        "time": args.time,
        "backends": args.backend,
        "known_families": len(known_families),
        "first": _campaign(first, known),
        "pairs": [],
    }
    for k in range(1, args.pairs + 1):
        seed = args.seed + k * SECOND
        budget = ["--time", args.time]
        runs = {"plain": (args.out / f"plain{k}", [])}
        for K in avoid_after:
            name = "known" if len(avoid_after) == 1 else f"known-K{K}"
            extra = ["--known", str(known_file), "--avoid-after", str(K)]
            runs[name] = (args.out / f"{name}{k}", extra)
        cmds = [_fuzz_cmd(d, args.backend, seed, budget) + x for d, x in runs.values()]
        if all(_finished(d) for d, _ in runs.values()):
            walls = []  # a pair an earlier run of this tool finished: read again
        else:
            walls = _run(cmds) if args.parallel else [_run([c])[0] for c in cmds]
        pair: dict[str, Any] = {"seed": seed, "wall_seconds": [round(w, 1) for w in walls]}
        for name, (folder, _) in runs.items():
            c = _campaign(folder, known)
            c["new_families"] = [f for f in c["families"] if f not in known_families]
            pair[name] = c
        pair["new"] = {n: len(pair[n]["new_families"]) for n in runs}
        report["pairs"].append(pair)
    names = list(report["pairs"][0]["new"]) if report["pairs"] else []
    new = {n: sum(p["new"][n] for p in report["pairs"]) for n in names}
    seen = set(report["first"]["families"]) | {
        f for p in report["pairs"] for n in names for f in p[n]["families"]
    }
    report.update(
        seconds=seconds,
        new_families=new,
        ratio={n: new[n] / new["plain"] if new["plain"] else None for n in names[1:]},
        families_seen=len(seen),
    )
    (args.out / "known_gain.json").write_text(json.dumps(report, indent=1) + "\n")
    brief = {
        k: report[k] for k in ("time", "known_families", "new_families", "ratio", "families_seen")
    }
    brief["pairs"] = [
        {
            "seed": p["seed"],
            "new": p["new"],
            "tests": {n: p[n]["tests"] for n in names},
            "finding_seconds": {n: p[n]["finding_seconds"] for n in names},
            "known_family_hits": {n: p[n]["known_family_hits"] for n in names},
        }
        for p in report["pairs"]
    ]
    print(json.dumps(brief, indent=1))


if __name__ == "__main__":
    main()
