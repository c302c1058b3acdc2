"""Passing neighbours: what a reduced finding's failure depends on.

A reduced model says *what* fails, not *when*: the Conv that is wrong only with group > 1
is filed with group=2 and nothing says that group matters; a reduce that is wrong past 64
elements is filed with 70, and nothing says that the size is the trigger. So after the
reduction, a few one-change variants of the reduced model (``reduce.variants``: an
attribute's other value, a smaller input, another element type) are run on the same
reference and backend, through the same judge (``reduce.reproduce.Reproducer``), around
the node the finding blames.

Each variant runs once and *fails* (the finding's failure: ``Reproducer.matches``),
*passes* (both backends ran it and agree) or is *other* (another failure, or no verdict):
an other variant says nothing about the trigger and is reported apart. A smaller input
keeps its first entries; where that passes, the same cut keeping its last entries runs
too, and if that one fails, the pass came from the values cut away (*values cut*), and
the size is no trigger. A finding whose
failure does not show on every run (intermittent, or dependent on earlier models) gets no
variants: one run of each would say nothing. At most ``MAX_VARIANTS`` runs and
``MAX_SECONDS`` seconds per finding.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import onnx
from onnx import numpy_helper

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.judge import Assessed
from onnxfuzz.judge.oracle import Verdict
from onnxfuzz.reduce.suspects import named_nodes
from onnxfuzz.reduce.variants import Variant, elements, plain, variants

MAX_VARIANTS = 12  # variant runs per finding (--neighbours): a run is a backend compile
MAX_SECONDS = 20.0  # no variant starts past this (a compiler that takes seconds a model)
COUNT_LEFT = 30  # variants past the bound counted (each is checked, not run)
FAILS, PASSES, OTHER = "fails", "passes", "other"
# A cut input that passes where the same cut from its other end fails: its pass came
# from the values cut away, not from the size (``Variant.other_end``).
VALUES_CUT = "values cut"
PASSING = "passing"  # the folder, beside the reduced model, of the nearest passing variant


class Runs(Protocol):
    """What judges a variant (``reduce.reproduce.Reproducer`` is one)."""

    @property
    def deterministic(self) -> bool: ...

    def run(
        self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]
    ) -> tuple[Assessed, dict[str, Outcome]]: ...

    def matches(self, a: Assessed) -> bool: ...


@dataclass
class Tried:
    variant: Variant
    result: str  # FAILS | PASSES | OTHER
    said: str = ""  # an other variant's failure, in a few words

    def as_meta(self) -> dict[str, Any]:
        v = self.variant
        out = {
            "kind": v.kind,
            "subject": v.subject,
            "was": plain(v.was),
            "value": plain(v.value),
            "change": v.change,
            "result": self.result,
        }
        if v.refit:
            out["refit"] = [{"input": t, "shape": list(shape)} for t, shape in v.refit]
        if not v.same_outputs:
            out["outputs_change"] = True  # a pass then may be the op doing something else
        if self.said:
            out["said"] = self.said
        return out


@dataclass
class Neighbours:
    """The variants tried around ``node`` and what each did."""

    node: str  # "conv0 (Conv)"
    tried: list[Tried] = field(default_factory=list)
    bound: int = MAX_VARIANTS
    left: int = 0  # valid variants not run (the bound, or the time)
    seconds: float = 0.0
    runs: int = 0
    skipped: str = ""  # why none was tried

    def passing(self) -> Tried | None:
        """The nearest passing variant: one whose outputs keep the model's shapes first
        (ReduceSum's noop_with_empty_axes=1 passes as an identity: no near neighbour);
        then an attribute's (the first tried: the simplest value), the input shape with
        the most elements, an element type's."""
        ok = [t for t in self.tried if t.result == PASSES]
        rank = {"attribute": 0, "shape": 1, "dtype": 2}

        def far(t: Tried) -> tuple[int, int, int]:
            v = t.variant
            size = -elements(v.value) if v.kind == "shape" else 0
            return (0 if v.same_outputs else 1, rank.get(v.kind, 3), size)

        return min(ok, key=far, default=None)  # min is stable: the first tried of a tie

    def as_meta(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node": self.node,
            "bound": self.bound,
            "tried": [t.as_meta() for t in self.tried],
            "not_tried": self.left,
            "seconds": round(self.seconds, 3),
            "backend_runs": self.runs,
        }
        if self.skipped:
            out["skipped"] = self.skipped
        best = self.passing()
        if best is not None:
            at = self.tried.index(best)
            out["passing"] = {"folder": PASSING, "change": best.variant.change, "tried": at}
        return out


def try_neighbours(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    runs: Runs,
    culprit: str = "",
    message: str = "",
    bound: int = MAX_VARIANTS,
    seconds: float = MAX_SECONDS,
) -> Neighbours:
    """Up to ``bound`` one-change variants of ``model`` around the node that makes
    ``culprit`` (else the node ``message`` names, else a model's only node), each run once
    by ``runs``; none where its failure does not show on every run."""
    k = blamed(model, culprit, message)
    if k is None:
        return Neighbours("", bound=bound, skipped="no node is blamed")
    node = model.graph.node[k]
    out = Neighbours(f"{node.name or node.output[0]} ({node.op_type})", bound=bound)
    if not runs.deterministic:
        out.skipped = "the failure does not show on every run: one run of a variant says nothing"
        return out
    t0 = time.perf_counter()
    made = variants(model, inputs, k)
    for v in made:
        if len(out.tried) >= bound or time.perf_counter() - t0 > seconds:
            out.left = 1 + sum(1 for _ in itertools.islice(made, COUNT_LEFT))
            break
        out.runs += 1
        try:
            a, outcomes = runs.run(v.model, v.inputs)
        except Exception as e:  # noqa: BLE001 - a variant that cannot be run says nothing
            out.tried.append(Tried(v, OTHER, f"not run: {type(e).__name__}"))
            continue
        tried = judged(v, a, outcomes, runs)
        if tried.result == PASSES and v.other_end is not None:
            out.runs += 1  # the same cut from the other end: does the size make it pass?
            try:
                again = judged(v.other_end, *runs.run(v.other_end.model, v.other_end.inputs), runs)
            except Exception:  # noqa: BLE001 - not run: the pass stands as it is
                again = None
            if again is not None and again.result == FAILS:
                tried = Tried(v, VALUES_CUT, "fails with its last entries kept instead")
        out.tried.append(tried)
    out.seconds = time.perf_counter() - t0
    return out


def judged(v: Variant, a: Assessed, outcomes: dict[str, Outcome], runs: Runs) -> Tried:
    if runs.matches(a):
        return Tried(v, FAILS)
    clean = all(o.status == Status.OK for o in outcomes.values())
    if a.judgement.verdict == Verdict.OK and clean:
        if not v.same_outputs and _copies_an_input(v, outcomes):
            # ReduceSum with noop_with_empty_axes=1 and no axes passes its input through:
            # that it passes says nothing of the op's computation (an audit read it as a
            # trigger); a variant whose outputs merely change shape or type (strides=1,
            # float32 for float16) still computes the op, and its pass counts. Only where
            # the outputs change: a group=1 Conv whose refit weights happen to copy x is
            # still a Conv
            return Tried(v, OTHER, "the op passes its input through unchanged")
        return Tried(v, PASSES)
    said = a.signature or str(a.judgement.verdict)
    return Tried(v, OTHER, said[:200])


def blamed(model: onnx.ModelProto, culprit: str = "", message: str = "") -> int | None:
    """The top-level node the finding blames: ``culprit``'s producer, else the first node
    ``message`` names, else a one-node model's node."""
    nodes = model.graph.node
    for k, n in enumerate(nodes):
        if culprit and culprit in n.output:
            return k
    named = named_nodes(model, message) if message else []
    if named:
        return named[0]
    return 0 if len(nodes) == 1 else None


def _copies_an_input(v: Variant, outcomes: dict[str, Outcome]) -> bool:
    """Whether every output of the variant, as any backend gave it, is one of its inputs
    unchanged (shape and values): the op degenerated to a copy."""
    graph = v.model.graph
    given = list(v.inputs.values()) + [numpy_helper.to_array(t) for t in graph.initializer]
    for o in outcomes.values():
        outs = list((o.outputs or {}).values())
        if outs and all(
            any(
                isinstance(x, np.ndarray) and x.shape == g.shape and np.array_equal(x, g)
                for g in given
            )
            for x in outs
        ):
            return True
    return False
