"""One single-op configuration per (op, element type) that onnxfuzz generates under a config.

What the support probe (``onnxfuzz.run.probe``) runs on each backend, and what the campaign
report draws its op x dtype heatmap over: both walk this one list, so a cell of the
heatmap is exactly a pair the probe tried.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.config import Config
from onnxfuzz.generate.generator import Generator
from onnxfuzz.generate.spec import op_info, specs_for

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
