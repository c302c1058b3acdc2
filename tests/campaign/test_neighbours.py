"""Passing neighbours (``onnxfuzz.reduce.neighbours``): a bundle's issue.md says what its
failure depends on, from one-change variants of the reduced model run on the same two
backends. The planted bugs are audit13's: a Conv wrong only with group > 1, a ReduceSum
wrong only past 64 elements; real ONNX Runtime underneath, reached the way a user does
(`onnxfuzz reduce`, a campaign)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from runs import finished

from onnxfuzz.cli.main import main
from onnxfuzz.run.campaign import CampaignOptions

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"


def _conv(path: Path) -> Path:
    """A one-node float32 Conv with group=2: X [1, 2, 3], W [2, 1, 1]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3])
    w = numpy_helper.from_array(np.array([[[0.5]], [[-1.0]]], np.float32), "w")
    conv = helper.make_node("Conv", ["x", "w"], ["y"], group=2, name="conv0")
    graph = helper.make_graph([conv], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


def _reduce(tmp: Path, model: Path, backend: str) -> tuple[str, dict]:
    out = tmp / "out"
    argv = ["reduce", str(model), "--backend", "ort", "--backend", backend, "--out", str(out)]
    assert main(argv) == 0
    return (out / "issue.md").read_text(), json.loads((out / "meta.json").read_text())


def test_reduce_names_the_attribute_that_triggers_and_keeps_a_passing_neighbour(tmp_path) -> None:
    """A Conv wrong only with group > 1: issue.md says group=2 fails and group=1 passes
    (W resized to fit), and passing/ holds that variant, which runs clean on both. Before,
    nothing said that group mattered (audit13 D8)."""
    issue, meta = _reduce(tmp_path, _conv(tmp_path / "conv.onnx"), f"{ADAPTERS}:GroupConv")
    assert "Trigger, `group`: fails with group=2 (this model); passes with group=1" in issue, issue
    # the other changes tried keep the failure: no trigger is claimed for them
    assert issue.count("Trigger") == 1, issue
    assert "still fails with" in issue
    passing = onnx.load(tmp_path / "out" / "passing" / "model.onnx")
    assert [a.name for a in passing.graph.node[0].attribute] == []  # group=1 is the default
    assert list(passing.graph.initializer[0].dims) == [2, 2, 1]
    assert (tmp_path / "out" / "passing" / "test_data_set_0" / "input_0.pb").exists()
    tried = meta["neighbours"]["tried"]
    assert len(tried) <= 12 and {t["result"] for t in tried} <= {"fails", "passes", "other"}


def test_a_bug_that_no_change_avoids_claims_no_trigger(tmp_path) -> None:
    """Every float Conv wrong, whatever its group: group=1 still fails, and issue.md names
    no trigger, nor keeps a passing variant."""
    wrong = f"{ADAPTERS}:WrongOp:op=Conv:dtype=float"
    issue, meta = _reduce(tmp_path, _conv(tmp_path / "conv.onnx"), wrong)
    assert "`group`: group=2 here; still fails with group=1" in issue, issue
    assert "Trigger" not in issue
    assert "No variant tried passes" in issue
    assert "passing" not in meta["neighbours"] and not (tmp_path / "out" / "passing").exists()


def test_a_campaign_bundle_says_which_input_size_passes(tmp_path) -> None:
    """A ReduceSum wrong past 64 reduced elements, found by a campaign: its bundle's
    issue.md names the input size as a trigger, with a smaller input that passes."""
    opts = CampaignOptions(
        backends=["ort", f"{ADAPTERS}:BigReduce"],
        tests=6,
        timeout=10.0,
        probe="off",
        generator={
            "min_nodes": 1,
            "max_nodes": 1,
            "ops": ["ReduceSum"],
            "dtypes": ["float32"],
            "max_dim": 6,
            "max_rank": 4,
        },
    )
    c = finished(tmp_path / "camp", opts)
    bundles = sorted((c.out / "bugs").glob("*/reduced/model.onnx"))
    assert bundles, list((c.out / "bugs").glob("*"))
    issue = (bundles[0].parents[1] / "issue.md").read_text()
    meta = json.loads((bundles[0].parents[1] / "meta.json").read_text())
    passed = [t for t in meta["neighbours"]["tried"] if t["result"] == "passes"]
    assert any(t["kind"] == "shape" for t in passed), meta["neighbours"]
    assert "Trigger, input `" in issue, issue
    assert (bundles[0].parent / "passing" / "model.onnx").exists()


def _leaky(path: Path) -> Path:
    """A one-node LeakyRelu on x [1, 3, 2] whose one value below -4 is its last."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 2])
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.1, name="leaky0")
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 21)]
    )
    model.ir_version = 10
    onnx.save(model, path / "leaky.onnx")
    values = np.array([0.548, 1.644, -0.921, -2.762, -1.836, -5.508], np.float32)
    (path / "in").mkdir()
    t = numpy_helper.from_array(values.reshape(1, 3, 2), "x")
    (path / "in" / "input_0.pb").write_bytes(t.SerializeToString())
    return path / "leaky.onnx"


def test_a_cut_that_drops_the_failing_values_is_no_size_trigger(tmp_path) -> None:
    """A LeakyRelu wrong below -4 only: every smaller x drops -5.5, its one value there,
    and passes. issue.md called the input's size the trigger ("passes with [1, 2, 2]"),
    sending the engineer after a size bug (audit 16). The same cuts keeping the last
    entries fail: it says the values cut away, not the size, made it pass."""
    model = _leaky(tmp_path)
    out = tmp_path / "out"
    argv = ["reduce", str(model), "--backend", "ort", "--backend", f"{ADAPTERS}:LeakyBelow"]
    assert main([*argv, "--inputs", str(tmp_path / "in"), "--out", str(out)]) == 0
    issue = (out / "issue.md").read_text()
    assert "Trigger" not in issue and "alpha=0.1 here" in issue, issue
    assert "the values cut away made it pass, not the size" in issue, issue
    assert "cut to [1, 2, 2] (axis 1: 2; 4 elements), [1, 3, 1] (axis 2: 1;" in issue, issue
    assert "the failure depends on values of the input" in issue
    tried = json.loads((out / "meta.json").read_text())["neighbours"]["tried"]
    results = {t["result"] for t in tried}
    assert "values cut" in results and "passes" not in results, results
