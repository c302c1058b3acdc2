"""The fork server (``onnxfuzz.execute.zygote``): fresh processes of a backend forked from
one that imported its library, as fresh as spawned ones and judged the same way."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper
from runs import finished

from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.execute.pool import BackendPool, Spares
from onnxfuzz.execute.sandbox import Stage, Status, Worker
from onnxfuzz.execute.zygote import ForkedProcess, Zygote
from onnxfuzz.run.campaign import CampaignOptions

FORKABLE = Path(__file__).resolve().parent / "fork_adapters.py"


def _add() -> tuple[bytes, dict[str, np.ndarray]]:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return m.SerializeToString(), {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}


def _loads(log: Path, at_least: int, within: float = 60.0) -> list[list[str]]:
    """The log's lines (pid, parent pid, Python's and numpy's first draws), once there are
    ``at_least`` of them."""
    deadline = time.monotonic() + within
    while True:
        lines = [ln.split() for ln in log.read_text().splitlines()] if log.exists() else []
        if len(lines) >= at_least or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_fresh_processes_are_forked_from_one_server_and_load_their_own_adapter(tmp_path) -> None:
    data, inputs = _add()
    log = tmp_path / "loads.txt"
    label = f"{FORKABLE}:Healthy:log={log}"
    spares = Spares()
    with BackendPool([label], spares=spares) as pool:
        expected = pool.run_one(label, data, inputs).outputs
        for _ in range(3):
            got = pool.fresh_runs(label, data, inputs, 2)
            assert [o.status for o in got] == [Status.OK, Status.OK]
            assert np.array_equal(got[1].outputs["y"], expected["y"])
        assert spares.unforkable == {}
        lines = _loads(log, 5)
    spares.close()
    me = str(os.getpid())
    # the campaign's own worker and the zygote are spawned; the three fresh ones forked
    worker, zygote, *children = lines
    assert worker[1] == me and zygote[1] == me, lines
    assert len(children) == 3 and all(c[1] == zygote[0] for c in children), lines
    assert len({c[0] for c in children}) == 3
    # each loaded its own adapter, with the global random generators drawn afresh, as a
    # spawned process would (the zygote's state is not every child's)
    for k in (2, 3):
        assert len({line[k] for line in [zygote, *children]}) == 4, lines
    assert _gone(int(zygote[0]))  # closing the spares ends the zygote


def test_a_forked_worker_crashes_times_out_and_restarts_as_a_spawned_one() -> None:
    data, inputs = _add()
    crash = f"{FORKABLE}:Segfault:op=Add"
    spawned = Worker(parse_backend(crash), timeout=20)
    spawned.start()
    zygote = Zygote(crash)
    zygote.start()
    forked = Worker(parse_backend(crash), timeout=20, zygote=zygote)
    try:
        forked.start()
        assert isinstance(forked._proc, ForkedProcess)
        first = forked._proc.pid
        want = spawned.execute(data, inputs)
        got = forked.execute(data, inputs)
        assert (got.status, got.stage, got.message) == (Status.CRASH, Stage.RUN, want.message)
        assert got.message == "killed by signal SIGSEGV"
        # the same evidence: faulthandler's stack of the adapter's run, from its own stderr
        assert "run (fork_adapters.py)" in got.trace and "run (fork_adapters.py)" in want.trace
        assert _gone(first)
        # the next test gets a process forked anew
        again = forked.execute(data, inputs)
        assert again.status == Status.CRASH and forked.starts == 2
        assert isinstance(forked._proc, ForkedProcess) or forked._proc is None
    finally:
        forked.close()
        spawned.close()
        zygote.close()
    hang = f"{FORKABLE}:Hang:op=Add"
    zygote = Zygote(hang)
    zygote.start()
    slow = Worker(parse_backend(hang), timeout=1.5, zygote=zygote)
    try:
        slow.start()
        pid = slow._proc.pid
        out = slow.execute(data, inputs)
        assert (out.status, out.stage) == (Status.TIMEOUT, Stage.RUN), out.message
        assert _gone(pid)  # killed, and reaped by its zygote
    finally:
        slow.close()
        zygote.close()


def test_a_backend_that_starts_threads_as_it_loads_is_spawned_not_forked(
    tmp_path, monkeypatch
) -> None:
    data, inputs = _add()
    log = tmp_path / "loads.txt"
    label = f"{FORKABLE}:Threads:log={log}"
    spares = Spares()
    with BackendPool([label], spares=spares) as pool:
        assert pool.fresh_runs(label, data, inputs, 1)[0].status == Status.OK
        assert "thread" in spares.unforkable[label]
        lines = _loads(log, 3)
    spares.close()
    # the worker, the zygote that declined, the fresh process: all spawned by this one
    assert [line[1] for line in lines[:3]] == [str(os.getpid())] * 3, lines
    # an adapter may say so itself, and the environment for every backend
    spares = Spares()
    label = f"{FORKABLE}:NotForkSafe"
    assert spares.zygote(label, Worker(parse_backend(label))) is None
    assert "fork_safe = False" in spares.unforkable[label]
    monkeypatch.setenv("ONNXFUZZ_FORK", "0")
    assert Spares().zygote(label, Worker(parse_backend(label))) is None


def test_a_backend_that_cannot_load_says_so_in_its_own_words() -> None:
    label = f"{FORKABLE}:Refuses"
    with pytest.raises(BackendError, match=r"ImportError: libnpu\.so"):
        Zygote(label).start()
    spares = Spares()
    assert spares.zygote(label, Worker(parse_backend(label))) is None
    assert "libnpu.so" in spares.unforkable[label]


def test_forked_workers_leave_with_their_campaign(tmp_path) -> None:
    """A campaign killed outright (kill -9: no close) leaves no process behind."""
    script = tmp_path / "campaign.py"
    script.write_text(
        "import os, sys\n"
        "from onnxfuzz.execute.pool import BackendPool\n"
        f"label = {str(FORKABLE) + ':Healthy'!r}\n"
        "pool = BackendPool([label]); pool.start()\n"
        "w = pool._fresh(label)\n"
        "print(w._proc.pid, w.zygote._proc.pid, flush=True)\n"
        "os._exit(0)\n"
    )
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    child, zygote = map(int, p.stdout.split())
    assert _gone(child) and _gone(zygote)


# --- campaigns: confirmation in forked processes ----------------------------------------
def _campaign(tmp: Path, backend: str, tests: int):
    opts = CampaignOptions(
        backends=["ort", backend],
        tests=tests,
        seed=5,
        timeout=10.0,
        reduce_budget=10.0,
        probe="off",
        generator={"min_nodes": 1, "max_nodes": 5, "ops": ["Add", "Relu", "Mul", "Sigmoid"]},
    )
    return finished(tmp / "camp", opts)


def _metas(folder: Path) -> list[dict]:
    return [json.loads(m.read_text()) for m in sorted(folder.glob("*/meta.json"))]


def test_a_stale_cache_is_found_stale_in_forked_processes(tmp_path) -> None:
    """Forked fresh processes are fresh (the zygote never compiled a model): a stale cache
    is filed as depending on an earlier model, confirmed and bisected in forked ones."""
    log = tmp_path / "loads.txt"
    c = _campaign(tmp_path, f"{FORKABLE}:StaleCache:op=Add,other=Mul,log={log}", 120)
    metas = _metas(c.out / "bugs")
    state = [m for m in metas if m["reproducibility"] == "depends on an earlier model"]
    assert len(state) == 1, [(m["id"], m.get("reproducibility")) for m in metas]
    assert state[0]["earlier"]
    lines = _loads(log, 3)
    zygotes = {line[0] for line in lines if line[1] == str(os.getpid())}
    forked = [line for line in lines if line[1] in zygotes]
    assert len(forked) >= state[0]["confirmed"]["processes"], lines


def test_a_crash_confirmed_in_forked_processes_reproduces_from_its_bundle(tmp_path) -> None:
    """A segfault is confirmed in forked processes as in spawned ones (the signal, five of
    five), and the bundle's repro.py (which spawns its own process) agrees."""
    log = tmp_path / "loads.txt"
    c = _campaign(tmp_path, f"{FORKABLE}:Segfault:op=Add,log={log}", 20)
    metas = _metas(c.out / "bugs")
    assert len(metas) == 1, [m["id"] for m in metas]
    m = metas[0]
    lines = _loads(log, 3)
    zygotes = {line[0] for line in lines if line[1] == str(os.getpid())}
    assert any(line[1] in zygotes for line in lines), lines  # confirmed in forked ones
    assert (m["verdict"], m["stage"], m["reproducibility"]) == ("crash", "run", "deterministic")
    assert m["confirmed"]["failed"] == m["confirmed"]["runs"] == 5
    assert m["reduced_ops"] == ["Add"]
    copy = tmp_path / "copy"
    shutil.copytree(c.out / "bugs" / m["id"] / "reduced", copy)
    p = subprocess.run(
        [sys.executable, "repro.py"], cwd=copy, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 1 and p.stdout.strip().splitlines()[-1].startswith("REPRODUCES"), (
        p.stdout + p.stderr
    )
