"""Blocks: the op patterns real models are made of, for the passes that match them.

Compilers break in the passes that match chains (fusion, layout propagation, constant
folding, quantization): Conv-BatchNormalization-Relu, MatMul-Add-Gelu, the attention core,
QDQ pairs. Random op sequences rarely spell them. A block is such a pattern written as the
op types it chains and which tensor each op takes (a ``Ref``: an earlier step's output, or
an input an earlier step took), nothing else: each step is an ordinary op of the generator,
drawn by its own spec at random shapes, types and attributes, its linked inputs fitted by
the same solver (reused as they are, or adapted by glue ops when they do not fit). So a
block instantiates validly exactly as often as single ops do, and shrinks like them.

A block is used only when all its ops are among the run's (``--ops``, ``--exclude-ops``,
the probe's steering); a link the solver cannot honour (no fit, no glue budget left) falls
back to the ordinary choice for that input.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Ref:
    """An earlier step's tensor: its output ``output`` (``input`` None), or the tensor it
    took at input position ``input``."""

    step: int
    output: int = 0
    input: int | None = None


@dataclass(frozen=True)
class Step:
    op: str
    links: dict[int, Ref] = field(default_factory=dict)  # input position -> tensor
    # ops that may stand in for ``op`` (an activation slot: compilers fuse Conv and
    # MatMul with Relu, Clip, LeakyRelu, Sigmoid, ... alike); drawn now and then
    alts: tuple[str, ...] = ()


# Unary float activations with no domain of their own, as fused after Conv/MatMul/Gemm.
ACTIVATIONS = (
    "Relu",
    "LeakyRelu",
    "Clip",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Elu",
    "Selu",
    "Celu",
    "Softplus",
    "Softsign",
    "ThresholdedRelu",
    "Mish",
    "Gelu",
)


def act(op: str, links: dict[int, Ref] | None = None) -> Step:
    """An activation slot: ``op``, or now and then another of ``ACTIVATIONS``."""
    return Step(op, links or {}, tuple(a for a in ACTIVATIONS if a != op))


def chain(*ops: str | Step) -> tuple[Step, ...]:
    """Each op takes the previous one's output as its first input (a ``Step`` given for
    an op keeps its alternatives)."""
    return tuple(
        Step(op, {0: Ref(i - 1)} if i else {})
        if isinstance(op, str)
        else Step(op.op, {0: Ref(i - 1)} if i else {}, op.alts)
        for i, op in enumerate(ops)
    )


def _x(step: int) -> Ref:
    """What step ``step`` took as its first input (a residual's skip path)."""
    return Ref(step, input=0)


BLOCKS: dict[str, tuple[Step, ...]] = {
    # convolution stacks (ResNet, MobileNet, YOLO)
    "conv-bn-relu": chain("Conv", "BatchNormalization", act("Relu")),
    "conv-relu-maxpool": chain("Conv", act("Relu"), "MaxPool"),
    "depthwise-pointwise": chain("Conv", "Conv", act("Relu")),
    "conv-residual": (
        Step("Conv"),
        Step("BatchNormalization", {0: Ref(0)}),
        Step("Add", {0: Ref(1), 1: _x(0)}),
        act("Relu", {0: Ref(2)}),
    ),
    "conv-silu": (
        Step("Conv"),
        Step("Sigmoid", {0: Ref(0)}),
        Step("Mul", {0: Ref(0), 1: Ref(1)}),
    ),
    "classifier-head": chain("GlobalAveragePool", "Flatten", "Gemm", "Softmax"),
    "upsample-concat": (Step("Resize"), Step("Concat", {0: Ref(0)})),
    # transformer pieces
    "matmul-add-gelu": chain("MatMul", "Add", act("Gelu")),
    "matmul-add-relu": chain("MatMul", "Add", act("Relu")),
    "gemm-relu": chain("Gemm", act("Relu")),
    "gelu-erf": (
        Step("Div"),
        Step("Erf", {0: Ref(0)}),
        Step("Add", {0: Ref(1)}),
        Step("Mul", {0: Ref(2), 1: _x(0)}),
    ),
    "layernorm-mlp": (
        Step("LayerNormalization"),
        Step("MatMul", {0: Ref(0)}),
        act("Relu", {0: Ref(1)}),
        Step("MatMul", {0: Ref(2)}),
        Step("Add", {0: Ref(3), 1: _x(0)}),
    ),
    "rmsnorm": (
        Step("Mul"),
        Step("ReduceMean", {0: Ref(0)}),
        Step("Add", {0: Ref(1)}),
        Step("Sqrt", {0: Ref(2)}),
        Step("Div", {0: _x(0), 1: Ref(3)}),
    ),
    "swiglu": (
        Step("MatMul"),
        Step("Sigmoid", {0: Ref(0)}),
        Step("Mul", {0: Ref(0), 1: Ref(1)}),
        Step("Mul", {0: Ref(2)}),
        Step("MatMul", {0: Ref(3)}),
    ),
    "attention": (
        Step("MatMul"),
        Step("Mul", {0: Ref(0)}),
        Step("Add", {0: Ref(1)}),
        Step("Softmax", {0: Ref(2)}),
        Step("MatMul", {0: Ref(3)}),
    ),
    # quantization (QDQ pairs that quantizers fold into QLinear ops)
    "qdq-conv": chain("QuantizeLinear", "DequantizeLinear", "Conv"),
    "qdq-matmul": chain("QuantizeLinear", "DequantizeLinear", "MatMul"),
    # (no QuantizeLinear of a computed tensor: its input must be fresh, away from
    # rounding ties, or two backends' tolerated differences round to different integers)
    "dq-matmul-add": chain("DequantizeLinear", "MatMul", "Add"),
    # layout and shape plumbing
    "transpose-reshape-transpose": chain("Transpose", "Reshape", "Transpose"),
    "unsqueeze-reduce-squeeze": chain("Unsqueeze", "ReduceMean", "Squeeze"),
    "relu-clip": chain("Relu", "Clip"),
    "swish": (Step("Sigmoid"), Step("Mul", {0: _x(0), 1: Ref(0)})),
    "matmul-softmax": chain("MatMul", "Softmax"),
}


# The optimizers' own patterns (``--op-mix layers`` only: the default draws stay as they
# were), each from the source of the pass that matches it: ONNX Runtime's
# onnxruntime/core/optimizer (the rewrite rules and graph transformers named), TVM's
# FuseOps (an elementwise or injective chain fuses into the kernel of the Conv/MatMul it
# follows, or into a reduction it feeds). Only structural conditions are met by
# construction; a transformer that also checks constant values (GeluFusion's sqrt(2),
# LayerNormFusion's Pow exponent 2) fires only where the drawn values happen to match.
OPTIMIZER_BLOCKS: dict[str, tuple[Step, ...]] = {
    "ort-transpose-matmul": chain("Transpose", "MatMul"),  # MatmulTransposeFusion
    "ort-transpose-gemm": chain("Transpose", "Gemm"),  # GemmTransposeFusion (rule)
    "ort-gemm-sum": chain("Gemm", "Sum"),  # GemmSumFusion (rule)
    "ort-not-where": chain("Not", "Where"),  # NotWhereFusion (rule)
    "ort-conv-mul": chain("Conv", "Mul"),  # ConvMulFusion (rule)
    "ort-conv-add": chain("Conv", "Add"),  # ConvAddFusion (rule)
    "ort-pad-conv": chain("Pad", "Conv"),  # PadFusion (rule)
    "ort-pad-maxpool": chain("Pad", "MaxPool"),  # PadFusion (rule)
    "ort-matmul-bn": chain("MatMul", "BatchNormalization"),  # MatmulBNFusion (rule)
    "ort-div-mul": chain("Div", "Mul"),  # DivMulFusion (rule)
    "ort-cast-cast": chain("Cast", "Cast"),  # CastChainElimination, RemoveDuplicateCast
    "ort-add-layernorm": chain("Add", "LayerNormalization"),  # SkipLayerNormFusion
    "ort-add-softmax": chain("Add", "Softmax"),  # BiasSoftmaxFusion
    "ort-matmul-scale": chain("MatMul", "Mul"),  # MatMulScaleFusion
    "ort-scale-matmul": chain("Div", "MatMul"),  # MatMulScaleFusion (scale before)
    "ort-matmul-add": chain("MatMul", "Add"),  # MatMulAddFusion
    "ort-gemm-act": chain("Gemm", act("Relu")),  # GemmActivationFusion
    "ort-conv-add-act": (  # ConvAddActivationFusion (NCHWc)
        Step("Conv"),
        Step("Add", {0: Ref(0)}),
        act("Relu", {0: Ref(1)}),
    ),
    "ort-quick-gelu": (  # QuickGeluFusion: x * sigmoid(alpha * x)
        Step("Mul"),
        Step("Sigmoid", {0: Ref(0)}),
        Step("Mul", {0: _x(0), 1: Ref(1)}),
    ),
    "ort-gather-slice": chain("Shape", "Gather"),  # GatherToSliceFusion, ReshapeFusion
    # TVM FuseOps: elementwise chains that mix arithmetic and activations, after an
    # anchor (MatMul/Conv) or before a reduction
    "tvm-bias-swish-scale": (
        Step("Add"),
        Step("Sigmoid", {0: Ref(0)}),
        Step("Mul", {0: Ref(0), 1: Ref(1)}),
        Step("Add", {0: Ref(2)}),
    ),
    "tvm-scale-tanh-add": chain("Mul", act("Tanh"), "Add"),
    "tvm-sub-exp-reduce": chain("Sub", "Exp", "ReduceSum"),
    "tvm-conv-add-act-mul": chain("Conv", "Add", act("Relu"), "Mul"),
    # the elementwise groups of real layers: a bias or scale around an activation (SiLU
    # and SE gates in EfficientNet and MobileNetV3, GELU's erf form in ViT, Swin and
    # ConvNeXt as exported), which ORT's and TVM's elementwise fusions take whole
    "layer-bias-act-scale": chain("Add", act("Relu"), "Mul"),
    "layer-scale-act-bias": chain("Mul", act("Sigmoid"), "Add"),
    "layer-silu-bias": (
        Step("Sigmoid"),
        Step("Mul", {0: _x(0), 1: Ref(0)}),
        Step("Add", {0: Ref(1)}),
    ),
}
# --op-mix layers draws blocks this much more often than --blocks says (real models are
# mostly such patterns), and one of LAYER_GROUPS half the time a block starts.
LAYER_BLOCK_BOOST = 4.0
LAYER_GROUPS = (
    "gelu-erf",
    "swiglu",
    "conv-silu",
    "ort-quick-gelu",
    "tvm-bias-swish-scale",
    "tvm-scale-tanh-add",
    "tvm-conv-add-act-mul",
    "layer-bias-act-scale",
    "layer-scale-act-bias",
    "layer-silu-bias",
)


def layer_block_table(names: list[str]) -> list[int]:
    """Indices into ``names`` (the usable blocks): each once, and those of
    ``LAYER_GROUPS`` as often again as all the others together (so a uniform pick from
    the table is one of them half the time)."""
    table = list(range(len(names)))
    groups = [k for k, name in enumerate(names) if name in LAYER_GROUPS]
    if groups:
        per = max(1, round((len(names) - len(groups)) / len(groups)))
        table.extend(k for k in groups for _ in range(per - 1))
    return table


def usable(ops: set[str], optimizer: bool = False) -> dict[str, tuple[Step, ...]]:
    """The blocks whose every op is among ``ops`` (with ``OPTIMIZER_BLOCKS`` too)."""
    every = {**BLOCKS, **OPTIMIZER_BLOCKS} if optimizer else BLOCKS
    return {name: b for name, b in every.items() if all(s.op in ops for s in b)}


# --op-mix layers: this share of the ops drawn outside blocks follows real models'
# frequencies (onnxfuzz/data/op_mix_layers.json, from tools/op_mix_frequencies.py); the
# rest stay uniform, so every op remains reachable and rare ops still come up.
LAYER_MIX_SHARE = 0.7
MIX_RESOLUTION = 10_000  # the weighted table's length: a frequency of 1e-4 still counts


def layer_mix(ops: list[str]) -> list[int]:
    """A table of indices into ``ops``, each op repeated by its frequency in real models
    (a uniform pick from it is a weighted pick of an op); empty where none of ``ops`` has
    a frequency."""
    import json
    from importlib import resources

    data = resources.files("onnxfuzz.data").joinpath("op_mix_layers.json").read_text()
    freq: dict[str, float] = json.loads(data)["frequencies"]
    table: list[int] = []
    for k, op in enumerate(ops):
        table.extend([k] * round(freq.get(op, 0.0) * MIX_RESOLUTION))
    return table
