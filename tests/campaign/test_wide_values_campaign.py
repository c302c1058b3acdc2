"""A numeric-range bug, run as a user runs a campaign: an int32 Add computed through float32
(wrong only past 2**24) is found with ``--wide-values`` and reduced to the one Add on a
large value, its repro.py reproducing in a fresh process; without wide values the same
campaign sees nothing, since values near zero never reach 2**24 through Add."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
PLANTED = f"{ADAPTERS}:NarrowedInt:op=Add,via=float32"
COMMON = [
    "--backend", "ort", "--backend", PLANTED,
    "--ops", "Add,Abs,Neg", "--dtypes", "int32", "--nodes", "2:6",
    "--tests", "30", "--seed", "0", "--probe", "off",
]  # fmt: skip


def _fuzz(out: Path, wide: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "fuzz", *COMMON, "--wide-values", wide, "--out", out],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_numeric_range_bug_needs_wide_values_and_is_reduced_to_its_op(tmp_path) -> None:
    r = _fuzz(tmp_path / "wide", "1")
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # 1: bugs were filed
    (bundle,) = (tmp_path / "wide" / "bugs").iterdir()
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["backend"] == PLANTED and meta["verdict"] == "mismatch"
    assert meta["reduced_ops"] == ["Add"]
    reduced = bundle / "reduced"
    model = onnx.load(reduced / "model.onnx")
    feeds = [
        numpy_helper.to_array(onnx.load_tensor(p))
        for p in sorted((reduced / "test_data_set_0").glob("input_*.pb"))
    ]
    assert len(model.graph.node) == 1 and feeds
    # the reduction kept the large value the bug needs (a small one passes)
    assert max(int(np.abs(x.astype(np.int64)).max()) for x in feeds) > 2**24
    copy = tmp_path / "copy"
    shutil.copytree(reduced, copy)
    rep = subprocess.run(
        [sys.executable, "repro.py"], cwd=copy, capture_output=True, text=True, timeout=600
    )
    assert rep.returncode == 1 and "REPRODUCES" in rep.stdout, rep.stdout + rep.stderr[-2000:]

    r = _fuzz(tmp_path / "small", "0")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert not list((tmp_path / "small" / "bugs").glob("*"))
