"""NeuRI-style inference over labelled records: input constraints and output-shape rules.

A *record* is one invocation of an op in one variant (present inputs, element types, ranks
and attributes fixed): its input dims flattened in input order, whether the backend ran it
(``valid``), and the output shapes it produced. From a variant's records:

* ``infer_constraints`` finds the most specific conjunction of predicates that every valid
  record satisfies, over the forms the solver can satisfy by construction: dims equal to
  each other (one class), a dim equal to a constant, a class a multiple of ``m``, a class
  at most another (a kernel no larger than the image: drawn after it, below it), a class
  ``k`` times another (``scaled``: Attention's packed weights ``[H, 3H]``; derived from
  it, never drawn). If an
  invalid record satisfies them too, validity depends on something outside these forms
  (values, an inequality): the variant is not inferable and is left out.
* ``synth_dim`` finds each output dim's expression by enumerative synthesis over a small
  grammar (classes, constants 1..3, ``+ - * //``), bottom-up by size with observational
  equivalence; candidates that fit every record are pruned to one per z3-proven
  equivalence class (``a+b`` and ``b+a`` are one candidate). z3 runs here, offline, never
  during generation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

CONSTS = (1, 2, 3)
MAX_SIZE = 5  # expression size (leaves + operators): a op (b op c) at most


@dataclass(frozen=True)
class Record:
    dims: tuple[int, ...]  # every input's dims, in input order
    valid: bool
    outs: tuple[tuple[int, ...], ...] = ()  # output shapes (valid records)


@dataclass(frozen=True)
class Constraints:
    classes: tuple[str | int, ...]  # per flat dim: a class name or a constant
    multiple_of: Mapping[str, int] = field(default_factory=dict)
    le: tuple[tuple[str, str], ...] = ()  # (a, b): class a <= class b (transitively closed)
    # b -> (a, k): class b is k * class a (a is drawn, b follows from it)
    scaled: Mapping[str, tuple[str, int]] = field(default_factory=dict)

    def holds(self, dims: Sequence[int]) -> bool:
        seen: dict[str, int] = {}
        for c, d in zip(self.classes, dims, strict=True):
            if isinstance(c, int):
                if d != c:
                    return False
            elif seen.setdefault(c, d) != d:
                return False
        if not all(seen[c] % m == 0 for c, m in self.multiple_of.items() if c in seen):
            return False
        if not all(
            seen[b] == k * seen[a] for b, (a, k) in self.scaled.items() if a in seen and b in seen
        ):
            return False
        return all(seen[a] <= seen[b] for a, b in self.le if a in seen and b in seen)

    def env(self, dims: Sequence[int]) -> dict[str, int]:
        return {c: d for c, d in zip(self.classes, dims, strict=True) if isinstance(c, str)}


def infer_constraints(records: Sequence[Record]) -> Constraints | str:
    """The most specific constraints of the solver's forms that every valid record meets,
    or the reason there are none."""
    valid = [r for r in records if r.valid]
    if not valid:
        return "no valid record"
    n = len(valid[0].dims)
    names: dict[tuple[int, ...], str] = {}
    classes: list[str | int] = []
    for i in range(n):
        sig = tuple(r.dims[i] for r in valid)
        if len(set(sig)) == 1:
            classes.append(sig[0])
        else:
            classes.append(names.setdefault(sig, f"n{len(names)}"))
    multiple: dict[str, int] = {}
    for sig, name in names.items():
        g = math.gcd(*sig)
        if g > 1:
            multiple[name] = g
    sigs = {name: sig for sig, name in names.items()}
    scaled = _scaled(sigs)
    for b in scaled:
        multiple.pop(b, None)  # b's value follows from its base class
    le = tuple(
        (a, b)
        for a in sorted(sigs)
        for b in sorted(sigs)
        if a != b
        and a not in scaled
        and b not in scaled
        and all(x <= y for x, y in zip(sigs[a], sigs[b], strict=True))
    )
    c = Constraints(tuple(classes), multiple, le, scaled)
    for r in records:
        if not r.valid and c.holds(r.dims):
            return (
                f"an invalid record {list(r.dims)} meets the inferred constraints: validity "
                "depends on more than dim equalities, constants and multiples"
            )
    return c


SCALES = (2, 3, 4)  # the factors a "class = k * class" relation may have


def _scaled(sigs: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[str, int]]:
    """Classes that are ``k`` times another over every valid record (in order of first
    appearance: the base is the earlier class); a chain ``c = 2b, b = 2a`` keeps only the
    relation to the first base, so every derived class's base is a drawn class."""
    out: dict[str, tuple[str, int]] = {}
    order = sorted(sigs, key=lambda n: int(n[1:]))
    for i, b in enumerate(order):
        if any(base == b for base, _ in out.values()):
            continue  # already a base: it stays drawn
        for a in order[:i] + order[i + 1 :]:
            if a in out:
                continue
            k = next(
                (
                    k
                    for k in SCALES
                    if all(y == k * x for x, y in zip(sigs[a], sigs[b], strict=True))
                ),
                None,
            )
            if k is not None:
                out[b] = (a, k)
                break
    return out


# --- output shapes -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Expr:
    text: str
    size: int
    values: tuple[int, ...]
    tree: tuple  # ("var", name) | ("const", k) | (op, left, right)


def _combine(op: str, a: _Expr, b: _Expr) -> _Expr | None:
    if op == "+":
        vals = tuple(x + y for x, y in zip(a.values, b.values, strict=True))
    elif op == "-":
        vals = tuple(x - y for x, y in zip(a.values, b.values, strict=True))
    elif op == "*":
        vals = tuple(x * y for x, y in zip(a.values, b.values, strict=True))
    else:
        if any(y <= 0 for y in b.values):
            return None
        vals = tuple(x // y for x, y in zip(a.values, b.values, strict=True))
    wrap = lambda e: e.text if e.size == 1 else f"({e.text})"  # noqa: E731
    return _Expr(f"{wrap(a)}{op}{wrap(b)}", a.size + b.size + 1, vals, (op, a.tree, b.tree))


def synth_dim(
    envs: Sequence[Mapping[str, int]], target: Sequence[int], max_size: int = MAX_SIZE
) -> list[str]:
    """Expressions over the classes that give ``target[k]`` in ``envs[k]`` for every k,
    smallest first, one per z3 equivalence class; [] when the grammar has none."""
    names = sorted(envs[0]) if envs else []
    tgt = tuple(target)
    banks: dict[int, list[_Expr]] = {1: []}
    seen: set[tuple[int, ...]] = set()
    fits: list[_Expr] = []
    leaves = [_Expr(n, 1, tuple(e[n] for e in envs), ("var", n)) for n in names]
    leaves += [_Expr(str(k), 1, tuple(k for _ in envs), ("const", k)) for k in CONSTS]
    for e in leaves:
        if e.values == tgt:
            fits.append(e)
        if e.values not in seen:
            seen.add(e.values)
            banks[1].append(e)
    for size in range(3, max_size + 1, 2):
        if fits and size > fits[0].size + 2:
            break
        banks[size] = []
        for ls in range(1, size - 1, 2):
            rs = size - 1 - ls
            for a in banks.get(ls, ()):
                for b in banks.get(rs, ()):
                    for op in ("+", "-", "*", "//"):
                        e = _combine(op, a, b)
                        if e is None:
                            continue
                        if e.values == tgt:
                            fits.append(e)
                        if e.values not in seen:
                            seen.add(e.values)
                            banks[size].append(e)
    return [e.text for e in _distinct(fits, names)]


def _distinct(fits: list[_Expr], names: list[str]) -> list[_Expr]:
    """One candidate per equivalence class over dims >= 1, proven by z3 (offline only)."""
    if len(fits) <= 1:
        return fits
    import z3

    syms = {n: z3.Int(n) for n in names}
    domain = [s >= 1 for s in syms.values()]

    def to_z3(t: tuple) -> z3.ArithRef:
        if t[0] == "var":
            return syms[t[1]]
        if t[0] == "const":
            return z3.IntVal(t[1])
        a, b = to_z3(t[1]), to_z3(t[2])
        return {"+": a + b, "-": a - b, "*": a * b, "//": a / b}[t[0]]

    kept: list[tuple[_Expr, z3.ArithRef]] = []
    for e in sorted(fits, key=lambda x: (x.size, x.text)):
        z = to_z3(e.tree)
        same = False
        for _, k in kept:
            s = z3.Solver()
            s.set("timeout", 2000)
            s.add(*domain, z != k)
            if s.check() == z3.unsat:  # no dims tell them apart: one candidate
                same = True
                break
        if not same:
            kept.append((e, z))
    return [e for e, _ in kept]
