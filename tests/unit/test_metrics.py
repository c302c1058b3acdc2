"""Diversity metrics (onnxfuzz.generate.measure.metrics) on hand-built models with known answers,
their accumulator's merge and record, and ``onnxfuzz metrics`` on a generated corpus."""

from __future__ import annotations

import json
import random
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz.cli.main import main
from onnxfuzz.generate.measure.metrics import EXACT_CAP, Distinct, Diversity, features

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), typed=True, opsets=(("", 21),)):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(inits),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    if typed:  # as the generator writes them: every tensor in value_info
        model = onnx.shape_inference.infer_shapes(model)
    return model


def _chain() -> onnx.ModelProto:
    """x -> Relu -> Neg -> Add <- y: a chain of three and a graph input feeding its end."""
    return _model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Neg", ["r"], ["s"]),
            helper.make_node("Add", ["s", "y"], ["z"]),
        ],
        [("x", F, [2, 3]), ("y", F, [2, 3])],
        [("z", F, [2, 3])],
    )


def test_a_chain_with_a_graph_input_has_known_figures() -> None:
    f = features(_chain())
    assert f.ops == {"Relu", "Neg", "Add"}
    assert f.keys["edges"] == {"Relu>Neg", "Neg>Add"}
    assert f.keys["triples"] == {"Relu>Neg>Add"}
    assert f.keys["in_degree"] == {"Relu/1", "Neg/1", "Add/2"}
    assert f.keys["out_degree"] == {"Relu/1", "Neg/1", "Add/1"}
    assert len(f.keys["instances"]) == 3
    assert f.nodes == 3 and f.longest == 3
    assert f.connectivity == pytest.approx(2 / 4)  # r and s of x, r, s, y
    unordered = _chain()
    unordered.graph.node.reverse()  # invalid ONNX, but readable: the same figures
    g = features(unordered)
    assert (g.keys, g.longest, g.connectivity) == (f.keys, f.longest, f.connectivity)


def test_instances_degrees_and_domains() -> None:
    # Two Transposes alike and one with another perm; a Split whose second output nobody
    # reads; a Clip with an absent min; a custom-domain op on an initializer.
    w = helper.make_tensor("w", F, [3, 2], [0.0] * 6)
    model = _model(
        [
            helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 0]),
            helper.make_node("Transpose", ["x"], ["t2"], perm=[1, 0]),
            helper.make_node("Transpose", ["t1"], ["t3"], perm=[0, 1]),
            helper.make_node("Split", ["t2"], ["a", "b"], axis=0, num_outputs=2),
            helper.make_node("Clip", ["a", "", "m"], ["c"]),
            helper.make_node("Mine", ["w"], ["u"], domain="my.ops"),
        ],
        [("x", F, [2, 4]), ("m", F, [])],
        [("t3", F, [4, 2]), ("c", F, [2, 2]), ("u", F, [3, 2])],
        inits=[w],
        typed=False,  # inner tensors untyped: their shapes come from shape inference
        opsets=(("", 21), ("my.ops", 1)),
    )
    f = features(model)
    assert f.ops == {"Transpose", "Split", "Clip", "my.ops:Mine"}
    assert len([k for k in f.keys["instances"] if k.startswith("Transpose|")]) == 2
    assert "Split/1" in f.keys["out_degree"]  # b is neither read nor a graph output
    assert "Clip/2" in f.keys["in_degree"]  # the empty min is no input
    assert f.keys["edges"] == {"Transpose>Transpose", "Transpose>Split", "Split>Clip"}
    assert f.keys["triples"] == {"Transpose>Split>Clip"}
    assert f.longest == 3  # Transpose -> Split -> Clip
    # shapes come from shape inference where value_info lacks them: the same keys as in
    # the model with every tensor typed
    typed = onnx.shape_inference.infer_shapes(model)
    assert len(typed.graph.value_info) > len(model.graph.value_info)
    assert features(typed).keys["instances"] == f.keys["instances"]
    assert not any("|?" in k or ";?" in k for k in f.keys["instances"])


def test_instances_differ_by_shape_type_and_attribute_not_by_names() -> None:
    def one(shape, dtype=F, alpha=0.5, names=("x", "y")):
        return features(
            _model(
                [helper.make_node("LeakyRelu", [names[0]], [names[1]], alpha=alpha)],
                [(names[0], dtype, shape)],
                [(names[1], dtype, shape)],
            )
        ).keys["instances"]

    base = one([2, 3])
    assert one([2, 3], names=("p", "q")) == base
    assert one([3, 2]) != base
    assert one([2, 3], dtype=TensorProto.DOUBLE) != base
    assert one([2, 3], alpha=0.25) != base


def test_the_accumulator_unions_merges_and_round_trips() -> None:
    a, b = Diversity(), Diversity()
    a.add(_chain())
    a.add(_chain())  # the same model again adds no keys
    b.add(
        _model(
            [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Relu", ["r"], ["s"])],
            [("x", F, [2, 3])],
            [("s", F, [2, 3])],
        )
    )
    s = a.summary()
    assert (s["models"], s["ops"], s["edges"], s["triples"], s["instances"]) == (2, 3, 2, 1, 3)
    assert s["connectivity"] == pytest.approx(0.5) and s["longest"] == 3 and s["nodes"] == 3
    both = Diversity.from_record(json.loads(json.dumps(a.to_record())))
    assert both.summary() == a.summary()
    both.merge(b)
    m = both.summary()
    assert m["models"] == 3 and m["ops"] == 3
    assert m["edges"] == 3  # Relu>Neg, Neg>Add, Relu>Relu
    assert m["instances"] == 3  # Relu on 2x3 float is one instance in both
    assert m["longest"] == pytest.approx((3 + 3 + 2) / 3)
    assert m["connectivity"] == pytest.approx((0.5 + 0.5 + 0.5) / 3)
    # the record follows what was merged in (not the one it was read from)
    again = Diversity.from_record(json.loads(json.dumps(both.to_record())))
    assert again.summary() == m
    with pytest.raises(ValueError, match="version"):
        Diversity.from_record({**a.to_record(), "version": 99})


def test_a_large_set_becomes_a_sketch_that_estimates_and_merges() -> None:
    rng = random.Random(0)
    digests = [rng.getrandbits(64) for _ in range(3 * EXACT_CAP)]
    whole, half1, half2 = Distinct(), Distinct(), Distinct()
    whole.update(digests)
    half1.update(digests[: EXACT_CAP // 2])  # stays exact
    half2.update(digests[EXACT_CAP // 2 :])
    assert whole.estimated and not half1.estimated and half2.estimated
    assert abs(len(whole) - len(digests)) < 0.03 * len(digests)
    half1.merge(half2)
    assert half1.registers == whole.registers  # a function of the set alone
    back = Distinct.from_record(json.loads(json.dumps(whole.to_record())))
    assert back.registers == whole.registers and len(back) == len(whole)
    small = Distinct()
    small.update(digests[:10])
    assert len(Distinct.from_record(small.to_record())) == 10


def test_generated_models_need_no_shape_inference() -> None:
    # The campaign's per-test cost depends on it: every node input is typed already.
    from onnxfuzz.generate.build.generator import Generator
    from onnxfuzz.generate.lang.config import Config
    from onnxfuzz.generate.measure.metrics import _Types

    gen = Generator(Config(min_nodes=10, max_nodes=10))
    for seed in range(5):
        model = gen.generate(seed).model
        types = _Types(model)
        for node in model.graph.node:
            for name in node.input:
                if name:
                    assert types.key(name) != "?"
        assert not types.inferred, seed


# --- the command ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus")
    argv = ["generate", "--count", "6", "--seed", "3", "--nodes", "2:6", "--no-reference"]
    assert main([*argv, "--out", str(out)]) == 0
    return out


def test_metrics_of_a_corpus_as_table_and_json(corpus: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["metrics", str(corpus)]) == 0
    assert "instances" in capsys.readouterr().out
    # a hidden folder (a case being written) is not part of the corpus
    hidden = corpus / ".tmp_test_000099"
    hidden.mkdir(exist_ok=True)
    (hidden / "model.onnx").write_bytes(b"partial")
    assert main(["metrics", str(corpus), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    want = Diversity()
    for f in sorted(corpus.glob("test_*/model.onnx")):
        want.add(onnx.load(f))
    assert want.models == 6
    assert got["paths"][str(corpus)] == {**want.summary(), "estimated": []}
    assert got["total"]["models"] == 6 and got["skipped"] == []


def test_a_missing_path_or_a_corrupt_file_is_one_line_exit_2(
    corpus: Path, tmp_path: Path, capsys
) -> None:
    capsys.readouterr()
    missing = tmp_path / "nope"
    assert main(["metrics", str(corpus), str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and err.count("\n") == 1 and "Traceback" not in err

    bad = tmp_path / "bad" / "case_0" / "model.onnx"
    bad.parent.mkdir(parents=True)
    data = (corpus / "test_000000" / "model.onnx").read_bytes()
    bad.write_bytes(data[: len(data) // 2])  # cut mid-graph
    for target in (bad, bad.parent.parent):
        assert main(["metrics", str(corpus), str(target)]) == 2
        err = capsys.readouterr().err
        assert str(bad) in err and err.count("\n") == 1 and "Traceback" not in err

    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")  # parses as an empty message: still not a model
    assert main(["metrics", str(empty)]) == 2
    assert str(empty) in capsys.readouterr().err

    assert main(["metrics", "--skip-bad", "--json", str(corpus), str(bad)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["skipped"] == [str(bad)] and str(bad) in out.err
    assert main(["metrics", "--skip-bad", str(bad)]) == 2  # nothing readable left
    assert "no readable ONNX model" in capsys.readouterr().err
