"""The per-try time limit while a campaign reduces a finding (``run.campaign``)."""

from __future__ import annotations

import onnx

from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.oracle import Judgement, Verdict
from onnxfuzz.reduce.reproduce import HANG_TRY_FACTOR
from onnxfuzz.run.campaign import (
    TRY_FACTOR,
    TRY_FLOOR,
    candidate_timeout,
    reduction_timeout,
)
from onnxfuzz.store.bundle import Finding


def _finding(target: Outcome, reference: Outcome, timeout: float = 300.0) -> Finding:
    return Finding(
        signature="tvm|crash|compile|x",
        bug_id="tvm-crash-compile-0",
        judgement=Judgement(Verdict.CRASH, Stage.COMPILE),
        backend="tvm",
        reference="ort",
        seed=0,
        opset=17,
        ops=["Relu"],
        model=onnx.ModelProto(),
        inputs={},
        outcomes={"tvm": target, "ort": reference},
        versions={},
        tolerance={},
        timeout=timeout,
    )


OK_FAST = Outcome(Status.OK, compile_s=0.01, run_s=0.01)


def test_a_crash_reduces_with_a_limit_from_its_tests_time_not_the_campaigns() -> None:
    quick = _finding(Outcome(Status.CRASH, Stage.COMPILE, compile_s=0.3), OK_FAST)
    assert reduction_timeout(quick) is None  # confirmation keeps the campaign's --timeout
    assert candidate_timeout(quick) == TRY_FLOOR
    slow = _finding(Outcome(Status.CRASH, Stage.COMPILE, compile_s=4.0), OK_FAST)
    assert candidate_timeout(slow) == TRY_FACTOR * 4.0
    capped = _finding(Outcome(Status.CRASH, Stage.COMPILE, compile_s=4.0), OK_FAST, 25.0)
    assert candidate_timeout(capped) == 25.0  # never past --timeout


def test_a_hang_keeps_the_hang_limit() -> None:
    reference = Outcome(Status.OK, compile_s=1.0, run_s=1.0)
    hang = _finding(Outcome(Status.TIMEOUT, Stage.RUN, compile_s=0.2, run_s=300.0), reference)
    assert candidate_timeout(hang) == reduction_timeout(hang) == HANG_TRY_FACTOR * 2.0
