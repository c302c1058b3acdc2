"""The pass driver: a pass goes on from its kept candidate, and the fixed point holds."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from onnxfuzz.reduce import passes
from onnxfuzz.reduce.passes import Pass, fixed_point


def _zero_each(state: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Each nonzero position set to zero, first to last."""
    for i, v in enumerate(state):
        if v:
            yield state[:i] + (0,) + state[i + 1 :]


def _reduce(state: tuple[int, ...], keep_if) -> tuple[tuple[int, ...], int, bool]:
    calls = 0

    def keep(old: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...] | None:
        nonlocal calls
        calls += 1
        return new if keep_if(new) else None

    final, complete = fixed_point(state, [Pass("zero", _zero_each)], keep, float("inf"))
    return final, calls, complete


@pytest.fixture(params=[True, False], ids=["resume", "restart"])
def strategy(request, monkeypatch) -> bool:
    monkeypatch.setattr(passes, "EARLIER", not request.param)
    return request.param


def test_a_pass_goes_on_from_its_kept_candidate(strategy: bool) -> None:
    """40 positions, every third one needed: a sweep that goes on after each kept candidate
    tries each once, and one more sweep finds nothing (80 tries at most); starting again
    from the first candidate after each kept one tries the needed ones again each time."""
    needed = set(range(0, 40, 3))
    final, calls, complete = _reduce((5,) * 40, lambda s: all(s[i] for i in needed))
    assert complete
    assert final == tuple(5 if i in needed else 0 for i in range(40))
    if strategy:
        assert calls <= 2 * 40, calls
    else:
        assert calls > 4 * 40, calls  # the cost the resumption removes


def test_a_kept_candidate_that_opens_an_earlier_one_still_reaches_the_fixed_point(
    strategy: bool,
) -> None:
    """Position 0 may be zeroed only once position 7 is: the sweep that zeroes 7 has passed
    0 by then, and the next sweep must come back to it."""
    final, _, complete = _reduce((1,) * 8, lambda s: s[0] == 1 or s[7] == 0)
    assert complete
    assert final == (0,) * 8


def test_zero_runs_grow_while_kept() -> None:
    """64 choices of which one matters: zeroing them one backend run each takes 64 runs
    (63 kept, one not); runs that double while they are kept, halved where they are not,
    take a third of that (21), and the one that matters stays."""
    from onnxfuzz.reduce.choice_passes import Choices, _ZeroRuns

    calls = 0

    def keep(old: Choices, new: Choices) -> Choices | None:
        nonlocal calls
        calls += 1
        return new if new.record[40] else None

    final, complete = fixed_point(
        Choices((3,) * 64, ()),
        [Pass("zero-choices", _ZeroRuns(), resumes=False)],
        keep,
        float("inf"),
    )
    assert complete
    assert final.record == tuple(3 if i == 40 else 0 for i in range(64))
    assert calls <= 64 // 3, calls
