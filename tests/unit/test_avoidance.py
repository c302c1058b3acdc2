"""Avoidance during a campaign (``onnxfuzz.run.avoidance``): what test i avoids is a
function of the results of tests < i - LAG, in test order, whatever order they came in."""

from __future__ import annotations

import threading

from onnxfuzz import dtypes as dt
from onnxfuzz.judge.signature import family
from onnxfuzz.run.avoidance import Avoidance, AvoidSet, StoredTest
from onnxfuzz.store.known import KnownFamily, KnownFile, Trigger

CRASH = "tvm|crash|compile|TypeError: R.add(lv, S) uses datatype T | R.Tensor((SHAPE))"
OTHER_OP = "tvm|crash|compile|TypeError: R.multiply(lv, S) uses datatype T | R.Tensor((SHAPE))"
WRONG_EXP = "tvm|mismatch|run|values in Exp output"
F32, F16 = dt.BY_NAME["float32"], dt.BY_NAME["float16"]


def _known(hits: int = 2) -> KnownFile:
    fam = KnownFamily(
        family(CRASH), "tvm-crash-Fabc", "tvm", "crash", hits, [CRASH],
        trigger=Trigger("Elu", "float16", []),
    )  # fmt: skip
    return KnownFile({"tvm": "0.27.0"}, [fam], "known.json")


def _hit(a: Avoidance, i: int, sig: str | None, triggers: dict | None = None) -> None:
    hits = [a.unit_of("tvm", sig.split("|")[1], sig)] if sig else []
    a.report(i, StoredTest(hits, triggers or {}))


def test_a_known_family_is_avoided_once_this_campaign_brings_it_to_k_hits() -> None:
    a = Avoidance(_known(hits=2), after=4, lag=3)
    assert not a.for_test(0)  # 2 hits in the file: not yet
    for i in range(10):
        _hit(a, i, OTHER_OP if i in (1, 5) else None)  # the same family through Mul
    # the 4th hit is test 5: tests from 5 + 1 + lag on avoid Elu in float16, not before
    assert not a.for_test(8)
    assert a.for_test(9) == AvoidSet(frozenset({("Elu", F16)}))
    assert a.updates[-1].start == 9 and a.updates[-1].why == ["known||tvm-crash-Fabc"]


def test_a_family_hit_fewer_than_k_times_is_not_avoided() -> None:
    a = Avoidance(_known(hits=0), after=3, lag=2)
    for i in range(40):
        _hit(a, i, OTHER_OP if i in (3, 30) else None)
    assert not a.for_test(41) and len(a.updates) == 1


def test_a_known_family_hit_k_times_before_is_avoided_from_the_first_test() -> None:
    a = Avoidance(_known(hits=9), after=5)
    assert a.for_test(0) == AvoidSet(frozenset({("Elu", F16)}))


def test_a_bug_found_in_this_campaign_is_avoided_by_its_bundles_trigger() -> None:
    a = Avoidance(KnownFile({}, [], "empty.json"), after=2, lag=1)
    unit = a.unit_of("tvm", "mismatch", WRONG_EXP)
    _hit(a, 0, WRONG_EXP, {unit: [Trigger("Exp", "float32", [])]})
    _hit(a, 1, None)
    _hit(a, 2, WRONG_EXP)
    _hit(a, 3, "tvm|mismatch|run|precision in Exp output")  # the same op's wrong value
    assert not a.for_test(3)
    assert a.for_test(4) == AvoidSet(frozenset({("Exp", F32)}))
    # a wrong value of another op is another unit: not counted for Exp's
    assert a.unit_of("tvm", "mismatch", "tvm|mismatch|run|values in Log output") != unit


def test_an_attribute_trigger_still_hit_is_widened_to_its_type_never_the_whole_op() -> None:
    a = Avoidance(KnownFile({}, [], "empty.json"), after=2, lag=0)
    unit = a.unit_of("tvm", "crash", CRASH)
    pad = Trigger("Pad", "float32", ["attr:mode=reflect"])
    for i in range(8):
        _hit(a, i, CRASH, {unit: [pad]} if i == 0 else None)
    forms = frozenset({("Pad", "attr:mode=reflect")})
    assert a.for_test(2) == AvoidSet(frozenset(), forms)  # first the attribute value
    assert a.for_test(4) == AvoidSet(frozenset({("Pad", F32)}), forms)  # hit twice more


def test_results_coming_out_of_order_give_the_same_avoid_sets() -> None:
    def run(order: list[int]) -> list[AvoidSet]:
        a = Avoidance(_known(hits=0), after=2, lag=2)
        for i in order:
            _hit(a, i, CRASH if i % 3 == 0 else None)
        return [a.for_test(i) for i in range(14)]

    assert run(list(range(12))) == run([3, 1, 0, 2, 7, 5, 4, 6, 11, 9, 8, 10])


def test_a_test_waits_for_the_results_its_avoid_set_depends_on() -> None:
    a = Avoidance(_known(), after=2, lag=2)
    _hit(a, 0, None)
    assert a.ready(2) and a.ready(3) and not a.ready(4)  # test 4 needs tests 0 and 1
    stop = threading.Event()
    threading.Timer(0.2, lambda: _hit(a, 1, None)).start()
    a.wait(4, stop)
    assert a.ready(4)


def test_the_updates_are_described_once_they_took_effect() -> None:
    a = Avoidance(_known(hits=9), after=5, lag=2)
    unit = a.unit_of("ort", "crash", "ort|crash|run|Segfault")
    for i in range(12):
        a.report(i, StoredTest([unit] if i < 5 else [], {unit: [Trigger("Relu", "float32", [])]}))
    assert a.describe() == ["avoided from test 0 on: Elu float16"]
    a.for_test(12)
    assert a.describe() == [
        "avoided from test 0 on: Elu float16",
        "avoided from test 7 on: Relu float32",
    ]
