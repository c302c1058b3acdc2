"""What a maintainer reads first: the model as short ONNX text (tensors named x, t1, y,
float16/bfloat16 values as numbers, not bits) and one precise sentence for what went wrong.

Used by ``store.issue``. The renaming is for reading only: ``model.onnx`` keeps its names
(the signature a bundle is matched by may quote them).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx

from onnxfuzz.judge.oracle import non_finite_words

# onnx.printer writes a float16/bfloat16 tensor's values as their bit patterns (uint16)
_HALF = re.compile(r"\b(b?float16)(\[[^\]]*\](?: [\w.]+ =)?\s*)\{([\d,\s]*)\}")


def _decode(kind: str, bits: str) -> str:
    raw = np.array([int(b) for b in bits.split(",") if b.strip()], dtype=np.uint16)
    if kind == "float16":
        values = raw.view(np.float16).astype(np.float32)
    else:  # bfloat16: the upper half of a float32
        values = (raw.astype(np.uint32) << 16).view(np.float32)
    return ", ".join(f"{v:.6g}" for v in values)


def decode_halves(text: str) -> str:
    """``float16[2] w = {14336,15616}`` -> ``float16[2] w = {0.5, 1.25}``."""
    return _HALF.sub(lambda m: f"{m[1]}{m[2]}{{{_decode(m[1], m[3])}}}", text)


def _has_subgraphs(model: onnx.ModelProto) -> bool:
    return any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
        for n in model.graph.node
        for a in n.attribute
    )


def short_names(model: onnx.ModelProto) -> dict[str, str]:
    """Graph inputs x (x1, x2, ...), weights w1.., intermediate tensors t1.., outputs y
    (y1, ...). Empty for a model with subgraphs (their outer-scope references would
    need the same renaming)."""
    if _has_subgraphs(model):
        return {}
    g = model.graph
    weights = {i.name for i in g.initializer}
    inputs = [i.name for i in g.input if i.name not in weights]
    outputs = [o.name for o in g.output]
    names: dict[str, str] = {}
    for k, n in enumerate(inputs):
        names[n] = "x" if len(inputs) == 1 else f"x{k + 1}"
    for k, n in enumerate(outputs):
        names.setdefault(n, "y" if len(outputs) == 1 else f"y{k + 1}")
    for k, n in enumerate(i.name for i in g.initializer):
        names.setdefault(n, f"w{k + 1}")
    count = 0
    for node in g.node:
        for n in node.output:
            if n and n not in names:
                count += 1
                names[n] = f"t{count}"
    return names


def renamed(model: onnx.ModelProto, names: dict[str, str]) -> onnx.ModelProto:
    """A copy of ``model`` with its tensors renamed by ``names``."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    for vi in [*g.input, *g.output, *g.value_info]:
        vi.name = names.get(vi.name, vi.name)
    for t in g.initializer:
        t.name = names.get(t.name, t.name)
    for node in g.node:
        node.input[:] = [names.get(n, n) for n in node.input]
        node.output[:] = [names.get(n, n) for n in node.output]
    return out


def model_text(model: onnx.ModelProto) -> tuple[str, dict[str, str]]:
    """The model as ONNX text, tensors renamed and halves decoded; and the renaming."""
    names = short_names(model)
    bare = renamed(model, names)
    del bare.metadata_props[:]  # onnxfuzz's own notes: noise in a report
    return decode_halves(onnx.printer.to_text(bare)), names


def what_went_wrong(meta: dict[str, Any]) -> str:
    """The finding in the backend's own terms: the call that failed, a process crash, a
    dtype-only or shape difference, or wrong values."""
    verdict, stage, kind = meta["verdict"], meta.get("stage") or "run", meta.get("kind", "")
    target = meta["backend"].split(":")[0]
    compile_call = {
        "ort": "at session creation (InferenceSession)",
        "ort-cuda": "at session creation (InferenceSession)",
        "tvm": "while importing or compiling (from_onnx / tvm.compile)",
        "torch": "while converting (onnx2torch.convert)",
        "torch-compile": "while converting or compiling (onnx2torch / torch.compile)",
    }.get(target, "while compiling")
    where = {
        "compile": compile_call,
        "rerun": "when the same compiled model runs a second time",
    }.get(stage, "while running")
    culprit = meta.get("culprit") or {}
    if target == "tvm" and stage == "compile" and culprit.get("stage"):
        where = {
            "import": "in the ONNX importer (from_onnx)",
            "codegen": "in LLVM code generation (tvm.compile, after the pass pipeline)",
        }.get(culprit["stage"], f"in a {culprit['stage']} (tvm.compile)")
    signature = meta.get("signature", "")
    if verdict == "crash":
        if "killed by signal" in signature or "worker exited" in signature:
            return f"crashes the process {where}"
        return f"raises an exception {where}"
    if verdict == "timeout":
        return f"hangs {where}"
    if verdict == "mismatch":
        if kind == "input":
            return "writes into the caller's input arrays while running"
        wrong = {
            "dtype": "returns an output of the wrong type",
            "shape": "returns an output of the wrong shape",
            "missing": "leaves out an output",
        }.get(kind, "returns wrong results")
        gives = str(culprit.get("gives") or "")
        if kind == "shape" and gives.startswith("a tuple of "):
            # onnx2torch's module gave a node of one output as a tuple (Split with one
            # output): read as an array, its shape gains a leading axis ([1, 1] for [1]);
            # "the wrong shape" sent its readers looking at the values' shape (an audit)
            wrong = (
                f"returns {gives.split(' where ')[0]} tensor(s) for an output that is one "
                "tensor (read as an array, its shape gains a leading axis)"
            )
        if stage == "rerun" and meta.get("reproducibility") == "intermittent":
            # seen on a second run, but not on every fresh run: that only second runs fail
            # is not shown (a flaky kernel wrong on any run at random read as a second-run
            # bug)
            return f"{wrong} now and then (seen on a second run of the same compiled model)"
        return f"{wrong} {where}" if stage == "rerun" else wrong
    return f"fails ({verdict})"


def value_errors(actual: np.ndarray, expected: np.ndarray) -> str:
    """Max abs and rel error and, for floats, the largest distance in ulps; relative errors
    and ulps only where the expected value is not 0 (a difference from 0 has no relative
    size: an Add off by 1 where 0 was expected read "max rel error 4.49e+307, up to 7.14e+44
    ulps", more ulps than float32 has values)."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape or a.size == 0:
        return ""
    e64 = e.astype(np.float64)
    a64 = a.astype(np.float64)
    with np.errstate(all="ignore"):  # inf - inf, x / 0: judged by ``finite`` below
        diff = np.abs(a64 - e64)
        rel = diff / np.abs(e64)
    finite = np.isfinite(diff)
    # a NaN or an infinity on one side differs too, by no amount: counted, in words (a
    # NaN-for-0 bug read "0 of 4800 elements differ" beside a log of 3600)
    same = (np.isnan(a64) & np.isnan(e64)) | (np.isinf(e64) & (a64 == e64))
    odd = ~finite & ~same
    differ = (finite & (diff > 0)) | odd
    if not differ.any():
        return f"0 of {a.size} elements differ" if finite.any() or same.any() else ""
    moved = finite & (diff > 0)
    scaled = moved & (e64 != 0)
    parts = []
    if moved.any():
        # no relative error where all that differs was expected 0 (it read "max rel error 0")
        worst_rel = f", max rel error {rel[scaled].max():.6g}" if scaled.any() else ""
        parts.append(f"max abs error {diff[moved].max():.6g}{worst_rel}")
    parts.append(f"{int(differ.sum())} of {a.size} elements differ")
    text = ", ".join(parts)
    notes = []
    at_zero = int((moved & (e64 == 0)).sum())
    if at_zero:
        notes.append(f"{at_zero} where the expected value is 0: no relative error there")
    if odd.any():
        notes += non_finite_words(e64, a64, odd)
    if notes:
        text += f" ({'; '.join(notes)})"
    if e.dtype.kind == "f" and a.dtype == e.dtype and scaled.any():
        spacing = np.abs(np.spacing(e.astype(e.dtype)).astype(np.float64))
        with np.errstate(all="ignore"):
            ulps = diff[scaled] / spacing[scaled]
        text += f", up to {ulps.max():.3g} ulps"
    return text


# What a single-node model computes, written with numpy's own functions: a second source of
# expected values beside the ONNX reference evaluator, for ops this simple only.
_NUMPY_UNARY = {
    "Abs": np.abs, "Neg": np.negative, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt,
    "Reciprocal": np.reciprocal, "Floor": np.floor, "Ceil": np.ceil, "Round": np.round,
    "Sign": np.sign, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin,
    "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh,
    "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh, "Tanh": np.tanh,
    "Not": np.logical_not, "IsNaN": np.isnan, "BitwiseNot": np.invert,
    "Relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "Identity": lambda x: x.copy(),
}  # fmt: skip
_NUMPY_BINARY = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Equal": np.equal,
    "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
    "Xor": np.logical_xor, "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor, "Max": np.maximum, "Min": np.minimum,
}  # fmt: skip


def numpy_expected(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray]
) -> list[np.ndarray] | None:
    """The outputs of a single-node model of a simple op (elementwise unary or binary,
    float Div, Clip, Cast) computed with numpy; None for anything else."""
    from onnx import numpy_helper

    if len(model.graph.node) != 1 or model.graph.node[0].domain not in ("", "ai.onnx"):
        return None
    node = model.graph.node[0]
    known = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    known.update(inputs)
    if any(n and n not in known for n in node.input) or len(node.output) != 1:
        return None
    args = [known[n] if n else None for n in node.input]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    op = node.op_type
    with np.errstate(all="ignore"):
        if op in _NUMPY_UNARY and len(args) == 1 and not attrs:
            y = _NUMPY_UNARY[op](args[0])
        elif op in _NUMPY_BINARY and len(args) == 2 and not attrs:
            y = _NUMPY_BINARY[op](args[0], args[1])
        elif op == "Div" and len(args) == 2 and args[0].dtype.kind == "f":
            y = np.divide(args[0], args[1])
        elif op == "Clip" and len(args) >= 1 and not attrs:
            x, lo, hi = (args + [None, None])[:3]
            y = x if lo is None else np.maximum(x, lo.astype(x.dtype))
            y = y if hi is None else np.minimum(y, hi.astype(x.dtype))  # Min(max, Max(x, min))
        elif op == "Cast" and set(attrs) == {"to"}:
            y = args[0].astype(onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]))
        else:
            return None
    return [np.asarray(y)]


def doc_sentence(op: str, opset: int, kind: str) -> str:
    """The operator schema's own text (``onnx.defs``, quoted, never paraphrased) for the
    property a finding of ``kind`` violates: for "dtype" the type constraint the output
    shares with an input; for "values" the first sentence of the operator's doc; "" where
    the schema says nothing that fits."""
    try:
        schema = onnx.defs.get_schema(op, opset)
    except Exception:  # onnx.defs.SchemaError: an op of another domain, or unknown
        return ""
    where = f"`onnx.defs.get_schema({op!r}, {opset})` ({op}-{schema.since_version})"
    if kind == "dtype" and schema.outputs:
        out = schema.outputs[0]
        same = [i for i in schema.inputs if i.type_str == out.type_str]
        tc = next((c for c in schema.type_constraints if c.type_param_str == out.type_str), None)
        if same and tc is not None and tc.description:
            return (
                f"{where}: output `{out.name}` and input `{same[0].name}` are both of type "
                f'`{out.type_str}`: "{tc.description.strip()}"'
            )
        return ""
    if kind in ("values", "") and schema.doc:
        first = re.split(r"(?<=[.!?])\s", " ".join(schema.doc.split()), maxsplit=1)[0]
        return f'{where}: "{first}"'
    return ""
