"""The guide: decisions make valid, byte-deterministic, replayable cases; the campaign's
steering decides the same sequence however rewards arrive and across a resume."""

from __future__ import annotations

import random

import onnx
import pytest

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.guide import Guided, Uct, actions, chain_action, chains_of
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.measure.metrics import features
from onnxfuzz.run.pregen import counted
from onnxfuzz.run.steer import CHAIN_SHARE, Steering, reward_keys


@pytest.fixture(scope="module")
def guided() -> Guided:
    return Guided(Generator(Config(min_nodes=3, max_nodes=12)))


def _same(a, b) -> bool:
    return a.model.SerializeToString() == b.model.SerializeToString()


def test_no_decision_is_the_seeds_own_model(guided: Guided) -> None:
    for seed in range(10):
        assert _same(guided.case(seed, None), guided.gen.generate(seed))


def test_forced_paths_start_the_model_and_stay_valid_and_replayable(guided: Guided) -> None:
    gen = guided.gen
    rng = random.Random(5)
    acts = actions(gen)
    for seed in range(60):
        path = [acts[rng.randrange(len(acts))] for _ in range(2)]
        case = guided.case(seed, {"path": path})
        first = path[0]
        if first.startswith("op:"):
            assert first[3:] in case.ops, (path, case.ops)
        v = validate(case.model, case.make_inputs(seed))
        assert v.ok and v.finite, (path, v.problems[:1])
        assert _same(case, guided.case(seed, {"path": path}))  # byte-deterministic
        # the record alone replays it (how the shrinker and reduction remake a case)
        assert _same(case, guided.generator_for({"path": path}).generate(seed, prefix=case.choices))


def test_mutants_of_guided_tests_are_valid_over_many_draws(guided: Guided) -> None:
    acts = actions(guided.gen)
    rng = random.Random(9)
    for seed in range(150):
        parent = {"path": [acts[rng.randrange(len(acts))]]}
        d = {"of": [seed, parent]}
        grand = {"of": [seed + 1, d]}
        for dec, s in ((d, 1000 + seed), (grand, 2000 + seed)):
            case = guided.case(s, dec)
            v = validate(case.model, case.make_inputs(s))
            assert v.ok and v.finite, (dec, v.problems[:1])
            assert _same(case, guided.case(s, dec))
            assert _same(case, guided.gen.generate(s, prefix=case.choices))


def _subsequence(part: list[str], whole: list[str]) -> bool:
    it = iter(whole)
    return all(op in it for op in part)


def test_chain_decisions_start_the_model_linked_valid_and_replayable(guided: Guided) -> None:
    """Ad-hoc chains of any of the run's ops (sequence makers, ops no output fits, ...):
    their ops start the model in order (glue may come between), each linked to the one
    before where the solver can; the case is valid, byte-deterministic, replayed by its
    record with ``generator_for``, and mutants of it are valid too."""
    ops = [s.op_type for s in guided.gen.specs]
    rng = random.Random(11)
    linked = links = 0
    for seed in range(80):
        chain = [ops[rng.randrange(len(ops))] for _ in range(rng.randint(2, 5))]
        d = {"path": [chain_action(chain)]}
        case = guided.case(seed, d)
        n = len(case.model.graph.node)
        if n >= 12:  # the node count did not cut the chain short
            assert _subsequence(chain, case.ops), (chain, case.ops)
        nodes = case.model.graph.node
        made = {o: node.op_type for node in nodes for o in node.output}
        for a, b in zip(chain, chain[1:], strict=False):
            links += 1
            linked += any(
                node.op_type == b and node.input and made.get(node.input[0]) == a for node in nodes
            )
        v = validate(case.model, case.make_inputs(seed))
        assert v.ok and v.finite, (chain, v.problems[:1])
        assert _same(case, guided.case(seed, d))
        assert _same(case, guided.generator_for(d).generate(seed, prefix=case.choices))
        m = {"of": [seed + 500, d]}
        mutant = guided.case(seed + 500, m)
        v = validate(mutant.model, mutant.make_inputs(seed))
        assert v.ok and v.finite, (m, v.problems[:1])
        assert _same(mutant, guided.generator_for(m).generate(seed + 500, prefix=mutant.choices))
    assert chains_of({"of": [1, d]}) == (chain_action(chain),)
    # random op pairs often do not link directly (glue comes between, or no fit): some do
    assert linked > links // 5, (linked, links)
    with pytest.raises(ValueError, match="NoSuchOp"):
        guided.case(0, {"path": [chain_action(["Relu", "NoSuchOp"])]})


def test_a_chain_link_keeps_the_reuse_cap_the_specs_bound_their_values_by() -> None:
    """A frontier chain linked a Reshape output of shape [1344] (the reuse cap: 32)
    straight into CumSum, whose value domain assumes a running sum over at most
    ``max_reuse_dim`` terms: generation raised "interval [0, 43008.2] exceeds the float32
    bound". A link takes a tensor as it is only within the cap, as the pool does."""
    guided = Guided(Generator(Config(min_nodes=1, max_nodes=10)))
    chain = "AffineGrid>LpPool>ThresholdedRelu>Relu>Reshape>CumSum>Cast>HardSwish>Sub"
    d = {"path": [f"chain:{chain}>BitwiseOr>BitwiseOr>Relu"]}
    # seed 9100 + test 3234 of that campaign was 12334; since LpPool's float16 inputs stay
    # within +-1 (2026-11-28) its chain differs, and 12313 makes the same shape again: a
    # Reshape output over the cap, then CumSum
    case = guided.case(12313, d)
    cap = guided.gen.cfg.max_reuse_dim
    g = onnx.shape_inference.infer_shapes(case.model).graph
    shapes = {vi.name: vi.type.tensor_type.shape for vi in [*g.input, *g.value_info, *g.output]}
    (reshape,) = [node for node in g.node if node.op_type == "Reshape"]
    assert max(x.dim_value for x in shapes[reshape.output[0]].dim) > cap  # the case holds
    (cumsum,) = [node for node in g.node if node.op_type == "CumSum"]
    dims = [x.dim_value for x in shapes[cumsum.input[0]].dim]
    assert dims and all(n <= cap for n in dims), dims
    v = validate(case.model, case.make_inputs(12313))
    assert v.ok and v.finite, v.problems[:1]


def test_uct_prefers_the_action_that_pays_once_every_one_was_tried() -> None:
    tree = Uct(["a", "b", "c", "d"], depth=1, c=0.3)
    rng = random.Random(0)
    picks = []
    for _ in range(200):
        path = tree.select(rng)
        tree.visit(path)
        tree.reward(path, 1.0 if path == ["c"] else 0.0)
        picks.append(path[0])
    assert sorted(set(picks)) == ["a", "b", "c", "d"]  # every one is tried
    assert picks[100:].count("c") > 70, picks[100:].count("c")


def _keys(guided: Guided, seed: int, decision) -> bytes:
    """A stand-in for a campaign's reward keys: the model's own triples and instances,
    and a 'failure' for models with a Relu (deterministic in the decision)."""
    case = guided.case(seed, decision)
    sigs = [("b", "relu-bug")] if "Relu" in case.ops else []
    return reward_keys(counted(features(case.model)), sigs)


def _run(guided: Guided, ids: range, steer: Steering, order_seed: int | None, keys=_keys) -> dict:
    """Decide ``ids`` in order; report each test's keys in a shuffled order (lanes finish
    out of order), as late as the steering allows."""
    decided: dict[int, object] = {}
    pending: list[int] = []
    rng = random.Random(order_seed)
    for i in ids:
        while not steer.ready(i):
            j = pending.pop(rng.randrange(len(pending)) if order_seed is not None else 0)
            steer.report(j, keys(guided, 100 + j, decided[j]))
        decided[i] = steer.decide(i)
        pending.append(i)
    for j in pending:
        steer.report(j, keys(guided, 100 + j, decided[j]))
    return decided


def test_steering_is_the_same_however_rewards_arrive_and_after_a_resume(guided: Guided) -> None:
    a = _run(guided, range(90), Steering(guided, 100, "mcts", [], lag=6, mutants=0.2), None)
    b = _run(guided, range(90), Steering(guided, 100, "mcts", [], lag=6, mutants=0.2), order_seed=3)
    assert a == b
    assert any("of" in (d or {}) for d in a.values())  # mutants of interesting tests
    assert all(d is not None for d in a.values())
    # Resume: the first 50 tests stored (decision and keys), the rest decided anew.
    history = {i: (a[i], _keys(guided, 100 + i, a[i])) for i in range(50)}
    resumed = Steering(guided, 100, "mcts", [], history=history, lag=6, mutants=0.2)
    c = _run(guided, range(50, 90), resumed, order_seed=7)
    assert c == {i: a[i] for i in range(50, 90)}
    # another seed decides otherwise
    other = _run(guided, range(90), Steering(guided, 101, "mcts", [], lag=6, mutants=0.2), None)
    assert other != a


def test_random_without_seed_models_decides_nothing(guided: Guided) -> None:
    assert not Steering(guided, 0, "random", []).active
    s = Steering(guided, 0, "random", ["m.onnx#0"])
    assert s.active
    decisions = [s.decide(i) for i in range(12)]
    assert {("seed" in d) if d else False for d in decisions} == {True, False}


def _edges_below(guided: Guided, decided: dict, below: int) -> set[str]:
    out: set[str] = set()
    for j in range(below):
        out |= features(guided.case(100 + j, decided[j]).model).keys["edges"]
    return out


def test_frontier_walks_seen_edges_the_same_however_rewards_arrive_and_after_a_resume(
    guided: Guided,
) -> None:
    lag = 6
    a = _run(guided, range(90), Steering(guided, 100, "frontier", [], lag=lag), None)
    b = _run(guided, range(90), Steering(guided, 100, "frontier", [], lag=lag), order_seed=3)
    assert a == b
    chains = {i: chains_of(d)[0] for i, d in a.items() if chains_of(d)}
    # about CHAIN_SHARE of the tests, the rest UCT's paths
    assert all("path" in d for d in a.values() if d)
    assert 0.5 * CHAIN_SHARE * 90 <= len(chains) <= 1.5 * CHAIN_SHARE * 90
    walked = [i for i, c in chains.items() if ">" in c]
    assert len(walked) >= 10 and min(walked) > lag  # a first op alone until edges are in
    # every link of a walked chain is an edge that a test below i - lag made
    for i in walked[:12]:
        ops = chains[i][len("chain:") :].split(">")
        known = _edges_below(guided, a, i - lag)
        assert all(f"{x}>{y}" in known for x, y in zip(ops, ops[1:], strict=False)), (i, ops)
    history = {i: (a[i], _keys(guided, 100 + i, a[i])) for i in range(50)}
    resumed = Steering(guided, 100, "frontier", [], history=history, lag=lag)
    assert _run(guided, range(50, 90), resumed, order_seed=7) == {i: a[i] for i in range(50, 90)}
    other = _run(guided, range(90), Steering(guided, 101, "frontier", [], lag=lag), None)
    assert other != a


def test_frontier_walks_again_a_chain_that_found_a_new_failure(guided: Guided) -> None:
    """A stand-in 'failure' per first op: the chains of tests that found a signature
    first are kept, and later chain tests take some of them again, one op swapped for
    another of its family."""

    def keys(guided: Guided, seed: int, decision) -> bytes:
        case = guided.case(seed, decision)
        return reward_keys(counted(features(case.model)), [("b", f"bug-{case.ops[0]}")])

    steer = Steering(guided, 7, "frontier", [], lag=4)
    decided = _run(guided, range(300), steer, None, keys)
    assert steer.hot
    family = {s.op_type: s.family for s in guided.gen.specs}
    chains = [
        c[0][len("chain:") :].split(">") for _, d in sorted(decided.items()) if (c := chains_of(d))
    ]
    hot = {tuple(c) for c in steer.hot}

    def variant(a: list[str], b: list[str]) -> bool:
        diff = [(x, y) for x, y in zip(a, b, strict=False) if x != y]
        return len(a) == len(b) and len(diff) == 1 and family[diff[0][0]] == family[diff[0][1]]

    assert any(
        tuple(a) in hot and variant(a, b) for k, a in enumerate(chains) for b in chains[k + 1 :]
    )
