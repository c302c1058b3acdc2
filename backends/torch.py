"""PyTorch through onnx2torch: ``torch`` (eager) and ``torch-compile`` (``torch.compile``,
inductor by default), so eager vs compiled PyTorch is itself a differential pair.

onnx2torch turns the model into a ``torch.fx.GraphModule``; it has converters for
(op, since-version) pairs up to opset 20 (plus Squeeze-21), so an opset-21+ model converts
when all its ops are unchanged since 20 or earlier; it raises
``NotImplementedError: Converter is not implemented (OperationDescription(domain='',
operation_type='X', version=N))`` for the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx2torch
import torch

from onnxfuzz.backend import Unsupported

torch.set_num_threads(1)  # keep the small CI machines usable; the fuzzer runs many of these

_UNSUPPORTED = re.compile(
    # onnx2torch: "Converter is not implemented (OperationDescription(...))", '"SAME_LOWER"
    # auto_pad is not implemented', '"allowzero=1" is not implemented', "alpha parameter must
    # be 1.67..., not 0.29" (Selu/Elu with non-default constants), "... does not support ...",
    # 'Tensor "x" is not found in constant values' (an input it needs to be a constant);
    # torch: '"addmm_impl_cpu_" not implemented for \'UInt64\'', "mean(): could not infer output
    # dtype. Input dtype must be either a floating point or complex dtype. Got: Long", and
    # the limits it states: "reflect padding is implemented for padding the last 3
    # dimensions of 4D or 5D input tensor, ..." (ONNX's Pad pads any axis).
    r"not implemented|not supported|unsupported|parameter must be |does not support|"
    r"only supports? |is not found in constant values|Input dtype must be|"
    r"\bis implemented for\b",
    re.IGNORECASE,
)
_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclass
class _Executable:
    module: Any
    input_names: list[str]  # the module's positional inputs: graph inputs minus initializers
    # How to find each graph output in the module's result: onnx2torch returns one entry per
    # distinct producing node (a bare value when there is one), and a node with several
    # outputs gives a tuple of them.
    n_producers: int
    picks: list[tuple[int, int | None]]  # (producer index, output index or None)
    output_names: list[str]


def _to_torch(a: np.ndarray) -> torch.Tensor:
    a = np.asarray(a)
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.uint16).copy()).view(torch.bfloat16)
    if a.dtype.kind not in "biufc":
        raise Unsupported(f"torch has no dtype for numpy {a.dtype}")
    try:
        return torch.from_numpy(np.array(a, copy=True, order="C"))
    except TypeError as e:  # numpy dtypes torch.from_numpy refuses
        raise Unsupported(f"torch.from_numpy does not take {a.dtype}: {e}") from e


def _to_numpy(t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    if isinstance(t, tuple | list) and t and all(isinstance(x, torch.Tensor) for x in t):
        return np.stack([_to_numpy(x) for x in t])  # bfloat16 ones too
    return np.asarray(t)


def _layout(model: onnx.ModelProto) -> tuple[list[str], int, list[tuple[int, int | None]]]:
    """Graph inputs the module takes, and where each graph output sits in its result (the
    convert() output rule: producing nodes in graph-output order, duplicates dropped)."""
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    producer: dict[str, tuple[int, int, int]] = {}
    for k, node in enumerate(model.graph.node):
        for idx, name in enumerate(node.output):
            if name:
                producer[name] = (k, idx, len(node.output))
    order: list[int] = []
    picks: list[tuple[int, int | None]] = []
    for out in model.graph.output:
        if out.name not in producer:
            raise Unsupported(
                f"onnx2torch needs every graph output to come from a node; "
                f"{out.name!r} is a graph input or initializer"
            )
        k, idx, n_out = producer[out.name]
        if k not in order:
            order.append(k)
        picks.append((order.index(k), idx if n_out > 1 else None))
    return inputs, len(order), picks


class TorchBackend:
    """PyTorch eager, via onnx2torch. Option: ``threads`` (torch intra-op threads, default 1)."""

    name = "torch"

    def __init__(self, threads: str = "1") -> None:
        self.threads = int(threads)
        torch.set_num_threads(self.threads)

    def available(self) -> str | None:
        return None

    def version(self) -> str:
        return f"torch {torch.__version__}, onnx2torch {_onnx2torch_version()}"

    def supported_opsets(self) -> tuple[int, int]:
        # onnx2torch looks a converter up by (op, the op's since-version at the model's
        # opset); its converters stop at since-version 20. supports() names missing ones.
        return (9, 20)

    def preferred_opset(self) -> int:
        # Measured with onnxfuzz's specs: 95 of 113 ops convert at opset 17, 83 of 114 at
        # 18 (the Reduce, Pad, Resize, Split versions of 18 have no converter), 75 at 20.
        return 17

    def supports(self, model: onnx.ModelProto) -> str | None:
        from onnx2torch.node_converters.registry import get_converter

        opsets = {o.domain or "": o.version for o in model.opset_import}
        opsets.setdefault("", opsets.get("ai.onnx", 0))
        missing = []
        for node in model.graph.node:
            domain = "" if node.domain in ("", "ai.onnx") else node.domain
            try:
                get_converter(
                    operation_type=node.op_type, version=opsets.get(domain, 0), domain=domain
                )
            except NotImplementedError:
                schema_version = _since_version(node.op_type, domain, opsets.get(domain, 0))
                missing.append(f"{node.op_type}-{schema_version}")
        if missing:
            return (
                "onnx2torch has no converter for "
                + ", ".join(sorted(set(missing)))
                + f" (model opset {opsets['']})"
            )
        return None

    def _convert(self, model: onnx.ModelProto) -> tuple[torch.nn.Module, _Executable]:
        inputs, n_producers, picks = _layout(model)
        copy = onnx.ModelProto()
        copy.CopyFrom(model)  # convert() edits the graph it is given
        module = onnx2torch.convert(copy).eval()
        return module, _Executable(
            module, inputs, n_producers, picks, [o.name for o in model.graph.output]
        )

    def compile(self, model: onnx.ModelProto) -> Any:
        return self._convert(model)[1]

    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = [_to_torch(inputs[n]) for n in executable.input_names]
        with torch.no_grad():
            result = executable.module(*args)
        per_producer = [result] if executable.n_producers == 1 else list(result)
        outs: dict[str, np.ndarray] = {}
        for name, (k, idx) in zip(executable.output_names, executable.picks, strict=True):
            value = per_producer[k]
            if idx is not None:
                value = value[idx]
            # A node of one output that gives a tuple (onnx2torch's Split with one output
            # gives a tuple of 1) comes back as numpy reads it, a [1, ...] array: a wrong
            # shape. Unwrapped, it hid the bug where the node's result is the model's and
            # left only the crashes of its consumers, each filed as a bug of its own.
            outs[name] = _to_numpy(value)
        return outs

    def is_unsupported(self, error: BaseException) -> bool:
        if isinstance(error, Unsupported | NotImplementedError):
            return True
        return bool(_UNSUPPORTED.search(f"{type(error).__name__}: {error}"))


class TorchCompileBackend(TorchBackend):
    """The onnx2torch module under ``torch.compile`` (inductor). Options: ``mode``
    (torch.compile mode: default|reduce-overhead|max-autotune|max-autotune-no-cudagraphs),
    ``backend`` (torch.compile backend, default inductor), ``threads``.

    torch.compile is lazy: the real compilation happens at the first call, which lands in
    ``run`` (``compile`` has no inputs to trace with)."""

    name = "torch-compile"

    def __init__(
        self, mode: str = "default", backend: str = "inductor", threads: str = "1"
    ) -> None:
        super().__init__(threads=threads)
        if mode not in _MODES:
            raise TypeError(f"mode must be one of {', '.join(_MODES)}, got {mode!r}")
        self.mode = mode
        self.backend = backend

    def compile(self, model: onnx.ModelProto) -> Any:
        module, ex = self._convert(model)
        # A fresh compile per model: no recompile-limit sharing, no stale guards.
        torch._dynamo.reset()
        ex.module = torch.compile(
            module, mode=self.mode, backend=self.backend, dynamic=False, fullgraph=False
        )
        return ex

    def is_unsupported(self, error: BaseException) -> bool:
        # Dynamo wraps errors from inside the graph; judge the innermost cause too.
        seen: BaseException | None = error
        while seen is not None:
            if super().is_unsupported(seen):
                return True
            seen = seen.__cause__ or getattr(seen, "inner_exception", None)
        return False


def _since_version(op_type: str, domain: str, opset: int) -> int | str:
    try:
        return onnx.defs.get_schema(
            op_type, max_inclusive_version=opset, domain=domain
        ).since_version
    except (RuntimeError, onnx.defs.SchemaError):
        return "?"


def _onnx2torch_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("onnx2torch")
    except PackageNotFoundError:
        return "unknown"
