"""ONNX Runtime adapters: CPU (``ort``, with the graph optimization level as an option, so
optimized vs unoptimized ORT is itself a differential pair) and CUDA (``ort-cuda``).

Optimization feedback (the ``optimizations`` hook): which graph transformers modified the
model, read from the session's own log ("GraphTransformer X modified: 1", INFO level,
``core/optimizer/graph_transformer.cc``), and which rewrite rules of the rule-based
transformers fired. Rules are not logged one by one (``rule_based_graph_transformer.cc``
logs nothing per rule): a rule counts as fired when its transformer modified the graph and
it is the only rule registered for an op type the model holds; among several such
candidates, by halving: the candidates split in two, one half left enabled (the other
disabled) in an extra session, and the halves that still modify the graph split again, a
half whose sibling did not modify it taken as modifying without a session of its own (one
fired rule among k candidates costs about log2(k) sessions). Only when the
transformer-level log says a rule-based transformer modified the graph, and the hook asks;
the answer is kept per model (a model compiled again, as confirmation and reduction do,
costs no session).

``feedback=new`` (the default) makes the log only for the tests a campaign asks for
(``want_feedback``; ``onnxfuzz.run.feedback_policy`` decides which): formatting it costs
25-50 % of a small model's session creation. There, a model whose candidate rules all
fired on earlier models of the process gets no attribution sessions (nothing new to name).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

_LEVELS = ("none", "basic", "extended", "layout", "all")
FEEDBACK_POLICIES = ("new", "all", "1", "0")  # the ``feedback`` option (1: all, as before)
# (a model of a newer IR version than this ORT loads, like onnx 1.23's default IR 14 on
# ORT 1.31: a limit ORT states, not a crash to report)
_UNSUPPORTED = re.compile(
    r"NOT_IMPLEMENTED|Could not find an implementation|not supported"
    r"|Unsupported model IR version",
    re.IGNORECASE,
)
# A run-time failure names the node type it ran ("while running MatMulIntegerToFloat node")
_RUNNING = re.compile(r"while running (\w+) node")
# One pass over the log: every transformer that ran, and whether it modified the graph.
_TRANSFORMER_LINE = re.compile(r"GraphTransformer (\S+) modified: ([01])\b")
# A line of ORT's own log below FATAL (what the feedback turns on; an ERROR line comes
# coloured, its colour reset on a line of its own): taken off stderr again after the
# session is made, so a test's stderr holds what it held with the log off.
# (one substitution over the whole text drops them: no loop over lines in Python)
_LOG_LINES = re.compile(
    r"^(?:\x1b\[[0-9;]*m)?(?:\S+ \S+ \[[IVWE]:onnxruntime:[^\n]*|[ \t\r\f\v]*)(?:\n|\Z)", re.M
)
_RULE_TRANSFORMER = re.compile(r"Level\d_RuleBasedTransformer")
# What NoopElimination (noop_elimination.cc: x + 0, x - 0, x * 1, x / 1) needs: an Add,
# Sub, Mul or Div operand that is a constant of zeros or of ones (found by ``_op_types``;
# most models hold those ops, few such a constant: no attribution session for it).
NOOP_OPERAND = "Add/Sub/Mul/Div by a constant 0 or 1"
# UnsqueezeElimination (unsqueeze_elimination.cc) folds an Unsqueeze of a constant;
# DivMulFusion (div_mul_fusion.cc) rewrites Div(1, x) -> Mul, its dividend a constant 1.
UNSQUEEZE_CONSTANT = "Unsqueeze of a constant"
ONE_OVER_MUL = "Div of a constant 1 -> Mul"
# GeluFusion and LayerNormFusion fuse into ONNX's Gelu / LayerNormalization at level 1 from
# opset 20 / 17 (where ONNX has the op) and into the contrib op at level 2 below it
# (gelu_fusion.cc, layer_norm_fusion.cc): a model's opset decides which of the twins may
# fire (found by ``_op_types``; `--opset 16,21` runs both).
ONNX_GELU, CONTRIB_GELU = "opset >= 20", "opset < 20"
ONNX_LAYERNORM, CONTRIB_LAYERNORM = "opset >= 17", "opset < 17"
# The rewrite rules of ORT 1.31's rule-based transformers (graph_transformer_utils.cc,
# GenerateRewriteRules) by name (RewriteRule's name, what disabled_optimizers takes), each
# with what its SatisfyCondition needs at least: an op type (its TargetOpTypes()) or an
# edge producer -> consumer (Relu -> Clip for FuseReluClip), read from the rule's source.
RULES: dict[str, tuple[str | tuple[str, str], ...]] = {
    "EliminateIdentity": ("Identity",),
    "EliminateSlice": ("Slice",),
    "UnsqueezeElimination": (UNSQUEEZE_CONSTANT,),
    "EliminateDropout": ("Dropout",),
    "ExpandElimination": ("Expand",),
    "CastElimination": ("Cast",),
    "PreShapeNodeElimination": (("Cast", "Shape"),),
    "NoopElimination": (NOOP_OPERAND,),
    "DivMulFusion": (ONE_OVER_MUL,),
    "FuseReluClip": (("Relu", "Clip"),),
    "GemmSumFusion": (("Gemm", "Sum"),),
    "GemmTransposeFusion": (("Transpose", "Gemm"), ("Gemm", "Transpose")),
    "NotWhereFusion": (("Not", "Where"),),
    "ConvAddFusion": (("Conv", "Add"),),
    "ConvMulFusion": (("Conv", "Mul"),),
    "ConvBNFusion": (("Conv", "BatchNormalization"),),
    "PadFusion": (("Pad", "Conv"), ("Pad", "AveragePool"), ("Pad", "MaxPool")),
    "MatMul_BatchNormalization_Fusion": (
        ("MatMul", "BatchNormalization"),
        ("Reshape", "BatchNormalization"),
    ),
    "ClipQuantRewrite": (("Clip", "QuantizeLinear"),),
    "ReluQuantRewrite": (("Relu", "QuantizeLinear"),),
}

# What a campaign's feedback policy (``feedback=new``, ``onnxfuzz.run.feedback_policy``)
# looks for in a model to ask for feedback while the optimizer has not fired yet: the
# transformers that fire on the CPU at opset 21 (those seen in campaigns; the others
# cannot fire here, so they would be sought for ever), each with alternatives: an op type,
# an edge producer -> consumer, or a frozenset of them all needed (the pattern's edges as
# the fusion's source and the optimizer blocks of ``generate.build.blocks`` have them).
# Generic ones (ConstantFolding, CommonSubexpressionElimination, the float16 casts) have
# none: they fire in the first tests, and on the policy's sample. Plus RULES.
_Need = str | tuple[str, str] | frozenset[str | tuple[str, str]]


def _all(*edges: tuple[str, str]) -> frozenset[str | tuple[str, str]]:
    return frozenset(edges)


ACTIVATIONS = ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "Clip", "HardSigmoid")
TRANSFORMER_NEEDS: dict[str, tuple[_Need, ...]] = {
    "MatMulScaleFusion": tuple(
        e for op in ("Mul", "Div") for e in (("MatMul", op), (op, "MatMul"))
    ),
    "ConvActivationFusion": tuple(("Conv", a) for a in ACTIVATIONS),
    "GemmActivationFusion": tuple(("Gemm", a) for a in ACTIVATIONS),
    "ConvAddActivationFusion": tuple(_all(("Conv", "Add"), ("Add", a)) for a in ACTIVATIONS),
    "TransposeOptimizer": ("Transpose",),
    "TransposeOptimizer_CPUExecutionProvider": ("Transpose",),
    "MatmulTransposeFusion": (("Transpose", "MatMul"), ("MatMul", "Transpose")),
    "GeluFusionL1": (
        _all(("Div", "Erf"), ("Erf", "Add"), ONNX_GELU),
        _all(("Mul", "Erf"), ("Erf", "Add"), ONNX_GELU),
    ),
    "GeluFusionL2": (
        _all(("Div", "Erf"), ("Erf", "Add"), CONTRIB_GELU),
        _all(("Mul", "Erf"), ("Erf", "Add"), CONTRIB_GELU),
    ),
    "BiasGeluFusion": (("Add", "Gelu"), _all(("Add", "Div"), ("Div", "Erf"), ("Erf", "Add"))),
    "FastGeluFusion": (_all(("Mul", "Tanh"), ("Tanh", "Add")),),
    "QuickGeluFusion": (_all(("Mul", "Sigmoid"), ("Sigmoid", "Mul")),),
    "LayerNormFusionL1": (
        _all(
            ("ReduceMean", "Sub"),
            ("Sub", "Pow"),
            ("Pow", "ReduceMean"),
            ("Sqrt", "Div"),
            ONNX_LAYERNORM,
        ),
    ),
    "LayerNormFusionL2": (
        _all(
            ("ReduceMean", "Sub"),
            ("Sub", "Pow"),
            ("Pow", "ReduceMean"),
            ("Sqrt", "Div"),
            CONTRIB_LAYERNORM,
        ),
    ),
    "SimplifiedLayerNormFusion": (
        _all(("Pow", "ReduceMean"), ("ReduceMean", "Add"), ("Add", "Sqrt"), ("Sqrt", "Div")),
    ),
    "SkipLayerNormFusion": (("Add", "LayerNormalization"),),
    "BiasSkipLayerNormFusion": (
        _all(("MatMul", "Add"), ("Add", "Add"), ("Add", "LayerNormalization")),
    ),
    "MatMulAddFusion": (("MatMul", "Add"),),
    "ReshapeFusion": (("Reshape", "Reshape"), ("Shape", "Gather")),
    "GatherSliceToSplitFusion": (_all(("Reshape", "Gather"), ("Reshape", "Slice")),),
    "SliceConcatToSpaceToDepthFusion": (("Slice", "Concat"),),
    "NchwcTransformer": ("Conv",),
    "NhwcTransformer": ("Conv",),
    "EnsureUniqueDQForNodeUnit": ("DequantizeLinear",),
    "QDQPropagationTransformer": (
        ("DequantizeLinear", "Transpose"),
        ("DequantizeLinear", "Reshape"),
        ("DequantizeLinear", "Slice"),
    ),
    "QDQSelectorActionTransformer": ("DequantizeLinear",),
    "QDQS8ToU8Transformer": (("QuantizeLinear", "DequantizeLinear"),),
    "DoubleQDQPairsRemover": (
        _all(("QuantizeLinear", "DequantizeLinear"), ("DequantizeLinear", "QuantizeLinear")),
    ),
    "QDQFinalCleanupTransformer": (("DequantizeLinear", "QuantizeLinear"),),
    "WhereDummyDq": (("DequantizeLinear", "Where"),),
    "WeightBiasQuantization": (_all(("DequantizeLinear", "Conv"), ("Conv", "QuantizeLinear")),),
    "DynamicQuantizeMatMulFusion": (("DynamicQuantizeLinear", "MatMulInteger"),),
    "MatMulIntegerToFloatFusion": (("MatMulInteger", "Cast"),),
}

# The rules registered at level 2 only (GemmTransposeFusion is at both levels).
LEVEL2_RULES = {"ClipQuantRewrite", "ReluQuantRewrite"}
RULES_KEPT = 4096  # models whose rules fired are remembered (then forgotten all at once)


@dataclass
class _Compiled:
    """The session made last, and what its log said (the hook reads it)."""

    session: Any
    transformers: tuple[str, ...] = ()
    ran: tuple[str, ...] = ()  # every transformer that ran, modifying or not
    rules: tuple[str, ...] = ()
    data: bytes = field(default=b"", repr=False)


@contextlib.contextmanager
def _native_stderr() -> Iterator[list[str]]:
    """What native code writes to file descriptor 2 inside the block, as one text (appended
    to the yielded list), with ORT's INFO/VERBOSE lines taken off fd 2 again. In a worker
    fd 2 is a file the parent reads a crash's evidence from: the log goes there and is cut
    off after (a crash meanwhile keeps it, with the frames); elsewhere (a terminal, a pipe)
    fd 2 points at a temporary file for the block."""
    sys.stderr.flush()
    got: list[str] = []
    try:  # a regular file open for reading too (the worker's), written at its end
        st = os.fstat(2)
        readable = fcntl.fcntl(2, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR
        at_end = os.lseek(2, 0, os.SEEK_CUR) == st.st_size
        in_place = stat.S_ISREG(st.st_mode) and readable and at_end
    except OSError:
        in_place = False
    if in_place:
        start = st.st_size
        try:
            yield got
        finally:
            end = os.fstat(2).st_size
            text = os.pread(2, max(0, end - start), start).decode(errors="replace")
            got.append(text)
            kept = _LOG_LINES.sub("", text)
            os.ftruncate(2, start)
            os.lseek(2, start, os.SEEK_SET)
            if kept:
                os.write(2, kept.encode())
        return
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield got
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode(errors="replace")
            got.append(text)
            kept = _LOG_LINES.sub("", text)
            if kept:
                sys.stderr.write(kept)


class OrtBackend:
    """ONNX Runtime on the CPU. Options: ``opt`` = none|basic|extended|layout|all
    (graph optimization level, default all), ``threads`` (intra-op, default 1)."""

    name = "ort"
    provider = "CPUExecutionProvider"

    def __init__(
        self,
        opt: str = "all",
        threads: str = "1",
        feedback: str = "new",
        disable: str = "",
        isolate: str = "0",
    ) -> None:
        """``feedback`` new|all|0 (1 = all): report the transformers and rules that fired
        (the ``optimizations`` hook). ``new`` (default): only on the tests a campaign asks
        it for (``want_feedback``; ``onnxfuzz.run.feedback_policy``: a model that could
        show something new, and a sample), since ORT's INFO log, the only channel that
        names them, makes session creation far slower; ``all``: on every test; ``0``: none
        (no hook: the campaign runs unguided by it). ``disable``: transformers or rules to
        switch off, joined by ``+`` (ORT's ``disabled_optimizers``), e.g.
        ``disable=FuseReluClip+GeluFusionL1``.
        ``isolate`` 1|0: the per-transformer oracle: for each transformer or rule that fired
        on a model, run it again with that one disabled and raise ``OptimizerChangedResult``
        naming it when an output moves past the float tolerances (one more session and
        run per fired optimizer: slow)."""
        if opt not in _LEVELS:
            raise TypeError(f"opt must be one of {', '.join(_LEVELS)}, got {opt!r}")
        if feedback not in FEEDBACK_POLICIES:
            raise TypeError(f"feedback must be one of new, all, 0, got {feedback!r}")
        if isolate not in ("0", "1"):
            raise TypeError(f"isolate must be 0 or 1, got {isolate!r}")
        if isolate == "1" and feedback == "0":
            raise TypeError("isolate=1 needs feedback=all (it disables what fired)")
        self.opt = opt
        self.threads = int(threads)
        self.feedback = feedback != "0"
        # feedback=new: the next compile's log only when the campaign asks (isolate needs
        # the log of every model: it is all there).
        self.on_request = feedback == "new" and isolate == "0"
        self._wanted = True  # what the campaign asked for the next compile
        if not self.feedback:  # no hook at all: "gives no feedback", not "nothing fired"
            self.optimizations = None  # type: ignore[method-assign]
        self.disabled = tuple(filter(None, disable.split("+")))
        self.isolate = isolate == "1"
        self._opts: Any = None  # SessionOptions, made once
        self._quiet: Any = None  # the same with ORT's log off (a test without feedback)
        self._last: _Compiled | None = None
        self._run_opts: Any = None
        self._basic: Any = None  # SessionOptions at the basic level (rule attribution)
        self._rules_seen: dict[bytes, tuple[str, ...]] = {}  # model digest -> rules fired
        self._rules_known: set[str] = set()  # rules attributed by halving in this process
        self._compiling: bytes | None = None  # the model of the compile under way
        self._compiled: bytes | None = None  # the model of the last session made
        self._unoptimized: Any = None  # SessionOptions with every optimization off

    def available(self) -> str | None:
        import onnxruntime as ort

        if self.provider not in ort.get_available_providers():
            return f"onnxruntime {ort.__version__} has no {self.provider}"
        return None

    def version(self) -> str:
        import onnxruntime as ort

        return ort.__version__

    def supported_opsets(self) -> tuple[int, int]:
        return (7, 26)  # ONNX Runtime 1.31

    def want_feedback(self, on: bool) -> None:
        """Whether the campaign wants the next compile's feedback (``feedback=new``:
        without it the session is made with ORT's log off, as with ``feedback=0``)."""
        self._wanted = on

    def _options(self, log: bool = True) -> Any:
        import onnxruntime as ort

        levels = {
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "layout": getattr(
                ort.GraphOptimizationLevel,
                "ORT_ENABLE_LAYOUT",
                ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            ),
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        opts = ort.SessionOptions()
        opts.graph_optimization_level = levels[self.opt]
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        # INFO carries "GraphTransformer X modified: 1" (the feedback); else fatal only.
        opts.log_severity_level = 1 if self.feedback and log else 4
        return opts

    def compile(self, model: onnx.ModelProto) -> Any:
        return self.compile_bytes(model.SerializeToString())

    def compile_bytes(self, data: bytes) -> Any:
        """``compile`` of a serialized model (the sandbox's fast path: no parse)."""
        if self._opts is None:
            self._opts = self._options()
            self._quiet = self._options(log=False)
        self._last = None
        self._compiling = self._compiled = data  # ``is_unsupported`` reads them
        if not self.feedback or (self.on_request and not self._wanted):
            session = self._session(data, self.disabled, self._quiet)
            self._compiling = None
            return session
        with _native_stderr() as log:
            session = self._session(data, self.disabled)
        self._compiling = None
        fired, ran = _transformers(log[0])
        self._last = _Compiled(session, fired, ran, data=data)
        return session

    def _session(self, data: bytes, disabled: tuple[str, ...], opts: Any = None) -> Any:
        import onnxruntime as ort

        kwargs = {"disabled_optimizers": list(disabled)} if disabled else {}
        return ort.InferenceSession(
            data, opts or self._opts, providers=self._providers(), **kwargs
        )

    def _basic_options(self) -> Any:
        import onnxruntime as ort

        if self._basic is None:
            self._basic = self._options()
            if self.opt != "none":
                self._basic.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        return self._basic

    def optimizations(self, executable: Any) -> dict[str, list[str]] | None:
        """The transformers that modified the model ``executable`` was made from, and the
        rewrite rules that fired (None: feedback is off, or another session)."""
        last = self._last
        if last is None or last.session is not executable:
            return None
        if any(_RULE_TRANSFORMER.fullmatch(t) for t in last.transformers) and not last.rules:
            key = hashlib.blake2b(last.data, digest_size=16).digest()
            rules = self._rules_seen.get(key)
            if rules is None:
                if len(self._rules_seen) >= RULES_KEPT:
                    self._rules_seen.clear()
                rules = self._rules_seen[key] = self._rules_fired(last)
            last.rules = rules
        rules = [r for r in RULES if r not in self.disabled]
        return {
            "transformer": list(last.transformers),
            "rule": list(last.rules),
            "known:transformer": list(last.ran),
            "known:rule": rules if self.opt != "none" else [],
        }

    def _rules_fired(self, last: _Compiled) -> tuple[str, ...]:
        """The rewrite rules that fired (see the module's docstring)."""
        present = _op_types(last.data)
        candidates = [
            r for r, needs in RULES.items() if r not in self.disabled and present & set(needs)
        ]
        if len(candidates) <= 1:
            return tuple(candidates)
        if self.on_request and self._rules_known.issuperset(candidates):
            # feedback=new: every candidate fired on an earlier model of this process, so
            # whichever fired now is nothing new (the guide pays for new coverage only):
            # no attribution sessions; the rules' test counts miss these models.
            return ()
        # Level-1 rules fire in the basic level's sessions too, which skip the costlier
        # level-2 and layout transformers.
        opts = self._opts if set(candidates) & LEVEL2_RULES else self._basic_options()

        def modifies(enabled: list[str]) -> bool:
            """Does a rule-based transformer modify the graph with only ``enabled`` of
            the candidates on?"""
            off = tuple(c for c in candidates if c not in enabled)
            with _native_stderr() as log:
                try:
                    self._session(last.data, self.disabled + off, opts)
                except Exception:  # noqa: BLE001 - it compiled with them all: not these rules'
                    return False
            return any(_RULE_TRANSFORMER.fullmatch(t) for t in _transformers(log[0])[0])

        def fired(group: list[str]) -> list[str]:
            """The rules of ``group`` that fire (``group`` known to modify the graph)."""
            if len(group) == 1:
                return group
            half = len(group) // 2
            first, second = group[:half], group[half:]
            first_fires = modifies(first)
            if not first_fires:  # the group modifies it: the second half does
                return fired(second)
            return fired(first) + (fired(second) if modifies(second) else [])

        found = set(fired(candidates))
        self._rules_known |= found
        return tuple(r for r in candidates if r in found)  # in RULES' order, as before

    def _providers(self) -> list[Any]:
        return [self.provider]

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [o.name for o in executable.get_outputs()]
        outs = dict(zip(names, executable.run(names, inputs, self._run_options()), strict=True))
        if self.isolate and self._last is not None and self._last.session is executable:
            self._isolate(self._last, names, inputs, outs)
        return outs

    def _run_options(self) -> Any:
        import onnxruntime as ort

        if self._run_opts is None:
            self._run_opts = ort.RunOptions()
            self._run_opts.log_severity_level = 4  # the session's INFO log is for compile
        return self._run_opts

    def _isolate(
        self,
        last: _Compiled,
        names: list[str],
        inputs: dict[str, np.ndarray],
        outs: dict[str, np.ndarray],
    ) -> None:
        """The per-transformer oracle: each optimizer that fired, disabled alone."""
        fired = self.optimizations(last.session) or {}
        for name in fired.get("transformer", []) + fired.get("rule", []):
            if _RULE_TRANSFORMER.fullmatch(name):
                continue  # its rules are isolated one by one
            try:
                with _native_stderr():
                    session = self._session(last.data, (*self.disabled, name))
                without = dict(
                    zip(names, session.run(names, inputs, self._run_options()), strict=True)
                )
            except Exception:  # noqa: BLE001 - a model ORT cannot run without it says nothing
                continue
            for out, got in outs.items():
                why = _differs(np.asarray(got), np.asarray(without[out]))
                if why:
                    raise OptimizerChangedResult(
                        f"ORT optimizer {name} changes output {out}: {why} "
                        f"(with it vs disabled_optimizers=[{name!r}])"
                    )

    def is_unsupported(self, error: BaseException) -> bool:
        """ORT's "not supported" words; but not where the model, optimizations off, loads:
        then the optimizer made the node ORT has no kernel for (a QDQ fusion's
        QuantizeLinear of a type no kernel takes, a MatMulIntegerToFloat with per-channel
        scales it does not support), a bug of ORT's, not a limit of the model's."""
        said = str(error)
        if not _UNSUPPORTED.search(said):
            return False
        data, self._compiling = self._compiling, None
        if self.opt == "none" or "IR version" in said:
            return True
        if data is None:  # at run time: a node the model does not hold is the optimizer's
            running = _RUNNING.search(said)
            return not (running and self._compiled and running[1] not in _op_types(self._compiled))
        import onnxruntime as ort

        if self._unoptimized is None:
            self._unoptimized = self._options(log=False)
            self._unoptimized.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            with _native_stderr():
                ort.InferenceSession(data, self._unoptimized, providers=self._providers())
        except Exception:  # noqa: BLE001 - unsupported as it stands, optimized or not
            return True
        return False


def _op_types(data: bytes) -> set[str]:
    """The op types of a serialized model, its subgraphs' too."""
    found: set[str] = set()
    graphs = [onnx.load_from_string(data).graph]
    while graphs:
        g = graphs.pop()
        for n in g.node:
            found.add(n.op_type)
            graphs += [a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
            graphs += [x for a in n.attribute for x in a.graphs]
    return found


class OptimizerChangedResult(Exception):  # noqa: N818 - what the oracle saw, by name
    """An output of ORT with an optimizer differs from ORT without it (``isolate=1``)."""


# The float tolerances of the default oracle (judge.oracle: float32 1e-3 / 1e-2, float16
# and bfloat16 5e-2): an optimizer that moves an output less is rounding, not a bug.
_TOLERANCE = {np.dtype(np.float16): (5e-2, 5e-2)}


def _differs(got: np.ndarray, want: np.ndarray) -> str:
    """Why ``got`` (with an optimizer) is not ``want`` (without it); "" when it is."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.shape} {got.dtype} vs {want.shape} {want.dtype}"
    if got.dtype.kind not in "fc":
        bad = got != want
        return f"{int(bad.sum())}/{got.size} elements differ" if bad.any() else ""
    atol, rtol = _TOLERANCE.get(got.dtype, (1e-3, 1e-2))
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):
        ok = (np.abs(g - w) <= atol + rtol * np.abs(w)) | (np.isnan(g) & np.isnan(w)) | (g == w)
    if ok.all():
        return ""
    i = int(np.argmax(~ok.ravel()))
    return (
        f"{int((~ok).sum())}/{got.size} elements outside atol={atol:g} rtol={rtol:g}, "
        f"e.g. {g.ravel()[i]:.6g} vs {w.ravel()[i]:.6g}"
    )


def _transformers(log: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the transformers that modified the graph, every transformer that ran)."""
    ran: set[str] = set()
    modified: set[str] = set()
    for name, flag in _TRANSFORMER_LINE.findall(log):
        ran.add(name)
        if flag == "1":
            modified.add(name)
    return tuple(sorted(modified)), tuple(sorted(ran))


def feedback_needs() -> dict[str, tuple[_Need, ...]]:
    """Per transformer or rule, what a model must hold for it to fire (any one of them; a
    frozenset: all of it): the feedback policy's table (``feedback_tokens`` says what a
    model holds)."""
    return {**TRANSFORMER_NEEDS, **RULES}


def feedback_tokens(data: bytes) -> set[str | tuple[str, str]]:
    """What a serialized model holds, in ``feedback_needs``' terms."""
    return _op_types(data)


def _op_types(data: bytes) -> set[str | tuple[str, str]]:
    """The op types of a serialized model and its edges producer -> consumer by op type,
    its subgraphs' included; the tokens of the rules whose constants the model holds
    (an initializer or a Constant's output): ``NOOP_OPERAND`` (an Add, Sub, Mul or Div
    operand of all zeros or all ones), ``UNSQUEEZE_CONSTANT``, ``ONE_OVER_MUL``; and its
    opset's side of ``ONNX_GELU``/``CONTRIB_GELU`` and the LayerNorm pair."""
    model = onnx.load_from_string(data)
    found: set[str | tuple[str, str]] = set()
    graphs = [model.graph]
    consts: dict[str, onnx.TensorProto] = {}
    arithmetic: set[str] = set()  # what Add, Sub, Mul and Div take
    unsqueezed: set[str] = set()  # what Unsqueeze takes
    dividends: set[str] = set()  # the dividends of Divs that feed a Mul
    while graphs:
        graph = graphs.pop()
        consts.update((t.name, t) for t in graph.initializer)
        made = {out: node.op_type for node in graph.node for out in node.output}
        into_mul = {i for node in graph.node if node.op_type == "Mul" for i in node.input}
        for node in graph.node:
            found.add(node.op_type)
            found.update((made[i], node.op_type) for i in node.input if i in made)
            if node.op_type in ("Add", "Sub", "Mul", "Div"):
                arithmetic.update(node.input)
            if node.op_type == "Unsqueeze" and node.input:
                unsqueezed.add(node.input[0])
            if node.op_type == "Div" and node.input and set(node.output) & into_mul:
                dividends.add(node.input[0])
            for attr in node.attribute:
                if node.op_type == "Constant" and attr.name == "value":
                    consts[node.output[0]] = attr.t
                graphs.extend([attr.g] if attr.HasField("g") else list(attr.graphs))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    found.add(ONNX_GELU if opset >= 20 else CONTRIB_GELU)
    found.add(ONNX_LAYERNORM if opset >= 17 else CONTRIB_LAYERNORM)
    if unsqueezed & consts.keys():
        found.add(UNSQUEEZE_CONSTANT)
    if _all_of(consts, dividends, (1,)):
        found.add(ONE_OVER_MUL)
    if _all_of(consts, arithmetic, (0, 1)):
        found.add(NOOP_OPERAND)
    return found


def _all_of(consts: dict[str, onnx.TensorProto], names: set[str], values: tuple) -> bool:
    """Is one of ``names`` a constant whose every element is one of ``values`` (all the
    same one)? An unreadable constant (external data) may be."""
    for name in names & consts.keys():
        try:
            array = numpy_helper.to_array(consts[name])
        except Exception:  # noqa: BLE001 - unreadable: assume it may be
            return True
        if array.size and any((array == v).all() for v in values):
            return True
    return False


class OrtCudaBackend(OrtBackend):
    """ONNX Runtime with the CUDA execution provider (needs the ``cuda`` extra, which puts
    onnxruntime-gpu in place of onnxruntime, and a GPU)."""

    name = "ort-cuda"
    provider = "CUDAExecutionProvider"

    def __init__(
        self,
        opt: str = "all",
        threads: str = "1",
        tf32: str = "0",
        feedback: str = "new",
        disable: str = "",
        isolate: str = "0",
    ) -> None:
        """``tf32``: 0 (default) computes float32 MatMul, Gemm and Conv in float32. ORT's
        CUDA provider uses TF32 (10-bit mantissa) on Ampere and later by default, which put
        a 1-node Gemm 1.4 % off ORT-CPU on an H100: a precision mode, not a bug, like
        OpenVINO's bfloat16 on AMX CPUs. 1: TF32, as ORT does by default."""
        super().__init__(opt, threads, feedback, disable, isolate)
        if tf32 not in ("0", "1"):
            raise TypeError(f"tf32 must be one of 0, 1, got {tf32!r}")
        self.tf32 = tf32

    def _providers(self) -> list[Any]:
        return [(self.provider, {"use_tf32": self.tf32})]

    def available(self) -> str | None:
        why = super().available()
        if why:
            return why
        # "Available" only says the build has the provider: when its CUDA or cuDNN libraries
        # do not load, a session silently runs on the CPU, and a campaign would compare
        # ORT-CPU with itself under the name ort-cuda. Start one and ask what it got.
        import onnxruntime as ort
        from onnx import TensorProto, helper

        graph = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "probe",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
        model.ir_version = 8
        try:
            with _native_stderr():  # the feedback's session log is not this check's
                got = ort.InferenceSession(
                    model.SerializeToString(), self._options(), providers=self._providers()
                ).get_providers()
        except Exception as e:  # noqa: BLE001 - any failure means: not usable here
            return f"onnxruntime could not start a {self.provider} session: {e}"
        if self.provider not in got:
            return (
                f"onnxruntime fell back to {', '.join(got)}: its {self.provider} did not "
                "load (are the CUDA and cuDNN libraries it was built for on the library path?)"
            )
        return None
