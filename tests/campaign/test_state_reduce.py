"""A state-dependent finding's own model is reduced (onnxfuzz.reduce.reproduce.AfterEarlier):
each candidate runs in a fresh process after the bisected earlier models, against real
ONNX Runtime wrapped by the planted stale-cache adapter (tests/campaign/adapters.py). The
reduced bundle's repro.py, copied alone elsewhere, still reproduces in a fresh process;
a bug that needs no earlier model is not called state-dependent."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper
from runs import finished

from onnxfuzz.execute.messages import Test as Ran
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig
from onnxfuzz.reduce.reproduce import STATE_PROCESSES, Reproducer, Target
from onnxfuzz.run.campaign import CampaignOptions
from onnxfuzz.run.confirm import Confirmer, Reproducibility
from onnxfuzz.store.bundle import Finding

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "adapters.py"
STALE = f"{ADAPTERS}:StaleCache:op=Add,other=Mul"
WRONG = f"{ADAPTERS}:WrongOp:op=Add"
FEEDS = {"x": np.ones(2, np.float32), "y": np.full(2, 2.0, np.float32)}


def _model(*ops: str) -> onnx.ModelProto:
    """x, y -> op_1 -> op_2 ... (each op takes the last tensor and y)."""
    nodes, last = [], "x"
    for k, op in enumerate(ops):
        nodes.append(helper.make_node(op, [last, "y"], [f"t{k}"]))
        last = f"t{k}"
    x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "xy")
    z = helper.make_tensor_value_info(last, TensorProto.FLOAT, [2])
    graph = helper.make_graph(nodes, "-".join(ops), [x, y], [z])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)  # the adapters read value_info's types


def _finding(pool: BackendPool, label: str, model: onnx.ModelProto, earlier: list[Ran]):
    """``label``'s failure on ``model`` after ``earlier`` in a fresh process, as a Finding."""
    data = model.SerializeToString()
    got = pool.fresh_runs(label, data, FEEDS, 1, earlier)[0]
    outcomes = {"ort": pool.run_one("ort", data, FEEDS), label: got}
    a = Judge("ort", OracleConfig()).assess(model, FEEDS, outcomes)[label]
    assert a.signature is not None, a.judgement
    f = Finding(
        signature=a.signature,
        bug_id="b",
        judgement=a.judgement,
        backend=label,
        reference="ort",
        seed=0,
        opset=17,
        ops=[n.op_type for n in model.graph.node],
        model=model,
        inputs=FEEDS,
        outcomes=outcomes,
        versions={},
        tolerance={},
        timeout=30.0,
    )
    return f


def test_a_candidate_is_judged_in_a_fresh_process_after_the_earlier_models() -> None:
    mul = Ran(_model("Mul").SerializeToString(), FEEDS)
    add = _model("Add")
    with BackendPool(["ort", STALE], timeout=30.0) as pool:
        sig = _finding(pool, STALE, add, [mul]).signature
        after = Reproducer(pool, Target(STALE, "ort", sig, earlier=[mul]))
        assert after(add, FEEDS)  # stale after Mul: it fails
        assert not after(_model("Add", "Mul"), FEEDS)  # a model with Mul recompiles: right
        assert after.fresh is not None and after.fresh.processes >= 2
        # the other direction: the same candidate without the earlier model does not fail,
        # and the pool's own worker was left clean by the fresh processes
        assert not Reproducer(pool, Target(STALE, "ort", sig))(add, FEEDS)
        sub = Ran(_model("Sub").SerializeToString(), FEEDS)  # an earlier model without Mul
        assert not Reproducer(pool, Target(STALE, "ort", sig, earlier=[sub]))(add, FEEDS)
        # the bound: no candidate is tried once the fresh processes are spent
        after.fresh.processes = STATE_PROCESSES
        assert not after(add, FEEDS)


def test_only_a_bug_that_needs_the_earlier_model_is_called_state_dependent() -> None:
    mul = Ran(_model("Mul").SerializeToString(), FEEDS)
    with BackendPool(["ort", STALE, WRONG], timeout=30.0) as pool:
        stale = _finding(pool, STALE, _model("Add", "Sub"), [mul])
        conf = Confirmer(pool, OracleConfig(), 2).confirm(stale, [mul])
        assert conf.kind == Reproducibility.STATE and conf.failed == 0
        assert [t.model_bytes for t in conf.earlier] == [mul.model_bytes]
        # a deterministic bug confirmed with the same earlier model: not state-dependent
        wrong = _finding(pool, WRONG, _model("Add", "Sub"), [mul])
        conf = Confirmer(pool, OracleConfig(), 2).confirm(wrong, [mul])
        assert conf.kind == Reproducibility.DETERMINISTIC and conf.earlier == []


def test_every_fresh_run_failing_at_varying_runs_is_intermittent() -> None:
    """A model whose compiled form is wrong on its first run in some fresh runs and only on
    its second in others has outputs that vary from run to run: intermittent, even where
    all five fresh runs fail (a planted 30 % flaky kernel was filed "deterministic, 5 of 5"
    in a few of 91 findings, and its repro.py, run once, said "fixed" half the time)."""
    alternating = f"{ADAPTERS}:AlternatingRun:op=Add"
    with BackendPool(["ort", alternating], timeout=30.0) as pool:
        f = _finding(pool, alternating, _model("Add", "Sub"), [])
        conf = Confirmer(pool, OracleConfig(), 5).confirm(f)
    assert conf.failed == conf.runs == 5, conf
    assert conf.kind == Reproducibility.INTERMITTENT and conf.mixed, conf
    assert conf.attempts > 1 and conf.repro_runs > 1, conf
    assert conf.as_meta()["confirmed"]["mixed"] is True


def _run(script: Path, cwd: Path, edit: tuple[str, str] | None = None) -> tuple[int, str]:
    if edit is not None:
        text = script.read_text()
        assert edit[0] in text, edit[0]
        script.write_text(text.replace(*edit))
    p = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=cwd
    )
    return p.returncode, (p.stdout.strip().splitlines() or [p.stderr[-300:]])[-1]


def test_a_state_dependent_bundle_ships_its_reduced_model_with_the_earlier_ones(
    tmp_path,
) -> None:
    opts = CampaignOptions(
        backends=["ort", STALE],
        tests=120,
        seed=11,
        timeout=10.0,
        reduce_budget=60.0,
        probe="off",
        generator={"min_nodes": 3, "max_nodes": 6, "ops": ["Add", "Relu", "Mul", "Tanh"]},
    )
    c = finished(tmp_path / "camp", opts)
    metas = [json.loads(m.read_text()) for m in sorted(c.out.glob("bugs/*/meta.json"))]
    state = [m for m in metas if m["reproducibility"] == "depends on an earlier model"]
    assert len(state) == 1, [(m["id"], m["reproducibility"]) for m in metas]
    m = state[0]
    assert m["nodes"] >= 2, m["ops"]  # a trigger with something to take away
    assert "reduced_ops" in m, (m.get("reduction_dropped"), m.get("reduction_failed"))
    assert m["reduced_nodes"] < m["nodes"], (m["ops"], m["reduced_ops"])
    assert "Add" in m["reduced_ops"] and "Mul" not in m["reduced_ops"], m["reduced_ops"]
    assert m["reduced_confirmed"]["reproducibility"] == "depends on an earlier model"
    bundle = c.out / "bugs" / m["id"]
    # reduced/ alone, copied elsewhere, run in a fresh process: it brings its earlier models
    alone = tmp_path / "elsewhere" / "reduced"
    shutil.copytree(bundle / "reduced", alone)
    assert sorted(p.name for p in (alone / "earlier").iterdir()) == [
        str(k) for k in range(len(m["earlier"]))
    ]
    code, line = _run(alone / "repro.py", tmp_path)
    assert code == 1 and "depends on an earlier model" in line, line
    # the other direction: without its earlier models, the reduced model is right
    fixed = tmp_path / "fixed" / "reduced"
    shutil.copytree(bundle / "reduced", fixed)
    code, line = _run(
        fixed / "repro.py", tmp_path, (f"'earlier': {m['earlier']!r}", "'earlier': []")
    )
    assert code == 0 and line.startswith("FIXED"), line
    # the whole bundle, copied: `onnxfuzz replay` reproduces it in a fresh process
    copy = tmp_path / "copy" / m["id"]
    shutil.copytree(bundle, copy)
    p = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "replay", str(copy)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 1 and p.stdout.startswith("REPRODUCES"), p.stdout + p.stderr


def test_a_precision_finding_reduces_to_the_op_alone_where_it_shows_past_the_tolerance() -> None:
    """Add off by 0.5 under a Sqrt that holds the model's error inside the tolerance, on
    values where Add alone holds it there too: "precision in Add output"; Add alone on
    smaller values shows it past the tolerance, "values in Add output". One op's wrong
    value either side of the tolerance is one failure to keep: the reducer kept the Sigmoid
    (and an audit's +1 Add bug 2 nodes, beside its 1-node twin)."""

    def add_then(*ops: str) -> onnx.ModelProto:
        nodes, last = [helper.make_node("Add", ["x", "y"], ["a"], name="add0")], "a"
        for k, op in enumerate(ops):
            nodes.append(helper.make_node(op, [last], [f"t{k}"], name=f"{op.lower()}{k}"))
            last = f"t{k}"
        x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in "xy")
        z = helper.make_tensor_value_info(last, TensorProto.FLOAT, [2])
        model = helper.make_model(
            helper.make_graph(nodes, "g", [x, y], [z]),
            opset_imports=[helper.make_opsetid("", 17)],
            ir_version=8,
        )
        return onnx.shape_inference.infer_shapes(model)

    # Add's 100 off by 0.5 is inside the tolerance even alone (atol 1e-3 + rtol 1e-2 *
    # 100): a precision finding; its 8 off by 0.5 is past it, a wrong value (a lone op past
    # the tolerance is one since audit 16: "values" under the Sigmoid as well)
    big = {"x": np.full(2, 60.0, np.float32), "y": np.full(2, 40.0, np.float32)}
    feeds = {"x": np.full(2, 6.0, np.float32), "y": np.full(2, 2.0, np.float32)}
    with BackendPool(["ort", WRONG], timeout=30.0) as pool:
        whole = add_then("Sqrt")
        outcomes = pool.run_all(whole.SerializeToString(), big)
        sig = Judge("ort", OracleConfig(), pool).assess(whole, big, outcomes)[WRONG].signature
        assert sig is not None and sig.endswith("precision in Add output"), sig
        assert Reproducer(pool, Target(WRONG, "ort", sig))(add_then(), feeds)
        # the other direction: another op's wrong value is not this failure
        other = sig.replace("in Add output", "in Sigmoid output")
        assert not Reproducer(pool, Target(WRONG, "ort", other))(add_then(), feeds)
