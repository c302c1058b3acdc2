"""One single-op configuration per (op, element type) that onnxfuzz generates under a config.

What the support probe (``onnxfuzz.run.probe``) runs on each backend, and what the campaign
report draws its op x dtype heatmap over: both walk this one list, so a cell of the
heatmap is exactly a pair the probe tried.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import onnx
import onnx.compose

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.build.builder import GenBuilder
from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.features import model_features
from onnxfuzz.generate.lang.graph import Graph
from onnxfuzz.generate.lang.spec import op_info, specs_for

ANY_TYPE = "*"  # an op without a main type variable: one probe for all its types


@dataclass(frozen=True)
class SingleOp:
    op: str
    dtype: str  # element type name (``onnxfuzz.dtypes.NAMES``) or ANY_TYPE
    generator: Generator  # makes 1-node models of ``op`` in ``dtype``


def single_op_generators(cfg: Config) -> Iterator[SingleOp]:
    """Every (op, element type) of ``cfg`` (its opset, ``ops``, ``exclude_ops``, ``dtypes``)
    with a generator of one-node models of it; pairs onnxfuzz cannot generate alone are
    skipped."""
    ops = set(cfg.ops) if cfg.ops is not None else None
    for spec in specs_for(cfg.opset, ops, set(cfg.exclude_ops), cfg.domains):
        info = op_info(spec.op_type, cfg.opset)
        tv = info.main_type_var if info is not None else None
        types = sorted(info.type_sets.get(tv, frozenset()) & cfg.dtypes) if tv else []
        for d in types or [None]:
            # The main type pinned; the op's other type variables keep every allowed type.
            pinned = (
                cfg.dtypes if d is None else (frozenset({d}) | (cfg.dtypes - info.type_sets[tv]))
            )
            try:
                gen = Generator(
                    replace(
                        cfg,
                        min_nodes=1,
                        max_nodes=1,
                        exclude_ops=frozenset(),
                        ops=frozenset([spec.op_type]),
                        dtypes=pinned,
                        # small values: a probe asks whether the op is supported, and a
                        # value-range failure is a bug to find, not a gap to steer around
                        wide_values=0.0,
                    )
                )
            except ConfigError:
                continue  # onnxfuzz does not generate this pair at all
            yield SingleOp(spec.op_type, ANY_TYPE if d is None else dt.NAMES[d], gen)


def single_op_pairs(cfg: Config) -> dict[str, list[str]]:
    """op -> the element type names (or ``[ANY_TYPE]``) of ``single_op_generators``."""
    out: dict[str, list[str]] = {}
    for s in single_op_generators(cfg):
        out.setdefault(s.op, []).append(s.dtype)
    return out


@dataclass(frozen=True)
class Variant:
    """Single-op models of ``op`` with one feature pinned (``onnxfuzz.generate.lang.features``):
    two draws that both have it, so a failure of both is the feature's, not a draw's."""

    op: str
    feature: str
    draws: tuple[Case, ...]


DISCOVERY_DRAWS = 16  # spec runs to find the features an op's draws can take
FEATURE_DRAWS = 2  # models per pinned feature (the probe needs both to fail)
PIN_TRIES = 6  # seeds tried for each of them (a pinned feature can lie behind a branch)


def feature_variants(single: SingleOp) -> list[Variant]:
    """One ``Variant`` per feature ``single``'s op can take, in ``single``'s element type:
    each with its feature pinned (``Config.pin``) and checked present in the model."""
    gen = single.generator
    spec, info = gen.specs[0], gen._infos[0]
    assert info is not None
    offered: dict[str, None] = {}
    for seed in range(DISCOVERY_DRAWS):
        b = GenBuilder(spec, info, gen.cfg, Graph(), ChoiceStream(seed))
        b.offered = []  # record the features the draws pass
        try:
            spec.build(b, spec.params)
        except ConfigError:
            continue
        offered.update(dict.fromkeys(b.offered))
    out = []
    for feature in offered:
        try:
            pinned = Generator(replace(gen.cfg, pin=frozenset({(single.op, feature)})))
        except ConfigError:
            continue
        draws = []
        for seed in range(PIN_TRIES):
            case = pinned.generate(seed)
            if (single.op, feature) in model_features(case.model):
                draws.append(case)
                if len(draws) == FEATURE_DRAWS:
                    break
        if len(draws) == FEATURE_DRAWS:
            out.append(Variant(single.op, feature, tuple(draws)))
    return out


def merged(cases: Sequence[Case]) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """One model running ``cases``' graphs side by side (names prefixed ``v<k>_``) and its
    inputs: a backend that runs it runs each of them (the probe tests pairs and features
    in groups)."""
    graph = onnx.GraphProto(name="onnxfuzz_features")
    inputs: dict[str, np.ndarray] = {}
    for k, case in enumerate(cases):
        prefix = f"v{k}_"
        m = onnx.compose.add_prefix(case.model, prefix)
        for field in ("node", "input", "output", "initializer", "value_info"):
            getattr(graph, field).extend(getattr(m.graph, field))
        inputs.update({prefix + n: v for n, v in case.make_inputs(0).items()})
    # Every domain any of them imports (the probe groups ops of several domains)
    opsets: dict[str, int] = {}
    for case in cases:
        for imp in case.model.opset_import:
            opsets[imp.domain] = max(opsets.get(imp.domain, 0), imp.version)
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opsets.items()]
    )
    model.ir_version = cases[0].model.ir_version
    return model, inputs
