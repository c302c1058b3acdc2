"""Each compiled model runs twice on the same input arrays, as a user calls a session twice:
a second run that is wrong or crashes, and a run that writes into the caller's inputs, are
bugs no single run shows (real ONNX Runtime under planted adapters)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.judge import Assessed, Judge
from onnxfuzz.judge.oracle import OracleConfig, Verdict
from onnxfuzz.judge.signature import family

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
X = {"x": np.linspace(-1.5, 1.5, 6, dtype=np.float32).reshape(2, 3)}


def _model(*ops: str) -> onnx.ModelProto:
    """A chain of unary ops (Relu -> Sigmoid ...) on x of shape [2, 3]."""
    names = ["x", *[f"t{k}" for k in range(len(ops) - 1)], "y"]
    nodes = [helper.make_node(op, [names[k]], [names[k + 1]]) for k, op in enumerate(ops)]
    info = [helper.make_tensor_value_info(t, TensorProto.FLOAT, [2, 3]) for t in names]
    graph = helper.make_graph(nodes, "g", [info[0]], [info[-1]], value_info=info[1:-1])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _runs(label: str, model: onnx.ModelProto) -> tuple[dict[str, Outcome], dict[str, Assessed]]:
    with BackendPool(["ort", label], timeout=30) as pool:
        outcomes = pool.run_all(model.SerializeToString(), {k: v.copy() for k, v in X.items()})
        judged = Judge("ort", OracleConfig(), runner=pool).assess(model, X, outcomes)
    return outcomes, judged


def test_a_healthy_backend_runs_twice_alike() -> None:
    outcomes, judged = _runs("ort:opt=none", _model("Relu", "Sigmoid"))
    for o in outcomes.values():
        assert o.status == Status.OK and o.second is None and o.inputs_changed == ()
        assert o.rerun_s > 0  # it did run a second time
    assert {j.judgement.verdict for j in judged.values()} == {Verdict.OK}


def test_a_wrong_second_run_is_a_mismatch_at_the_rerun_stage_blamed_on_its_node() -> None:
    label = f"{ADAPTERS}:SecondRunWrong:op=Sigmoid"
    outcomes, judged = _runs(label, _model("Relu", "Sigmoid", "Tanh"))
    got = outcomes[label]
    assert got.status == Status.OK and got.second is not None
    np.testing.assert_allclose(got.outputs["y"], outcomes["ort"].outputs["y"], rtol=1e-6)
    v = judged[label].judgement
    assert (v.verdict, v.stage, v.kind) == (Verdict.MISMATCH, Stage.RERUN, "values"), v
    assert "second run of the same compiled model" in v.message
    # the two runs of the model with every intermediate exposed differ first at Sigmoid
    assert "first node that differs between the runs: " in v.message and "(Sigmoid)" in v.message
    assert judged[label].signature.endswith("|mismatch|rerun|values in Sigmoid output")
    # a flaky kernel is wrong on a first run or a second alike: one family (one bundle)
    assert family(judged[label].signature) == family(f"{label}|mismatch|run|values in Add output")


def test_a_crash_on_the_second_run_is_a_crash_at_the_rerun_stage() -> None:
    label = f"{ADAPTERS}:SecondRunSegfault:op=Sigmoid"
    outcomes, judged = _runs(label, _model("Sigmoid"))
    got = outcomes[label]
    assert (got.status, got.stage) == (Status.CRASH, Stage.RERUN), got
    assert "SIGSEGV" in got.message
    assert (judged[label].judgement.verdict, judged[label].judgement.stage) == (
        Verdict.CRASH,
        Stage.RERUN,
    )


def test_a_run_that_writes_into_its_inputs_is_a_mismatch_of_kind_input() -> None:
    label = f"{ADAPTERS}:WritesIntoInputs:op=Sigmoid"
    outcomes, judged = _runs(label, _model("Relu", "Sigmoid"))
    got = outcomes[label]
    assert got.inputs_changed == ("x",)
    v = judged[label].judgement
    assert (v.verdict, v.stage, v.kind, v.output) == (Verdict.MISMATCH, Stage.RUN, "input", "x")
    assert "wrote into the caller's input array(s) x" in v.message
    assert judged[label].signature.endswith("|mismatch|run|input written in place")


def test_second_runs_that_differ_within_the_tolerance_are_ok() -> None:
    """A reduction whose order varies between runs (threads) changes the last bits: not a bug."""
    model = _model("Relu")
    y = np.maximum(X["x"], 0)
    ref = Outcome(Status.OK, outputs={"y": y})
    jitter = Outcome(Status.OK, outputs={"y": y}, second={"y": y + 1e-6})
    wrong = Outcome(Status.OK, outputs={"y": y}, second={"y": y + 0.5})
    judged = Judge("ref", OracleConfig()).assess(model, X, {"ref": ref, "a": jitter, "b": wrong})
    assert judged["a"].judgement.verdict == Verdict.OK
    assert (judged["b"].judgement.verdict, judged["b"].judgement.stage) == (
        Verdict.MISMATCH,
        Stage.RERUN,
    )
    # the reference's own second run is judged against its first
    ref_wrong = Outcome(Status.OK, outputs={"y": y}, second={"y": y * 2 + 1})
    judged = Judge("ref", OracleConfig()).assess(model, X, {"ref": ref_wrong})
    assert (judged["ref"].judgement.verdict, judged["ref"].judgement.stage) == (
        Verdict.MISMATCH,
        Stage.RERUN,
    )


def test_backend_check_fails_a_node_test_whose_second_run_is_wrong() -> None:
    """The conformance kit (``onnxfuzz backend check``) runs each node test's compiled model
    twice too: a planted second-run bug fails ONNX's Sigmoid tests, in those words."""
    from onnxfuzz.run.conformance import node_tests

    report = node_tests(f"{ADAPTERS}:SecondRunWrong:op=Sigmoid", ops="Sigmoid")
    assert report.failures, report
    assert all("the second run of the same compiled model" in f for f in report.failures)
    healthy = node_tests("ort", ops="Sigmoid")
    assert not healthy.failures, healthy.failures
