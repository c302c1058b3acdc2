"""Mutation: a valid model's neighbours, made by editing its recorded choices op by op.

GraphFuzzer mutates a model by inserting, replacing or deleting an op, inserting a block,
or changing an attribute, a type or a shape, then repairs the graph. Here a model is its
choice record, cut into one list per op (``choices.OpReplay``), so each mutation edits one
op's list and the solver re-solves the rest: every mutant is valid by construction, the
other ops keep their own choices, and the mutant is an ordinary ``Case`` (its record
shrinks, replays and bundles like any other).
"""

from __future__ import annotations

import random

from onnxfuzz.generate.build.generator import NODE_COUNT, OP, OP_TYPE, Case, Generator, glue_per_op
from onnxfuzz.generate.lang.choices import OpReplay, Span, spans_by_label

MUTATIONS = ("insert-op", "replace-op", "delete-op", "redraw-choice", "insert-block")


def op_lists(case: Case) -> tuple[list[int | None], list[list[int | None]]]:
    """The record as the choices before the first op and one list per op."""
    ops = spans_by_label(case.spans, OP)
    rec: list[int | None] = list(case.choices)
    head = rec[: ops[0].start] if ops else rec
    return head, [rec[o.start : o.end] for o in ops]


def mutate(gen: Generator, case: Case, seed: int) -> tuple[Case, str]:
    """A mutant of ``case`` (made by ``gen``), drawn with ``seed``, and what was done."""
    rng = random.Random(seed)
    head, ops = op_lists(case)
    if not ops:
        return gen.generate(seed), "new"
    spans = case.spans
    op_spans = spans_by_label(spans, OP)
    glue = glue_per_op(spans)
    kinds = [m for m in MUTATIONS if m != "insert-block" or gen.blocks]
    if len(ops) < 2:
        kinds.remove("delete-op")
    kind = rng.choice(kinds)
    k = rng.randrange(len(ops))
    nodes = len(case.ops)
    if kind == "insert-op":
        ops.insert(k, [])  # all of its choices fresh: its type too
        nodes += 1
    elif kind == "replace-op":
        ops[k] = []
    elif kind == "delete-op":
        del ops[k]
        nodes -= 1 + glue[k]
    elif kind == "redraw-choice":
        fixed = _type_positions(spans, op_spans[k])
        free = [j for j in range(len(ops[k])) if j not in fixed]
        if free:
            return _redrawn(gen, seed, rng, head, ops, k, free, case.choices)
        ops[k] = []
    else:  # insert-block: start one of the blocks here, its steps drawn fresh
        b = rng.randrange(len(gen.blocks))
        steps = len(gen.blocks[b])
        ops[k:k] = [[1, b]] + [[] for _ in range(steps - 1)]  # 1: start a block
        nodes += steps
    count = spans_by_label(spans, NODE_COUNT)
    if count and count[0].end - count[0].start == 1:
        cfg = gen.cfg
        head[count[0].start] = min(max(nodes, cfg.min_nodes), cfg.max_nodes) - cfg.min_nodes
    return gen.generate(seed, stream=OpReplay(seed, head, ops, OP)), f"{kind} at op {k}"


REDRAWS = 3  # positions tried before a redraw that keeps drawing the same values is kept


def _redrawn(
    gen: Generator,
    seed: int,
    rng: random.Random,
    head: list[int | None],
    ops: list[list[int | None]],
    k: int,
    free: list[int],
    parent: list[int],
) -> tuple[Case, str]:
    """Op ``k`` with one attribute, type, dim, reuse or value draw redrawn. A redrawn
    choice may draw its old value again (a chance of 0.97 mostly does): the mutant would
    be its parent, a test spent twice, so up to ``REDRAWS`` positions are tried."""
    for _ in range(REDRAWS):
        mutant = [list(o) for o in ops]
        mutant[k][rng.choice(free)] = None
        child = gen.generate(seed, stream=OpReplay(seed, head, mutant, OP))
        if child.choices != parent:
            break
    return child, f"redraw-choice at op {k}"


def _type_positions(spans: list[Span], op: Span) -> set[int]:
    """Positions, relative to ``op``, of the choices that pick its type (or its block)."""
    return {
        i - op.start
        for t in spans_by_label(spans, OP_TYPE)
        if op.start <= t.start and t.end <= op.end
        for i in range(t.start, t.end)
    }
