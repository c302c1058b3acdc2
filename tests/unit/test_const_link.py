"""A block's constant inputs and fixed variables (blocks.Const, Step.fixed): valid by
construction, the value exact in the model, gone when the block's choice shrinks."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxfuzz.generate.build.blocks import OPTIMIZER_BLOCKS, Const, Step
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.config import Config

DRAWS = 25
NODES = 12  # the first choice: node count - 1 (min_nodes 1), room for the longest block
WITH_CONSTS = sorted(
    name
    for name, steps in OPTIMIZER_BLOCKS.items()
    if any(isinstance(link, Const) for s in steps for link in s.links.values())
)


def _gen() -> Generator:
    return Generator(Config(op_mix="layers", block_rate=1.0, min_nodes=1, max_nodes=NODES))


def _case(gen: Generator, name: str, seed: int, zero_tail: bool = False) -> Case:
    """The case of ``seed`` whose first op starts block ``name`` (choices: node count,
    start a block, which: the layers table begins with each block's index once)."""
    prefix = [NODES - 1, 1, gen.block_names.index(name)]
    return gen.generate(seed, prefix=prefix, zero_tail=zero_tail)


def _forced(gen: Generator, name: str, seed: int, zero_tail: bool = False) -> onnx.ModelProto:
    return _case(gen, name, seed, zero_tail).model


def _made(model: onnx.ModelProto, steps: tuple[Step, ...]) -> list[onnx.NodeProto]:
    """The block's nodes: the first non-glue nodes, one per step."""
    return [n for n in model.graph.node if not n.name.startswith("glue_")][: len(steps)]


def _consts(model: onnx.ModelProto, steps: tuple[Step, ...]) -> tuple[int, int]:
    """(Const links requested, honoured with the exact value, shape and a type of the op's
    other inputs) in the block's nodes."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    types = {t.name: t.data_type for t in model.graph.initializer}
    types.update({v.name: v.type.tensor_type.elem_type for v in model.graph.input})
    requested = honoured = 0
    for node, step in zip(_made(model, steps), steps, strict=True):
        for pos, link in step.links.items():
            if not isinstance(link, Const) or node.op_type != step.op:
                continue
            requested += 1
            got = inits.get(node.input[pos]) if pos < len(node.input) else None
            if got is None or got.shape != link.shape:
                continue
            want = np.full(link.shape, link.value, dtype=got.dtype)
            same_type = link.dtype is None or types[node.input[pos]] == link.dtype
            honoured += bool(np.array_equal(got, want) and same_type)
    return requested, honoured


@pytest.mark.parametrize("name", WITH_CONSTS)
def test_constant_links_are_valid_and_exact(name: str) -> None:
    steps = OPTIMIZER_BLOCKS[name]
    gen = _gen()
    requested = honoured = 0
    for seed in range(DRAWS):
        case = _case(gen, name, seed)
        model = case.model
        v = validate(model, case.make_inputs(seed))
        assert v.ok and v.finite, (name, seed, v.problems[:1])
        r, h = _consts(model, steps)
        requested += r
        honoured += h
    # A constant is left out where the input cannot take it (an integer-typed op whose
    # inputs came linked, a divisor domain): most are honoured.
    assert requested >= DRAWS and honoured >= 0.5 * requested, (name, honoured, requested)


def test_a_float_constant_follows_the_type_of_the_ops_other_input() -> None:
    gen = _gen()
    seen = set()
    for seed in range(DRAWS):
        model = _forced(gen, "ort-gelu-erf", seed)
        div = _made(model, OPTIMIZER_BLOCKS["ort-gelu-erf"])[0]
        inits = {t.name: t for t in model.graph.initializer}
        if div.input[1] in inits:
            x_type = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}.get(
                div.input[0]
            )
            assert x_type in (None, inits[div.input[1]].data_type)
            seen.add(inits[div.input[1]].data_type)
            value = float(numpy_helper.to_array(inits[div.input[1]]))
            assert abs(value - 2**0.5) < 2e-3  # sqrt(2), within float16's rounding
    assert seen == {onnx.TensorProto.FLOAT}  # the block pins A.dtype float32


def test_fixed_variables_are_written_where_the_domain_holds_them() -> None:
    """ort-layernorm's ReduceMeans take axes [-1] (keepdims left at its default 1), and
    Pow's exponent 2 lets its base be the Sub's output as it is (no glue)."""
    # (small values: a wide x, up to 1e4, gives a Sub output whose square Pow must not
    # take as it is, and glue then clips it, rightly)
    gen = Generator(
        Config(op_mix="layers", block_rate=1.0, min_nodes=1, max_nodes=NODES, wide_values=0.0)
    )
    steps = OPTIMIZER_BLOCKS["ort-layernorm"]
    direct = last_axis = 0
    for seed in range(DRAWS):
        model = _forced(gen, "ort-layernorm", seed)
        made = _made(model, steps)
        inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        for node in (made[0], made[3]):
            assert node.op_type == "ReduceMean"
            assert all(a.name != "keepdims" or a.i == 1 for a in node.attribute)
            # (a rank-0 input has no axis -1: its axes are drawn as ever)
            last_axis += len(node.input) > 1 and inits[node.input[1]].tolist() == [-1]
        direct += made[2].input[0] == made[1].output[0]
    assert last_axis >= 0.8 * 2 * DRAWS and direct >= 0.8 * DRAWS, (last_axis, direct)


def test_a_block_constant_goes_when_the_blocks_choice_shrinks() -> None:
    """The constant draws no choice of its own: zeroing the block's choice (as the
    shrinker does) leaves no block and no constant; every later choice at its simplest
    keeps the block and its constants."""
    gen = _gen()
    steps = OPTIMIZER_BLOCKS["ort-gelu-erf"]
    for seed in range(5):
        shrunk = gen.generate(seed, prefix=[NODES - 1, 0], zero_tail=True).model
        r, h = _consts(shrunk, steps)
        assert h == 0
        simplest = _forced(gen, "ort-gelu-erf", seed, zero_tail=True)
        assert _consts(simplest, steps) == (3, 3)


def test_default_generation_draws_no_optimizer_block() -> None:
    """Uniform and chains mixes never use OPTIMIZER_BLOCKS (their bytes stay as recorded:
    tools/golden_corpus.py)."""
    gen = Generator(Config(block_rate=1.0))
    assert not set(gen.block_names) & set(OPTIMIZER_BLOCKS)
