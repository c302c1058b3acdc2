"""The optimizers' patterns as blocks (blocks.OPTIMIZER_BLOCKS) make ONNX Runtime's named
transformer fire, as ORT's own session log says (the ``ort`` adapter's feedback); the same
block without its constants and fixed variables does not, so the pattern, not chance,
is what fires it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from onnxfuzz.backends.ort import OrtBackend
from onnxfuzz.generate.build.blocks import OPTIMIZER_BLOCKS, Const, Step
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config

DRAWS = 30
NODES = 12

# block -> (the transformer it targets, the fewest of DRAWS forced draws it fires in; measured
# 2026-11-25 on ORT 1.31.1: gelu 18, layernorm 7, fast-gelu 7, matmul-scale 24, split 10)
TARGETS = {
    "ort-gelu-erf": ("GeluFusionL1", 6),
    "ort-layernorm": ("LayerNormFusionL1", 3),
    "ort-fast-gelu": ("FastGeluFusion", 3),
    "ort-matmul-scale": ("MatMulScaleFusion", 8),
    "ort-gather-slice-split": ("GatherSliceToSplitFusion", 4),
}


def _bare(steps: tuple[Step, ...]) -> tuple[Step, ...]:
    """The block without its constants and fixed variables (its Ref links kept)."""
    return tuple(
        dataclasses.replace(
            s, links={p: r for p, r in s.links.items() if not isinstance(r, Const)}, fixed={}
        )
        for s in steps
    )


def _fired(name: str, steps: tuple[Step, ...], transformer: str) -> int:
    gen = Generator(Config(op_mix="layers", block_rate=1.0, min_nodes=1, max_nodes=NODES))
    index = gen.block_names.index(name)
    gen.blocks[index] = steps
    ort = OrtBackend()
    fired = 0
    np.seterr(all="ignore")
    for seed in range(DRAWS):
        case = gen.generate(seed, prefix=[NODES - 1, 1, index])
        try:
            session = ort.compile(case.model)
        except Exception:  # noqa: BLE001 - an optimizer bug: nothing fired that we can read
            continue
        fired += transformer in (ort.optimizations(session) or {}).get("transformer", ())
    return fired


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_block_makes_its_transformer_fire_and_its_constants_are_why(name: str) -> None:
    transformer, fewest = TARGETS[name]
    steps = OPTIMIZER_BLOCKS[name]
    with_pattern = _fired(name, steps, transformer)
    bare = _fired(name, _bare(steps), transformer)
    assert with_pattern >= fewest, f"{name}: {transformer} fired in {with_pattern}/{DRAWS}"
    assert bare < with_pattern / 3, f"{name} without constants: {bare} vs {with_pattern}"
