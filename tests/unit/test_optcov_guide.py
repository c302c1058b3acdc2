"""``--guide optcov``: a fading bandit over the ops and blocks a model starts with (and the
chains and mutants it makes), rewarded by what the test made the backends' optimizers do
first (issue 24): new coverage pays, repeated coverage does not."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.guide import Guided
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.optcov import fired_keys
from onnxfuzz.run.steer import (
    OPT_VARIETY_CHAINED,
    OPT_VARIETY_SHARE,
    VARIETY,
    Recent,
    Steering,
    optimization_keys,
    optimization_reward,
)

TARGET = "block:ort-quick-gelu"


@pytest.fixture(scope="module")
def guided() -> Guided:
    return Guided(Generator(Config(min_nodes=3, max_nodes=12, op_mix="layers")))


def _keys(decision, j: int, signal: bool) -> bytes:
    """A stand-in for the backends' feedback: with ``signal``, a test that starts with
    TARGET makes a fused pattern fire that no test made before; any other test makes one
    that every test makes."""
    if signal and decision and TARGET in decision.get("path", []):
        return optimization_keys([("tvm", "fused", f"fused_pattern_{j}")], [])
    return optimization_keys([("tvm", "fused", "fused_add")], [])


def _share(guided: Guided, signal: bool, n: int = 2000) -> float:
    """The share of the last third of ``n`` tests whose path holds TARGET (mutants hold
    none)."""
    steer = Steering(guided, 7, "optcov", [], lag=4)
    decided: dict[int, object] = {}
    reported = 0
    for i in range(n):
        while not steer.ready(i):
            steer.report(reported, _keys(decided[reported], reported, signal))
            reported += 1
        decided[i] = steer.decide(i)
    late = [d for i, d in decided.items() if i >= 2 * n // 3]
    return sum(TARGET in d.get("path", ()) for d in late) / len(late)


def test_optcov_steers_toward_what_makes_new_optimizations_fire(guided: Guided) -> None:
    assert TARGET in guided.actions
    steered, unsteered = _share(guided, True), _share(guided, False)
    # measured: 10.5 % against 2.1 % (2,000 tests; paths of two blocks are half of them)
    assert steered > 2.5 * unsteered, (steered, unsteered)


def test_fired_keys_read_every_backends_feedback() -> None:
    outcomes = {
        "ort": Outcome(
            Status.OK,
            optimizations={"transformer": ("ConstantFolding",), "known:transformer": ("X",)},
        ),
        "tvm": Outcome(Status.OK, optimizations={"fused": ("fused_add_relu",)}),
        "torch": Outcome(Status.OK),  # no feedback
    }
    assert sorted(fired_keys(outcomes)) == [
        ("ort", "transformer", "ConstantFolding"),
        ("tvm", "fused", "fused_add_relu"),
    ]
    a = optimization_keys(fired_keys(outcomes), [("tvm", "sig")])
    assert a == optimization_keys(list(reversed(fired_keys(outcomes))), [("tvm", "sig")])
    assert a != optimization_keys([], [("tvm", "sig")])


def _rewards(guided: Guided, fired_per_test: list[list[tuple[str, str, str]]]) -> list[float]:
    """The reward each test earns, in order, when test i made ``fired_per_test[i]`` fire."""
    steer = Steering(guided, 3, "optcov", [], lag=0)
    got = []
    for i, fired in enumerate(fired_per_test):
        steer.decide(i)
        before = steer.rewarded
        steer.report(i, optimization_keys(fired, []))
        steer.decide(i + 1)  # applies test i's reward
        got.append(steer.rewarded - before)
    return got


def test_new_coverage_is_rewarded_and_repeated_coverage_is_not(guided: Guided) -> None:
    fused = ("tvm", "fused", "fused_matmul_add_relu")
    other = ("tvm", "fused", "fused_add_sigmoid_multiply")
    rewrite = ("ort", "transformer", "GeluFusion")
    rule = ("ort", "rule", "FuseReluClip")
    got = _rewards(guided, [[fused], [fused], [fused, other], [], [rewrite], [rewrite, rule]])
    assert got[0] > 0  # a fused pattern no test made before
    assert got[1] == 0  # the same pattern again: nothing
    assert got[2] > 0 and got[2] == got[0]  # one new pattern, one repeated: as one new
    assert got[3] == 0  # nothing fired
    assert got[4] > got[0]  # an unfired transformer weighs twice a fused pattern
    assert got[5] == got[0] * 2  # the transformer repeated, the rule new
    # a new bug family pays on its own; repeated, it does not
    assert optimization_reward([0, 0, 1, 0]) > 0 and optimization_reward([0, 0, 0, 0]) == 0


def _family_rewards(guided: Guided, sigs_per_test: list[list[tuple[str, str]]]) -> list[float]:
    steer = Steering(guided, 3, "optcov", [], lag=0)
    got = []
    for i, sigs in enumerate(sigs_per_test):
        steer.decide(i)
        before = steer.rewarded
        steer.report(i, optimization_keys([], sigs))
        steer.decide(i + 1)
        got.append(steer.rewarded - before)
    return got


def test_a_new_bug_family_pays_and_another_signature_of_a_known_one_does_not(
    guided: Guided,
) -> None:
    # two signatures of one family (a wrong value, blamed on two ops), then another family
    wrong_add = "tvm|mismatch|run|values in Add output"
    wrong_mul = "tvm|mismatch|run|values in Mul output"
    crash = "tvm|crash|compile|AssertionError: Only constant values currently supported."
    got = _family_rewards(
        guided, [[("tvm", wrong_add)], [("tvm", wrong_mul)], [("tvm", crash)], [("tvm", crash)]]
    )
    assert got[0] > 0  # the first wrong value: a new family
    assert got[1] == 0  # the same bug seen through Mul: nothing new
    assert got[2] == got[0]  # a crash: a family of its own
    assert got[3] == 0  # repeated
    # the false direction: the same signature on another backend is another family
    assert _family_rewards(guided, [[("tvm", crash)], [("ort", crash)]])[1] > 0


def _decisions(guided: Guided, seed: int, n: int, history=None, start: int = 0) -> dict:
    steer = Steering(guided, seed, "optcov", [], history=history, lag=4)
    decided: dict[int, object] = {}
    reported = start
    for i in range(start, n):
        while not steer.ready(i):
            steer.report(reported, _keys(decided[reported], reported, True))
            reported += 1
        decided[i] = steer.decide(i)
    return decided


def test_variety_draws_force_every_op_before_any_twice_and_replay_on_resume(
    guided: Guided,
) -> None:
    n = 1200
    a = _decisions(guided, 5, n)
    variety = [d["path"] for d in a.values() if d.get(VARIETY)]
    assert 0.6 * OPT_VARIETY_SHARE * n <= len(variety) <= 1.4 * OPT_VARIETY_SHARE * n
    # an op, then (OPT_VARIETY_CHAINED of the time) a fusable chain
    assert all(p[0].startswith("op:") for p in variety)
    chained = [p for p in variety if len(p) == 2 and p[1].startswith("chain:")]
    assert len(chained) + sum(len(p) == 1 for p in variety) == len(variety)
    assert abs(len(chained) - OPT_VARIETY_CHAINED * len(variety)) <= 0.1 * len(variety)
    ops = [a for a in guided.actions if a.startswith("op:")]
    assert len(variety) > len(ops)  # so the second round has begun
    first = Counter(p[0] for p in variety[: len(ops)])
    assert set(first) == set(ops) and set(first.values()) == {1}  # each op once, in a round
    counts = Counter(p[0] for p in variety)
    assert max(counts.values()) - min(counts.values()) <= 1
    # the false direction: a uniform draw of as many ops repeats some before others come
    rng = random.Random(0)
    assert len({ops[rng.randrange(len(ops))] for _ in ops}) < len(ops)
    # resume: the first 500 tests stored, the variety counts rebuilt from them
    history = {i: (a[i], _keys(a[i], i, True)) for i in range(500)}
    assert _decisions(guided, 5, n, history, start=500) == {i: a[i] for i in range(500, n)}
    assert _decisions(guided, 6, 200) != {i: a[i] for i in range(200)}


def test_the_bandit_follows_recent_new_coverage() -> None:
    bandit = Recent(["op:A", "op:B", "op:C", "op:D"], decay=0.99)
    for _ in range(40):  # A's tests bring new patterns, B's repeat old ones, C pays a bit
        bandit.reward(["op:A"], 1.0)
        bandit.reward(["op:B"], 0.0)
        bandit.reward(["op:C"], 0.2)
    untried = bandit.weight("op:D")  # the mean of every test
    assert bandit.weight("op:A") > untried > bandit.weight("op:B")
    rng = random.Random(0)
    draws = Counter(bandit.draw(rng) for _ in range(4000))
    assert draws["op:A"] > 2 * draws["op:D"] > 2 * draws["op:B"]
    assert draws["op:B"] > 0  # explored still
    for _ in range(300):  # A's patterns dried up while C's went on: A falls below C
        bandit.reward(["op:A"], 0.0)
        bandit.reward(["op:C"], 0.2)
    assert bandit.weight("op:A") < bandit.weight("op:D") < bandit.weight("op:C")


def test_forced_chains_and_blocks_hold_under_the_layers_mix(guided: Guided) -> None:
    """--op-mix layers draws a block's index into a table of indices: a forced chain (a
    block past the library's) must still be the chain, and a library block that block."""
    chain = ["MatMul", "Add", "Mul", "Sub"]
    starts = []
    for seed in range(40):
        case = guided.case(seed, {"path": ["chain:" + ">".join(chain)]})
        if len(case.ops) >= 8:
            starts.append(case.ops[:8])
    # in order, glue (a Cast) allowed between
    assert len(starts) > 5 and all(_in_order(chain, ops) for ops in starts), starts
    # the false direction: the check tells another chain apart
    assert not all(_in_order(["MatMul", "Sub", "Add"], ops) for ops in starts)
    gen = guided.gen
    name = TARGET[len("block:") :]
    steps = [s.op for s in gen.blocks[gen.block_names.index(name)]]
    # a forced op (the mix's coin, then the uniform draw's index)
    for op in ("Erf", "TopK", "Conv"):
        assert all(guided.case(seed, {"path": ["op:" + op]}).ops[0] == op for seed in range(8))
    held = [guided.case(seed, {"path": [TARGET]}).ops for seed in range(20)]
    held = [ops[:8] for ops in held if len(ops) >= 8]
    assert len(held) > 5 and all(_in_order(steps, ops) for ops in held), (held, steps)


def _in_order(chain: list[str], ops: list[str]) -> bool:
    rest = iter(ops)
    return all(op in rest for op in chain)

