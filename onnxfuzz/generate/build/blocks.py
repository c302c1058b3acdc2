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


def usable(ops: set[str]) -> dict[str, tuple[Step, ...]]:
    """The blocks whose every op is among ``ops``."""
    return {name: b for name, b in BLOCKS.items() if all(s.op in ops for s in b)}
