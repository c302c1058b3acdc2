"""A float32 corpus case whose output cancels to about zero gets a data.json tolerance
measured from the case (``corpus.tolerance``): the exact answer and another right float32
implementation pass it, a wrong value still fails. At the runner's default atol 1e-7 the
exact answer failed (an audit: stored -1.0e-7, exact -1.8e-16, TVM 0.0, a false alarm)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxfuzz.generate.build.generator import Case
from onnxfuzz.generate.corpus.readme import corpus_readme
from onnxfuzz.generate.corpus.tolerance import cancellation_tolerance
from onnxfuzz.generate.corpus.validate import run_reference
from onnxfuzz.generate.corpus.write import TOLERANCE_FILE, write_case

DEFAULT = {"rtol": 1e-3, "atol": 1e-7}  # onnx.backend.test.loader's


def _passes(got: np.ndarray, want: np.ndarray, tol: dict[str, float]) -> bool:
    """ONNX's runner's comparison (np.testing.assert_allclose(actual, desired, ...))."""
    try:
        np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=tol["atol"])
    except AssertionError:
        return False
    return True


def _deviations_and_their_sum(n: int) -> onnx.ModelProto:
    """d = x - mean(x) and s = sum(d): s is 0 exactly, a float32 run leaves rounding."""
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["d"]),
        helper.make_node("ReduceSum", ["d"], ["s"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", f, [n])],
        [helper.make_tensor_value_info("d", f, [n]), helper.make_tensor_value_info("s", f, [])],
        value_info=[helper.make_tensor_value_info("m", f, [1])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


class _Given(Case):
    """A case whose inputs are given, not drawn."""

    feeds: dict[str, np.ndarray] = {}

    def make_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        return self.feeds


def _case(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> Case:
    case = _Given(model, 0, [n.op_type for n in model.graph.node], [], [], {})
    case.feeds = feeds
    case.inputs = [(name, 0, ()) for name in feeds]
    return case


def test_a_cancelling_output_gets_a_measured_tolerance_the_exact_answer_passes(
    tmp_path: Path,
) -> None:
    model = _deviations_and_their_sum(16)
    x = np.random.default_rng(0).uniform(0, 10, 16).astype(np.float32)
    entry = write_case(tmp_path / "c", _case(model, {"x": x}), reference=True)
    stored = run_reference(model, {"x": x})  # what the case stores (ONNX Runtime)
    x64 = x.astype(np.float64)
    exact_d = (x64 - x64.mean()).astype(np.float32)
    exact_s = np.float32(0.0)  # the deviations from the mean sum to 0
    # the false alarm this fixes: at the defaults the exact answer fails the stored one
    assert not _passes(exact_s, stored["s"], DEFAULT), stored["s"]
    tol = json.loads((tmp_path / "c" / TOLERANCE_FILE).read_text())
    assert entry["cancellation_atol"] == tol["atol"] and tol["rtol"] == DEFAULT["rtol"]
    # (a) the exact answer passes, and so does another right float32 implementation
    # (numpy's pairwise sum of its own float32 deviations)
    assert _passes(exact_s, stored["s"], tol) and _passes(exact_d, stored["d"], tol)
    theirs = x - np.mean(x, dtype=np.float32)
    assert _passes(np.sum(theirs, dtype=np.float32), stored["s"], tol)
    assert _passes(theirs, stored["d"], tol)
    # (b) wrong values still fail: +1, a wrong sign, a dropped term, 1 % off
    k = int(np.argmax(np.abs(stored["d"])))
    assert not _passes(stored["s"] + 1, stored["s"], tol)
    wrong_sign, dropped, off = stored["d"].copy(), stored["d"].copy(), stored["d"].copy()
    wrong_sign[k] = -wrong_sign[k]
    dropped[k] = x[k]  # the mean not subtracted
    off[k] *= 1.01
    for wrong in (wrong_sign, dropped, off):
        assert not _passes(wrong, stored["d"], tol)
    assert not _passes(np.sum(dropped), stored["s"], tol)
    # the corpus README names the case and states the rule
    text = corpus_readme({"seed": 0}, {"test_000000": entry}, 0)
    said = next(p for p in text.split("\n\n") if "cancels" in p)
    assert "1 case (test_000000)" in said and "4 times the largest difference" in said


def test_no_cancellation_keeps_the_defaults(tmp_path: Path) -> None:
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", f, [8])],
        [helper.make_tensor_value_info("y", f, [8])],
        value_info=[helper.make_tensor_value_info("r", f, [8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = np.random.default_rng(1).standard_normal(8).astype(np.float32)
    entry = write_case(tmp_path / "c", _case(model, {"x": x}), reference=True)
    assert not (tmp_path / "c" / TOLERANCE_FILE).exists() and "cancellation_atol" not in entry


def test_a_difference_beyond_rounding_widens_nothing() -> None:
    """Expected outputs off by more than float32 rounding of the magnitudes involved (a
    wrong reference, not cancellation) get no tolerance: nothing would hide the error."""
    model = _deviations_and_their_sum(16)
    x = np.random.default_rng(0).uniform(0, 10, 16).astype(np.float32)
    outs = run_reference(model, {"x": x})
    assert cancellation_tolerance(model, {"x": x}, outs) is not None
    wrong = {"d": outs["d"], "s": outs["s"] + np.float32(0.5)}
    assert cancellation_tolerance(model, {"x": x}, wrong) is None
