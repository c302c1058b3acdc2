"""The fuzz-loop benchmark's backend time: the union of the backends' busy intervals."""

from __future__ import annotations

import pytest

from onnxfuzz.execute.sandbox import Outcome, busy_seconds


def _o(start: float, seconds: float) -> Outcome:
    return Outcome("ok", compile_s=seconds / 2, run_s=seconds / 2, started=start)


@pytest.mark.parametrize(
    ("spans", "busy"),
    [
        ([], 0.0),
        ([(0.0, 1.0)], 1.0),
        ([(0.0, 1.0), (0.5, 1.0)], 1.5),  # in parallel, overlapping
        ([(0.0, 1.0), (2.0, 1.0)], 2.0),  # one after the other
        ([(0.0, 3.0), (1.0, 1.0)], 3.0),  # one inside the other
        ([(5.0, 1.0), (0.0, 1.0), (0.5, 2.0)], 3.5),  # unordered
    ],
)
def test_busy_time_is_the_union_of_intervals(spans, busy) -> None:
    assert busy_seconds([_o(a, s) for a, s in spans]) == pytest.approx(busy)


def test_outcomes_without_backend_time_count_nothing() -> None:
    assert busy_seconds([Outcome("crash"), _o(1.0, 2.0)]) == pytest.approx(2.0)
