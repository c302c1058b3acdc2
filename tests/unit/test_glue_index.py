"""Glue's indexed source search (``Graph.produced_by``, ``cheapest_indexed``) finds what a
plain scan of every node output finds, in the same order, on real generation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.build import builder, glue
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.glue import Cheapest, Glue, Need, cheapest_indexed, cheapest_scanned
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.graph import Graph, Tensor
from onnxfuzz.generate.lang.intervals import Interval

CF = frozenset({"If", "Loop", "Scan", "Add", "Relu", "MatMul", "Reshape", "Concat", "Transpose"})
CONFIGS = {
    "n20": Config(min_nodes=20, max_nodes=20),
    "n60": Config(min_nodes=60, max_nodes=60),
    "rank2": Config(max_rank=2, max_dim=3, min_nodes=15, max_nodes=15),
    "blocks": Config(block_rate=0.6, min_nodes=12, max_nodes=12),
    "control": Config(ops=CF, min_nodes=10, max_nodes=10),  # Loop: unshaped tensors skipped
}


def _plain(found: Cheapest) -> tuple[list[tuple[str, list[tuple[int, int]]]], int]:
    best, cost = found
    return [(t.name, targets) for t, targets in best], cost


def _scan(glue_: Glue, g: Graph, need: Need, budget: int, skip: frozenset[str] | set[str]):
    sources = [t for t in g.produced if t.name not in skip]
    return _plain(cheapest_scanned(glue_, g, need, budget, sources))


def _index_agrees(glue_: Glue, g: Graph, need: Need, budget: int, skip) -> bool:
    return _plain(cheapest_indexed(glue_, g, need, budget, skip)) == _scan(
        glue_, g, need, budget, skip
    )


@contextmanager
def _watching_adapt(seen: list[tuple[bool, bool]]) -> Iterator[None]:
    """Every ``adapt`` the solver calls over the graph's node outputs also checks the
    index against a plain scan, and that the check fails on an index missing the source
    the scan picks first (recorded: agreed, and whether a corrupted index was caught)."""
    real = builder.adapt

    def checked(glue_, g, s, need, budget, sources=None, skip=frozenset()):
        if sources is None:
            agreed = _index_agrees(glue_, g, need, budget, skip)
            caught = None
            scanned = _scan(glue_, g, need, budget, skip)
            if scanned[0]:
                first = scanned[0][0][0]
                index = g.produced_by
                g.produced_by = {
                    k: [(p, t) for p, t in v if t.name != first] for k, v in index.items()
                }
                try:
                    caught = not _index_agrees(glue_, g, need, budget, skip)
                finally:
                    g.produced_by = index
            seen.append((agreed, caught))
        return real(glue_, g, s, need, budget, sources, skip)

    builder.adapt = checked
    try:
        yield
    finally:
        builder.adapt = real


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_indexed_sources_are_the_scanned_ones(name: str) -> None:
    seen: list[tuple[bool, bool]] = []
    gen = Generator(CONFIGS[name])
    with _watching_adapt(seen):
        for seed in range(40):
            gen.generate(seed)
    assert len(seen) >= 20, f"{name}: only {len(seen)} glue searches"
    assert all(agreed for agreed, _ in seen), f"{name}: index and scan differ"
    corrupted = [c for _, c in seen if c is not None]
    assert corrupted and all(corrupted), f"{name}: a stale index went unnoticed"


def test_produced_by_holds_produced_in_order() -> None:
    seen: list[Graph] = []
    real = glue.cheapest_indexed

    def keep(glue_, g, need, budget, skip=frozenset()):
        seen.append(g)
        return real(glue_, g, need, budget, skip)

    glue.cheapest_indexed = keep
    try:
        gen = Generator(Config(ops=CF, min_nodes=20, max_nodes=20))
        for seed in range(10):
            gen.generate(seed)
    finally:
        glue.cheapest_indexed = real
    assert seen
    for g in seen + [g.child() for g in seen[:3]]:
        entries = sorted(e for bucket in g.produced_by.values() for e in bucket)
        assert [p for p, _ in entries] == list(range(len(g.produced)))
        assert all(g.produced[p] is t for p, t in entries)
        assert all((t.dtype, t.rank) == k for k, b in g.produced_by.items() for _, t in b)


class _CheckedTargets(dict):
    """A ``targets_memo`` answer that checks every hit against ``_cast_targets`` afresh."""

    def __init__(self, found: dict, glue_: Glue, need: Need, record: list[bool]) -> None:
        super().__init__(found)
        self.glue, self.need, self.record = glue_, need, record

    def get(self, key, default=None):
        hit = super().get(key, default)
        if hit is not None:
            d, lo, hi, min_abs = key
            src = Tensor("src", d, (), Interval(lo, hi, min_abs), "node")
            self.record.append(hit == glue._cast_targets(self.glue, src, self.need))
        return hit


def test_remembered_cast_targets_are_computed_ones() -> None:
    record: list[bool] = []
    real = glue.targets_memo

    def checked(glue_: Glue, need: Need) -> dict:
        return _CheckedTargets(real(glue_, need), glue_, need, record)

    glue.targets_memo = checked
    try:
        gen = Generator(Config(min_nodes=20, max_nodes=20))
        for seed in range(60):
            gen.generate(seed)
    finally:
        glue.targets_memo = real
    assert len(record) > 50 and all(record), f"{record.count(False)} of {len(record)} differ"
    # the false direction: a wrong remembered answer is caught (a float in [-1, 1] fits
    # an open float input with no Clip: 0 steps, not 1)
    wrong: list[bool] = []
    key = (dt.FLOAT, -1.0, 1.0, 0.0)
    _CheckedTargets({key: [(dt.FLOAT, 1)]}, Glue({}, frozenset()), _a_need(), wrong).get(key)
    right: list[bool] = []
    _CheckedTargets({key: [(dt.FLOAT, 0)]}, Glue({}, frozenset()), _a_need(), right).get(key)
    assert wrong == [False] and right == [True]


def _a_need() -> Need:
    """A float input of any rank and values: a float source fits it with no Clip."""
    from onnxfuzz.generate.lang.intervals import Values
    from onnxfuzz.generate.lang.spec_api import fits_dim

    return Need(
        allowed=(dt.FLOAT,),
        lo=0,
        hi=4,
        pattern=lambda r: None,
        values=lambda d: Values(),
        fits=fits_dim,
        draw_dim=lambda axis, e: 1,
        max_dim=4,
        cap=8,
        domain=Values(),
    )
