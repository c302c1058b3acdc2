"""Guided generation: a test made from its seed and a small *decision* record.

A guide (``Uct``, GraphFuzzer's Monte Carlo tree search; or a campaign's mutation
schedule) decides something about test *i* before it is generated; the generator then
makes the test from ``(seed, decision)`` alone, so the decision is all that a campaign has
to store and pass along for the test to be made again anywhere (a lane's generator
process, a resumed campaign, the reducer). A decision is plain JSON data:

- ``None``: the ordinary model of the seed (``Generator.generate(seed)``), byte for byte;
- ``{"path": ["op:Conv", "block:attention"]}``: the model's first ops are these ops or
  blocks (forced op-type choices), everything else drawn from the seed as usual;
- ``{"path": ["chain:MatMul>Softmax>Neg"]}``: an ad-hoc block, each op taking the previous
  one's output as its first input (``blocks.chain``): the frontier guide's op-type chains
  (``onnxfuzz.run.steer``), instantiated like a library block through the same solver;
- ``{"of": [SEED, DECISION]}``: a mutant (``onnxfuzz.generate.build.mutate``, drawn with the
  test's seed) of the test that ``SEED`` and ``DECISION`` make;
- ``{"seed": "NAME", "mutant": true}``: the user model block ``NAME`` (lifted by
  ``onnxfuzz.generate.build.seeds``) as the model's first ops, then a mutant of that (``false``:
  the lifted block as it is).

A decision only ever sets *choices* of the one choice stream (``OpStart``, or ``OpReplay``
through ``mutate``), so the
case it makes is an ordinary case: valid by construction, byte-deterministic, and its
record replays and shrinks with the generator that made it (``Guided.generator_for``).
"""

from __future__ import annotations

import copy
import math
import random
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from onnxfuzz.generate.build import blocks
from onnxfuzz.generate.build.blocks import Step
from onnxfuzz.generate.build.generator import OP, Case, Generator
from onnxfuzz.generate.build.mutate import mutate
from onnxfuzz.generate.lang.choices import OpStart

Decision = dict[str, Any] | None
OP_ACTION, BLOCK_ACTION, CHAIN_ACTION = "op:", "block:", "chain:"
CHAIN_SEP = ">"
CACHED_CHAIN_GENERATORS = 64  # the generators with ad-hoc chains, by chains (a small LRU)
MAX_LINEAGE = 4  # mutants of mutants: how deep a decision may nest (each level regenerates)


def actions(gen: Generator) -> list[str]:
    """What a guide may put at an op slot: every op of the run, every library block."""
    return [OP_ACTION + s.op_type for s in gen.specs] + [
        BLOCK_ACTION + name for name in gen.block_names
    ]


def depth(decision: Decision) -> int:
    """How many generations a decision nests (a parent's regeneration each)."""
    if decision is None or "of" not in decision:
        return 1
    return 1 + depth(decision["of"][1])


def chain_action(ops: Sequence[str]) -> str:
    """The action that forces the linked chain ``ops``."""
    return CHAIN_ACTION + CHAIN_SEP.join(ops)


def chains_of(decision: Decision) -> tuple[str, ...]:
    """The ad-hoc chain actions a decision's lineage uses, in order of first use (the
    blocks its generator has beyond the library's)."""
    found: list[str] = []
    while decision is not None:
        for a in decision.get("path", ()):
            if a.startswith(CHAIN_ACTION) and a not in found:
                found.append(a)
        decision = decision["of"][1] if "of" in decision else None
    return tuple(found)


def uses_seed_blocks(decision: Decision) -> bool:
    while decision is not None:
        if "seed" in decision:
            return True
        decision = decision["of"][1] if "of" in decision else None
    return False


class Guided:
    """Makes a test from ``(seed, decision)``: ``gen`` for everything but user-model
    lineages, which use ``gen`` with the lifted blocks appended (``seed_blocks``, by name).
    The extended generator is used for those tests only, so the other tests' random block
    draws stay exactly those of ``gen``."""

    def __init__(
        self,
        gen: Generator,
        seed_blocks: dict[str, tuple[Step, ...]] | None = None,
        lenient: bool = False,
    ):
        """``lenient``: the Guided of one opset of --opset 16,21, whose generator may lack
        an op or block the guide names (the guide's actions are every opset's): such
        actions are left out of a decision rather than refused."""
        self.gen = gen
        self.lenient = lenient
        self.seeded: Generator | None = None
        if seed_blocks:
            ext = copy.copy(gen)
            ext.block_names = list(gen.block_names) + sorted(seed_blocks)
            ext.blocks = list(gen.blocks) + [seed_blocks[n] for n in sorted(seed_blocks)]
            self.seeded = ext
        self._chained: OrderedDict[tuple[str, ...], Generator] = OrderedDict()
        # --opset 16,21: each test is made by the Guided of its seed's opset, its whole
        # lineage (a mutant's parents too) at that opset; a guide may name what any of
        # them has (an op only some opsets define)
        self._by_opset = (
            {o: Guided(g, seed_blocks, lenient=True) for o, g in gen.by_opset.items()}
            if gen.cfg.opset_mix
            else {}
        )
        subs = self._by_opset.values()
        self._actions = (
            list(dict.fromkeys(a for g in subs for a in g.actions)) if subs else actions(gen)
        )

    def for_seed(self, seed: int) -> Guided:
        """The Guided that makes test ``seed`` (this one but with --opset 16,21)."""
        return self._by_opset[self.gen.cfg.opset_of(seed)] if self._by_opset else self

    @property
    def actions(self) -> list[str]:
        return self._actions

    def generator_for(self, decision: Decision, seed: int | None = None) -> Generator:
        """The generator whose replay of the case's record gives the case again (the
        reducer's; with --opset 16,21, pass the test's ``seed``)."""
        if self._by_opset:
            if seed is None:
                raise ValueError("with several opsets, generator_for needs the test's seed")
            return self.for_seed(seed).generator_for(decision)
        if self.seeded is not None and uses_seed_blocks(decision):
            return self.seeded
        chains = chains_of(decision)
        return self._with_chains(chains) if chains else self.gen

    def _with_chains(self, chains: tuple[str, ...]) -> Generator:
        """``gen`` with the ad-hoc chains appended to its blocks (named by their actions),
        so that a decision can force them as it forces a library block. Only the tests
        that name chains use it: the others' random block draws stay ``gen``'s."""
        ext = self._chained.get(chains)
        if ext is not None:
            self._chained.move_to_end(chains)
            return ext
        known = {s.op_type for s in self.gen.specs}
        steps = []
        if self.lenient:  # a chain of an op this opset lacks is left out
            chains = tuple(a for a in chains if _available(self.gen, a))
        for a in chains:
            ops = a[len(CHAIN_ACTION) :].split(CHAIN_SEP)
            bad = [op for op in ops if op not in known]
            if not ops or bad:
                raise ValueError(f"guide chain {a!r}: ops not in this run: {bad or ops}")
            steps.append(blocks.chain(*ops))
        ext = copy.copy(self.gen)
        ext.block_names = list(self.gen.block_names) + list(chains)
        ext.blocks = list(self.gen.blocks) + steps
        table = getattr(self.gen, "_block_table", None)
        if table:  # --op-mix layers draws a block from a table of indices: the chains' too
            n = len(self.gen.blocks)
            ext._block_table = list(table) + list(range(n, n + len(steps)))
        self._chained[chains] = ext
        if len(self._chained) > CACHED_CHAIN_GENERATORS:
            self._chained.popitem(last=False)
        return ext

    def case(self, seed: int, decision: Decision = None) -> Case:
        return self.for_seed(seed)._case(seed, decision)

    def _case(self, seed: int, decision: Decision) -> Case:
        """``case`` at this Guided's opset (a mutant's parents too)."""
        if decision is None:
            return self.gen.generate(seed)
        if "path" in decision:
            return self._forced(self.generator_for(decision), seed, decision["path"])
        if "seed" in decision:
            gen = self.generator_for(decision)
            base = self._forced(gen, seed, [BLOCK_ACTION + decision["seed"]])
            return mutate(gen, base, seed)[0] if decision.get("mutant") else base
        if "of" in decision:
            parent_seed, parent = decision["of"]
            if depth(decision) > MAX_LINEAGE:
                raise ValueError(f"a decision nests deeper than {MAX_LINEAGE}")
            gen = self.generator_for(parent)
            return mutate(gen, self._case(int(parent_seed), parent), seed)[0]
        raise ValueError(f"unknown guide decision {decision!r}")

    def _forced(self, gen: Generator, seed: int, path: Sequence[str]) -> Case:
        ops: list[list[int]] = []
        for action in path:
            if self.lenient and not _available(gen, action):
                continue
            ops.extend(_forced_ops(gen, action))
        return gen.generate(seed, stream=OpStart(seed, ops, OP))


def _available(gen: Generator, action: str) -> bool:
    """Can ``gen`` make ``action`` (its op, its block, each op of its chain)?"""
    if action.startswith(OP_ACTION):
        return action[len(OP_ACTION) :] in gen._op_index
    if action.startswith(CHAIN_ACTION):
        ops = action[len(CHAIN_ACTION) :].split(CHAIN_SEP)
        return all(op in gen._op_index for op in ops) or action in gen.block_names
    return action[len(BLOCK_ACTION) :] in gen.block_names


def _forced_ops(gen: Generator, action: str) -> list[list[int]]:
    """The per-op choice lists that put ``action`` at the next op slots: the op-type
    choices as ``Generator.graph`` draws them (the block coin, then the index; an index
    over one option draws nothing), the rest of each op left to the seed."""
    coin = bool(gen.blocks)
    if action.startswith(OP_ACTION):
        k = next(i for i, s in enumerate(gen.specs) if s.op_type == action[len(OP_ACTION) :])
        # --op-mix layers first draws whether the op follows real models' frequencies: no
        # (the uniform draw, whose index is k)
        mix = [0] if getattr(gen, "_mix", None) else []
        return [([0] if coin else []) + mix + ([k] if len(gen.specs) > 1 else [])]
    if action.startswith((BLOCK_ACTION, CHAIN_ACTION)):
        # a chain is a block of the generator ``Guided.generator_for`` gives, named by its
        # action
        name = action[len(BLOCK_ACTION) :] if action.startswith(BLOCK_ACTION) else action
        b = gen.block_names.index(name)
        # --op-mix layers draws the block's index into a table of indices (each block once
        # first, so a library block's position is its index; a chain's is past the table
        # the library's blocks fill: ``Guided._with_chains``)
        table = getattr(gen, "_block_table", None)
        if table:
            first = [1] + ([table.index(b)] if len(table) > 1 else [])
        else:
            first = [1] + ([b] if len(gen.blocks) > 1 else [])
        return [first] + [[] for _ in range(len(gen.blocks[b]) - 1)]
    raise ValueError(f"unknown guide action {action!r}")


class Uct:
    """GraphFuzzer's tree search over what starts a model: a node is a sequence of
    actions (ops or blocks), its children the actions that may follow. ``select`` walks
    from the root by UCT (ties broken by ``rng``), and ``visit``
    counts the walk at once (so that tests decided before their rewards arrive spread
    out); ``reward`` adds a test's coverage reward in [0, 1] along its path. Plain data:
    the same visits and rewards in the same order give the same tree."""

    def __init__(self, actions: Sequence[str], depth: int = 2, c: float = 0.5) -> None:
        self.actions = list(actions)
        self.depth = depth
        self.c = c
        self.root = _Node()

    def select(self, rng: random.Random) -> list[str]:
        path: list[str] = []
        node = self.root
        for _ in range(self.depth):
            kids = node.kids
            log_n = math.log(max(node.n, 1))
            # An untried child scores as one tried once at its parent's mean ("first-play
            # urgency"): with ~190 actions, trying every one before any is repeated would
            # take a short campaign's whole budget; this way an action that paid above the
            # average is taken again before the untried ones.
            untried = (node.w / node.n if node.n else 0.0) + self.c * math.sqrt(log_n)
            best, ties = -1.0, []
            for a in self.actions:
                k = kids.get(a)
                s = untried if k is None or not k.n else k.w / k.n + self.c * math.sqrt(log_n / k.n)
                if s > best + 1e-12:
                    best, ties = s, [a]
                elif s >= best - 1e-12:
                    ties.append(a)
            a = ties[rng.randrange(len(ties))]
            path.append(a)
            node = kids.get(a) or _Node()
        return path

    def visit(self, path: Sequence[str]) -> None:
        node = self.root
        node.n += 1
        for a in path:
            node = node.kids.setdefault(a, _Node())
            node.n += 1

    def reward(self, path: Sequence[str], r: float) -> None:
        node: _Node | None = self.root
        node.w += r
        for a in path:
            node = node.kids.get(a)
            if node is None:  # a path that was never visited (not this tree's)
                return
            node.w += r


class _Node:
    __slots__ = ("n", "w", "kids")

    def __init__(self) -> None:
        self.n = 0
        self.w = 0.0
        self.kids: dict[str, _Node] = {}
