"""What the ONNX reference evaluator (onnx 1.23) gets wrong on valid draws
(``REFERENCE_LIMITS``), each entry naming the fault and where in its source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.corpus.node_views import NodeView, Shape, node_views


# --- what the reference evaluator gets wrong ----------------------------------------------
@dataclass(frozen=True)
class Limitation:
    """A draw the ONNX reference evaluator (onnx 1.23) cannot run right although it is
    valid ONNX: its failure there is its own, not the spec's. ``applies`` says when, as
    narrowly as the evidence allows; ``reason`` names what it does wrong and where."""

    op: str
    applies: Callable[[NodeView], bool]
    reason: str


def _spatial(n: NodeView, name: str = "X") -> Shape:
    return n.inputs[name][2:]


def _pads(n: NodeView) -> list[int]:
    return list(n.attr("pads", []) or [])  # type: ignore[call-overload]


def _ints(n: NodeView, name: str, default: int, k: int) -> list[int]:
    v = n.attr(name)
    return list(v) if v else [default] * k  # type: ignore[call-overload]


def _old_maxpool_path(n: NodeView) -> bool:
    """MaxPool with unit strides and dilations runs the reference's older 2-D pooling
    (``_op_common_pool.CommonPool``): it pads only 4-D inputs (``len(pads) == 4``), splits
    SAME padding for 2 axes only, pads with NaN (which integer arrays cannot hold) and
    loops over ``x + pad_total - kernel`` windows from the top-left (asymmetric pads
    misplace them). It also reads 2-D pads as (top, bottom, left, right) where ONNX orders
    them (top, left, bottom, right), so H and W padded unalike swap ([1, 0, 1, 0] on 4x5
    gives 4x5, not 5x4), and with ceil_mode it sizes the output as if padded twice (4x4,
    pads 1, kernel 2: 7x7, not 5x5)."""
    k = len(n.inputs["X"]) - 2
    unit = _ints(n, "strides", 1, k) == [1] * k and _ints(n, "dilations", 1, k) == [1] * k
    if not unit:
        return False
    pads = _pads(n) or [0] * (2 * k)
    same = n.attr("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER")
    padded = same or any(pads)
    asymmetric = pads[:k] != pads[k:]
    misread = k == 2 and pads[1] != pads[2]
    ceil = bool(n.attr("ceil_mode", 0))
    integer = n.types["X"] in dt.INTS  # 2-D: np.pad(..., constant_values=nan), even by 0
    return (integer and k == 2) or (padded and (k != 2 or asymmetric or same or misread or ceil))


def _ceil_window_short_by_two(n: NodeView) -> bool:
    """AveragePool with ceil_mode whose last window on some axis reaches two or more
    elements past the (padded) input: the evaluator averages it wrong there (measured
    against ONNX Runtime and numpy: a window of 4 holding 1 or 2 elements is wrong, one
    holding 3 right; of 3, holding 1 wrong, 2 right; opsets 11 to 28 alike)."""
    if not n.attr("ceil_mode", 0) or n.attr("auto_pad", "NOTSET") != "NOTSET":
        return False
    k = len(n.inputs["X"]) - 2
    kernel = _ints(n, "kernel_shape", 1, k)
    strides, dil = _ints(n, "strides", 1, k), _ints(n, "dilations", 1, k)
    pads = _pads(n) or [0] * (2 * k)
    for i, (d, kk, s, dl) in enumerate(zip(_spatial(n), kernel, strides, dil, strict=True)):
        if not isinstance(d, int) or d <= 0:
            continue
        length, eff = d + pads[i] + pads[k + i], (kk - 1) * dl + 1
        if length < eff:
            continue
        last = -(-(length - eff) // s) * s  # where the last window starts (ceil_mode)
        if last >= d + pads[i]:  # one starting in the right padding is dropped
            last -= s
        if last + eff - length >= 2:
            return True
    return False


def _convtranspose_full(n: NodeView) -> list[int]:
    k = len(n.inputs["X"]) - 2
    kernel = list(n.inputs["W"][2:])
    strides, dil = _ints(n, "strides", 1, k), _ints(n, "dilations", 1, k)
    opad = _ints(n, "output_padding", 0, k)
    return [
        s * (d - 1) + op + (kk - 1) * dl + 1
        for d, s, op, kk, dl in zip(_spatial(n), strides, opad, kernel, dil, strict=True)
    ]


def _maxunpool_default(n: NodeView) -> list[int]:
    k = len(n.inputs["X"]) - 2
    kernel = _ints(n, "kernel_shape", 1, k)
    strides = _ints(n, "strides", 1, k)
    pads = _pads(n) or [0] * (2 * k)
    return [
        (d - 1) * s + kk - pads[i] - pads[k + i]
        for i, (d, s, kk) in enumerate(zip(_spatial(n), strides, kernel, strict=True))
    ]


def _slice_start_before_begin(n: NodeView) -> bool:
    starts = n.consts.get("starts")
    steps = n.consts.get("steps")
    if starts is None or steps is None:
        return False
    r = len(n.inputs["data"])
    axes = n.consts.get("axes")
    axes = list(range(r)) if axes is None else [int(a) % r for a in axes]
    dims = [n.inputs["data"][a] for a in axes]
    return any(
        int(st) < 0 and int(sp) < 0 and int(st) + d < 0
        for st, sp, d in zip(starts, steps, dims, strict=True)
    )


_SOURCE = "onnx/reference/ops/"

REFERENCE_LIMITS: tuple[Limitation, ...] = (
    Limitation(
        "Scan",
        lambda n: _scan_fault_in(n),
        f"Scan ({_SOURCE}op_scan.py): raises 'not implemented' for any scan axis or "
        "direction other than 0 (input or output, negative axes included); the schema "
        "has them since Scan-9 and ONNX Runtime runs them",
    ),
    Limitation(
        "Loop",
        lambda n: _loop_fault_in(n),
        f"Loop ({_SOURCE}op_loop.py): an absent cond is read as false ('while cond "
        "and ...' with cond None: no iteration, then np.vstack([]) fails), and scan "
        "outputs are stacked with np.vstack (a scalar per iteration gives [M, 1], a "
        "rank >= 2 one [M * d0, ...]); ONNX Runtime runs both as the schema says",
    ),
    Limitation(
        "AffineGrid",
        lambda n: n.types["theta"] != dt.FLOAT,
        f"returns float32 whatever theta's type ({_SOURCE}op_affine_grid.py: "
        "grid.astype(np.float32)); the schema's output is theta's type T1",
    ),
    *(
        Limitation(
            op,
            lambda n: bool(n.attr("ceil_mode", 0)) and n.attr("auto_pad", "NOTSET") != "NOTSET",
            f"asserts 'ceil_mode is not supported with auto_pad' ({_SOURCE}op_pool_common.py);"
            " the schema allows both (ONNX Runtime runs it)",
        )
        for op in ("AveragePool", "LpPool")
    ),
    *(
        Limitation(
            op,
            lambda n: (
                n.attr("auto_pad", "NOTSET") == "VALID"
                and any(d > 1 for d in _ints(n, "dilations", 1, len(n.inputs["X"]) - 2))
            ),
            f"auto_pad VALID sizes the output by the undilated kernel ({_SOURCE}"
            "op_pool_common.py get_output_shape_auto_pad): a wrong output shape",
        )
        for op in ("AveragePool", "LpPool")
    ),
    Limitation(
        "AveragePool",
        _ceil_window_short_by_two,
        f"with ceil_mode, a last window that reaches two or more elements past the input is "
        f"averaged wrong ({_SOURCE}op_pool_common.py; ONNX Runtime averages its elements "
        "inside, as the schema says: [3, 1, 4, 4] pooled by 3x2 with strides 3x2 gave 0.646 "
        "where the average is 0.093)",
    ),
    Limitation(
        "MaxPool",
        _old_maxpool_path,
        f"unit strides and dilations take the older 2-D pooling ({_SOURCE}_op_common_pool.py):"
        " padding on 1-D/3-D inputs, asymmetric pads, 2-D pads unlike between H and W (read "
        "in the wrong order), padding with ceil_mode (counted twice), SAME or integer types "
        "give a wrong shape or a crash (NaN padding into int8, broadcast errors)",
    ),
    Limitation(
        "DeformConv",
        lambda n: 1 in _spatial(n),
        f"normalizes sampling positions by (ih - 1) and (iw - 1) ({_SOURCE}op_deform_conv.py)"
        ": a spatial dim of 1 divides by zero, 'cannot convert float NaN to integer'",
    ),
    Limitation(
        "DequantizeLinear",
        lambda n: n.version < 19,
        "no implementation of DequantizeLinear-13 (opsets 13..18): 'No implementation for "
        "operator DequantizeLinear ... version 18, found 19, 21, 23, 25'",
    ),
    Limitation(
        "SequenceInsert",
        lambda n: "position" in n.inputs,
        f"takes the position modulo the sequence's length ({_SOURCE}op_sequence_insert.py: "
        "(position + len) % len), so a position equal to the length, the end (valid: "
        "[-n, n]), inserts at the front, and any position into an empty sequence (0, the "
        "only valid one) raises ZeroDivisionError. A view has no sequence length, so every "
        "given position is set aside, the right ones with it",
    ),
    *(
        Limitation(
            op,
            lambda n: n.attr("clip") is not None,
            f"ignores the clip attribute ({_SOURCE}op_{op.lower()}.py: clip=None,  # noqa: "
            "ARG002), so activations' inputs past it are not clipped (ONNX Runtime clips them)",
        )
        for op in ("RNN", "GRU", "LSTM")
    ),
    Limitation(
        "LSTM",
        lambda n: bool(n.attr("input_forget", 0)),
        f"ignores input_forget ({_SOURCE}op_lstm.py: input_forget=None,  # noqa: ARG002): "
        "the input and forget gates stay uncoupled (ONNX Runtime couples them)",
    ),
    Limitation(
        "Det",
        lambda n: n.types["X"] == dt.FLOAT16,
        "np.linalg.det has no float16 loop: TypeError for a schema type (T: float16)",
    ),
    Limitation(
        "GatherElements",
        lambda n: _gather_elements_narrower(n),
        f"requires indices' dims to equal data's off the axis ({_SOURCE}"
        "op_gather_elements.py: 'Except for dimension ..., all dimensions of index and self "
        "should be the same size'; with axis=-1 its slice shape[axis + 1:] is the whole "
        "shape, so the axis dim must match too); the doc defines out[i][j][k] = "
        "data[index[i][j][k]][j][k] for any indices of data's rank (torch.gather: smaller "
        "dims allowed; ONNX Runtime runs it)",
    ),
    Limitation(
        "GlobalLpPool",
        lambda n: True,
        "no implementation: 'No registered implementation for operator GlobalLpPool'",
    ),
    Limitation(
        "MaxRoiPool",
        lambda n: True,
        "no implementation: 'No registered implementation for operator 'MaxRoiPool''",
    ),
    Limitation(
        "GlobalMaxPool",
        lambda n: len(n.inputs["X"]) != 4,
        f"reduces the last two axes whatever the rank and appends r - 2 unit dims ({_SOURCE}"
        "op_global_max_pool.py: x.max(axis=tuple(range(spatial_shape, spatial_shape + 2)))):"
        " right for 4-D inputs only (3-D: C is reduced too; 5-D: D is kept)",
    ),
    Limitation(
        "GridSample",
        lambda n: n.version < 20 and n.attr("mode", "bilinear") != "nearest",
        f"knows only GridSample-20's mode names ({_SOURCE}op_grid_sample.py): GridSample-16's"
        " 'bilinear' and 'bicubic' raise 'only supports nearest, linear, and cubic modes'",
    ),
    Limitation(
        "LRN",
        lambda n: n.inputs["X"][0] != n.inputs["X"][1],
        f"loops over the batch instead of the channels ({_SOURCE}op_lrn.py: for c in "
        "range(x.shape[0])), onnx #7805: IndexError for N > C, wrong values for N < C",
    ),
    Limitation(
        "MaxUnpool",
        lambda n: (
            "output_shape" in n.consts
            and list(n.consts["output_shape"][2:]) != _maxunpool_default(n)
        ),
        f"reads the indices in the default output's layout and pads the rest ({_SOURCE}"
        "op_max_unpool.py; ONNX's node test test_maxunpool_export_with_output_shape encodes "
        "the same), while the indices are flat positions in the output (ONNX Runtime): "
        "IndexError or misplaced values where output_shape exceeds the default",
    ),
    Limitation(
        "Pad",
        lambda n: "pads" in n.consts and bool((n.consts["pads"] < 0).any()),
        f"np.pad takes no negative widths ({_SOURCE}op_pad.py): 'index can't contain negative"
        " values'; the schema's negative pads remove elements",
    ),
    *(
        Limitation(
            op,
            lambda n: next(iter(n.inputs.values())) == (),
            "a 0-D input: the ufunc writes into a 0-d array ('return arrays must be of ArrayType')",
        )
        for op in ("ReduceLogSumExp", "Softsign")
    ),
    Limitation(
        "ReduceSumSquare",
        lambda n: n.types["data"] == dt.INT32,
        "np.sum promotes int32 to int64: the output's type is not the input's",
    ),
    Limitation(
        "Resize",
        lambda n: any(a < 0 for a in (n.attr("axes") or [])),  # type: ignore[attr-defined]
        f"does not normalize negative axes ({_SOURCE}op_resize.py: a transpose by them, "
        "'axes don't match array'); the schema accepts [-r, r-1]",
    ),
    Limitation(
        "ConvTranspose",
        lambda n: int(n.attr("group", 1)) > 1,  # type: ignore[call-overload]
        f"slices W by output channels and writes one channel per group ({_SOURCE}"
        "op_conv_transpose.py): reshape errors or wrong values for group > 1",
    ),
    Limitation(
        "ConvTranspose",
        lambda n: (
            n.attr("output_shape") is not None
            and n.attr("auto_pad", "NOTSET") in ("NOTSET", "VALID")
            and any(
                o < f
                for o, f in zip(n.attr("output_shape"), _convtranspose_full(n), strict=True)  # type: ignore[call-overload]
            )
        ),
        f"ignores output_shape's padding outside SAME ({_SOURCE}op_conv_transpose.py: pads "
        "default to 0): an output_shape below the unpadded size fails in col2im",
    ),
    Limitation(
        "QLinearConv",
        lambda n: n.inputs["w_scale"] not in ((), (1,)) and len(n.inputs["x"]) != 4,
        f"broadcasts a per-channel w_scale as (1, M, 1, 1) ({_SOURCE}op_qlinear_conv.py: "
        "np.expand_dims(w_scale, (0, 2, 3))): right for 2-D convolutions only",
    ),
    Limitation(
        "ConvInteger",
        lambda n: (
            len(zp := n.inputs.get("w_zero_point", ())) == 1
            and (len(n.inputs["w"]) == 3 or (len(n.inputs["w"]) != 4 and zp[0] > 1))
        ),
        f"subtracts a 1-D w_zero_point as (M, 1, 1, 1) ({_SOURCE}op_conv_integer.py: "
        "np.expand_dims(w_zero_point, (1, 2, 3))): right for 2-D convolutions (and 3-D ones "
        "with M = 1); a 1-D convolution fails in place ('non-broadcastable output operand')",
    ),
    *(
        Limitation(
            op,
            lambda n: next(iter(n.inputs.values())) != (n.outputs[0] if n.outputs else None),
            "adds into a copy of the first input in place: 'non-broadcastable output "
            "operand' when the first input is smaller than the broadcast shape",
        )
        for op in ("Mean",)
    ),
    Limitation(
        "LpNormalization",
        lambda n: n.attr("p", 2) == 1,
        f"p=1 sums x, not |x| ({_SOURCE}op_lp_normalization.py: np.power(x, p).sum()): "
        "values beyond [-1, 1] (or a division by zero) for mixed signs",
    ),
    Limitation(
        "Slice",
        _slice_start_before_begin,
        f"slices the numpy way ({_SOURCE}op_slice.py): a negative step's start below -d "
        "selects nothing, where ONNX clamps it to 0 ('[0, dims-1] for negative stepping')",
    ),
    Limitation(
        "Unique",
        lambda n: not n.attr("sorted", 1) and _unique_off_axis0(n),
        f"sorted=0 re-takes the values along axis 0 with flat/other-axis indices ({_SOURCE}"
        "op_unique.py: np.take(x, indices, axis=0)): IndexError or wrong values",
    ),
    Limitation(
        "NegativeLogLikelihoodLoss",
        lambda n: "weight" not in n.inputs and n.attr("ignore_index") == -1,
        f"without a weight input, masks ignored targets only if ignore_index != -1 "
        f"({_SOURCE}op_negative_log_likelihood_loss.py: 'elif ignore_index != -1'): at "
        "ignore_index=-1 the targets equal to -1 count in the loss and the mean's "
        "denominator; ONNX's own test-case generator and ONNX Runtime leave them out",
    ),
    Limitation(
        "NonMaxSuppression",
        lambda n: "iou_threshold" not in n.inputs or "max_output_boxes_per_class" not in n.inputs,
        f"reads .size of every optional input ({_SOURCE}op_non_max_suppression.py "
        "prepare_compute): an absent max_output_boxes_per_class or iou_threshold (defaults 0) "
        "fails ('NoneType' has no attribute 'size'; onnx #6354); ONNX Runtime applies the "
        "defaults",
    ),
    Limitation(
        "NonMaxSuppression",
        lambda n: any(
            len(n.inputs.get(k, (1,))) == 0
            for k in ("max_output_boxes_per_class", "iou_threshold", "score_threshold")
        ),
        f"indexes the limits with [0] ({_SOURCE}op_non_max_suppression.py "
        "get_thresholds_from_inputs): a 0-D max_output_boxes_per_class, iou_threshold or "
        "score_threshold (the schema calls them scalars) raises 'too many indices for "
        "array'; ONNX Runtime, TVM and onnx2torch take 0-D and 1-element 1-D alike",
    ),
    Limitation(
        "Optional",
        lambda n: True,
        f"wraps its input in a list ({_SOURCE}op_optional.py: return ([x],)): "
        "OptionalGetElement then returns the tensor with an extra leading axis of 1, and an "
        "empty Optional becomes [None], which OptionalHasElement reports as holding a value "
        "(ONNX Runtime runs both as the schema says)",
    ),
)


def _gather_elements_narrower(n: NodeView) -> bool:
    """The reference's own test, raw axis and all: shape[:axis] + shape[axis + 1:] of
    indices and data must agree (with axis = -1 the second slice is the whole shape)."""
    data, idx = n.inputs["data"], n.inputs["indices"]
    a = int(n.attr("axis", 0))  # type: ignore[call-overload]
    return idx[:a] + idx[a + 1 :] != data[:a] + data[a + 1 :]


def _unique_off_axis0(n: NodeView) -> bool:
    x = n.inputs["X"]
    axis = n.attr("axis")
    if axis is None:
        return len(x) > 1
    return int(axis) % len(x) != 0  # type: ignore[call-overload]


def _loop_fault(node: onnx.NodeProto) -> bool:
    """A Loop the reference evaluator runs wrong, at ``node`` or inside its subgraphs."""
    if node.op_type == "Loop":
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        if len(node.input) < 2 or not node.input[1]:
            return True
        carried = len(node.input) - 2
        if body is not None and any(
            len(o.type.tensor_type.shape.dim) != 1 for o in body.output[1 + carried :]
        ):
            return True
    return any(
        _loop_fault(x)
        for a in node.attribute
        if a.type == onnx.AttributeProto.GRAPH
        for x in a.g.node
    )


def _loop_fault_in(n: NodeView) -> bool:
    """``_loop_fault`` for a node seen by the audit (its inputs by formal name, its
    subgraphs as attributes)."""
    if n.op == "Loop":
        body = n.attr("body")
        if "cond" not in n.inputs:
            return True
        carried = sum(1 for k in n.inputs if k.startswith("v_initial"))
        if isinstance(body, onnx.GraphProto) and any(
            len(o.type.tensor_type.shape.dim) != 1 for o in body.output[1 + carried :]
        ):
            return True
    return any(
        _loop_fault(x) for g in n.attrs.values() if isinstance(g, onnx.GraphProto) for x in g.node
    )


_SCAN_LISTS = ("scan_input_axes", "scan_input_directions", "scan_output_axes")


def _scan_fault(op: str, attrs: dict[str, object], subs: list[onnx.GraphProto]) -> bool:
    """A Scan with a nonzero axis or direction, here or in a subgraph."""
    if op == "Scan" and any(
        any(int(v) != 0 for v in attrs.get(k) or ())  # type: ignore[attr-defined]
        for k in (*_SCAN_LISTS, "scan_output_directions")
    ):
        return True
    return any(
        _scan_fault(
            x.op_type,
            {a.name: list(a.ints) for a in x.attribute if a.type == onnx.AttributeProto.INTS},
            [a.g for a in x.attribute if a.type == onnx.AttributeProto.GRAPH],
        )
        for g in subs
        for x in g.node
    )


def _scan_fault_in(n: NodeView) -> bool:
    subs = [g for g in n.attrs.values() if isinstance(g, onnx.GraphProto)]
    return _scan_fault(n.op, n.attrs, subs)


def reference_limits(model: onnx.ModelProto) -> list[Limitation]:
    """The entries of ``REFERENCE_LIMITS`` that apply to a node of ``model`` (a body's
    node included: the evaluator runs If branches and Loop and Scan bodies too)."""
    return [
        lim
        for n in node_views(model, bodies=True)
        for lim in REFERENCE_LIMITS
        if lim.op == n.op and _applies(lim, n)
    ]


def _applies(lim: Limitation, n: NodeView) -> bool:
    try:
        return bool(lim.applies(n))
    except (KeyError, IndexError):  # an input whose shape a body does not declare
        return False
