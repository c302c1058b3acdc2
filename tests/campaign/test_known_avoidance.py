"""Avoidance during a campaign with ``--known``: a bug this campaign finds is avoided (its
reduced trigger, Relu in float32 here) once hit ``--avoid-after`` times, and only then; the
same options give the same tests, in one run or resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runs import finished

from onnxfuzz.run.campaign import AVOIDANCE, Campaign, CampaignOptions, Resumed
from onnxfuzz.store.db import Store
from onnxfuzz.store.known import KnownFile

SEGFAULT_RELU = "tests/campaign/adapters.py:Segfault:op=Relu"
OPS = ["Add", "Relu", "Mul", "Sigmoid", "Tanh"]


def _opts(known: Path, after: int, tests: int) -> CampaignOptions:
    return CampaignOptions(
        backends=["ort", SEGFAULT_RELU],
        tests=tests,
        probe="off",
        confirm=0,
        reduce_budget=20,
        known=str(known),
        avoid_after=after,
        generator={"min_nodes": 2, "max_nodes": 5, "ops": OPS, "dtypes": ["float32"]},
        # no one-change variants after a reduction: a bundle's trigger is not what these
        # tests read, and each crashing variant respawns the worker
        neighbours=0,
    )


def _empty(tmp: Path) -> Path:
    path = tmp / "known.json"
    KnownFile({}, []).write(path)  # nothing known: what this campaign finds is avoided
    return path


def _tests(out: Path) -> tuple[dict[int, list[str]], list[dict]]:
    store = Store(out / "campaign.db")
    try:
        rows = store.db.execute("SELECT id, ops FROM tests ORDER BY id")
        ops = {i: json.loads(o) for i, o in rows}
        return ops, (store.get_meta(AVOIDANCE) or {}).get("updates", [])
    finally:
        store.close()


@pytest.fixture(scope="module")
def avoiding(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign of 50 tests whose bug is avoided after 3 hits, run once: the test of
    avoidance reads it, the resumed campaign is compared with it (neither writes to it)."""
    tmp = tmp_path_factory.mktemp("avoiding")
    finished(tmp / "whole", _opts(_empty(tmp), 3, 50))
    return tmp / "whole"


def test_a_bug_hit_k_times_has_its_trigger_avoided_from_then_on(avoiding: Path) -> None:
    ops, updates = _tests(avoiding)
    assert len(ops) == 50
    (update,) = [u for u in updates if u["avoid"] or u["forms"]]
    assert update["avoid"] == [["Relu", "float32"]] and not update["forms"]
    start = update["from"]
    relu = [i for i, o in ops.items() if "Relu" in o]
    assert relu and max(relu) < start < 30  # no Relu from then on, and it was early
    assert len(relu) >= 3


def test_a_bug_hit_fewer_than_k_times_is_not_avoided(tmp_path: Path) -> None:
    finished(tmp_path / "c", _opts(_empty(tmp_path), 1000, 60))
    ops, updates = _tests(tmp_path / "c")
    assert all(not u["avoid"] and not u["forms"] for u in updates)
    assert any("Relu" in o for i, o in ops.items() if i >= 40)  # still made late on


def test_a_resumed_campaign_makes_the_tests_of_an_unbroken_one(
    tmp_path: Path, avoiding: Path
) -> None:
    finished(tmp_path / "part", _opts(_empty(tmp_path), 3, 20))
    c = Campaign(tmp_path / "part", None, resume=True, changes=Resumed(more_tests=30))
    c.start()
    try:
        c.run()
    finally:
        c.close()
    whole, whole_updates = _tests(avoiding)
    part, part_updates = _tests(tmp_path / "part")
    assert part == whole and len(part) == 50
    assert part_updates == whole_updates and any(u["avoid"] for u in whole_updates)
