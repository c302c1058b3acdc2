"""Operator specs: registration, validation and the static facts of each op.

A spec is a function ``build(b, p)`` that states an op's variables in Isra's order
(input count, first input's rank and dims, attributes, each further input, outputs)
through the builder ``b``; ``p`` is the op's row in its family table. The same
function generates (the builder draws choices) and checks membership (the builder
compares against an observed node): see ``onnxfuzz.generate.build.builder``.

    @op("Relu", "Sigmoid", table={...})
    def unary(b: SpecBuilder, p: Unary) -> None:
        x = b.input("X")
        b.output(x.shape, interval=p.f(x.interval))
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, Protocol

import onnx
import onnx.defs

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError, SpecError
from onnxfuzz.generate.lang.config import MIN_OPSET

if TYPE_CHECKING:
    from onnxfuzz.generate.lang.spec_api import SpecBuilder

ONNX_OPSET = onnx.defs.onnx_opset_version()  # the newest opset the installed onnx defines


@dataclass(frozen=True)
class OpSpec:
    op_type: str
    build: Callable[[SpecBuilder, Any], None] = field(repr=False)
    params: Any = None
    since: int = MIN_OPSET
    until: int = ONNX_OPSET
    family: str = ""

    def covers(self, opset: int) -> bool:
        return self.since <= opset <= self.until and op_info(self.op_type, opset) is not None


REGISTRY: dict[str, OpSpec] = {}
# Ops of other domains (inferred rules, onnxfuzz.infer.rules), by qualified name
# ("com.microsoft.FusedMatMul"): their schema facts, and each domain's opset version.
EXTRA_INFO: dict[str, OpInfo] = {}
DOMAIN_VERSIONS: dict[str, int] = {}


def op(
    *names: str,
    table: Mapping[str, Any] | None = None,
    since: int = MIN_OPSET,
    until: int = ONNX_OPSET,
) -> Callable[[Callable[[SpecBuilder, Any], None]], Callable[[SpecBuilder, Any], None]]:
    """Register ``build`` as the spec of each named op (or of each key of ``table``,
    passing the op's row as ``p``)."""

    def register(build: Callable[[SpecBuilder, Any], None]) -> Callable[[SpecBuilder, Any], None]:
        ops: dict[str, Any] = {n: None for n in names}
        if table:
            ops.update(table)
        if not ops:
            raise SpecError(build.__name__, "names", "@op needs at least one op name or a table")
        family = build.__module__.rsplit(".", 1)[-1]
        for name, params in ops.items():
            register_spec(OpSpec(name, build, params, since, until, family))
        return build

    return register


def register_spec(spec: OpSpec) -> None:
    """Validate a spec and add it to the registry; the error names the op and the fix."""
    name = spec.op_type
    if not onnx.defs.has(name) and name not in EXTRA_INFO:
        raise SpecError(
            name,
            "op_type",
            "no such operator in the ai.onnx domain (an op of another domain is named "
            "'domain.Op' and needs its facts in EXTRA_INFO first, as inferred rules register)",
        )
    if not callable(spec.build) or len(inspect.signature(spec.build).parameters) != 2:
        raise SpecError(name, "build", "build must be a function (b, p) -> None")
    if name in REGISTRY and REGISTRY[name].build is not spec.build:
        raise SpecError(name, "op_type", f"registered twice (also by {REGISTRY[name].family})")
    if not 1 <= spec.since <= spec.until:
        raise SpecError(name, "since", f"empty opset range {spec.since}..{spec.until}")
    if not any(op_info(name, v) for v in range(spec.since, min(spec.until, ONNX_OPSET) + 1)):
        raise SpecError(name, "since", f"no schema in opsets {spec.since}..{spec.until}")
    REGISTRY[name] = spec


@cache
def load_specs() -> dict[str, OpSpec]:
    """Import every module of ``onnxfuzz.specs`` (each registers its ops)."""
    import onnxfuzz.specs as pkg

    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        if not mod.startswith("_"):
            importlib.import_module(f"onnxfuzz.specs.{mod}")
    return dict(sorted(REGISTRY.items()))


# Specs of ops outside ai.onnx come from spec sources: objects registered under this
# entry-point group (pyproject.toml), found and checked like backend adapters. The
# committed inferred rules (onnxfuzz.infer.rules) are one; the solver reads a source's specs
# exactly as it reads the hand specs, and nothing here imports a source.
SPEC_SOURCES = "onnxfuzz.spec_sources"
_SOURCE_METHODS = ("domains", "specs", "coverage")


class SpecSource(Protocol):
    """Where the specs of other domains come from (``SPEC_SOURCES``)."""

    def domains(self) -> list[str]:
        """The domains it has specs for."""
        ...

    def specs(self, domain: str) -> dict[str, OpSpec]:
        """The domain's ops as specs, by qualified name; their facts put in
        ``EXTRA_INFO`` and ``DOMAIN_VERSIONS`` (so ``op_info`` knows them)."""
        ...

    def coverage(self, domain: str) -> list[tuple[str, str, str]]:
        """(op, "inferred" or "uncovered", a note) for each op of the domain it knows."""
        ...


@cache
def spec_sources() -> dict[str, SpecSource]:
    """The registered spec sources by entry-point name, each checked for the protocol."""
    from importlib.metadata import entry_points

    out: dict[str, SpecSource] = {}
    for ep in entry_points(group=SPEC_SOURCES):
        try:
            source = ep.load()
        except Exception as e:  # a broken plugin is named, not a traceback
            raise ConfigError(f"spec source {ep.name} ({ep.value}): cannot load it: {e}") from e
        missing = [m for m in _SOURCE_METHODS if not callable(getattr(source, m, None))]
        if missing:
            raise ConfigError(
                f"spec source {ep.name} ({ep.value}) has no {', '.join(missing)}: a spec "
                "source has domains(), specs(domain) and coverage(domain)"
            )
        out[ep.name] = source
    return out


def source_of(domain: str) -> SpecSource:
    sources = spec_sources()
    for source in sources.values():
        if domain in source.domains():
            return source
    known = "; ".join(f"{n}: {', '.join(s.domains()) or 'none'}" for n, s in sources.items())
    raise ConfigError(
        f"--domains {domain}: no specs for this domain (spec sources: {known or 'none'}); "
        f"run `onnxfuzz infer --domain {domain} --backend ort` to infer its rules"
    )


def domain_specs(domains: frozenset[str] | set[str]) -> dict[str, OpSpec]:
    """The hand specs (ai.onnx) and the specs of the other ``domains`` from their sources."""
    specs = dict(load_specs()) if "ai.onnx" in domains else {}
    for domain in sorted(set(domains) - {"ai.onnx"}):
        specs.update(source_of(domain).specs(domain))
    return specs


def specs_for(
    opset: int,
    include: set[str] | None = None,
    exclude: set[str] | None = None,
    domains: frozenset[str] | set[str] = frozenset({"ai.onnx"}),
) -> list[OpSpec]:
    specs = domain_specs(domains)
    for flag, names in (("--ops", include), ("--exclude-ops", exclude)):
        unknown = sorted(set(names or ()) - set(specs))
        if unknown:
            raise ConfigError(
                f"{flag}: no spec for {', '.join(unknown)}; `onnxfuzz specs` lists the covered ops"
            )
    out = [
        s
        for name, s in specs.items()
        if (include is None or name in include) and name not in (exclude or ()) and s.covers(opset)
    ]
    if not out:
        raise ConfigError(f"no op spec covers opset {opset} with the given --ops/--exclude-ops")
    return out


INDEX_TYPES = frozenset({dt.INT32, dt.INT64})


def restricted_by_dtypes(schema_set: frozenset[int]) -> bool:
    """--dtypes restricts a type variable unless it is index-only (Gather's Tind) or has a
    single type (Where's bool condition)."""
    return len(schema_set) > 1 and not schema_set <= INDEX_TYPES


@dataclass(frozen=True)
class OpInfo:
    """Facts of one op at one opset, from its schema (looked up once)."""

    op_type: str
    version: int  # the op version in force (schema since_version)
    schema: onnx.defs.OpSchema = field(repr=False)
    input_pos: dict[str, int] = field(repr=False)
    input_type: dict[str, str] = field(repr=False)
    output_type: tuple[str, ...] = field(repr=False)
    type_sets: dict[str, frozenset[int]] = field(repr=False)
    schema_type_vars: frozenset[str] = field(repr=False, default=frozenset())
    variadic_output: bool = False
    has_function: bool = False

    @cached_property
    def input_names(self) -> tuple[str, ...]:
        """The schema's input names in order (``b.input(0)`` names the first)."""
        return tuple(self.input_pos)

    @cached_property
    def attribute_names(self) -> frozenset[str]:
        """The schema's attribute names (``schema.attributes`` builds a dict per read)."""
        return frozenset(self.schema.attributes) if self.schema is not None else frozenset()

    @cached_property
    def main_type_var(self) -> str | None:
        """The first input's type variable that --dtypes restricts (Where's condition is
        always bool, Gather's indices index-typed), else the first input's (And, Not: bool
        only), else the first output's (Constant: no inputs). The op's "dtype"."""
        for formal in self.input_pos:
            tv = self.input_type[formal]
            if tv in self.schema_type_vars and restricted_by_dtypes(self.type_sets[tv]):
                return tv
        first = next(iter(self.input_pos), None)
        if first is not None:
            return self.input_type[first]
        return self.output_type[0] if self.output_type else None


def op_info(op_type: str, opset: int) -> OpInfo | None:
    """The op's facts at ``opset``: from its ai.onnx schema, or an inferred rule's."""
    extra = EXTRA_INFO.get(op_type)
    if extra is not None:
        return extra
    return _schema_info(op_type, opset)


@cache
def _schema_info(op_type: str, opset: int) -> OpInfo | None:
    from onnxfuzz.dtypes import from_schema_str

    try:
        schema = onnx.defs.get_schema(op_type, opset)
    except onnx.defs.SchemaError:
        return None
    if schema.deprecated:
        return None
    type_sets: dict[str, frozenset[int]] = {}
    type_vars = frozenset(tc.type_param_str for tc in schema.type_constraints)
    for tc in schema.type_constraints:
        type_sets[tc.type_param_str] = frozenset(
            t for s in tc.allowed_type_strs if (t := from_schema_str(s)) is not None
        )
    for formal in list(schema.inputs) + list(schema.outputs):
        if formal.type_str not in type_sets:  # a concrete type such as tensor(int64)
            t = from_schema_str(formal.type_str)
            type_sets[formal.type_str] = frozenset({t} if t is not None else ())
    return OpInfo(
        op_type=op_type,
        version=schema.since_version,
        schema=schema,
        input_pos={f.name: i for i, f in enumerate(schema.inputs)},
        input_type={f.name: f.type_str for f in schema.inputs},
        output_type=tuple(f.type_str for f in schema.outputs),
        type_sets=type_sets,
        schema_type_vars=type_vars,
        variadic_output=bool(schema.outputs)
        and schema.outputs[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic,
        has_function=schema.has_function or schema.has_context_dependent_function,
    )
