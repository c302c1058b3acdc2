"""Validity gates for generated models: checker, strict shape inference, an ORT run.

``onnx.checker`` alone misses malformed models (onnx #3642, #4705), so a model counts
as valid only when shape inference in strict mode agrees with every shape the spec
declared and ONNX Runtime runs it to outputs of exactly those shapes and types. Above
the opsets ONNX Runtime runs (ORT_MAX_OPSET) the ONNX reference evaluator takes its place.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, shape_inference

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.corpus.node_views import subgraphs
from onnxfuzz.generate.corpus.reference_limits import reference_limits
from onnxfuzz.generate.lang.config import ORT_MAX_OPSET
from onnxfuzz.generate.lang.spec import op_info


class KnownFault(Exception):
    """The ONNX reference evaluator, the only runtime for the model's opset, is known to
    be wrong on it (an ``audit.REFERENCE_LIMITS`` entry applies): no outputs to trust."""


@dataclass
class Validity:
    problems: list[str] = field(default_factory=list)
    outputs: dict[str, np.ndarray] | None = None
    finite: bool = True
    # Set where the static checks passed but no runtime can check the outputs (a
    # KnownFault above ORT_MAX_OPSET): why. ``outputs`` is then None.
    unchecked: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def _tensor_part(tp: onnx.TypeProto) -> tuple[str, onnx.TypeProto.Tensor]:
    """A value's kind ("", "seq ", "opt ", "opt seq ") and its tensor (element) type."""
    kind = ""
    while True:
        which = tp.WhichOneof("value")
        if which == "sequence_type":
            kind, tp = kind + "seq ", tp.sequence_type.elem_type
        elif which == "optional_type":
            kind, tp = kind + "opt ", tp.optional_type.elem_type
        else:
            return kind, tp.tensor_type


def _declared(model: onnx.ModelProto) -> dict[str, tuple[int | str, tuple[int, ...] | None]]:
    """name -> (element type, shape); shape None where inference left it unknown. A
    sequence's or optional's element type is prefixed with its kind ("seq 1")."""
    out: dict[str, tuple[int | str, tuple[int, ...] | None]] = {}
    for vi in list(model.graph.value_info) + list(model.graph.output):
        kind, tt = _tensor_part(vi.type)
        shape = (
            tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim)
            if tt.HasField("shape")
            else None
        )
        out[vi.name] = (f"{kind}{tt.elem_type}" if kind else tt.elem_type, shape)
    return out


def _uninferred(model: onnx.ModelProto, node: onnx.NodeProto) -> list[str]:
    """The outputs of ``node`` ONNX's (non-strict) inference gives no type, with the node
    alone in a model whose inputs have their declared types."""
    g = model.graph
    known = {vi.name: vi for vi in list(g.input) + list(g.value_info)}
    inits = {t.name: t for t in g.initializer}
    inputs = [known[n] for n in dict.fromkeys(node.input) if n and n not in inits and n in known]
    alone = onnx.helper.make_graph(
        [node],
        "alone",
        inputs,
        [
            onnx.helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
            for o in node.output
            if o
        ],
        initializer=[inits[n] for n in dict.fromkeys(node.input) if n in inits],
    )
    m = onnx.helper.make_model(alone, opset_imports=model.opset_import, ir_version=model.ir_version)
    try:
        inferred = shape_inference.infer_shapes(m, strict_mode=False)
    except Exception:  # noqa: BLE001 - the strict pass reports it
        return []
    return [o.name for o in inferred.graph.output if not o.type.tensor_type.elem_type]


def check_static(model: onnx.ModelProto) -> list[str]:
    """Checker (full) + strict shape inference, compared against declared shapes."""
    problems = []
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as e:  # noqa: BLE001 - the checker raises several types
        problems.append(f"checker: {e}")
        return problems
    opset = model_opset(model)
    producer = {t: n.op_type for n in model.graph.node for t in n.output}
    declared = {vi.name: vi for vi in model.graph.value_info}
    # ONNX has no schema of other domains' ops (inferred com.microsoft ops): like a
    # function body it infers nothing through them; ONNX Runtime checks those shapes.
    foreign = {t for n in model.graph.node if n.domain not in ("", "ai.onnx") for t in n.output}

    def opaque(name: str) -> bool:
        """ONNX infers nothing through some function bodies (GroupNormalization-21): the
        ONNX Runtime run checks those shapes, and inference continues from the spec's."""
        if name in foreign:
            return True
        info = op_info(producer[name], opset) if name in producer else None
        return info is not None and info.has_function

    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.value_info[:]
    for o in bare.graph.output:
        o.type.tensor_type.ClearField("shape")
    # Where ONNX infers nothing through a function body, the spec's shapes are given as
    # hints, so the strict pass can go on downstream. Each such node is asked on its own:
    # a whole-model pass hands the null type on, and some ops' inference crashes the
    # process on it (onnx 1.23: GroupNormalization-21 on doubles, then Reshape, EyeLike).
    hints = [
        name
        for node in model.graph.node
        if node.output and opaque(node.output[0])
        for name in _uninferred(model, node)
        if name in declared
    ]
    bare.graph.value_info.extend(declared[n] for n in hints)
    try:
        inferred = shape_inference.infer_shapes(bare, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001
        problems.append(f"shape inference: {e}")
        return problems
    got = _declared(inferred)
    for name, (et, shape) in _declared(model).items():
        if name in hints:
            continue
        if name not in got:
            if not opaque(name):
                problems.append(f"shape inference: no type for {name}")
            continue
        get, gshape = got[name]
        # A dim inference leaves unknown (-1: data-dependent, e.g. after Range) does not
        # disagree; a known dim or the rank that differs does.
        differs = (
            gshape is not None
            and shape is not None
            and (
                len(gshape) != len(shape)
                or any(g != -1 and d != -1 and g != d for g, d in zip(gshape, shape, strict=True))
            )
        )
        if get != et or (differs and not opaque(name)):
            # a sequence's or optional's type has no shape (None): said as "?"
            problems.append(
                f"shape inference: {name} is {dt.NAMES.get(get, get)}"
                f"{list(gshape) if gshape is not None else '?'}, "
                f"spec says {dt.NAMES.get(et, et)}{list(shape) if shape is not None else '?'}"
            )
    return problems


def ort_session(model: onnx.ModelProto | bytes):
    """An ONNX Runtime CPU session, graph optimizations off, one thread."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    # fatal only: ORT logs some valid models' shape-propagation noise at ERROR level (a real
    # failure is an exception), which broke `generate`'s progress bar
    opts.log_severity_level = 4
    opts.intra_op_num_threads = 1
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def model_opset(model: onnx.ModelProto) -> int:
    """The model's ai.onnx opset (0 if it imports none)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def run_reference(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The corpus's reference outputs: ONNX Runtime CPU, graph optimizations off, where it
    runs the model's opset (<= ORT_MAX_OPSET); the ONNX reference evaluator above it."""
    if model_opset(model) > ORT_MAX_OPSET:
        known = reference_limits(model)
        if known:
            raise KnownFault(
                f"the ONNX reference evaluator is known to be wrong on {known[0].op} here: "
                f"{known[0].reason}"
            )
        return _run_evaluator(model, inputs)
    sess = ort_session(model)
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs), strict=True))


def _run_evaluator(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    names = [o.name for o in model.graph.output]
    # Its numpy kernels warn where they overflow or divide by zero: the outputs are judged.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outs = ReferenceEvaluator(model).run(None, dict(inputs))
    return dict(zip(names, outs, strict=True))


# Ops whose output jumps at a boundary of their inputs' values: in float16, which side of
# it a value falls on depends on its rounding to float16.
_NUMPY_STEPS = {
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,  # half to even, as ONNX's
    "Sign": np.sign,
}
STEP_OPS = frozenset(_NUMPY_STEPS)


def _ops_in(g: onnx.GraphProto) -> set[str]:
    """The op types of ``g`` and of every subgraph in it."""
    return {n.op_type for n in g.node}.union(*(_ops_in(sub) for sub in subgraphs(g)))


def half_step_doubt(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    outs: dict[str, np.ndarray],
    tolerance: tuple[float, float],
) -> str | None:
    """Why ONNX Runtime's outputs of a float16 model with a comparison (or Floor, Ceil,
    Round, Sign) cannot be a corpus's expected ones, or None: ONNX Runtime keeps float16
    intermediates in float32 across the casts it inserts, even with every optimization off
    (onnxruntime#8787), so such an op can see a value the model rounds to float16 on the
    other side of its boundary, and its output flips (an audit found 12 such cases in
    1,500, their booleans wrong). The reason where such a node of the graph flips
    (``flipped_steps``), or where the ONNX reference evaluator, which rounds as the model
    says, runs the model (no documented fault of its applies) and an output differs
    beyond ``tolerance`` (atol, rtol; booleans and integers exactly)."""
    if model_opset(model) > ORT_MAX_OPSET or not STEP_OPS & _ops_in(model.graph):
        return None
    flipped = flipped_steps(model, inputs)
    if flipped:
        return (
            f"ONNX Runtime's {', '.join(flipped)} differs from the same op on the float16 "
            "values ONNX Runtime gives its inputs (it kept them in float32 across its casts, "
            "onnxruntime#8787): no expected outputs"
        )
    if reference_limits(model):
        return None
    try:
        theirs = _run_evaluator(model, inputs)
    except Exception:  # noqa: BLE001 - it cannot run the model: no second opinion
        return None
    for name, want in outs.items():
        other = theirs.get(name)
        if other is None:
            continue
        a, b = np.asarray(want), np.asarray(other)
        if a.shape != b.shape:
            same = False
        elif a.dtype.kind in "fc":
            close = np.isclose(a.astype(np.float64), b.astype(np.float64), *tolerance[::-1], True)
            same = bool(close.all())
        else:
            same = bool((a == b).all())
        if not same:
            return (
                f"ONNX Runtime and the ONNX reference evaluator disagree on output {name} of "
                "this float16 model with a comparison or rounding step (ONNX Runtime keeps "
                "float16 intermediates in float32 across its casts, onnxruntime#8787): no "
                "expected outputs"
            )
    return None




def flipped_steps(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[str]:
    """The float16 comparisons and rounding steps of ``model``'s graph whose ONNX Runtime
    result (graph optimizations off, their inputs and outputs made graph outputs) is not
    numpy's on the float16 inputs ONNX Runtime gives them: it compared values it kept in
    float32 (onnxruntime#8787), which no other input of the model would show. Needs the
    tensors declared (the generator declares every one)."""
    nodes = [n for n in model.graph.node if n.op_type in _NUMPY_STEPS]
    infos = {vi.name: vi for vi in model.graph.value_info}
    names = [t for n in nodes for t in (*n.input, *n.output) if t in infos]
    if not names:
        return []
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    have = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(infos[t] for t in dict.fromkeys(names) if t not in have)
    try:
        sess = ort_session(exposed)
        outs = [o.name for o in sess.get_outputs()]
        seen = {**inputs, **dict(zip(outs, sess.run(outs, inputs), strict=True))}
    except Exception:  # noqa: BLE001 - the model exposed does not run: no evidence either way
        return []
    seen |= {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    flipped = []
    for n in nodes:
        args = [seen.get(t) for t in n.input]
        got = seen.get(n.output[0])
        if got is None or any(a is None or a.dtype != np.float16 for a in args):
            continue
        want = _NUMPY_STEPS[n.op_type](*args)
        if want.shape != got.shape or not np.array_equal(want, got, equal_nan=True):
            flipped.append(f"{n.op_type} ({n.name})")
    return flipped


def all_finite(outputs: dict[str, np.ndarray]) -> bool:
    bf16 = dt.np_dtype(dt.BFLOAT16)
    return all(
        np.isfinite(v.astype(np.float64)).all()
        for v in outputs.values()
        if v.dtype.kind == "f" or v.dtype == bf16
    )


def validate(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Validity:
    """All gates; on success ``outputs`` holds the reference outputs (``run_reference``:
    ONNX Runtime's, the ONNX reference evaluator's above ORT_MAX_OPSET, where a model it
    is known to get wrong passes on the static checks alone: ``unchecked`` says why)."""
    v = Validity(problems=check_static(model))
    if v.problems:
        return v
    who = "onnxruntime" if model_opset(model) <= ORT_MAX_OPSET else "onnx-reference"
    try:
        outs = run_reference(model, inputs)
    except KnownFault as e:
        v.unchecked = str(e)
        return v
    except Exception as e:  # noqa: BLE001 - ORT raises its own exception types
        v.problems.append(f"{who}: {e}")
        return v
    for o in model.graph.output:
        tt = o.type.tensor_type
        want = (tt.elem_type, tuple(d.dim_value for d in tt.shape.dim))
        arr = outs[o.name]
        got_shape = tuple(arr.shape)
        got_et = helper.np_dtype_to_tensor_dtype(arr.dtype)
        if (got_et, got_shape) != want:
            v.problems.append(
                f"{who}: {o.name} is {dt.NAMES.get(got_et, got_et)}{list(got_shape)}, "
                f"spec says {dt.NAMES.get(want[0], want[0])}{list(want[1])}"
            )
    v.outputs = outs
    v.finite = all_finite(outs)
    return v
