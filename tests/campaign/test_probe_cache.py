"""The support probe's cache, and a probe that meets a hung adapter: cut at the time
budget, resumed from its cache on the next run, and no worker left behind by SIGTERM."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from onnxfuzz.cli.main import main
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.probe import probe_backend

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "adapters.py"


def _counting_runs(pool: BackendPool, monkeypatch) -> list[int]:
    """A one-item list counting the models ``pool`` runs from now on."""
    runs = [0]
    run_one = pool.run_one

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - run_one's own
        runs[0] += 1
        return run_one(*args, **kwargs)

    monkeypatch.setattr(pool, "run_one", counted)
    return runs


def test_a_second_probe_asks_the_backend_nothing_and_a_new_version_probes_afresh(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "cache"))
    label = f"{ADAPTERS}:UnsupportedType:op=Add,dtype=float64"
    cfg = Config(ops=frozenset({"Add", "Relu", "Mul"}), dtypes=frozenset({1, 11}))
    with BackendPool(["ort", label], 30.0) as pool:
        runs = _counting_runs(pool, monkeypatch)
        first = probe_backend(pool, label, cfg)
        asked_first = runs[0]
        second = probe_backend(pool, label, cfg)
        asked_second = runs[0] - asked_first
        fresh = probe_backend(pool, label, cfg, use_cache=False)
        pool.infos[label] = replace(pool.infos[label], version="99.0")  # an upgrade
        upgraded = probe_backend(pool, label, cfg)
    assert first.complete and first.cached == 0 and asked_first > 0
    assert list(first.support) == ["Add"] and list(first.support["Add"]) == ["float64"]
    assert second.complete and second.cached == second.total and asked_second == 0
    assert second.support == first.support
    assert fresh.cached == 0 and fresh.support == first.support
    assert upgraded.cached == 0 and upgraded.complete


def test_pairs_are_probed_side_by_side_and_each_lacked_pair_alone(tmp_path, monkeypatch) -> None:
    """Group testing: eight single-op models in one (torch.compile takes 1-2 s a model,
    TVM ~0.3 s, whatever its size), a group that fails halved down to the pair alone,
    whose own run is its answer: the same pairs lacked, for the same reasons, as when
    each pair is tried alone, in fewer runs. A pair that crashes (a bug, not a lack) is
    supported either way."""
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "cache"))
    ops = {"Add", "Relu", "Mul", "Sub", "Abs", "Neg", "Exp", "Sigmoid", "Tanh", "Div"}
    cfg = Config(ops=frozenset(ops), dtypes=frozenset({1, 6, 7, 11}))
    lacks = f"{ADAPTERS}:UnsupportedType:op=Mul,dtype=int32"
    crashes = f"{ADAPTERS}:Raise:op=Exp"
    with BackendPool(["ort", lacks, crashes], 30.0) as pool:
        runs = _counting_runs(pool, monkeypatch)
        found = {}
        for label in (lacks, crashes):
            for group in (1, 8):
                before = runs[0]
                probed = probe_backend(pool, label, cfg, use_cache=False, group=group)
                assert probed.complete
                found[label, group] = (probed.support, runs[0] - before)
    assert found[lacks, 8][0] == found[lacks, 1][0] == {
        "Mul": {"int32": "NotImplementedError: Mul is not implemented for this type"}
    }
    assert found[crashes, 8][0] == found[crashes, 1][0] == {}
    for label in (lacks, crashes):
        assert found[label, 8][1] < found[label, 1][1] / 2, found


def test_an_edited_adapter_probes_afresh_at_the_same_version(tmp_path, monkeypatch) -> None:
    """A vendor changing their adapter (what it calls unsupported, a converter fixed)
    while its version() stays the same gets a new probe, not the old adapter's answers;
    the unchanged adapter still reads its cache."""
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "cache"))
    adapter = tmp_path / "vendor_adapter.py"
    shutil.copy(ADAPTERS, adapter)
    label = f"{adapter}:UnsupportedType:op=Add,dtype=float64"
    cfg = Config(ops=frozenset({"Add", "Relu"}), dtypes=frozenset({1}))
    with BackendPool(["ort", label], 30.0) as pool:
        first = probe_backend(pool, label, cfg)
        again = probe_backend(pool, label, cfg)
        adapter.write_text(adapter.read_text() + "\n# is_unsupported reworded\n")
        edited = probe_backend(pool, label, cfg)
    assert first.complete and first.cached == 0
    assert again.cached == again.total > 0
    assert edited.complete and edited.cached == 0


def _answered_pairs(cache: Path) -> int:
    """(op, type) pairs answered in the probe's journals, every backend's."""
    return sum(p.read_text().count('"pair"') for p in cache.glob("probe-*.jsonl"))


@pytest.mark.slow
def test_a_stuck_adapter_stops_the_probe_at_the_time_budget_and_a_rerun_resumes(
    tmp_path, monkeypatch, capsys
) -> None:
    # An adapter that never returns once held the probe for 45 minutes whatever --time said.
    cache = tmp_path / "cache"
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(cache))
    argv = ["fuzz", "--backend", "ort", "--backend", f"{ADAPTERS}:Stuck", "--dtypes", "float32"]
    argv += ["--ops", "Relu,Add,Mul,Sigmoid,Tanh,Abs,Neg,Exp,Sqrt,Sub", "--timeout", "1"]
    argv += ["--time", "8s", "--no-reduce"]
    began = time.monotonic()
    assert main([*argv, "--out", str(tmp_path / "a")]) in (0, 1)
    took = time.monotonic() - began
    err = capsys.readouterr().err
    assert "probe of stuck stopped at the time limit" in err, err
    assert took < 40, took  # the probe took at most half of --time, then tests ran
    answered = _answered_pairs(cache)
    assert answered >= 1  # ort's pairs, and stuck's timed out before the limit
    assert main([*argv, "--out", str(tmp_path / "b")]) in (0, 1)
    err = capsys.readouterr().err
    # each backend's first probe line: where it starts, and what its cache answered
    starts: dict[str, str] = {}
    for name, done in re.findall(r"probing (\w+): (\d+)/\d+ \(op, type\) pairs and ops", err):
        starts.setdefault(name, done)
    assert set(starts) == {"ort", "stuck"}, err
    assert sum(int(n) for n in starts.values()) == answered  # it went on where it stopped
    assert _answered_pairs(cache) > answered


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "exit_code"),
    [
        (signal.SIGTERM, 3),  # stops as Ctrl-C does: interrupted, its workers ended
        (signal.SIGKILL, -signal.SIGKILL),  # nothing runs: each worker sees its parent gone
    ],
)
def test_a_signal_during_a_hung_probe_leaves_no_worker(tmp_path, sig, exit_code) -> None:
    adapter = tmp_path / f"stuck_{uuid.uuid4().hex}.py"  # a name only this test's workers have
    shutil.copy(ADAPTERS, adapter)
    err_file = tmp_path / "stderr.txt"
    cmd = [sys.executable, "-m", "onnxfuzz", "fuzz", "--backend", "ort", "--backend"]
    cmd += [f"{adapter}:Stuck", "--ops", "Relu", "--dtypes", "float32", "--tests", "3"]
    cmd += ["--timeout", "600", "--out", str(tmp_path / "c")]
    env = {**os.environ, "ONNXFUZZ_CACHE": str(tmp_path / "cache")}
    with err_file.open("w") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "probing stuck: 0/" not in err_file.read_text():
            time.sleep(0.2)
        assert "probing stuck: 0/" in err_file.read_text(), err_file.read_text()
        time.sleep(1.0)  # the stuck worker is compiling its first pair
        assert _processes_with(adapter.name), "the stuck worker should be running"
        p.send_signal(sig)
        rc = p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
    left = _processes_with(adapter.name)
    for _ in range(50):  # a worker notices its parent has gone within a second
        if not left:
            break
        time.sleep(0.2)
        left = _processes_with(adapter.name)
    for pid in left:  # do not leave them to the next test either
        os.kill(pid, signal.SIGKILL)
    assert not left, f"workers left behind: {left}"
    assert rc == exit_code, err_file.read_text()


def test_probe_progress_lines_show_the_start_the_cache_the_rate_and_an_eta(
    monkeypatch, capsys
) -> None:
    from onnxfuzz.cli import fuzz

    now = [100.0]
    monkeypatch.setattr(fuzz.time, "perf_counter", lambda: now[0])
    report = fuzz._probe_reporter()

    def at(seconds: float, name: str, done: int, total: int) -> str:
        now[0] = 100.0 + seconds
        report(name, done, total)
        return capsys.readouterr().err.strip()

    assert at(0, "tvm", 0, 1000) == "probing tvm: 0/1000 (op, type) pairs and ops"
    assert at(5, "tvm", 40, 1000) == ""  # a line every 10 s, not per answer
    assert at(11, "tvm", 110, 1000) == (
        "probing tvm: 110/1000 (op, type) pairs and ops, 10.0/s, ETA 1m29s"
    )
    assert at(30, "tvm", 1000, 1000) == "probing tvm: 1000/1000 (op, type) pairs and ops, 30s"
    # a rerun: what the cache answered comes at once and does not count in the rate
    assert at(0, "ort", 800, 1000) == (
        "probing ort: 800/1000 (op, type) pairs and ops (800 from the cache)"
    )
    assert at(20, "ort", 900, 1000) == (
        "probing ort: 900/1000 (op, type) pairs and ops (800 from the cache), 5.0/s, ETA 20s"
    )
    # a second probe of a name that finished (--opset 16,21 probes each opset): its own
    # start, cache and rate, not the first one's (it read "0.7/s, ETA 26m" at 12/s)
    assert at(30, "tvm", 0, 500) == "probing tvm: 0/500 (op, type) pairs and ops"
    assert at(41, "tvm", 110, 500) == (
        "probing tvm: 110/500 (op, type) pairs and ops, 10.0/s, ETA 39s"
    )
