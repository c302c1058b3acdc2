"""Reduction quality: planted bugs in 20-node models reduce to exactly their trigger,
the signature is preserved, and the reduced model is valid and no larger in any measure."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.corpus.validate import check_static
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.reduce.domains import value_faults
from onnxfuzz.reduce.measure import size_of
from onnxfuzz.reduce.reducer import reduce_case, reduce_model
from onnxfuzz.reduce.reproduce import Reproducer, Target

ADAPTERS = Path(__file__).resolve().parents[1] / "campaign" / "adapters.py"
OPS = frozenset(
    {
        "Mul",
        "Add",
        "Relu",
        "Sigmoid",
        "Tanh",
        "Neg",
        "Abs",
        "Exp",
        "Sub",
        "Transpose",
        "Reshape",
        "Concat",
        "Softmax",
        "MatMul",
        "ReduceSum",
    }
)
FLOAT32 = frozenset({1})

# planted bug -> (adapter, the trigger's op types, seeds to reduce, timeout per run)
PLANTED = {
    "wrong-sigmoid": ("WrongOp:op=Sigmoid", ["Sigmoid"], 8, 10.0),
    "mul-add-crash": ("PairCrash:first=Mul,then=Add", ["Add", "Mul"], 8, 10.0),
    "tanh-hang": ("Hang:op=Tanh", ["Tanh"], 3, 1.0),
}


@pytest.fixture(scope="module", params=sorted(PLANTED))
def planted(request) -> Iterator[tuple[str, Reproducer, list[str], int]]:
    adapter, trigger, n, timeout = PLANTED[request.param]
    label = f"{ADAPTERS}:{adapter}"
    with BackendPool(["ort", label], timeout=timeout) as pool:
        yield label, Reproducer(pool, Target(label, "ort")), trigger, n


def _findings(rep: Reproducer, gen: Generator, n: int) -> Iterator[tuple[Case, str]]:
    found = 0
    for seed in range(400):
        case = gen.generate(seed)
        a = rep.assess(case.model, case.make_inputs(seed))
        if a.signature is not None:
            yield case, a.signature
            found += 1
            if found == n:
                return
    raise AssertionError(f"only {found} findings in 400 seeds")


def _check(rep: Reproducer, sig: str, before, model, inputs, trigger: list[str]) -> None:
    ops = sorted(n.op_type for n in model.graph.node)
    assert ops == trigger, f"reduced to {ops}, trigger is {trigger}"
    rep.target.signature = sig
    assert rep(model, inputs), "the reduced model no longer shows the same signature"
    assert not check_static(model), "the reduced model is not valid"
    assert size_of(model, inputs).no_larger_than(before)


def test_choice_shrinking_reaches_the_trigger(planted) -> None:
    label, rep, trigger, n = planted
    gen = Generator(Config(min_nodes=20, max_nodes=20, ops=OPS, dtypes=FLOAT32))
    for case, sig in _findings(rep, gen, n):
        rep.target.signature = sig
        before = size_of(case.model, case.make_inputs(case.seed))
        r = reduce_case(gen, case, rep, budget_s=60)
        assert r.before.nodes == 20
        _check(rep, sig, before, r.model, r.inputs, trigger)


def test_graph_passes_alone_reduce_a_user_model(planted) -> None:
    """No recorded choices: only graph surgery (a model from elsewhere)."""
    label, rep, trigger, n = planted
    gen = Generator(Config(min_nodes=20, max_nodes=20, ops=OPS, dtypes=FLOAT32))
    for case, sig in list(_findings(rep, gen, min(n, 4))):
        model = case.model
        del model.metadata_props[:]  # nothing of onnxfuzz's left
        inputs = case.make_inputs(case.seed)
        rep.target.signature = sig
        r = reduce_model(model, inputs, rep, budget_s=90)
        _check(rep, sig, size_of(model, inputs), r.model, r.inputs, trigger)


def _sigmoid_pow(opset: int = 21) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Pow(Sigmoid(c), data): the Sigmoid keeps Pow's base positive whatever c is, and
    the constant c is negative."""
    h = onnx.helper
    f32 = onnx.TensorProto.FLOAT
    graph = h.make_graph(
        [
            h.make_node("Sigmoid", ["c"], ["base"], name="sigmoid0"),
            h.make_node("Pow", ["base", "data"], ["y"], name="pow0"),
        ],
        "sigmoid_pow",
        [h.make_tensor_value_info("data", f32, [3])],
        [h.make_tensor_value_info("y", f32, [3])],
        [onnx.numpy_helper.from_array(np.array(-0.5, np.float32), "c")],
        value_info=[h.make_tensor_value_info("base", f32, [])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=10)
    return model, {"data": np.array([1.0, 2.0, 3.0], np.float32)}


def test_reduction_never_feeds_a_node_values_its_spec_does_not_allow() -> None:
    """A Pow bug (planted) still shows with the Sigmoid bypassed, but Pow's base is then
    c = -0.5, outside the spec's domain (a negative base is NaN at any fractional
    exponent): a reducer must not hand that to a compiler engineer. (Found in a campaign:
    a reduced model fed Dropout a ratio of -0.31, which ONNX Runtime refuses unoptimized.)"""
    model, inputs = _sigmoid_pow()
    label = f"{ADAPTERS}:WrongOp:op=Pow"
    with BackendPool(["ort", label], timeout=10.0) as pool:
        rep = Reproducer(pool, Target(label, "ort"))
        a = rep.assess(model, inputs)
        assert a.signature is not None, "the planted Pow bug does not show"
        rep.target.signature = a.signature
        # The trap is real: with the Sigmoid bypassed the bug still shows, on a base
        # outside Pow's domain.
        bypassed = onnx.ModelProto()
        bypassed.CopyFrom(model)
        del bypassed.graph.node[0]
        bypassed.graph.node[0].input[0] = "c"
        del bypassed.graph.value_info[:]
        assert not check_static(bypassed)
        assert rep(bypassed, inputs)
        assert ("Pow:y", "X.values") in value_faults(bypassed, inputs)
        assert value_faults(model, {**inputs, "base": np.array(0.3775, np.float32)}) == set()
        r = reduce_model(model, inputs, rep, budget_s=60)
        assert rep(r.model, r.inputs), "the reduced model no longer shows the bug"
    assert r.ops == ["Pow"], onnx.printer.to_text(r.model.graph)  # the Sigmoid folded
    known = {i.name: onnx.numpy_helper.to_array(i) for i in r.model.graph.initializer}
    base = {**known, **r.inputs}[r.model.graph.node[0].input[0]]
    assert float(base) > 0, onnx.printer.to_text(r.model.graph)
    assert value_faults(r.model, r.inputs) == set()


def test_a_tvm_converter_crash_reduces_to_its_one_op() -> None:
    """Found in a campaign: TVM's Elu converter mixes a float32 constant into a float16
    graph, and Mul -> Elu reduced to two nodes, not one, because TVM named Elu's operand
    lv1 after a Mul and lv after a graph input (now one name), so each campaign hit of the
    bug behind another op (Mul, Einsum, ReduceSumSquare) became a bundle of its own. The
    model states no value_info, as models from elsewhere often do: the Mul is bypassed at
    the type shape inference gives its output."""
    h = onnx.helper
    f16 = onnx.TensorProto.FLOAT16
    graph = h.make_graph(
        [h.make_node("Mul", ["x", "x"], ["m"], name="mul0"), h.make_node("Elu", ["m"], ["y"])],
        "mul_elu",
        [h.make_tensor_value_info("x", f16, [2, 3])],
        [h.make_tensor_value_info("y", f16, [2, 3])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    inputs = {"x": np.linspace(-1, 1, 6, dtype=np.float16).reshape(2, 3)}
    with BackendPool(["ort", "tvm"], timeout=30.0) as pool:
        rep = Reproducer(pool, Target("tvm", "ort"))
        a = rep.assess(model, inputs)
        assert a.signature is not None and "R.subtract" in a.signature, a.signature
        rep.target.signature = a.signature
        r = reduce_model(model, inputs, rep, budget_s=60)
        assert rep(r.model, r.inputs), "the reduced model no longer shows the bug"
    assert r.ops == ["Elu"], onnx.printer.to_text(r.model.graph)
