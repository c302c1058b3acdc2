"""Campaign correctness in the sandbox: timeouts are measured on the worker's clock (a busy
campaign process turns no test into a timeout, a real hang still is one), a test too costly
for the reference too is no bug, and a crash carries only its own test's stderr."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
from models import chain
from onnx import TensorProto, helper

from onnxfuzz.backend import parse_backend
from onnxfuzz.execute.sandbox import Outcome, Stage, Status, Worker
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig, Verdict

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"


def _model(op: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


X = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}


def test_a_busy_parent_turns_no_finished_test_into_a_timeout() -> None:
    w = Worker(parse_backend("ort"), timeout=1.0)
    try:
        w.start()
        assert w.submit(_model("Relu").SerializeToString(), X) is None
        time.sleep(2.5)  # the campaign process reduces, judges, stores: longer than --timeout
        got = w.collect()
        assert got.status == Status.OK, got.message
        np.testing.assert_array_equal(got.outputs["y"], np.maximum(X["x"], 0))
    finally:
        w.close()


def test_a_hang_is_still_a_timeout_with_the_workers_clock() -> None:
    w = Worker(parse_backend(f"{ADAPTERS}:Hang:op=Tanh"), timeout=1.0)
    try:
        w.start()
        assert w.submit(_model("Tanh").SerializeToString(), X) is None
        time.sleep(2.5)  # busy parent: the hang is still a hang
        got = w.collect()
        assert got.status == Status.TIMEOUT, got
        assert "worker's clock" in got.message and got.started > 0
        # the worker is replaced and the next test runs
        ok = w.execute(_model("Relu").SerializeToString(), X)
        assert ok.status == Status.OK
    finally:
        w.close()


def _timeout(stage: Stage = Stage.RUN) -> Outcome:
    return Outcome(Status.TIMEOUT, stage, message="no result within 1 s")


def _ok() -> Outcome:
    return Outcome(Status.OK, outputs={"y": np.maximum(X["x"], 0)})


def test_a_test_the_reference_cannot_finish_either_is_too_costly_not_a_bug() -> None:
    judge = Judge("ref", OracleConfig())
    both = judge.assess(_model("Relu"), X, {"ref": _timeout(), "b": _timeout()})
    assert {k: a.judgement.verdict for k, a in both.items()} == {
        "ref": Verdict.TOO_COSTLY,
        "b": Verdict.TOO_COSTLY,
    }
    assert all(a.signature is None for a in both.values())
    oom = Outcome(Status.CRASH, Stage.RUN, message="out of memory: resident set 9000 MB > cap")
    mixed = judge.assess(_model("Relu"), X, {"ref": _timeout(), "b": oom})
    assert mixed["b"].judgement.verdict == Verdict.TOO_COSTLY


def test_a_hang_only_one_backend_has_is_still_its_bug() -> None:
    judge = Judge("ref", OracleConfig())
    got = judge.assess(_model("Relu"), X, {"ref": _ok(), "b": _timeout()})
    assert got["b"].judgement.verdict == Verdict.TIMEOUT and got["b"].signature
    alone = judge.assess(_model("Relu"), X, {"ref": _timeout(), "b": _ok()})
    assert alone["ref"].judgement.verdict == Verdict.TIMEOUT and alone["ref"].signature
    assert alone["b"].judgement.verdict == Verdict.INVALID_REFERENCE


def test_a_crash_carries_only_its_own_tests_stderr() -> None:
    label = f"{ADAPTERS}:NoisySegfault:op=Tanh"
    w = Worker(parse_backend(label), timeout=30)
    sigs = []
    try:
        w.start()
        for noise in (["Relu"], ["Relu", "Relu"]):  # different log lines before each crash
            assert w.execute(chain(noise).SerializeToString(), X).status == Status.OK
            crash = w.execute(chain(["Tanh"]).SerializeToString(), X)
            assert crash.status == Status.CRASH, crash
            assert "[E:npu]" not in crash.trace, crash.trace
            ok = Outcome(Status.OK, outputs={"y": np.tanh(X["x"])})
            got = Judge("ref", OracleConfig()).assess(chain(["Tanh"]), X, {"ref": ok, label: crash})
            sigs.append(got[label].signature)
    finally:
        w.close()
    assert sigs[0] is not None and sigs[0] == sigs[1], sigs
