"""Inferred op rules: specs learned from a backend's verdicts instead of written by hand.

``onnxfuzz infer`` (``onnxfuzz.infer.learn``) records invocations of an op, labels them valid
or invalid by running them, and writes what it inferred to ``specs/inferred/<domain>.json``:
per op, a list of *variants*. A variant fixes the present inputs, their element types and
ranks, and the attributes; its input constraints are of the forms the solver satisfies
constructively, so generation stays backtrack-free:

* each dim is a named *class* or a constant: dims of one class are equal (``"n0"`` in two
  inputs), a constant dim is that value;
* a class may have to be a multiple of ``m`` (``multiple_of``), or at most another class
  (``le``: a kernel no larger than the image), or be ``k`` times another class (``scaled``:
  Attention's packed weights ``[H, 3H]``; never drawn, it follows from its base class);
* an int attribute may equal a class (``attr_dims``: MatMulNBits' ``K`` is A's last axis):
  it takes the value the class took, after the inputs;
* each output dim is an expression over the classes (``"n0"``, ``"n1*2"``, ``"n0-1"``) from
  a small arithmetic grammar (``+ - * //``, small integer constants).

A variant's inputs are stated in position order through the same builder as a hand spec
(``rule_spec`` makes an ``OpSpec`` of a rule): the first occurrence of a class in an input
is drawn (or taken from a reused tensor), later ones are fixed to it. Inferred ops know no
value semantics: each input takes values in the domain the records were made with, and each
output's interval is the range observed over the records (widened; see ``OutputRule``) --
an empirical interval, not a proven one.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError, SpecError
from onnxfuzz.generate.lang.domains import Domain, Ints, OneOf
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.spec import OpInfo, OpSpec

FORMAT = 1  # the rule file format's version
DEFAULT_DOMAIN = "ai.onnx"
# Free dims are drawn in the range the records were made in: a rule is verified there only.
DIM_LO, DIM_HI = 2, 8


def qualified(domain: str, op: str) -> str:
    """The name an op of another domain has among the generator's ops (``com.microsoft.
    FusedMatMul``); ai.onnx ops keep their bare name (ai.onnx names contain no dot)."""
    return op if domain in ("", DEFAULT_DOMAIN) else f"{domain}.{op}"


def split_qualified(name: str) -> tuple[str, str]:
    """(domain, op type) of a generator op name; the domain is "" for ai.onnx."""
    domain, _, op = name.rpartition(".")
    return domain, op


# --- the rule format ------------------------------------------------------------------------
@dataclass(frozen=True)
class InputRule:
    pos: int  # position among the schema's inputs
    name: str  # the schema's formal name
    dtype: int
    dims: tuple[str | int, ...]  # a class name or a constant per axis
    lo: float  # the value domain the records drew from
    hi: float


@dataclass(frozen=True)
class ConstRule:
    """A value input (ExpandDims' axis, Pad's pads, Range's ends): a constant the node
    takes as an initializer with these values, fixed per variant as an attribute is."""

    pos: int
    name: str
    dtype: int
    shape: tuple[int, ...]
    values: tuple[float, ...]


@dataclass(frozen=True)
class OutputRule:
    dtype: int
    shape: tuple[str, ...]  # an expression over the classes per axis
    # The observed value range over every valid record, widened by half its width on each
    # side (room for draws the records did not make); empirical, not sound.
    lo: float
    hi: float


@dataclass(frozen=True)
class Variant:
    inputs: tuple[InputRule, ...]
    attrs: Mapping[str, Any]
    multiple_of: Mapping[str, int]
    outputs: tuple[OutputRule, ...]
    le: tuple[tuple[str, str], ...] = ()  # (a, b): class a <= class b
    scaled: Mapping[str, tuple[str, int]] = field(default_factory=dict)  # b -> (a, k): b = k*a
    # An int attribute equal to a dim class (MatMulNBits' K is A's last axis): set, after
    # the inputs, to the value the class took, so it is drawn by construction too
    attr_dims: Mapping[str, str] = field(default_factory=dict)
    consts: tuple[ConstRule, ...] = ()  # value inputs, set as initializers


@dataclass(frozen=True)
class Rule:
    op: str
    domain: str
    version: int
    inputs: tuple[tuple[str, str], ...]  # the schema's (name, type string) per input
    outputs: tuple[str, ...]  # type strings of the outputs the rule produces
    type_sets: Mapping[str, frozenset[int]]
    variants: tuple[Variant, ...]

    @property
    def name(self) -> str:
        return qualified(self.domain, self.op)


def _dtype(name: str) -> int:
    if name not in dt.BY_NAME:
        raise SpecError("inferred rule", "dtype", f"unknown element type {name!r}")
    return dt.BY_NAME[name]


def rule_from_json(d: Mapping[str, Any]) -> Rule:
    variants = tuple(
        Variant(
            inputs=tuple(
                InputRule(i["pos"], i["name"], _dtype(i["dtype"]), tuple(i["dims"]), *i["values"])
                for i in v["inputs"]
            ),
            attrs=dict(v.get("attrs", {})),
            multiple_of={k: int(m) for k, m in v.get("multiple_of", {}).items()},
            outputs=tuple(
                OutputRule(_dtype(o["dtype"]), tuple(o["shape"]), *o["range"]) for o in v["outputs"]
            ),
            le=tuple((a, b) for a, b in v.get("le", ())),
            scaled={b: (str(a), int(k)) for b, (a, k) in v.get("scaled", {}).items()},
            attr_dims={n: str(c) for n, c in v.get("attr_dims", {}).items()},
            consts=tuple(
                ConstRule(
                    c["pos"], c["name"], _dtype(c["dtype"]), tuple(c["shape"]), tuple(c["values"])
                )
                for c in v.get("consts", ())
            ),
        )
        for v in d["variants"]
    )
    return Rule(
        op=d["op"],
        domain=d["domain"],
        version=int(d["version"]),
        inputs=tuple((n, t) for n, t in d["inputs"]),
        outputs=tuple(d["outputs"]),
        type_sets={k: frozenset(_dtype(n) for n in v) for k, v in d["type_sets"].items()},
        variants=variants,
    )


def rule_to_json(r: Rule) -> dict[str, Any]:
    return {
        "op": r.op,
        "domain": r.domain,
        "version": r.version,
        "inputs": [list(x) for x in r.inputs],
        "outputs": list(r.outputs),
        "type_sets": {k: sorted(dt.NAMES[t] for t in v) for k, v in sorted(r.type_sets.items())},
        "variants": [
            {
                "inputs": [
                    {
                        "pos": i.pos,
                        "name": i.name,
                        "dtype": dt.NAMES[i.dtype],
                        "dims": list(i.dims),
                        "values": [i.lo, i.hi],
                    }
                    for i in v.inputs
                ],
                "attrs": dict(v.attrs),
                "multiple_of": dict(v.multiple_of),
                **({"le": [list(x) for x in v.le]} if v.le else {}),
                **({"scaled": {b: [a, k] for b, (a, k) in v.scaled.items()}} if v.scaled else {}),
                **({"attr_dims": dict(v.attr_dims)} if v.attr_dims else {}),
                **(
                    {
                        "consts": [
                            {
                                "pos": c.pos,
                                "name": c.name,
                                "dtype": dt.NAMES[c.dtype],
                                "shape": list(c.shape),
                                "values": list(c.values),
                            }
                            for c in v.consts
                        ]
                    }
                    if v.consts
                    else {}
                ),
                "outputs": [
                    {"dtype": dt.NAMES[o.dtype], "shape": list(o.shape), "range": [o.lo, o.hi]}
                    for o in v.outputs
                ],
            }
            for v in r.variants
        ],
    }


# --- output-shape expressions --------------------------------------------------------------
_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}


def evaluate(expr: str, env: Mapping[str, int]) -> int:
    """The value of a shape expression (names, integer constants, ``+ - * //``)."""
    return _eval(ast.parse(expr, mode="eval").body, env, expr)


def _eval(node: ast.AST, env: Mapping[str, int], expr: str) -> int:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise SpecError("inferred rule", expr, f"unknown dim class {node.id!r}")
        return int(env[node.id])
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        a, b = _eval(node.left, env, expr), _eval(node.right, env, expr)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if b == 0:
            raise SpecError("inferred rule", expr, "division by zero")
        return a // b
    raise SpecError("inferred rule", expr, "not in the shape grammar (names, ints, + - * //)")


# --- loading ---------------------------------------------------------------------------------
def rules_dir() -> Path:
    """specs/inferred: the source tree's where onnxfuzz runs from a checkout, else the
    installed package's."""
    here = Path(__file__).resolve().parents[2] / "specs" / "inferred"
    if here.is_dir():
        return here
    import onnxfuzz.specs

    return Path(onnxfuzz.specs.__file__).parent / "inferred"


@cache
def load_domain(domain: str, path: Path | None = None) -> tuple[Rule, ...]:
    """The rules of ``domain`` (from ``path``, default specs/inferred/<domain>.json)."""
    f = path or rules_dir() / f"{domain}.json"
    if not f.is_file():
        raise ConfigError(
            f"--domains {domain}: no inferred rules at {f}; run `onnxfuzz infer --domain "
            f"{domain} --backend ort` first"
        )
    try:
        data = json.loads(f.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"{f}: not JSON ({e}); re-run `onnxfuzz infer`") from None
    if data.get("format") != FORMAT:
        raise ConfigError(f"{f}: rule format {data.get('format')}, expected {FORMAT}")
    return tuple(rule_from_json(r) for r in data["rules"])


def op_info_of(rule: Rule) -> OpInfo:
    """The schema facts the builder needs, from the rule (the schema lives in the backend)."""
    type_sets = dict(rule.type_sets)
    for _, t in rule.inputs:
        if t not in type_sets:
            c = dt.from_schema_str(t)
            type_sets[t] = frozenset({c} if c is not None else ())
    for t in rule.outputs:
        if t not in type_sets:
            c = dt.from_schema_str(t)
            type_sets[t] = frozenset({c} if c is not None else ())
    return OpInfo(
        op_type=rule.name,
        version=rule.version,
        schema=None,  # type: ignore[arg-type]
        input_pos={n: i for i, (n, _) in enumerate(rule.inputs)},
        input_type={n: t for n, t in rule.inputs},
        output_type=rule.outputs,
        type_sets=type_sets,
        # a type variable some variant gives two element types (a variadic of (tensor,
        # scale, zero point) triples: QLinearConcat) is not bound by its first input: each
        # input states its own type
        schema_type_vars=frozenset(rule.type_sets) - _heterogeneous(rule),
    )


def _heterogeneous(rule: Rule) -> frozenset[str]:
    """Type variables a variant of ``rule`` gives more than one element type."""
    out = set()
    for v in rule.variants:
        seen: dict[str, int] = {}
        for i in v.inputs:
            tv = dict(rule.inputs)[i.name]
            if seen.setdefault(tv, i.dtype) != i.dtype:
                out.add(tv)
    return frozenset(out)


def rule_spec(rule: Rule) -> OpSpec:
    return OpSpec(rule.name, build_rule, rule, family=f"inferred:{rule.domain}")


# --- generation ------------------------------------------------------------------------------
def class_domain(
    name: str,
    env: Mapping[str, int],
    multiple_of: Mapping[str, int],
    le: Sequence[tuple[str, str]],
    lo: int,
    hi: int,
) -> Domain:
    """The values class ``name`` may take given the classes drawn so far: its multiple,
    and its order relations to drawn classes (the relation set is transitively closed, so
    the bounds from drawn classes never cross)."""
    for a, b in le:
        if b == name and a in env:
            lo = max(lo, env[a])
        if a == name and b in env:
            hi = min(hi, env[b])
    if lo > hi:
        raise SpecError("inferred rule", name, f"empty dim domain {lo}..{hi}")
    m = multiple_of.get(name, 1)
    if m <= 1:
        return Ints(lo, hi)
    options = [k for k in range(lo, hi + 1) if k % m == 0]
    if not options:
        raise SpecError("inferred rule", name, f"no multiple of {m} in {lo}..{hi}")
    return OneOf(options)


def _fits(b: Any, v: Variant) -> bool:
    """Can the variant be generated under the options (--dtypes, --max-rank)?"""
    for i in v.inputs:
        if len(i.dims) > b.max_rank or i.dtype not in b.types(b.info.input_type[i.name]):
            return False
    return all(c.dtype in b.types(b.info.input_type[c.name]) for c in v.consts)


def build_rule(b: Any, rule: Rule) -> None:
    """An inferred rule stated through the builder, as a hand spec would state it."""
    variants = [v for v in rule.variants if _fits(b, v)]
    if not variants:
        raise ConfigError(f"{rule.name}: no inferred variant fits --dtypes/--max-rank")
    v = variants[b.draw("variant", Ints(0, len(variants) - 1))]
    hi = max(DIM_LO, min(DIM_HI, b.max_dim))
    env: dict[str, int] = {}
    related = {c for pair in v.le for c in pair}
    for inp in v.inputs:
        for e in inp.dims:
            if isinstance(e, str) and e in v.scaled and e not in env:
                # a derived class: its base is drawn now (if not yet), and it follows
                base, k = v.scaled[e]
                if base not in env:
                    dom = class_domain(base, env, v.multiple_of, v.le, DIM_LO, hi)
                    env[base] = int(b.draw(f"{inp.name}.{base}", dom))
                env[e] = k * env[base]
        new = [e for e in dict.fromkeys(inp.dims) if isinstance(e, str) and e not in env]
        for e in new:
            # A class repeated in this tensor, or ordered against another class new here,
            # is drawn first (in order), so the tensor's pattern states its value.
            if inp.dims.count(e) > 1 or (e in related and len(set(new) & related) > 1):
                dom = class_domain(e, env, v.multiple_of, v.le, DIM_LO, hi)
                env[e] = int(b.draw(f"{inp.name}.{e}", dom))
        pattern: list[Any] = []
        for e in inp.dims:
            if isinstance(e, int):
                pattern.append(e)
            elif e in env:
                pattern.append(env[e])
            else:
                pattern.append(class_domain(e, env, v.multiple_of, v.le, DIM_LO, hi))
        index = inp.pos - b.info.input_pos[inp.name]  # > 0: a later tensor of a variadic input
        t = b.input(
            inp.name, index=index, dtype=inp.dtype, dims=pattern, values=Values(inp.lo, inp.hi)
        )
        for e, d in zip(inp.dims, t.shape, strict=True):
            if isinstance(e, str):
                env.setdefault(e, d)
    for c in v.consts:  # value inputs: initializers with the variant's values
        b.const(c.name, np.asarray(c.values).reshape(c.shape), dtype=c.dtype)
    for name, value in v.attrs.items():
        b.set_attr(name, value)
    for name, cls in v.attr_dims.items():
        if cls not in env:
            raise SpecError("inferred rule", name, f"attribute bound to {cls!r}, no input has it")
        b.set_attr(name, env[cls])
    for o in v.outputs:
        shape = [evaluate(x, env) for x in o.shape]
        iv = None if o.dtype == dt.BOOL else Interval(o.lo, o.hi)
        b.output(shape, dtype=o.dtype, interval=iv)


def register_domain(domain: str) -> dict[str, OpSpec]:
    """The inferred ops of ``domain`` as specs (their facts registered for ``op_info``)."""
    from onnxfuzz.generate.lang import spec as registry

    out: dict[str, OpSpec] = {}
    for rule in load_domain(domain):
        if rule.domain != domain:
            raise ConfigError(f"{rule.name}: in the rule file of {domain}, but of {rule.domain}")
        registry.EXTRA_INFO[rule.name] = op_info_of(rule)
        registry.DOMAIN_VERSIONS[rule.domain] = max(
            registry.DOMAIN_VERSIONS.get(rule.domain, 1), rule.version
        )
        out[rule.name] = rule_spec(rule)
    return out


class RuleFiles:
    """The committed rule files (specs/inferred/DOMAIN.json) as a spec source: registered
    under ``onnxfuzz.spec_sources`` (pyproject.toml), read by the solver like hand specs."""

    def domains(self) -> list[str]:
        return sorted(f.stem for f in rules_dir().glob("*.json"))

    def specs(self, domain: str) -> dict[str, OpSpec]:
        return register_domain(domain)

    def coverage(self, domain: str) -> list[tuple[str, str, str]]:
        data = json.loads((rules_dir() / f"{domain}.json").read_text())
        rows = []
        for r in data["rules"]:
            types = sorted({i["dtype"] for v in r["variants"] for i in v["inputs"]})
            rows.append((r["op"], "inferred", f"{len(r['variants'])} ({', '.join(types)})"))
        for op, why in data["left_out"].items():
            rows.append((op, "uncovered", why.replace("|", "/")))
        return sorted(rows)


SOURCE = RuleFiles()
