"""The input rank and size rules the operator documentation states and the checker does not
check (``INPUT_RULES``), each quoting the doc."""

from __future__ import annotations

from collections.abc import Callable

from onnxfuzz.generate.corpus.node_views import NodeView, Rule, Shape


def scalar(doc: str) -> Rule:
    """The doc says "scalar" / "0-D tensor": rank 0."""

    def rule(n: NodeView, s: Shape) -> str | None:
        return None if s == () else f"must be a 0-D tensor ({doc}), got shape {list(s)}"

    return rule


def vector(
    doc: str, size: Callable[[NodeView], int | None] | int | None = None, min_size: int = 0
) -> Rule:
    """The doc says "1-D tensor" (of ``size`` elements, or at least ``min_size``)."""

    def rule(n: NodeView, s: Shape) -> str | None:
        if len(s) != 1:
            return f"must be a 1-D tensor ({doc}), got shape {list(s)}"
        want = size(n) if callable(size) else size
        if want is not None and s[0] != want:
            return f"must have {want} elements ({doc}), got shape {list(s)}"
        if s[0] < min_size:
            return f"must have at least {min_size} elements ({doc}), got shape {list(s)}"
        return None

    return rule


def scalar_or_vector(doc: str, size: Callable[[NodeView], int | None] | int | None = None) -> Rule:
    """The doc says "a scalar or a 1-D tensor" (of ``size`` elements)."""
    as_vector = vector(doc, size)

    def rule(n: NodeView, s: Shape) -> str | None:
        return None if s == () else as_vector(n, s)

    return rule


def min_rank(k: int, doc: str) -> Rule:
    def rule(n: NodeView, s: Shape) -> str | None:
        return None if len(s) >= k else f"must have rank >= {k} ({doc}), got shape {list(s)}"

    return rule


def dim_of(name: str, axis: int) -> Callable[[NodeView], int | None]:
    """The size of another input's ``axis`` (None where that input is absent)."""

    def size(n: NodeView) -> int | None:
        s = n.inputs.get(name)
        return s[axis] if s is not None and len(s) > abs(axis) - (axis < 0) else None

    return size


def _quant_param(data: str, doc: str) -> Rule:
    """Quantize/DequantizeLinear scale: a scalar (per tensor), a 1-D tensor of
    ``data.shape[axis]`` (per axis), or, from version 21, the rank of ``data`` (blocked)."""

    def rule(n: NodeView, s: Shape) -> str | None:
        x = n.inputs[data]
        if s == ():
            return None
        if len(s) == 1 and (n.attrs.get("block_size", 0) or 0) == 0:
            axis = int(n.attrs.get("axis", 1))  # type: ignore[call-overload]
            ax = axis % len(x) if x else 0
            want = x[ax] if x else None
            if want is not None and s[0] != want:
                return f"per-axis: must have {want} elements ({doc}), got shape {list(s)}"
            return None
        if n.version >= 21 and len(s) == len(x) and n.attrs.get("block_size"):
            return None
        return f"must be a scalar, a 1-D per-axis or a blocked tensor ({doc}), got {list(s)}"

    return rule


def _same_shape_as(other: str, doc: str) -> Rule:
    def rule(n: NodeView, s: Shape) -> str | None:
        o = n.inputs.get(other)
        if o is not None and o != s:
            return f"must have the shape of {other} {list(o)} ({doc}), got {list(s)}"
        return None

    return rule


def _matmul_zero_point(data: str, row: bool) -> Rule:
    """MatMulInteger's zero points: "a scalar or N-D tensor. Scalar refers to per tensor
    quantization whereas N-D refers to per row [A] / per col [B] quantization. If the input
    is 2D of shape [M, K] then zero point tensor may be an M element vector ... If the input
    is N-D tensor with shape [D1, D2, M, K] then zero point tensor may have shape
    [D1, D2, M, 1]" (B: an N element vector, or [D1, D2, 1, N]). A one-element vector is
    taken as per tensor too: ONNX's own node test (test_matmulinteger) feeds a_zero_point
    [12] for a 4 x 3 A, and numpy broadcasting, the op's stated semantics, agrees."""

    def rule(n: NodeView, s: Shape) -> str | None:
        x = n.inputs[data]
        if s in ((), (1,)):
            return None
        if len(x) == 2:
            want: Shape = (x[0],) if row else (x[1],)
        else:
            want = x[:-1] + (1,) if row else x[:-2] + (1, x[-1])
        if s == want:
            return None
        what = "per row" if row else "per column"
        return f"must be a scalar or {what} {list(want)} ({data} is {list(x)}), got {list(s)}"

    return rule


def _gather_nd_indices(n: NodeView, s: Shape) -> str | None:
    """GatherND: "indices ... rank q >= 1", "b < min(q, r) is to be honored", "The first b
    dimensions of the shape of indices tensor and data tensor must be equal",
    "indices_shape[-1] should have a value between 1 (inclusive) and rank r-b (inclusive)"
    (b: batch_dims)."""
    data, b = n.inputs["data"], int(n.attr("batch_dims", 0))  # type: ignore[call-overload]
    r, q = len(data), len(s)
    if q < 1 or not b < min(q, r):
        return f"needs rank q >= 1 and batch_dims {b} < min(q, r) = min({q}, {r})"
    if s[:b] != data[:b]:
        return f"batch dims {list(s[:b])} must equal data's {list(data[:b])}"
    if not 1 <= s[-1] <= r - b:
        return f"indices_shape[-1] = {s[-1]} must lie in [1, r - batch_dims] = [1, {r - b}]"
    return None


def _output_channels(n: NodeView) -> int | None:
    w = n.inputs.get("W") or n.inputs.get("w")
    return w[0] if w else None


def _convtranspose_channels(n: NodeView) -> int | None:
    w = n.inputs.get("W")
    g = int(n.attrs.get("group", 1))  # type: ignore[call-overload]
    return w[1] * g if w else None


_REDUCE_AXES = {"axes": vector("Reduce axes: 'Optional input list of integers'")}
_WINDOW = {"size": scalar("'A scalar value indicating the length of the window'")}

# op -> formal input -> rule. Each rule quotes the operator doc (onnx.defs.get_schema(op).doc
# and the input's description), the source of truth where the checker and shape inference
# look at no shape. Only facts for the versions onnxfuzz generates (MIN_OPSET..MAX_OPSET).
INPUT_RULES: dict[str, dict[str, Rule]] = {
    "CumSum": {"axis": scalar("'A 0-D tensor'")},
    "CumProd": {"axis": scalar("'A 0-D tensor'")},
    "Range": {
        "start": scalar("'Scalar. First entry for the range'"),
        "limit": scalar("'Scalar. Exclusive upper limit'"),
        "delta": scalar("'Scalar. Value to step by'"),
    },
    "OneHot": {
        "depth": scalar_or_vector("'Scalar or Rank 1 tensor containing exactly one element'", 1),
        "values": vector("'Rank 1 tensor containing exactly two elements'", 2),
    },
    "TopK": {"K": vector("'A 1-D tensor containing a single positive value'", 1)},
    "Clip": {
        "min": scalar("'It must be a scalar(tensor of empty shape)'"),
        "max": scalar("'It must be a scalar(tensor of empty shape)'"),
    },
    "Pad": {
        "pads": vector("'pads should be a 1D tensor of shape [2 * num_axes]'"),
        "constant_value": scalar("'A scalar value to be used if the mode chosen is constant'"),
        "axes": vector("'1-D tensor of axes that pads apply to'"),
    },
    "Trilu": {
        "input": min_rank(2, "'Input tensor of rank 2 or higher'"),
        "k": scalar("'A 0-D tensor containing a single value'"),
    },
    "DFT": {
        "dft_length": scalar("'The length of the signal as a scalar'"),
        "axis": scalar("'The axis as a scalar'"),
    },
    "STFT": {
        "frame_step": scalar("'A scalar representing the number of samples to step'"),
        "window": vector("'An optional 1-D tensor representing the window function'"),
        "frame_length": scalar("'An optional scalar representing the length of each frame'"),
    },
    "HannWindow": _WINDOW,
    "HammingWindow": _WINDOW,
    "BlackmanWindow": _WINDOW,
    # The doc names no rank; ONNX's shape inference and every implementation read each of
    # the five as one value (ORT: "must be a scalar"), the form of the ONNX node tests.
    "MelWeightMatrix": {
        n: scalar(f"{n}: one value (ONNX node tests, ORT)")
        for n in (
            "num_mel_bins",
            "dft_length",
            "sample_rate",
            "lower_edge_hertz",
            "upper_edge_hertz",
        )
    },
    "Dropout": {
        "ratio": scalar("'an optional input ratio (floating-point scalar)'"),
        "training_mode": scalar("'an optional input training_mode (boolean scalar)'"),
    },
    "Slice": {
        n: vector(f"{n}: '1-D tensor of ...'", dim_of("starts", 0))
        for n in ("starts", "ends", "axes", "steps")
    },
    "Expand": {"shape": vector("'A 1-D tensor indicates the shape you want to expand to'")},
    "Reshape": {"shape": vector("'Specified shape for output' (a 1-D int64 tensor)")},
    "Tile": {
        "repeats": vector(
            "'1D int64 tensor of the same length as input's dimension number'",
            lambda n: len(n.inputs["input"]),
        )
    },
    "Squeeze": {"axes": vector("'1D tensor of integers indicating the dimensions to squeeze'")},
    "Unsqueeze": {"axes": vector("'1D tensor of integers indicating the dimensions'")},
    "Split": {"split": vector("'Optional length of each output'")},
    "ConstantOfShape": {"input": vector("'1D tensor. The shape of the expected output tensor'")},
    "CenterCropPad": {"shape": vector("'1-D tensor representing the cropping window'")},
    "Col2Im": {
        "image_shape": vector("'a 1-dimensional tensor with size of at least 2'", min_size=2),
        "block_shape": vector("'a 1-dimensional tensor of size of at least 2'", min_size=2),
    },
    "Compress": {
        "input": min_rank(1, "'Tensor of rank r >= 1'"),
        "condition": vector("'Rank 1 tensor of booleans'"),
    },
    "AffineGrid": {
        "size": vector("'the target output image size (N, C, H, W) ... or (N, C, D, H, W)'")
    },
    "Resize": {
        "roi": vector("'1-D tensor given as [start1, ..., startN, end1, ..., endN]'"),
        "scales": vector("'The scale array along each dimension'"),
        "sizes": vector("'Target size of the output tensor' (one per axis)"),
    },
    "MaxUnpool": {"output_shape": vector("'The shape of the output' (one per axis)")},
    "BatchNormalization": {
        n: vector(f"{n}: 'tensor of shape (C)'", dim_of("X", 1))
        for n in ("scale", "B", "input_mean", "input_var")
    },
    "InstanceNormalization": {
        n: vector(f"{n}: 'The input 1-dimensional ... tensor of size C'", dim_of("input", 1))
        for n in ("scale", "B")
    },
    "Conv": {"B": vector("'Optional 1D bias ... has size of M'", _output_channels)},
    "ConvTranspose": {"B": vector("'Optional 1D bias ... has size of M'", _convtranspose_channels)},
    "DeformConv": {"B": vector("'Optional 1D bias of length oC'", _output_channels)},
    "QLinearConv": {
        "x_scale": scalar("x_scale: 'It's a scalar'"),
        "x_zero_point": scalar("x_zero_point: 'It's a scalar'"),
        "w_scale": scalar_or_vector(
            "w_scale: 'a scalar or a 1-D tensor ... (M)'", _output_channels
        ),
        "w_zero_point": scalar_or_vector(
            "w_zero_point: 'a scalar or a 1-D tensor ... (M)'", _output_channels
        ),
        "y_scale": scalar("y_scale: 'It's a scalar'"),
        "y_zero_point": scalar("y_zero_point: 'It's a scalar'"),
        "B": vector("'Optional 1D bias ... has size of M'", _output_channels),
    },
    "ConvInteger": {
        "x_zero_point": scalar("x_zero_point: 'It's a scalar'"),
        "w_zero_point": scalar_or_vector(
            "w_zero_point: 'a scalar or a 1-D tensor ... (M)'", _output_channels
        ),
    },
    "MatMulInteger": {
        "a_zero_point": _matmul_zero_point("A", row=True),
        "b_zero_point": _matmul_zero_point("B", row=False),
    },
    "QLinearMatMul": {
        "a_zero_point": _same_shape_as("a_scale", "'Scale and zero point must have same shape'"),
        "b_zero_point": _same_shape_as("b_scale", "'Scale and zero point must have same shape'"),
        "y_zero_point": _same_shape_as("y_scale", "'Scale and zero point must have same shape'"),
    },
    "QuantizeLinear": {
        "y_scale": _quant_param("x", "'scalar ... 1-D Tensor ... blocked'"),
        "y_zero_point": _same_shape_as("y_scale", "'Shape must match y_scale'"),
    },
    "DequantizeLinear": {
        "x_scale": _quant_param("x", "'scalar ... 1-D Tensor ... blocked'"),
        "x_zero_point": _same_shape_as("x_scale", "'Shape must match x_scale'"),
    },
    "RoiAlign": {
        "rois": lambda n, s: (
            None if len(s) == 2 and s[1] == 4 else f"must be (num_rois, 4), got {list(s)}"
        ),
        "batch_indices": vector("'1-D tensor of shape (num_rois,)'", dim_of("rois", 0)),
    },
    "ReverseSequence": {
        "input": min_rank(2, "'Tensor of rank r >= 2'"),
        "sequence_lens": vector("'It has shape [batch_size]'"),
    },
    "RNN": {"sequence_lens": vector("'It has shape [batch_size]'")},
    "GRU": {"sequence_lens": vector("'It has shape [batch_size]'")},
    "LSTM": {"sequence_lens": vector("'It has shape [batch_size]'")},
    "NegativeLogLikelihoodLoss": {
        "weight": vector("'it has to be a tensor of size C'", dim_of("input", 1))
    },
    "SoftmaxCrossEntropyLoss": {
        "weights": vector("'it has to be a 1D Tensor assigning weight to each of the classes'")
    },
    "Attention": {"nonpad_kv_seqlen": vector("'A vector of integers of shape (batch_size,)'")},
    "Gather": {"data": min_rank(1, "'Tensor of rank r >= 1'")},
    "GatherElements": {"data": min_rank(1, "'Tensor of rank r >= 1'")},
    "GatherND": {
        "data": min_rank(1, "'Tensor of rank r >= 1'"),
        "indices": lambda n, s: _gather_nd_indices(n, s),
    },
    "ScatterElements": {"data": min_rank(1, "'Tensor of rank r >= 1'")},
    "ScatterND": {
        "data": min_rank(1, "'Tensor of rank r >= 1'"),
        "indices": min_rank(1, "'Tensor of rank q >= 1'"),
    },
    "Det": {"X": min_rank(2, "'Input tensor of shape [*, M, M]'")},
    **{
        op: _REDUCE_AXES
        for op in (
            "ReduceL1",
            "ReduceL2",
            "ReduceLogSum",
            "ReduceLogSumExp",
            "ReduceMax",
            "ReduceMean",
            "ReduceMin",
            "ReduceProd",
            "ReduceSum",
            "ReduceSumSquare",
        )
    },
}
