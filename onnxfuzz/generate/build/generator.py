"""The generator: Isra's backtrack-free instantiation, one op at a time.

Until the model has N nodes (N drawn from the node range): draw the op type uniformly,
then let its spec state its variables through a ``GenBuilder`` (input count, first input,
attributes, further inputs, outputs). Each input takes a node's output that fits its pattern
(with probability ``connectivity``, a dangling one most often), or a node's output adapted
by glue ops (``onnxfuzz.generate.build.glue``; they count toward N), or any tensor that fits
(``picking_rate``), or becomes a fresh graph input / initializer. Every domain is non-empty
by construction, so there is no retry, no rejection and no SMT call anywhere.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import onnx

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.build import blocks
from onnxfuzz.generate.build.builder import GenBuilder
from onnxfuzz.generate.build.control import BODY, BODY_OP, BODY_OP_TYPE, CONTROL_OPS, Nest, no_fill
from onnxfuzz.generate.build.export import to_model
from onnxfuzz.generate.build.glue import GLUE, GLUE_OPS, Glue
from onnxfuzz.generate.build.sequences import MAKE, close
from onnxfuzz.generate.lang.choices import ChoiceStream, Span
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.graph import Graph, Tensor
from onnxfuzz.generate.lang.intervals import Values
from onnxfuzz.generate.lang.spec import OpSpec, op_info, specs_for
from onnxfuzz.generate.lang.values import inputs_for

Pools = tuple[list[int], ...]  # per step of a chain: the op indices it draws from (first: none)

# Span labels of the choice stream (see onnxfuzz.generate.lang.choices).
NODE_COUNT = "node-count"  # the number of ops (no choice when the range is one value)
OP = "op"  # every choice of one op
OP_TYPE = "op-type"  # which op


@dataclass
class Case:
    """One generated test case: the model, how to make its inputs, and its provenance."""

    model: onnx.ModelProto
    seed: int
    ops: list[str]
    choices: list[int] = field(repr=False)
    inputs: list[tuple[str, int, tuple[int, ...]]] = field(repr=False)
    input_domains: dict[str, Values] = field(repr=False)
    spec_calls: int = 0  # builder runs: the node count less glue nodes (no retries)
    spans: list[Span] = field(default_factory=list, repr=False)  # labelled choice runs

    @property
    def dtypes(self) -> list[str]:
        ts = {vi.type.tensor_type.elem_type for vi in self.model.graph.input}
        ts |= {i.data_type for i in self.model.graph.initializer}
        ts |= {vi.type.tensor_type.elem_type for vi in self.model.graph.value_info}
        ts |= {vi.type.tensor_type.elem_type for vi in self.model.graph.output}
        return sorted(dt.NAMES[t] for t in ts if t in dt.NAMES)

    def make_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        return inputs_for(np.random.default_rng(seed), self.inputs, self.input_domains)


class Generator:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        candidates = specs_for(
            cfg.opset,
            set(cfg.ops) if cfg.ops is not None else None,
            set(cfg.exclude_ops),
            cfg.domains,
        )
        self.specs: list[OpSpec] = []
        self.skipped: dict[str, str] = {}
        self._data_inputs: dict[str, int] = {}  # filled by _infeasible's probe build
        for spec in candidates:
            reason = self._infeasible(spec)
            if reason:
                self.skipped[spec.op_type] = reason
            else:
                self.specs.append(spec)
        if not self.specs:
            why = "; ".join(f"{k}: {v}" for k, v in list(self.skipped.items())[:5])
            raise ConfigError(f"no op can be generated with these options ({why})")
        self._infos = [op_info(s.op_type, cfg.opset) for s in self.specs]
        self.glue = self._glue() if cfg.connectivity > 0 else None
        self.fit_glue = self._fit_glue()
        self._nest_top: tuple[Generator, Nest] | None = None  # (its owner, it): see _nest0
        self._op_index = {spec.op_type: k for k, spec in enumerate(self.specs)}
        # Ops a body at depth d may hold: control flow only while a body of its own would
        # still be within --max-depth.
        self._plain = [k for k, sp in enumerate(self.specs) if sp.op_type not in CONTROL_OPS]
        # Ops that take two or more data inputs: drawn more often while outputs dangle,
        # so branches merge (a deep graph rather than parallel chains).
        self._merging = [
            k for k, sp in enumerate(self.specs) if self._data_inputs.get(sp.op_type, 0) >= 2
        ]
        layers = cfg.op_mix == "layers"
        # --op-mix layers: a weighted table of op indices (empty: uniform draws only)
        self._mix = blocks.layer_mix([sp.op_type for sp in self.specs]) if layers else []
        usable = blocks.usable(set(self._op_index), layers) if cfg.block_rate > 0 else {}
        self.block_names = sorted(usable)  # what a guide names a block by
        self.blocks = [usable[name] for name in self.block_names]
        # --op-mix layers: blocks more often, the elementwise groups of real layers the
        # more (a table of block indices; empty: uniform, at --blocks)
        self._block_table = blocks.layer_block_table(self.block_names) if layers else []
        self._block_rate = (
            min(1.0, cfg.block_rate * blocks.LAYER_BLOCK_BOOST) if layers else cfg.block_rate
        )
        # --op-mix chains: the elementwise chain an op drawn outside a block may go on into
        # (empty: none; uniform and layers draw as before)
        self._chains = self._elementwise_chains() if cfg.op_mix == "chains" else {}
        # --opset 16,21: a generator per opset, each of one opset only (the first's shares
        # this one's tables); this one hands every model to the one of its seed's opset
        # (Config.opset_of), whatever the stream, so a stream is always replayed by the
        # generator whose tables it indexes
        self.by_opset: dict[int, Generator] = {cfg.opset: self}
        if cfg.opset_mix:
            first = copy.copy(self)
            first.cfg = replace(cfg, opset_mix=())
            first.by_opset = {cfg.opset: first}
            self.by_opset = {cfg.opset: first}
            for o in cfg.opset_mix[1:]:
                self.by_opset[o] = Generator(replace(cfg, opset=o, opset_mix=()))

    def for_seed(self, seed: int) -> Generator:
        """The generator that makes the model of ``seed`` (this one but with --opset 16,21)."""
        return self.by_opset[self.cfg.opset_of(seed)] if self.cfg.opset_mix else self

    def _infeasible(self, spec: OpSpec) -> str | None:
        """Options such as --dtypes or --max-rank can rule an op out entirely; find out
        once, here, instead of failing mid-model."""
        info = op_info(spec.op_type, self.cfg.opset)
        assert info is not None
        try:
            b = GenBuilder(spec, info, self.cfg, Graph(), ChoiceStream(0), nest=Nest(0, no_fill))
            spec.build(b, spec.params)
        except ConfigError as e:
            return str(e)
        self._data_inputs[spec.op_type] = b.data_taken
        return None

    def _glue(self) -> Glue:
        """The glue ops this generator may emit: those among its own ops, in the element
        types they may be generated in (so --ops, --dtypes and the probe's avoid list hold
        for glue too). With none, inputs still chain where a node's output fits."""
        types: dict[str, frozenset[int]] = {}
        cast_to: frozenset[int] = frozenset()
        for spec, info in zip(self.specs, self._infos, strict=True):
            if spec.op_type not in GLUE_OPS or info is None or info.main_type_var is None:
                continue
            b = GenBuilder(spec, info, self.cfg, Graph(), ChoiceStream(0))
            types[spec.op_type] = frozenset(b.types(info.main_type_var))
            if spec.op_type == "Cast":
                cast_to = frozenset(b.types(info.output_type[0]))
        return Glue(types, cast_to, ("Clip", "omitted:min") in self.cfg.avoid_features)

    def _fit_glue(self) -> Glue | None:
        """The glue that fits a body's outputs: the generator's, with Clip in every type
        ONNX Runtime's Clip kernel takes even where --ops leaves Clip out: bounding a
        loop-carried value by Clip is what lets its body compute it (else it passes
        through unchanged). --exclude-ops Clip (or the probe's avoid list) turns it off."""
        g = self.glue
        if g is None or "Clip" in self.cfg.exclude_ops:
            return g
        info = op_info("Clip", self.cfg.opset)
        kernels = dt.ort_kernels("Clip", info.version, self.cfg.opset) if info else None
        types = frozenset(t for k in kernels or () for t in k.get("T", ())) & self.cfg.dtypes
        types -= {d for op, d in self.cfg.avoid if op == "Clip"}
        return Glue({**g.types, "Clip": types | g.types.get("Clip", frozenset())}, g.cast_to)

    def graph(
        self,
        seed: int,
        prefix: Sequence[int] | None = None,
        zero_tail: bool = False,
        stream: ChoiceStream | None = None,
    ) -> tuple[Graph, ChoiceStream, int]:
        """The graph of ``seed`` (or of the choices ``prefix`` replays, or that ``stream``
        gives: an ``OpReplay`` for a mutant)."""
        s = stream if stream is not None else ChoiceStream(seed, prefix, zero_tail)
        g = Graph()
        cfg = self.cfg
        specs, infos = self.specs, self._infos
        s.start_span(NODE_COUNT)
        n = s.integer(cfg.min_nodes, cfg.max_nodes)
        s.stop_span()
        calls = 0
        block: tuple[blocks.Step, ...] = ()  # the block under way, and what its steps made
        made: list[GenBuilder] = []
        pools: Pools = ()  # an elementwise chain's: the op indices each of its steps draws
        chains_left = max(1, n // blocks.CHAIN_NODES)  # (--op-mix chains)
        while len(g.nodes) < n:  # n nodes, glue included: an op's glue fits in the rest
            s.start_span(OP)
            s.start_span(OP_TYPE)
            if len(made) == len(block):  # no block under way: start one, or draw an op
                block, made, pools = (), [], ()
                if self.blocks and not s.chance(1.0 - self._block_rate):  # shrinks to none
                    if self._block_table:
                        block = self.blocks[self._block_table[s.index(len(self._block_table))]]
                    else:
                        block = self.blocks[s.index(len(self.blocks))]
            alone = not block  # an op drawn outside a block (it may start a chain)
            if block:
                step = block[len(made)]
                if pools:  # a chain's step: any op of its kind
                    k = pools[len(made)][s.index(len(pools[len(made)]))]
                else:
                    k = self._op_index[self._step_op(step, s)]
                links = {pos: t for pos, ref in step.links.items() if (t := _ref(made, ref))}
            elif (
                self._merging
                and cfg.connectivity > 0
                and _dangling(g) >= MERGE_AT
                and not s.chance(1.0 - MERGE_OPS)  # shrinks to a uniform draw
            ):
                k = self._merging[s.index(len(self._merging))]
                links = {}
            elif self._mix and not s.chance(1.0 - blocks.LAYER_MIX_SHARE):  # shrinks: uniform
                k = self._mix[s.index(len(self._mix))]
                links = {}
            else:
                k = s.index(len(specs))
                links = {}
            if (
                alone
                and chains_left > 0
                and k in self._chains
                and not s.chance(1.0 - blocks.CHAIN_RATE)
            ):
                block, pools = self._chains[k]  # shrinks to no chain
                chains_left -= 1
                step = block[0]  # the drawn op's own step: no links, nothing fixed
            s.stop_span()
            spec = specs[k]
            budget = n - len(g.nodes) - 1
            b = GenBuilder(spec, infos[k], cfg, g, s, self.glue, budget, links, self._nest0)
            if block and step.fixed:
                b.fixed = step.fixed
            spec.build(b, spec.params)
            b.commit()
            if block:
                made.append(b)
                if pools and len(made) == 1 and not _feeds_chain(b):
                    block, made, pools = (), [], ()  # layers' chains act on tensors
                    chains_left += 1
            s.stop_span()
            calls += 1
        if g.seqs or g.optionals:  # graph outputs stay tensors
            close(g, s, set(self._op_index))
        return g, s, calls

    def _elementwise_chains(self) -> dict[int, tuple[tuple[blocks.Step, ...], Pools]]:
        """Op index -> the chain of ``blocks.CHAINS`` it starts (its steps, and the op
        indices each step draws from: the run's ops of the step's kind), for the run's
        ops of ``blocks.CHAIN_KINDS``; none for a kind whose chain lacks ops."""
        index = self._op_index
        kinds = {
            kind: [index[op] for op in ops if op in index]
            for kind, ops in blocks.CHAIN_KINDS.items()
        }
        out: dict[int, tuple[tuple[blocks.Step, ...], Pools]] = {}
        for kind, rest in blocks.CHAINS.items():
            if all(kinds[k] for k, _ in rest):
                steps = (blocks.Step(""), *(step for _, step in rest))
                draws = ([], *(kinds[k] for k, _ in rest))
                out.update((k, (steps, draws)) for k in kinds[kind])
        return out

    def _step_op(self, step: blocks.Step, s: ChoiceStream) -> str:
        """A block step's op: its own, or now and then one of its alternatives among the
        run's ops (a choice: shrinks to the block's own op)."""
        if not step.alts or s.chance(1.0 - ACTIVATION_SWAP):
            return step.op
        alts = [a for a in step.alts if a in self._op_index]
        return alts[s.index(len(alts))] if alts else step.op

    @property
    def _nest0(self) -> Nest:
        """The model graph's ``Nest``: one per generator (it is frozen; building one per op
        cost as much as a small op's variables), made anew if ``fit_glue`` is replaced or
        the generator is a copy (``copy.copy(gen)`` in guide: its bodies are its own)."""
        top = self._nest_top
        if top is None or top[0] is not self or top[1].glue is not self.fit_glue:
            top = self._nest_top = (self, Nest(0, self._fill_body, self.fit_glue))
        return top[1]

    def _fill_body(self, g: Graph, s: ChoiceStream, depth: int) -> None:
        """A body's nodes at ``depth`` (1: a body in the model's graph): 1..body_nodes of
        them, glue included, each op drawn uniformly among those allowed at that depth."""
        cfg = self.cfg
        allowed = range(len(self.specs)) if depth < cfg.max_depth else self._plain
        n = s.integer(1, cfg.body_nodes)
        if not allowed:
            return
        nest = Nest(depth, self._fill_body, self.fit_glue)
        while len(g.nodes) < n:
            s.start_span(BODY_OP)
            s.start_span(BODY_OP_TYPE)
            k = allowed[s.index(len(allowed))]
            s.stop_span()
            spec = self.specs[k]
            budget = n - len(g.nodes) - 1
            b = GenBuilder(spec, self._infos[k], cfg, g, s, self.glue, budget, None, nest)
            spec.build(b, spec.params)
            b.commit()
            s.stop_span()

    def generate(
        self,
        seed: int,
        prefix: Sequence[int] | None = None,
        zero_tail: bool = False,
        stream: ChoiceStream | None = None,
    ) -> Case:
        if self.cfg.opset_mix:
            return self.for_seed(seed).generate(seed, prefix, zero_tail, stream)
        g, s, calls = self.graph(seed, prefix, zero_tail, stream)
        model = to_model(g, self.cfg.opset, self.cfg.ir, name=f"onnxfuzz_{seed}", seed=seed)
        return Case(
            model=model,
            seed=seed,
            ops=[n.op_type for n in g.nodes],
            choices=s.record,
            inputs=[(t.name, t.dtype, t.shape) for t in g.inputs],
            input_domains=dict(g.input_values),
            spec_calls=calls,
            spans=list(s.spans),
        )


# While MERGE_AT or more node outputs dangle, an op drawn outside a block is one that
# takes two or more data inputs this often: open branches join (x + y, Concat, MatMul of
# two activations), the graph grows deep rather than wide, with fewer graph outputs.
MERGE_OPS = 0.9
MERGE_AT = 4
ACTIVATION_SWAP = 0.5  # a block's activation slot takes another activation this often


def _feeds_chain(b: GenBuilder) -> bool:
    """Does the op ``b`` built go on into an elementwise chain: its output a tensor of rank
    >= 1 (a layer's activations; a chain on a scalar repeats the same few instances)?"""
    out = b.outs[0] if b.outs else None
    return isinstance(out, Tensor) and out.rank > 0


def _dangling(g: Graph) -> int:
    consumed = g.consumed
    return sum(1 for t in g.produced if t.name not in consumed)


def _ref(made: list[GenBuilder], ref: blocks.Ref | blocks.Const) -> Tensor | blocks.Const | None:
    """The tensor ``ref`` names among a block's steps so far (None if it names none); a
    ``Const`` as it is (the builder makes it, in the type the input takes)."""
    if isinstance(ref, blocks.Const):
        return ref
    if ref.step >= len(made):
        return None
    b = made[ref.step]
    if ref.input is not None:
        t = b.taken.get(ref.input)
    else:
        t = b.outs[ref.output] if ref.output < len(b.outs) else None
    # Only tensors link (a guide's ad-hoc chain may follow a sequence-making op: its
    # successor then takes its input as any op does).
    return t if isinstance(t, Tensor) else None


def glue_per_op(spans: Sequence[Span]) -> list[int]:
    """The glue nodes each op brought to the model's graph (spans are listed in the order
    they opened, so an op's glue spans follow its own span; glue inside a subgraph's body
    is the body's, not the graph's)."""
    counts: list[int] = []
    body_end = -1  # where the bodies the current op opened so far end
    for span in spans:
        if span.label == OP:
            counts.append(0)
            body_end = -1
        elif span.label == BODY:
            body_end = max(body_end, span.end)
        # An op takes its inputs (and their glue) before it draws its bodies, so glue
        # listed after a body span and starting inside it is the body's.
        elif span.label in (GLUE, MAKE) and counts and span.start > body_end:
            counts[-1] += 1
    return counts
