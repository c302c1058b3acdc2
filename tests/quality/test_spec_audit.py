"""The spec audit: every spec's draws, checked against the ONNX operator definitions, so that
a spec mistake is never filed as a backend's bug.

For every registered spec, in every op version it covers (MIN_OPSET..MAX_OPSET) and every
element type it takes there, single-op models are drawn (each element type on seeds of its
own, so an op's cases together cover its branches) and each goes through
``onnxfuzz.generate.corpus.audit``:

1. the full checker and strict shape inference (type checks, data propagation): inferred
   shapes and types equal the declared ones;
2. the operator docs' rank and size rules for inputs the checker does not look at
   (``audit.INPUT_RULES``: CumSum's axis is 0-D, TopK's K a 1-element 1-D tensor, ...);
3. the ONNX reference evaluator runs it to outputs of the declared shapes and types, finite
   and inside the spec's value intervals; where it cannot, for a reason of its own
   (``audit.REFERENCE_LIMITS``: each entry names what it gets wrong), that draw's reference
   run is not judged, and ``test_each_reference_limit_is_still_real`` keeps every entry
   honest (it must still fail on a draw it covers);
4. ONNX Runtime does the same: the second opinion on a rejection (both reject: a spec defect
   for certain; the reference alone: a spec defect or an entry for REFERENCE_LIMITS, with
   evidence).

CI runs ``SEEDS`` draws per case; the ``slow`` variant runs ``SLOW_SEEDS`` more (both
overridable: ONNXFUZZ_AUDIT_SEEDS, ONNXFUZZ_AUDIT_SLOW_SEEDS).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus import audit
from onnxfuzz.generate.lang.config import MAX_OPSET, MIN_OPSET, Config
from onnxfuzz.generate.lang.spec import load_specs, op_info
from onnxfuzz.generate.measure.coverage import main_types, spec_cases

SEEDS = int(os.environ.get("ONNXFUZZ_AUDIT_SEEDS", "4"))
SLOW_SEEDS = int(os.environ.get("ONNXFUZZ_AUDIT_SLOW_SEEDS", "8"))
SLOW_BASE = 10_000  # the slow variant's seeds start here (no overlap with the fast ones)


# k numbers an op version's element types, so each draws from seeds of its own
CASES = [(op, opset, d, main_types(op, opset).index(d)) for op, opset, d in spec_cases()]
IDS = [f"{o}-{v}-{dt.NAMES[d]}" for o, v, d, _ in CASES]


def _generator(op: str, opset: int, dtype: int) -> Generator:
    """Single-op models: one node, no glue, no blocks; only the op's main type variable is
    pinned (other type variables keep the types the main one does not take)."""
    others = dt.DEFAULT - set(main_types(op, opset))
    cfg = Config(
        min_nodes=1,
        max_nodes=1,
        opset=opset,
        ops=frozenset([op]),
        dtypes=frozenset([dtype]) | others,
        connectivity=0.0,
        block_rate=0.0,
    )
    try:
        return Generator(cfg)
    except ConfigError as e:
        # The spec narrows the schema's types on purpose (the reason is in the message).
        pytest.skip(f"{op} is not generated in {dt.NAMES[dtype]}: {e}")


def _audit(gen: Generator, seed: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray], audit.Audit]:
    case = gen.generate(seed)
    graph, _, _ = gen.graph(seed)
    inputs = case.make_inputs(seed)
    return case.model, inputs, audit.audit(case.model, inputs, audit.output_intervals(graph))


def _describe(model: onnx.ModelProto) -> str:
    node = model.graph.node[0]
    shapes = {k: list(v) for k, v in audit.node_views(model)[0].inputs.items()}
    return f"{helper.printable_node(node)} inputs {shapes}"


def _check(op: str, opset: int, dtype: int, seeds: Iterable[int]) -> None:
    gen = _generator(op, opset, dtype)
    failures = []
    for seed in seeds:
        model, _, a = _audit(gen, seed)
        problems = a.problems
        if a.reference and a.ort and any("rejects" in p for p in a.reference + a.ort):
            problems.append("both runtimes fail on it: a spec defect for certain")
        elif a.reference and not a.ort:
            problems.append(
                "only the reference evaluator fails: fix the spec, or (a fault of the "
                "evaluator's own, with evidence) add an audit.REFERENCE_LIMITS entry"
            )
        if problems:
            failures.append(f"seed {seed}: {_describe(model)}\n    " + "\n    ".join(problems))
    assert not failures, f"{len(failures)} bad draws:\n" + "\n".join(failures[:3])


@pytest.mark.parametrize(("op", "opset", "dtype", "k"), CASES, ids=IDS)
def test_spec_draws_follow_the_operator_definition(op: str, opset: int, dtype: int, k: int) -> None:
    _check(op, opset, dtype, range(k * SEEDS, (k + 1) * SEEDS))


@pytest.mark.slow
@pytest.mark.parametrize(("op", "opset", "dtype", "k"), CASES, ids=IDS)
def test_spec_draws_follow_the_operator_definition_many_seeds(
    op: str, opset: int, dtype: int, k: int
) -> None:
    start = SLOW_BASE + k * SLOW_SEEDS
    _check(op, opset, dtype, range(start, start + SLOW_SEEDS))


# --- the audit's own tables ------------------------------------------------------------------
def test_input_rules_name_real_inputs_of_specified_ops() -> None:
    """A typo in INPUT_RULES would leave a rule that never fires."""
    specs = load_specs()
    for op, rules in audit.INPUT_RULES.items():
        assert op in specs, f"INPUT_RULES: no spec for {op}"
        names = {
            f.name
            for v in range(MIN_OPSET, MAX_OPSET + 1)
            if (info := op_info(op, v)) is not None
            for f in info.schema.inputs
        }
        assert set(rules) <= names, f"INPUT_RULES[{op}]: {sorted(set(rules) - names)} unknown"
    for lim in audit.REFERENCE_LIMITS:
        assert lim.op in specs, f"REFERENCE_LIMITS: no spec for {lim.op}"


def test_the_audit_catches_a_1d_cumsum_axis() -> None:
    """The defect that motivated the audit: CumSum's axis as a 1-element 1-D tensor. The
    checker and shape inference let it through; the schema rule and the reference evaluator
    do not."""
    gen = Generator(Config(min_nodes=1, max_nodes=1, ops=frozenset({"CumSum"}), connectivity=0.0))
    case = gen.generate(0)
    graph, _, _ = gen.graph(0)
    intervals = audit.output_intervals(graph)
    inputs = case.make_inputs(0)
    assert not audit.audit(case.model, inputs, intervals).problems
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    axis = model.graph.node[0].input[1]
    (init,) = [t for t in model.graph.initializer if t.name == axis]
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).reshape(1), axis))
    a = audit.audit(model, inputs, intervals)
    assert not a.static  # what let the defect through before
    assert any("'axis' must be a 0-D tensor" in p for p in a.schema), a.schema
    assert any("onnx-reference rejects" in p for p in a.reference), a.reference


def test_the_audit_catches_non_finite_and_unsound_outputs() -> None:
    gen = Generator(Config(min_nodes=1, max_nodes=1, ops=frozenset({"Relu"}), connectivity=0.0))
    case = gen.generate(0)
    graph, _, _ = gen.graph(0)
    name = case.model.graph.output[0].name
    intervals = audit.output_intervals(graph)
    out = np.asarray(audit.run_ort(case.model, case.make_inputs(0))[name])
    assert not audit.check_outputs("x", case.model, {name: out}, intervals)
    bad = out.copy()
    bad.flat[0] = np.nan
    assert "non-finite" in audit.check_outputs("x", case.model, {name: bad}, intervals)[0]
    bad.flat[0] = intervals[name].hi * 2 + 10
    assert "outside" in audit.check_outputs("x", case.model, {name: bad}, intervals)[0]


# --- the reference evaluator's known faults stay real ------------------------------------------
# Draws per op version and element type searched for a witness (the first one ends the
# search: most entries cover common draws, a few cover about 1 in 100).
LIMIT_SEARCH = 1000


def _witness(lim: audit.Limitation) -> str | None:
    """A draw the entry covers on which the reference evaluator indeed fails (what it got
    wrong: an error, an output outside its interval, or, where neither shows, values
    ONNX Runtime does not give, as an attribute ignored gives), or None."""
    gens = []
    for op, opset, dtype, k in CASES:
        if op == lim.op:
            try:
                gens.append((_generator(op, opset, dtype), k))
            except pytest.skip.Exception:
                continue
    seen = False
    for i in range(LIMIT_SEARCH):  # round robin: a version that never draws it costs little
        for gen, k in gens:
            model, inputs, a = _audit(gen, k * LIMIT_SEARCH + i)
            got = a.known.get(lim.reason)
            if got is None:
                continue
            seen = True
            if got:
                return got[0]
            if (differ := _departs_from_ort(model, inputs)) is not None:
                return differ
    return "" if seen else None


def _departs_from_ort(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> str | None:
    """Where the evaluator's values differ from ONNX Runtime's beyond the default float32
    tolerance (atol 1e-3, rtol 1e-2) on a model both run: which output."""
    if audit.model_opset(model) > audit.ORT_MAX_OPSET:
        return None
    ours, theirs = audit.run_reference(model, inputs), audit.run_ort(model, inputs)
    for name, want in theirs.items():
        got = np.asarray(ours[name])
        if (
            want.dtype.kind == "f"
            and got.shape == want.shape
            and not np.allclose(got, want, rtol=1e-2, atol=1e-3, equal_nan=True)
        ):
            return f"{name}: values differ from ONNX Runtime's"
    return None


@pytest.mark.parametrize(
    "lim",
    audit.REFERENCE_LIMITS,
    ids=[f"{lim.op}-{i}" for i, lim in enumerate(audit.REFERENCE_LIMITS)],
)
def test_each_reference_limit_is_still_real(lim: audit.Limitation) -> None:
    """Each REFERENCE_LIMITS entry exempts draws from the reference check: it must cover
    some draw and the evaluator must still fail on one (a newer onnx that fixed it, or a
    spec that no longer draws it, makes the entry dead: remove it)."""
    got = _witness(lim)
    assert got is not None, f"no draw of {lim.op} is covered by: {lim.reason}"
    assert got, f"the reference evaluator no longer fails where covered: {lim.reason}"
