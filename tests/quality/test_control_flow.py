"""Control flow (If, Loop, Scan): bodies drawn by the solver itself, nested two levels.

A corpus with control flow is valid in ONNX Runtime (checker, strict shape inference, a
run), finite, byte-identical per seed and replayable from its choices, and reaches depth 2;
--max-depth caps the nesting. The reduction passes for subgraphs (inline an If branch,
unroll a Loop, shrink a body) make valid models, and a planted failure inside a body
reduces to the trigger alone (graph passes, and choice shrinking first).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest

from onnxfuzz.errors import ConfigError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import check_static, run_reference, validate
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.measure.metrics import features
from onnxfuzz.reduce import control
from onnxfuzz.reduce.graph_passes import State, cut_outputs, prune
from onnxfuzz.reduce.measure import size_of
from onnxfuzz.reduce.reducer import reduce_case, reduce_model
from onnxfuzz.reduce.reproduce import Reproducer, Target

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from check_intervals import check  # noqa: E402

ADAPTERS = Path(__file__).resolve().parents[1] / "campaign" / "adapters.py"
CF = ("If", "Loop", "Scan")
PLAIN = (
    "Add", "Mul", "Sub", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Div", "MatMul", "Reshape",
    "Transpose", "Concat", "Slice", "Cast", "ReduceSum", "ReduceMax", "Greater", "Equal",
    "Where", "Gather", "Clip",
)  # fmt: skip
OPS = frozenset(CF + PLAIN)
# Reduction: a planted crash on Sigmoid anywhere, with fewer ops (Sigmoid drawn often)
REDUCE_OPS = frozenset(
    {"If", "Loop", "Sigmoid", "Add", "Mul", "Relu", "Tanh", "Exp", "Reshape", "Transpose", "Concat"}
)


def depth(g: onnx.GraphProto) -> int:
    return max((1 + depth(s) for n in g.node for s in control.subgraphs(n)), default=0)


def all_ops(g: onnx.GraphProto) -> list[str]:
    return [
        op
        for n in g.node
        for op in [n.op_type, *(o for s in control.subgraphs(n) for o in all_ops(s))]
    ]


@pytest.mark.parametrize("opset", [13, 21, 26])
def test_control_flow_corpus_is_valid_finite_deterministic_and_nested(opset: int) -> None:
    cfg = Config(min_nodes=3, max_nodes=10, opset=opset, ops=OPS)
    gen, again = Generator(cfg), Generator(cfg)
    bad, non_finite, depths, seen = [], [], [], set()
    for seed in range(200):
        case = gen.generate(seed)
        data = case.model.SerializeToString()
        assert again.generate(seed).model.SerializeToString() == data, f"seed {seed}"
        replay = again.generate(seed + 10_000, prefix=case.choices)
        replay.model.graph.name = case.model.graph.name
        assert replay.model.graph.SerializeToString() == case.model.graph.SerializeToString()
        depths.append(depth(case.model.graph))
        seen.update(all_ops(case.model.graph))
        v = validate(case.model, case.make_inputs(seed))
        if not v.ok:
            bad.append((seed, v.problems[0][:300]))
        elif not v.finite:
            non_finite.append(seed)
    assert not bad, bad[:3]
    assert not non_finite, non_finite[:10]
    assert set(CF) <= seen
    assert max(depths) == 2  # the default --max-depth, reached
    assert sum(d > 0 for d in depths) >= 50  # control flow in a good share of models


def test_outputs_of_control_flow_stay_inside_their_intervals() -> None:
    gen = Generator(Config(min_nodes=1, max_nodes=8, ops=OPS))
    violations = [v for seed in range(80) for v in check(gen, seed)]
    assert not violations, violations[:5]


def test_max_depth_caps_nesting_and_zero_turns_control_flow_off() -> None:
    shallow = Generator(Config(min_nodes=3, max_nodes=10, ops=OPS, max_depth=1))
    assert max(depth(shallow.generate(s).model.graph) for s in range(100)) == 1
    deep = Generator(Config(min_nodes=3, max_nodes=10, ops=OPS, max_depth=3, body_nodes=4))
    assert max(depth(deep.generate(s).model.graph) for s in range(100)) == 3
    off = Generator(Config(ops=OPS, max_depth=0))
    assert set(CF) <= set(off.skipped) and "--max-depth" in off.skipped["If"]
    with pytest.raises(ConfigError, match="--max-depth"):
        Generator(Config(ops=frozenset(CF), max_depth=0))
    with pytest.raises(ConfigError, match="--max-depth"):
        Config(max_depth=9)


def test_metrics_count_body_nodes_and_ops() -> None:
    gen = Generator(Config(min_nodes=3, max_nodes=10, ops=OPS))
    for seed in range(40):
        model = gen.generate(seed).model
        f = features(model)
        assert f.nodes == size_of(model, {}).nodes  # every node, bodies' included
        assert f.ops == set(all_ops(model.graph))


def test_subgraph_passes_make_valid_models() -> None:
    """Every candidate of inline-if, unroll-loop and shrink-body (after pruning), on the
    models and on their one-output cuts, passes the checker and strict shape inference
    and runs in ONNX Runtime."""
    # (wide values off: the passes keep types and shapes, not values. Under the default
    # share, on seed 56 a shrink-body candidate puts a wide graph input where a Gather's
    # indices were, past its data's axis: a candidate no backend runs, which the reducer
    # refuses, test_reduction.py::test_reduction_keeps_no_model_that_no_backend_runs)
    gen = Generator(Config(min_nodes=3, max_nodes=10, ops=OPS, wide_values=0.0))
    tried: dict[str, int] = {}
    for seed in range(60):
        case = gen.generate(seed)
        inputs = case.make_inputs(seed)
        states = [State(case.model, inputs), *cut_outputs(State(case.model, inputs))]
        for s in states:
            for name, make in (
                ("inline-if", control.inline_ifs),
                ("unroll-loop", control.unroll_loops),
                ("shrink-body", control.shrink_bodies),
            ):
                for m in make(s.model):
                    c = prune(m, s.inputs)
                    tried[name] = tried.get(name, 0) + 1
                    assert not check_static(c.model), (seed, name, check_static(c.model))
                    run_reference(c.model, c.inputs)
    assert min(tried.values()) >= 20, tried


def test_an_inlined_branch_exposes_no_output_without_a_shape() -> None:
    """A spliced body node's output nothing reads becomes a graph output only where shape
    inference gives it a shape: a Loop's carried value typed by its element type alone
    (seed 35 here) made the checker refuse every inline-if candidate of the model."""
    gen = Generator(Config(min_nodes=3, max_nodes=10, ops=OPS, wide_values=0.2))
    case = gen.generate(35)
    candidates = list(control.inline_ifs(case.model))
    assert candidates
    for m in candidates:
        assert not check_static(prune(m, case.make_inputs(35)).model)


def _nested_findings(rep: Reproducer, gen: Generator, n: int, wanted: Callable[[State], bool]):
    """Findings whose trigger sits only inside a body, and whose model pruned of what no
    output needs is ``wanted``."""
    found = 0
    for seed in range(600):
        case = gen.generate(seed)
        if "Sigmoid" in [x.op_type for x in case.model.graph.node]:
            continue
        inputs = case.make_inputs(seed)
        a = rep.assess(case.model, inputs)
        if a.signature is None:
            continue
        m = onnx.ModelProto()
        m.CopyFrom(case.model)
        rep.target.signature = a.signature
        if not wanted(prune(m, inputs)):
            continue
        yield case, a.signature
        found += 1
        if found == n:
            return
    raise AssertionError(f"only {found} findings in 600 seeds")


def _live_nested_findings(rep: Reproducer, gen: Generator, n: int):
    """Triggers that do not need dead code: the pruned model still fails."""
    return _nested_findings(rep, gen, n, lambda pruned: rep(pruned.model, pruned.inputs))


@pytest.fixture(scope="module")
def nested_sigmoid():
    label = f"{ADAPTERS}:RaiseNested:op=Sigmoid"
    with BackendPool(["ort", label], timeout=10.0) as pool:
        yield Reproducer(pool, Target(label, "ort"))


def _reduced(rep: Reproducer, sig: str, before, model, inputs) -> bool:
    """The reduced model still fails the same way, is valid and no larger; returns
    whether it is the trigger alone (not always: a loop-carried value nothing reads after
    the outputs were cut keeps its body, see docs/control-flow.md)."""
    rep.target.signature = sig
    assert rep(model, inputs)
    assert not check_static(model)
    assert size_of(model, inputs).no_larger_than(before)
    return sorted(all_ops(model.graph)) == ["Sigmoid"]


def test_graph_passes_take_a_nested_trigger_out_of_its_bodies(nested_sigmoid) -> None:
    rep = nested_sigmoid
    gen = Generator(Config(min_nodes=8, max_nodes=8, ops=REDUCE_OPS, dtypes=frozenset({1})))
    exact, used = [], set()
    for case, sig in list(_live_nested_findings(rep, gen, 6)):
        model = case.model
        del model.metadata_props[:]
        inputs = case.make_inputs(case.seed)
        before = size_of(model, inputs)
        r = reduce_model(model, inputs, rep, budget_s=60)
        used |= {name for name, st in r.stats().items() if st["kept"]}
        exact.append(_reduced(rep, sig, before, r.model, r.inputs))
    assert {"inline-if", "unroll-loop"} <= used, used
    assert sum(exact) >= 4, exact


def test_choice_shrinking_then_graph_passes_reduce_a_nested_trigger(nested_sigmoid) -> None:
    rep = nested_sigmoid
    gen = Generator(Config(min_nodes=8, max_nodes=8, ops=REDUCE_OPS, dtypes=frozenset({1})))
    exact = []
    for case, sig in list(_live_nested_findings(rep, gen, 4)):
        rep.target.signature = sig
        before = size_of(case.model, case.make_inputs(case.seed))
        r = reduce_case(gen, case, rep, budget_s=60)
        exact.append(_reduced(rep, sig, before, r.model, r.inputs))
    assert sum(exact) >= 3, exact


def _unneeded_nested_findings(rep: Reproducer, gen: Generator, n: int):
    """Triggers only in body nodes no output needs: the pruned model has no Sigmoid left
    (a compiler that converts every node, as TVM's importer does, fails all the same)."""
    return _nested_findings(
        rep, gen, n, lambda pruned: "Sigmoid" not in all_ops(pruned.model.graph)
    )


def test_a_trigger_in_body_nodes_no_output_needs_is_kept_while_the_rest_goes(
    monkeypatch,
) -> None:
    label = f"{ADAPTERS}:RaiseInBody:op=Sigmoid"
    with BackendPool(["ort", label], timeout=10.0) as pool:
        _reduce_unneeded_trigger(Reproducer(pool, Target(label, "ort")), monkeypatch)


def _reduce_unneeded_trigger(rep: Reproducer, monkeypatch: pytest.MonkeyPatch) -> None:
    # (under the default share of wide values, seed 94's Sigmoid reads a Concat no output
    # needs, which stayed, 6 nodes, until shrink-body could put zeros in its place)
    gen = Generator(Config(min_nodes=8, max_nodes=8, ops=REDUCE_OPS, dtypes=frozenset({1})))
    stuck = []
    for case, sig in list(_unneeded_nested_findings(rep, gen, 3)):
        model = case.model
        del model.metadata_props[:]
        inputs = case.make_inputs(case.seed)
        before = size_of(model, inputs)
        r = reduce_model(model, inputs, rep, budget_s=60)
        assert r.complete and r.stats()["drop-unneeded"]["kept"] >= 1
        _reduced(rep, sig, before, r.model, r.inputs)
        # the control-flow node, the Sigmoid and what gives each branch its output
        assert r.after.nodes <= 5 and len(r.model.graph.node) == 1, all_ops(r.model.graph)
        # pruned away at every candidate, as before, the reduction keeps nothing (unless
        # inlining an outer If leaves the trigger in a body)
        with monkeypatch.context() as mp:
            mp.setattr(control, "unneeded_in_bodies", lambda g: frozenset())
            old = reduce_model(model, inputs, rep, budget_s=60)
        assert r.after.nodes <= old.after.nodes
        stuck.append(old.after.nodes == before.nodes)
    # without: most such findings are filed at the size they were found (17 and 42 nodes)
    assert sum(stuck) >= 2, stuck


def test_a_scan_finding_keeps_the_scan_and_its_body_shrinks() -> None:
    label = f"{ADAPTERS}:Raise:op=Scan"
    gen = Generator(Config(min_nodes=8, max_nodes=8, ops=OPS, dtypes=frozenset({1})))
    with BackendPool(["ort", label], timeout=10.0) as pool:
        rep = Reproducer(pool, Target(label, "ort"))
        done = 0
        for seed in range(200):
            case = gen.generate(seed)
            inputs = case.make_inputs(seed)
            a = rep.assess(case.model, inputs)
            if a.signature is None:
                continue
            rep.target.signature = a.signature
            body_before = size_of(case.model, inputs).nodes - len(case.model.graph.node)
            r = reduce_model(case.model, inputs, rep, budget_s=60)
            assert [n.op_type for n in r.model.graph.node] == ["Scan"]
            body_after = r.after.nodes - 1
            assert body_after < body_before or body_before <= 1, (body_before, body_after)
            assert not check_static(r.model) and rep(r.model, r.inputs)
            done += 1
            if done == 4:
                break
        assert done == 4


def test_stft_never_takes_a_window_whose_shape_onnx_cannot_infer() -> None:
    """ONNX's STFT inference reads the window's rank even where no shape is known, and
    ONNX leaves a Loop's loop-carried outputs shapeless: a window computed from a Loop made
    models ONNX Runtime refuses once value_info is stripped (2 of these 150 before)."""
    ops = frozenset({"Loop", "STFT", "Relu", "Add", "Mul"})
    gen = Generator(Config(min_nodes=6, max_nodes=6, opset=21, ops=ops, dtypes=frozenset({1})))
    loops = 0
    for seed in range(150):
        model = gen.generate(seed).model
        loops += any(n.op_type == "Loop" for n in model.graph.node)
        assert not check_static(model), seed
    assert loops >= 50  # the case is exercised
