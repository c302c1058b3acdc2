"""Gather and GatherElements: pick elements of ``data`` by index along one axis.

Order: data (any rank >= 1, any dims) -> axis -> indices (values in [-d, d-1] where
d = data.shape[axis], so an intermediate integer tensor is reused as indices whenever
its interval fits) -> output. Both ops only copy elements, so the output interval is
the data's.
"""

from __future__ import annotations

from onnxfuzz.generate.lang.domains import Ints
from onnxfuzz.generate.lang.intervals import Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder


@op("Gather")
def gather(b: SpecBuilder, p: None) -> None:
    # output = data.shape[:axis] + indices.shape + data.shape[axis+1:]
    data = b.input("data", rank=Ints(1, b.max_rank))
    axis = b.attr("axis", Ints(-data.rank, data.rank - 1), 0)
    ax = axis % data.rank
    d = data.shape[ax]
    # Output rank q + r - 1 stays within --max-rank; r <= max_rank, so q may be 0..1 at least.
    q_max = b.max_rank - data.rank + 1
    idx = b.input("indices", rank=Ints(0, q_max), values=Values(-d, d - 1))
    shape = data.shape[:ax] + idx.shape + data.shape[ax + 1 :]
    b.output(shape, interval=data.interval)


@op("GatherElements")
def gather_elements(b: SpecBuilder, p: None) -> None:
    # indices has data's rank; on every axis but `axis` its dim is at most data's
    # (ONNX Runtime checks this); output has indices' shape.
    data = b.input("data", rank=Ints(1, b.max_rank))
    axis = b.attr("axis", Ints(-data.rank, data.rank - 1), 0)
    ax = axis % data.rank
    d = data.shape[ax]
    dims = [None if i == ax else Ints(1, n) for i, n in enumerate(data.shape)]
    idx = b.input("indices", dims=dims, values=Values(-d, d - 1))
    b.output(idx.shape, interval=data.interval)
