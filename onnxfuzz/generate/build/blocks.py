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
from typing import Any


@dataclass(frozen=True)
class Ref:
    """An earlier step's tensor: its output ``output`` (``input`` None), or the tensor it
    took at input position ``input``."""

    step: int
    output: int = 0
    input: int | None = None


@dataclass(frozen=True)
class Const:
    """A constant input of a fixed value: an initializer of ``shape`` (() a scalar) filled
    with ``value``, in the element type the input takes (the one its type variable is bound
    to by the op's other inputs). The optimizers' patterns check such values (GeluFusion's
    Div by sqrt(2), LayerNormFusion's Pow by 2.0); the builder uses it only where the input
    admits it (rank, dims pattern, value domain, a type that holds ``value`` exactly), else
    the input is chosen as any other, so a block stays valid by construction."""

    value: float
    shape: tuple[int, ...] = ()
    # an element type (onnx.TensorProto's number) where the pattern names one (ORT's
    # Gather fusions take int64 indices only); used only where the input may take it
    dtype: int | None = None


@dataclass(frozen=True)
class Step:
    op: str
    links: dict[int, Ref | Const] = field(default_factory=dict)  # input position -> tensor
    # ops that may stand in for ``op`` (an activation slot: compilers fuse Conv and
    # MatMul with Relu, Clip, LeakyRelu, Sigmoid, ... alike); drawn now and then
    alts: tuple[str, ...] = ()
    # the op's variables fixed by the names its spec draws them under (an attribute such
    # as LayerNormalization's axis, a derived constant such as ReduceMean's axes; an
    # optional input so named is present), each used only where the domain the spec
    # offers then holds it (else drawn as ever): valid by construction
    fixed: dict[str, Any] = field(default_factory=dict)


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


def act(op: str, links: dict[int, Ref | Const] | None = None) -> Step:
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


# --- the values the optimizer blocks spell (``Const`` and ``Step.fixed``) ---
SQRT2 = 1.4142135623730951
FLOAT, UINT8, INT8, INT64 = 1, 2, 3, 7  # onnx.TensorProto's numbers
# per-tensor quantization; a QuantizeLinear's scale (one of its spec's powers of two)
PER_TENSOR = {"block_size": 0}
QSCALE = {"y_scale": 0.25, **PER_TENSOR}
REST = {"starts": [2], "ends": [2**63 - 1]}  # a Slice of what two Gathers (0, 1) leave
LAST_AXIS = {"axes": [-1], "keepdims": 1}  # a reduction over the last axis, kept
# A normalization's epsilon (any value fuses): 0.25 keeps sqrt(var + eps) >= 0.5, the
# smallest divisor Div's spec takes as it is (a smaller one gets glue, which breaks the
# pattern).
EPSILON = 0.25


def _focus(h: int, w: int) -> dict[str, Any]:
    """A Slice of an NCHW tensor's every second row and column from (h, w)."""
    end = 2**63 - 1
    return {
        "data.dims": [1, 3, 4, 6],  # even H and W: four equal quarters
        "data.dtype": FLOAT,
        "axes": [2, 3],
        "starts": [h, w],
        "ends": [end, end],
        "steps": [2, 2],
    }


def _dq(x: Ref | None = None) -> Step:
    """A DequantizeLinear at the blocks' scale and zero point (0.25, int8 0): its output
    is (q - 0) * 0.25 exactly, which a QuantizeLinear may re-quantize (``_requant``)."""
    links: dict[int, Ref | Const] = {1: Const(0.25), 2: Const(0, dtype=INT8)}
    if x is not None:
        links[0] = x
    fixed = {**PER_TENSOR, "x_zero_point": True, "x.dtype": INT8}
    return Step("DequantizeLinear", links, fixed=fixed)


def _requant(x: Ref, zero_point: Const = Const(0, dtype=INT8)) -> Step:
    """A QuantizeLinear of ``x`` (a ``_dq`` output, or a Relu or Where of it) at the same
    scale: the pinned y_scale lets specs/quantize.py take a computed x (exact: no ties)."""
    return Step(
        "QuantizeLinear",
        {0: x, 1: Const(0.25), 2: zero_point},
        fixed={"y_zero_point": True, "output_dtype": 0},
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
# follows, or into a reduction it feeds). A step's ``Const`` inputs and ``fixed``
# variables spell the values a pass checks (GeluFusion's sqrt(2), LayerNormFusion's Pow
# exponent 2 and last-axis means), each where the spec's domain admits it; the rest of
# the pattern is drawn as ever. What each block makes fire was checked against ORT
# 1.31's own log (tests/backends/test_optimizer_blocks.py).
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
    # SkipLayerNormFusion (skip_layer_norm_fusion.cc): Add of two [B, S, H] -> LayerNorm
    # over the last axis
    "ort-add-layernorm": (
        Step("Add", fixed={"A.rank": 3, "A.dtype": FLOAT}),
        Step("LayerNormalization", {0: Ref(0)}, fixed={"axis": -1}),
    ),
    # BiasSkipLayerNormFusion (bias_skip_layer_norm_fusion.cc): the 4-input
    # SkipLayerNormalization SkipLayerNormFusion makes of Add(x, skip) -> LayerNorm takes in
    # an Add(1-D constant bias, MatMul) before it. The bias first (SkipLayerNormFusion's own
    # bias form wants it second) and a 3-D constant B (MatMulAddFusion wants a 2-D one), so
    # neither earlier fusion takes the Add; x's dims fixed so B and the bias fit them.
    "ort-bias-skip-layernorm": (
        Step("MatMul", {1: Const(0.125, (1, 4, 4))}, fixed={"A.dims": [2, 3, 4], "A.dtype": FLOAT}),
        Step("Add", {0: Const(0.25, (4,)), 1: Ref(0)}),
        Step("Add", {0: Ref(1), 1: _x(0)}),
        Step("LayerNormalization", {0: Ref(2)}, fixed={"axis": -1}),
    ),
    "ort-add-softmax": chain("Add", "Softmax"),  # BiasSoftmaxFusion
    # MatMulScaleFusion (matmul_scale_fusion.cc): a Mul or Div by a scalar constant
    # before or after a MatMul
    "ort-matmul-scale": (
        Step("MatMul", fixed={"A.dtype": FLOAT}),
        Step("Mul", {0: Ref(0), 1: Const(0.125)}),
    ),
    "ort-scale-matmul": (
        Step("Div", {1: Const(8.0)}, fixed={"A.dtype": FLOAT}),
        Step("MatMul", {0: Ref(0)}),
    ),
    # MatMulAddFusion (matmul_add_fusion.cc): MatMul by a 2-D B -> Add of a bias
    "ort-matmul-add": (
        Step("MatMul", fixed={"A.dtype": FLOAT, "B.rank": 2}),
        Step("Add", {0: Ref(0), 1: Const(0.25, (1,))}),
    ),
    "ort-gemm-act": chain("Gemm", act("Relu")),  # GemmActivationFusion
    # ConvAddActivationFusion (conv_add_act_fusion.cc): a float 2-D Conv with a bias read
    # only by an Add of two equal 4-D shapes (then an activation). NchwcTransformer takes
    # any Conv of constant weights first (measured on ORT 1.31), so the weights here are
    # computed: x itself (x [2, 2, 3, 3] is its own 3x3 kernel; SAME padding keeps x's
    # shape), and the Add's other input is x (a residual)
    "ort-conv-add-act": (
        Step("Relu", fixed={"X.dims": [2, 2, 3, 3], "X.dtype": FLOAT}),
        Step(
            "Conv",
            {0: Ref(0), 1: Ref(0)},
            fixed={"group": 1, "auto_pad": "SAME_UPPER", "strides": [1, 1], "B": True},
        ),
        Step("Add", {0: Ref(1), 1: Ref(0)}),
        act("Relu", {0: Ref(2)}),
    ),
    "ort-quick-gelu": (  # QuickGeluFusion: x * sigmoid(alpha * x)
        Step("Mul"),
        Step("Sigmoid", {0: Ref(0)}),
        Step("Mul", {0: _x(0), 1: Ref(1)}),
    ),
    "ort-gather-slice": chain("Shape", "Gather"),  # GatherToSliceFusion, ReshapeFusion
    # --- patterns that check constant values (``Const``), from ORT's sources ---
    # GeluFusion (gelu_fusion.cc): Div(x, sqrt(2)) -> Erf -> Add(1) -> Mul by Mul(x, 0.5)
    "ort-gelu-erf": (
        Step("Div", {1: Const(SQRT2)}, fixed={"A.dtype": FLOAT}),
        Step("Erf", {0: Ref(0)}),
        Step("Add", {0: Ref(1), 1: Const(1.0)}),
        Step("Mul", {0: _x(0), 1: Const(0.5)}),
        Step("Mul", {0: Ref(2), 1: Ref(3)}),
    ),
    # LayerNormFusion (layer_norm_fusion.cc): X -> ReduceMean -> Sub -> Pow(2) ->
    # ReduceMean -> Add(epsilon) -> Sqrt -> Div(Sub's output, ...) -> Mul(scale) ->
    # Add(bias), both means over the last axis, scale and bias 1-D
    "ort-layernorm": (
        Step("ReduceMean", fixed={**LAST_AXIS, "data.dtype": FLOAT}),
        Step("Sub", {0: _x(0), 1: Ref(0)}),
        Step("Pow", {0: Ref(1), 1: Const(2.0)}),
        Step("ReduceMean", {0: Ref(2)}, fixed=LAST_AXIS),
        Step("Add", {0: Ref(3), 1: Const(EPSILON)}),
        Step("Sqrt", {0: Ref(4)}),
        Step("Div", {0: Ref(1), 1: Ref(5)}),
        Step("Mul", {0: Ref(6), 1: Const(0.5, (1,))}),
        Step("Add", {0: Ref(7), 1: Const(0.25, (1,))}),
    ),
    # SimplifiedLayerNormFusion (layer_norm_fusion.cc, RMSNorm): X -> Pow(2) ->
    # ReduceMean (last axis) -> Add(epsilon) -> Sqrt -> Div(X, ...) -> Mul(scale)
    "ort-rmsnorm": (
        Step("Pow", {1: Const(2.0)}, fixed={"X.dtype": FLOAT}),
        Step("ReduceMean", {0: Ref(0)}, fixed=LAST_AXIS),
        Step("Add", {0: Ref(1), 1: Const(EPSILON)}),
        Step("Sqrt", {0: Ref(2)}),
        Step("Div", {0: _x(0), 1: Ref(3)}),
        Step("Mul", {0: Ref(4), 1: Const(0.5, (1,))}),
    ),
    # FastGeluFusion (fast_gelu_fusion.cc, float32 on the CPU), its first formula:
    # 0.5x * (1 + tanh(0.7978845834732056x * (1 + 0.044715x * x)))
    "ort-fast-gelu": (
        Step("Mul", {1: Const(0.044715)}, fixed={"A.dtype": FLOAT}),
        Step("Mul", {0: Ref(0), 1: _x(0)}),
        Step("Add", {0: Ref(1), 1: Const(1.0)}),
        Step("Mul", {0: _x(0), 1: Const(0.7978845834732056)}),
        Step("Mul", {0: Ref(3), 1: Ref(2)}),
        Step("Tanh", {0: Ref(4)}),
        Step("Add", {0: Ref(5), 1: Const(1.0)}),
        Step("Mul", {0: _x(0), 1: Const(0.5)}),
        Step("Mul", {0: Ref(6), 1: Ref(7)}),
    ),
    # its second formula: 0.5x * (1 + tanh(0.7978845834732056 * (x + 0.044715 * x^3)))
    "ort-fast-gelu-pow": (
        Step("Pow", {1: Const(3.0)}, fixed={"X.dtype": FLOAT}),
        Step("Mul", {0: Ref(0), 1: Const(0.044715)}),
        Step("Add", {0: Ref(1), 1: _x(0)}),
        Step("Mul", {0: Ref(2), 1: Const(0.7978845834732056)}),
        Step("Tanh", {0: Ref(3)}),
        Step("Add", {0: Ref(4), 1: Const(1.0)}),
        Step("Mul", {0: _x(0), 1: Const(0.5)}),
        Step("Mul", {0: Ref(5), 1: Ref(6)}),
    ),
    # ReshapeFusion (reshape_fusion.cc): contiguous Reshapes become one
    "ort-reshape-reshape": chain("Reshape", "Reshape"),
    # (GatherToSliceFusion, gather_fusion.cc, wants a Range of computed bounds as Gather's
    # indices: Range's spec makes its bounds constants, which ConstantFolding folds first)
    # GatherSliceToSplitFusion (gather_slice_fusion.cc): a Reshape read by exactly two
    # Gathers of int64 scalar constant indices < 3 and a Slice of constant starts, ends,
    # axes and unit steps, all on one axis (ORT 1.31 also wants the Slice to take the
    # rest: measured)
    "ort-gather-slice-split": (
        Step("Reshape"),
        Step("Gather", {0: Ref(0), 1: Const(0, dtype=INT64)}, fixed={"axis": 0}),
        Step("Gather", {0: Ref(0), 1: Const(1, dtype=INT64)}, fixed={"axis": 0}),
        Step("Slice", {0: Ref(0)}, fixed={"axes": [0], "steps": [1], **REST}),
    ),
    # --- QDQ (core/optimizer/qdq_transformer), each checked against ORT 1.31's log ---
    # QDQS8ToU8Transformer (qdq_s8_to_u8.cc): an int8 Q -> DQ pair becomes uint8
    # (Q -> DQ -> Q -> DQ for DoubleQDQPairsRemover, DQ -> Q for QDQFinalCleanup, Relu -> Q
    # for ReluQuantRewrite, Where(DQ) -> Q for WhereDummyDq: not drawn, a QuantizeLinear
    # takes fresh inputs only, see "dq-matmul-add"; DynamicQuantizeLinear -> MatMulInteger
    # -> Cast -> Mul for DynamicQuantizeMatMulFusion: MatMulInteger's B must be a constant
    # of the drawn inner dim, which a block cannot spell)
    "ort-qdq-s8": (
        Step(
            "QuantizeLinear",
            {2: Const(0, dtype=INT8)},
            # output_dtype left out: with it, ORT 1.31's S8ToU8 retyping fails the session
            fixed={**QSCALE, "x.dtype": FLOAT, "y_zero_point": True, "output_dtype": 0},
        ),
        Step(
            "DequantizeLinear",
            {0: Ref(0), 1: Const(0.25), 2: Const(0, dtype=INT8)},
            fixed={**PER_TENSOR, "x_zero_point": True},
        ),
    ),
    # --- re-quantization (QuantizeLinear of a DequantizeLinear's output at its scale and
    # zero point: exact, see specs/quantize.py), from ORT's qdq_transformer sources ---
    # DoubleQDQPairsRemover (double_qdq_pairs_remover.cc): Q -> DQ -> Q -> DQ, each pair
    # of one constant scale and zero point, the middle nodes with one consumer each
    "ort-double-qdq": (
        Step(
            "QuantizeLinear",
            {2: Const(0, dtype=INT8)},
            fixed={**QSCALE, "x.dtype": FLOAT, "y_zero_point": True, "output_dtype": 0},
        ),
        _dq(Ref(0)),
        _requant(Ref(1)),
        _dq(Ref(2)),
    ),
    # QDQFinalCleanupTransformer (qdq_final_cleanup.cc): a DQ -> Q pair of one scale and
    # zero point (the DQ with that one consumer) goes
    "ort-dq-q": (_dq(), _requant(Ref(0))),
    # WhereDummyDq (where_dummy_dq.cc): Where(cond, DQ(x), scalar constant) read by one Q
    # of the DQ's quantized type gets a DQ for the scalar (a scalar condition: X then takes
    # the DQ's output as it is, never through glue that could move it off the scale)
    "ort-where-dq": (
        _dq(),
        Step("Where", {1: Ref(0), 2: Const(0.0)}, fixed={"condition.rank": 0}),
        _requant(Ref(1)),
    ),
    # ReluQuantRewrite (relu_quantizelinear.cc, in Level2_RuleBasedTransformer): a Relu
    # read by one Q whose zero point is the type's minimum (uint8 0) goes
    "ort-relu-q": (
        _dq(),
        Step("Relu", {0: Ref(0)}),
        _requant(Ref(1), Const(0, dtype=UINT8)),
    ),
    # WeightBiasQuantization (weight_bias_quantization.cc): a Conv of a per-tensor DQ's
    # output with float constant weights and bias, read by a Q (ORT 1.31: measured), gets
    # its weights and bias quantized. One input channel (x's dims fixed; with a smaller
    # --max-dim they are 1 anyway), weights 1.0 and bias 0.25: the Conv's output stays on
    # the 0.25 grid, so the Q after it is exact
    "ort-weight-bias-quantization": (
        Step(
            "QuantizeLinear",
            {2: Const(0, dtype=INT8)},
            fixed={
                **QSCALE,
                "x.dtype": FLOAT,
                "x.dims": [1, 1, 2, 2],
                "y_zero_point": True,
                "output_dtype": 0,
            },
        ),
        _dq(Ref(0)),
        Step(
            "Conv",
            {0: Ref(1), 1: Const(1.0, (1, 1, 1, 1)), 2: Const(0.25, (1,))},
            fixed={"B": True},
        ),
        _requant(Ref(2)),
        _dq(Ref(3)),
    ),
    # MatMulIntegerToFloatFusion (matmul_integer_to_float.cc): Cast(MatMulInteger) to float
    # times Mul(a_scale, b_scale), the three with one consumer each; then
    # DynamicQuantizeMatMulFusion (dynamic_quantize_matmul_fusion.cc) when A, a_scale and
    # a_zero_point come from one DynamicQuantizeLinear and B is a constant (of A's inner
    # dim: x's dims fixed; B an initializer of ones)
    "ort-dynamic-quantize-matmul": (
        Step("DynamicQuantizeLinear", fixed={"x.dims": [2, 3]}),
        Step(
            "MatMulInteger",
            {0: Ref(0), 1: Const(1, (3, 4)), 2: Ref(0, output=2)},
            fixed={"a_zero_point": True},
        ),
        Step("Cast", {0: Ref(1)}, fixed={"to": FLOAT}),
        Step("Mul", {0: Ref(0, output=1), 1: Const(0.25)}),
        Step("Mul", {0: Ref(2), 1: Ref(3)}),
    ),
    # QDQPropagationTransformer (qdq_propagation.cc): a DQ's Q/DQ carried over a
    # Transpose (or Reshape, MaxPool, ...) that no Q follows
    "ort-dq-transpose": chain("DequantizeLinear", "Transpose"),
    # NhwcTransformer (nhwc_transformer.cc): QLinearConv runs channels-last
    "ort-qlinearconv": (Step("QLinearConv"),),
    # SliceConcatToSpaceToDepthFusion (slice_concat_to_space_to_depth_fusion.cc, YOLOv5's
    # Focus layer): four Slices of one NCHW x by steps of 2 on H and W, from (0, 0),
    # (1, 0), (0, 1), (1, 1), concatenated on the channels
    "ort-space-to-depth": (
        Step("Slice", fixed=_focus(0, 0)),
        Step("Slice", {0: _x(0)}, fixed=_focus(1, 0)),
        Step("Slice", {0: _x(0)}, fixed=_focus(0, 1)),
        Step("Slice", {0: _x(0)}, fixed=_focus(1, 1)),
        Step(
            "Concat",
            {0: Ref(0), 1: Ref(1), 2: Ref(2), 3: Ref(3)},
            fixed={"inputs.count": 4, "axis": 1},
        ),
    ),
    # BiasGeluFusion (bias_gelu_fusion.cc): Add of a 1-D bias -> Gelu
    "ort-bias-gelu": (
        Step("Add", {1: Const(0.25, (1,))}, fixed={"A.dtype": FLOAT}),
        Step("Gelu", {0: Ref(0)}),
    ),
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


# --op-mix chains (the default): ops are drawn as with ``uniform``, and an arithmetic op,
# an activation, an anchor (Conv, MatMul, Gemm) or a normalization drawn outside a block
# goes on (CHAIN_RATE: always; a choice that shrinks to no chain) into the short elementwise
# chain real layers are made of and compilers fuse first (ORT's Conv/MatMul/Gemm +
# activation and elementwise fusions, TVM's FuseOps groups such as
# fused_matmul_add_relu_multiply). Its further members are drawn uniformly among the run's
# ops of their kind, so a chain adds op pairs and triples rather than repeating one. A
# chain goes on only from a tensor of rank >= 1 (layers act on feature maps; on a scalar it
# would repeat a few instances). Arithmetic ops and activations then make 33 % of the
# nodes (uniform: 22 %; seven torchvision models: 42 %, onnxfuzz/data/op_mix_layers.json;
# tools/bench_optcov.py prints all three), 33 % of the models hold an elementwise group
# of >= 3 ops mixing arithmetic and activations (uniform: 10 %), with as many op types and
# 0.99-1.01x the instances and 1.02-1.18x the triples at matched nodes, but 0.94-0.97x
# the distinct op pairs (README, "Op mix", has the figures and where they fall short).
CHAIN_RATE = 1.0
# At most one chain per CHAIN_NODES nodes of a model (at least one): one chain is what a
# model needs for the fusions; more repeat the few elementwise op pairs (distinct edges
# fell to 0.90x uniform's at --nodes 15:47 with no bound, 0.96x with this one) and crowd
# out the other ops' instances.
CHAIN_NODES = 20
ARITHMETIC = (
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Reciprocal", "Sqrt", "Exp", "Log", "Abs",
    "Max", "Min", "Sum", "Mean",
)  # fmt: skip
CHAIN_ACTIVATIONS = (*ACTIVATIONS, "PRelu", "Erf")
ANCHORS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
NORMALIZATIONS = (
    "BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
)  # fmt: skip
# a chain's arithmetic members: a bias, a scale, a gate (binary, as in real layers; a
# unary one would repeat its input's instance)
BINARY_ARITHMETIC = ("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean")
CHAIN_KINDS = {
    "arithmetic": ARITHMETIC,
    "binary": BINARY_ARITHMETIC,
    "activation": CHAIN_ACTIVATIONS,
    "anchor": ANCHORS,
    "normalization": NORMALIZATIONS,
}
# The chains, by the kind of their first op (the drawn one, with links of its own): the
# kind each further step draws from, and its links.
# - arithmetic -> activation -> arithmetic(act, x): a bias, an activation, then a scale or
#   the gating product x * act(x) (SiLU, GELU's x * Phi(x)) where the op is binary;
# - activation -> arithmetic(act, x) -> arithmetic: SiLU's x * sigmoid(x), then a bias;
# - anchor -> arithmetic -> activation -> arithmetic: Conv/MatMul with a bias, an
#   activation and a scale (or a residual add);
# - normalization -> activation -> arithmetic(act, x) -> arithmetic: BatchNorm-Relu,
#   GroupNorm-SiLU (diffusion UNets), then a bias or a residual add.
CHAINS: dict[str, tuple[tuple[str, Step], ...]] = {
    "arithmetic": (
        ("activation", Step("", {0: Ref(0)})),
        ("binary", Step("", {0: Ref(1), 1: _x(1)})),
    ),
    "activation": (
        ("binary", Step("", {0: Ref(0), 1: _x(0)})),
        ("binary", Step("", {0: Ref(1)})),
    ),
    "anchor": (
        ("binary", Step("", {0: Ref(0)})),
        ("activation", Step("", {0: Ref(1)})),
        ("binary", Step("", {0: Ref(2)})),
    ),
    "normalization": (
        ("activation", Step("", {0: Ref(0)})),
        ("binary", Step("", {0: Ref(1), 1: _x(1)})),
        ("binary", Step("", {0: Ref(2)})),
    ),
}
