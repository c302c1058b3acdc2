"""Precision at the diverging node: a lone float32 op off by 1e-3 relative is a bug, an op
off by three ulps is not (``onnxfuzz.judge.budget``).

The planted adapter (``adapters.py:Imprecise``) scales one op's output by 1 + rel inside
a model of five ops; the end-to-end tolerance (rtol 1e-2) lets both errors through, so
only the per-op budget at the first diverging node can tell them apart. The real ONNX
Runtime is the reference and runs under the adapter.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.cli.main import main
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.judge.budget import lone_op_error
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE, OracleConfig, Verdict, judge
from onnxfuzz.judge.signature import family, signature
from onnxfuzz.run.confirm import Confirmer, Reproducibility
from onnxfuzz.store.bundle import Finding

ADAPTERS = "tests/campaign/adapters.py"
OFF_1E3 = f"{ADAPTERS}:Imprecise:op=Exp,rel=1e-3"
OFF_3ULPS = f"{ADAPTERS}:Imprecise:op=Exp,rel={3 * 2.0**-23!r}"


def chain() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """x -> Mul 0.5 -> Exp -> Add 1 -> Sqrt -> Sub x: float32, every tensor declared."""
    n = 64
    nodes = [
        helper.make_node("Mul", ["x", "half"], ["m"], name="mul0"),
        helper.make_node("Exp", ["m"], ["e"], name="exp0"),
        helper.make_node("Add", ["e", "one"], ["a"], name="add0"),
        helper.make_node("Sqrt", ["a"], ["s"], name="sqrt0"),
        helper.make_node("Sub", ["s", "x"], ["y"], name="sub0"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        initializer=[
            numpy_helper.from_array(np.float32(0.5), "half"),
            numpy_helper.from_array(np.float32(1.0), "one"),
        ],
        value_info=[helper.make_tensor_value_info(t, TensorProto.FLOAT, [n]) for t in "meas"],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return model, {"x": np.linspace(-3.0, 3.0, n, dtype=np.float32)}


@pytest.fixture(scope="module")
def workers() -> Iterator[BackendPool]:
    with BackendPool(["ort", OFF_1E3, OFF_3ULPS]) as pool:
        yield pool


def _assess(pool: BackendPool, backend: str):
    model, inputs = chain()
    order = [o.name for o in model.graph.output]
    outcomes = pool.run_all(model.SerializeToString(), inputs, only=("ort", backend))
    raw = judge("ort", outcomes["ort"], backend, outcomes[backend], order, OracleConfig())
    got = Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)[backend]
    return raw, got


def test_a_lone_op_off_by_1e3_relative_is_a_precision_bug(workers) -> None:
    raw, got = _assess(workers, OFF_1E3)
    assert raw.verdict == Verdict.OK  # the end-to-end tolerance alone lets it through
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.kind == "precision", v.message
    assert v.output == "e"  # blamed on Exp, the op that is off, not on its consumers
    assert "Exp" in v.message and "math budget" in v.message
    assert got.signature == signature(OFF_1E3, v, "Exp")
    # one root cause: a precision finding is the family of its op's wrong values
    # (judge.signature.root_kind), so a flaky kernel on both sides of the tolerance is one bug
    assert family(got.signature).endswith("|mismatch|run|values")


def test_an_op_off_by_three_ulps_is_not_a_bug(workers) -> None:
    raw, got = _assess(workers, OFF_3ULPS)
    assert raw.verdict == Verdict.OK
    assert got.judgement.verdict == Verdict.OK, got.judgement.message
    assert got.signature is None
    # Judged at the node too (not only screened out by the model's outputs): within budget.
    model, inputs = chain()
    found = lone_op_error(
        model,
        inputs,
        "ort",
        OFF_3ULPS,
        lambda data: workers.run_all(data, inputs, only=("ort", OFF_3ULPS)),
        lambda data, feeds: workers.run_one("ort", data, feeds),
    )
    assert found is None


@pytest.mark.slow
def test_a_campaign_files_the_lone_op_reduced_with_a_repro_that_reproduces(tmp_path: Path) -> None:
    flags = ["--tests", "30", "--nodes", "2:5", "--ops", "Exp,Add,Mul,Neg,Abs"]
    flags += ["--dtypes", "float32", "--probe", "off"]
    quiet = tmp_path / "ulps"
    argv = ["fuzz", "--backend", "ort", "--backend"]
    assert main([*argv, OFF_3ULPS, "--out", str(quiet), *flags]) == 0
    out = tmp_path / "off"
    assert main([*argv, OFF_1E3, "--out", str(out), *flags]) == 1
    (bundle,) = (out / "bugs").iterdir()
    meta = json.loads((bundle / "meta.json").read_text())
    assert meta["reduced_ops"] == ["Exp"] and "precision in Exp output" in meta["signature"]
    copied = tmp_path / "copied"
    shutil.copytree(bundle / "reduced", copied)
    run = subprocess.run([sys.executable, "repro.py"], cwd=copied, capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout.startswith("REPRODUCES"), run.stdout + run.stderr


def cancellation() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """y = Exp(x) - e, with e = exp(x) as float32: the reference's y is a few ulps, an Exp
    off by 1e-3 relative makes it 1e-3 * exp(x), beyond the end-to-end tolerance."""
    n = 32
    nodes = [
        helper.make_node("Exp", ["x"], ["t"], name="exp0"),
        helper.make_node("Sub", ["t", "e"], ["y"], name="sub0"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, [n]) for k in "xe"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        value_info=[helper.make_tensor_value_info("t", TensorProto.FLOAT, [n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = np.linspace(0.0, 3.0, n, dtype=np.float32)
    return model, {"x": x, "e": np.exp(x)}


def _finding(pool: BackendPool, model: onnx.ModelProto, inputs: dict) -> Finding:
    """OFF_1E3's finding on ``model`` against ort, judged (its tolerance: the oracle's)."""
    outcomes = pool.run_all(model.SerializeToString(), inputs, only=("ort", OFF_1E3))
    got = Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)[OFF_1E3]
    assert got.signature is not None, got.judgement
    return Finding(
        signature=got.signature,
        bug_id="b",
        judgement=got.judgement,
        backend=OFF_1E3,
        reference="ort",
        seed=0,
        opset=21,
        ops=[n.op_type for n in model.graph.node],
        model=model,
        inputs=inputs,
        outcomes=outcomes,
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=60.0,
    )


def test_a_precision_bug_found_under_an_amplified_mismatch_is_confirmed(workers) -> None:
    """The end-to-end mismatch is amplified rounding (the reference fed the backend's Exp
    values computes its Sub alike: unstable), and Exp alone is off by 1e-3: a precision
    finding. Its fresh runs fail the same way (the same outputs), so confirmation files it;
    before, it asked them to be within the tolerance and called it not reproducible."""
    model, inputs = cancellation()
    finding = _finding(workers, model, inputs)
    got = finding.judgement
    assert (got.verdict, got.kind) == (Verdict.MISMATCH, "precision"), got
    assert "exp0 (Exp)" in got.message
    conf = Confirmer(workers, OracleConfig(), runs=2).confirm(finding)
    assert (conf.kind, conf.failed) == (Reproducibility.DETERMINISTIC, 2), conf


def test_the_repro_of_a_blamed_tensor_inside_the_model_compares_it_exposed(
    workers, tmp_path: Path
) -> None:
    """The model as generated holds the blamed Exp inside it: its repro.py exposes that
    tensor and compares it alone by Exp's budget. It compared the model's outputs by the
    budget, and said REPRODUCES of a fixed backend's rounding well inside the tolerance."""
    from onnxfuzz.run.campaign import _tolerance_of
    from onnxfuzz.store.bundle import write_bundle

    model, inputs = chain()
    finding = _finding(workers, model, inputs)
    v = finding.judgement
    assert (v.kind, v.output) == ("precision", "e"), v  # Exp's output, not the model's
    finding.tolerance = _tolerance_of(OracleConfig(), v, model)
    bundle = write_bundle(tmp_path / "c", finding)
    copied = tmp_path / "copied"
    shutil.copytree(bundle, copied)
    run = subprocess.run([sys.executable, "repro.py"], cwd=copied, capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout.startswith("REPRODUCES"), run.stdout + run.stderr
    assert "output e: " in run.stdout, run.stdout
    script = copied / "repro.py"
    script.write_text(script.read_text().replace("'rel': '1e-3'", "'rel': '1e-6'"))
    run = subprocess.run([sys.executable, "repro.py"], cwd=copied, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("FIXED"), run.stdout + run.stderr


def test_a_gross_error_that_later_ops_hide_is_a_wrong_value_not_precision() -> None:
    """An Exp off by 50 %, scaled down by 1e-4 after it: the outputs pass the tolerance,
    the lone-op check finds the Exp. It was filed as "precision" (an audit's Softmax off by
    0.25, 7x relative, likewise): beyond the campaign's tolerance alone too, it is a
    wrong value, and says so."""
    off = f"{ADAPTERS}:Imprecise:op=Exp,rel=0.5"
    n = 16
    nodes = [
        helper.make_node("Exp", ["x"], ["e"], name="exp0"),
        helper.make_node("Mul", ["e", "tiny"], ["y"], name="mul0"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
        initializer=[numpy_helper.from_array(np.float32(1e-4), "tiny")],
        value_info=[helper.make_tensor_value_info("e", TensorProto.FLOAT, [n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    inputs = {"x": np.linspace(-3.0, 2.0, n, dtype=np.float32)}
    with BackendPool(["ort", off]) as pool:
        outcomes = pool.run_all(model.SerializeToString(), inputs)
        raw = judge("ort", outcomes["ort"], off, outcomes[off], ["y"], OracleConfig())
        got = Judge("ort", OracleConfig(), pool).assess(model, inputs, outcomes)[off]
    assert raw.verdict == Verdict.OK  # hidden at the output
    v = got.judgement
    assert v.verdict == Verdict.MISMATCH and v.kind == "values" and v.output == "e", v.message
    assert "a wrong value that the model's later ops hid" in v.message
    assert got.signature == signature(off, v, "Exp")
