"""Glue: connected graphs from the solver (onnxfuzz.generate.build.glue)."""

from __future__ import annotations

from dataclasses import replace

import onnx
import pytest

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.build.control import CONTROL_OPS
from onnxfuzz.generate.build.generator import NODE_COUNT, OP, Generator, glue_per_op
from onnxfuzz.generate.build.glue import GLUE_OPS
from onnxfuzz.generate.build.sequences import CLOSE, MAKE
from onnxfuzz.generate.build.sequences import OPS as SEQUENCE_OPS
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.choices import spans_by_label
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.reduce.choice_passes import Choices, _without

GLUE_ACTIVATIONS = ("Relu", "Tanh", "Sigmoid")


def _chain_stats(models: list[onnx.ModelProto]) -> tuple[float, float]:
    """Mean share of node inputs a node produced, mean longest node chain."""
    shares, chains = [], []
    for m in models:
        producer = {o: i for i, n in enumerate(m.graph.node) for o in n.output}
        inputs = [x for n in m.graph.node for x in n.input if x]
        shares.append(sum(x in producer for x in inputs) / len(inputs))
        depth: list[int] = []
        for n in m.graph.node:
            depth.append(1 + max([depth[producer[x]] for x in n.input if x in producer] or [0]))
        chains.append(max(depth))
    return sum(shares) / len(shares), sum(chains) / len(chains)


def _glue_nodes(m: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in m.graph.node if n.name.startswith("glue_")]


def test_connectivity_chains_ops_into_deep_graphs() -> None:
    """The issue's figures at 20 nodes: before glue 30 % of node inputs came from a node
    and the longest chain averaged 3.6 ops. Sequence ops and control flow left out: a
    sequence input is always a node's output (made from tensors where none exists), and
    If, Loop and Scan take a tensor of any type and shape, which reuse finds among node
    outputs at any connectivity."""
    cfg = Config(min_nodes=20, max_nodes=20, exclude_ops=SEQUENCE_OPS | CONTROL_OPS)
    models = {
        rate: [
            Generator(replace(cfg, connectivity=rate)).generate(s).model for s in range(1000, 1100)
        ]
        for rate in (0.0, 0.8)
    }
    share0, chain0 = _chain_stats(models[0.0])
    share, chain = _chain_stats(models[0.8])
    assert not any(_glue_nodes(m) for m in models[0.0])  # 0: generates as before
    # +19 points here (+22 before NonMaxSuppression and MaxRoiPool, whose boxes are constants,
    # joined the op set); the issue's >= 60 % with every op is tools/bench_diversity.py's.
    assert share > share0 + 0.15, (share0, share)
    assert chain >= 8 > chain0, (chain0, chain)


def test_every_model_has_exactly_its_node_count_glue_included() -> None:
    gen = Generator(Config(min_nodes=12, max_nodes=12, connectivity=1.0))
    for seed in range(60):
        case = gen.generate(seed)
        ops = len(spans_by_label(case.spans, OP))
        closed = len(spans_by_label(case.spans, CLOSE))  # dangling sequences, after the 12
        made = len(spans_by_label(case.spans, MAKE))  # sequences made for an input
        glue = sum(glue_per_op(case.spans))  # the graph's glue and made values (not a body's)
        nodes = case.model.graph.node
        assert len(nodes) == ops + glue + closed
        # The last op may need a sequence or optional made from tensors with no budget
        # left (a sequence input has nothing else to take): one node over, no more.
        assert len(nodes) - closed - 12 in ((0, 1) if made else (0,)), seed
        glue -= sum(n.name.startswith("make_") for n in nodes)
        assert len(_glue_nodes(case.model)) == glue


@pytest.mark.parametrize("opset", [13, 21])
def test_glued_models_are_valid_and_finite(opset: int) -> None:
    gen = Generator(Config(min_nodes=15, max_nodes=15, connectivity=1.0, opset=opset))
    glued = 0
    for seed in range(40):
        case = gen.generate(seed)
        glued += len(_glue_nodes(case.model))
        v = validate(case.model, case.make_inputs(seed))
        assert v.ok and v.finite, (seed, v.problems[:1])
    assert glued > 100


def test_glue_never_truncates_floats_to_integers() -> None:
    """float -> int/bool Casts turn a tolerated rounding difference into a mismatch."""
    gen = Generator(Config(min_nodes=20, max_nodes=20, connectivity=1.0))
    casts = 0
    for seed in range(80):
        m = onnx.shape_inference.infer_shapes(gen.generate(seed).model)
        types = {vi.name: vi.type.tensor_type.elem_type for vi in m.graph.value_info}
        types.update({vi.name: vi.type.tensor_type.elem_type for vi in m.graph.input})
        types.update({t.name: t.data_type for t in m.graph.initializer})
        for n in _glue_nodes(m):
            if n.op_type == "Cast":
                casts += 1
                to = next(a.i for a in n.attribute if a.name == "to")
                if types[n.input[0]] in dt.FLOATS:
                    assert to in dt.FLOATS, (seed, n.name)
    assert casts > 20


def test_glue_uses_only_the_ops_and_types_a_run_may_generate() -> None:
    ops = frozenset({"Relu", "MatMul", "Add", "Reshape", "Slice", "Softmax"})
    gen = Generator(Config(min_nodes=15, max_nodes=15, ops=ops, connectivity=1.0))
    used = {n.op_type for s in range(40) for n in _glue_nodes(gen.generate(s).model)}
    assert used and used <= {"Reshape", "Slice"}, used
    avoid = frozenset({("Clip", dt.FLOAT), ("Cast", dt.INT64)})
    gen = Generator(Config(min_nodes=15, max_nodes=15, connectivity=1.0, avoid=avoid))
    for seed in range(40):
        m = onnx.shape_inference.infer_shapes(gen.generate(seed).model)
        types = {vi.name: vi.type.tensor_type.elem_type for vi in m.graph.value_info}
        types.update({vi.name: vi.type.tensor_type.elem_type for vi in m.graph.input})
        for n in _glue_nodes(m):
            assert n.op_type in GLUE_OPS
            if n.op_type in ("Clip", "Cast"):
                assert (n.op_type, types[n.input[0]]) not in avoid, (seed, n.name)


def test_dropping_an_op_drops_the_glue_it_brought() -> None:
    # Sequence ops left out: dropping one also drops the node that consumed its dangling
    # sequence (onnxfuzz.generate.build.sequences.close), which is not glue.
    gen = Generator(Config(min_nodes=1, max_nodes=30, connectivity=1.0, exclude_ops=SEQUENCE_OPS))
    checked = 0
    for seed in range(40):
        case = gen.generate(seed)
        c = Choices(tuple(case.choices), tuple(case.spans))
        for k, glue in enumerate(c.glue_per_op):
            if not glue:
                continue
            fewer = _without(c, k, k)
            assert fewer is not None
            again = gen.generate(seed, prefix=fewer.record, zero_tail=True)
            assert len(again.ops) == len(case.ops) - 1 - glue
            checked += 1
            break
    assert checked > 10


def test_gather_glue_moves_one_axis_in_range() -> None:
    """Where one axis alone changes, glue may be one Gather: a window of in-range indices
    (wrapping, so it can grow the axis too); its models stay valid."""
    gen = Generator(Config(min_nodes=15, max_nodes=15, connectivity=1.0))
    gathers = 0
    for seed in range(60):
        case = gen.generate(seed)
        m = onnx.shape_inference.infer_shapes(case.model, strict_mode=True)
        shapes = {
            vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
            for vi in [*m.graph.value_info, *m.graph.input, *m.graph.output]
        }
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
        found = [n for n in _glue_nodes(m) if n.op_type == "Gather"]
        for n in found:
            axis = next(a.i for a in n.attribute if a.name == "axis")
            src, out, idx = shapes[n.input[0]], shapes[n.output[0]], inits[n.input[1]]
            assert idx.ndim == 1 and idx.min() >= 0 and idx.max() < src[axis], (seed, n.name)
            assert [d for i, d in enumerate(src) if i != axis] == [
                d for i, d in enumerate(out) if i != axis
            ]
        if found:
            gathers += len(found)
            v = validate(case.model, case.make_inputs(seed))
            assert v.ok and v.finite, (seed, v.problems[:1])
    assert gathers > 10


def test_activation_glue_brings_values_into_the_domain() -> None:
    """Some value adaptations are an activation instead of a Clip (Relu for Clip(min=0),
    Tanh, Sigmoid where their range fits): its consumer's models stay valid and finite."""
    gen = Generator(Config(min_nodes=15, max_nodes=15, connectivity=1.0))
    seen: dict[str, int] = {}
    for seed in range(80):
        case = gen.generate(seed)
        acts = [n.op_type for n in _glue_nodes(case.model) if n.op_type in GLUE_ACTIVATIONS]
        for op in acts:
            seen[op] = seen.get(op, 0) + 1
        if acts:
            v = validate(case.model, case.make_inputs(seed))
            assert v.ok and v.finite, (seed, v.problems[:1])
    assert {"Tanh", "Sigmoid"} <= set(seen), seen  # Relu fits rarely: a domain from 0 up


def test_glue_stays_inside_the_node_budget() -> None:
    """A glue Transpose whose permuted dims no longer fit would need a Slice and a Pad
    more than the adaptation was costed at: the model would exceed its node count (seen
    once in these 800 models before the Transpose checked its cost). The generator has
    changed since: with the check reverted, seeds 757 and 2516 of 1..30 nodes are the ones
    of 0..2999 that exceed it (searched 2026-11-24), so they are pinned here too; the golden
    corpus test says when generated models change and they must be searched again."""
    pinned = {(1, 30): [757, 2516]}
    for lo, hi in ((2, 6), (1, 30)):
        gen = Generator(Config(min_nodes=lo, max_nodes=hi, connectivity=1.0))
        for seed in [*range(400), *pinned.get((lo, hi), [])]:
            case = gen.generate(seed)
            n = lo + case.choices[spans_by_label(case.spans, NODE_COUNT)[0].start]
            ops = len(spans_by_label(case.spans, OP))
            glue = sum(glue_per_op(case.spans))  # the model graph's glue and made values
            made = spans_by_label(case.spans, MAKE)
            # the last op may need a sequence made with no budget left: one node over
            assert ops + glue <= n + (1 if made else 0), seed
            if not made and not spans_by_label(case.spans, CLOSE):
                assert ops + glue == n, seed


def _triples(monkeypatch: pytest.MonkeyPatch, **rule: float) -> int:
    """Distinct op-type triples of 100 20-node models (no blocks) under ``rule``."""
    import onnxfuzz.generate.build.builder as builder
    import onnxfuzz.generate.build.generator as generator
    from onnxfuzz.generate.measure.metrics import Diversity

    with monkeypatch.context() as m:
        for name, value in rule.items():
            m.setattr(builder if hasattr(builder, name) else generator, name, value)
        gen = Generator(Config(min_nodes=20, max_nodes=20, block_rate=0.0))
        d = Diversity()
        for seed in range(1000, 1100):
            d.add(gen.generate(seed).model)
    return int(d.summary()["triples"])


def test_branches_merge_and_merged_tensors_are_read_again(monkeypatch) -> None:
    """Each a -> b -> c path is an edge into b times one out of it: drawing ops with two
    data inputs while outputs dangle, and reading the tensor whose producer merged the most
    branches, make more distinct triples than the rule before (dangling outputs first, any
    op). Measured: 2,482 against 1,847 (merging ops off: 2,220; merged-first off: 2,017)."""
    now = _triples(monkeypatch)
    before = _triples(
        monkeypatch, MERGE_OPS=0.0, MERGED_FIRST=0.0, DANGLING_FIRST=0.75, DANGLING_LATER=0.75
    )
    assert now > 1.2 * before, (now, before)
    assert _triples(monkeypatch, MERGE_OPS=0.0) < now
    assert _triples(monkeypatch, MERGED_FIRST=0.0) < now


def test_a_node_output_knows_how_many_branches_its_producer_merged() -> None:
    from onnxfuzz.generate.lang.graph import Graph, Node, Tensor
    from onnxfuzz.generate.lang.intervals import Interval

    g = Graph()

    def t(name: str, origin: str = "node") -> Tensor:
        return Tensor(name, dt.FLOAT, (2,), Interval(-1.0, 1.0), origin)

    g.add_node(Node("Relu", "a", ["x"], [t("a_out")], {}))
    g.add_node(Node("Neg", "b", ["x"], [t("b_out")], {}))
    g.add_node(Node("Add", "c", ["a_out", "b_out"], [t("c_out")], {}))
    g.add_node(Node("Mul", "d", ["c_out", "c_out"], [t("d_out")], {}))
    assert [g.fan_in(n) for n in ("x", "a_out", "c_out", "d_out")] == [0, 0, 2, 1]
    assert g.consumed == {"x", "a_out", "b_out", "c_out"}
