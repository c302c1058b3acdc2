"""Measure issue 22's targets for confirmation, state-dependent findings and reference
hygiene: run ``onnxfuzz fuzz`` campaigns against ONNX Runtime and a planted-bug adapter
(tests/campaign/adapters.py), then count the bundles and run every filed bundle's
repro.py from a copied folder in a fresh process.

    python tools/bench_confirm.py --time 2m --out /tmp/bench-confirm [--case flaky ...]
        [--replay-give-up 1000000000 --rounds 2]

Cases: ``flaky`` (a 30 % flaky wrong Add, random per run), ``stale`` (Add wrong after a
model with Mul compiled in the process), ``vendor`` (the default op set; the vendor's
planted wrong Add beside ONNX Runtime's own failures), ``rare`` (every float32 output
shifted in 3 % of runs: most hits no fresh run shows). Prints one line per case: bundles,
how their repro.py answered, the vendor's share, and the campaign's tests/s with and
without the time spent confirming (from its summary).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ROOT / "tests" / "campaign" / "adapters.py"
SMALL = ["--ops", "Add,Relu,Mul,Sigmoid,Tanh,Sub,Neg,Abs", "--nodes", "1:6"]
CASES = {
    "flaky": (f"{ADAPTERS}:Flaky:op=Add,p=0.3", SMALL),
    "stale": (f"{ADAPTERS}:StaleCache:op=Add,other=Mul", SMALL),
    "vendor": (f"{ADAPTERS}:WrongOp:op=Add", []),
    "rare": (f"{ADAPTERS}:FlakyOutputs:p=0.03", SMALL),
}
# ``--replay-give-up N`` runs the campaigns in-process with campaign.REPLAY_GIVE_UP = N
# (how many fruitless replays of earlier models a signature family gets) besides the
# default, in alternating order, and prints the tests/s ratio of the two.
PATCHED = (
    "import sys, onnxfuzz.run.campaign as c; c.REPLAY_GIVE_UP = int(sys.argv[1]); "
    "from onnxfuzz.cli.main import main; sys.exit(main(sys.argv[2:]))"
)


def repro_answer(bundle: Path, scratch: Path) -> str:
    """What the bundle's repro.py says when run from a copy of the bundle elsewhere."""
    copy = scratch / bundle.parent.name / bundle.name
    shutil.copytree(bundle, copy)
    p = subprocess.run(
        [sys.executable, str(copy / "repro.py")], capture_output=True, text=True, timeout=900
    )
    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr[-200:]
    if "depends on an earlier model" in line and line.startswith("REPRODUCES"):
        return "reproduces (depends on an earlier model)"
    if "(intermittent)" in line and line.startswith("REPRODUCES"):
        return "reproduces (intermittent)"
    if line.startswith("FIXED") and "intermittent" in line:
        return "not seen (says intermittent)"
    return line.split(":", 1)[0].lower()


def run_case(name: str, seconds: str, out: Path, give_up: int | None = None) -> dict:
    vendor, extra = CASES[name]
    folder = out / (name if give_up is None else f"{name}-give-up-{give_up}")
    if folder.exists():
        shutil.rmtree(folder)
    head = ["-m", "onnxfuzz.cli.main"] if give_up is None else ["-c", PATCHED, str(give_up)]
    cmd = [
        sys.executable, *head, "fuzz", "--backend", "ort",
        "--backend", vendor, "--time", seconds, "--seed", "2200", "--out", str(folder), *extra,
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    summary = p.stdout + p.stderr
    rate = re.search(r"confirmation: .*", summary)
    bugs = sorted((folder / "bugs").glob("*/meta.json"))
    alone = sorted((folder / "reference-bugs").glob("*/meta.json"))
    metas = [json.loads(m.read_text()) for m in bugs]
    scratch = out / f"{name}-copies"
    shutil.rmtree(scratch, ignore_errors=True)
    answers = Counter(repro_answer(m.parent, scratch) for m in bugs + alone)
    kinds = Counter(m.get("reproducibility", "?") for m in metas)
    mine = sum(m["backend"] == vendor for m in metas)
    not_rep = re.search(r"(\d+) finding\(s\) not reproducible", summary)
    tests = re.findall(r"(\d+) tests \(", summary)
    return {
        "case": name,
        "replay_give_up": give_up,
        "tests": int(tests[-1]) if tests else 0,
        "exit": p.returncode,
        "bundles": len(metas),
        "vendor_share": f"{mine}/{len(metas)}",
        "reference_alone": len(alone),
        "kinds": dict(kinds),
        "reduced_ops": [m.get("reduced_ops") for m in metas][:6],
        "repro": dict(answers),
        "not_reproducible": int(not_rep.group(1)) if not_rep else 0,
        "confirmation": rate.group(0) if rate else "none",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time", default="2m")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench-confirm"))
    ap.add_argument("--case", action="append", choices=sorted(CASES))
    ap.add_argument(
        "--replay-give-up",
        type=int,
        default=None,
        help="also run each case with this many fruitless replays per family (e.g. 10**9: "
        "every finding no fresh run shows is replayed) and print the tests/s ratio",
    )
    ap.add_argument("--rounds", type=int, default=1, help="alternating pairs (--replay-give-up)")
    args = ap.parse_args()
    from onnxfuzz.run.campaign import REPLAY_GIVE_UP

    for name in args.case or list(CASES):
        if args.replay_give_up is None:
            print(json.dumps(run_case(name, args.time, args.out)), flush=True)
            continue
        ratios = []
        for k in range(args.rounds):
            pair = [REPLAY_GIVE_UP, args.replay_give_up]
            runs = {g: run_case(name, args.time, args.out, g) for g in pair[:: 1 - 2 * (k % 2)]}
            for r in runs.values():
                print(json.dumps(r), flush=True)
            base = runs[args.replay_give_up]["tests"]
            ratios.append(runs[REPLAY_GIVE_UP]["tests"] / base if base else float("nan"))
        print(
            f"{name}: tests in equal time, REPLAY_GIVE_UP={REPLAY_GIVE_UP} over "
            f"{args.replay_give_up}: " + ", ".join(f"{r:.2f}x" for r in ratios),
            flush=True,
        )


if __name__ == "__main__":
    main()
