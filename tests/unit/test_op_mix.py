"""``--op-mix`` (issue 24): ``chains`` (the default) draws ops uniformly and continues
elementwise ops, anchors and normalizations into the arithmetic/activation chains of real
layers; ``layers`` draws ops mostly by how often real models use them, the optimizers'
patterns among the blocks; ``uniform`` generates as before issue 24."""

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
    with pytest.raises(ConfigError, match=r"--op-mix: one of chains, uniform, layers, got 'real'"):
        Config(op_mix="real")


def test_record_keeps_uniform_records_as_they_were() -> None:
    assert Config().op_mix == "chains"
    assert "op_mix" not in Config(op_mix="uniform").to_record()
    # a record without op_mix (every record before issue 24) still means uniform
    assert Config.from_record({}).op_mix == "uniform"
    for mix in ("chains", "layers"):
        cfg = Config(op_mix=mix)
        assert cfg.to_record()["op_mix"] == mix
        assert Config.from_record(cfg.to_record()) == cfg


def test_cli_default_is_chains_and_uniform_records_stay_bare() -> None:
    from onnxfuzz.cli.options import generator_fields

    flags = {
        "nodes": (1, 10), "opset": None, "ops": None, "exclude_ops": None, "dtypes": None,
        "picking_rate": 0.97, "max_rank": 5, "max_dim": 8, "weights_as_inputs": False,
    }  # fmt: skip
    assert Config.from_record(generator_fields(**flags)).op_mix == "chains"
    uniform = generator_fields(**flags, op_mix="uniform")
    assert "op_mix" not in uniform
    assert Config.from_record(uniform).op_mix == "uniform"


@pytest.mark.parametrize("mix", ["layers", "chains"])
def test_mix_is_deterministic(mix: str) -> None:
    a, b = Generator(Config(op_mix=mix)), Generator(Config(op_mix=mix))
    for seed in range(20):
        assert (
            a.generate(seed).model.SerializeToString()
            == b.generate(seed).model.SerializeToString()
        )


def test_chains_differ_from_uniform_only_where_a_chain_can_start() -> None:
    # Neg and Relu start chains whose members (binary arithmetic) are not among the ops:
    # no chain, so no extra choice, so the uniform mix's bytes
    ops = frozenset({"Neg", "Relu", "Transpose"})
    chains, uniform = (Generator(Config(ops=ops, op_mix=m)) for m in ("chains", "uniform"))
    assert not chains._chains
    for seed in range(10):
        assert (
            chains.generate(seed).model.SerializeToString()
            == uniform.generate(seed).model.SerializeToString()
        )
    # with Add among them, an activation goes on into x * act(x) and a bias
    with_add = Generator(Config(ops=ops | {"Add"}, op_mix="chains", min_nodes=6, max_nodes=6))
    assert with_add._chains
    cases = [with_add.generate(seed) for seed in range(30)]
    assert any(
        "Relu" in c.ops and "Add" in c.ops and c.ops != uniform.generate(c.seed).ops
        for c in cases
    )


def test_a_chain_is_one_choice_that_shrinks_to_none() -> None:
    gen = Generator(Config(op_mix="chains", min_nodes=6, max_nodes=6))
    assert 0 in gen._chains  # the op every zero choice draws starts a chain
    zero = gen.generate(0, prefix=[], zero_tail=True)
    # every choice 0: the first op (index 0), no block, no chain
    assert zero.ops == Generator(Config(op_mix="uniform", min_nodes=6, max_nodes=6)).generate(
        0, prefix=[], zero_tail=True
    ).ops


def test_layers_and_chains_hold_more_elementwise_groups_than_uniform() -> None:
    shapes = _bench().elementwise_shapes
    counts = {}
    for mix in ("uniform", "layers", "chains"):
        gen = Generator(Config(op_mix=mix))
        counts[mix] = sum(shapes(gen.generate(1000 + i).model)[0] for i in range(200))
    assert counts["layers"] >= 2 * counts["uniform"] > 0, counts
    assert counts["chains"] >= 2 * counts["uniform"], counts


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
