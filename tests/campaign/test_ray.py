"""The Ray executor on a real local Ray cluster (a head and a worker node, one CPU each):
the same tests and bug hits as the local executor, nothing lost or counted twice when a
Ray worker is killed mid-shard, and a campaign resumed across executors."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray  # the `ray` extra: `make test` installs it
from ray.cluster_utils import Cluster

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.campaign import Campaign, CampaignOptions, Progress, Resumed
from onnxfuzz.run.ray_executor import RayCampaign

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
WRONG = f"{ADAPTERS}:WrongOp:op=Sigmoid"  # a planted miscompilation: Sigmoid + 0.5
TESTS = 48
GENERATOR = {
    "min_nodes": 2,
    "max_nodes": 5,
    "ops": ["Add", "Relu", "Mul", "Sigmoid", "Tanh"],
    "dtypes": ["float32"],
}


def _opts(tests: int = TESTS, reduce: bool = False) -> CampaignOptions:
    return CampaignOptions(
        backends=["ort", WRONG], tests=tests, probe="off", reduce=reduce, generator=GENERATOR
    )


def _run(c: Campaign, on_update=None) -> Campaign:
    c.start()
    try:
        c.run(on_update)
    finally:
        c.close()
    return c


def _state(out: Path) -> tuple[list, list, dict]:
    """Tests (id, seed, ops), results (id, backend, verdict, signature) and hits per bug
    signature. (A bug key adds the reduced op pattern, and the first test of a bug is the
    first to arrive: neither is a property of the tests.)"""
    db = sqlite3.connect(out / "campaign.db")
    try:
        tests = db.execute("SELECT id, seed, ops FROM tests ORDER BY id").fetchall()
        results = db.execute(
            "SELECT test_id, backend, verdict, signature FROM results ORDER BY test_id, backend"
        ).fetchall()
        hits: dict[str, int] = {}
        for sig, n in db.execute("SELECT signature, hits FROM bugs"):
            hits[sig] = hits.get(sig, 0) + n
    finally:
        db.close()
    return tests, results, hits


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    """The reference: the local executor, findings reduced."""
    out = tmp_path_factory.mktemp("local") / "camp"
    _run(Campaign(out, _opts(reduce=True), resume=False))
    tests, results, hits = _state(out)
    assert [t[0] for t in tests] == list(range(TESTS))
    assert sum(hits.values()) >= 3, hits  # the planted bug is hit: there is something to match
    return out


def test_ray_runs_the_tests_and_finds_the_hits_of_the_local_executor(
    tmp_path, cluster, local
) -> None:
    c = RayCampaign(tmp_path / "camp", _opts(reduce=True), address=cluster.address, shard=8)
    c.start()
    try:
        assert len(c.actor_pids()) == 2  # a shard runner on each node
        c.run()
    finally:
        c.close()
    assert _state(c.out) == _state(local)
    # One bundle per root cause, reduced by the driver; its model is byte for byte the one
    # the seed gives locally (made on a node, shipped back with the finding).
    bundles = sorted((c.out / "bugs").iterdir())
    assert len(bundles) == 1, bundles
    meta = json.loads((bundles[0] / "meta.json").read_text())
    assert meta["reduced_ops"] == ["Sigmoid"], meta["reduced_ops"]
    seed = meta["seed"]
    cfg = Config.from_record(GENERATOR, opset=c.cfg.opset)
    made = Generator(cfg).generate(seed).model.SerializeToString()
    assert (bundles[0] / "model.onnx").read_bytes() == made


def test_a_killed_ray_worker_loses_no_test_and_counts_none_twice(tmp_path, cluster, local) -> None:
    c = RayCampaign(tmp_path / "camp", _opts(), address=cluster.address, shard=8)
    killed: list[int] = []

    def kill_one(p: Progress) -> None:
        # SIGKILL a shard runner once some tests are stored and most are still to come.
        if not killed and 8 <= p.tests < TESTS - 16:
            pid = next(iter(c.actor_pids().values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    _run(c, kill_one)
    assert killed, "the run ended before the kill"
    assert c.reruns >= 1  # the dead worker's shard was given again
    assert _state(c.out) == _state(local)


def test_resume_across_executors_gives_the_tests_of_one_run(tmp_path, cluster, local) -> None:
    # local 16 tests, then 16 more on Ray (through the command line), then 16 locally: each
    # executor continues a campaign the other began.
    out = tmp_path / "camp"
    _run(Campaign(out, _opts(tests=16), resume=False))
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "fuzz", "--resume", "--out", str(out), "--tests"]
        + ["16", "--executor", "ray", "--address", cluster.address],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr  # 1: findings
    # The nodes test on while the driver reduces: the summary does not claim otherwise.
    assert "wall time (reductions included" in " ".join(r.stdout.split()), r.stdout[-800:]
    assert len(_state(out)[0]) == 32
    _run(Campaign(out, None, resume=True, changes=Resumed(more_tests=16)))
    assert _state(out) == _state(local)


def test_a_hung_ray_worker_is_killed_and_its_shard_runs_again(tmp_path, cluster, local) -> None:
    """An actor that stops answering without dying (here SIGSTOP, never resumed: Ray still
    counts it alive) held its shard, and the campaign, until someone resumed it. Past
    ``silence_limit`` it is killed and its shard given again."""
    c = RayCampaign(tmp_path / "camp", _opts(), address=cluster.address, shard=4, silence_limit=4.0)
    stopped: list[tuple[int, float]] = []

    def stop_one(p: Progress) -> None:
        if not stopped and 8 <= p.tests < TESTS - 12:
            pid = next(iter(c.actor_pids().values()))
            os.kill(pid, signal.SIGSTOP)
            stopped.append((pid, time.monotonic()))
        elif stopped and time.monotonic() - stopped[0][1] > 90 and not c.hung:
            # no watchdog: resume it, so that the test fails below instead of hanging
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped[0][0], signal.SIGCONT)

    _run(c, stop_one)
    assert stopped, "the run ended before the stop"
    assert c.hung >= 1 and c.reruns >= 1
    assert _state(c.out) == _state(local)


def test_a_long_reduction_on_the_driver_kills_no_healthy_worker(tmp_path, cluster, local) -> None:
    """The false direction of the watchdog: while the driver reduces a finding, no
    stream is read and every one looks silent; that time is not silence. A reduction
    made to take three times the limit kills nothing, and the tests are the local run's."""

    class SlowReduction(RayCampaign):
        slept = False

        def bug_key(self, f, lane, gen=None):
            if not self.slept:
                SlowReduction.slept = True
                time.sleep(12.0)
            return super().bug_key(f, lane, gen)

    c = SlowReduction(
        tmp_path / "camp", _opts(reduce=True), address=cluster.address, silence_limit=4.0
    )
    _run(c)
    assert SlowReduction.slept
    assert c.hung == 0 and c.reruns == 0
    assert _state(c.out) == _state(local)


def _confirmed(out: Path) -> list[tuple]:
    """Per bundle: how its finding was confirmed, its rate and its reduced ops."""
    metas = [json.loads(m.read_text()) for m in sorted(out.glob("bugs/*/meta.json"))]
    return sorted(
        (
            m["reproducibility"],
            m["confirmed"]["runs"],
            m["confirmed"]["failed"],
            m["confirmed"]["repro_runs"],
            tuple(m.get("reduced_ops") or ()),
            len(m.get("earlier", [])),
        )
        for m in metas
    )


@pytest.mark.parametrize(
    ("planted", "kind"),
    [
        # 30 % of runs wrong, evenly spread (any 5 runs in a row hold 1 or 2 wrong ones)
        ("Flaky:op=Add,p=0.3,draw=sequence", "intermittent"),
        # wrong only after the process compiled a model with Mul
        ("StaleCache:op=Add,other=Mul", "depends on an earlier model"),
    ],
)
def test_a_finding_from_a_ray_node_is_confirmed_as_the_local_executor_s(
    tmp_path, cluster, planted, kind
) -> None:
    """Confirmation on the Ray path: a node finds it, the driver re-runs it in fresh
    processes of its own (an intermittent one's rate; a state-dependent one's earlier
    models, shipped from the node) and files it as the local executor does."""
    label = f"{ADAPTERS}:{planted}"
    opts = {
        "backends": ["ort", label],
        "tests": TESTS,
        "probe": "off",
        "reduce_budget": 20.0,
        "generator": GENERATOR,
    }
    here = tmp_path / "local"
    _run(Campaign(here, CampaignOptions(**opts), resume=False))
    c = RayCampaign(tmp_path / "ray", CampaignOptions(**opts), address=cluster.address, shard=8)
    _run(c)
    assert c.progress.confirmed >= 1
    local, remote = _confirmed(here), _confirmed(c.out)
    assert local and [r[0] for r in local] == [kind] * len(local), local
    assert remote and [r[0] for r in remote] == [kind] * len(remote), remote
    for _, runs, failed, repro_runs, _, earlier in remote:
        if kind == "intermittent":  # the rate stored; repro.py runs the model many times
            assert 0 < failed < runs and repro_runs > 1 and earlier == 0
        else:  # not alone, after the earlier model(s) the node's worker had run
            assert failed == 0 and repro_runs == 1 and earlier >= 1
    # the same rates and reductions (which test hits it first differs: the nodes' workers
    # ran other tests before it; the fresh runs are the driver's, as locally)
    assert {r[1:5] for r in remote} == {r[1:5] for r in local}, (remote, local)
    bundle = next((c.out / "bugs").iterdir())
    p = subprocess.run(
        [sys.executable, str(bundle / "repro.py")], capture_output=True, text=True, timeout=300
    )
    line = p.stdout.strip().splitlines()[-1]
    assert p.returncode == 1 and line.startswith("REPRODUCES"), p.stdout + p.stderr


def test_a_lost_node_s_shards_run_on_the_nodes_left(tmp_path, cluster, local) -> None:
    # The module's last use of the cluster: its worker node is not brought back (starting
    # a node again costs more than the rest of the test).
    worker = next(n for n in cluster.list_all_nodes() if not n.head)
    # Small shards: the node is lost while it runs one (with 8-test shards, a loaded
    # machine once lost it in the instant between two, and nothing had to run again).
    c = RayCampaign(tmp_path / "camp", _opts(), address=cluster.address, shard=4)
    lost: list[bool] = []
    frozen: list[float] = []

    def lose_node(p: Progress) -> None:
        # The node must be lost while its shard still owes tests, or nothing has to run
        # again. Its tests may be on their way to the driver before the driver counts them
        # (CI lost it twice with every test sent), so its actor is stopped first (SIGSTOP):
        # from then on it sends nothing, and what it sent arrives within the wait below.
        # If its shard then owes nothing (every test had been sent, only the stream's end
        # had not), it goes on (SIGCONT) and is stopped again later.
        pids = c.pids_on(worker.node_id)
        owes = c.owed().get(worker.node_id, 0)
        if lost or not pids:
            return
        if not frozen:
            if 8 <= p.tests < TESTS - 12 and owes >= 2:
                for pid in pids:
                    os.kill(pid, signal.SIGSTOP)
                frozen.append(time.monotonic())
        elif time.monotonic() - frozen[-1] >= 2.0:
            if owes >= 1:
                cluster.remove_node(worker, allow_graceful=False)  # raylet, workers: all gone
                lost.append(True)
            else:
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
                frozen.clear()

    _run(c, lose_node)
    assert lost, "the run ended before the node was lost"
    assert c.reruns >= 1
    assert _state(c.out) == _state(local)


def _fuzz(out: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "onnxfuzz", "fuzz", "--backend", "ort", "--backend"]
    cmd += ["ort:opt=none", "--tests", "4", "--out", str(out), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_an_unreachable_address_is_one_line_and_writes_nothing(tmp_path) -> None:
    # A port nothing listens on (bound, never listening).
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    try:
        r = _fuzz(tmp_path / "camp", "--executor", "ray", "--address", f"127.0.0.1:{port}")
    finally:
        s.close()
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "no Ray cluster answers" in r.stderr, r.stderr
    assert not (tmp_path / "camp").exists()


def test_without_ray_the_error_names_the_fix(tmp_path) -> None:
    # A Python that cannot import ray (a package of that name which fails to import).
    fake = tmp_path / "site"
    (fake / "ray").mkdir(parents=True)
    (fake / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(fake), env.get("PYTHONPATH", "")])
    r = _fuzz(tmp_path / "camp", "--executor", "ray", env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.strip() == (
        "onnxfuzz: error: --executor ray: Ray is not installed; pip install onnxfuzz[ray]"
    )
    assert not (tmp_path / "camp").exists()


def test_the_guide_is_refused_on_ray_before_anything_is_written(tmp_path) -> None:
    # The guide decides test i from earlier rewards in one process: not across a cluster.
    r = _fuzz(tmp_path / "camp", "--executor", "ray", "--guide", "mcts")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "only --guide random" in r.stderr, r.stderr
    assert not (tmp_path / "camp").exists()
