"""BackendPool: the one way jobs run a model on their backends (real ONNX Runtime)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from onnxfuzz.backend import load_adapter
from onnxfuzz.errors import BackendError
from onnxfuzz.execute.pool import BackendPool, Spares
from onnxfuzz.execute.sandbox import Stage, Status
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"


@pytest.fixture(scope="module")
def case():
    c = Generator(Config(min_nodes=3, max_nodes=3, ops=frozenset({"Add"}))).generate(5)
    return c.model.SerializeToString(), c.make_inputs(5)


def test_run_all_and_run_one_agree(case) -> None:
    data, inputs = case
    with BackendPool(["ort", "ort:opt=none"], timeout=30) as pool:
        both = pool.run_all(data, inputs)
        assert set(both) == {"ort", "ort:opt=none"}
        assert all(o.status == Status.OK for o in both.values())
        one = pool.run_one("ort", data, inputs)
        assert one.status == Status.OK
        for name, value in both["ort"].outputs.items():
            assert (one.outputs[name] == value).all()
        only = pool.run_all(data, inputs, only=["ort:opt=none"])
        assert set(only) == {"ort:opt=none"}


def test_a_test_in_flight_is_kept_across_other_runs(case) -> None:
    data, inputs = case
    crash = f"{ADAPTERS}:Segfault:op=Add"
    with BackendPool(["ort", crash], timeout=30) as pool:
        pool.start_test(data, inputs)
        again = pool.run_one("ort", data, inputs)  # settles the test in flight first
        assert again.status == Status.OK
        kept = pool.wait()
        assert kept["ort"].status == Status.OK
        assert kept[crash].status == Status.CRASH and kept[crash].stage == Stage.RUN
        # the crashed worker is respawned for the next run
        assert pool.run_one(crash, data, inputs).status == Status.CRASH


def test_unavailable_or_broken_backends_are_refused_by_name() -> None:
    with pytest.raises(BackendError, match="no backend named 'nope'"), BackendPool(["nope"]):
        pass
    with pytest.raises(BackendError, match="optional hooks must be methods: supports"):
        load_adapter(f"{ADAPTERS}:HookNotCallable")


def _loads(log: Path, at_least: int, within: float = 120.0) -> list[int]:
    """The process ids that loaded the adapter, once there are ``at_least`` of them."""
    deadline = time.monotonic() + within
    while True:
        pids = [int(x) for x in log.read_text().split()] if log.exists() else []
        if len(pids) >= at_least or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)


def test_fresh_runs_take_a_process_launched_ahead_that_has_run_nothing(case, tmp_path) -> None:
    """Confirmation runs a finding in a fresh process; after the first, the next one is
    launched ahead and loads its backend while the campaign goes on (TVM and torch take
    seconds to import). It is as fresh: loaded, and it ran nothing before the call."""
    data, inputs = case
    log = tmp_path / "loads.txt"
    label = f"{ADAPTERS}:LoadLog:log={log}"
    spares = Spares(fork=False)  # ONNX Runtime is not forked from anyway (it starts a thread)
    with BackendPool([label], timeout=30, spares=spares) as pool:
        campaign_worker = _loads(log, 1)
        first = pool.fresh_runs(label, data, inputs, 2)
        assert [o.status for o in first] == [Status.OK, Status.OK]
        started = _loads(log, 3)  # the first fresh process, then the one launched ahead
        assert len(started) == 3 and len(set(started)) == 3, started
        spare = started[2]
        os.kill(spare, 0)  # loaded and waiting
        again = pool.fresh_runs(label, data, inputs, 1)
        assert again[0].status == Status.OK
        # the call used the spare (no process loaded for it) and launched the next one
        after = _loads(log, 4)
        assert after[:3] == started and len(after) == 4, after
        with pytest.raises(ProcessLookupError):
            os.kill(spare, 0)  # closed after its runs: the next call will not reuse it
        assert campaign_worker == started[:1]
    spares.close()
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(after[3], 0)  # closing the spares ends the one launched


def test_a_campaigns_lanes_share_one_process_launched_ahead_per_backend(case, tmp_path) -> None:
    """Lanes (pools of one campaign) share their spares: one idle process per backend, not
    one per lane; the campaign closes it, not a lane."""
    data, inputs = case
    log = tmp_path / "loads.txt"
    label = f"{ADAPTERS}:LoadLog:log={log}"
    spares = Spares(fork=False)
    with BackendPool([label], spares=spares) as a, BackendPool([label], spares=spares) as b:
        _loads(log, 2)  # the two lanes' own workers
        a.fresh_runs(label, data, inputs, 1)
        launched = _loads(log, 4)  # a's fresh process, then the spare
        b.fresh_runs(label, data, inputs, 1)
        after = _loads(log, 5)  # b took the spare and launched the next: one more load
        assert len(after) == 5 and after[:4] == launched, after
    os.kill(after[4], 0)  # the lanes closed; the spare is the campaign's to close
    spares.close()
    with pytest.raises(ProcessLookupError):
        os.kill(after[4], 0)
