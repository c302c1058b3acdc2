"""Shape primitives specs share (multidirectional broadcasting, axis arithmetic)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from onnxfuzz.generate.lang.domains import OneOf
from onnxfuzz.generate.lang.spec_api import DimEntry


def broadcastable(shape: Sequence[int]) -> Callable[[int], list[DimEntry]]:
    """Dims of a tensor of any rank that broadcasts with ``shape`` (numpy rules): each
    aligned axis is either ``shape``'s dim or 1, any dim where ``shape`` has 1, and any
    dim on the extra leading axes."""
    shape = tuple(shape)

    def at(rank: int) -> list[DimEntry]:
        out: list[DimEntry] = []
        lead = rank - len(shape)
        for j in range(rank):
            i = j - lead
            if i < 0 or shape[i] == 1:
                out.append(None)
            else:
                out.append(OneOf((shape[i], 1)))
        return out

    return at


def unidirectional(shape: Sequence[int]) -> Callable[[int], list[DimEntry]]:
    """Dims of a tensor that broadcasts *to* ``shape`` (rank <= len(shape), each dim equal or 1):
    e.g. PRelu's slope."""
    shape = tuple(shape)

    def at(rank: int) -> list[DimEntry]:
        lead = len(shape) - rank
        return [OneOf((shape[lead + j], 1)) if shape[lead + j] != 1 else 1 for j in range(rank)]

    return at


def broadcast(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The multidirectional broadcast of ``shapes``."""
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        lead = rank - len(s)
        for i, d in enumerate(s):
            if d != 1:
                out[lead + i] = d
    return tuple(out)
