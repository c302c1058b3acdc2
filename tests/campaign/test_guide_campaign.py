"""Guided campaigns end to end: decisions stored with the tests, resume continuing the
same decisions, findings on guided tests reduced, and --seed-models' bad input reported
by name without stopping the campaign."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.guide import Guided, chains_of
from onnxfuzz.generate.build.seeds import lift_folder
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.campaign import Campaign, CampaignOptions, Resumed
from onnxfuzz.store.db import Store

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "adapters.py"
OPS = ["Add", "Relu", "Mul", "Sigmoid", "Tanh", "Sub", "Abs", "Neg"]


def _opts(tests: int, backend: str = "ort:opt=none", **kw) -> CampaignOptions:
    return CampaignOptions(
        backends=["ort", backend],
        tests=tests,
        seed=kw.pop("seed", 40),
        timeout=10.0,
        generator={"min_nodes": 2, "max_nodes": 6, "ops": OPS, **kw.pop("generator", {})},
        guide=kw.pop("guide", "mcts"),
        mutants=kw.pop("mutants", 0.2),
        **kw,
    )


def _run(out: Path, opts: CampaignOptions | None, changes: Resumed | None = None) -> Campaign:
    c = Campaign(out, opts, resume=opts is None, changes=changes)
    c.start()
    try:
        c.run()
    finally:
        c.close()
    return c


def _decisions(out: Path) -> dict[int, object]:
    store = Store(out / "campaign.db")
    try:
        return {i: d for i, (d, _) in store.guide_rows().items()}
    finally:
        store.close()


def _whole_and_resumed(tmp_path: Path, tests: int, **kw) -> tuple[Campaign, dict]:
    """One campaign of ``tests`` run whole in generator processes, and again in-process
    as a half, a stop and a resumed half: its decisions, asserted the same both ways."""
    whole = _run(tmp_path / "whole", _opts(tests, pregen=True, **kw))
    _run(tmp_path / "half", _opts(tests // 2, pregen=False, **kw))
    _run(tmp_path / "half", None, Resumed(more_tests=tests - tests // 2))
    a, b = _decisions(whole.out), _decisions(tmp_path / "half")
    assert sorted(a) == list(range(tests))
    assert a == b  # in-process or in a generator process, stopped or not: the same
    return whole, a


def test_guided_campaign_stores_decisions_and_resume_continues_them(tmp_path) -> None:
    whole, a = _whole_and_resumed(tmp_path, 60)
    assert sum("path" in d for d in a.values()) >= 30
    assert any("of" in d for d in a.values())  # mutants of interesting tests
    # each stored test is the model its seed and decision make
    guided = Guided(Generator(whole.cfg))
    store = Store(whole.out / "campaign.db")
    try:
        for i in (0, 17, 59):
            ops = store.db.execute("SELECT ops FROM tests WHERE id=?", (i,)).fetchone()[0]
            assert guided.case(40 + i, a[i]).ops == json.loads(ops)
    finally:
        store.close()


def test_frontier_campaign_stores_chains_and_resume_continues_them(tmp_path) -> None:
    """--guide frontier: walked chains stored as decisions, the same in a generator
    process as in-process and across a stop and resume; each stored test is the model
    its seed and decision make."""
    whole, a = _whole_and_resumed(tmp_path, 44, guide="frontier", mutants=0.0)
    chains = [i for i, d in a.items() if d and ">" in "".join(chains_of(d))]
    assert len(chains) >= 5 and min(chains) > 16  # walked once LAG tests' rewards are in
    guided = Guided(Generator(whole.cfg))
    store = Store(whole.out / "campaign.db")
    try:
        for i in chains[:3]:
            ops = store.db.execute("SELECT ops FROM tests WHERE id=?", (i,)).fetchone()[0]
            assert guided.case(40 + i, a[i]).ops == json.loads(ops)
    finally:
        store.close()


def test_optcov_campaign_is_its_seed_and_history_across_a_resume(tmp_path) -> None:
    """--guide optcov: its variety draws (the op forced fewest times so far), chains and
    blocks stored as decisions, the same in a generator process as in-process and across
    a stop and resume (the variety counts rebuilt from the stored decisions)."""
    kw = {"guide": "optcov", "mutants": 0.0}
    _, a = _whole_and_resumed(tmp_path, 48, **kw)
    variety = [d["path"][0] for d in a.values() if d.get("variety")]
    assert len(variety) >= 5 and any(chains_of(d) for d in a.values())
    # eight ops: each forced once before any is forced again, after the resume too
    firsts = variety[: len(OPS)]
    assert len(set(firsts)) == len(firsts), variety
    other = _run(tmp_path / "other", _opts(48, pregen=True, seed=41, **kw))
    assert _decisions(other.out) != a


@pytest.mark.parametrize("guide", ["mcts", "frontier"])
def test_findings_on_guided_tests_are_reduced_and_bundled(tmp_path, guide: str) -> None:
    label = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    opts = _opts(20, backend=label, generator={"dtypes": ["float32"]}, guide=guide)
    c = _run(tmp_path / "c", opts)
    store = Store(c.out / "campaign.db")
    try:
        bugs = store.bugs()
    finally:
        store.close()
    assert len(bugs) == 1 and "Sigmoid" in bugs[0]["signature"]
    assert bugs[0]["pattern"] != "unreduced"
    assert (c.out / "bugs" / bugs[0]["id"] / "reduced" / "model.onnx").exists()


# --- --seed-models ------------------------------------------------------------------------
def _model(nodes, inputs, outputs, inits=(), opsets=(("", 21),)) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=10
    )


def _x(name: str = "x") -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])


def _seed_folder(root: Path) -> Path:
    root.mkdir()
    good = _model(
        [
            helper.make_node("Relu", ["x"], ["a"]),
            helper.make_node("Add", ["a", "x"], ["b"]),
            helper.make_node("Sigmoid", ["b"], ["y"]),
        ],
        [_x()],
        [_x("y")],
    )
    onnx.save(good, root / "good.onnx")
    (root / "garbage.onnx").write_bytes(b"not a model at all")
    broken = _model([helper.make_node("Relu", ["nowhere"], ["y"])], [_x()], [_x("y")])
    onnx.save(broken, root / "invalid.onnx")
    custom = _model(
        [helper.make_node("Frobnicate", ["x"], ["y"], domain="example.com")],
        [_x()],
        [_x("y")],
        opsets=(("", 21), ("example.com", 1)),
    )
    onnx.save(custom, root / "unknown_op.onnx")
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [], [_x("t")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_x("e")])
    cond = numpy_helper.from_array(np.array(True), "c")
    flow = _model(
        [
            helper.make_node("If", ["c"], ["f"], then_branch=then, else_branch=other),
            helper.make_node("Tanh", ["f"], ["y"]),
        ],
        [_x()],
        [_x("y")],
        inits=[cond],
    )
    onnx.save(flow, root / "control_flow.onnx")
    (root / "sub").mkdir()
    w = numpy_helper.from_array(np.ones((2, 3), np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    w.external_data.add(key="location", value="../../secret.bin")
    outside = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_x()], [_x("y")], [w])
    (root / "sub" / "outside.onnx").write_bytes(outside.SerializeToString())
    return root


def test_seed_model_blocks_keep_ops_and_links_and_their_mutants_are_valid(tmp_path) -> None:
    folder = _seed_folder(tmp_path / "seeds")
    gen = Generator(Config(min_nodes=3, max_nodes=10, ops=frozenset(OPS + ["Tanh"])))
    lifted = lift_folder(folder, {s.op_type for s in gen.specs}, 10)
    assert list(lifted.blocks) == ["control_flow.onnx#0", "good.onnx#0"]
    good = lifted.blocks["good.onnx#0"]
    assert [s.op for s in good] == ["Relu", "Add", "Sigmoid"]
    assert good[1].links[0].step == 0 and good[2].links[0].step == 1
    guided = Guided(gen, lifted.blocks)
    for s in range(200):
        d = {"seed": "good.onnx#0", "mutant": s % 4 != 0}
        case = guided.case(s, d)
        v = validate(case.model, case.make_inputs(s))
        assert v.ok and v.finite, (s, v.problems[:1])
        assert guided.generator_for(d).generate(s, prefix=case.choices).ops == case.ops
        if not d["mutant"]:
            assert case.ops[0] == "Relu"


def _fuzz(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "onnxfuzz", "fuzz", "--backend", "ort", "--backend"]
    cmd += ["ort:opt=none", "--tests", "12", "--nodes", "2:6", "--ops", ",".join(OPS)]
    cmd += ["--probe", "off", "--pregen", "off", "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_bad_seed_models_are_named_and_skipped_and_the_campaign_goes_on(tmp_path) -> None:
    folder = _seed_folder(tmp_path / "seeds")
    r = _fuzz(tmp_path, "--seed-models", str(folder))
    assert r.returncode == 0, r.stdout + r.stderr
    err = r.stderr
    assert "garbage.onnx: skipped: cannot be read" in err
    assert "invalid.onnx: skipped: invalid" in err
    assert "unknown_op.onnx: skipped: no node with a spec" in err
    assert "example.com:Frobnicate x1" in err
    assert "control_flow.onnx: left out" in err and "If x1" in err
    assert "outside.onnx: skipped: external data outside its folder" in err
    assert "good.onnx" not in err
    store = Store(tmp_path / "out" / "campaign.db")
    try:
        decisions = [d for d, _ in store.guide_rows().values()]
        assert store.n_tests() == 12
    finally:
        store.close()
    assert any("seed" in d for d in decisions)


def test_seed_models_all_bad_still_runs_and_a_missing_folder_is_a_usage_error(tmp_path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "garbage.onnx").write_bytes(b"\x00\x01")
    r = _fuzz(tmp_path, "--seed-models", str(folder), "--guide", "random")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "garbage.onnx: skipped" in r.stderr
    r = _fuzz(tmp_path, "--seed-models", str(tmp_path / "nope"), "--out", str(tmp_path / "o2"))
    assert r.returncode == 2 and "--seed-models" in r.stderr
