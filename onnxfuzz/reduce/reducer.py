"""Reduce one finding: choice-stream shrinking where the choices are known, then graph
passes; both keep only candidates that fail with the same signature and get simpler
(``measure.Size``: choice passes grow no measure; a graph pass may add input values where it
drops a node)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

from onnxfuzz.execute.sandbox import Outcome
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.judge.judge import Assessed
from onnxfuzz.reduce.choice_passes import shrink_case
from onnxfuzz.reduce.graph_passes import State, reduce_graph
from onnxfuzz.reduce.measure import Size, op_pattern, size_of
from onnxfuzz.reduce.passes import Pass
from onnxfuzz.reduce.reproduce import Reproducer


@dataclass
class Reduced:
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    before: Size
    after: Size
    seconds: float
    complete: bool  # every pass reached its fixed point within the budget
    runs: int  # backend runs spent
    passes: list[Pass] = field(default_factory=list)
    # the reduced model's last run, where it showed the failure (None: it did not)
    final: Assessed | None = None
    # the reference's and the backend's outcomes on the reduced model, from that run
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    @property
    def message(self) -> str:
        """What the reduced model's run said (issue.md shows it beside the reduced model,
        not the original's message with its other shapes and counts); "" if it did not
        reproduce."""
        return self.final.judgement.message if self.final is not None else ""

    @property
    def signature(self) -> str | None:
        """That run's own signature: the finding's, or where the finding blamed an If, Loop
        or Scan node, the op of its bodies the reduced model blames
        (``Reproducer._from_body``)."""
        return self.final.signature if self.final is not None else None

    @property
    def ops(self) -> list[str]:
        return [n.op_type for n in self.model.graph.node]

    @property
    def pattern(self) -> str:
        return op_pattern(self.model)

    def record(self) -> dict[str, object]:
        """The reduction as meta.json keeps it (``reduction``)."""
        return {
            "seconds": round(self.seconds, 3),
            "backend_runs": self.runs,
            "fixed_point": self.complete,
            "before": asdict(self.before),
            "after": asdict(self.after),
            "passes": self.stats(),
        }

    def stats(self) -> dict[str, dict[str, float]]:
        return {
            p.name: {
                "tried": p.stats.tried,
                "kept": p.stats.kept,
                "seconds": round(p.stats.seconds, 3),
            }
            for p in self.passes
        }


# what a reduction says of each smaller model that still fails: the model and its inputs
OnSmaller = Callable[[onnx.ModelProto, dict[str, np.ndarray]], None]


def _graph_passes(
    state: State, rep: Reproducer, deadline: float, on_smaller: OnSmaller | None = None
) -> tuple[State, list[Pass], bool]:
    return reduce_graph(
        state,
        lambda s: rep(s.model, s.inputs),
        lambda s: rep.reference_values(s.model, s.inputs),
        deadline,
        lambda s: rep.message(s.model, s.inputs),
        None if on_smaller is None else lambda s: on_smaller(s.model, s.inputs),
        hang=rep.hang,
    )


def reduce_model(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    rep: Reproducer,
    budget_s: float,
    on_smaller: OnSmaller | None = None,
) -> Reduced:
    """Graph passes only: for any model, ours or a user's. ``on_smaller`` gets each
    smaller model that still fails, as it is kept (``onnxfuzz reduce`` keeps the last
    one when it is interrupted)."""
    t0, runs0 = time.perf_counter(), rep.runs
    state = State(model, inputs)
    rep.learn_bodies(model)
    rep.check_at_import(model, inputs)
    final, passes, complete = _graph_passes(state, rep, t0 + budget_s, on_smaller)
    last, outcomes = _final_run(rep, final)
    return Reduced(
        final.model,
        final.inputs,
        state.size,
        final.size,
        time.perf_counter() - t0,
        complete,
        rep.runs - runs0,
        passes,
        last,
        outcomes,
    )


def reduce_case(gen: Generator, case: Case, rep: Reproducer, budget_s: float) -> Reduced:
    """Shrink the choices first (most of the budget), then the graph passes."""
    t0, runs0 = time.perf_counter(), rep.runs
    before = size_of(case.model, case.make_inputs(case.seed))
    rep.learn_bodies(case.model)
    rep.check_at_import(case.model, case.make_inputs(case.seed))
    shrunk = shrink_case(
        gen, case, lambda c: rep(c.model, c.make_inputs(c.seed)), t0 + 0.7 * budget_s
    )
    small = shrunk.case
    final, passes, complete = _graph_passes(
        State(small.model, small.make_inputs(small.seed)), rep, t0 + budget_s
    )
    last, outcomes = _final_run(rep, final)
    return Reduced(
        final.model,
        final.inputs,
        before,
        final.size,
        time.perf_counter() - t0,
        shrunk.complete and complete,
        rep.runs - runs0,
        shrunk.passes + passes,
        last,
        outcomes,
    )


def _final_run(rep: Reproducer, final: State) -> tuple[Assessed | None, dict[str, Outcome]]:
    """The reduced model's run that showed the failure (None if none did) and the outcomes
    it came from (one more run: the passes keep only whether a candidate reproduced; an
    intermittent target gets its attempts, for a run that shows it)."""
    for _ in range(rep.target.attempts):
        a, outcomes = rep.run(final.model, final.inputs)
        if rep.matches(a):
            return a, outcomes
    return None, outcomes
