"""``tvm``: Apache TVM 0.27 through Relax (there is no Relay any more).

ONNX -> ``relax.frontend.onnx.from_onnx`` (initializers folded in as constants) ->
``tvm.compile`` -> ``relax.VirtualMachine``. Options: ``target`` = llvm (default) | cuda,
``opt_level`` = 0..4 (the ``PassContext`` opt level, default 3), ``pipeline`` = build
(default: ``tvm.compile``'s, which on a CPU legalizes each op into its own kernel) | fuse
(the CPU backend's pipeline: LegalizeOps -> AnnotateTIROpPattern -> FoldConstant ->
FuseOps -> FuseTIR, so elementwise chains and injective tails fuse into one kernel, as
TVM's GPU pipelines always do), ``feedback`` = 1 (default) | 0.

Optimization feedback (the ``optimizations`` hook), from a ``tvm.ir.instrument`` pass
instrument: the passes that changed the module (a pass that returns the module it was
given changed nothing), and the fused kernels FuseTIR made, by pattern (the function's
name, ``fused_matmul_add_tir_sigmoid_multiply``, without the numbers that make names
unique: ``fused_cast1_tir_exp`` is ``fused_cast_tir_exp``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

# One runtime thread (before tvm starts its pool): a fuzzer runs a worker per backend, and
# TVM's pool threads spin after each parallel loop, taking the cores the other backends and
# the campaign itself need. TVM_NUM_THREADS set by the user wins.
os.environ.setdefault("TVM_NUM_THREADS", "1")
import tvm  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax.frontend.onnx import from_onnx  # noqa: E402

_TARGETS = ("llvm", "cuda")
_PIPELINES = ("build", "fuse")
# The numbers TVM appends to make a name unique: the fused function's (``fused_add1``) and
# each PrimFunc's inside it, since LegalizeOps names one op's PrimFuncs at other shapes or
# types ``cast``, ``cast1``, ... (``fused_cast1_tir_exp``: Cast -> Exp, as
# ``fused_cast_tir_exp`` is). Kept, a pattern counted once per shape: 5-10 % of the
# distinct patterns of a 300-test campaign. Op names end in a letter (``conv2d``).
_NUMBERED = re.compile(r"(?<=[a-z])\d+(?=_|$)")
_WRAPPERS = {"sequential", "_pipeline"}  # pass containers: their passes are named on their own


@tvm.ir.instrument.pass_instrument
class _Fired:
    """Records, for one compile, the passes that changed the module and the fused kernels."""

    def __init__(self) -> None:
        self.passes: set[str] = set()
        self.ran: set[str] = set()
        self.fused: set[str] = set()
        self._before: list[Any] = []

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self._before.append(mod)

    def run_after_pass(self, mod: Any, info: Any) -> None:
        before = self._before.pop() if self._before else None
        if info.name not in _WRAPPERS:
            self.ran.add(info.name)
        if before is not None and not mod.same_as(before) and info.name not in _WRAPPERS:
            self.passes.add(info.name)
        if info.name == "FuseTIR":
            self.fused.update(
                _NUMBERED.sub("", gv.name_hint)
                for gv in mod.get_global_vars()
                if gv.name_hint.startswith("fused_")
            )

# The Relax importer's ways of saying "no converter": OpNotImplemented ("The following
# operators are not supported for frontend ONNX: X"), NotImplementedError ("opset version N
# of X not implemented", "Ndim > 5 not supported for convolution."), and ValueErrors such as
# "QuantizeLinear blocked quantization is not supported yet." / "Unsupported PRelu slope
# shape". Lowering reports missing TOPI/legalization support the same way; Relax ops that
# refuse a dtype ONNX allows count as unsupported too (a dtype limit, not a wrong answer).
_UNSUPPORTED = re.compile(
    r"not supported|not implemented|unsupported|OpNotImplemented|"
    r"No (?:legalization|schedule|implementation|converter)|is not yet supported|"
    # dtype limits of Relax ops that ONNX allows, e.g. "relax.log ... requires the input
    # tensor to have float dtype", "power only applies to float", "layer_norm: only support
    # float32 and float16 for now"
    r"requires the input tensor to have \w+ dtype|only applies to float|only supports? .*for now|"
    # the importer's stated limits of a form: "Only constant axes currently supported"
    # (an axes or depth input that is not a constant), "Only resize1d/resize2d/resize3d
    # are supported.", "Currently only 1D/2D/3D/ pooling is supported.", "LRN only
    # supports 3D or 4D input": a form it does not take, not a wrong answer or a crash
    r"\bonly supports?\b|\bonly\b[^.\n]{0,80}?\b(?:is |are )?(?:currently )?supported\b|"
    r"\bsupported only\b",
    re.IGNORECASE,
)


@dataclass
class _Executable:
    vm: Any
    input_names: list[str]  # graph inputs the compiled main() takes, in its parameter order
    output_names: list[str]
    output_dtypes: list[np.dtype]
    fired: _Fired | None = None


def _np_dtype(elem_type: int) -> np.dtype:
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return np.dtype(np.float32)


def _to_numpy(value: Any, dtype: np.dtype) -> np.ndarray:
    """A VM result: a Tensor, or a shape (an ONNX Shape output the importer folded into a
    ShapeExpr comes back as a tvm Shape), or a PrimValue (a Python scalar)."""
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    if isinstance(value, int | float | bool):
        return np.asarray(value, dtype=dtype)
    return np.asarray([int(d) for d in value], dtype=dtype)


class TvmBackend:
    """TVM Relax. Options: ``target`` (llvm|cuda), ``opt_level`` (0..4, default 3)."""

    name = "tvm"

    def __init__(
        self,
        target: str = "llvm",
        opt_level: str = "3",
        pipeline: str = "build",
        feedback: str = "1",
    ) -> None:
        if target not in _TARGETS:
            raise TypeError(f"target must be one of {', '.join(_TARGETS)}, got {target!r}")
        level = int(opt_level)
        if not 0 <= level <= 4:
            raise TypeError(f"opt_level must be 0..4, got {opt_level!r}")
        if pipeline not in _PIPELINES:
            raise TypeError(f"pipeline must be one of {', '.join(_PIPELINES)}, got {pipeline!r}")
        if feedback not in ("0", "1"):
            raise TypeError(f"feedback must be 0 or 1, got {feedback!r}")
        self.target = target
        self.opt_level = level
        self.pipeline = pipeline
        self.feedback = feedback == "1"

    def _device(self) -> Any:
        return tvm.cuda(0) if self.target == "cuda" else tvm.cpu(0)

    def available(self) -> str | None:
        if not tvm.runtime.enabled(self.target):
            return f"tvm {tvm.__version__} was built without the {self.target} runtime"
        if self.target == "cuda" and not self._device().exist:
            return "tvm:target=cuda needs a CUDA device, and there is none"
        return None

    def version(self) -> str:
        return tvm.__version__

    def supported_opsets(self) -> tuple[int, int]:
        # The importer applies no bound of its own: it picks each op's newest converter at or
        # below the model's opset, and falls back to the oldest one above it. Its converters
        # start at 13 for most ops (Reduce*/Split/Squeeze/Unsqueeze take axes as inputs from
        # 13), so older opsets would be silently misread. The newest converters are opset 23;
        # the op versions of 24..26 that onnxfuzz generates (Cast, Reshape, Pad, TopK, ...)
        # only widen type lists, so the v23 converters read them right (checked: same
        # verdicts on the same seeds at 23, 24 and 26). Opset 27 changes Range only (float16
        # and a stash_type for it; LinearAttention and CausalConvWithState have no converter:
        # unsupported): 110 reference-vs-tvm tests at 27 agreed. Not 28: the SpaceToDepth
        # converter ignores SpaceToDepth-28's mode, so CRD would be silently misread.
        return (13, 27)

    def _import(self, model: onnx.ModelProto) -> Any:
        printed = io.StringIO()
        # Renamed inputs, checker complaints: noise, the importer carries on. It also prints
        # "Error converting operator X, with inputs: ..." before re-raising: keep that off
        # the fuzzer's stdout and on the exception instead.
        with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
            warnings.simplefilter("ignore")
            try:
                return from_onnx(model, keep_params_in_input=False)
            except Exception as e:
                if printed.getvalue().strip():
                    e.add_note(printed.getvalue().strip())
                raise

    def frontend(self, model: onnx.ModelProto) -> None:
        """The import alone (``from_onnx``): a few milliseconds where building takes a
        tenth of a second to a second, so a reduction checks its candidates of a
        converter's failure with it."""
        self._import(model)

    def compile(self, model: onnx.ModelProto) -> Any:
        mod = self._import(model)
        target = tvm.target.Target(self.target)
        # tvm.compile's default Relax pipeline for the target (for cuda it already applies
        # the dlight GPU schedules that bind threads).
        fired = _Fired() if self.feedback else None
        relax_pipeline: Any = "default"
        if self.pipeline == "fuse":
            relax_pipeline = relax.get_default_pipeline(target)
        with target, tvm.transform.PassContext(
            opt_level=self.opt_level, instruments=[fired] if fired is not None else []
        ):
            ex = tvm.compile(mod, target=target, relax_pipeline=relax_pipeline)
        vm = relax.VirtualMachine(ex, self._device())
        initializers = {i.name for i in model.graph.initializer}
        return _Executable(
            vm=vm,
            input_names=[i.name for i in model.graph.input if i.name not in initializers],
            output_names=[o.name for o in model.graph.output],
            output_dtypes=[_np_dtype(o.type.tensor_type.elem_type) for o in model.graph.output],
            fired=fired,
        )

    def optimizations(self, executable: Any) -> dict[str, list[str]] | None:
        """The passes that changed the module and the fused kernels' patterns (None:
        feedback is off)."""
        fired = getattr(executable, "fired", None)
        if fired is None:
            return None
        return {
            "pass": sorted(fired.passes),
            "fused": sorted(fired.fused),
            "known:pass": sorted(fired.ran),
        }

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        dev = self._device()
        # np.asarray, not np.ascontiguousarray: the latter turns a 0-d input into 1-d.
        args = [
            tvm.runtime.tensor(np.asarray(inputs[n], order="C"), dev)
            for n in executable.input_names
        ]
        result = executable.vm["main"](*args)
        values = [result] if len(executable.output_names) == 1 else list(result)
        outs = [_to_numpy(v, dt) for v, dt in zip(values, executable.output_dtypes, strict=True)]
        return dict(zip(executable.output_names, outs, strict=True))

    def is_unsupported(self, error: BaseException) -> bool:
        if isinstance(error, tvm.error.OpNotImplemented | NotImplementedError):
            return True
        return bool(_UNSUPPORTED.search(f"{type(error).__name__}: {error}"))
