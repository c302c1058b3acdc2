"""A campaign's model diversity (onnxfuzz.generate.measure.metrics): stored in campaign.db, per
backend over the tests it ran, continued by a resume, shown in the summary."""

from __future__ import annotations

from pathlib import Path

from onnxfuzz.cli.main import main
from onnxfuzz.generate.measure.metrics import KINDS
from onnxfuzz.run.campaign import Campaign, CampaignDiversity, CampaignOptions, Resumed
from onnxfuzz.store.db import Store
from onnxfuzz.store.report import print_summary

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "adapters.py"
OPS = ["Add", "Relu", "Mul", "Sigmoid", "Tanh"]
PAIR = ["ort", "ort:opt=none"]
COUNTS = ("ops", *KINDS)


def _opts(backends: list[str], tests: int, reduce: bool = True) -> CampaignOptions:
    return CampaignOptions(
        backends=backends,
        tests=tests,
        seed=5,
        probe="off",
        reduce=reduce,
        generator={"min_nodes": 3, "max_nodes": 6, "ops": OPS},
    )


def _run(out: Path, opts: CampaignOptions | None, resume: bool = False, **changes) -> None:
    c = Campaign(out, opts, resume=resume, changes=Resumed(**changes) if changes else None)
    c.start()
    try:
        c.run()
    finally:
        c.close()


def _stored(out: Path, labels: list[str]) -> CampaignDiversity:
    store = Store(out / "campaign.db")
    try:
        record = store.get_meta("diversity")
    finally:
        store.close()
    assert record is not None
    return CampaignDiversity.from_record(record, labels)


def test_a_campaign_stores_its_diversity_and_a_resume_continues_it(tmp_path, capsys) -> None:
    out = tmp_path / "camp"
    _run(out, _opts(PAIR, 6))
    before = _stored(out, PAIR)
    everything = before.all.summary()
    assert everything["models"] == 6
    for label in PAIR:  # a healthy pair runs every test
        s = before.backends[label].summary()
        assert s["models"] == 6, label
        assert all(s[k] > 0 for k in COUNTS), (label, s)
        assert all(everything[k] >= s[k] for k in COUNTS), (label, s, everything)

    _run(out, None, resume=True, more_tests=4)
    after = _stored(out, PAIR)
    assert after.all.models == 10 and after.tests.below == 10
    for old, new in [(before.all, after.all)] + [
        (before.backends[k], after.backends[k]) for k in PAIR
    ]:
        s0, s1 = old.summary(), new.summary()
        assert all(s1[k] >= s0[k] for k in COUNTS), (s0, s1)
        assert old.ops <= new.ops

    capsys.readouterr()
    store = Store(out / "campaign.db")
    try:
        print_summary(store, out, PAIR, "ort")
    finally:
        store.close()
    shown = capsys.readouterr().out
    assert "model diversity" in shown and "all tests" in shown and "ort:opt=none" in shown
    assert main(["triage", str(out)]) == 0  # the report command shows it too
    assert "model diversity" in capsys.readouterr().out


def test_tests_stored_after_the_last_write_are_counted_on_resume(tmp_path) -> None:
    # A kill between a test's commit and the next write of the diversity loses nothing:
    # the resume regenerates the tests it lacks, and ends where an unkilled run ends.
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    _run(whole, _opts(PAIR, 8))
    _run(killed, _opts(PAIR, 5))
    store = Store(killed / "campaign.db")
    try:
        store.set_meta("diversity", None)  # as if killed before its first write
    finally:
        store.close()
    _run(killed, None, resume=True, more_tests=3)
    want, got = _stored(whole, PAIR), _stored(killed, PAIR)
    for a, b in [(want.all, got.all)] + [(want.backends[k], got.backends[k]) for k in PAIR]:
        assert a.models == b.models == 8
        assert a.ops == b.ops
        for kind in KINDS:
            assert a.sets[kind].exact == b.sets[kind].exact, kind


def test_a_backend_counts_only_the_models_it_ran(tmp_path) -> None:
    # This adapter refuses every model with an Add (unsupported): no Add in its coverage.
    refuses = f"{ADAPTERS}:Unsupported:op=Add"
    labels = ["ort", refuses]
    out = tmp_path / "camp"
    _run(out, _opts(labels, 10))
    d = _stored(out, labels)
    store = Store(out / "campaign.db")
    try:
        refused = store.counts_by_backend().get((refuses, "unsupported"), 0)
    finally:
        store.close()
    assert 0 < refused < 10
    assert d.backends[refuses].models == 10 - refused
    assert d.backends["ort"].models == d.all.models == 10
    assert "Add" in d.all.ops and "Add" not in d.backends[refuses].ops


def test_a_backend_that_crashes_was_still_exercised(tmp_path) -> None:
    # A crash is a finding (stored with its bundle) and coverage: the backend took the model.
    crashes = f"{ADAPTERS}:Raise:op=Add"
    labels = ["ort", crashes]
    out = tmp_path / "camp"
    _run(out, _opts(labels, 8, reduce=False))
    store = Store(out / "campaign.db")
    try:
        crashed = store.counts_by_backend().get((crashes, "crash"), 0)
    finally:
        store.close()
    assert crashed > 0
    d = _stored(out, labels)
    assert d.backends[crashes].models == d.all.models == 8
    assert "Add" in d.backends[crashes].ops
