"""Matrix products: MatMul (numpy matmul), Gemm, Einsum.

Order: A (any dims; values |A| <= sqrt(bound) so a product with a useful B still fits)
-> attributes -> B (dims that make the product defined; values |B| <= bound / (K * |A|),
with K the length of the summed axes) -> output (exact shape). Each output element sums
K products of one A and one B element, so it lies in K * (A.interval * B.interval).
"""

from __future__ import annotations

import math
from typing import Any

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Floats, Ints, OneOf
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.shapes import broadcast, broadcastable, unidirectional
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import WEIGHT, SpecBuilder

NOT_GENERATED = {
    "test_einsum_batch_diagonal": "diagonals (a letter repeated in one operand) and ellipses "
    "are not generated",
}


def _operand(dtype: int) -> Values:
    """|A| <= sqrt(bound): leaves room for B's values in the product."""
    s = math.sqrt(dt.value_range(dtype)[1])
    return Values(-math.floor(s) if dtype in dt.INTS else -s, math.floor(s))


def _factor(dtype: int, a: Interval, k: float) -> Values:
    """Values of the other factor of a sum of ``k`` products with ``a``: the sum stays
    inside the dtype's bound."""
    m = dt.value_range(dtype)[1] / (max(k, 1.0) * max(a.mag, 1.0))
    if dtype in dt.INTS:
        m = math.floor(m)
    return Values(-m, m)


def _sum_of_products(a: Interval, b: Interval, k: int) -> Interval:
    prod = a * b
    return Interval(k * prod.lo, k * prod.hi)


@op("MatMul")
def matmul(b: SpecBuilder, p: None) -> None:
    # numpy matmul: 1-D A is a row vector, 1-D B a column vector (the added axis is
    # removed again); the batch axes (all but the last two) broadcast.
    a = b.input("A", rank=Ints(1, b.max_rank), values=_operand)
    k = a.shape[-1]
    batch_a = a.shape[:-2]

    def b_dims(rank: int) -> list:
        if rank == 1:
            return [k]
        return list(broadcastable(batch_a)(rank - 2)) + [k, None]

    y = b.input("B", rank=Ints(1, b.max_rank), dims=b_dims, values=_factor(a.dtype, a.interval, k))
    if a.rank == 1 and y.rank == 1:
        shape: tuple[int, ...] = ()
    elif a.rank == 1:
        shape = y.shape[:-2] + y.shape[-1:]
    elif y.rank == 1:
        shape = a.shape[:-1]
    else:
        shape = broadcast(batch_a, y.shape[:-2]) + (a.shape[-2], y.shape[-1])
    b.output(shape, interval=_sum_of_products(a.interval, y.interval, k))


@op("Gemm")
def gemm(b: SpecBuilder, p: None) -> None:
    # Y = alpha * A' * B' + beta * C, A' = A or A^T (M x K), B' = B or B^T (K x N);
    # C broadcasts unidirectionally to (M, N).
    has_c = b.optional("C")
    a = b.input("A", rank=2, values=_operand)
    trans_a = b.attr("transA", OneOf([0, 1]), 0)
    trans_b = b.attr("transB", OneOf([0, 1]), 0)
    alpha = b.attr("alpha", Floats(-2.0, 2.0, 16), 1.0)
    beta = b.attr("beta", Floats(-2.0, 2.0, 16), 1.0)
    m, k = a.shape[::-1] if trans_a else a.shape
    # Half of the bound for the product, half for beta * C.
    half = dt.value_range(a.dtype)[1] / 2
    scale = max(abs(alpha), 1e-3)
    m_b = half / (k * scale * max(a.interval.mag, 1.0))
    y = b.input("B", dims=[None, k] if trans_b else [k, None], values=Values(-m_b, m_b))
    n = y.shape[0] if trans_b else y.shape[1]
    iv = _sum_of_products(a.interval, y.interval, k).scale(alpha)
    if has_c:
        m_c = half / max(abs(beta), 1e-3)
        c = b.input(
            "C", rank=Ints(0, 2), dims=unidirectional((m, n)), values=Values(-m_c, m_c), kind=WEIGHT
        )
        iv = iv + c.interval.scale(beta)
    b.output((m, n), interval=iv)


# --- Einsum --------------------------------------------------------------------------

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _parse(eq: Any) -> tuple[list[str], str] | None:
    """Operand terms and output term of an equation without ellipses (implicit output:
    the letters used once, in alphabetical order)."""
    if not isinstance(eq, str) or "." in eq:
        return None
    eq = eq.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if not arrow:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return terms, out


class EinsumEquation:
    """Equations for ``n`` (1 or 2) operands, the first of dims ``dims``: each operand's
    letters distinct (no diagonals); the second operand shares some letters with the first
    and adds new ones, which all appear in the output; the letters left out of the output
    (summed over) have a product of dims <= ``cap``; the output has at most ``max_rank``
    letters. Covers transpose, axis sums, matmul, batch matmul, inner and outer products."""

    def __init__(self, n: int, dims: tuple[int, ...], max_rank: int, cap: float) -> None:
        self.n, self.dims, self.max_rank, self.cap = n, tuple(dims), max_rank, cap

    def __repr__(self) -> str:
        return f"EinsumEquation({self.n}, {list(self.dims)}, {self.max_rank}, cap={self.cap:g})"

    def empty(self) -> bool:
        return self.n not in (1, 2) or len(self.dims) > self.max_rank

    def draw(self, s: ChoiceStream) -> str:
        r = len(self.dims)
        x = _LETTERS[:r]
        # Letters of x in a drawn order; a suffix of it is summed over, kept short enough
        # that the product of its dims stays <= cap.
        rest = list(x)
        order = [rest.pop(s.index(len(rest))) for _ in range(r)]
        kmin = r
        while kmin > 0 and math.prod(self.dims[x.index(c)] for c in order[kmin - 1 :]) <= self.cap:
            kmin -= 1
        terms = [x]
        new: list[str] = []
        if self.n == 2:
            pool = list(x) + list(_LETTERS[r : r + self.max_rank - kmin])
            size = s.integer(1, min(self.max_rank, len(pool)))
            y = [pool.pop(s.index(len(pool))) for _ in range(size)]
            new = [c for c in y if c not in x]
            terms.append("".join(y))
        kept = order[: s.integer(kmin, min(r, self.max_rank - len(new)))]
        out = kept + new
        out = [out.pop(s.index(len(out))) for _ in range(len(out))]
        return ",".join(terms) + "->" + "".join(out)

    def contains(self, value: Any) -> bool:
        parsed = _parse(value)
        if parsed is None:
            return False
        terms, out = parsed
        if len(terms) != self.n or any(len(set(t)) != len(t) for t in terms + [out]):
            return False
        x = terms[0]
        if len(x) != len(self.dims) or len(out) > self.max_rank:
            return False
        new = set("".join(terms[1:])) - set(x)
        if not new <= set(out) or not set(out) <= set(x) | new:
            return False
        summed = [self.dims[i] for i, c in enumerate(x) if c not in out]
        return math.prod(summed) <= self.cap


@op("Einsum")
def einsum(b: SpecBuilder, p: None) -> None:
    n = b.arity(1, 2)
    x = b.input("Inputs", index=0, values=_operand)
    bound = dt.value_range(x.dtype)[1]
    cap = bound / max(x.interval.mag, 1.0)
    eq = b.attr("equation", EinsumEquation(n, x.shape, b.max_rank, cap))
    terms, out = _parse(eq)
    size = dict(zip(terms[0], x.shape, strict=True))
    summed = math.prod(size[c] for c in terms[0] if c not in out)
    if n == 1:
        iv = Interval(summed * x.interval.lo, summed * x.interval.hi)
    else:
        dims = [size.get(c) for c in terms[1]]  # shared letters: x's dim; new: any
        y = b.input("Inputs", index=1, dims=dims, values=_factor(x.dtype, x.interval, summed))
        size.update(zip(terms[1], y.shape, strict=True))
        iv = _sum_of_products(x.interval, y.interval, summed)
    b.output([size[c] for c in out], interval=iv)
