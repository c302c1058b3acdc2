"""The optimizers' patterns as blocks (blocks.OPTIMIZER_BLOCKS) make ONNX Runtime's named
transformer fire, as ORT's own session log says (the ``ort`` adapter's feedback); the same
block without its constants and fixed variables does not, so the pattern, not chance,
is what fires it."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import onnx
import pytest

from onnxfuzz.backends.ort import OrtBackend
from onnxfuzz.errors import SpecError
from onnxfuzz.generate.build.blocks import INT8, OPTIMIZER_BLOCKS, Const, Ref, Step
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config

DRAWS = 30
NODES = 12

# block -> (the transformer it targets, the fewest of DRAWS forced draws it fires in; measured
# 2026-11-25 on ORT 1.31.1: gelu 18, layernorm 7, fast-gelu 7, matmul-scale 24, split 10)
TARGETS = {
    "ort-gelu-erf": ("GeluFusionL1", 6),
    "ort-layernorm": ("LayerNormFusionL1", 3),
    "ort-fast-gelu": ("FastGeluFusion", 3),
    "ort-matmul-scale": ("MatMulScaleFusion", 8),
    "ort-gather-slice-split": ("GatherSliceToSplitFusion", 4),
    # re-quantization blocks (a QuantizeLinear of a DequantizeLinear's output; measured
    # 2026-11-25 on ORT 1.31.1: double-qdq 9, dq-q 12, where-dq 5, relu-q 6)
    "ort-double-qdq": ("DoubleQDQPairsRemover", 3),
    "ort-dq-q": ("QDQFinalCleanupTransformer", 4),
    "ort-where-dq": ("WhereDummyDq", 2),
    "ort-relu-q": ("Level2_RuleBasedTransformer", 2),
    # measured 10 of 30 (MatMulIntegerToFloatFusion fires in the same 10)
    "ort-dynamic-quantize-matmul": ("DynamicQuantizeMatMulFusion", 3),
    "ort-bias-skip-layernorm": ("BiasSkipLayerNormFusion", 2),  # measured 6 of 30
    "ort-weight-bias-quantization": ("WeightBiasQuantization", 6),  # measured 17 of 30
    "ort-conv-add-act": ("ConvAddActivationFusion", 4),  # computed weights: measured 12
}
REQUANTIZING = (
    "ort-double-qdq",
    "ort-dq-q",
    "ort-where-dq",
    "ort-relu-q",
    "ort-weight-bias-quantization",
)


def _bare(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The block without its constants and fixed variables (its Ref links kept)."""
    return tuple(
        dataclasses.replace(
            s, links={p: r for p, r in s.links.items() if not isinstance(r, Const)}, fixed={}
        )
        for s in steps
    )


# Below opset 20 / 17 ONNX has no Gelu / LayerNormalization op: the level-1 fusions, which
# make those, leave the pattern to their level-2 twins, which make contrib ops (the reason
# for `--opset 16,21`). (block, opset) -> (transformer, fewest of DRAWS; measured
# 2026-11-26 on ORT 1.31.1: gelu 24, layernorm 9; none at opset 21 or without constants)
OPSET_TARGETS = {
    ("ort-gelu-erf", 16): ("GeluFusionL2", 8),
    ("ort-layernorm", 16): ("LayerNormFusionL2", 3),
}


def _fired(name: str, steps: tuple[Step, ...], transformer: str, opset: int = 21) -> int:
    gen = Generator(
        Config(op_mix="layers", block_rate=1.0, min_nodes=1, max_nodes=NODES, opset=opset)
    )
    index = gen.block_names.index(name)
    gen.blocks[index] = steps
    ort = OrtBackend()
    fired = 0
    np.seterr(all="ignore")
    for seed in range(DRAWS):
        case = gen.generate(seed, prefix=[NODES - 1, 1, index])
        try:
            session = ort.compile(case.model)
        except Exception:  # noqa: BLE001 - an optimizer bug: nothing fired that we can read
            continue
        fired += transformer in (ort.optimizations(session) or {}).get("transformer", ())
    return fired


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_block_makes_its_transformer_fire_and_its_constants_are_why(name: str) -> None:
    transformer, fewest = TARGETS[name]
    steps = OPTIMIZER_BLOCKS[name]
    with_pattern = _fired(name, steps, transformer)
    bare = _fired(name, _bare(steps), transformer)
    assert with_pattern >= fewest, f"{name}: {transformer} fired in {with_pattern}/{DRAWS}"
    assert bare < with_pattern / 3, f"{name} without constants: {bare} vs {with_pattern}"


@pytest.mark.parametrize(("name", "opset"), sorted(OPSET_TARGETS))
def test_below_the_onnx_op_the_level_2_twin_fires(name: str, opset: int) -> None:
    transformer, fewest = OPSET_TARGETS[name, opset]
    fired = _fired(name, OPTIMIZER_BLOCKS[name], transformer, opset)
    assert fired >= fewest, f"{name} at opset {opset}: {transformer} fired in {fired}/{DRAWS}"
    bare = _fired(name, _bare(OPTIMIZER_BLOCKS[name]), transformer, opset)
    assert bare < fired / 3, f"{name} without constants: {bare} vs {fired}"
    # and at opset 21 the level-1 fusion takes the pattern first
    assert _fired(name, OPTIMIZER_BLOCKS[name], transformer) == 0


def _requantized_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with the input of every QuantizeLinear that takes a computed tensor made a
    graph output too (so a run shows the values it quantizes)."""
    model = copy.deepcopy(model)
    typed = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    have = {o.name for o in model.graph.output}
    for n in model.graph.node:
        if n.op_type == "QuantizeLinear" and n.input[0] in typed and n.input[0] not in have:
            model.graph.output.append(typed[n.input[0]])
            have.add(n.input[0])
    return model


@pytest.mark.parametrize("name", REQUANTIZING)
def test_a_requantizing_block_quantizes_exact_multiples_of_its_scale(name: str) -> None:
    """What makes a QuantizeLinear of a computed tensor safe: every value it quantizes is
    an exact multiple of its scale (0.25), so no backend can round it differently."""
    gen = Generator(Config(op_mix="layers", block_rate=1.0, min_nodes=1, max_nodes=NODES))
    index = gen.block_names.index(name)
    ort = OrtBackend(opt="none")
    checked = 0
    np.seterr(all="ignore")
    for seed in range(DRAWS // 3):
        case = gen.generate(seed, prefix=[NODES - 1, 1, index])
        model = _requantized_inputs(case.model)
        computed = [o.name for o in model.graph.output][len(case.model.graph.output) :]
        assert computed, f"{name} seed {seed}: no QuantizeLinear of a computed tensor"
        out = ort.run(ort.compile(model), case.make_inputs(seed))
        for k in computed:
            q = out[k].astype(np.float64) / 0.25
            assert np.array_equal(q, np.round(q)), (name, seed, k)
            checked += 1
    assert checked >= DRAWS // 3


def test_a_requantizing_quantizelinear_refuses_any_other_source() -> None:
    """The false direction: a block that pins a QuantizeLinear's y_scale but links x to a
    Sigmoid (values anywhere, ties possible) is refused with the fix named."""
    wrong = (
        Step("Sigmoid"),
        dataclasses.replace(
            OPTIMIZER_BLOCKS["ort-dq-q"][1],
            links={0: Ref(0), 1: Const(0.25), 2: Const(0, dtype=INT8)},
        ),
    )
    gen = Generator(Config(op_mix="layers", block_rate=1.0, min_nodes=1, max_nodes=NODES))
    gen.blocks[gen.block_names.index("ort-dq-q")] = wrong
    index = gen.block_names.index("ort-dq-q")
    with pytest.raises(SpecError, match="link x to the output of one of DequantizeLinear"):
        for seed in range(5):
            gen.generate(seed, prefix=[NODES - 1, 1, index])
