#!/usr/bin/env python3
"""Measure what a known-findings file buys a campaign (issue 22's target: a second ORT vs
TVM campaign run with the first one's known file finds >= 1.5x the new families of the
same campaign run without it).

Three campaigns of ``--time`` each, with the same backends:

1. ``first`` (seed ``--seed``): its families are exported with ``onnxfuzz triage
   --export-known``;
2. ``plain`` (seed ``--seed + SECOND``): the second campaign, without the known file;
3. ``known`` (seed ``--seed + SECOND``): the same second campaign with ``--known`` (known
   findings skipped, not reduced; triggers of families hit ``--avoid-after`` times avoided).

A *new family* of a second campaign is a family of a bug it filed that the known file does
not hold (``onnxfuzz.judge.signature.family``). The figures are printed as JSON and written
to ``OUT/known_gain.json``.

    .venv/bin/python tools/known_gain.py --out /tmp/gain --time 3m \\
        --backend ort --backend tvm
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from onnxfuzz.judge.signature import family
from onnxfuzz.store.known import KnownFile

ONNXFUZZ = [sys.executable, "-m", "onnxfuzz"]
SECOND = 1_000_000  # the second campaign's seed offset: test i has seed SEED + i


def _fuzz(out: Path, backends: list[str], seed: int, duration: str, extra: list[str]) -> float:
    cmd = [*ONNXFUZZ, "fuzz", "--out", str(out), "--time", duration, "--seed", str(seed)]
    for b in backends:
        cmd += ["--backend", b]
    began = time.monotonic()
    done = subprocess.run(cmd + extra, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 0 clean, 1 findings; anything else: the tool failed
        sys.exit(f"{' '.join(cmd + extra)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return time.monotonic() - began


def _campaign(out: Path) -> dict[str, object]:
    db = sqlite3.connect(out / "campaign.db")
    try:
        tests = db.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
        sigs = [(b, s) for b, s in db.execute("SELECT backend, signature FROM bugs")]
        known_hits = db.execute("SELECT COUNT(*) FROM results WHERE verdict='known'").fetchone()[0]
    finally:
        db.close()
    return {
        "tests": tests,
        "families": sorted({family(s) for _, s in sigs}),
        "bundles": len(sigs),
        "known_hits": known_hits,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--time", default="3m", help="each campaign's budget (onnxfuzz --time)")
    ap.add_argument("--backend", action="append", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--avoid-after", type=int, default=5)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    first, plain, known = args.out / "first", args.out / "plain", args.out / "known"
    seconds = {"first": _fuzz(first, args.backend, args.seed, args.time, [])}
    known_file = args.out / "known.json"
    subprocess.run(
        [*ONNXFUZZ, "triage", str(first), "--export-known", str(known_file)],
        check=True,
        capture_output=True,
    )
    known_families = {f.family for f in KnownFile.load(known_file).families}
    seconds["plain"] = _fuzz(plain, args.backend, args.seed + SECOND, args.time, [])
    seconds["known"] = _fuzz(
        known,
        args.backend,
        args.seed + SECOND,
        args.time,
        ["--known", str(known_file), "--avoid-after", str(args.avoid_after)],
    )
    report: dict[str, object] = {
        "time": args.time,
        "backends": args.backend,
        "known_families": len(known_families),
        "seconds": seconds,
    }
    new: dict[str, int] = {}
    for name, folder in (("first", first), ("plain", plain), ("known", known)):
        c = _campaign(folder)
        if name != "first":
            fresh = [f for f in c["families"] if f not in known_families]  # type: ignore[union-attr]
            new[name] = len(fresh)
            c["new_families"] = fresh
        report[name] = c
    report["new_families"] = new
    report["ratio"] = new["known"] / new["plain"] if new["plain"] else None
    (args.out / "known_gain.json").write_text(json.dumps(report, indent=1) + "\n")
    print(
        json.dumps(
            {k: report[k] for k in ("time", "known_families", "new_families", "ratio", "seconds")},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
