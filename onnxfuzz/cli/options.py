"""Options shared by several commands, and their conversion to library records."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import click

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.config import (
    DEFAULT_OP_MIX,
    DEFAULT_OPSET,
    DEFAULT_WIDE_VALUES,
    MAX_DEPTH,
    MAX_DIM,
    MAX_RANK,
    OP_MIXES,
    ORT_MAX_OPSET,
    Config,
    opsets_problem,
)

# --neighbours' default: ``onnxfuzz.reduce.neighbours.MAX_VARIANTS`` (the command line does
# not import the reducer to read it; tests/unit/test_variants.py holds the two equal)
NEIGHBOURS = 12


def neighbours_option(whose: str) -> Any:
    """``--neighbours N`` for ``fuzz`` and ``reduce``; ``whose``: the reduced model it is
    about ("each new bug's reduced model", "the reduced model")."""
    return click.option(
        "--neighbours",
        type=click.IntRange(min=0),
        default=NEIGHBOURS,
        show_default=True,
        metavar="N",
        help=f"One-change variants of {whose} (an attribute's other value, a smaller "
        "input, another element type) run to tell what the failure depends on; issue.md "
        "says which pass. At most N runs (and 20 s) per bug; 0: none.",
    )


class Finite(click.FloatRange):
    """A ``click.FloatRange`` that refuses nan and inf: nan passes every bound (``--timeout
    nan`` ran each test with no time at all and filed a timeout bug against ONNX Runtime)."""

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None):
        got = super().convert(value, param, ctx)
        if not math.isfinite(got):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return got


# The most tests a campaign takes: far past any run's length (100 million at 40/s is a
# month), and below what the scheduler could not count (10**10 ran no test, past --time).
MAX_TESTS = 10**8


def _nodes(ctx: click.Context, param: click.Parameter, value: str) -> tuple[int, int]:
    try:
        lo, _, hi = value.partition(":")
        a, b = int(lo), int(hi or lo)
    except ValueError:
        raise click.BadParameter(f"expected MIN:MAX like 5:20, got {value!r}") from None
    if not 1 <= a <= b:
        raise click.BadParameter(f"need 1 <= MIN <= MAX, got {value!r}")
    return a, b


def _names(value: str | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset(v.strip() for v in value.split(",") if v.strip())


def _opsets(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> tuple[int, ...] | None:
    """``--opset 21`` or ``--opset 16,21``: the opsets, in the order given."""
    if value is None:
        return None
    try:
        opsets = tuple(int(v) for v in str(value).split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(f"expected opsets like 21 or 16,21, got {value!r}") from None
    problem = opsets_problem(opsets)
    if problem:
        raise click.BadParameter(problem)
    return opsets


def generator_options(f=None, *, opset_default: int | None = DEFAULT_OPSET):
    """The options every command that generates models shares."""
    if f is None:
        return lambda g: generator_options(g, opset_default=opset_default)
    opset_help = (
        f"Model opset (ONNX Runtime 1.31 runs <= {ORT_MAX_OPSET}; above it the ONNX reference "
        "evaluator checks the models)."
        if opset_default
        else "Model opset (default: one every selected backend supports)."
    )
    opts = [
        click.option(
            "--seed",
            type=click.IntRange(min=0),
            default=0,
            show_default=True,
            help="Seed of the first case; case i uses SEED + i.",
        ),
        click.option(
            "--nodes",
            default="1:10",
            show_default=True,
            callback=_nodes,
            help="Node count range MIN:MAX (or N).",
        ),
        click.option(
            "--opset",
            default=None if opset_default is None else str(opset_default),
            show_default=opset_default is not None,
            callback=_opsets,
            help=opset_help + " Several, comma-separated (16,21), spread the models over "
            "them by seed: compilers keep code per opset version.",
        ),
        click.option("--ops", default=None, help="Only these ops (comma-separated)."),
        click.option("--exclude-ops", default=None, help="Never these ops (comma-separated)."),
        click.option(
            "--dtypes",
            default=None,
            help="Element types, e.g. float32,int64 (default: all but bfloat16). An input "
            "the schema gives one type only keeps it (Xor's bool, Celu's float32, "
            "NonMaxSuppression's boxes), as do index inputs: --exclude-ops leaves such "
            "ops out.",
        ),
        click.option(
            "--picking-rate",
            type=Finite(0, 1),
            default=0.97,
            show_default=True,
            help="Chance an input reuses an existing tensor.",
        ),
        click.option(
            "--max-rank",
            type=click.IntRange(0, MAX_RANK),
            default=5,
            show_default=True,
            help="Most dimensions a fresh tensor gets (0: scalars only).",
        ),
        click.option(
            "--max-dim",
            type=click.IntRange(1, MAX_DIM),
            default=8,
            show_default=True,
            help="Largest dim drawn for a fresh tensor (one that must match an "
            "intermediate's dims takes them, up to 4x this).",
        ),
        click.option(
            "--connectivity",
            type=Finite(0, 1),
            default=0.9,
            show_default=True,
            help="How eagerly ops chain: the chance an input takes a node's output, adapted "
            "by glue ops (Cast, Clip, Reshape, Slice, Pad, ...) where none fits as it is; "
            "0 for none.",
        ),
        click.option(
            "--blocks",
            "block_rate",
            type=Finite(0, 1),
            default=0.1,
            show_default=True,
            help="Chance a drawn op starts a real-model block instead (conv-bn-relu, "
            "attention, QDQ pairs, ...: onnxfuzz specs --blocks lists them); 0 for none.",
        ),
        click.option(
            "--op-mix",
            type=click.Choice(OP_MIXES),
            default=DEFAULT_OP_MIX,
            show_default=True,
            help="How ops are drawn: chains (uniform, and an arithmetic op, activation, "
            "Conv/MatMul/Gemm or normalization goes on into an arithmetic/activation chain "
            "of real layers such as bias-act-scale or x*sigmoid(x)+b, its members drawn "
            "uniformly; at most one per 20 nodes), uniform (every op alike: the default "
            "before chains), or layers (70 % by how often torchvision's models use each op, "
            "30 % uniform; with the optimizers' own patterns as blocks).",
        ),
        click.option(
            "--wide-values",
            type=Finite(0, 1),
            default=DEFAULT_WIDE_VALUES,
            show_default=True,
            help="Share of fresh inputs and weights whose values spread over their op's whole "
            "value domain, at a magnitude drawn among powers of two (int32 up to 2**31, "
            "float32 up to 1e4; float16 stays small), for numeric-range bugs; the others "
            "stay near zero. "
            "0 for none (no choice is added: the models of these options before it).",
        ),
        click.option(
            "--domains",
            default="ai.onnx",
            show_default=True,
            help="Op domains, comma-separated: ai.onnx (hand specs) and domains with inferred "
            "rules (specs/inferred/DOMAIN.json, made by `onnxfuzz infer`), e.g. com.microsoft.",
        ),
        click.option(
            "--max-depth",
            type=click.IntRange(0, MAX_DEPTH),
            default=2,
            show_default=True,
            help="Control flow (If, Loop, Scan): how deep bodies nest; 0 for none.",
        ),
        click.option(
            "--body-nodes",
            type=click.IntRange(1, 16),
            default=3,
            show_default=True,
            help="Most nodes one If branch, Loop or Scan body draws.",
        ),
        click.option(
            "--weights-as-inputs",
            is_flag=True,
            help="Make fresh weights graph inputs instead of initializers.",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def generator_fields(
    nodes: tuple[int, int],
    opset: int | tuple[int, ...] | None,
    ops: str | None,
    exclude_ops: str | None,
    dtypes: str | None,
    picking_rate: float,
    max_rank: int,
    max_dim: int,
    weights_as_inputs: bool,
    connectivity: float = 0.9,
    block_rate: float = 0.1,
    domains: str = "ai.onnx",
    max_depth: int = 2,
    body_nodes: int = 3,
    op_mix: str = DEFAULT_OP_MIX,
    wide_values: float = DEFAULT_WIDE_VALUES,
) -> dict:
    """The generator flags as ``Config.to_record`` data (None: the default, or for the
    opset, the one every backend of a campaign supports; several opsets: the first, and
    ``opset_mix``)."""
    opsets = (opset,) if isinstance(opset, int) else opset or ()
    return {
        "min_nodes": nodes[0],
        "max_nodes": nodes[1],
        "opset": opsets[0] if opsets else None,
        **({"opset_mix": list(opsets)} if len(opsets) > 1 else {}),
        "ops": sorted(_names(ops)) if ops is not None else None,
        "exclude_ops": sorted(_names(exclude_ops) or ()),
        "dtypes": sorted(dt.NAMES[d] for d in dt.parse_names(dtypes))
        if dtypes is not None
        else None,
        "picking_rate": picking_rate,
        "connectivity": connectivity,
        "block_rate": block_rate,
        "max_rank": max_rank,
        "max_dim": max_dim,
        "weights_as_initializers": not weights_as_inputs,
        **({"domains": sorted(_names(domains) or ())} if _names(domains) != {"ai.onnx"} else {}),
        "max_depth": max_depth,
        "body_nodes": body_nodes,
        **({"op_mix": op_mix} if op_mix != "uniform" else {}),
        **({"wide_values": wide_values} if wide_values else {}),
    }


def make_config(**gen: object) -> Config:
    return Config.from_record(generator_fields(**gen))  # type: ignore[arg-type]


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    if value is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
    if not m:
        raise click.BadParameter(f"expected a duration like 90s, 10m or 2h, got {value!r}")
    seconds = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]
    if seconds <= 0:
        raise click.BadParameter(f"a time budget must be positive, e.g. 90s or 10m (got {value!r})")
    return seconds


def resolvable_backend(text: str) -> str:
    """``--backend`` with an adapter file's path made absolute (``./mycc.py:Cc`` ->
    ``/home/me/mycc.py:Cc``): the spec is stored in campaign.db and in every bundle, and
    ``replay`` or ``fuzz --resume`` run from another folder must find the same file.
    Anything else (a name, ``package.module:Class``, a file that is not there: its error
    comes later, naming it) is returned as it is."""
    from onnxfuzz.backend import parse_backend

    try:
        ref = parse_backend(text)
    except Exception:  # noqa: BLE001 - a malformed spec is reported where it is loaded
        return text
    where, sep, _ = ref.target.rpartition(":")
    if not sep or not where.endswith(".py") or Path(where).is_absolute():
        return text
    if not Path(where).is_file():
        return text
    absolute = str(Path(where).resolve())
    if ref.name is not None:  # NAME=SPEC: the path is in SPEC
        name, _, spec = text.partition("=")
        return f"{name}={spec.replace(where, absolute, 1)}"
    return text.replace(where, absolute, 1)
