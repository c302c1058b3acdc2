"""With the ONNX reference evaluator as the reference, a model one of its documented faults
applies to (``reference_limits``) measures the other backends against wrong values: their
departures are invalid-reference, not bugs of theirs. With the evaluator under test, its
failure there is known, not filed again. Real evaluator, real ONNX Runtime and TVM, on
LRN, whose evaluator sums its window over the batch rather than the channels (onnx #7805):
right where N == C, wrong values where N < C."""

from __future__ import annotations

import importlib.util
import re
import sqlite3
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.judge.attribution import blame
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig, Verdict

REFERENCE = "onnx-reference"


def _lrn(n: int, c: int) -> onnx.ModelProto:
    shape = [n, c, 2, 3]
    node = helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.5, beta=0.75, bias=1.0)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _verdicts(
    backends: list[str], n: int, c: int, reference: str = REFERENCE
) -> dict[str, tuple[str, str]]:
    model = _lrn(n, c)
    x = np.linspace(-2, 2, n * c * 6, dtype=np.float32).reshape(n, c, 2, 3)
    return _blamed(backends, model, {"x": x}, reference)


def _blamed(
    backends: list[str], model: onnx.ModelProto, inputs: dict[str, np.ndarray], reference: str
) -> dict[str, tuple[str, str]]:
    with BackendPool(backends) as pool:
        outcomes = pool.run_all(model.SerializeToString(), inputs)
        got = blame(Judge(reference, OracleConfig(), pool), model, inputs, outcomes)
    return {
        k: (b.assessed.judgement.verdict, b.assessed.judgement.message, b.assessed.signature)
        for k, b in got.items()
    }


def test_a_departure_from_the_evaluators_documented_fault_is_invalid_reference() -> None:
    got = _verdicts([REFERENCE, "ort"], 1, 5)
    verdict, message, _ = got["ort"]
    assert verdict == Verdict.INVALID_REFERENCE, got
    assert "onnx-reference is wrong on this model's LRN, not the backend" in message
    assert got[REFERENCE][0] == Verdict.OK
    # where the fault does not apply (N == C) the two agree: nothing to excuse
    assert _verdicts([REFERENCE, "ort"], 5, 5)["ort"][0] == Verdict.OK


@pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="needs apache-tvm")
def test_two_backends_that_agree_against_a_faulted_evaluator_are_not_blamed() -> None:
    """The evaluator's vote does not count where its fault applies, so two agreeing backends
    make no majority: neither is filed (before, each got a bug of its own)."""
    got = _verdicts([REFERENCE, "ort", "tvm"], 1, 5)
    assert got["ort"][0] == got["tvm"][0] == Verdict.INVALID_REFERENCE, got


def test_the_evaluator_under_test_failing_on_its_documented_fault_is_known() -> None:
    """ONNX Runtime the reference, the evaluator under test: its LRN's wrong values where
    N < C are a documented fault, counted as known, not filed (a campaign of 800 tests of
    ORT against the evaluator filed 43 of its 47 evaluator bundles on such faults)."""
    got = _verdicts(["ort", REFERENCE], 1, 5, reference="ort")
    verdict, message, signature = got[REFERENCE]
    assert verdict == Verdict.KNOWN and signature is None, got
    assert "a documented fault of the ONNX reference evaluator's LRN" in message
    assert "onnx #7805" in message, message
    assert _verdicts(["ort", REFERENCE], 5, 5, reference="ort")[REFERENCE][0] == Verdict.OK


def _shrink_beside_a_loop() -> onnx.ModelProto:
    """Shrink on an int32 past 2**24, which ONNX Runtime 1.31 rounds through float32
    (-56024047 comes back -56024048; the evaluator is exact), beside a Loop without a
    condition: a documented fault of the evaluator (it runs no iteration) that changes
    nothing here, as the body passes its value through."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            helper.make_node("Identity", ["v_in"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2]),
        ],
    )
    graph = helper.make_graph(
        [
            helper.make_node("Shrink", ["x"], ["y"], name="shrink0"),
            helper.make_node("Loop", ["m", "", "f"], ["lo"], body=body, name="loop0"),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.INT32, [1]),
            helper.make_tensor_value_info("f", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.INT32, [1]),
            helper.make_tensor_value_info("lo", TensorProto.FLOAT, [2]),
        ],
        [onnx.numpy_helper.from_array(np.array(1, np.int64), "m")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_a_documented_fault_elsewhere_in_the_model_does_not_excuse_a_mismatch() -> None:
    """The evaluator and ONNX Runtime disagree on the Shrink (found by a campaign with wide
    values; ORT is the one wrong here, which two backends cannot tell): a finding, filed,
    although the model's Loop carries a documented fault of the evaluator. A mismatch is
    judged by the node it was localized to."""
    model = _shrink_beside_a_loop()
    inputs = {"x": np.array([-56024047], np.int32), "f": np.array([1.5, -2.0], np.float32)}
    got = _blamed(["ort", REFERENCE], model, inputs, "ort")
    verdict, message, signature = got[REFERENCE]
    assert verdict == Verdict.MISMATCH and signature is not None, got
    assert "first diverging node: shrink0 (Shrink)" in message


def test_a_campaign_against_the_evaluator_counts_its_documented_faults_as_known(
    tmp_path,
) -> None:
    """As a user runs it: ONNX Runtime against the evaluator on LRN alone. Where N != C
    (LRN's documented fault) the evaluator's failures are counted as known and named in
    the summary, none is filed, and the exit code says nothing was found; the tests
    where the fault does not apply still compare."""
    out = tmp_path / "c"
    args = f"fuzz --backend ort --backend {REFERENCE} --ops LRN --tests 30 --seed 0 --probe off"
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", *args.split(), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    said = re.search(
        r"(\d+) failures of onnx-reference on its documented faults .*: LRN (\d+)", r.stdout
    )
    assert said and said[1] == said[2] and int(said[1]) >= 5, r.stdout[-3000:]
    assert not (out / "bugs").exists() or not any((out / "bugs").iterdir())
    with sqlite3.connect(out / "campaign.db") as db:
        ((ok,),) = db.execute(
            "SELECT COUNT(*) FROM results WHERE backend=? AND verdict='ok'", (REFERENCE,)
        )
    assert ok >= 1  # N == C draws: compared, and right


def test_the_reducer_refuses_a_candidate_on_a_documented_fault() -> None:
    """A reduction of an evaluator mismatch keeps no candidate where one of its documented
    faults applies: its signature ("values in LSTM output") would let a reduction slide
    from an undocumented fault to a documented one (an 800-test campaign reduced an LSTM
    with input_forget, then undocumented, to one with clip), filing what is known. LRN
    stands in for both: the same signature where N == C (right, so no failure) and where
    N < C (the documented fault)."""
    from onnxfuzz.reduce.reproduce import Reproducer, Target

    x = np.linspace(-2, 2, 30, dtype=np.float32).reshape(1, 5, 2, 3)
    target = Target(REFERENCE, "ort", signature=f"{REFERENCE}|mismatch|run|values in LRN output")
    with BackendPool(["ort", REFERENCE]) as pool:
        rep = Reproducer(pool, target)
        a = rep.assess(_lrn(1, 5), {"x": x})
        assert a.judgement.verdict == Verdict.KNOWN, a
        assert "documented fault" in a.judgement.message
        assert not rep(_lrn(1, 5), {"x": x})


def _resize_then_global_max_pool() -> onnx.ModelProto:
    """An antialiased Resize (whose values the evaluator computes a little apart from ONNX
    Runtime) feeding a rank-3 GlobalMaxPool, whose output the evaluator shapes [1, 1]
    (a documented fault: it reduces the last two axes whatever the rank)."""
    f16 = TensorProto.FLOAT16
    nodes = [
        helper.make_node(
            "Resize",
            ["x", "", "scales"],
            ["r"],
            name="resize0",
            antialias=1,
            coordinate_transformation_mode="pytorch_half_pixel",
            mode="linear",
        ),
        helper.make_node("GlobalMaxPool", ["r"], ["y"], name="globalmaxpool0"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", f16, [1, 3, 2])],
        [helper.make_tensor_value_info("y", f16, [1, 1, 1])],
        [onnx.numpy_helper.from_array(np.array([1, 0.5, 0.5], np.float32), "scales")],
        value_info=[helper.make_tensor_value_info("r", f16, [1, 1, 1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_a_shape_departure_is_localized_to_the_node_that_departs_from_its_declaration() -> None:
    """The output's shape departs from the declaration because of the GlobalMaxPool; the
    Resize before it differs in values only. Localized by values, the finding was "shape
    in Resize output" (filed: an 800-test campaign of ORT against the evaluator), blaming
    an op whose result has the declared shape, and escaping GlobalMaxPool's documented
    fault. Localized by the declared shapes, it names the GlobalMaxPool, and is known."""
    model = _resize_then_global_max_pool()
    x = np.array([[[-1.0, -1.0], [-1.0, -1.0], [1.0, 1.0]]], np.float16)
    with BackendPool(["ort", REFERENCE]) as pool:
        outcomes = pool.run_all(model.SerializeToString(), {"x": x})
        a = Judge("ort", OracleConfig(), pool).assess(model, {"x": x}, outcomes)[REFERENCE]
        got = blame(Judge("ort", OracleConfig(), pool), model, {"x": x}, outcomes)
    assert a.judgement.verdict == Verdict.MISMATCH and a.judgement.kind == "shape", a
    assert "first diverging node: globalmaxpool0 (GlobalMaxPool)" in a.judgement.message
    assert a.signature is not None and "GlobalMaxPool" in a.signature, a.signature
    assert got[REFERENCE].assessed.judgement.verdict == Verdict.KNOWN


def _roi_align(mode: str) -> onnx.ModelProto:
    node = helper.make_node(
        "RoiAlign", ["x", "rois", "idx"], ["y"], mode=mode, output_height=2, output_width=2,
        sampling_ratio=2,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4]),
            helper.make_tensor_value_info("rois", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.skipif(importlib.util.find_spec("tvm") is None, reason="needs apache-tvm")
def test_wrong_values_on_a_disputed_reading_are_known_not_filed() -> None:
    """RoiAlign mode='max' has two readings (onnx/onnx#4764): ONNX Runtime takes the max of
    weighted corner samples, TVM interpolates each sample point and takes the max. A
    campaign of ORT against TVM filed TVM's reading as a bug; it is counted as known now.
    mode='avg', where the two agree, is compared as before."""
    inputs = {
        "x": np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4),
        "rois": np.array([[0.3, 0.2, 2.9, 3.1]], np.float32),
        "idx": np.array([0], np.int64),
    }
    got = _blamed(["ort", "tvm"], _roi_align("max"), inputs, "ort")
    verdict, message, signature = got["tvm"]
    assert verdict == Verdict.KNOWN and signature is None, got
    assert message.startswith("semantics the ONNX spec leaves in dispute, RoiAlign: mode='max'")
    assert _blamed(["ort", "tvm"], _roi_align("avg"), inputs, "ort")["tvm"][0] == Verdict.OK


def test_the_summary_counts_the_disputed_readings_by_op(tmp_path) -> None:
    """The campaign summary names what it counted as known on disputed semantics, and says
    that a wrong value there is not told apart from the other reading."""
    from onnxfuzz.judge.attribution import DISPUTED_SEMANTICS
    from onnxfuzz.store.db import Result, Store
    from onnxfuzz.store.report import documented_fault_lines

    store = Store(tmp_path / "campaign.db")
    why = f"{DISPUTED_SEMANTICS}RoiAlign: mode='max' has two readings\nvalues"
    for i in range(3):
        store.record(i, i, ["RoiAlign"], 17, 0.1, 0.1, [Result("tvm", "known", detail=why)])
    lines = documented_fault_lines(store)
    assert len(lines) == 1 and lines[0].startswith("3 wrong values of tvm on ops whose ONNX"), lines
    assert "is not told apart" in lines[0] and lines[0].endswith("filed: RoiAlign 3"), lines
