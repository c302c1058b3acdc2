"""Localize a value mismatch, and tell a bug from amplified rounding noise.

The model is run again on both backends with every node output exposed as a graph output
(as ``polygraphy --onnx-outputs mark all`` does); walking the nodes in topological order,
the first whose output is outside tolerance is blamed. Exposing outputs can disable the
fusion that caused the bug: then the mismatch is not localized and the caller falls back
to the producer of the first mismatching graph output.

The first diverging node's inputs agree within tolerance. If the *reference* backend, fed
the other backend's values of those inputs, reproduces the other backend's output, the
node did nothing wrong: sub-tolerance differences were amplified (a comparison or Floor
flipped near a tie, a cancellation). That is numeric instability, not a bug.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper

from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.oracle import OracleConfig, Verdict, compare
from onnxfuzz.judge.precision import graphs, subgraphs


@dataclass
class Divergence:
    node: onnx.NodeProto | None  # None: every exposed intermediate and output agrees
    unstable: bool  # explained by sub-tolerance differences of its inputs
    got_exposed: dict[str, np.ndarray]  # the backend's outputs with everything exposed
    want_exposed: dict[str, np.ndarray] = field(default_factory=dict)  # the reference's


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
        and (
            not static
            or vi.type.tensor_type.HasField("shape")
            and all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)
        )
    ]


def expose_all(model: onnx.ModelProto) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    info = {vi.name: vi for vi in (*m.graph.value_info, *inferred_types(m))}
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
) -> Divergence | None:
    """The first node (topological order) whose output differs between the backends, among
    those ``output`` (the mismatching graph output; "" any) depends on; a divergence
    without a node when they agree everywhere once every intermediate is exposed; None
    when the exposed model did not run on both. For a wrong element type (``kind``
    "dtype"), the first node whose result has another element type, where one has."""
    probe = expose_all(model)
    outcomes = run(probe.SerializeToString())
    ref, got = outcomes.get(reference), outcomes.get(backend)
    if ref is None or got is None or ref.status != Status.OK or got.status != Status.OK:
        return None
    want: dict[str, np.ndarray] = ref.outputs or {}
    have: dict[str, np.ndarray] = got.outputs or {}
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
    for node in on_path:
        names = [t for t in node.output if t in want]
        if (
            not names
            or compare(reference, want, backend, have, names, cfg, tol_dtypes).verdict == Verdict.OK
        ):
            continue
        unstable = False
        if run_reference is not None and feeds is not None:
            unstable = _explained_by_inputs(
                model, node, feeds, have, reference, backend, run_reference, cfg, tol_dtypes
            )
        return Divergence(node, unstable, have, want)
    return Divergence(None, False, have, want)


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
    probe = expose_all(model)
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


def _explained_by_inputs(
    model: onnx.ModelProto,
    node: onnx.NodeProto,
    feeds: dict[str, np.ndarray],
    have: dict[str, np.ndarray],
    reference: str,
    backend: str,
    run_reference: Callable[[bytes, dict], Outcome],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None,
) -> bool:
    alone = node_alone(model, node, {**feeds, **have}, run_reference)
    if alone is None:
        return False  # not shown to be explained: the mismatch stands
    outputs = alone[1]
    names = [t for t in node.output if t in outputs and t in have]
    return (
        bool(names)
        and compare(reference, outputs, backend, have, names, cfg, tol_dtypes).verdict
        == Verdict.OK
    )


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
