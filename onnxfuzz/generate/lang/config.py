"""Generator options."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from onnx import helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError

# The opsets onnxfuzz generates: from 13 (the specs' baseline) to 28 (the newest the
# installed onnx 1.23 defines). ONNX Runtime 1.31 runs <= 26 (ORT_MAX_OPSET): above it the
# validity gates and a corpus's reference outputs use the ONNX reference evaluator, and a
# campaign refuses ONNX Runtime (its adapter's supported_opsets). The one place these
# ranges are stated.
MIN_OPSET, MAX_OPSET = 13, 28
ORT_MAX_OPSET = dt.ORT_MAX_OPSET  # (stated next to ONNX Runtime's kernel table)
DEFAULT_OPSET = 21  # inside ONNX Runtime 1.31's range (<= 26) and TVM Relax's (>= 17)
MAX_RANK = 8  # the largest --max-rank
MAX_DIM = 1 << 16  # the largest --max-dim
MAX_DEPTH = 4  # the deepest --max-depth (subgraphs inside subgraphs)


def _if_set(key: str, pairs: frozenset[tuple[str, str]]) -> dict[str, Any]:
    return {key: sorted(map(list, pairs))} if pairs else {}


@cache  # asked once per model (``Config.ir``); onnx's lookup walks its version table
def ir_version_for(opset: int) -> int:
    """The lowest IR version that carries ``opset`` (ORT 1.31 accepts IR <= 13)."""
    return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])


def opsets_problem(opsets: tuple[int, ...]) -> str | None:
    """What is wrong with a list of opsets (``--opset 16,21``), or None."""
    joined = ",".join(map(str, opsets))
    if not opsets or any(not MIN_OPSET <= o <= MAX_OPSET for o in opsets):
        return f"opsets in {MIN_OPSET}..{MAX_OPSET} (like 21 or 16,21), got {joined or '-'}"
    if len(set(opsets)) != len(opsets):
        return f"each opset once, got {joined}"
    return None


OP_MIXES = ("chains", "uniform", "layers")  # --op-mix; the first is the default
DEFAULT_OP_MIX = OP_MIXES[0]
DEFAULT_WIDE_VALUES = 0.2  # --wide-values (README, "Values across the domain")
# What a record that leaves a key out means: ``Config.to_record`` writes these keys only
# when they differ, and records from before an option have none (a missing op_mix was
# written with "uniform", the default before issue 24; a missing wide_values, before the
# option, with none). ``from_record`` and a corpus's option check both read them so.
OMITTED: dict[str, Any] = {
    "op_mix": "uniform",
    "wide_values": 0.0,
    "domains": ["ai.onnx"],
    "opset_mix": [],
}


@dataclass(frozen=True)
class Config:
    min_nodes: int = 1
    max_nodes: int = 10
    opset: int = DEFAULT_OPSET
    ir_version: int | None = None  # None: the one paired with opset
    max_rank: int = 5
    max_dim: int = 8
    picking_rate: float = 0.97
    # How eagerly ops chain (0..1): the chance that an input takes a node's output over a
    # graph input where both fit, and that an input nothing fits is made by adapting a
    # node's output with glue ops (onnxfuzz.generate.build.glue) instead of a fresh graph input.
    # 0 generates as before the knob existed.
    connectivity: float = 0.9
    # The chance that a drawn op starts a block instead: a pattern real models are made of
    # (conv-bn-relu, attention, QDQ pairs, ...: onnxfuzz.generate.build.blocks).
    block_rate: float = 0.1
    dtypes: frozenset[int] = dt.DEFAULT
    ops: frozenset[str] | None = None
    exclude_ops: frozenset[str] = frozenset()
    weights_as_initializers: bool = True
    # Control flow (If, Loop, Scan): how deep subgraphs nest (0: no control flow; 2: a
    # body may hold an If, Loop or Scan whose own body holds none), and the most nodes one
    # body draws (1..body_nodes, glue included).
    max_depth: int = 2
    body_nodes: int = 3
    # (op, element type of its main type variable) pairs not to generate: what a campaign's
    # backends lack, from the probe (--probe steer)
    avoid: frozenset[tuple[str, int]] = frozenset()
    # (op, feature) pairs not to generate: forms of an op a backend lacks below the type
    # level, such as an attribute value (onnxfuzz.generate.lang.features; the probe's steering)
    avoid_features: frozenset[tuple[str, str]] = frozenset()
    # (op, feature) pairs every node of the op must have where it can: the probe's
    # single-op model of one feature
    pin: frozenset[tuple[str, str]] = frozenset()
    # Op domains to draw from: ai.onnx (the hand specs) and any domain with inferred rules
    # (specs/inferred/<domain>.json, from `onnxfuzz infer`).
    domains: frozenset[str] = frozenset({"ai.onnx"})
    # How an op outside a block is drawn: "chains" (every op alike, as "uniform", and an
    # arithmetic op, activation, Conv/MatMul/Gemm or normalization goes on into an
    # arithmetic/activation chain of real layers, its members drawn alike among the ops of
    # their kind, at most one chain per 20 nodes: onnxfuzz.generate.build.blocks.CHAINS,
    # the source of its frequencies there), "uniform" (every op alike: the generator's
    # only mix until issue 24), or "layers" (mostly by how often torchvision's models use
    # it, with the optimizers' own patterns among the blocks:
    # onnxfuzz.generate.build.blocks.LAYER_MIX_SHARE, OPTIMIZER_BLOCKS). A record without
    # op_mix means "uniform" (records written before the default became "chains").
    op_mix: str = DEFAULT_OP_MIX
    # The opsets a run's models are spread over (`--opset 16,21`; empty: every model at
    # ``opset``, the first of them). A model's opset is a function of its seed alone
    # (``opset_of``), so `generate --seed S` with the same list makes test S again. Why:
    # compilers keep code per opset version (ONNX Runtime's fusions list the op versions
    # they match, and fuse GELU or LayerNorm into an ONNX op from opset 20 / 17 but into
    # a contrib op below; TVM's converters have one method per version), and models in the
    # wild are exported at many opsets.
    opset_mix: tuple[int, ...] = ()
    # The share of fresh tensors (graph inputs and weights) whose values spread over their
    # input's whole value domain, at a magnitude drawn from powers of two up to its bound
    # (int32 to 2**31, float32 to 1e4), instead of the small values near zero every other
    # fresh tensor takes ([-4, 4], [-8, 8]): numeric-range bugs (an int32 op computed in a
    # narrower type or in float32, int64 narrowed to int32, a float kernel accurate near
    # zero only) show only on such values. 0 generates as before the option existed.
    # A record without wide_values means 0 (records written before the option existed).
    wide_values: float = DEFAULT_WIDE_VALUES

    def __post_init__(self) -> None:
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ConfigError(
                f"--nodes: need 1 <= MIN <= MAX, got {self.min_nodes}:{self.max_nodes}"
            )
        if not 0.0 <= self.picking_rate <= 1.0:
            raise ConfigError(f"--picking-rate: need 0 <= p <= 1, got {self.picking_rate}")
        if not 0.0 <= self.connectivity <= 1.0:
            raise ConfigError(f"--connectivity: need 0 <= p <= 1, got {self.connectivity}")
        if not 0.0 <= self.wide_values <= 1.0:
            raise ConfigError(f"--wide-values: need 0 <= p <= 1, got {self.wide_values}")
        if not 0.0 <= self.block_rate <= 1.0:
            raise ConfigError(f"--blocks: need 0 <= p <= 1, got {self.block_rate}")
        if not 0 <= self.max_rank <= MAX_RANK:
            raise ConfigError(f"--max-rank: need 0..{MAX_RANK}, got {self.max_rank}")
        if not 1 <= self.max_dim <= MAX_DIM:
            raise ConfigError(f"--max-dim: need 1..{MAX_DIM}, got {self.max_dim}")
        if not self.domains:
            raise ConfigError("--domains: name at least one domain, e.g. ai.onnx")
        if self.op_mix not in OP_MIXES:
            raise ConfigError(f"--op-mix: one of {', '.join(OP_MIXES)}, got {self.op_mix!r}")
        if not 0 <= self.max_depth <= MAX_DEPTH:
            raise ConfigError(f"--max-depth: need 0..{MAX_DEPTH}, got {self.max_depth}")
        if not 1 <= self.body_nodes <= 16:
            raise ConfigError(f"--body-nodes: need 1..16, got {self.body_nodes}")
        if not MIN_OPSET <= self.opset <= MAX_OPSET:
            raise ConfigError(
                f"--opset: onnxfuzz exports opsets {MIN_OPSET}..{MAX_OPSET} (ONNX Runtime 1.31 "
                f"stops at {ORT_MAX_OPSET}), got {self.opset}"
            )
        if self.opset_mix:
            problem = opsets_problem(self.opset_mix)
            if problem:
                raise ConfigError(f"--opset: {problem}")
            if self.opset_mix[0] != self.opset:
                raise ConfigError(
                    f"opset_mix {list(self.opset_mix)} must start with opset {self.opset}"
                )

    @property
    def opsets(self) -> tuple[int, ...]:
        """Every opset the run's models are made at (``opset`` alone, or ``opset_mix``)."""
        return self.opset_mix or (self.opset,)

    def opset_of(self, seed: int) -> int:
        """The opset of the model of ``seed``: ``opset``, or with several, one picked by a
        hash of the seed (the same in every process and release)."""
        mix = self.opset_mix
        if len(mix) < 2:
            return self.opset
        h = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & 0xFFFFFFFFFFFFFFFF
        return mix[(h >> 33) % len(mix)]

    # --- as plain data (stored with a campaign and a corpus, compared on --resume) ------
    def to_record(self) -> dict[str, Any]:
        """The options as JSON-able data: sorted names for sets, dtype names."""
        return {
            "min_nodes": self.min_nodes,
            "max_nodes": self.max_nodes,
            "opset": self.opset,
            "ops": sorted(self.ops) if self.ops is not None else None,
            "exclude_ops": sorted(self.exclude_ops),
            "dtypes": sorted(dt.NAMES[d] for d in self.dtypes),
            "picking_rate": self.picking_rate,
            "connectivity": self.connectivity,
            "block_rate": self.block_rate,
            "max_rank": self.max_rank,
            "max_dim": self.max_dim,
            "weights_as_initializers": self.weights_as_initializers,
            "max_depth": self.max_depth,
            "body_nodes": self.body_nodes,
            "avoid": sorted([op, dt.NAMES[d]] for op, d in self.avoid),
            # (written only when set: records of runs without them stay as they were)
            **_if_set("avoid_features", self.avoid_features),
            **_if_set("pin", self.pin),
            # only when not the default: records stored before domains existed still match
            **({"domains": sorted(self.domains)} if self.domains != {"ai.onnx"} else {}),
            **({"op_mix": self.op_mix} if self.op_mix != "uniform" else {}),
            **({"opset_mix": list(self.opset_mix)} if self.opset_mix else {}),
            **({"wide_values": self.wide_values} if self.wide_values else {}),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], **override: Any) -> Config:
        """A Config from ``to_record``'s data (a None value or a missing key: the default,
        or what ``OMITTED`` says the key's absence means), with ``override``s (e.g. the
        opset a campaign negotiated). A record must make the same models it made."""
        d = {k: v for k, v in {**record, **override}.items() if v is not None}
        for key, value in OMITTED.items():
            d.setdefault(key, value)
        unknown = set(d) - {f.name for f in fields(cls)}
        if unknown:
            raise ConfigError(f"unknown generator options {sorted(unknown)}")
        if "dtypes" in d:
            d["dtypes"] = frozenset(dt.BY_NAME[n] if isinstance(n, str) else n for n in d["dtypes"])
        for key in ("ops", "exclude_ops", "domains"):
            if key in d:
                d[key] = frozenset(d[key])
        for key in ("avoid_features", "pin"):
            if key in d:
                d[key] = frozenset((op, f) for op, f in d[key])
        if "opset_mix" in d:
            d["opset_mix"] = tuple(d["opset_mix"])
        if "avoid" in d:
            d["avoid"] = frozenset(
                (op, dt.BY_NAME[n] if isinstance(n, str) else n) for op, n in d["avoid"]
            )
        return cls(**d)

    @property
    def ir(self) -> int:
        return self.ir_version if self.ir_version is not None else ir_version_for(self.opset)

    @property
    def max_reuse_dim(self) -> int:
        """Existing tensors with larger dims are not consumed again (keeps growth bounded)."""
        return 4 * self.max_dim
