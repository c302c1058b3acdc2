"""The loop-overhead figure: the union of backend intervals, reductions left out."""

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.run.campaign import Progress


def _ran(start: float, seconds: float) -> Outcome:
    return Outcome(Status.OK, started=start, compile_s=seconds)


def test_overlapping_backends_and_reductions_never_count_twice() -> None:
    p = Progress(started=0.0)
    p.add_busy([_ran(0.0, 2.0), _ran(1.0, 2.0)])  # two backends in parallel: 0..3
    p.reduced(4.0, 10.0)  # a reduction, during which a test in flight finished
    p.add_busy([_ran(3.5, 7.0)])  # 3.5..10.5: only 3.5..4 and 10..10.5 are loop time
    assert abs(p.busy - 4.0) < 1e-9
    assert abs(p.overhead(now=12.0) - (1 - 4.0 / 6.0)) < 1e-9  # wall 12 - 6 reducing
    p.add_busy([_ran(0.5, 1.0)])  # late news of an interval already covered
    assert abs(p.busy - 4.0) < 1e-9
    assert p.overhead(now=5.0) == 0.0  # never negative
