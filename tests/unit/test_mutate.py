"""Mutants: valid by construction, local, deterministic, ordinary cases."""

from __future__ import annotations

from collections import Counter

import onnx

from onnxfuzz.generate.build.export import INPUTS_KEY
from onnxfuzz.generate.build.generator import OP, Generator
from onnxfuzz.generate.build.mutate import MUTATIONS, mutate, op_lists
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.choices import spans_by_label
from onnxfuzz.generate.lang.config import Config


def graph_content(model: onnx.ModelProto) -> bytes:
    """The graph's bytes without its name, which carries the seed (``onnxfuzz_<seed>``): a
    mutant always has another seed, so its name differs even when nothing else does. With
    the inputs' value domains (model metadata): a mutant that redraws only how wide an
    input's values are is another test (--wide-values)."""
    g = onnx.GraphProto()
    g.CopyFrom(model.graph)
    g.name = ""
    g.doc_string = ""
    inputs = [p.value for p in model.metadata_props if p.key == INPUTS_KEY]
    return g.SerializeToString() + "".join(inputs).encode()


def test_mutants_are_valid_different_and_every_kind_is_used() -> None:
    gen = Generator(Config(min_nodes=3, max_nodes=15))
    kinds: Counter[str] = Counter()
    same = 0
    for seed in range(60):
        parent = gen.generate(seed)
        child, what = mutate(gen, parent, 10_000 + seed)
        kinds[what.split()[0]] += 1
        v = validate(child.model, child.make_inputs(child.seed))
        assert v.ok and v.finite, (seed, what, v.problems[:1])
        same += graph_content(child.model) == graph_content(parent.model)
    assert set(kinds) == set(MUTATIONS), kinds
    assert same <= 6, same


def test_a_redrawn_choice_leaves_the_ops_before_it_alone() -> None:
    gen = Generator(Config(min_nodes=8, max_nodes=8, block_rate=0.0))
    checked = 0
    for seed in range(200):
        parent = gen.generate(seed)
        child, what = mutate(gen, parent, seed)
        if not what.startswith("redraw-choice"):
            continue
        k = int(what.rsplit(" ", 1)[1])
        _, before = op_lists(parent)
        _, after = op_lists(child)
        assert after[:k] == before[:k], (seed, what)  # earlier ops: the same choices
        checked += 1
    assert checked >= 20


def test_mutants_are_deterministic_and_replay_as_ordinary_cases() -> None:
    gen = Generator(Config(min_nodes=3, max_nodes=15))
    for seed in range(20):
        parent = gen.generate(seed)
        a, what_a = mutate(gen, parent, 77 + seed)
        b, what_b = mutate(gen, parent, 77 + seed)
        assert what_a == what_b
        assert a.model.SerializeToString() == b.model.SerializeToString()
        again = gen.generate(a.seed, prefix=a.choices)  # how the shrinker replays a case
        assert again.model.graph.SerializeToString() == a.model.graph.SerializeToString()
        assert len(spans_by_label(again.spans, OP)) == len(spans_by_label(a.spans, OP))
