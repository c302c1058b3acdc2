"""A crashing worker's evidence names where it died, in real worker processes: the
innermost frames of the crashing thread (faulthandler's Python stack, or the library's own
native backtrace), then the tail of that test's stderr; the signature keeps the frames,
normalized, so one crash site is one bug across tests, and another site another bug."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from models import chain

from onnxfuzz.backend import parse_backend
from onnxfuzz.execute.crashdump import TAIL_HEAD
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Outcome, Stage, Status, Worker
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig
from onnxfuzz.reduce.reproduce import Reproducer, Target
from onnxfuzz.run.campaign import Campaign, CampaignOptions

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
X = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}


def _signature(label: str, model: onnx.ModelProto, crash: Outcome) -> str:
    """The signature a campaign gives ``crash`` (the reference ran fine)."""
    ok = Outcome(Status.OK, outputs={"y": np.zeros((2, 3), np.float32)})
    sig = Judge("ref", OracleConfig()).assess(model, X, {"ref": ok, label: crash})[label].signature
    assert sig is not None
    return sig


def _crash(w: Worker, ops: list[str]) -> Outcome:
    got = w.execute(chain(ops).SerializeToString(), X)
    assert got.status == Status.CRASH, got
    return got


def test_a_segfault_names_the_function_it_died_in_and_one_site_is_one_signature() -> None:
    fuse, pack = (f"{ADAPTERS}:SegfaultIn:op=Tanh,where={w}" for w in ("fuse", "pack"))
    sigs: dict[str, list[str]] = {fuse: [], pack: []}
    with BackendPool([fuse, pack], timeout=30) as pool:
        # Different models (one node, three nodes) hitting each crash site, on both at once.
        for ops in (["Tanh"], ["Relu", "Tanh", "Relu"]):
            model = chain(ops)
            got = pool.run_all(model.SerializeToString(), X)
            for label, where in ((fuse, "_fuse_kernels"), (pack, "_pack_weights")):
                crash = got[label]
                assert (crash.status, crash.stage) == (Status.CRASH, Stage.RUN), crash
                assert crash.message == "killed by signal SIGSEGV"
                # The evidence: the frames first, then the tail of the test's stderr.
                lines = crash.trace.splitlines()
                assert lines[:3] == [
                    "crash site (Python, innermost frame first):",
                    "  string_at (__init__.py)",
                    f"  {where} (adapters.py)",
                ], crash.trace
                assert TAIL_HEAD in lines and "Fatal Python error: Segmentation fault" in lines
                sigs[label].append(_signature(label, model, crash))
    for label, where in ((fuse, "_fuse_kernels"), (pack, "_pack_weights")):
        a, b = sigs[label]
        assert a == b, sigs[label]  # one site, one signature, whatever the model
        assert f"at string_at (__init__.py) < {where} (adapters.py) < run (adapters.py)" in a
        assert "line" not in a.split("|", 3)[3] and "0x" not in a
    assert sigs[fuse][0].split("|", 1)[1] != sigs[pack][0].split("|", 1)[1]  # not the label


def test_a_deep_python_errors_trace_keeps_where_it_was_raised() -> None:
    """An error raised 60 calls down a pass pipeline: the trace keeps the innermost frames
    (the raise site, where a TVM error's own C++ frames are), not the outermost ones."""
    w = Worker(parse_backend(f"{ADAPTERS}:DeepRaise:op=Tanh,depth=60"), timeout=30)
    try:
        got = w.execute(chain(["Tanh"]).SerializeToString(), X)
    finally:
        w.close()
    assert (got.status, got.stage) == (Status.ERROR, Stage.COMPILE), got
    assert got.message == "ValueError: layout check failed"
    frames = [ln for ln in got.trace.splitlines() if ln.startswith("  File ")]
    assert frames[-1].endswith("in _check_layout"), got.trace
    assert frames[-2].endswith("in _lower_pass"), got.trace
    assert len(frames) == 40 and "sandbox.py" not in frames[0], got.trace


def test_an_earlier_tests_stderr_never_leaks_into_a_later_crash() -> None:
    label = f"{ADAPTERS}:NoisyDumps:op=Tanh,where=pack"
    w = Worker(parse_backend(label), timeout=30)
    sigs = []
    try:
        w.start()
        for noise in (["Relu"], ["Relu", "Relu"]):
            # A healthy test that prints a native trace and faulthandler's dump of every
            # thread (from _warm_cache), then a crash on the same worker.
            assert w.execute(chain(noise).SerializeToString(), X).status == Status.OK
            crash = _crash(w, ["Tanh"])
            assert "_pack_weights (adapters.py)" in crash.trace
            for earlier in ("_warm_cache", "npu::Cache", "slow cache warm-up"):
                assert earlier not in crash.trace, crash.trace
            sigs.append(_signature(label, chain(["Tanh"]), crash))
            # the next crash, on a respawned worker, has only its own text too
            again = _crash(w, ["Tanh"])
            assert again.trace.count("Fatal Python error") == 1, again.trace
    finally:
        w.close()
    assert sigs[0] == sigs[1] and "_warm_cache" not in sigs[0], sigs


def test_a_librarys_own_backtrace_and_last_words_are_kept() -> None:
    labels = {s: f"{ADAPTERS}:NativeCheckAbort:op=Tanh,site={s}" for s in ("fuse", "layout")}
    sigs: dict[str, list[str]] = {s: [] for s in labels}
    for site, label in labels.items():
        w = Worker(parse_backend(label), timeout=30)
        try:
            w.start()
            for ops in (["Tanh"], ["Relu", "Tanh"]):
                crash = _crash(w, ops)
                assert (crash.stage, crash.message) == (Stage.COMPILE, "killed by signal SIGABRT")
                lines = crash.trace.splitlines()
                mutator = f"npu::relax::{site.title()}Mutator::VisitExpr_ ({site}.cc)"
                assert lines[:2] == ["crash site (native, innermost frame first):", f"  {mutator}"]
                # the Python call that reached it, and the check's words before the trace
                assert "Python stack: _lower_fused (adapters.py) < compile (adapters.py)" in lines
                assert any("Check failed: (lhs == rhs) is false" in ln for ln in lines)
                sigs[site].append(_signature(label, chain(ops), crash))
        finally:
            w.close()
    for site, (a, b) in sigs.items():
        # different time stamps, build paths and line numbers: one signature
        assert a == b, (a, b)
        assert f"at npu::relax::{site.title()}Mutator::VisitExpr_ ({site}.cc) <" in a
        assert "Check failed" in a and "via _lower_fused (adapters.py)" in a
    assert sigs["fuse"][0].split("|", 1)[1] != sigs["layout"][0].split("|", 1)[1]


@pytest.mark.skipif(importlib.util.find_spec("tvm_ffi") is None, reason="needs apache-tvm-ffi")
def test_faulthandler_chains_to_a_librarys_own_segfault_handler() -> None:
    # TVM's FFI library installs its own SIGSEGV handler when it loads (after faulthandler
    # was enabled): the worker puts faulthandler back in front of it, so a segfault leaves
    # both the Python stack and TVM's native backtrace.
    label = f"{ADAPTERS}:TvmFfiSegfault:op=Tanh,where=fuse"
    w = Worker(parse_backend(label), timeout=60)
    try:
        w.start()
        crash = _crash(w, ["Tanh"])
    finally:
        w.close()
    lines = crash.trace.splitlines()
    assert lines[0] == "crash site (native, innermost frame first):", crash.trace
    # TVM's own trace is read (the C function that faulted) and its end shown in the tail
    assert "  string_at (_ctypes.c)" in lines
    assert ", in _start" in crash.trace
    python = next(ln for ln in lines if ln.startswith("Python stack: "))
    assert "_fuse_kernels (adapters.py)" in python
    sig = _signature(label, chain(["Tanh"]), crash)
    assert "via string_at (__init__.py) < _fuse_kernels (adapters.py)" in sig


def test_a_reduction_and_repro_py_still_recognise_the_same_crash(tmp_path) -> None:
    label = f"{ADAPTERS}:SegfaultIn:op=Tanh,where=fuse"
    with BackendPool(["ort", label], timeout=30) as pool:
        big = chain(["Relu", "Tanh", "Sigmoid"])
        first = Reproducer(pool, Target(label, "ort")).assess(big, X)
        assert first.signature is not None and "_fuse_kernels" in first.signature
        same = Reproducer(pool, Target(label, "ort", first.signature))
        assert same(chain(["Tanh"]), X)  # a smaller model, the same crash
        assert not same(chain(["Relu"]), X)  # no crash
    other = f"{ADAPTERS}:SegfaultIn:op=Tanh,where=pack"
    with BackendPool(["ort", other], timeout=30) as pool:
        moved = Reproducer(pool, Target(other, "ort", first.signature.replace(label, other)))
        assert not moved(chain(["Tanh"]), X)  # the same signal at another site

    opts = CampaignOptions(
        backends=["ort", label],
        tests=6,
        seed=0,
        timeout=10.0,
        generator={"min_nodes": 2, "max_nodes": 4, "ops": ["Relu", "Tanh", "Sigmoid"]},
    )
    c = Campaign(tmp_path / "camp", opts, resume=False)
    c.start()
    try:
        c.run()
    finally:
        c.close()
    bundles = sorted((c.out / "bugs").iterdir())
    assert len(bundles) == 1, bundles  # every hit of the site is one bug
    bundle = bundles[0]
    meta = json.loads((bundle / "meta.json").read_text())
    assert "at string_at (__init__.py) < _fuse_kernels (adapters.py)" in meta["signature"]
    assert meta["reduced_ops"] == ["Tanh"]  # the reduction kept the crash while shrinking
    log = (bundle / "log.txt").read_text()
    assert "crash site (Python, innermost frame first):\n  string_at (__init__.py)" in log
    for folder in (bundle, bundle / "reduced"):
        r = subprocess.run(
            [sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 1 and r.stdout.startswith("REPRODUCES"), (r.stdout, r.stderr)
