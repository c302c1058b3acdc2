"""``--guide optcov`` against ``--guide random`` at equal test counts (issue 24's targets:
distinct TVM fused patterns per 1,000 tests guided >= 2x random; distinct ORT optimizer and
TVM bug families guided >= 1.5x random).

Real ``onnxfuzz fuzz`` campaigns of ``--campaign-tests`` tests each, for every pair of
backends in ``--pairs`` and every seed in ``--seeds``, each guide's campaign started at the
same time as the others of its (pair, seed), so that all import the same code (others
change the generator meanwhile); per campaign: tests stored, distinct optimizations that
fired per backend and kind (``fused``: TVM's fused patterns), and distinct bug families
per backend (``judge.signature.family`` of each filed bug's signature; the reference's own
failures left out), and for a guided campaign what each kind of decision brought first
(``by_kind``: tests, new fused-pattern keys, new bug-family keys, from the guide's stored
reward keys); then each guide's ratio to the first (the baseline). Test *i* of a campaign
of seed *s* is the model of seed *s + i*, so seeds closer than ``--campaign-tests`` share
models: they are refused. Campaigns run with ``--probe off`` unless ``--probe`` says
otherwise (``steer`` is what ``fuzz`` does by default: it changes both guides' counts a
great deal against TVM, see README).

    nice -n 10 .venv/bin/python tools/bench_optcov_guide.py --campaign-tests 300 \\
        --pairs ort+tvm:pipeline=fuse --seeds 9100 --guides random,optcov --mix layers
    nice -n 10 .venv/bin/python tools/bench_optcov_guide.py --campaign-tests 2000 \\
        --pairs ort:opt=none+ort --seeds 9100,20000 --baseline-mix chains --opset 16,21
    nice -n 10 .venv/bin/python tools/bench_optcov_guide.py --campaign-tests 300 \\
        --pairs ort+tvm:pipeline=fuse --seeds 9100 --mix chains --probe steer
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
from array import array
from collections import Counter
from pathlib import Path


def read_campaign(out: Path) -> tuple[dict, dict[str, set[str]]]:
    """What a finished campaign's campaign.db says: tests, optimizations per backend and
    kind, bug families per backend (counted); and the families themselves, per backend."""
    from onnxfuzz.judge.signature import family

    db = sqlite3.connect(out / "campaign.db")
    try:
        tests = db.execute("SELECT COUNT(*) FROM tests").fetchone()[0]
        fired: dict[str, dict[str, int]] = {}
        for backend, kind, n in db.execute(
            "SELECT backend, kind, COUNT(*) FROM optimizations WHERE tests > 0 "
            "GROUP BY backend, kind"
        ):
            fired.setdefault(backend, {})[kind] = n
        families: dict[str, set[str]] = {}
        for backend, sig in db.execute("SELECT backend, signature FROM bugs"):
            families.setdefault(backend, set()).add(family(sig))
        by_kind = _by_kind(db)
    finally:
        db.close()
    summary = {
        "tests": tests,
        "fired": fired,
        "families": {b: len(f) for b, f in sorted(families.items())},
    }
    if by_kind:
        summary["by_kind"] = by_kind
    return summary, families


def _kind(decision: dict | None) -> str:
    """A guide decision's kind: a variety draw (its way), a chain, blocks or ops, none."""
    if not decision or "path" not in decision:
        return "none" if not decision else "other"
    if decision.get("variety"):
        return f"variety:{decision['variety']}"
    return "chain" if decision["path"][0].startswith("chain:") else "blocks"


def _by_kind(db: sqlite3.Connection) -> dict[str, list[int]]:
    """Per decision kind: its tests, the fused-pattern and the bug-family (signature slot)
    keys its tests were first to bring (--guide optcov's stored keys, in test order)."""
    from onnxfuzz.run.steer import OPT_FUSED, SIGNATURE

    seen: set[int] = set()
    tests: Counter[str] = Counter()
    fused: Counter[str] = Counter()
    fams: Counter[str] = Counter()
    rows = db.execute("SELECT decision, keys FROM guide ORDER BY test_id")
    for decision, keys in rows:
        kind = _kind(json.loads(decision))
        tests[kind] += 1
        for key in array("I", keys):
            if key not in seen:
                seen.add(key)
                fused[kind] += key >> 30 == OPT_FUSED
                fams[kind] += key >> 30 == SIGNATURE
    return {k: [tests[k], fused[k], fams[k]] for k in sorted(tests)}


def campaigns(args: argparse.Namespace) -> None:
    root = Path(args.keep)
    root.mkdir(parents=True, exist_ok=True)
    guides = args.guides.split(",")
    for pair in args.pairs.split(","):
        backends = pair.split("+")
        seeds = [int(s) for s in args.seeds.split(",")]
        summed: dict[str, Counter[str]] = {g: Counter() for g in guides}
        distinct: dict[str, dict[str, set[str]]] = {g: {} for g in guides}
        for seed in seeds:
            procs = {}
            for g in guides:
                out = root / f"{pair.replace(':', '_').replace('=', '_')}-{seed}-{g}"
                cmd = [sys.executable, "-m", "onnxfuzz", "fuzz"]
                cmd += ["--tests", str(args.campaign_tests)]
                for b in backends:
                    cmd += ["--backend", b]
                mix = args.baseline_mix if g == guides[0] and args.baseline_mix else args.mix
                cmd += ["--seed", str(seed), "--guide", g, "--op-mix", mix, "--out", str(out)]
                cmd += ["--opset", args.opset] if args.opset else []
                cmd += ["--probe", args.probe, "--no-reduce", "--confirm", "0"]
                log = open(out.with_suffix(".log"), "w")  # noqa: SIM115 - closed below
                procs[g] = (subprocess.Popen(cmd, stdout=log, stderr=log), out, log, cmd)
            got = {}
            for g, (proc, out, log, cmd) in procs.items():
                rc = proc.wait()
                log.close()
                if rc not in (0, 1):
                    raise SystemExit(f"{' '.join(cmd)} failed ({rc}); see {out}.log")
                got[g], fams_of = read_campaign(out)
                print(f"{pair} seed {seed} --guide {g}: {json.dumps(got[g])}", flush=True)
                for b, kinds in got[g]["fired"].items():
                    summed[g].update({f"{b} {k}": n for k, n in kinds.items()})
                summed[g].update({f"{b} bug families": n for b, n in got[g]["families"].items()})
                for b, fams in fams_of.items():
                    distinct[g].setdefault(b, set()).update(fams)
            base = got[guides[0]]
            for g in guides[1:]:
                for b, kinds in sorted(got[g]["fired"].items()):
                    for kind in ("fused", "transformer", "rule"):
                        if kind in kinds or kind in base["fired"].get(b, {}):
                            a, x = base["fired"].get(b, {}).get(kind, 0), kinds.get(kind, 0)
                            print(f"  {b} {kind}: {guides[0]} {a}, {g} {x}, {_ratio(x, a)}")
                for b in sorted(set(base["families"]) | set(got[g]["families"])):
                    a, x = base["families"].get(b, 0), got[g]["families"].get(b, 0)
                    print(f"  {b} bug families: {guides[0]} {a}, {g} {x}, {_ratio(x, a)}")
        if len(seeds) > 1 and len(guides) > 1:  # what the seeds' campaigns found together
            print(f"{pair}, {len(seeds)} seeds: summed over the campaigns (distinct families)")
            for g in guides[1:]:
                for key in sorted(set(summed[guides[0]]) | set(summed[g])):
                    a, x = summed[guides[0]][key], summed[g][key]
                    print(f"  {key}: {guides[0]} {a}, {g} {x}, {_ratio(x, a)}")
                for b in sorted(set(distinct[guides[0]]) | set(distinct[g])):
                    a, x = len(distinct[guides[0]].get(b, ())), len(distinct[g].get(b, ()))
                    print(f"  {b} distinct bug families: {guides[0]} {a}, {g} {x}, {_ratio(x, a)}")


def _ratio(x: float, a: float) -> str:
    return f"{x / a:.2f}x" if a else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--campaign-tests", type=int, default=300, help="tests per campaign")
    ap.add_argument("--guides", default="random,optcov", help="the first: the baseline")
    ap.add_argument("--mix", default="layers", help="--op-mix of every test")
    ap.add_argument(
        "--baseline-mix", default="", help="the first guide's --op-mix (default: --mix)"
    )
    ap.add_argument("--opset", default="", help="--opset of every campaign (e.g. 16,21)")
    ap.add_argument("--seeds", default="9100", help="campaign seeds, comma-separated")
    ap.add_argument(
        "--probe",
        default="off",
        choices=["steer", "classify", "exclude", "off"],
        help="each campaign's --probe (off: every test's model as drawn; steer: fuzz's default)",
    )
    # ORT's optimizer bugs are failures of ort against ort:opt=none: the reference is
    # first, and its own failures are left out of the families
    ap.add_argument("--pairs", default="ort+tvm:pipeline=fuse,ort:opt=none+ort")
    ap.add_argument("--keep", default="/tmp/bench_optcov_guide", help="campaign folders")
    args = ap.parse_args()
    if args.campaign_tests <= 0:
        ap.error("--campaign-tests: give a number of tests per campaign")
    seeds = sorted(int(s) for s in args.seeds.split(","))
    close = [(a, b) for a, b in zip(seeds, seeds[1:], strict=False) if b - a < args.campaign_tests]
    if close:
        a, b = close[0]
        ap.error(
            f"--seeds {a} and {b} share models (test i is seed + i): "
            f"give seeds at least --campaign-tests ({args.campaign_tests}) apart"
        )
    campaigns(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
