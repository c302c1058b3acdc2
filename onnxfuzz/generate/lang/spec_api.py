"""The builder API a spec talks to: read this first to write a spec.

A spec states an op's variables in Isra's order through a ``SpecBuilder`` (see
docs/writing-specs.md). Two builders implement it: ``builder.GenBuilder`` draws every
variable from the recorded choice stream (generation) and ``builder.CheckBuilder`` takes
it from an observed node (the spec-completeness check). Specs must use nothing else of a
builder: a name added here must be implemented by both (a test checks it). Both name
``SpecBuilder`` among their bases, so a type checker also reports a member either lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.domains import Domain, Ints, OneOf
from onnxfuzz.generate.lang.graph import OptionalValue, Tensor
from onnxfuzz.generate.lang.graph import Sequence as Seq
from onnxfuzz.generate.lang.intervals import Interval, Values

if TYPE_CHECKING:
    from onnxfuzz.generate.lang.graph import Body
    from onnxfuzz.generate.lang.spec import OpInfo

DimEntry = int | Domain | None  # one axis of an input's dims: fixed, a domain, or any
Dims = Sequence[DimEntry] | Callable[[int], Sequence[DimEntry]] | None  # or per rank
ValuesArg = Values | Callable[[int], Values]  # a value domain, or one per element type


def fits_pattern(shape: tuple[int, ...], pattern: Sequence[DimEntry]) -> bool:
    """Does ``shape`` match ``pattern`` axis by axis (as many entries as axes)?"""
    for d, e in zip(shape, pattern, strict=True):  # inlined: the solver's hottest loop
        if e is None:
            continue
        if type(e) is int:
            if d != e:
                return False
        elif type(e) is Ints:
            if not e.lo <= d <= e.hi:
                return False
        elif type(e) is OneOf:
            if d not in e.options:
                return False
        elif not e.contains(d):
            return False
    return True


def fits_dim(d: int, e: DimEntry) -> bool:
    """Does dim ``d`` match one entry of a dims pattern?"""
    if e is None:
        return True
    if type(e) is int:
        return d == e
    if type(e) is Ints:
        return e.lo <= d <= e.hi
    if type(e) is OneOf:
        return d in e.options
    return bool(e.contains(d))


MISSING: Any = object()  # ``attr`` without a default: the attribute is always set
DATA = "data"  # a fresh input becomes a graph input (values drawn per test)
WEIGHT = "weight"  # a fresh input becomes an initializer (values fixed in the model)


Formal = tuple[str, int, tuple[int, ...], Interval]  # a body input: label, type, shape, interval


class BodyScope(Protocol):
    """A subgraph under construction (``SpecBuilder.body``; ``onnxfuzz.generate.build.control``):
    its nodes are drawn when it is made; the spec then names its outputs."""

    formals: list[Tensor]  # the body's inputs, as the spec declared them

    def pick(self, k: int, allowed: Sequence[int]) -> list[Tensor]:
        """Up to ``k`` (at least one) distinct tensors of ``allowed`` types the body made."""
        ...

    def fit(self, dtype: int, shape: Sequence[int], values: Values) -> Tensor:
        """A body tensor of exactly this type and shape, inside ``values`` (never fails)."""
        ...

    def close(self, results: Sequence[Tensor]) -> Body:
        """The finished body with these outputs, to set as the graph attribute."""
        ...


class SpecBuilder(Protocol):
    """What a spec may read and call. Variables are stated in Isra's order: input count
    and optional inputs, the first input, attributes, further inputs, outputs."""

    # --- facts -------------------------------------------------------------------------
    op: str  # the op type
    version: int  # the op's schema version at the model's opset
    opset: int  # the model's opset
    cfg: Config  # generator options (max rank and dim, dtypes, ...)
    info: OpInfo  # the op's schema facts (type sets, input positions)
    bound: dict[str, int]  # type variables bound so far -> element type

    @property
    def max_rank(self) -> int:
        """The largest rank a fresh input may take (--max-rank)."""
        ...

    @property
    def max_dim(self) -> int:
        """The largest dim a fresh input may take (--max-dim)."""
        ...

    def types(self, type_var: str) -> tuple[int, ...]:
        """Element types ``type_var`` may take now (schema, kernels, --dtypes, bound)."""
        ...

    # --- variables ---------------------------------------------------------------------
    def arity(self, lo: int, hi: int, name: str | int = 0) -> int:
        """How many inputs a variadic input has, in ``lo..hi``."""
        ...

    def optional(self, name: str | int, p: float = 0.5) -> bool:
        """Is the optional input ``name`` present (with probability ``p``)?"""
        ...

    def draw(self, name: str, domain: Domain) -> Any:
        """A variable that is not an attribute (a value the spec derives others from)."""
        ...

    def attr(self, name: str, domain: Domain, default: Any = MISSING) -> Any:
        """An attribute from ``domain``; with ``default``, sometimes left out."""
        ...

    def set_attr(self, name: str, value: Any) -> None:
        """An attribute whose value the spec derived (no choice)."""
        ...

    def pinned(self, name: str | int) -> float | None:
        """The value a block fixes input ``name`` to (a constant of the optimizers'
        patterns, ``blocks.Const``), None where none: a spec whose earlier input's domain
        depends on it reads it first (Pow's base may be negative under an integer
        exponent), and must then admit that value only."""
        ...

    def body(self, attr: str, formals: Sequence[Formal]) -> BodyScope:
        """A subgraph for graph attribute ``attr`` with inputs ``formals``, its nodes drawn
        by the solver over the outer scope's tensors and the formals; a ConfigError past
        --max-depth."""
        ...

    # --- tensors -----------------------------------------------------------------------
    def input(
        self,
        name: str | int,
        *,
        index: int = 0,
        dtype: int | Iterable[int] | None = None,
        rank: int | Ints | None = None,
        dims: Dims = None,
        values: ValuesArg = ...,
        kind: str = DATA,
        inferable_shape: bool = False,
    ) -> Tensor:
        """An input tensor: an existing one that fits, or a fresh input or initializer.
        ``inferable_shape``: never a tensor whose shape ONNX's shape inference cannot know
        (a Loop's outputs and what is computed from them), for an op whose inference
        function needs its rank."""
        ...

    def const(
        self, name: str | int, value: Any, *, index: int = 0, dtype: int | None = None
    ) -> Tensor:
        """A constant input with values the spec derived (shape, axes, pads)."""
        ...

    def const_type(self, name: str | int, index: int = 0) -> int:
        """The element type of a constant input, among its type variable's."""
        ...

    def output(
        self, shape: Sequence[int], *, dtype: int | None = None, interval: Interval | None = None
    ) -> Tensor:
        """The next output: its shape and its sound value interval."""
        ...

    # --- sequences and optionals (onnxfuzz.generate.build.sequences) --------------------------
    def input_seq(
        self,
        name: str | int,
        *,
        dtype: int | Iterable[int] | None = None,
        length: Ints | None = None,
        rank: int | Ints | None = None,
        dims: Dims = None,
        shapes: str = "any",
    ) -> Seq:
        """A sequence input: element type among ``dtype``, length in ``length`` (default
        0..4), each
        element's rank and dims as ``input`` takes them; ``shapes``: "any" (independent),
        "same" (one shape), "concat" (one rank, dims shared but along one axis)."""
        ...

    def input_optional(self, name: str | int, *, present: bool | None = None) -> OptionalValue:
        """An optional input; ``present``: True holds a value, False empty, None either."""
        ...

    def output_seq(
        self, dtype: int, shapes: Iterable[Iterable[int]], intervals: Iterable[Interval]
    ) -> Seq:
        """The next output, a sequence: element type, each element's shape and interval."""
        ...

    def output_optional(self, elem: Tensor | Seq, *, present: bool) -> OptionalValue:
        """The next output, an optional holding ``elem`` (empty of its type if not present)."""
        ...
