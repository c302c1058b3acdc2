"""Reduction quality: planted bugs in 20-node models reduce to exactly their trigger,
the signature is preserved, and the reduced model is valid and simpler
(``Size.simpler_than``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.corpus.validate import check_static
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.judge.localize import expose_all
from onnxfuzz.reduce import graph_passes
from onnxfuzz.reduce.domains import value_faults
from onnxfuzz.reduce.graph_passes import prune
from onnxfuzz.reduce.measure import size_of
from onnxfuzz.reduce.reducer import Reduced, reduce_case, reduce_model
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

# planted bug -> (adapter, the trigger's op types, seeds to reduce, timeout per run). A
# crash costs a worker's start-up per candidate that keeps it (ORT's import starts a
# thread: no fork server), ~12 s a seed: 4 seeds, as the graph passes alone reduce.
PLANTED = {
    "wrong-sigmoid": ("WrongOp:op=Sigmoid", ["Sigmoid"], 8, 10.0),
    "mul-add-crash": ("PairCrash:first=Mul,then=Add", ["Add", "Mul"], 4, 10.0),
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
    after = size_of(model, inputs)
    assert after == before or after.simpler_than(before)


def _reduce_found(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    backends: list[str],
    target: str,
    reference: str,
    shows: str = "",
    trap: Callable[[Reproducer, BackendPool], None] | None = None,
    timeout: float = 10.0,
) -> Reduced:
    """``target``'s failure on ``model`` against ``reference`` (its signature holding
    ``shows``), reduced by the graph passes alone; ``trap``: the test's own checks on the
    reproducer before it reduces. The reduced model must still fail the same way."""
    with BackendPool(backends, timeout=timeout) as pool:
        rep = Reproducer(pool, Target(target, reference))
        a = rep.assess(model, inputs)
        assert a.signature is not None and shows in a.signature, a.signature
        rep.target.signature = a.signature
        if trap is not None:
            trap(rep, pool)
        r = reduce_model(model, inputs, rep, budget_s=60)
        assert rep(r.model, r.inputs), "the reduced model no longer shows the bug"
    return r


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


def _targeting(
    pool: BackendPool, label: str, model: onnx.ModelProto, inputs: dict[str, np.ndarray]
) -> Reproducer:
    """A reproducer of the planted bug of ``label`` as ``model`` shows it against ort."""
    rep = Reproducer(pool, Target(label, "ort"))
    a = rep.assess(model, inputs)
    assert a.signature is not None, f"the planted bug of {label} does not show"
    rep.target.signature = a.signature
    return rep


def _first_node_bypassed(model: onnx.ModelProto, slot: int, source: str) -> onnx.ModelProto:
    """``model`` without its first node, the next reading ``source`` at input ``slot``
    (the bypass a reducer tries), declared intermediate types dropped."""
    bypassed = onnx.ModelProto()
    bypassed.CopyFrom(model)
    del bypassed.graph.node[0]
    bypassed.graph.node[0].input[slot] = source
    del bypassed.graph.value_info[:]
    return bypassed


def test_reduction_never_feeds_a_node_values_its_spec_does_not_allow() -> None:
    """A Pow bug (planted) still shows with the Sigmoid bypassed, but Pow's base is then
    c = -0.5, outside the spec's domain (a negative base is NaN at any fractional
    exponent): a reducer must not hand that to a compiler engineer. (Found in a campaign:
    a reduced model fed Dropout a ratio of -0.31, which ONNX Runtime refuses unoptimized.)"""
    model, inputs = _sigmoid_pow()
    label = f"{ADAPTERS}:WrongOp:op=Pow"
    with BackendPool(["ort", label], timeout=10.0) as pool:
        rep = _targeting(pool, label, model, inputs)
        # The trap is real: with the Sigmoid bypassed the bug still shows, on a base
        # outside Pow's domain.
        bypassed = _first_node_bypassed(model, 0, "c")
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


def _clip_gather() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Gather on indices Clip keeps in range; x itself is out of range."""
    h = onnx.helper
    i64, f32 = onnx.TensorProto.INT64, onnx.TensorProto.FLOAT
    graph = h.make_graph(
        [
            h.make_node("Clip", ["x", "lo", "hi"], ["idx"], name="clip0"),
            h.make_node("Gather", ["data", "idx"], ["y"], name="gather0"),
        ],
        "clip_gather",
        [h.make_tensor_value_info("data", f32, [1]), h.make_tensor_value_info("x", i64, [2])],
        [h.make_tensor_value_info("y", f32, [2])],
        [
            onnx.numpy_helper.from_array(np.array(-1, np.int64), "lo"),
            onnx.numpy_helper.from_array(np.array(0, np.int64), "hi"),
        ],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    return model, {"data": np.array([1.0], np.float32), "x": np.array([-4, 3], np.int64)}


def test_reduction_keeps_no_model_that_no_backend_runs() -> None:
    """A planted Gather kernel faults on a negative index (here -1, valid), and in the
    same words on any index out of range, as an unchecked kernel does. Bypassing the Clip
    still fails so, on x = [-4, 3], which every backend refuses: the reducer kept it (the
    value-domain check had no values to judge by, since no backend ran it) and filed a
    model a compiler engineer would close as invalid. A candidate no backend runs, where
    one ran the model the reduction started from, is not kept."""
    model, inputs = _clip_gather()
    label = f"{ADAPTERS}:UncheckedGather"
    with BackendPool(["ort", label], timeout=10.0) as pool:
        rep = _targeting(pool, label, model, inputs)
        # The trap is real: the Clip bypassed, the bug shows in the same words, and the
        # reference cannot run the model.
        bypassed = _first_node_bypassed(model, 1, "x")
        assert not check_static(bypassed)
        assert rep(bypassed, inputs)
        assert rep.reference_values(bypassed, inputs) is None
        r = reduce_model(model, inputs, rep, budget_s=60)
        assert rep(r.model, r.inputs), "the reduced model no longer shows the bug"
        values = rep.reference_values(r.model, r.inputs)
    assert r.ops == ["Gather"], onnx.printer.to_text(r.model.graph)
    assert values is not None, (onnx.printer.to_text(r.model.graph), r.inputs)
    indices = {**r.inputs, **values}[r.model.graph.node[0].input[1]]
    assert ((indices >= -1) & (indices <= 0)).all() and (indices < 0).any(), indices


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
    r = _reduce_found(model, inputs, ["ort", "tvm"], "tvm", "ort", "R.subtract", timeout=30.0)
    assert r.ops == ["Elu"], onnx.printer.to_text(r.model.graph)


def test_a_node_gives_way_to_an_input_holding_more_distinct_values() -> None:
    """Found with a planted bug in a campaign: Transpose(weight) -> Softmax stayed at two
    nodes. The bug shows only on a value computed at run time (a constant input is folded
    right), so the Transpose could become an input, not a constant, and that input holds
    more distinct values than the model's inputs did: the reducer weighed those values
    against a node and kept the node. Here an Add broadcasts an all-zero input onto a
    weight (no earlier tensor has its shape, so nothing can be bypassed): its output as an
    input holds six values where the input held one."""
    h = onnx.helper
    f32 = onnx.TensorProto.FLOAT
    graph = h.make_graph(
        [
            h.make_node("Add", ["x", "w"], ["t"], name="add0"),
            h.make_node("Sigmoid", ["t"], ["y"], name="sigmoid0"),
        ],
        "add_sigmoid",
        [h.make_tensor_value_info("x", f32, [3])],
        [h.make_tensor_value_info("y", f32, [2, 3])],
        [onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")],
        value_info=[h.make_tensor_value_info("t", f32, [2, 3])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    inputs = {"x": np.zeros(3, np.float32)}
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    del folded.graph.node[0]
    folded.graph.initializer.append(
        onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "t")
    )
    const = prune(folded, inputs)

    def trap(rep: Reproducer, pool: BackendPool) -> None:
        assert not rep(const.model, const.inputs), "the bug shows on a constant: no trap"

    label = f"{ADAPTERS}:WrongOpAtRunTime:op=Sigmoid"
    r = _reduce_found(model, inputs, ["ort", label], label, "ort", trap=trap)
    assert r.ops == ["Sigmoid"], onnx.printer.to_text(r.model.graph)
    assert size_of(r.model, r.inputs).simpler_than(size_of(model, inputs))


def test_a_node_with_an_output_nothing_reads_can_become_an_input() -> None:
    """Found in a campaign: ORT's FuseReluClip throws on Relu -> Clip with an int8 min,
    and TopK -> Relu -> Clip stayed at three nodes. TopK's indices, which nothing read,
    had no declared type, so they were not among the values a replaced node's outputs
    take, and TopK could not become an input (no earlier tensor has its output's shape,
    so it could not be bypassed either). An output nothing reads now goes with its
    node."""
    h = onnx.helper
    i8 = onnx.TensorProto.INT8
    graph = h.make_graph(
        [
            h.make_node("TopK", ["x", "k"], ["top", "index"], name="topk0"),
            h.make_node("Relu", ["top"], ["r"], name="relu0"),
            h.make_node("Clip", ["r", "lo"], ["y"], name="clip0"),
        ],
        "topk_relu_clip",
        [h.make_tensor_value_info("x", i8, [1, 2])],
        [h.make_tensor_value_info("y", i8, [1, 1])],
        [
            onnx.numpy_helper.from_array(np.array([1], np.int64), "k"),
            onnx.numpy_helper.from_array(np.array(-1, np.int8), "lo"),
        ],
        value_info=[
            h.make_tensor_value_info("top", i8, [1, 1]),
            h.make_tensor_value_info("r", i8, [1, 1]),
        ],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    inputs = {"x": np.array([[3, -4]], np.int8)}
    backends = ["ort", "ort:opt=none"]
    r = _reduce_found(model, inputs, backends, "ort", "ort:opt=none", "FuseReluClip")
    assert r.ops == ["Relu", "Clip"], onnx.printer.to_text(r.model.graph)


def test_a_crash_of_the_reference_reduces_with_another_backends_values() -> None:
    """Found in a campaign (ort against ort:opt=none and the reference evaluator): ORT
    throws on DequantizeLinear -> MatMul with int32 data (its MatMulIntegerToFloat fusion
    takes no int32), with every intermediate exposed too. ORT was the campaign's
    reference and the backend at fault, so the values a removed node's output takes came
    from the backend that throws: none, and Cast -> DequantizeLinear -> MatMul stayed at
    three nodes (the Cast's int32 output has no earlier tensor to bypass it with). The
    values now come from another backend."""
    h = onnx.helper
    f32 = onnx.TensorProto.FLOAT
    graph = h.make_graph(
        [
            h.make_node("Cast", ["x"], ["c"], name="cast0", to=onnx.TensorProto.INT32),
            h.make_node("DequantizeLinear", ["c", "scale"], ["d"], name="dq0"),
            h.make_node("MatMul", ["d", "d"], ["y"], name="matmul0"),
        ],
        "cast_dq_matmul",
        [h.make_tensor_value_info("x", onnx.TensorProto.INT64, [1])],
        [h.make_tensor_value_info("y", f32, [])],
        [onnx.numpy_helper.from_array(np.array(0.66, np.float32), "scale")],
        value_info=[
            h.make_tensor_value_info("c", onnx.TensorProto.INT32, [1]),
            h.make_tensor_value_info("d", f32, [1]),
        ],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    inputs = {"x": np.array([3], np.int64)}

    def trap(rep: Reproducer, pool: BackendPool) -> None:
        exposed = expose_all(model).SerializeToString()
        assert pool.run_one("ort", exposed, inputs).outputs is None, "ORT gives values"

    backends = ["ort", "ort:opt=none"]
    r = _reduce_found(model, inputs, backends, "ort", "ort", "MatMulIntegerToFloat", trap)
    assert r.ops == ["DequantizeLinear", "MatMul"], onnx.printer.to_text(r.model.graph)


def test_a_bug_that_needs_a_negative_input_keeps_one_in_the_fewest_values() -> None:
    """Found with a planted bug (Abs returning its input): zeros and ones hide it, so the
    reduced input kept four arbitrary values. Each value's sign keeps the negative one."""
    h = onnx.helper
    f32 = onnx.TensorProto.FLOAT
    graph = h.make_graph(
        [h.make_node("Abs", ["x"], ["y"], name="abs0")],
        "abs",
        [h.make_tensor_value_info("x", f32, [4])],
        [h.make_tensor_value_info("y", f32, [4])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    inputs = {"x": np.array([2.94, 1.09, 0.65, -2.17], np.float32)}
    label = f"{ADAPTERS}:AbsAsIdentity"
    r = _reduce_found(model, inputs, ["ort", label], label, "ort")
    assert r.inputs["x"].tolist() == [1.0, 1.0, 1.0, -1.0], r.inputs


def test_a_candidate_made_twice_runs_once() -> None:
    """Two passes, or two choice records, often make the same candidate: a deterministic
    target's verdict is remembered (by the model's bytes and the inputs), an intermittent
    one's is not (its next run may show what this one did not)."""
    label = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    gen = Generator(Config(min_nodes=6, max_nodes=6, ops=OPS, dtypes=FLOAT32))
    with BackendPool(["ort", label], timeout=10.0) as pool:
        rep = Reproducer(pool, Target(label, "ort"))
        case, sig = next(_findings(rep, gen, 1))
        inputs = case.make_inputs(case.seed)
        rep.target.signature = sig
        runs = rep.runs
        assert rep(case.model, inputs) and rep(case.model, inputs)
        assert rep.runs == runs + 1
        other = {k: v + 1 for k, v in inputs.items()}  # other inputs: another candidate
        rep(case.model, other)
        assert rep.runs == runs + 2
        flaky = Reproducer(pool, Target(label, "ort", sig, attempts=2))
        assert flaky(case.model, inputs) and flaky(case.model, inputs)
        assert flaky.runs == 2  # shown at the first of its attempts, each time


def test_a_converter_crash_checks_its_candidates_at_the_import_alone() -> None:
    """TVM's Elu converter fails in ``from_onnx`` (the finding above): every candidate is
    checked by the import alone (``Test.frontend``), none is built and run, and the
    reduced model still fails in a whole compile."""
    h = onnx.helper
    f16 = onnx.TensorProto.FLOAT16
    graph = h.make_graph(
        [
            h.make_node("Mul", ["x", "x"], ["m"], name="mul0"),
            h.make_node("Relu", ["m"], ["r"], name="relu0"),
            h.make_node("Elu", ["r"], ["y"], name="elu0"),
        ],
        "mul_relu_elu",
        [h.make_tensor_value_info("x", f16, [2, 3])],
        [h.make_tensor_value_info("y", f16, [2, 3])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    inputs = {"x": np.linspace(-1, 1, 6, dtype=np.float16).reshape(2, 3)}
    with BackendPool(["ort", "tvm"], timeout=30.0) as pool:
        rep = Reproducer(pool, Target("tvm", "ort"))
        whole = rep.assess(model, inputs)
        assert whole.signature is not None and whole.judgement.stage == "compile"
        rep.target.signature = whole.signature
        runs = rep.runs
        r = reduce_model(model, inputs, rep, budget_s=60)
        assert rep.at_import
        # every run but the final one (the message of the reduced model) was an import
        assert rep.runs - runs == rep.frontend_runs + 1, (rep.runs - runs, rep.frontend_runs)
        assert r.ops == ["Elu"], onnx.printer.to_text(r.model.graph)
        assert rep.assess(r.model, r.inputs).signature == whole.signature  # built and run


def test_a_mismatch_never_checks_candidates_at_the_import() -> None:
    """A wrong value shows only when the model runs: the import check is not turned on
    (here an adapter without the hook: the whole test runs, and its clean outcome says
    the import alone cannot show the failure)."""
    label = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    gen = Generator(Config(min_nodes=4, max_nodes=4, ops=OPS, dtypes=FLOAT32))
    with BackendPool(["ort", label], timeout=10.0) as pool:
        rep = Reproducer(pool, Target(label, "ort"))
        case, sig = next(_findings(rep, gen, 1))
        rep.target.signature = sig
        assert not rep.check_at_import(case.model, case.make_inputs(case.seed))
        r = reduce_case(gen, case, rep, budget_s=60)
        assert not rep.at_import and r.ops == ["Sigmoid"]


def _chain_model(ops: list[str]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    h = onnx.helper
    nodes, prev = [], "x"
    for k, op in enumerate(ops):
        name = f"{op.lower()}{k}"
        nodes.append(h.make_node(op, [prev], [f"{name}_out"], name=name))
        prev = f"{name}_out"
    graph = h.make_graph(
        nodes,
        "chain",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [h.make_tensor_value_info(prev, onnx.TensorProto.FLOAT, [2, 3])],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    return model, {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}


@pytest.mark.parametrize(
    ("adapter", "op"),
    [
        ("Raise:op=Relu", "Relu"),  # "lowering of Relu failed": names the op
        ("WrongOp:op=Sigmoid", "Sigmoid"),  # the judge's "first diverging node: sigmoid4"
    ],
)
def test_the_node_a_failure_names_is_tried_alone_first(monkeypatch, adapter, op) -> None:
    """torch.compile left a 7-node Reshape crash at its 30 s budget (a model takes it 1-2
    s): its error named reshape.py, and Reshape alone, fed the reference's values, showed
    it. The node a failure names is the first candidate: one run reduces an 8-node chain
    to it, where the passes alone take a run per node."""
    ops = ["Abs", "Neg", "Exp", "Tanh", "Sigmoid", "Relu", "Softsign", "Abs"]
    model, inputs = _chain_model(ops)
    label = f"{ADAPTERS}:{adapter}"

    def reduced(named: bool) -> Reduced:
        if not named:
            monkeypatch.setattr(graph_passes, "named_nodes", lambda model, message: [])
        with BackendPool(["ort", label], timeout=10.0) as pool:
            rep = Reproducer(pool, Target(label, "ort"))
            a = rep.assess(model, inputs)
            assert a.signature is not None, a.judgement
            rep.target.signature = a.signature
            r = reduce_model(model, inputs, rep, budget_s=60)
            assert rep(r.model, r.inputs) and r.complete
        monkeypatch.undo()
        return r

    first, without = reduced(named=True), reduced(named=False)
    assert first.ops == [op], onnx.printer.to_text(first.model.graph)
    assert first.stats()["isolate-named"]["tried"] >= 1
    assert first.stats()["isolate-named"]["kept"] == 1
    # the first candidate tried was the one kept: no other pass kept a node before it
    assert sum(st["kept"] for st in first.stats().values() if st is not None) <= 2
    assert without.ops == [op]
    assert first.runs < without.runs, (first.runs, without.runs)


def _resize_into_a_sequence() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Resize (cubic) -> SequenceConstruct -> SequenceLength: the graph's one output is
    the sequence's length, an int64 scalar no tensor before it matches, read from a
    sequence (audit 16, D4: a campaign's Resize hang filed with these 3 nodes)."""
    h = onnx.helper
    f32 = onnx.TensorProto.FLOAT
    graph = h.make_graph(
        [
            h.make_node(
                "Resize", ["x", "", "scales"], ["r"], name="resize0", mode="cubic", axes=[0]
            ),
            h.make_node("SequenceConstruct", ["r"], ["seq"], name="sequenceconstruct0"),
            h.make_node("SequenceLength", ["seq"], ["n"], name="sequencelength0"),
        ],
        "resize_sequence",
        [h.make_tensor_value_info("x", f32, [1, 2])],
        [h.make_tensor_value_info("n", onnx.TensorProto.INT64, [])],
        [onnx.numpy_helper.from_array(np.array([2.0], np.float32), "scales")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)], ir_version=10)
    return model, {"x": np.array([[1.0, 2.0]], np.float32)}


def test_a_hang_behind_a_sequence_reduces_to_the_hanging_node() -> None:
    """A hang's message names no node, and no pass but a cut reaches the Resize's tensor
    behind the sequence: the 3 nodes stood as a fixed point, every pass after
    node-to-input trying nothing. A hang is first cut at each tensor, fewest nodes first:
    the Resize alone, at one candidate that still hangs."""
    model, inputs = _resize_into_a_sequence()
    assert not check_static(model)
    label = f"{ADAPTERS}:Hang:op=Resize"
    r = _reduce_found(model, inputs, ["ort", label], label, "ort", "|timeout|", timeout=1.0)
    assert r.ops == ["Resize"], onnx.printer.to_text(r.model.graph)
    assert r.complete
    assert [o.name for o in r.model.graph.output] == ["r"]
    assert r.stats()["cut-at-tensor"]["kept"] == 1
