"""``--op-mix layers`` (issue 24): ops drawn mostly by how often real models use them, the
optimizers' patterns among the blocks; ``uniform`` (the default) generates as before."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.build import blocks
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_optcov", TOOLS / "bench_optcov.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bad_mix_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"--op-mix: one of uniform, layers, got 'real'"):
        Config(op_mix="real")


def test_record_keeps_uniform_records_as_they_were() -> None:
    assert "op_mix" not in Config().to_record()
    layers = Config(op_mix="layers")
    assert layers.to_record()["op_mix"] == "layers"
    assert Config.from_record(layers.to_record()) == layers


def test_layers_is_deterministic() -> None:
    a, b = Generator(Config(op_mix="layers")), Generator(Config(op_mix="layers"))
    for seed in range(20):
        assert (
            a.generate(seed).model.SerializeToString()
            == b.generate(seed).model.SerializeToString()
        )


def test_layers_mix_holds_more_elementwise_groups_than_uniform() -> None:
    shapes = _bench().elementwise_shapes
    counts = {}
    for mix in ("uniform", "layers"):
        gen = Generator(Config(op_mix=mix))
        counts[mix] = sum(shapes(gen.generate(1000 + i).model)[0] for i in range(200))
    assert counts["layers"] >= 2 * counts["uniform"] > 0, counts


def test_layers_mix_weights_follow_the_recorded_frequencies() -> None:
    ops = ["Conv", "Relu", "Pad", "Celu"]  # Conv is the commonest op, Celu in no model
    table = blocks.layer_mix(ops)
    share = {op: table.count(k) / len(table) for k, op in enumerate(ops)}
    assert share["Conv"] > share["Relu"] > share["Pad"] > share["Celu"] == 0.0
    # every op stays reachable: the rest of the draws are uniform
    assert 0 < blocks.LAYER_MIX_SHARE < 1


def test_block_table_favours_the_elementwise_groups_of_real_layers() -> None:
    names = ["conv-bn-relu", "swish", "layer-bias-act-scale", "gelu-erf"]
    table = blocks.layer_block_table(names)
    groups = sum(names[k] in blocks.LAYER_GROUPS for k in table)
    assert groups / len(table) >= 0.5
    assert set(table) == set(range(len(names)))  # every block stays drawable


def test_elementwise_shapes_reads_groups_and_chains() -> None:
    import onnx
    from onnx import TensorProto, helper

    def model(ops: list[str]) -> onnx.ModelProto:
        nodes = [
            helper.make_node(op, ["x" if k == 0 else f"t{k - 1}"], [f"t{k}"])
            for k, op in enumerate(ops)
        ]
        graph = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info(f"t{len(ops) - 1}", TensorProto.FLOAT, [2])],
        )
        return helper.make_model(graph)

    shapes = _bench().elementwise_shapes
    assert shapes(model(["Neg", "Sigmoid", "Abs"])) == (True, True)
    assert shapes(model(["Relu", "Sigmoid", "Tanh"])) == (False, False)  # no arithmetic
    assert shapes(model(["Neg", "Relu"])) == (False, False)  # two ops
    assert shapes(model(["Neg", "Transpose", "Relu", "Abs"])) == (False, False)  # broken
