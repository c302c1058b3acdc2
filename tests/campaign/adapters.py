"""Misbehaving and deliberately wrong adapters for the campaign tests.

Each wraps the real ONNX Runtime and misbehaves only when the model contains ``op``
(an option: ``tests/campaign/adapters.py:Segfault:op=Add``), so the campaign sees both
healthy and failing tests. Loaded by path, exactly as a user's adapter would be.
"""

from __future__ import annotations

import ctypes
import faulthandler
import hashlib
import os
import random
import time
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort


class _OrtWrapper:
    name = "wrapper"

    def __init__(self, op: str = "Add") -> None:
        self.op = op

    def version(self) -> str:
        return ort.__version__

    def supported_opsets(self) -> tuple[int, int]:
        return (7, 26)

    def _session(self, model: onnx.ModelProto) -> Any:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        opts.intra_op_num_threads = 1
        return ort.InferenceSession(
            model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
        )

    def triggered(self, model: onnx.ModelProto) -> bool:
        return any(n.op_type == self.op for n in model.graph.node)

    def compile(self, model: onnx.ModelProto) -> Any:
        return (self._session(model), self.triggered(model))

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        sess, _ = executable
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, inputs), strict=True))


class Segfault(_OrtWrapper):
    """Dereferences NULL while running a model with ``op``."""

    name = "segfault"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if executable[1]:
            ctypes.string_at(0)
        return super().run(executable, inputs)


class Abort(_OrtWrapper):
    """abort()s while compiling a model with ``op``."""

    name = "abort"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            os.abort()
        return super().compile(model)


class Hang(_OrtWrapper):
    """Never returns from compiling a model with ``op``."""

    name = "hang"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            while True:
                time.sleep(1)
        return super().compile(model)


class Stuck(_OrtWrapper):
    """Never returns from compiling any model (an adapter waiting on a lock it never gets),
    from the start: its support probe answers nothing."""

    name = "stuck"

    def compile(self, model: onnx.ModelProto) -> Any:
        while True:
            time.sleep(1)


class Leak(_OrtWrapper):
    """Allocates memory without bound while running a model with ``op``."""

    name = "leak"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if executable[1]:
            hoard = []
            while True:
                hoard.append(np.ones(64 * 2**20 // 8))  # 64 MB, touched
        return super().run(executable, inputs)


class Raise(_OrtWrapper):
    """Raises an internal error while compiling a model with ``op``."""

    name = "raise"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            raise RuntimeError(f"InternalError: lowering of {self.op} failed at node 0x7f3a")
        return super().compile(model)


class RaiseTyped(_OrtWrapper):
    """Raises while compiling a model with ``op``, naming its input's element type as torch
    does ("expected scalar type Half but found Float"): one bug, a signature per type."""

    name = "raise-typed"

    NAMES = {1: "Float", 10: "Half", 11: "Double", 16: "BFloat16", 6: "Int", 7: "Long"}

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            typed = onnx.shape_inference.infer_shapes(model).graph
            types = {
                vi.name: vi.type.tensor_type.elem_type
                for vi in [*typed.input, *typed.value_info, *typed.output]
            }
            node = next(n for n in model.graph.node if n.op_type == self.op)
            name = self.NAMES.get(types.get(node.input[0], 0), "Byte")
            raise RuntimeError(f"expected scalar type {name} but found Float")
        return super().compile(model)


class DeepRaise(_OrtWrapper):
    """Raises while compiling a model with ``op`` from ``depth`` calls down (a compiler's
    pass pipeline, ``_lower_pass`` and ``_run_pass`` calling each other), in ``_check_layout``."""

    name = "deep-raise"

    def __init__(self, op: str = "Add", depth: str = "60") -> None:
        super().__init__(op)
        self.depth = int(depth)

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            _lower_pass(self.depth)
        return super().compile(model)


def _lower_pass(depth: int) -> None:
    if depth > 0:
        _run_pass(depth - 1)  # two functions in turn: Python folds a frame repeated in a row
    else:
        _check_layout()


def _run_pass(depth: int) -> None:
    _lower_pass(depth)


def _check_layout() -> None:
    raise ValueError("layout check failed")


class MissingAttribute(_OrtWrapper):
    """Raises Python's AttributeError while compiling a model with ``op`` (a converter
    calling a method its class lacks)."""

    name = "missing-attribute"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            raise AttributeError("'FusedKernel' object has no attribute 'tile'")
        return super().compile(model)


class SwapOp(_OrtWrapper):
    """A planted miscompilation: every ``op`` node runs as ``to`` (GreaterOrEqual as
    LessOrEqual: a comparison wrong far from any tie)."""

    name = "swap-op"

    def __init__(self, op: str = "GreaterOrEqual", to: str = "LessOrEqual") -> None:
        super().__init__(op)
        self.to = to

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        for n in m.graph.node:
            if n.op_type == self.op:
                n.op_type = self.to
        return super().compile(m)


class RaiseNamingInput(Raise):
    """Raises like ``Raise`` for a model with ``op``, its message naming the shape of the
    model's first graph input, whichever node reads it (a compiler that prints the graph's
    signature): the reducer must keep a node before ``op`` where removing it changes that
    input's rank, the words of the crash."""

    name = "raise-naming-input"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            dims = model.graph.input[0].type.tensor_type.shape.dim if model.graph.input else []
            shape = [d.dim_value for d in dims]
            raise RuntimeError(f"InternalError: lowering of {self.op} failed; graph input {shape}")
        return super().compile(model)


class RaiseDynamic(Raise):
    """Raises like ``Raise`` for an ``op`` node in a model with a symbolic input dim only
    (a compiler's dynamic-shape path): the same model made static compiles."""

    name = "raise-dynamic"

    def triggered(self, model: onnx.ModelProto) -> bool:
        symbolic = any(
            not d.HasField("dim_value")
            for vi in model.graph.input
            for d in vi.type.tensor_type.shape.dim
        )
        return symbolic and super().triggered(model)


class RaiseNested(Raise):
    """Raises like ``Raise`` for an ``op`` node anywhere: in the graph or inside an If
    branch, a Loop or Scan body (a compiler whose control-flow lowering inlines bodies)."""

    name = "raise-nested"

    def triggered(self, model: onnx.ModelProto) -> bool:
        def has(g: onnx.GraphProto) -> bool:
            return any(
                n.op_type == self.op
                or any(has(a.g) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
                for n in g.node
            )

        return has(model.graph)


class RaiseInBody(Raise):
    """Raises like ``Raise`` for an ``op`` node inside an If branch, a Loop or Scan body
    only, needed by the body's outputs or not (TVM converts every body node, and its
    converters read outer constants differently there: MaxUnpool's output_shape)."""

    name = "raise-in-body"

    def triggered(self, model: onnx.ModelProto) -> bool:
        def has(g: onnx.GraphProto, inside: bool) -> bool:
            return any(
                (inside and n.op_type == self.op)
                or any(has(a.g, True) for a in n.attribute if a.type == onnx.AttributeProto.GRAPH)
                for n in g.node
            )

        return has(model.graph, False)


class SlowRaise(Raise):
    """Raises like ``Raise``, after ``delay`` seconds: each reduction try of its bug is slow,
    as it is with a compiler that takes seconds per model (TVM's cuda target)."""

    name = "slow-raise"

    def __init__(self, op: str = "Add", delay: str = "0.3") -> None:
        super().__init__(op)
        self.delay = float(delay)

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            time.sleep(self.delay)
        return super().compile(model)


class Unsupported(_OrtWrapper):
    """Says "not implemented" for ``op`` (missing support, not a bug)."""

    name = "unsupported"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            raise NotImplementedError(f"{self.op} is not implemented")
        return super().compile(model)


class UnsupportedInWords(_OrtWrapper):
    """A real crash worded like missing support: a RuntimeError whose text says
    "unsupported" for ``op``, with no ``is_unsupported`` of its own (audit 15: 439 tests of
    it counted as unsupported and nothing said)."""

    name = "unsupported-in-words"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            raise RuntimeError("kernel: unsupported broadcast")
        return super().compile(model)


class WrongOp(_OrtWrapper):
    """A planted miscompilation: every ``op`` node whose output is ``dtype`` (float32 unless
    told; "float": any float type) computes ``op`` + 0.5."""

    name = "wrong-op"
    SHIFT = 0.5  # what the planted bug adds

    def __init__(self, op: str = "Add", dtype: str = "float32") -> None:
        super().__init__(op)
        floats = (np.float32, np.float16, np.float64)
        self.dtype = np.dtype(np.float32 if dtype == "float" else dtype)
        self.elem_type = onnx.helper.np_dtype_to_tensor_dtype(self.dtype)
        self.elem_types = {
            onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t))
            for t in (floats if dtype == "float" else (self.dtype,))
        }

    def wrong_nodes(self, g: onnx.GraphProto) -> set[int]:
        """Positions in ``g.node`` of the nodes the planted bug computes wrong."""
        return {k for k, n in enumerate(g.node) if n.op_type == self.op}

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        g = m.graph
        wrong = self.wrong_nodes(g)
        typed = onnx.shape_inference.infer_shapes(m).graph  # a model may declare no types
        nodes = list(g.node)
        del g.node[:]
        producers_dtype = {
            vi.name: vi.type.tensor_type.elem_type
            for vi in [*g.value_info, *g.output, *typed.value_info]
        }
        for k, n in enumerate(nodes):
            out = n.output[0]
            elem = producers_dtype.get(out)
            if k in wrong and elem in self.elem_types:
                bad = f"{out}__planted"
                n.output[0] = bad
                half = f"{out}__half"
                shift = onnx.helper.tensor_dtype_to_np_dtype(elem).type(self.SHIFT)
                g.initializer.append(onnx.numpy_helper.from_array(shift, half))
                g.node.extend([n, onnx.helper.make_node("Add", [bad, half], [out])])
            else:
                g.node.append(n)
        return (self._session(m), False)


class UntransposedNonZero(_OrtWrapper):
    """A planted layout bug, onnx2torch's own: every NonZero gives its indices transposed,
    [N, rank] for ONNX's [rank, N] (a wrong shape alone; after a Slice that keeps the shape,
    wrong values)."""

    name = "untransposed-nonzero"

    def __init__(self) -> None:
        super().__init__("NonZero")

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        g = m.graph
        nodes = list(g.node)
        del g.node[:]
        for n in nodes:
            if n.op_type != self.op:
                g.node.append(n)
                continue
            out = n.output[0]
            n.output[0] = f"{out}__planted"
            g.node.extend([n, onnx.helper.make_node("Transpose", [n.output[0]], [out])])
        for vi in [*g.value_info, *g.output]:  # the shape ONNX declares is not the one given
            if vi.type.tensor_type.HasField("shape"):
                vi.type.tensor_type.ClearField("shape")
        return (self._session(m), self.triggered(model))


class Evaluated(_OrtWrapper):
    """Runs models on the ONNX reference evaluator: a backend that is right where ORT's own
    kernel is wrong (int64 Mod with fmod=1 goes through double), in place of a real one
    that would import torch in every process."""

    name = "evaluated"

    def compile(self, model: onnx.ModelProto) -> Any:
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model)

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = list(executable.output_names)
        return dict(zip(names, executable.run(None, inputs), strict=True))


class WrongInBody(_OrtWrapper):
    """A planted miscompilation that reaches into control flow: every ``op`` node, in the
    graph or in an If, Loop or Scan body, computes ``op`` + 0.5 (opset 15 and above)."""

    name = "wrong-in-body"

    def _plant(self, g: onnx.GraphProto) -> None:
        nodes = list(g.node)
        del g.node[:]
        for n in nodes:
            for a in n.attribute:
                if a.HasField("g"):
                    self._plant(a.g)
            if n.op_type != self.op:
                g.node.append(n)
                continue
            out = n.output[0]
            n.output[0] = f"{out}__planted"
            half = onnx.helper.make_node(
                "Constant",
                [],
                [f"{out}__half"],
                value=onnx.numpy_helper.from_array(np.array(0.5, np.float32)),
            )
            like = onnx.helper.make_node("CastLike", [half.output[0], n.output[0]], [f"{out}__h"])
            add = onnx.helper.make_node("Add", [n.output[0], like.output[0]], [out])
            g.node.extend([n, half, like, add])  # in the op's own element type

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        self._plant(m.graph)
        return (self._session(m), False)


class NanOp(WrongOp):
    """A planted miscompilation: every ``op`` node of ``dtype`` gives NaN everywhere."""

    name = "nan-op"
    SHIFT = float("nan")


class WrongOpAtRunTime(WrongOp):
    """WrongOp (``op`` + 0.5) where the op reads a value computed at run time: an ``op``
    whose inputs are all constants (initializers, or what nodes compute from them alone)
    is folded at compile time by a separate, right evaluator, as compilers' constant
    folders do."""

    name = "wrong-op-at-run-time"

    def wrong_nodes(self, g: onnx.GraphProto) -> set[int]:
        constant = {i.name for i in g.initializer} | {""}
        for n in g.node:
            if all(t in constant for t in n.input):
                constant.update(n.output)
        return {
            k
            for k, n in enumerate(g.node)
            if n.op_type == self.op and not all(t in constant for t in n.input)
        }


class GroupConv(WrongOp):
    """A planted bug that an attribute triggers (audit13's): a float Conv with group > 1
    computes Conv + 0.5; with group 1 it is right."""

    name = "group-conv"

    def __init__(self) -> None:
        super().__init__("Conv", "float")

    def wrong_nodes(self, g: onnx.GraphProto) -> set[int]:
        return {
            k
            for k, n in enumerate(g.node)
            if n.op_type == "Conv" and any(a.name == "group" and a.i > 1 for a in n.attribute)
        }


class BigReduce(WrongOp):
    """A planted bug that a size triggers (audit13's): a float ReduceSum or ReduceMean
    that reduces more than ``limit`` input elements into each output element computes its
    value + 0.5. Axes come from the ``axes`` attribute or a constant input; none: all."""

    name = "big-reduce"

    def __init__(self, limit: str = "64") -> None:
        super().__init__("ReduceSum", "float")
        self.limit = int(limit)
        self.opsets: list[onnx.OperatorSetIdProto] = []

    def compile(self, model: onnx.ModelProto) -> Any:
        self.opsets = list(model.opset_import)  # the shapes below are inferred at them
        return super().compile(model)

    def wrong_nodes(self, g: onnx.GraphProto) -> set[int]:
        m = onnx.helper.make_model(g, opset_imports=self.opsets)
        shapes = {
            vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
            for vi in [*g.input, *onnx.shape_inference.infer_shapes(m).graph.value_info]
        }
        consts = {i.name: onnx.numpy_helper.to_array(i) for i in g.initializer}
        out = set()
        for k, n in enumerate(g.node):
            if n.op_type not in ("ReduceSum", "ReduceMean") or n.input[0] not in shapes:
                continue
            shape = shapes[n.input[0]]
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            axes = list(attrs.get("axes", []))
            if len(n.input) > 1 and n.input[1]:
                axes = [int(a) for a in consts.get(n.input[1], np.zeros(0)).reshape(-1)]
            if not axes and attrs.get("noop_with_empty_axes", 0):
                continue
            reduced = {a % len(shape) for a in axes} if axes else set(range(len(shape)))
            if int(np.prod([shape[a] for a in reduced])) > self.limit:
                out.add(k)
        return out


class NoRun:
    """Does not follow the protocol: no run()."""

    name = "norun"

    def version(self) -> str:
        return "0"

    def supported_opsets(self) -> tuple[int, int]:
        return (7, 26)

    def compile(self, model: onnx.ModelProto) -> Any:
        return None


class PairCrash(_OrtWrapper):
    """Segfaults when a ``first`` node feeds a ``then`` node (a two-op pattern)."""

    name = "pair-crash"

    def __init__(self, first: str = "Mul", then: str = "Add") -> None:
        super().__init__(then)
        self.first = first

    def triggered(self, model: onnx.ModelProto) -> bool:
        made_by_first = {t for n in model.graph.node if n.op_type == self.first for t in n.output}
        return any(
            n.op_type == self.op and made_by_first.intersection(n.input) for n in model.graph.node
        )

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if executable[1]:
            ctypes.string_at(0)
        return super().run(executable, inputs)


class WrongFusion(_OrtWrapper):
    """A planted wrong fusion: a ``then`` node fed by a ``first`` node whose output nothing
    else sees (not a graph output: the pair a compiler fuses) computes ``then`` + 0.5, in
    ``dtype`` (float16 unless told). Exposing the intermediates hides it, as it hides a
    real fusion."""

    name = "wrong-fusion"

    def __init__(self, first: str = "Mul", then: str = "Add", dtype: str = "float16") -> None:
        super().__init__(then)
        self.first = first
        self.dtype = np.dtype(dtype)

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        g = m.graph
        exposed = {o.name for o in g.output}
        inner = {t for n in g.node if n.op_type == self.first for t in n.output} - exposed
        nodes = list(g.node)
        del g.node[:]
        for n in nodes:
            if n.op_type == self.op and inner.intersection(n.input):
                out = n.output[0]
                n.output[0] = f"{out}__fused"
                half = f"{out}__half"
                g.initializer.append(onnx.numpy_helper.from_array(self.dtype.type(0.5), half))
                g.node.extend([n, onnx.helper.make_node("Add", [n.output[0], half], [out])])
            else:
                g.node.append(n)
        return (self._session(m), False)


class PromoteInt32(_OrtWrapper):
    """A planted type bug: ``op`` nodes' int32 graph outputs come back as int64 (the mistake
    the ONNX reference evaluator and onnx2torch share on ReduceSumSquare)."""

    name = "promote-int32"

    def compile(self, model: onnx.ModelProto) -> Any:
        made_by_op = {t for n in model.graph.node if n.op_type == self.op for t in n.output}
        return (self._session(model), made_by_op)

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = super().run(executable, inputs)
        return {
            k: v.astype(np.int64) if k in executable[1] and v.dtype == np.int32 else v
            for k, v in outs.items()
        }


class WidensThenFails(_OrtWrapper):
    """A planted type bug and the crashes that follow it: ``op``'s float32 result comes back
    float64, as a graph output, and a node that reads it fails to compile on the operand
    types, naming itself (as TVM's type checker names the Div or Conv after a float32
    BatchNormalization in a float16 graph)."""

    name = "widens-then-fails"

    def compile(self, model: onnx.ModelProto) -> Any:
        g = onnx.shape_inference.infer_shapes(model).graph
        float32 = {
            vi.name
            for vi in (*g.value_info, *g.output)
            if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT
        }
        widened = {t for n in g.node if n.op_type == self.op for t in n.output if t in float32}
        for n in g.node:
            if widened & set(n.input):
                raise TypeError(
                    f"{n.op_type}: operands must have one element type, got float64 and float32"
                )
        return (self._session(model), widened)

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = super().run(executable, inputs)
        return {k: v.astype(np.float64) if k in executable[1] else v for k, v in outs.items()}


class HookNotCallable(_OrtWrapper):
    """``supports`` is an optional hook; here it is a string: refused at load time."""

    supports = "yes"


class NoisySegfault(Segfault):
    """Logs a different error line to stderr on every model without ``op`` (as a native
    library logging another test's problem would), and segfaults on models with it."""

    name = "noisy-segfault"

    def compile(self, model: onnx.ModelProto) -> Any:
        if not self.triggered(model):
            words = ("layout pass skipped", "fusion disabled", "constant folding failed")
            line = f"[E:npu] {words[len(model.graph.node) % 3]} in kernel cache\n"
            os.write(2, line.encode())
        return super().compile(model)


class PairHang(PairCrash):
    """Never returns from compiling a model where a ``first`` node feeds a ``then`` node."""

    name = "pair-hang"

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            while True:
                time.sleep(1)
        return super().compile(model)


class UnsupportedType(_OrtWrapper):
    """Says "not implemented" for ``op`` on ``dtype`` only (a missing kernel of one type)."""

    name = "unsupported-type"

    def __init__(self, op: str = "Add", dtype: str = "float32") -> None:
        super().__init__(op)
        self.dtype = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def triggered(self, model: onnx.ModelProto) -> bool:
        g = model.graph
        types = {vi.name: vi.type.tensor_type.elem_type for vi in [*g.value_info, *g.output]}
        return any(n.op_type == self.op and types.get(n.output[0]) == self.dtype for n in g.node)

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            raise NotImplementedError(f"{self.op} is not implemented for this type")
        return super().compile(model)


def _fuse_kernels() -> None:
    """Where ``SegfaultIn(where="fuse")`` dies: a NULL dereference (a real fault, so
    faulthandler sees the Python stack that led to it)."""
    ctypes.string_at(0)


def _pack_weights() -> None:
    """Where ``SegfaultIn(where="pack")`` dies: the same fault at another site."""
    ctypes.string_at(0)


class SegfaultIn(_OrtWrapper):
    """Dereferences NULL inside ``_fuse_kernels`` (``where=fuse``) or ``_pack_weights``
    (``where=pack``) while running a model with ``op``: one crash site per ``where``."""

    name = "segfault-in"

    def __init__(self, op: str = "Add", where: str = "fuse") -> None:
        super().__init__(op)
        self.crash = {"fuse": _fuse_kernels, "pack": _pack_weights}[where]

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if executable[1]:
            self.crash()
        return super().run(executable, inputs)


def _warm_cache() -> None:
    """A library's diagnostic output on a healthy test: a native-looking stack trace and
    faulthandler's dump of every thread (``_warm_cache`` among its frames), no crash."""
    os.write(
        2,
        b"[W:npu] slow cache warm-up\nStack trace:\n  0: npu::Cache::warm()\n"
        b"        at /src/npu/cache.cc:41\n  1: npu::Session::open()\n",
    )
    faulthandler.dump_traceback(all_threads=True)


class NoisyDumps(SegfaultIn):
    """Prints stack dumps on every model without ``op`` (``_warm_cache``) and segfaults
    on models with it: a later crash's evidence must hold none of the earlier dumps."""

    name = "noisy-dumps"

    def compile(self, model: onnx.ModelProto) -> Any:
        if not self.triggered(model):
            _warm_cache()
        return super().compile(model)


def _lower_fused(site: str) -> None:
    """A native library's fatal check: its message and native backtrace (as TVM prints
    them, with a time stamp and build paths that differ between runs), then abort()."""
    stamp = time.strftime("%H:%M:%S")
    build = f"/build/{os.getpid()}/src/relax"
    os.write(
        2,
        f"[{stamp}] {build}/{site}.cc:120: InternalError: Check failed: (lhs == rhs) is false\n"
        f"Stack trace:\n"
        f"  0: npu::relax::{site.title()}Mutator::VisitExpr_(npu::relax::CallNode const*)\n"
        f"        at {build}/{site}.cc:120\n"
        f"  1: npu::relax::ExprMutator::VisitExpr(npu::RelaxExpr const&)\n"
        f"        at {build}/expr_mutator.cc:{os.getpid() % 97}\n"
        f"  2: npu::transform::{site.title()}Ops()\n".encode(),
    )
    os.abort()


class NativeCheckAbort(_OrtWrapper):
    """Fails a native check while compiling a model with ``op``: prints the check's words
    and a TVM-style native backtrace of ``site`` (fuse or layout), then aborts."""

    name = "native-check-abort"

    def __init__(self, op: str = "Add", site: str = "fuse") -> None:
        super().__init__(op)
        self.site = site

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            _lower_fused(self.site)
        return super().compile(model)


class TvmFfiSegfault(SegfaultIn):
    """SegfaultIn with TVM's FFI library loaded: its own SIGSEGV handler prints a native
    backtrace, which the worker's faulthandler must chain to, not silence."""

    name = "tvm-ffi-segfault"

    def __init__(self, op: str = "Add", where: str = "fuse") -> None:
        import tvm_ffi  # noqa: F401 - loading it installs the handler

        super().__init__(op, where)


class UnsupportedForm(_OrtWrapper):
    """Says "not implemented" for one form of ``op`` only, as onnx2torch does for Clip
    with computed bounds or Reshape with allowzero=1: ``attr=value`` (an int attribute
    that takes that value) or ``dynamic=k`` (input k not a constant). Found here from the
    ONNX node itself, independently of onnxfuzz's feature code."""

    name = "unsupported-form"

    def __init__(self, op: str = "Clip", attr: str = "", value: int = 1, dynamic: int = -1):
        super().__init__(op)
        self.attr, self.value, self.dynamic = attr, int(value), int(dynamic)

    def triggered(self, model: onnx.ModelProto) -> bool:
        g = model.graph
        constants = {i.name for i in g.initializer}
        constants |= {o for n in g.node if n.op_type == "Constant" for o in n.output}
        for n in g.node:
            if n.op_type != self.op:
                continue
            if self.attr and any(a.name == self.attr and a.i == self.value for a in n.attribute):
                return True
            k = self.dynamic
            if 0 <= k < len(n.input) and n.input[k] and n.input[k] not in constants:
                return True
        return False

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            raise NotImplementedError(f"{self.op} is not implemented in this form")
        return super().compile(model)


class Imprecise(_OrtWrapper):
    """A planted precision bug: every float32 ``op`` node's output is scaled by 1 + ``rel``
    (``rel``: a relative error, e.g. 1e-3, or 3.5762787e-07 for three float32 ulps), well
    inside the end-to-end tolerance. It stays visible with every intermediate exposed, as a
    wrong kernel's error does."""

    name = "imprecise"

    def __init__(self, op: str = "Exp", rel: str = "1e-3") -> None:
        super().__init__(op)
        self.factor = np.float32(1.0 + float(rel))

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        g = m.graph
        infos = list(g.value_info) + list(g.output)
        types = {vi.name: vi.type.tensor_type.elem_type for vi in infos}
        nodes = list(g.node)
        del g.node[:]
        for n in nodes:
            out = n.output[0]
            if n.op_type == self.op and types.get(out) == onnx.TensorProto.FLOAT:
                n.output[0] = f"{out}__exact"
                factor = f"{out}__factor"
                g.initializer.append(onnx.numpy_helper.from_array(self.factor, factor))
                g.node.extend([n, onnx.helper.make_node("Mul", [n.output[0], factor], [out])])
            else:
                g.node.append(n)
        return (self._session(m), False)


class ScalesWholeModel(_OrtWrapper):
    """A planted bug of the whole model, not of one kernel: a model that holds ``op`` has
    every float32 output scaled by 1 + ``rel``, its intermediates too once they are exposed
    (a mode a compiler picks for the whole graph). Every float node then looks wrong inside
    the model; only ``op`` is wrong alone."""

    name = "scales-whole-model"

    def __init__(self, op: str = "Sigmoid", rel: str = "0.5") -> None:
        super().__init__(op)
        self.factor = np.float32(1.0 + float(rel))

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = super().run(executable, inputs)
        if not executable[1]:
            return outs
        return {
            k: (v * self.factor).astype(np.float32) if v.dtype == np.float32 else v
            for k, v in outs.items()
        }


class ReturnsNone(_OrtWrapper):
    """Breaks the protocol: run() returns None (forgot the return)."""

    name = "returns-none"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> Any:
        super().run(executable, inputs)
        return None


class ReturnsPythonNumbers(_OrtWrapper):
    """Breaks the protocol: run() returns Python numbers (``.tolist()``; a 0-d output a
    Python float), whose element type is lost: np.asarray reads float32 values as float64."""

    name = "returns-python-numbers"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> Any:
        return {k: v.tolist() for k, v in super().run(executable, inputs).items()}


class SupportsAnswers42(_OrtWrapper):
    """Breaks the protocol: supports() answers neither None nor a reason string."""

    name = "supports-42"

    def supports(self, model: onnx.ModelProto) -> Any:
        return 42


class SupportsRaises(_OrtWrapper):
    """Breaks the protocol: supports() raises (it was filed as a compile crash)."""

    name = "supports-raises"

    def supports(self, model: onnx.ModelProto) -> Any:
        raise ValueError("supports blew up")


class IsUnsupportedRaises(_OrtWrapper):
    """A hook that raises: every Relu fails, and is_unsupported() raises when asked about
    it (it killed the worker, and each such test was filed as a crash of the backend)."""

    name = "is-unsupported-raises"

    def __init__(self, op: str = "Relu") -> None:
        super().__init__(op)

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model):
            raise RuntimeError(f"{self.op} is broken")
        return super().compile(model)

    def is_unsupported(self, error: BaseException) -> bool:
        raise TypeError("hook broken")


class InitRaises(_OrtWrapper):
    """Its start-up fails (a license server down)."""

    name = "init-raises"

    def __init__(self, op: str = "Add") -> None:
        raise RuntimeError("license server unreachable")


class InitHangs(_OrtWrapper):
    """Its start-up does not end (a license server that never answers): ``__init__``
    sleeps ``seconds``."""

    name = "init-hangs"

    def __init__(self, op: str = "Add", seconds: str = "3600") -> None:
        super().__init__(op)
        time.sleep(float(seconds))


class AvailableRaises(_OrtWrapper):
    """available() raises instead of saying why it is not available."""

    name = "available-raises"

    def available(self) -> str | None:
        raise RuntimeError("device probe exploded")


class AbsAsIdentity(_OrtWrapper):
    """A planted value-dependent bug: every Abs returns its input (wrong only where an input
    is negative)."""

    name = "abs-as-identity"

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        for n in m.graph.node:
            if n.op_type == "Abs":
                n.op_type = "Identity"
        return (self._session(m), False)


class RaggedOutput(_OrtWrapper):
    """Returns each output of a model with ``op`` as a list of two arrays of different
    shapes (a sequence where the graph declares a tensor, as the ONNX reference evaluator
    does after OptionalGetElement of a sequence)."""

    name = "ragged-output"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> Any:
        outs = super().run(executable, inputs)
        if not executable[1]:
            return outs
        return {k: [v, np.zeros((v.size + 1,), v.dtype)] for k, v in outs.items()}


class ReturnsList(_OrtWrapper):
    """Breaks the protocol: run() returns the outputs as a list, not by name."""

    name = "returns-list"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> Any:
        return list(super().run(executable, inputs).values())


class RenamesOutputs(_OrtWrapper):
    """Breaks the protocol: run() keys its outputs by names of its own (``<name>_out``)."""

    name = "renames-outputs"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> Any:
        return {f"{k}_out": v for k, v in super().run(executable, inputs).items()}


class Flaky(WrongOp):
    """A planted race: each run of a model with ``op`` (float32) computes ``op`` + 0.5 with
    probability ``p`` (0.3 unless told), drawn per run, not from the model: the same model
    is right in some runs and wrong in others. ``draw=os``: from the OS's entropy;
    ``draw=sequence``: the process's n-th run is wrong when frac(n * 0.618...) < p, an
    evenly spread sequence (any 5 runs in a row hold 1 or 2 wrong ones at p=0.3), for
    tests that must not depend on luck."""

    name = "flaky"

    def __init__(self, op: str = "Add", p: str = "0.3", draw: str = "os") -> None:
        super().__init__(op)
        self.p = float(p)
        self.coin = random.Random(os.urandom(16))
        self.draw = draw
        self.runs = 0

    def _wrong_now(self) -> bool:
        self.runs += 1
        if self.draw == "sequence":
            return (self.runs * 0.6180339887498949) % 1.0 < self.p
        return self.coin.random() < self.p

    def compile(self, model: onnx.ModelProto) -> Any:
        return (self._session(model), super().compile(model)[0])

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        right, wrong = executable
        sess = wrong if self._wrong_now() else right
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, inputs), strict=True))


class AlternatingRun(WrongOp):
    """A planted race without luck: ``op`` + 0.5 on the first run of the odd-numbered
    models this process compiles and only on the second run of the even-numbered ones.
    Every compiled model fails, each time at another of its two runs: outputs that vary
    from run to run, as a flaky kernel's do."""

    name = "alternating-run"

    def __init__(self, op: str = "Add") -> None:
        super().__init__(op)
        self.compiled = 0

    def compile(self, model: onnx.ModelProto) -> Any:
        self.compiled += 1
        return (self._session(model), super().compile(model)[0], [self.compiled % 2, 0])

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        right, wrong, state = executable
        state[1] += 1  # this model's n-th run
        sess = wrong if (state[1] == 1) == bool(state[0]) else right
        names = [o.name for o in sess.get_outputs()]
        return dict(zip(names, sess.run(names, inputs), strict=True))


# Op types of the models this process compiled before (StaleCache's kernel cache).
_COMPILED_BEFORE: set[str] = set()


class FlakyOutputs(_OrtWrapper):
    """A planted rare race: each run shifts every float32 output by 0.5 with probability
    ``p`` (0.03 unless told), drawn from the OS's entropy. Where its wrong value is
    localized depends on the model (the run that localizes it is right, mostly): many
    signatures of one family, most hits shown by no fresh run."""

    name = "flaky-outputs"

    def __init__(self, p: str = "0.03") -> None:
        super().__init__("")
        self.p = float(p)
        self.coin = random.Random(os.urandom(16))

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = super().run(executable, inputs)
        if self.coin.random() >= self.p:
            return outs
        half = np.float32(0.5)
        return {k: v + half if v.dtype == np.float32 else v for k, v in outs.items()}


class StaleCache(WrongOp):
    """A planted stale compile cache: ``op`` (float32) computes ``op`` + 0.5 in a model
    without ``other`` once this process has compiled a model with ``other`` (its kernel
    was cached under ``op``'s key); a model with ``other`` recompiles it and is right. A
    fresh process is right on every model. With ``raises``, the same stale cache also
    makes a model with that op (and no ``other``) raise at compile: one bug, two signatures."""

    name = "stale-cache"

    def __init__(self, op: str = "Add", other: str = "Mul", raises: str = "") -> None:
        super().__init__(op)
        self.other = other
        self.raises = raises  # an op that the stale cache makes raise instead (if given)

    def compile(self, model: onnx.ModelProto) -> Any:
        ops = {n.op_type for n in model.graph.node}
        stale = self.other not in ops and self.other in _COMPILED_BEFORE
        _COMPILED_BEFORE.update(ops)
        if stale and self.raises in ops:
            raise RuntimeError(f"{self.raises} kernel: cached entry has the wrong arity")
        return super().compile(model) if stale and self.op in ops else (self._session(model), False)


class StaleByOps(_OrtWrapper):
    """A planted compile cache keyed by the graph's op types alone (its attributes and
    shapes left out of the key): the first model of a list of op types is compiled, and a
    later one with the same op types gets that session, stale (audit 15). A fresh process
    compiles each model it is given."""

    name = "stale-by-ops"

    def __init__(self) -> None:
        super().__init__()
        self.sessions: dict[tuple[str, ...], Any] = {}

    def compile(self, model: onnx.ModelProto) -> Any:
        key = tuple(n.op_type for n in model.graph.node)
        if key not in self.sessions:
            self.sessions[key] = self._session(model)
        return (self.sessions[key], False)


class FailsOnce(_OrtWrapper):
    """Raises on the first model with ``op`` that any process compiles while the file
    ``marker`` does not exist (then creates it): a failure no later run re-creates, in a
    fresh process or after any models."""

    name = "fails-once"

    def __init__(self, op: str = "Add", marker: str = "") -> None:
        super().__init__(op)
        self.marker = marker

    def compile(self, model: onnx.ModelProto) -> Any:
        if self.triggered(model) and self.marker and not os.path.exists(self.marker):
            with open(self.marker, "w"):
                pass
            raise RuntimeError(f"InternalError: {self.op} kernel table not ready")
        return super().compile(model)


class FirstSight(WrongOp):
    """A planted bug no second run shows: every float32 node of the ``ops`` (``+``-joined)
    computes op + 0.5 the first time any process compiles a model (its bytes' hash kept as
    a file in the folder ``seen``), and right ever after, in any process and after any
    models. Where the wrong value is localized varies with the model: many signatures of
    one family, none reproducible."""

    name = "first-sight"

    def __init__(self, ops: str = "Add", seen: str = "") -> None:
        super().__init__(ops.split("+")[0])
        self.ops = set(ops.split("+"))
        self.seen = seen

    def wrong_nodes(self, g: onnx.GraphProto) -> set[int]:
        return {k for k, n in enumerate(g.node) if n.op_type in self.ops}

    def compile(self, model: onnx.ModelProto) -> Any:
        mark = os.path.join(self.seen, hashlib.sha256(model.SerializeToString()).hexdigest())
        if os.path.exists(mark):
            return (self._session(model), False)
        with open(mark, "w"):
            pass
        return super().compile(model)


class Narrow(WrongOp):
    """WrongOp (``op`` + 0.5) in an adapter that declares only opsets 15..21, as a compiler
    that supports a recent range does."""

    name = "narrow"

    def supported_opsets(self) -> tuple[int, int]:
        return (15, 21)


class NarrowedInt(_OrtWrapper):
    """A planted numeric-range bug: every int32 ``op`` node's result passes through the
    narrower type ``via`` (int16: wraps past 32767, as a narrowed accumulator would;
    float: rounds past 2**24, as a kernel computing integers in float32 would). Right
    wherever the values fit it, as values near zero always do."""

    name = "narrowed-int"

    def __init__(self, op: str = "Mul", via: str = "int16") -> None:
        super().__init__(op)
        self.via = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(via))

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        g = m.graph
        typed = onnx.shape_inference.infer_shapes(m).graph
        int32 = {
            vi.name
            for vi in [*g.output, *typed.value_info]
            if vi.type.tensor_type.elem_type == onnx.TensorProto.INT32
        }
        nodes = list(g.node)
        del g.node[:]
        for n in nodes:
            out = n.output[0]
            if n.op_type != self.op or out not in int32:
                g.node.append(n)
                continue
            n.output[0] = f"{out}__wide"
            g.node.extend(
                [
                    n,
                    onnx.helper.make_node(
                        "Cast", [f"{out}__wide"], [f"{out}__narrow"], to=self.via
                    ),
                    onnx.helper.make_node(
                        "Cast", [f"{out}__narrow"], [out], to=onnx.TensorProto.INT32
                    ),
                ]
            )
        return (self._session(m), False)


class OffByOne(_OrtWrapper):
    """Every float output is 1 too large: every test with one is a finding."""

    name = "off-by-one"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = super().run(executable, inputs)
        return {k: v + v.dtype.type(1) if v.dtype.kind == "f" else v for k, v in outs.items()}


class SecondRunWrong(WrongOp):
    """A planted stateful kernel: a compiled model is right on its first run; on each later
    run every float32 ``op`` computes ``op`` + 0.5 (WrongOp), as a kernel whose scratch
    buffer is not reset between runs."""

    name = "second-run-wrong"

    def compile(self, model: onnx.ModelProto) -> Any:
        return [self._session(model), super().compile(model)[0], 0]

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        right, wrong, runs = executable
        executable[2] = runs + 1
        return super().run((wrong if runs else right, False), inputs)


class WritesIntoInputs(_OrtWrapper):
    """A planted in-place kernel: running a model with ``op`` zeroes the caller's float
    input arrays after computing the outputs (a graph input's buffer reused as scratch)."""

    name = "writes-into-inputs"

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outs = super().run(executable, inputs)
        if executable[1]:
            for v in inputs.values():
                if v.dtype.kind == "f" and v.flags.writeable:
                    v[...] = 0
        return outs


class SecondRunSegfault(_OrtWrapper):
    """Dereferences NULL on the second run of a compiled model with ``op`` (the first is
    right): a buffer freed after the first run and used again."""

    name = "second-run-segfault"

    def compile(self, model: onnx.ModelProto) -> Any:
        return [self._session(model), self.triggered(model), 0]

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        sess, triggered, runs = executable
        executable[2] = runs + 1
        if triggered and runs:
            ctypes.string_at(0)
        return super().run((sess, triggered), inputs)


class LoadLog(_OrtWrapper):
    """ONNX Runtime, appending its process id to the file ``log`` each time a process
    loads it: which processes were started, and when."""

    name = "load-log"

    def __init__(self, op: str = "Add", log: str = "") -> None:
        super().__init__(op)
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")


class UncheckedGather(_OrtWrapper):
    """A planted index bug: the Gather kernel takes a negative index as an offset from the
    buffer's start, not its end, and checks no bound, so it reads outside the buffer (a
    fault) wherever an index is negative, or past the axis as no valid model's is. The
    trap it sets a reducer: a candidate with indices out of range fails here in the same
    words, and fails in every other backend too. (Top-level Gathers only.)"""

    name = "unchecked-gather"

    def __init__(self) -> None:
        super().__init__("Gather")

    def compile(self, model: onnx.ModelProto) -> Any:
        typed = onnx.shape_inference.infer_shapes(model, strict_mode=True).graph
        info = {vi.name: vi for vi in (*typed.input, *typed.value_info, *typed.output)}
        for t in typed.initializer:
            info[t.name] = onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims)
        bounds = []
        for n in typed.node:
            if n.op_type == "Gather":
                axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
                dims = info[n.input[0]].type.tensor_type.shape.dim
                bounds.append((n.input[1], dims[axis].dim_value))
        # the indices, computed by the nodes they depend on (ONNX Runtime would refuse
        # the whole model on an index out of range before the planted check could see it)
        wanted = {name for name, _ in bounds}
        nodes: list[onnx.NodeProto] = []
        for n in reversed(typed.node):
            if wanted & set(n.output):
                nodes.insert(0, n)
                wanted |= set(n.input)
        g = onnx.helper.make_graph(
            nodes,
            "indices",
            list(typed.input),
            [info[name] for name, _ in bounds],
            list(typed.initializer),
        )
        indices = onnx.helper.make_model(
            g, opset_imports=model.opset_import, ir_version=model.ir_version
        )
        return (self._session(model), bounds and self._session(indices), bounds)

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        sess, indices, bounds = executable
        if bounds:
            names = [o.name for o in indices.get_outputs()]
            feeds = {i.name: inputs[i.name] for i in indices.get_inputs()}
            known = dict(zip(names, indices.run(names, feeds), strict=True))
            if any(((known[name] < 0) | (known[name] >= size)).any() for name, size in bounds):
                raise RuntimeError("illegal memory access in kernel gather_fp32")
        return super().run((sess, False), inputs)


class LeakyBelow(_OrtWrapper):
    """A planted value-dependent bug (audit 16's): a LeakyRelu gives twice its value where
    its input is below -4, and is right elsewhere, in any float type."""

    name = "leaky-below"

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        nodes = []
        for k, n in enumerate(m.graph.node):
            nodes.append(n)
            if n.op_type != "LeakyRelu":
                continue
            out, x = n.output[0], n.input[0]
            n.output[0] = right = f"{out}__right"
            four = onnx.helper.make_tensor(f"lb{k}_c", onnx.TensorProto.FLOAT, [], [-4.0])
            nodes += [
                onnx.helper.make_node("Constant", [], [f"lb{k}_f"], value=four),
                onnx.helper.make_node("CastLike", [f"lb{k}_f", x], [f"lb{k}_t"]),
                onnx.helper.make_node("Less", [x, f"lb{k}_t"], [f"lb{k}_below"]),
                onnx.helper.make_node("Add", [right, right], [f"lb{k}_twice"]),
                onnx.helper.make_node("Where", [f"lb{k}_below", f"lb{k}_twice", right], [out]),
            ]
        del m.graph.node[:]
        m.graph.node.extend(nodes)
        return (self._session(m), False)


class DoubledNegativeLeakyRelu(_OrtWrapper):
    """A planted float16 bug on a tensor's small elements: every float16 LeakyRelu gives
    ``x * alpha * 2`` where ``x < -4`` (audit 16's NegLeakyRelu). The wrong elements are
    about alpha * 4 in size, so a tensor that also holds values near 5 hides them inside
    the float16 atol scaled by its largest magnitude."""

    name = "doubled-negative-leaky-relu"

    def __init__(self, op: str = "LeakyRelu") -> None:
        super().__init__(op)

    def compile(self, model: onnx.ModelProto) -> Any:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        g = m.graph
        typed = onnx.shape_inference.infer_shapes(m).graph  # a model may declare no types
        types = {
            vi.name: vi.type.tensor_type.elem_type
            for vi in [*g.value_info, *g.output, *typed.value_info]
        }
        half = onnx.TensorProto.FLOAT16
        nodes = list(g.node)
        del g.node[:]
        for n in nodes:
            out, x = n.output[0], n.input[0]
            if n.op_type != self.op or types.get(out) != half:
                g.node.append(n)
                continue
            g.initializer.append(onnx.numpy_helper.from_array(np.float16(-4), f"{out}__m4"))
            g.initializer.append(onnx.numpy_helper.from_array(np.float16(2), f"{out}__two"))
            n.output[0] = f"{out}__right"
            g.node.extend(
                [
                    n,
                    onnx.helper.make_node("Less", [x, f"{out}__m4"], [f"{out}__lt"]),
                    onnx.helper.make_node("Mul", [n.output[0], f"{out}__two"], [f"{out}__dbl"]),
                    onnx.helper.make_node(
                        "Where", [f"{out}__lt", f"{out}__dbl", n.output[0]], [out]
                    ),
                ]
            )
        return (self._session(m), False)
