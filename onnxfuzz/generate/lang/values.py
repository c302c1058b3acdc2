"""Tensor values drawn inside a value domain (weights at generation, inputs per test)."""

from __future__ import annotations

import math

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.intervals import Interval, Values


def interval_of(arr: np.ndarray) -> Interval:
    """The interval a constant's values span ([0, 0] when it is empty). A small integer
    array is read as Python numbers: numpy's min and max cost more than the values."""
    if not arr.size:
        return Interval(0, 0)
    if arr.size == 1:  # a scalar (a Clip bound, a Pad value): its item is min and max
        v = float(arr.item())
        return Interval(v, v)
    if arr.size <= 64 and arr.dtype.kind in "iub":
        flat = arr.ravel().tolist()
        return Interval(float(min(flat)), float(max(flat)))
    return Interval(float(arr.min()), float(arr.max()))


def sample(
    rng: np.random.Generator, dtype: int, shape: tuple[int, ...], iv: Interval, values: Values
) -> np.ndarray:
    """Values of ``dtype`` inside ``iv`` honouring ``values``' min_abs, ties and distinctness."""
    npd = dt.np_dtype(dtype)
    if dtype == dt.BOOL:
        lo, hi = int(iv.lo), int(iv.hi)
        return np.asarray(rng.integers(lo, hi + 1, size=shape)).astype(np.bool_)
    if values.distinct_axis is not None and shape:
        return np.asarray(_distinct(rng, dtype, shape, iv, values.distinct_axis)).astype(npd)
    if dtype in dt.FLOATS:
        x = np.asarray(rng.uniform(iv.lo, iv.hi, size=shape))
        if values.avoid == "fraction" and math.floor(iv.hi) >= math.ceil(iv.lo):
            x = rng.integers(math.ceil(iv.lo), math.floor(iv.hi), size=shape, endpoint=True)
            return np.asarray(x).astype(npd)
        if values.avoid and math.floor(iv.hi) - math.ceil(iv.lo) >= 1:
            x = np.asarray(_away_from_ties(rng, shape, iv, values.avoid))
        if iv.min_abs and iv.lo < 0 < iv.hi:
            x = _away_from_zero(x, iv)
        return x.astype(npd)
    lo, hi = math.ceil(iv.lo), math.floor(iv.hi)
    x = np.asarray(rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64))
    if iv.min_abs and iv.lo < 0 < iv.hi:
        m = math.ceil(iv.min_abs)
        small = np.abs(x) < m
        x = np.where(small, np.where((x >= 0) & (hi >= m) | (lo > -m), m, -m), x)
    return x.astype(npd)


def _away_from_zero(x: np.ndarray, iv: Interval) -> np.ndarray:
    m = iv.min_abs
    small = np.abs(x) < m
    if not small.any():
        return x
    pos_ok, neg_ok = iv.hi >= m, iv.lo <= -m
    sign = np.where(x >= 0, 1.0, -1.0)
    if not neg_ok:
        sign = np.ones_like(x)
    elif not pos_ok:
        sign = -np.ones_like(x)
    return np.where(small, sign * m, x)


def _away_from_ties(
    rng: np.random.Generator, shape: tuple[int, ...], iv: Interval, avoid: str
) -> np.ndarray:
    """Whole part plus a fraction kept away from the tie: from whole numbers for
    'integer' (Floor, Ceil, float-to-int Cast), from x.5 for 'half' (Round)."""
    k = rng.integers(math.ceil(iv.lo), math.floor(iv.hi), size=shape, endpoint=False)
    if avoid == "half":
        frac = rng.uniform(0.05, 0.35, size=shape) + 0.6 * rng.integers(0, 2, size=shape)
    else:
        frac = rng.uniform(0.15, 0.85, size=shape)
    return k + frac


def _distinct(
    rng: np.random.Generator, dtype: int, shape: tuple[int, ...], iv: Interval, axis: int
) -> np.ndarray:
    """Values distinct along ``axis``: evenly spaced levels, shuffled per slice."""
    n = shape[axis]
    order = np.argsort(rng.random(shape), axis=axis)
    if dtype in dt.FLOATS:
        return iv.lo + (iv.hi - iv.lo) * (order + 0.5) / n
    lo, hi = math.ceil(iv.lo), math.floor(iv.hi)
    step = max(1, (hi - lo + 1) // n)
    if step * n >= 2**62:  # a (u)int64's whole range: past a C long, in Python's ints
        return lo + order.astype(object) * step
    return lo + order * step


def inputs_for(
    rng: np.random.Generator,
    inputs: list[tuple[str, int, tuple[int, ...]]],
    domains: dict[str, Values],
) -> dict[str, np.ndarray]:
    """One set of graph-input values, each inside its recorded domain."""
    out = {}
    for name, dtype, shape in inputs:
        v = domains[name]
        lo, hi = v.bounds(dtype)
        out[name] = sample(rng, dtype, shape, Interval(lo, hi, v.min_abs), v)
    return out
