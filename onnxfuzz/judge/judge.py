"""From the backends' outcomes on one model to a verdict and a signature per backend.

One ``Judge`` serves campaigns, reduction and ``onnxfuzz replay`` so that all reach the
same signature: the oracle's verdict, then, for a value mismatch, localization to the
first diverging node and the "not a bug" checks (``onnxfuzz.judge.checks``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import AdapterProtocolError
from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.budget import beyond_screen, lone_op_error, over_budget
from onnxfuzz.judge.checks import NOT_A_BUG, Check, Mismatch
from onnxfuzz.judge.declared import declared_outputs, departures
from onnxfuzz.judge.localize import (
    cut_divergence,
    first_divergence,
    first_rerun_divergence,
    off_path_note,
    right_alone_note,
)
from onnxfuzz.judge.oracle import (
    Judgement,
    OracleConfig,
    Verdict,
    judge,
    own_verdict,
    precision_dtypes,
    too_costly,
    with_known,
)
from onnxfuzz.judge.signature import signature


class Runner(Protocol):
    """Runs models on backends by label (``onnxfuzz.execute.pool.BackendPool`` is one)."""

    def run_all(
        self, model_bytes: bytes, inputs: dict[str, np.ndarray], only: Iterable[str] | None = None
    ) -> dict[str, Outcome]: ...

    def run_one(self, label: str, model_bytes: bytes, inputs: dict[str, np.ndarray]) -> Outcome: ...


@dataclass
class Assessed:
    judgement: Judgement
    signature: str | None  # for bugs
    probe_s: float = 0.0  # backend time spent localizing
    # When the backend departs from the model's declared output types or shapes: a backend
    # that meets the declaration there (the reference to reproduce the finding against).
    witness: str | None = None
    # The tensor a bug was localized to (the first diverging node's output; else the
    # differing graph output): the signature's op is its producer's.
    culprit: str = ""


@dataclass
class Judge:
    """Judges one model's outcomes against ``reference`` with ``config``'s tolerances.

    With a ``runner``, a value mismatch is localized to its first diverging node (the model
    run again with every intermediate exposed) and then put through ``checks`` in order:
    the first that explains it makes it ``unstable``, not a bug. Without one, the outcomes
    alone decide."""

    reference: str
    config: OracleConfig
    runner: Runner | None = None
    checks: tuple[Check, ...] = NOT_A_BUG

    def against(self, reference: str) -> Judge:
        return replace(self, reference=reference)

    def assess(
        self,
        model: onnx.ModelProto,
        inputs: dict[str, np.ndarray],
        outcomes: dict[str, Outcome],
    ) -> dict[str, Assessed]:
        reference, cfg = self.reference, self.config
        ref = outcomes[reference]
        order = [o.name for o in model.graph.output]
        tol_dtypes: dict[str, str] | None = None  # computed on the first mismatch
        ran = {
            k: o.outputs
            for k, o in outcomes.items()
            if o.status == Status.OK and o.outputs is not None
        }
        for label, got in ran.items():
            _check_output_names(label, got, order)
        # Outputs departing from the model's declared types and shapes while another backend
        # meets them are that backend's fault, whatever the reference says (judge.declared).
        off = departures(ran, declared_outputs(model)) if len(ran) > 1 else {}
        ref_off = off.get(reference, {})
        out: dict[str, Assessed] = {}
        for label, got in outcomes.items():
            spent: list[float] = []
            witness = None
            if label in off and own_verdict(got).verdict == Verdict.OK:
                # Departing from the declaration is the verdict, wherever the reference
                # stands; the culprit is the output's producer (no localization: the same
                # signature whichever backend a reproduction compares against).
                name, what = next(iter(off[label].items()))
                witness = next(k for k in ran if k != label and name not in off.get(k, {}))
                v = with_known(
                    label,
                    Judgement(
                        Verdict.MISMATCH,
                        Stage.RUN,
                        what.split()[0],
                        name,
                        f"output {name}: {what}; {witness} meets the declaration",
                    ),
                    cfg,
                )
            elif label == reference:
                # The reference's own failure is a bug of the reference backend, unless the
                # test is past the limits of another backend too: then it is too costly.
                other = next(
                    (o for k, o in outcomes.items() if k != reference and o.too_costly), None
                )
                if ref.too_costly and other is not None:
                    v = too_costly(reference, other, ref)
                else:
                    v = with_known(label, own_verdict(ref), cfg)
            else:
                want = _excused(ref, got, ref_off) if ref_off else ref
                # Upstream float16 only ever loosens a tolerance: what passes without it passes.
                v = judge(reference, want, label, got, order, cfg, tol_dtypes)
                if v.verdict == Verdict.MISMATCH and tol_dtypes is None:
                    tol_dtypes = precision_dtypes(model)
                    v = judge(reference, want, label, got, order, cfg, tol_dtypes)
            if v.verdict == Verdict.OK and got.inputs_changed:
                v = inputs_written(label, got, inputs, cfg)
            elif v.verdict == Verdict.OK and got.second is not None and ref.status == Status.OK:
                v = second_run(reference, ref, label, got, order, cfg, tol_dtypes)
            culprit = v.output
            if v.stage == Stage.RERUN and v.is_bug and self.runner is not None:
                culprit = self._localize_rerun(model, inputs, label, v, tol_dtypes, spent)
            if (
                v.verdict == Verdict.MISMATCH
                # what one run's values show: not a second run's, nor a written input
                and v.stage != Stage.RERUN
                and v.kind != "input"
                and self.runner is not None
                and (label != reference or witness is not None)
            ):
                # A departure from the declaration is localized against its witness.
                v, culprit = self._localize(
                    model,
                    inputs,
                    witness or reference,
                    label,
                    ref,
                    got,
                    v,
                    witness,
                    tol_dtypes,
                    spent,
                )
            if (
                v.verdict in (Verdict.OK, Verdict.UNSTABLE)
                and self.runner is not None
                and label != reference
                and witness is None
                and ref.outputs is not None
                and got.outputs is not None
                and beyond_screen(ref.outputs, got.outputs)
            ):
                v, culprit = self._lone_op(model, inputs, label, v, culprit, spent)
            sig = None
            if v.is_bug:
                producers = {t: n.op_type for n in model.graph.node for t in n.output}
                types = {
                    vi.name: vi.type.tensor_type.elem_type
                    for vi in list(model.graph.output) + list(model.graph.value_info)
                }
                sig = signature(
                    label,
                    v,
                    producers.get(culprit, ""),
                    dt.NAMES.get(types.get(culprit, 0), ""),
                    got.trace,
                )
            out[label] = Assessed(v, sig, sum(spent), witness, culprit or "")
        return out

    def _lone_op(
        self,
        model: onnx.ModelProto,
        inputs: dict[str, np.ndarray],
        label: str,
        v: Judgement,
        culprit: str,
        spent: list[float],
    ) -> tuple[Judgement, str]:
        """A precision mismatch when the first diverging node, alone on the same inputs, is
        beyond its op's error budget (``onnxfuzz.judge.budget``); else ``v`` unchanged."""
        base = self.reference
        probe, alone = self._timed_runs(inputs, base, label, spent)
        tolerance = self.config.tol(base, label, "float32")
        found = lone_op_error(
            model, inputs, base, label, probe, alone, self._timed_run_of(label, spent), tolerance
        )
        if found is None:
            return v, culprit
        node, why, gross = found
        precise = Judgement(
            Verdict.MISMATCH,
            Stage.RUN,
            "values" if gross else "precision",
            node.output[0],
            f"first diverging node: {node.name} ({node.op_type})\n{why}"
            + (
                f"\nalone, beyond the float32 tolerance (atol, rtol) {tolerance} too: a wrong "
                "value that the model's later ops hid"
                if gross
                else ""
            ),
        )
        return with_known(label, precise, self.config), node.output[0]

    def _localize_rerun(
        self,
        model: onnx.ModelProto,
        inputs: dict[str, np.ndarray],
        label: str,
        v: Judgement,
        tol_dtypes: dict[str, str] | None,
        spent: list[float],
    ) -> str:
        """The culprit of a second run's mismatch: the first node whose output differs
        between the backend's own two runs with every intermediate exposed (no reference
        needed); the mismatching output where none does."""
        runner = self.runner
        assert runner is not None

        def run(data: bytes) -> Outcome:
            o = runner.run_one(label, data, inputs)
            spent.append(o.backend_s)
            return o

        node = first_rerun_divergence(model, label, run, self.config, tol_dtypes, v.output)
        if node is None:
            return v.output
        v.message += f"\nfirst node that differs between the runs: {node.name} ({node.op_type})"
        return node.output[0]

    def _timed_runs(
        self, inputs: dict[str, np.ndarray], base: str, label: str, spent: list[float]
    ) -> tuple[Callable[[bytes], dict[str, Outcome]], Callable[[bytes, dict], Outcome]]:
        """Re-runs through the runner, their backend time added to ``spent``: a model on
        the reference and ``label`` (``probe``), and one model on the reference alone."""
        runner = self.runner
        assert runner is not None

        def probe(data: bytes) -> dict[str, Outcome]:
            outs = runner.run_all(data, inputs, only=(base, label))
            spent.append(max(o.backend_s for o in outs.values()))
            return outs

        return probe, self._timed_run_of(base, spent)

    def _timed_run_of(self, label: str, spent: list[float]) -> Callable[[bytes, dict], Outcome]:
        """A model run on ``label`` alone through the runner, its time added to ``spent``."""
        runner = self.runner
        assert runner is not None

        def run(data: bytes, feeds: dict) -> Outcome:
            o = runner.run_one(label, data, feeds)
            spent.append(o.backend_s)
            return o

        return run

    def _localize(
        self,
        model: onnx.ModelProto,
        inputs: dict[str, np.ndarray],
        base: str,
        label: str,
        ref: Outcome,
        got: Outcome,
        v: Judgement,
        witness: str | None,
        tol_dtypes: dict[str, str] | None,
        spent: list[float],
    ) -> tuple[Judgement, str]:
        """The first diverging node of a value mismatch, then the "not a bug" checks."""
        probe, again = self._timed_runs(inputs, base, label, spent)
        culprit = v.output
        div = first_divergence(
            model,
            base,
            label,
            probe,
            self.config,
            inputs,
            again,
            tol_dtypes,
            v.output,
            v.kind,
            self._timed_run_of(label, spent),
            over_budget,
        )
        if div is not None and div.node is not None:
            culprit = div.node.output[0]
            v.message += f"\nfirst diverging node: {div.node.name} ({div.node.op_type})"
            if div.right_alone:
                v.message += "\n" + right_alone_note(div.node, label)
            if div.off_path:
                v.message += "\n" + off_path_note(div.node, label, v.output)
        if witness is not None:
            return v, culprit  # a departure from the declaration is no rounding matter
        seen = Mismatch(model, inputs, base, label, ref, got, div, tol_dtypes, self.config, again)
        for check in self.checks:
            why = check(seen)
            if why is not None:
                return Judgement(
                    Verdict.UNSTABLE, v.stage, v.kind, culprit, v.message + "\n" + why
                ), culprit
        if div is not None and div.node is None and v.kind in ("values", "precision"):
            # exposing every intermediate undid it (a fusion): the model cut after one
            # node at a time, back from the output (after the checks: a cut costs a run)
            cut = cut_divergence(model, v.output, base, label, probe, self.config, tol_dtypes)
            if cut is not None:
                culprit = cut.output[0]
                v.message += (
                    f"\nfirst diverging node: {cut.name} ({cut.op_type}), in the model cut "
                    "after it (with every intermediate exposed, none differs: a rewrite "
                    "across nodes, such as a fusion, that exposing them undoes)"
                )
        return v, culprit


def _check_output_names(label: str, got: dict[str, np.ndarray], order: list[str]) -> None:
    """An adapter's outputs keyed by names none of which is the model's (``output_0``, a
    suffix of its own): a defect of the adapter, the same on every test, not a missing
    output per test (such an adapter was filed as 45 bugs of 48 tests, each blaming
    another op). Some names right and some missing stays a mismatch: a compiler may drop
    an output."""
    if not got or not order or not got.keys().isdisjoint(order):
        return
    theirs = ", ".join(sorted(got)[:3]) + (", ..." if len(got) > 3 else "")
    ours = ", ".join(order[:3]) + (", ..." if len(order) > 3 else "")
    raise AdapterProtocolError(
        f"adapter {label}: run() returned outputs named {theirs}, none of the model's "
        f"({ours}): key the dict by the graph's output names; every test would fail the "
        "same way, so none is filed as a bug (the protocol: docs/adapters.md)"
    )


def inputs_written(
    label: str, got: Outcome, inputs: dict[str, np.ndarray], cfg: OracleConfig
) -> Judgement:
    """A run that wrote into the caller's input arrays (a kernel working in place on a
    graph input's buffer): a bug whatever the outputs, as the caller's data is lost and a
    second run on the same arrays computes from other values."""
    names = ", ".join(got.inputs_changed)
    shown = got.inputs_changed[0]
    first = inputs.get(shown)
    what = f" ({first.dtype} {list(first.shape)})" if first is not None else ""
    return with_known(
        label,
        Judgement(
            Verdict.MISMATCH,
            Stage.RUN,
            "input",
            shown,
            f"run() wrote into the caller's input array(s) {names}{what}: they hold other "
            "values after the run than before it",
        ),
        cfg,
    )


def second_run(
    reference: str,
    ref: Outcome,
    label: str,
    got: Outcome,
    order: list[str],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
) -> Judgement:
    """``label``'s second run of the same compiled model (its first run agreed) against
    the reference's first: a mismatch at the rerun stage, or ok where the two runs differ
    within the tolerance (a reduction whose order varies between runs)."""
    again = replace(got, outputs=got.second)
    v = judge(reference, ref, label, again, order, cfg, tol_dtypes)
    if v.verdict == Verdict.KNOWN:
        return replace(v, stage=Stage.RERUN)
    if v.verdict != Verdict.MISMATCH:
        return Judgement(Verdict.OK)
    first = "its first run" if label == reference else f"its first run agreed with {reference}"
    changed = ""
    if got.inputs_changed:
        names = ", ".join(got.inputs_changed)
        changed = f"; the first run wrote into the caller's input array(s) {names}"
    why = f"a second run of the same compiled model on the same inputs differs ({first}{changed})"
    return with_known(label, replace(v, stage=Stage.RERUN, message=f"{why}: {v.message}"), cfg)


def _excused(ref: Outcome, got: Outcome, ref_off: dict[str, str]) -> Outcome:
    """The reference's outputs to judge ``got`` by, where the reference departs from the
    declaration: cast to ``got``'s type when only the type is off, else left out."""
    mine = dict(ref.outputs or {})
    theirs = got.outputs or {}
    for name in ref_off:
        r, g = mine.get(name), theirs.get(name)
        if r is not None and g is not None and r.shape == g.shape and r.dtype != g.dtype:
            mine[name] = r.astype(g.dtype)
        else:
            mine.pop(name, None)
    return replace(ref, outputs=mine)
