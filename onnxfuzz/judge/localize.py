"""Localize a value mismatch, and tell a bug from amplified rounding noise.

The model is run again on both backends with every node output exposed as a graph output
(as ``polygraphy --onnx-outputs mark all`` does); walking the nodes in topological order,
the first whose output is outside tolerance is blamed. Exposing outputs can disable the
fusion that caused the bug: then the model is cut instead, after one node at a time, from
the mismatching output back along the path while a cut still mismatches (a fusion stays
whole where its output is the cut's output: a wrong MatMul -> Add fusion was blamed on
whichever op followed the Add, Gelu, Tanh, Split, and filed as 19 bugs); without a cut
that mismatches, the caller falls back to the producer of the mismatching graph output.

The first diverging node's inputs agree within tolerance. If the *reference* backend, fed
the other backend's values of those inputs, reproduces the other backend's output, the
node did nothing wrong: sub-tolerance differences were amplified (a comparison or Floor
flipped near a tie, a cancellation). That is numeric instability, not a bug.

If not, the *backend* runs that node alone on the same values too. Where it is right
alone, the node is not to blame by itself: its wrong value inside the model comes from the
rest of the model (a rewrite across nodes, constant folding, a mode chosen for the whole
graph: a backend that scaled every output of any model holding a Sigmoid was blamed, model
by model, on whichever float op came first, and filed as thirty bugs). The walk then goes
on, for a later diverging node that is wrong alone (``GUILTY_TRIES`` at most), on the
mismatching output's path and then off it (a fault that reaches outputs the node does not
feed: ``off_path``); without one, the first stays blamed, marked ``right_alone``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.oracle import OracleConfig, Verdict, compare, tolerance
from onnxfuzz.judge.precision import beyond_rounding, graphs, subgraphs


@dataclass
class Divergence:
    node: onnx.NodeProto | None  # None: every exposed intermediate and output agrees
    unstable: bool  # explained by sub-tolerance differences of its inputs
    got_exposed: dict[str, np.ndarray]  # the backend's outputs with everything exposed
    want_exposed: dict[str, np.ndarray] = field(default_factory=dict)  # the reference's
    # the backend, run on ``node`` alone with the same input values, agrees with the
    # reference there (and no later diverging node was wrong alone): the model around the
    # node makes it wrong
    right_alone: bool = False
    # ``node`` does not feed the mismatching output, whose diverging nodes are each right
    # alone, and the backend gets it wrong alone
    off_path: bool = False


# Diverging nodes tried for one that is wrong alone, past the first that is right alone:
# each costs a run of either backend on the node alone.
GUILTY_TRIES = 6

# Cuts of a model tried where exposing its intermediates undoes the mismatch: each costs a
# run of both backends (a TVM compile each).
MAX_CUTS = 8

# A node's float32 outputs beyond its op's error budget: why, or None (``budget.over_budget``,
# passed in: the budgets build on this module).
OverBudget = Callable[
    [onnx.NodeProto, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]],
    str | None,
]

# Whether a node's float16 outputs differ somewhere beyond rounding, element by element
# (``precision.beyond_rounding``): (the node, the values it was fed, one side's outputs,
# the other's).
Gross = Callable[
    [onnx.NodeProto, dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]],
    bool,
]


def gross_check(
    model: onnx.ModelProto,
    reference: str,
    backend: str,
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
    run_reference: Callable[[bytes, dict], Outcome] | None,
) -> Gross:
    """``precision.beyond_rounding`` for a node of ``model`` (which declares its inputs'
    types): each element against its own tolerance (not scaled by the tensor's largest
    magnitude) and what nudging the node's float16 inputs moves it on the reference."""

    def gross(
        node: onnx.NodeProto,
        fed: dict[str, np.ndarray],
        want: dict[str, np.ndarray],
        got: dict[str, np.ndarray],
    ) -> bool:
        mine = {t: want[t] for t in node.output if t in want and t in got}
        if not mine:
            return False
        one = single_node(model, node)
        ins = {} if one is None else {i.name: fed[i.name] for i in one.graph.input if i.name in fed}
        if one is not None and len(ins) != len(one.graph.input):
            one = None

        def own(t: str) -> tuple[float, float] | None:
            return tolerance(reference, backend, t, mine[t], cfg, tol_dtypes, scaled=False)

        return beyond_rounding(one, ins, mine, got, run_reference, own)

    return gross


def inferred_types(model: onnx.ModelProto, static: bool = True) -> list[onnx.ValueInfoProto]:
    """Types for the node outputs ``model`` declares none for, from ONNX's shape inference
    (``static``: tensors of static shape only, for matching, where a symbolic dim would
    match any other; else any tensor). A model from elsewhere often has no value_info;
    without it an intermediate can be neither exposed nor replaced, nor a node bypassed."""
    g = model.graph
    typed = {vi.name for vi in (*g.input, *g.value_info, *g.output)}
    if all(t in typed for n in g.node for t in n.output if t):
        return []
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
    except Exception:  # a model inference refuses: no types beyond those it states
        return []
    return [
        vi
        for vi in inferred
        if vi.name not in typed
        and vi.type.HasField("tensor_type")
        and (not static or has_static_shape(vi))
    ]


def has_static_shape(vi: onnx.ValueInfoProto) -> bool:
    """Whether ``vi`` is a tensor whose every dim is a number."""
    t = vi.type.tensor_type
    return (
        vi.type.HasField("tensor_type")
        and t.HasField("shape")
        and all(d.HasField("dim_value") for d in t.shape.dim)
    )


def expose_all(model: onnx.ModelProto, rankless: bool = True) -> onnx.ModelProto:
    """``model`` with every node output it can type a graph output: declared ones, and those
    shape inference gives a type (a symbolic dim, a model's ``batch``, is no bar to running
    it; only to matching one tensor's shape with another's). ``rankless``: those it gives
    an element type and no shape too (ONNX's inference leaves a Loop's outputs so: unexposed,
    a wrong Loop was blamed on the node that reads it, which is right)."""
    return _exposed(model, inferred_types(model, static=False), rankless)


def exposures(model: onnx.ModelProto) -> list[onnx.ModelProto]:
    """The models to try in turn for every intermediate's value (``expose_all``): with the
    tensors of no known shape exposed, then, where there are any, without them (for a
    backend that wants a graph output's rank). Shape inference runs once for both."""
    typed = inferred_types(model, static=False)
    every = _exposed(model, typed, rankless=True)
    ranked = _exposed(model, typed, rankless=False)
    return [every] if len(ranked.graph.output) == len(every.graph.output) else [every, ranked]


def _exposed(
    model: onnx.ModelProto, inferred: list[onnx.ValueInfoProto], rankless: bool
) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    typed = [vi for vi in inferred if rankless or vi.type.tensor_type.HasField("shape")]
    info = {vi.name: vi for vi in (*m.graph.value_info, *typed)}
    for n in m.graph.node:
        for t in n.output:
            # tensors only: sequences and optionals stay inside (graph outputs are tensors)
            if t and t not in have and t in info and info[t].type.HasField("tensor_type"):
                m.graph.output.append(info[t])
                have.add(t)
    return m


def single_node(model: onnx.ModelProto, node: onnx.NodeProto) -> onnx.ModelProto | None:
    """``node`` alone: its tensor inputs become graph inputs, initializers stay. None when
    an input's type is not declared in ``model`` (a reducer's candidate may lack it)."""
    infos = {
        vi.name: vi
        for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output)
    }
    inits = {i.name: i for i in model.graph.initializer}
    names = [t for t in dict.fromkeys(node.input) if t and t not in inits]
    if any(t not in infos for t in names):
        return None
    ins = [infos[t] for t in names]
    graph = helper.make_graph(
        [node],
        "node",
        ins,
        [infos[t] for t in node.output if t in infos],
        initializer=[inits[t] for t in dict.fromkeys(node.input) if t in inits],
    )
    return helper.make_model(graph, opset_imports=model.opset_import, ir_version=model.ir_version)


def first_divergence(
    model: onnx.ModelProto,
    reference: str,
    backend: str,
    run: Callable[[bytes], dict[str, Outcome]],
    cfg: OracleConfig,
    feeds: dict[str, np.ndarray] | None = None,
    run_reference: Callable[[bytes, dict], Outcome] | None = None,
    tol_dtypes: dict[str, str] | None = None,
    output: str = "",
    kind: str = "",
    run_backend: Callable[[bytes, dict], Outcome] | None = None,
    beyond: OverBudget | None = None,
) -> Divergence | None:
    """The first node (topological order) whose output differs between the backends, among
    those ``output`` (the mismatching graph output; "" any) depends on; a divergence
    without a node when they agree everywhere once every intermediate is exposed; None
    when the exposed model did not run on both. For a wrong element type (``kind``
    "dtype"), the first node whose result has another element type, where one has.
    ``run_backend`` (a model and its feeds, on ``backend``): a node the backend gets right
    alone is passed over for a later one it gets wrong alone (see the module doc);
    ``beyond`` (``budget.over_budget``): a float32 output beyond its op's error budget is
    wrong alone, and differs past a node right alone."""
    for probe in exposures(model):
        outcomes = run(probe.SerializeToString())
        ref, got = outcomes.get(reference), outcomes.get(backend)
        if ref is not None and got is not None and ref.status == got.status == Status.OK:
            break
    else:
        return None
    want: dict[str, np.ndarray] = ref.outputs or {}
    have: dict[str, np.ndarray] = got.outputs or {}
    # A float16 node whose outputs agree within the tolerance (its atol scaled by the
    # tensor's largest magnitude) may still be off by 100 % on its small elements: it
    # differs too (a planted LeakyRelu doubled below -4 was walked past, and the Div after
    # it blamed and excused as amplified rounding: audit 16, D3); and the node alone
    # agrees only where no element is off beyond rounding either.
    gross = gross_check(probe, reference, backend, cfg, tol_dtypes, run_reference)
    mine = {**(feeds or {}), **want}
    # A node off another output's path is not this mismatch's cause: in a campaign, torch's
    # Range came back int64 for int16 while a float16 Sign in another branch flipped once
    # every intermediate was exposed, and the bug was filed as "dtype in Sign output", a
    # signature no reduction to either op could keep.
    upstream = ancestors(probe.graph, output)
    on_path = [n for k, n in enumerate(probe.graph.node) if upstream is None or k in upstream]
    if kind == "dtype":
        # Values are no guide to a wrong element type: torch's Pow(float, double) came back
        # double, after a float16 HardSigmoid cast to double whose one-ulp difference broke
        # float64's tolerance; "dtype in Cast output" named an op that did nothing wrong and
        # bound the reduction to the float16 noise (3 nodes kept where Pow alone shows it).
        for node in on_path:
            if any(
                t in want and t in have and np.asarray(have[t]).dtype != np.asarray(want[t]).dtype
                for t in node.output
            ):
                return Divergence(node, False, have, want)
    if kind == "shape":
        # Nor to a shape that departs from the model's declaration: the ONNX reference
        # evaluator's GlobalMaxPool dropped a rank-3 input's last axis after a Resize whose
        # antialiased values differed a little, and "shape in Resize output" blamed the
        # Resize (and escaped GlobalMaxPool's documented fault). The first node whose
        # result departs from its declared static shape is the one at fault.
        declared = _static_shapes(probe.graph)
        for node in on_path:
            if any(
                t in have and t in declared and np.shape(have[t]) != declared[t]
                for t in node.output
            ):
                return Divergence(node, False, have, want)
    right: onnx.NodeProto | None = None  # the first diverging node right alone
    tries = 0
    # Past a path whose diverging nodes are each right alone, the nodes off it: one wrong
    # alone there is the fault, reaching an output it does not feed.
    others = [
        n for k, n in enumerate(probe.graph.node) if upstream is not None and k not in upstream
    ]
    for node, off_path in [*((n, False) for n in on_path), *((n, True) for n in others)]:
        if off_path and right is None:
            break
        # Past a node right alone, a float32 node beyond its op's error budget differs too
        # (within the end-to-end tolerance): one wrong alone by that much is what the walk
        # looks for (a float64 output off by 1 % blamed the float32 Sigmoid that was).
        budget = beyond if right is not None else None
        if not _differs(node, reference, want, backend, have, cfg, tol_dtypes, budget, gross, mine):
            continue
        if run_reference is None or feeds is None:
            return Divergence(node, False, have, want)
        # the exposed model declares every intermediate's type (inferred where the model
        # declares none): the node alone needs its inputs' and outputs' types
        alone = node_alone(probe, node, {**feeds, **have}, run_reference)
        if right is None:
            explained = alone is not None and _agrees(
                node, reference, alone[1], backend, have, cfg, tol_dtypes, gross, alone[0]
            )
            if explained or alone is None or run_backend is None:
                return Divergence(node, explained, have, want)
        elif alone is None or run_backend is None:
            continue  # past a node right alone, only one shown wrong alone is blamed
        if not _right_alone(
            probe, node, alone, reference, backend, run_backend, cfg, tol_dtypes, beyond, gross
        ):
            return Divergence(node, False, have, want, off_path=off_path)
        right = right or node
        tries += 1
        if tries > GUILTY_TRIES:
            break
    if right is not None:
        return Divergence(right, False, have, want, right_alone=True)
    return Divergence(None, False, have, want)


def cut_model(model: onnx.ModelProto, outputs: list[onnx.ValueInfoProto]) -> onnx.ModelProto:
    """``model`` cut after the nodes that make ``outputs``: those the graph's outputs, the
    nodes they do not depend on dropped (its inputs and initializers stay, so the same
    feeds run it)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    keep: set[int] = set()
    for vi in outputs:
        keep |= ancestors(g, vi.name) or set()
    nodes = [n for k, n in enumerate(g.node) if k in keep]
    del g.node[:]
    g.node.extend(nodes)
    del g.output[:]
    g.output.extend(outputs)
    return m


def cut_divergence(
    model: onnx.ModelProto,
    output: str,
    reference: str,
    backend: str,
    run: Callable[[bytes], dict[str, Outcome]],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
) -> onnx.NodeProto | None:
    """The first node, going back from the one that makes ``output``, whose outputs differ
    between the backends in ``model`` cut after it (``cut_model``): from each node so
    found, the makers of what it reads are cut after in turn; None where the maker of
    ``output`` is as far back as it goes (or no cut ran), ``MAX_CUTS`` cuts at most. For
    a mismatch no exposed intermediate shows (``first_divergence``'s node None)."""
    g = model.graph
    made = {t: n for n in g.node for t in n.output if t}
    typed = {vi.name: vi for vi in expose_all(model).graph.output}

    def makers(n: onnx.NodeProto, seen: set[int]) -> list[onnx.NodeProto]:
        # the makers of what it reads (its inputs, then what its bodies read outside);
        # through one of no tensor output (a sequence, an optional: no graph output), the
        # makers of what that one reads
        ms: list[onnx.NodeProto] = []
        for t in dict.fromkeys([*n.input, *sorted(reads(n) - set(n.input))]):
            m = made.get(t)
            if m is None or id(m) in seen:
                continue
            seen.add(id(m))
            ms += [m] if any(o in typed for o in m.output) else makers(m, seen)
        return ms

    node, found, cuts = made.get(output), None, 0
    while node is not None:
        back = None
        for maker in makers(node, set()):
            outs = [typed[o] for o in maker.output if o in typed]
            if cuts >= MAX_CUTS:
                break
            cuts += 1
            ran = run(cut_model(model, outs).SerializeToString())
            ref, got = ran.get(reference), ran.get(backend)
            if ref is None or got is None or not ref.status == got.status == Status.OK:
                continue
            want, have = ref.outputs or {}, got.outputs or {}
            if _differs(maker, reference, want, backend, have, cfg, tol_dtypes, None):
                back = found = maker
                break
        node = back
    return found


def off_path_note(node: onnx.NodeProto, backend: str, output: str) -> str:
    """What a blamed node off the mismatching output's path says (``Divergence.off_path``)."""
    return (
        f"{node.op_type} ({node.name}) does not feed output {output}; each node that does and "
        f"differs is right alone on {backend}, fed the same input values, and "
        f"{node.op_type} alone is not"
    )


def right_alone_note(node: onnx.NodeProto, backend: str) -> str:
    """What a blamed node that ``backend`` gets right alone says (``Divergence.right_alone``)."""
    return (
        f"{node.op_type} ({node.name}) alone on {backend}, fed the same input values, agrees "
        "with the reference: its wrong value needs the rest of the model (a rewrite across "
        "nodes, constant folding, or a choice made for the whole graph)"
    )


def _differs(
    node: onnx.NodeProto,
    reference: str,
    want: dict[str, np.ndarray],
    backend: str,
    have: dict[str, np.ndarray],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
    by_budget: OverBudget | None,
    gross: Gross | None = None,
    fed: dict[str, np.ndarray] | None = None,
) -> bool:
    """Whether ``node``'s outputs differ between ``want`` and ``have``: beyond the tolerance,
    (``gross``, the node fed ``fed``) a float16 element beyond its own tolerance and
    rounding, or (``by_budget``) a float32 output beyond its op's error budget
    (``judge.budget``)."""
    names = [t for t in node.output if t in want]
    if not names:
        return False
    if compare(reference, want, backend, have, names, cfg, tol_dtypes).verdict != Verdict.OK:
        return True
    if gross is not None and gross(node, fed or want, want, have):
        return True
    return _over_budget(by_budget, node, want, want, have)


def _over_budget(
    beyond: OverBudget | None,
    node: onnx.NodeProto,
    inputs: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    got: dict[str, np.ndarray],
) -> bool:
    if beyond is None:
        return False
    return beyond(node, {t: inputs[t] for t in node.input if t in inputs}, want, got) is not None


def _agrees(
    node: onnx.NodeProto,
    reference: str,
    outputs: dict[str, np.ndarray],
    backend: str,
    have: dict[str, np.ndarray],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
    gross: Gross | None = None,
    fed: dict[str, np.ndarray] | None = None,
) -> bool:
    """Whether ``outputs`` (the reference's, of ``node`` alone, fed ``fed``) match ``have``
    there: within the tolerance and (``gross``) no float16 element beyond its own
    tolerance and rounding (the reference fed a doubled LeakyRelu's inputs "reproduced"
    its output within the magnitude-scaled atol)."""
    names = [t for t in node.output if t in outputs and t in have]
    if not names:
        return False
    if compare(reference, outputs, backend, have, names, cfg, tol_dtypes).verdict != Verdict.OK:
        return False
    return gross is None or fed is None or not gross(node, fed, outputs, have)


def _right_alone(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    alone: tuple[dict[str, np.ndarray], dict[str, np.ndarray]],
    reference: str,
    backend: str,
    run_backend: Callable[[bytes, dict], Outcome],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
    beyond: OverBudget | None,
    gross: Gross | None = None,
) -> bool:
    """Whether ``backend``, run on ``node`` alone with the inputs the reference was fed
    (``alone``: those, and the reference's outputs), agrees with the reference: within the
    tolerance and, for a float32 output, within its op's error budget. A run that fails,
    or a node that cannot be made alone, is not shown right: it stays blamed."""
    fed, want = alone
    got = run_alone(model, node, fed, run_backend)
    if got is None:
        return False
    return _agrees(node, reference, want, backend, got, cfg, tol_dtypes, gross, fed) and not (
        _over_budget(beyond, node, fed, want, got)
    )


def _static_shapes(g: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    """The tensors ``g`` declares with every dim a number (a symbolic or unknown dim, as a
    data-dependent op's output has, says nothing)."""
    out = {}
    for vi in (*g.value_info, *g.output):
        t = vi.type.tensor_type
        if vi.type.WhichOneof("value") == "tensor_type" and t.HasField("shape"):
            dims = t.shape.dim
            if all(d.WhichOneof("value") == "dim_value" for d in dims):
                out[vi.name] = tuple(d.dim_value for d in dims)
    return out


def first_rerun_divergence(
    model: onnx.ModelProto,
    backend: str,
    run: Callable[[bytes], Outcome],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None = None,
    output: str = "",
) -> onnx.NodeProto | None:
    """The first node (topological order, among those ``output`` depends on) whose output
    differs beyond the tolerance between the backend's two runs of the model with every
    intermediate exposed (the worker runs each compiled model twice); None where the
    exposed model's runs agree (exposing them changed what the backend compiled) or it
    did not run."""
    probe = expose_all(model, rankless=False)
    got = run(probe.SerializeToString())
    if got.status != Status.OK or got.outputs is None or got.second is None:
        return None
    first, second = got.outputs, got.second
    upstream = ancestors(probe.graph, output)
    for k, node in enumerate(probe.graph.node):
        if upstream is not None and k not in upstream:
            continue
        names = [t for t in node.output if t in first and t in second]
        if names and compare(backend, first, backend, second, names, cfg, tol_dtypes).verdict != (
            Verdict.OK
        ):
            return node
    return None


def reads(node: onnx.NodeProto) -> set[str]:
    """The tensors ``node`` reads: its inputs and, through its subgraphs, any they name
    (a subgraph's own tensors too: names are unique across a model's graphs, so those
    never match an outer node's output)."""
    inner = (g for sub in subgraphs(node) for g in graphs(sub))
    return {t for t in node.input if t} | {t for g in inner for n in g.node for t in n.input}


def ancestors(g: onnx.GraphProto, output: str) -> set[int] | None:
    """The indices of the nodes ``output`` depends on (itself made by one of them); None
    where no node makes it (a graph input passed through, or "")."""
    made = {t: k for k, n in enumerate(g.node) for t in n.output if t}
    if output not in made:
        return None
    found: set[int] = set()
    todo = [output]
    while todo:
        k = made.get(todo.pop())
        if k is not None and k not in found:
            found.add(k)
            todo.extend(reads(g.node[k]))
    return found


def run_alone(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    fed: dict[str, np.ndarray],
    run: Callable[[bytes, dict], Outcome],
) -> dict[str, np.ndarray] | None:
    """``node`` as a one-node model (``single_node``) run by ``run`` on ``fed``: its
    outputs, or None where the model cannot be made or the run fails."""
    one = single_node(model, node)
    if one is None:
        return None
    got = run(one.SerializeToString(), fed)
    return got.outputs if got.status == Status.OK else None


def node_alone(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    values: dict[str, np.ndarray],
    run_reference: Callable[[bytes, dict], Outcome],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None:
    """``node`` as a one-node model (``single_node``) run on the reference with its inputs
    taken from ``values``: (the inputs fed, its outputs), or None where the model cannot be
    made, an input has no value, or the run fails."""
    one = single_node(model, node)
    if one is None:
        return None
    fed = {i.name: values[i.name] for i in one.graph.input if i.name in values}
    if len(fed) != len(one.graph.input):
        return None
    again = run_reference(one.SerializeToString(), fed)
    if again.status != Status.OK or again.outputs is None:
        return None
    return fed, again.outputs
