"""The guide: decisions make valid, byte-deterministic, replayable cases; the campaign's
steering decides the same sequence however rewards arrive and across a resume."""

from __future__ import annotations

import random

import pytest

from onnxfuzz.generate.config import Config
from onnxfuzz.generate.generator import Generator
from onnxfuzz.generate.guide import Guided, Uct, actions
from onnxfuzz.generate.metrics import features
from onnxfuzz.generate.validate import validate
from onnxfuzz.run.pregen import counted
from onnxfuzz.run.steer import Steering, reward_keys


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


def _run(guided: Guided, ids: range, steer: Steering, order_seed: int | None) -> dict:
    """Decide ``ids`` in order; report each test's keys in a shuffled order (lanes finish
    out of order), as late as the steering allows."""
    decided: dict[int, object] = {}
    pending: list[int] = []
    rng = random.Random(order_seed)
    for i in ids:
        while not steer.ready(i):
            j = pending.pop(rng.randrange(len(pending)) if order_seed is not None else 0)
            steer.report(j, _keys(guided, 100 + j, decided[j]))
        decided[i] = steer.decide(i)
        pending.append(i)
    for j in pending:
        steer.report(j, _keys(guided, 100 + j, decided[j]))
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
