"""Opsets 27 and 28: above what ONNX Runtime 1.31 runs (ORT_MAX_OPSET). Models are checked
by the ONNX reference evaluator instead, a campaign refuses a backend whose range stops
below --opset, and the specs follow the op versions of 27 and 28."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import UsageError
from onnxfuzz.execute.sandbox import BackendInfo
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import KnownFault, run_reference, validate
from onnxfuzz.generate.lang.config import MAX_OPSET, ORT_MAX_OPSET, Config, ir_version_for
from onnxfuzz.run.campaign import negotiate_opset


def _info(label: str, lo: int, hi: int) -> BackendInfo:
    return BackendInfo(label, label, "1", (lo, hi), None)


def test_a_backend_below_the_opset_is_refused_by_name() -> None:
    ref, ort = _info("onnx-reference", 7, MAX_OPSET), _info("ort", 7, ORT_MAX_OPSET)
    with pytest.raises(UsageError, match=r"--opset 27: outside the range of ort;.*13\.\.26"):
        negotiate_opset([ref, ort], 27)
    assert negotiate_opset([ref, _info("tvm", 13, 27)], 27) == 27
    assert negotiate_opset([ref, ort], None) == 21  # no --opset: the default, as before


def test_ort_types_end_at_its_opsets_and_new_schema_types_come_in() -> None:
    # BitShift-28 adds the signed types to ONNX Runtime's unsigned kernels of BitShift-11.
    bitshift = set().union(*(e["T"] for e in dt.ort_kernels("BitShift", 28, 28) or []))
    assert {dt.INT8, dt.INT32, dt.UINT8, dt.UINT64} <= bitshift
    assert dt.INT8 not in set().union(*(e["T"] for e in dt.ort_kernels("BitShift", 11, 26) or []))
    # Celu-28 adds float16 and double; a new op has no ORT entry at all.
    celu = set().union(*(e["T"] for e in dt.ort_kernels("Celu", 28, 28) or []))
    assert {dt.FLOAT, dt.FLOAT16, dt.DOUBLE} <= celu
    assert dt.ort_kernels("SwiGLU", 28, 28) is None


def _optional_model(opset: int) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("Optional", ["x"], ["o"]),
        helper.make_node("OptionalGetElement", ["o"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version_for(opset)
    )
    return onnx.shape_inference.infer_shapes(model)  # the intermediate's type, as generated


def test_a_known_reference_fault_above_ort_is_unchecked_never_wrong() -> None:
    """The reference evaluator wraps an Optional's value in a list (audit.REFERENCE_LIMITS):
    at 28 no runtime can check the model, so no outputs are trusted or stored."""
    import numpy as np

    feeds = {"x": np.ones(2, np.float32)}
    with pytest.raises(KnownFault, match="Optional"):
        run_reference(_optional_model(28), feeds)
    v = validate(_optional_model(28), feeds)
    assert v.ok and v.unchecked and v.outputs is None
    v = validate(_optional_model(ORT_MAX_OPSET), feeds)  # ONNX Runtime runs it right
    assert v.ok and not v.unchecked and v.outputs is not None


def _attrs(op: str, opset: int, dtypes: set[int], seeds: int = 40) -> list[dict]:
    gen = Generator(
        Config(min_nodes=1, max_nodes=1, opset=opset, ops=frozenset([op]), dtypes=frozenset(dtypes))
    )
    out = []
    for s in range(seeds):
        case = gen.generate(s)
        v = validate(case.model, case.make_inputs(s))
        assert v.ok and v.finite and not v.unchecked, (s, v.problems)
        (node,) = [n for n in case.model.graph.node if n.op_type == op]
        types = {t.elem_type for t in [i.type.tensor_type for i in case.model.graph.input]}
        out.append({a.name: helper.get_attribute_value(a) for a in node.attribute} | {"_": types})
    return out


def test_version_28_semantics_are_drawn() -> None:
    # Mod-28 takes fmod=0 (floor) on floats; Mod-13 only fmod=1.
    assert {a.get("fmod", 0) for a in _attrs("Mod", 28, {dt.FLOAT})} == {0, 1}
    assert {a.get("fmod", 0) for a in _attrs("Mod", 26, {dt.FLOAT}, 10)} == {1}
    # SpaceToDepth-28 has DepthToSpace's mode.
    assert {a.get("mode", b"DCR") for a in _attrs("SpaceToDepth", 28, {dt.FLOAT})} == {
        b"DCR",
        b"CRD",
    }
    # BitShift-28 shifts signed integers (right: sign-extending).
    signed = _attrs("BitShift", 28, {dt.INT8, dt.INT32})
    assert {d for a in signed for d in a["_"]} & {dt.INT8, dt.INT32}


@pytest.mark.parametrize("opset", [27, 28])
def test_mixed_models_above_ort_are_valid_and_finite(opset: int) -> None:
    """Whole models (all ops, glue, control flow) at 27 and 28 on the reference evaluator;
    the few it is known to get wrong stay unchecked (a small share, not most)."""
    gen = Generator(Config(min_nodes=1, max_nodes=10, opset=opset))
    bad, unchecked = [], 0
    for seed in range(80):
        case = gen.generate(seed)
        v = validate(case.model, case.make_inputs(seed))
        unchecked += v.ok and v.unchecked is not None
        if not v.ok or not v.finite:
            bad.append((seed, case.ops, v.problems[:1] or ["non-finite output"]))
    assert not bad, bad[:3]
    assert unchecked < 80 // 4, unchecked


def test_averagepools_ceil_mode_fault_is_listed_exactly_where_the_evaluator_errs() -> None:
    """AveragePool with ceil_mode: the evaluator averages a last window that reaches two
    or more elements past the input wrong (an opset-28 corpus stored its 0.646 where the
    average is 0.093). The listed fault applies exactly where it disagrees with ONNX
    Runtime, over 1-D and 2-D windows of several lengths, kernels and strides."""
    import onnxruntime as ort
    from onnx.reference import ReferenceEvaluator

    from onnxfuzz.generate.corpus.reference_limits import reference_limits

    rng = np.random.default_rng(0)
    cases = [([1, 1, n], [k], [s]) for n in range(4, 10) for k in (2, 3, 4) for s in (2, 3, 4)]
    cases += [([3, 1, 4, 4], [3, 2], [3, 2]), ([1, 1, 5, 5], [3, 3], [3, 3])]
    listed = 0
    for shape, k, s in cases:
        node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=k, strides=s)
        node.attribute.append(helper.make_attribute("ceil_mode", 1))
        x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
        y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        graph = helper.make_graph([node], "g", [x_info], [y_info])
        opset = [helper.make_opsetid("", 21)]
        model = helper.make_model(graph, opset_imports=opset, ir_version=10)
        x = rng.standard_normal(shape).astype(np.float32)
        want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
        got = ReferenceEvaluator(model).run(None, {"x": x})[0]
        errs = got.shape != want.shape or not np.allclose(got, want, 1e-4, 1e-5)
        faulted = any(lim.op == "AveragePool" for lim in reference_limits(model))
        assert faulted == errs, (shape, k, s, got, want)
        listed += faulted
    assert listed > 0 and listed < len(cases), listed  # both kinds were tried
