"""Element types: names, numpy types, value bounds, and which kernels exist.

Element types are ``onnx.TensorProto`` enum ints everywhere inside onnxfuzz;
names (``float32``, ``int64``, ...) are for users and files.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxfuzz.errors import UsageError

FLOAT = TensorProto.FLOAT
DOUBLE = TensorProto.DOUBLE
FLOAT16 = TensorProto.FLOAT16
BFLOAT16 = TensorProto.BFLOAT16
INT8, INT16 = TensorProto.INT8, TensorProto.INT16
INT32, INT64 = TensorProto.INT32, TensorProto.INT64
UINT8, UINT16 = TensorProto.UINT8, TensorProto.UINT16
UINT32, UINT64 = TensorProto.UINT32, TensorProto.UINT64
BOOL = TensorProto.BOOL

NAMES: dict[int, str] = {
    FLOAT: "float32",
    DOUBLE: "float64",
    FLOAT16: "float16",
    BFLOAT16: "bfloat16",
    INT8: "int8",
    INT16: "int16",
    INT32: "int32",
    INT64: "int64",
    UINT8: "uint8",
    UINT16: "uint16",
    UINT32: "uint32",
    UINT64: "uint64",
    BOOL: "bool",
}
BY_NAME: dict[str, int] = {v: k for k, v in NAMES.items()}
# The spelling ONNX schemas use inside "tensor(...)".
_SCHEMA_NAMES: dict[str, int] = {
    "float": FLOAT,
    "double": DOUBLE,
    "float16": FLOAT16,
    "bfloat16": BFLOAT16,
    "int8": INT8,
    "int16": INT16,
    "int32": INT32,
    "int64": INT64,
    "uint8": UINT8,
    "uint16": UINT16,
    "uint32": UINT32,
    "uint64": UINT64,
    "bool": BOOL,
}

FLOATS = frozenset({FLOAT, DOUBLE, FLOAT16, BFLOAT16})
SIGNED_INTS = frozenset({INT8, INT16, INT32, INT64})
UNSIGNED_INTS = frozenset({UINT8, UINT16, UINT32, UINT64})
INTS = SIGNED_INTS | UNSIGNED_INTS
ALL = frozenset(NAMES)
# ONNX Runtime's Python API cannot feed or fetch bfloat16 arrays, so reference outputs
# cannot be computed for models with bfloat16 inputs: opt in with --dtypes.
DEFAULT = ALL - {BFLOAT16}
# attributes that name an element type (Cast's to, EyeLike's or RandomNormal's dtype,
# QuantizeLinear's and DequantizeLinear's output_dtype): a model's types are not all in its
# tensors
TYPE_ATTRIBUTES = ("to", "dtype", "output_dtype")

# Largest magnitude a float tensor may reach anywhere in a generated graph. Every
# spec keeps its outputs inside these bounds, so reference outputs stay finite and
# far from overflow (fp16 tops out at 65504).
FLOAT_BOUND: dict[int, float] = {FLOAT: 1e4, DOUBLE: 1e4, FLOAT16: 1e3, BFLOAT16: 1e3}
# -log of each float type's smallest normal number: exp(-x) is a normal number of the type
# for x below it. A softmax over inputs spread wider than this has entries that underflow
# to 0 or keep only a subnormal's few bits.
_EXP_NORMAL_RANGE: dict[int, float] = {FLOAT: 87.3, DOUBLE: 708.3, FLOAT16: 9.7, BFLOAT16: 87.3}


def exp_normal_range(dtype: int) -> float:
    """How far below 0 exp stays a normal number of ``dtype`` (inf for a non-float type:
    a spec's value domain is asked of every type an input may take)."""
    return _EXP_NORMAL_RANGE.get(dtype, math.inf)


@cache  # asked for every constant and weight a model holds; the answer never changes
def np_dtype(dtype: int) -> np.dtype:
    return np.dtype(helper.tensor_dtype_to_np_dtype(dtype))


@cache
def value_range(dtype: int) -> tuple[float, float]:
    """The closed interval every value of this element type must stay inside."""
    if dtype in FLOAT_BOUND:
        b = FLOAT_BOUND[dtype]
        return (-b, b)
    if dtype == BOOL:
        return (0.0, 1.0)
    info = np.iinfo(np_dtype(dtype))
    # 64-bit extremes are not exactly representable as Python floats; stay inside.
    lo, hi = max(float(info.min), -(2.0**62)), min(float(info.max), 2.0**62)
    return (lo, hi)


def from_schema_str(type_str: str) -> int | None:
    """``tensor(float)`` -> FLOAT; None for types onnxfuzz does not generate."""
    if not type_str.startswith("tensor(") or not type_str.endswith(")"):
        return None
    return _SCHEMA_NAMES.get(type_str[7:-1])


def parse_names(text: str, flag: str = "--dtypes") -> frozenset[int]:
    out = set()
    for raw in text.split(","):
        name = raw.strip()
        if not name:
            continue
        if name not in BY_NAME:
            raise UsageError(
                f"{flag}: unknown dtype {name!r}; choose from {', '.join(sorted(BY_NAME))}"
            )
        out.add(BY_NAME[name])
    if not out:
        raise UsageError(f"{flag}: give at least one dtype, e.g. {flag} float32,int64")
    return frozenset(out)


# The newest opset ONNX Runtime 1.31 (the kernel table's) runs; onnxfuzz.generate.lang.config
# names the ranges onnxfuzz generates around it.
ORT_MAX_OPSET = 26


@cache
def _ort_table() -> tuple[dict, dict]:
    raw = json.loads(resources.files("onnxfuzz.data").joinpath("ort_cpu_kernels.json").read_text())

    def cons(c: dict[str, list[str]]) -> dict[str, frozenset[int]]:
        return {tv: frozenset(BY_NAME[n] for n in names) for tv, names in c.items()}

    kernels = {
        op: [(lo, hi, cons(c)) for lo, hi, c in entries] for op, entries in raw["kernels"].items()
    }
    # Types ORT runs beyond its kernel registry (function bodies, Casts inserted around a
    # missing kernel), found by running generated models: type combinations per opset.
    probed = {
        op: {int(o): [cons(c) for c in entries] for o, entries in by_opset.items()}
        for op, by_opset in raw.get("probed", {}).items()
    }
    return kernels, probed


def ort_kernels(op: str, version: int, opset: int) -> list[dict[str, frozenset[int]]] | None:
    """The type-constraint combinations ONNX Runtime's CPU kernels register for ``op``
    at op version ``version``, plus the types found to run at ``opset`` by probing (function
    bodies, casts around missing kernels); None when nothing is known.

    An op version newer than ORT_MAX_OPSET (ONNX Runtime cannot load it) takes the
    combinations of the version before it, widened by the types the new version's schema
    added: the types onnxfuzz generated before stay as they were, the new ones come in,
    and a new op (no earlier version) is known by its schema only."""
    if version > ORT_MAX_OPSET:
        beyond = _beyond_ort(op, version)
        return None if beyond is None else list(beyond)
    kernels, probed = _ort_table()
    entries = [c for lo, hi, c in kernels.get(op, ()) if lo <= version <= hi]
    # (above ORT_MAX_OPSET the version in force is the one ORT ran at ORT_MAX_OPSET)
    entries.extend(probed.get(op, {}).get(min(opset, ORT_MAX_OPSET), ()))
    return entries or None


def _schema_types(schema: onnx.defs.OpSchema) -> dict[str, frozenset[int]]:
    """Each type variable's element types onnxfuzz generates (``from_schema_str``)."""
    return {
        c.type_param_str: frozenset(
            t for x in c.allowed_type_strs if (t := from_schema_str(x)) is not None
        )
        for c in schema.type_constraints
    }


@cache  # two schema look-ups and a kernel-table walk per (op, version): once
def _beyond_ort(op: str, version: int) -> tuple[dict[str, frozenset[int]], ...] | None:
    try:
        new = onnx.defs.get_schema(op, version)
        old = onnx.defs.get_schema(op, version - 1)
    except onnx.defs.SchemaError:
        return None  # a new op: its schema's types
    # (the version before is in force at ORT_MAX_OPSET: what ONNX Runtime ran last)
    base = ort_kernels(op, old.since_version, ORT_MAX_OPSET)
    if base is None:
        return None
    before, after = _schema_types(old), _schema_types(new)
    added = {tv: types - before.get(tv, frozenset()) for tv, types in after.items()}
    return tuple({tv: ts | added.get(tv, frozenset()) for tv, ts in e.items()} for e in base)
