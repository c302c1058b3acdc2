"""Spec completeness: do ONNX's own node tests lie inside the specs' domains?

Each single-node case from ``onnx.backend.test.loader.load_node_model_tests()`` is replayed
through its op's spec with a ``CheckBuilder``: every observed variable (input count, dtypes,
ranks, dims, attributes, constant inputs) must lie in the domain the spec offers, and the
spec's output shapes must equal the test's. A case outside only because of the configured
rank/dim bounds is an exclusion, as are element types onnxfuzz does not generate; each
exclusion carries its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.build.builder import CheckBuilder, OutOfDomain
from onnxfuzz.generate.lang.config import MAX_DIM, MAX_OPSET, MAX_RANK, Config
from onnxfuzz.generate.lang.spec import OpSpec, load_specs, op_info

WIDE = {"max_rank": MAX_RANK, "max_dim": MAX_DIM}


@dataclass
class NodeCase:
    name: str
    op: str
    opset: int
    attrs: dict[str, Any]
    inputs: list[tuple[int, tuple[int, ...], np.ndarray | None] | None]
    outputs: list[tuple[int, tuple[int, ...]]]
    tensors_only: bool = True  # no sequence- or optional-typed input or output


@dataclass
class CaseOutcome:
    case: str
    op: str
    status: str  # "inside" | "excluded" | "outside"
    reason: str = ""


def attr_value(a: onnx.AttributeProto) -> Any:
    """An attribute's value as a spec names it: strings decoded, tensors as arrays."""
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [x.decode() for x in v]
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    return v


def node_cases() -> list[NodeCase]:
    from onnx.backend.test.loader import load_node_model_tests

    out = []
    for tc in load_node_model_tests():
        g = tc.model.graph
        if len(g.node) != 1 or g.node[0].domain not in ("", "ai.onnx") or not tc.data_sets:
            continue
        node = g.node[0]
        opset = next((o.version for o in tc.model.opset_import if o.domain in ("", "ai.onnx")), 0)
        feeds = dict(zip([i.name for i in g.input], tc.data_sets[0][0], strict=False))
        inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
        types = {vi.name: vi.type.tensor_type.elem_type for vi in g.input}
        inputs: list[tuple[int, tuple[int, ...], np.ndarray | None] | None] = []
        for name in node.input:
            if not name:
                inputs.append(None)
                continue
            data = feeds.get(name, inits.get(name))
            if isinstance(data, onnx.TensorProto):  # how the Cast tests store their inputs
                data = numpy_helper.to_array(data)
            if isinstance(data, np.generic):  # numpy scalars (CumSum's axis in its tests)
                data = np.asarray(data)
            if data is None or not isinstance(data, np.ndarray):
                inputs.append((types.get(name, 0), (), None))
                continue
            et = types.get(name) or helper.np_dtype_to_tensor_dtype(data.dtype)
            inputs.append((et, tuple(data.shape), data))
        outputs = []
        expected = tc.data_sets[0][1]
        for i, vi in enumerate(g.output):
            tt = vi.type.tensor_type
            shape = tuple(d.dim_value for d in tt.shape.dim)
            # A data-dependent dim is declared unknown (Unique-28's tests): the expected
            # output has the real one.
            if any(not d.HasField("dim_value") for d in tt.shape.dim) and i < len(expected):
                data = expected[i]
                if isinstance(data, np.ndarray):
                    shape = tuple(data.shape)
            outputs.append((tt.elem_type, shape))
        attrs = {a.name: attr_value(a) for a in node.attribute}
        typed = all(vi.type.HasField("tensor_type") for vi in list(g.input) + list(g.output))
        out.append(NodeCase(tc.name, node.op_type, opset, attrs, inputs, outputs, typed))
    return out


def _run(spec: OpSpec, case: NodeCase, cfg: Config) -> None:
    info = op_info(spec.op_type, cfg.opset)
    assert info is not None
    b = CheckBuilder(spec, info, cfg, case.attrs, case.inputs, case.outputs)
    spec.build(b, spec.params)
    b.check_consumed()


def _opset_for(spec: OpSpec, case: NodeCase) -> tuple[int | None, str]:
    """An opset inside the spec's range at which the op has the case's op version."""
    there = op_info(spec.op_type, case.opset)
    if there is None:
        return None, f"no schema for {spec.op_type} at opset {case.opset}"
    hi = min(MAX_OPSET, spec.until)
    candidates = [case.opset] if spec.since <= case.opset <= hi else []
    candidates += list(range(spec.since, hi + 1))
    for opset in candidates:
        here = op_info(spec.op_type, opset)
        if here is not None and here.version == there.version:
            return opset, ""
    return None, (f"op version {there.version} is outside the spec's opsets {spec.since}..{hi}")


def _unsupported_dtype(spec: OpSpec, case: NodeCase, opset: int) -> str:
    """An element type onnxfuzz never generates, or one without an ORT CPU kernel."""
    info = op_info(spec.op_type, opset)
    assert info is not None
    for attr in ("to",):  # a target element type given as an attribute (Cast)
        et = case.attrs.get(attr)
        if isinstance(et, int) and et not in dt.DEFAULT:
            return f"target element type {onnx.TensorProto.DataType.Name(et)} is not generated"
    names = list(info.input_pos)
    for pos, o in enumerate(case.inputs):
        if o is None:
            continue
        et = o[0]
        if et not in dt.DEFAULT:
            return f"element type {onnx.TensorProto.DataType.Name(et)} is not generated"
        formal = names[min(pos, len(names) - 1)]
        tv = info.input_type[formal]
        kernels = dt.ort_kernels(spec.op_type, info.version, opset)
        if (
            kernels
            and tv in info.schema_type_vars
            and any(tv in k for k in kernels)
            and not any(et in k.get(tv, frozenset()) for k in kernels)
        ):
            return f"ONNX Runtime has no CPU kernel for {spec.op_type}({dt.NAMES[et]})"
    return ""


def deliberate_exclusions() -> dict[str, str]:
    """Node-test cases a spec leaves out on purpose: each spec module's ``NOT_GENERATED``
    table (case name -> reason)."""
    import sys

    load_specs()
    out: dict[str, str] = {}
    for name, mod in sorted(sys.modules.items()):
        if name.startswith("onnxfuzz.specs.") and hasattr(mod, "NOT_GENERATED"):
            out.update(mod.NOT_GENERATED)
    return out


def check_case(case: NodeCase, base: Config | None = None) -> CaseOutcome:
    specs = load_specs()
    spec = specs.get(case.op)
    if spec is None:
        return CaseOutcome(case.name, case.op, "excluded", "no spec for this op")
    deliberate = deliberate_exclusions().get(case.name)
    if deliberate:
        return CaseOutcome(case.name, case.op, "excluded", deliberate)
    if not case.tensors_only:
        return CaseOutcome(
            case.name, case.op, "excluded", "sequence or optional values: only tensors are replayed"
        )
    opset, why = _opset_for(spec, case)
    if opset is None:
        return CaseOutcome(case.name, case.op, "excluded", why)
    cfg = replace(base or Config(), opset=opset, dtypes=dt.ALL)
    try:
        _run(spec, case, cfg)
        return CaseOutcome(case.name, case.op, "inside")
    except (OutOfDomain, ConfigError) as first:
        if any(o is not None and 0 in o[1] for o in case.inputs) or any(
            0 in shape for _, shape in case.outputs
        ):
            return CaseOutcome(case.name, case.op, "excluded", "zero-size tensor (never generated)")
        reason = _unsupported_dtype(spec, case, opset)
        if reason:
            return CaseOutcome(case.name, case.op, "excluded", reason)
        try:
            _run(spec, case, replace(cfg, **WIDE))
        except (OutOfDomain, ConfigError) as second:
            return CaseOutcome(case.name, case.op, "outside", str(second))
        return CaseOutcome(case.name, case.op, "excluded", f"exceeds rank/dim bounds: {first}")
