"""Unary elementwise ops: Y = f(X), same shape, every rank.

Each row gives the input value domain the op needs (so outputs stay finite and
away from undefined regions) and the output interval as a function of the input's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Floats, OneOf
from onnxfuzz.generate.lang.intervals import ANY, Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import SpecBuilder


def _symmetric(dtype: int) -> Values:
    """|x| <= max: keeps -x representable for signed ints (int8 has -128 but not 128)."""
    return Values(lo=-dt.value_range(dtype)[1])


@dataclass(frozen=True)
class Unary:
    f: Callable[[Interval, dict], Interval]
    values: Values | Callable[[int], Values] = ANY
    attrs: dict | None = None  # attribute -> (domain, default)


def _mono(g: Callable[[float], float]) -> Callable[[Interval, dict], Interval]:
    return lambda iv, a: iv.monotone(g)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def _softplus(x: float) -> float:
    return math.log1p(math.exp(x)) if x < 30 else x


def _reciprocal(iv: Interval, a: dict) -> Interval:
    if iv.lo > 0 or iv.hi < 0:  # one sign: 1/x is decreasing on it
        return Interval(1 / iv.hi, 1 / iv.lo)
    m = 1 / iv.min_abs
    return Interval(-m, m, 1 / iv.mag)


def _nonneg_tail(lo: float) -> Callable[[Interval, dict], Interval]:
    """x * gate(x) activations: bounded below by ``lo``, by max(hi, 0) above."""
    return lambda iv, a: Interval(min(lo, 0.0), max(iv.hi, 0.0))


ALPHA = Floats(0.05, 2.0)

TABLE: dict[str, Unary] = {
    "Abs": Unary(lambda iv, a: iv.abs(), _symmetric),
    "Neg": Unary(lambda iv, a: -iv, _symmetric),
    "Identity": Unary(lambda iv, a: iv),
    "Relu": Unary(lambda iv, a: Interval(max(iv.lo, 0), max(iv.hi, 0))),
    "Sign": Unary(
        lambda iv, a: Interval(
            math.copysign(1, iv.lo) if iv.lo else 0, math.copysign(1, iv.hi) if iv.hi else 0
        )
    ),
    "Exp": Unary(_mono(math.exp), Values(hi=6.5)),
    "Log": Unary(_mono(math.log), Values(lo=0.01)),
    "Sqrt": Unary(_mono(math.sqrt), Values(lo=0.0)),
    "Reciprocal": Unary(_reciprocal, Values(lo=-100, hi=100, min_abs=0.25)),
    "Sin": Unary(lambda iv, a: Interval(-1, 1), Values(-100, 100)),
    "Cos": Unary(lambda iv, a: Interval(-1, 1), Values(-100, 100)),
    "Tan": Unary(_mono(math.tan), Values(-1.2, 1.2)),
    "Asin": Unary(_mono(math.asin), Values(-1, 1)),
    "Acos": Unary(lambda iv, a: iv.monotone(math.acos, increasing=False), Values(-1, 1)),
    "Atan": Unary(_mono(math.atan)),
    "Sinh": Unary(_mono(math.sinh), Values(-6.5, 6.5)),
    "Cosh": Unary(lambda iv, a: Interval(1, math.cosh(iv.mag)), Values(-6.5, 6.5)),
    "Tanh": Unary(_mono(math.tanh)),
    "Asinh": Unary(_mono(math.asinh)),
    "Acosh": Unary(_mono(math.acosh), Values(lo=1.0)),
    "Atanh": Unary(_mono(math.atanh), Values(-0.95, 0.95)),
    "Erf": Unary(_mono(math.erf)),
    "Floor": Unary(
        lambda iv, a: Interval(math.floor(iv.lo), math.ceil(iv.hi)), Values(avoid="integer")
    ),
    "Ceil": Unary(
        lambda iv, a: Interval(math.floor(iv.lo), math.ceil(iv.hi)), Values(avoid="integer")
    ),
    "Round": Unary(
        lambda iv, a: Interval(math.floor(iv.lo), math.ceil(iv.hi)), Values(avoid="half")
    ),
    "Sigmoid": Unary(_mono(_sigmoid)),
    "Softplus": Unary(_mono(_softplus), Values(hi=6.5)),
    "Softsign": Unary(_mono(lambda x: x / (1 + abs(x)))),
    "HardSigmoid": Unary(
        lambda iv, a: Interval(0, 1),
        attrs={"alpha": (Floats(0.05, 1.0), 0.2), "beta": (Floats(0, 1), 0.5)},
    ),
    "HardSwish": Unary(_nonneg_tail(-0.375)),
    "Mish": Unary(_nonneg_tail(-0.31), Values(hi=6.5)),
    # alpha <= 1: |LeakyRelu(x)| <= |x| keeps the output inside the input's bound.
    "LeakyRelu": Unary(
        lambda iv, a: Interval(min(iv.lo * a["alpha"], iv.lo, 0.0), max(iv.hi, 0)),
        attrs={"alpha": (Floats(0.01, 1.0), 0.01)},
    ),
    "Elu": Unary(lambda iv, a: Interval(-a["alpha"], max(iv.hi, 0)), attrs={"alpha": (ALPHA, 1.0)}),
    "Celu": Unary(
        lambda iv, a: Interval(-a["alpha"], max(iv.hi, 0)),
        attrs={"alpha": (Floats(0.25, 2.0), 1.0)},
    ),
    "Selu": Unary(
        lambda iv, a: Interval(-a["alpha"] * a["gamma"], max(iv.hi, 0) * a["gamma"]),
        lambda d: Values(hi=dt.value_range(d)[1] / 3),  # gamma <= 3 keeps gamma * x in bound
        attrs={
            "alpha": (ALPHA, 1.67326319217681884765625),
            "gamma": (Floats(0.5, 3.0, 10), 1.05070102214813232421875),
        },
    ),
    "ThresholdedRelu": Unary(
        lambda iv, a: Interval(min(iv.lo, 0) if iv.lo > a["alpha"] else 0, max(iv.hi, 0)),
        attrs={"alpha": (Floats(0.0, 2.0), 1.0)},
    ),
}


@op(table=TABLE)
def unary(b: SpecBuilder, p: Unary) -> None:
    x = b.input(0, values=p.values)
    attrs = {}
    for name, (domain, default) in (p.attrs or {}).items():
        attrs[name] = b.attr(name, domain, default)
    b.output(x.shape, interval=p.f(x.interval, attrs))


@op(table={"Gelu": Unary(_nonneg_tail(-0.17))}, since=20)
def gelu(b: SpecBuilder, p: Unary) -> None:
    x = b.input(0)
    b.attr("approximate", OneOf(["none", "tanh"]), "none")
    b.output(x.shape, interval=p.f(x.interval, {}))


@op("Not")
def logical_not(b: SpecBuilder, p: None) -> None:
    x = b.input(0)
    b.output(x.shape)


@op("IsNaN")
def isnan(b: SpecBuilder, p: None) -> None:
    x = b.input(0)
    b.output(x.shape)


@op("IsInf")
def isinf(b: SpecBuilder, p: None) -> None:
    x = b.input(0)
    b.attr("detect_negative", OneOf([0, 1]), 1)
    b.attr("detect_positive", OneOf([0, 1]), 1)
    b.output(x.shape)
