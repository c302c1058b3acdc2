"""Confirm before filing (onnxfuzz.run.confirm): against real ONNX Runtime wrapped by
adapters with planted flaky, stale-cache, one-off and deterministic bugs, each finding is
re-run in fresh processes; intermittent ones are filed once per family and reduced,
state-dependent ones with the earlier model their repro.py runs first, the rest counted as
not reproducible; with one reference and one target, the reference's own failures are set
aside. Every filed bundle's repro.py is run from a copied folder in a fresh process."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from runs import finished

from onnxfuzz.execute.messages import Test as Ran
from onnxfuzz.run.campaign import Campaign, CampaignOptions
from onnxfuzz.run.confirm import bisect
from onnxfuzz.store.db import Store
from onnxfuzz.store.report import reduced_ops, summary_rows

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "adapters.py"
OPS = ["Add", "Relu", "Mul", "Sigmoid", "Tanh"]


def _campaign(tmp: Path, backends: list[str], tests: int, **kw) -> Campaign:
    opts = CampaignOptions(
        backends=backends,
        tests=tests,
        seed=kw.pop("seed", 5),
        timeout=10.0,
        reduce_budget=kw.pop("reduce_budget", 10.0),
        probe="off",
        generator={"min_nodes": 1, "max_nodes": 5, "ops": OPS},
        **kw,
    )
    return finished(tmp / "camp", opts)


def _metas(folder: Path) -> list[dict]:
    return [json.loads(m.read_text()) for m in sorted(folder.glob("*/meta.json"))]


def _repro(bundle: Path, tmp: Path, edit: tuple[str, str] | None = None) -> tuple[int, str]:
    """Run a bundle's repro.py from a copy of the bundle elsewhere, in a fresh process
    (``edit``: text to replace in the copied script first)."""
    copy = tmp / f"copy-{bundle.name}"
    shutil.copytree(bundle, copy)
    script = copy / "repro.py"
    if edit is not None:
        text = script.read_text()
        assert edit[0] in text
        script.write_text(text.replace(*edit))
    p = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp
    )
    return p.returncode, p.stdout.strip()


def test_bisect_keeps_the_one_earlier_model_needed_and_refuses_a_fluke() -> None:
    tests = [Ran(bytes([k]), {}, k) for k in range(12)]
    needed = tests[4]
    assert bisect(tests, lambda ts: needed in ts, 10) == [needed]
    assert bisect(tests, lambda ts: False, 10) is None
    # a flaky bug that failed once after the earlier models is not state-dependent
    calls = []

    def once(ts: list[Ran]) -> bool:
        calls.append(ts)
        return len(calls) == 1

    assert bisect(tests, once, 10) is None


def test_flaky_wrong_value_is_one_intermittent_bundle_reduced_to_its_trigger(tmp_path) -> None:
    flaky = f"{ADAPTERS}:Flaky:op=Add,p=0.3,draw=sequence"  # 30 %, evenly spread
    c = _campaign(tmp_path, ["ort", flaky], 120)
    metas = _metas(c.out / "bugs")
    assert 1 <= len(metas) <= 2, [m["id"] for m in metas]
    for m in metas:
        assert m["reproducibility"] == "intermittent", m.get("confirmed")
        assert 0 < m["confirmed"]["failed"] < m["confirmed"]["runs"]
        assert m["reduced_ops"] == ["Add"]
        # each compiled model runs twice: a race caught on a second run, which fresh runs
        # show on first runs too, is filed as a failure of any run, not of second runs
        assert m["stage"] == "run", (m["stage"], m["confirmed"], m["message"])
    # the tables' "reduced ops" said "intermittent" (the bug's pattern), not the ops
    store = Store.open_existing(c.out / "campaign.db")
    try:
        rows = summary_rows(store)
    finally:
        store.close()
    shown = [reduced_ops(r) for r in rows]
    assert shown == ["Add (intermittent)"] * len(metas), shown
    # the tables' stage is the bundle's (they said "rerun" beside meta.json's "run")
    assert [r["stage"] for r in rows] == ["run"] * len(metas), rows
    bundle = c.out / "bugs" / metas[0]["id"]
    issue = (bundle / "issue.md").read_text()
    seen = metas[0]["confirmed"]
    # fresh processes, each running the model up to twice: not "5 of 5 runs" (read as
    # "always" of a kernel wrong on 3 runs in 10)
    assert f"seen in {seen['failed']} of {seen['runs']} fresh processes" in issue, issue
    assert f"running it up to {seen['attempts']} times" in issue, issue
    assert "does not show on every run" in issue
    code, line = _repro(bundle / "reduced", tmp_path)
    assert code in (0, 1), line
    if code == 1:  # a try that showed it: how many of them, and what a try is
        assert re.search(r"reproduced in \d+ of \d+ tries, each a compile and two runs", line)
        assert "intermittent" in line, line
    # the other direction: the same repro against the backend fixed (never wrong)
    code, line = _repro(bundle, tmp_path / "fixed", ("'p': '0.3'", "'p': '0'"))
    assert code == 0 and line.startswith("FIXED") and "reproduced 0 of" in line, line


def test_deterministic_bug_is_filed_plainly_with_every_fresh_run_failing(tmp_path) -> None:
    c = _campaign(tmp_path, ["ort", f"{ADAPTERS}:WrongOp:op=Add"], 40)
    metas = _metas(c.out / "bugs")
    assert metas
    for m in metas:
        assert m["reproducibility"] == "deterministic"
        assert m["confirmed"]["failed"] == m["confirmed"]["runs"] == 5
        assert "Reproduced 5 of 5 runs" in (c.out / "bugs" / m["id"] / "issue.md").read_text()
    code, line = _repro(c.out / "bugs" / metas[0]["id"], tmp_path)
    assert code == 1 and line.startswith("REPRODUCES"), line
    assert "of 1 runs" not in line  # a deterministic repro.py runs once and says so plainly


def test_stale_cache_is_filed_as_depending_on_an_earlier_model(tmp_path) -> None:
    """One stale cache that gives wrong values on Add and makes Relu raise: one bundle
    (audit 15's stale cache was filed three times, once per error it met), which names
    the other signature it showed as."""
    c = _campaign(tmp_path, ["ort", f"{ADAPTERS}:StaleCache:op=Add,other=Mul,raises=Relu"], 120)
    metas = _metas(c.out / "bugs")
    state = [m for m in metas if m["reproducibility"] == "depends on an earlier model"]
    assert len(state) == 1, [(m["id"], m.get("reproducibility")) for m in metas]
    assert state[0]["earlier"]  # the earlier model(s), bisected
    seen = [state[0]["signature"], *(u["signature"] for u in state[0].get("follow_ups", []))]
    assert {s.split("|")[1] for s in seen} == {"mismatch", "crash"}, seen
    issue = (c.out / "bugs" / state[0]["id"] / "issue.md").read_text()
    assert "showed in other ways after other models" in issue
    for m in metas:
        code, line = _repro(c.out / "bugs" / m["id"], tmp_path)
        assert not line.startswith("FIXED"), (m["id"], line)
    code, line = _repro(c.out / "bugs" / state[0]["id"], tmp_path / "again")
    assert code == 1 and "depends on an earlier model" in line, line
    # the other direction: without its earlier model, the same repro finds it fixed
    earlier = repr(state[0]["earlier"])
    code, line = _repro(
        c.out / "bugs" / state[0]["id"],
        tmp_path / "alone",
        (f"'earlier': {earlier}", "'earlier': []"),
    )
    assert code == 0 and line.startswith("FIXED"), line
    issue = (c.out / "bugs" / state[0]["id"] / "issue.md").read_text()
    assert "depends on an earlier model" in issue


def test_a_failure_no_run_recreates_is_counted_not_filed(tmp_path) -> None:
    marker = tmp_path / "failed-once"
    c = _campaign(tmp_path, ["ort", f"{ADAPTERS}:FailsOnce:op=Add,marker={marker}"], 30)
    assert marker.exists()  # it did fail once
    store = Store(c.out / "campaign.db")
    try:
        assert store.not_reproducible() == 1
        assert store.bugs() == []
    finally:
        store.close()
    assert not list(c.out.glob("bugs/*/meta.json"))


def test_a_family_whose_replays_recreate_nothing_is_not_replayed_again(tmp_path) -> None:
    """A bug no second run shows, localized to a different op model by model: each finding
    that no fresh run re-created replayed up to 96 earlier models in a fresh process (a
    stale cache?), however many of its family had re-created nothing before: a flaky
    kernel's hits took up to 75 % of a campaign's wall time. After REPLAY_GIVE_UP fruitless
    replays of a family, its later findings are not reproducible without one, and the
    summary says how many."""
    from onnxfuzz.run.campaign import REPLAY_GIVE_UP

    seen = tmp_path / "seen"
    seen.mkdir()
    target = f"{ADAPTERS}:FirstSight:ops={'+'.join(OPS)},seen={seen}"
    c = _campaign(tmp_path, ["ort", target], 16, workers=1)
    store = Store(c.out / "campaign.db")
    try:
        lost = store.not_reproducible()
        cost = store.get_meta("confirmation")
        assert store.bugs() == []
    finally:
        store.close()
    assert sum(c._fruitless.values()) == REPLAY_GIVE_UP, c._fruitless
    assert lost > REPLAY_GIVE_UP + 1, lost
    # every later one that had models before it went without a replay
    assert 0 < cost["unreplayed"] <= lost - REPLAY_GIVE_UP, cost


def test_the_reference_alone_is_set_aside_unless_asked(tmp_path) -> None:
    backends = [f"{ADAPTERS}:Raise:op=Relu", f"{ADAPTERS}:WrongOp:op=Add"]
    c = _campaign(tmp_path / "a", backends, 40)
    assert {m["backend"] for m in _metas(c.out / "bugs")} == {backends[1]}
    alone = _metas(c.out / "reference-bugs")
    assert [m["backend"] for m in alone] == [backends[0]]
    assert "reduced_ops" not in alone[0]
    code, line = _repro(c.out / "reference-bugs" / alone[0]["id"], tmp_path)
    assert code == 1 and line.startswith("REPRODUCES"), line
    c = _campaign(tmp_path / "b", backends, 40, reduce_reference=True)
    filed = {m["backend"]: m for m in _metas(c.out / "bugs")}
    assert set(filed) == set(backends)
    assert filed[backends[0]]["reduced_ops"] == ["Relu"]
    assert not (c.out / "reference-bugs").exists()


def _binary(op: str, n: int = 2) -> bytes:
    from onnx import TensorProto, helper

    x, y, z = (helper.make_tensor_value_info(n_, TensorProto.FLOAT, [n]) for n_ in "xyz")
    graph = helper.make_graph([helper.make_node(op, ["x", "y"], ["z"])], op, [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_the_model_that_filled_a_cache_long_before_is_replayed() -> None:
    """A cache keyed by the inputs (a TVM or TensorRT engine per shape) is filled by the
    first model of an input signature and handed, stale, to a later one many tests on:
    the audit's adapter had each stale hit come from a model 94 to 3,339 compiles before,
    beyond the 64 a worker remembered, and all 63 findings were dropped as not
    reproducible. The first models of each input signature are kept however long ago,
    and are among those a confirmation replays; after that one alone, the failing model
    is wrong in a fresh process."""
    import numpy as np

    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.execute.sandbox import EARLIER_MAX, HISTORY_TESTS

    feeds = {"x": np.ones(2, np.float32), "y": np.ones(2, np.float32)}
    others = {"x": np.ones(3, np.float32), "y": np.ones(3, np.float32)}
    label = f"{ADAPTERS}:StaleCache:op=Add,other=Mul"
    with BackendPool([label], timeout=30.0) as pool:
        pool.start_test(_binary("Mul"), feeds)  # fills the cache
        pool.wait()
        for _ in range(HISTORY_TESTS + 6):  # other inputs: not of its signature
            pool.start_test(_binary("Sub", 3), others)
            pool.wait()
        pool.start_test(_binary("Add"), feeds)
        assert float(pool.wait()[label].outputs["z"][0]) == 2.5  # stale
        before = pool.ran_before(label, pool.last_seq, EARLIER_MAX)
        assert len(before) == EARLIER_MAX + 1 and before[0].model_bytes == _binary("Mul")
        after = pool.fresh_runs(label, _binary("Add"), feeds, 1, before[:1])
        assert float(after[0].outputs["z"][0]) == 2.5


def _leaky(alpha: float, n: int) -> bytes:
    from onnx import TensorProto, helper

    x, y = (helper.make_tensor_value_info(k, TensorProto.FLOAT, [n]) for k in "xy")
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=alpha)
    graph = helper.make_graph([node], "leaky", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_the_first_model_of_the_same_op_types_is_replayed() -> None:
    """A cache keyed by the graph's op types (not attributes, not shapes) hands the first
    LeakyRelu's session to a LeakyRelu of other inputs many tests on: it fails there. The
    audit's cache of this kind lost 649 of 650 findings as not reproducible (the first
    model of the key lay beyond the history, and had other inputs). The first models of
    each op-type list are kept and replayed; after that one alone, the failure is back in
    a fresh process."""
    import numpy as np

    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.execute.sandbox import EARLIER_MAX, HISTORY_TESTS, Status

    label = f"{ADAPTERS}:StaleByOps"
    others = {"x": np.ones(3, np.float32), "y": np.ones(3, np.float32)}
    x = {"x": np.full(4, -1.0, np.float32)}
    with BackendPool([label], timeout=30.0) as pool:
        pool.start_test(_leaky(0.1, 2), {"x": np.ones(2, np.float32)})  # fills the cache
        pool.wait()
        for _ in range(HISTORY_TESTS + 6):  # other ops, other inputs
            pool.start_test(_binary("Sub", 3), others)
            pool.wait()
        pool.start_test(_leaky(0.5, 4), x)
        assert pool.wait()[label].status != Status.OK  # the [2] session given [4]
        before = pool.ran_before(label, pool.last_seq, EARLIER_MAX)
        assert before[0].model_bytes == _leaky(0.1, 2), [len(t.model_bytes) for t in before]
        assert len(before) == EARLIER_MAX + 1
        alone = pool.fresh_runs(label, _leaky(0.5, 4), x, 1)
        assert alone[0].status == Status.OK
        after = pool.fresh_runs(label, _leaky(0.5, 4), x, 1, before[:1])
        assert after[0].status != Status.OK


def test_a_worker_remembers_its_process_and_a_fresh_one_replays_it() -> None:
    import numpy as np

    from onnxfuzz.execute.pool import BackendPool

    feeds = {"x": np.ones(2, np.float32), "y": np.ones(2, np.float32)}
    label = f"{ADAPTERS}:StaleCache:op=Add,other=Mul"
    with BackendPool([label], timeout=30.0) as pool:
        for op in ("Sub", "Mul", "Add"):
            pool.start_test(_binary(op), feeds)
            got = pool.wait()[label]
        assert float(got.outputs["z"][0]) == 2.5  # stale: Add after Mul in this process
        before = pool.ran_before(label, pool.last_seq, 10)
        assert [t.model_bytes for t in before] == [_binary("Sub"), _binary("Mul")]
        # the most recent one, after the first ones of the same inputs (Sub, Mul: both)
        one = [t.model_bytes for t in pool.ran_before(label, pool.last_seq, 1)]
        assert one == [_binary("Sub"), _binary("Mul")]
        fresh = pool.fresh_runs(label, _binary("Add"), feeds, 2)
        assert [float(o.outputs["z"][0]) for o in fresh] == [2.0, 2.0]
        after = pool.fresh_runs(label, _binary("Add"), feeds, 1, before[-1:])
        assert float(after[0].outputs["z"][0]) == 2.5
        # the pool's own worker kept its state: fresh runs are other processes
        pool.start_test(_binary("Add"), feeds)
        assert float(pool.wait()[label].outputs["z"][0]) == 2.5
