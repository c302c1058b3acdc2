"""``--guide optcov``: UCT over the ops and blocks a model starts with, rewarded by what the
test made the backends' optimizers do first (issue 24)."""

from __future__ import annotations

import pytest

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.guide import Guided
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.optcov import fired_keys
from onnxfuzz.run.steer import Steering, optimization_keys

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
    """The share of the last third of ``n`` tests whose path holds TARGET."""
    steer = Steering(guided, 7, "optcov", [], lag=4)
    decided: dict[int, object] = {}
    reported = 0
    for i in range(n):
        while not steer.ready(i):
            steer.report(reported, _keys(decided[reported], reported, signal))
            reported += 1
        decided[i] = steer.decide(i)
    late = [d for i, d in decided.items() if i >= 2 * n // 3]
    return sum(TARGET in d["path"] for d in late) / len(late)


def test_optcov_steers_toward_what_makes_new_optimizations_fire(guided: Guided) -> None:
    assert TARGET in guided.actions
    steered, unsteered = _share(guided, True), _share(guided, False)
    # measured: 3.6 % against 0.75 % (2 of 229 actions a path, 2,000 tests)
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
