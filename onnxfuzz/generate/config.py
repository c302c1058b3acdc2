"""Generator options."""

from __future__ import annotations

from dataclasses import dataclass

from onnx import helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError

# The opsets onnxfuzz generates: from 13 (the specs' baseline) to 26 (the newest ONNX
# Runtime 1.31 runs). The one place this range is stated.
MIN_OPSET, MAX_OPSET = 13, 26
DEFAULT_OPSET = 21  # inside ONNX Runtime 1.31's range (<= 26) and TVM Relax's (>= 17)
MAX_RANK = 8  # the largest --max-rank
MAX_DIM = 1 << 16  # the largest --max-dim


def ir_version_for(opset: int) -> int:
    """The lowest IR version that carries ``opset`` (ORT 1.31 accepts IR <= 13)."""
    return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])


@dataclass(frozen=True)
class Config:
    min_nodes: int = 1
    max_nodes: int = 10
    opset: int = DEFAULT_OPSET
    ir_version: int | None = None  # None: the one paired with opset
    max_rank: int = 5
    max_dim: int = 8
    picking_rate: float = 0.97
    dtypes: frozenset[int] = dt.DEFAULT
    ops: frozenset[str] | None = None
    exclude_ops: frozenset[str] = frozenset()
    weights_as_initializers: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.min_nodes <= self.max_nodes:
            raise ConfigError(
                f"--nodes: need 1 <= MIN <= MAX, got {self.min_nodes}:{self.max_nodes}"
            )
        if not 0.0 <= self.picking_rate <= 1.0:
            raise ConfigError(f"--picking-rate: need 0 <= p <= 1, got {self.picking_rate}")
        if not 0 <= self.max_rank <= MAX_RANK:
            raise ConfigError(f"--max-rank: need 0..{MAX_RANK}, got {self.max_rank}")
        if not 1 <= self.max_dim <= MAX_DIM:
            raise ConfigError(f"--max-dim: need 1..{MAX_DIM}, got {self.max_dim}")
        if not 7 <= self.opset <= 26:
            raise ConfigError(
                f"--opset: onnxfuzz exports opsets 7..26 (ONNX Runtime 1.31 stops at 26), "
                f"got {self.opset}"
            )

    @property
    def ir(self) -> int:
        return self.ir_version if self.ir_version is not None else ir_version_for(self.opset)

    @property
    def max_reuse_dim(self) -> int:
        """Existing tensors with larger dims are not consumed again (keeps growth bounded)."""
        return 4 * self.max_dim
