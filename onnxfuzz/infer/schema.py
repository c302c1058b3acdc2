"""Op schemas as ``onnxfuzz infer`` reads them, and a *draw*: a variant before its dims.

Schemas come from ``onnx.defs`` (ai.onnx) or from ONNX Runtime's registry (its contrib
domains), reduced to what inference uses: formal inputs and outputs with their
descriptions, type constraints and attributes with their defaults.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import onnx
from onnx import helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.config import DEFAULT_OPSET


@dataclass(frozen=True)
class Formal:
    name: str
    type_str: str
    optional: bool
    variadic: bool
    doc: str = ""  # the schema's description (it may state the shape: "with shape (B, S, H)")


@dataclass(frozen=True)
class Attr:
    name: str
    kind: str  # INT, FLOAT, STRING, INTS, ...
    required: bool
    default: Any = None  # the schema's default value, if any
    doc: str = ""  # the schema's description (quoted candidate values of a string)


def _default(a: Any) -> Any:
    """An attribute's default from an onnx.defs or ONNX Runtime schema (None if none)."""
    proto = getattr(a, "default_value", None)
    if proto is None:
        raw = getattr(a, "_default_value", b"")
        proto = onnx.AttributeProto()
        if raw:
            proto.ParseFromString(raw)
    if proto.type == onnx.AttributeProto.UNDEFINED:
        return None
    v = helper.get_attribute_value(proto)
    return v.decode() if isinstance(v, bytes) else v


@dataclass(frozen=True)
class Schema:
    op: str
    domain: str
    version: int
    inputs: tuple[Formal, ...]
    outputs: tuple[Formal, ...]
    type_sets: dict[str, tuple[int, ...]]
    attrs: tuple[Attr, ...]


def _formal(f: Any) -> Formal:
    opt = f.option.name
    type_str = getattr(f, "type_str", None) or f.typeStr
    return Formal(f.name, type_str, opt == "Optional", opt == "Variadic", f.description or "")


def _schema(s: Any, domain: str) -> Schema:
    type_sets = {
        tc.type_param_str: tuple(
            sorted(t for x in tc.allowed_type_strs if (t := dt.from_schema_str(x)) is not None)
        )
        for tc in s.type_constraints
    }
    return Schema(
        op=s.name,
        domain=domain,
        version=s.since_version,
        inputs=tuple(_formal(f) for f in s.inputs),
        outputs=tuple(_formal(f) for f in s.outputs),
        type_sets=type_sets,
        attrs=tuple(
            Attr(a.name, a.type.name, bool(a.required), _default(a), a.description or "")
            for a in sorted(s.attributes.values(), key=lambda a: a.name)
        ),
    )


def domain_schemas(domain: str, backend: str) -> dict[str, Schema]:
    """The newest schema of each op of ``domain``: ai.onnx (at the default opset) from
    onnx.defs; other domains from ONNX Runtime's registry (its contrib ops)."""
    if domain in ("", "ai.onnx"):
        out = {}
        for s in onnx.defs.get_all_schemas():
            if s.domain == "" and not s.deprecated:
                try:
                    v = onnx.defs.get_schema(s.name, DEFAULT_OPSET)
                except onnx.defs.SchemaError:
                    continue
                if not v.deprecated:
                    out[s.name] = _schema(v, "ai.onnx")
        return dict(sorted(out.items()))
    if not backend.startswith("ort"):
        raise ConfigError(
            f"--domain {domain}: only ONNX Runtime (--backend ort) exposes schemas of "
            "domains other than ai.onnx"
        )
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema

    newest: dict[str, Any] = {}
    for s in get_all_operator_schema():
        if (
            s.domain == domain
            and not s.deprecated
            and (s.name not in newest or s.since_version > newest[s.name].since_version)
        ):
            newest[s.name] = s
    if not newest:
        raise ConfigError(f"--domain {domain}: ONNX Runtime registers no op in that domain")
    return {n: _schema(s, domain) for n, s in sorted(newest.items())}


@dataclass(frozen=True)
class Draw:
    """A variant before its dims: present inputs, their types and ranks, attributes."""

    present: tuple[int, ...]
    dtypes: tuple[int, ...]
    ranks: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    n_out: int
    # (attribute, flat dim index): an int attribute that takes that dim's value in each
    # record (MatMulNBits' K: A's last axis), so it moves with the dims
    bind: tuple[tuple[str, int], ...] = ()
    # Value inputs (an axis, pads, a range's ends, a crop size): (position, element type,
    # shape, values), constants (initializers) whose values decide the output shape, fixed
    # per variant as an attribute is; not in ``present`` (no dims of theirs are drawn).
    # Drawn with shape and values None; ``const_draws`` fills them once the ranks are known.
    consts: tuple[tuple[int, int, Any, Any], ...] = ()

    def key(self) -> str:
        k: list[Any] = [self.present, self.dtypes, self.ranks, self.attrs, self.n_out]
        if self.bind or self.consts:
            k.append(self.bind)
        if self.consts:
            k.append(self.consts)
        return json.dumps(k)  # unbound, no value inputs: the old keys


def formal_of(s: Schema, pos: int) -> Formal:
    """The formal input at position ``pos`` (a variadic last formal takes the rest)."""
    return s.inputs[min(pos, len(s.inputs) - 1)]


# A variadic input of (tensor, scale, zero point) triples (QLinearConcat's "List of
# tensors/scale/zero_point"): its elements take those roles in turn
TRIPLE_RE = re.compile(r"tensors?\s*/\s*scales?\s*/\s*zero_points?", re.IGNORECASE)
TRIPLE_ROLES = ("", "_scale", "_zero_point")


def triple(f: Formal) -> bool:
    """Is ``f`` a variadic input of (tensor, scale, zero point) triples?"""
    return f.variadic and bool(TRIPLE_RE.search(f.doc))


def role_name(s: Schema, pos: int) -> str:
    """The name the input at ``pos`` plays its role by: the formal's, or for an element of
    a triple variadic its role's (``inputs``, ``inputs_scale``, ``inputs_zero_point``), so
    a scale among them is drawn as a scale (a scalar, positive)."""
    f = formal_of(s, pos)
    if not triple(f):
        return f.name
    k = pos - s.inputs.index(f)
    return f.name + TRIPLE_ROLES[k % 3]


# Candidate values of a required STRING attribute whose description quotes none: the
# activation names ONNX Runtime's fused contrib ops take (FusedConv, FusedMatMulActivation).
STRING_CANDIDATES = {"activation": ("Relu", "Tanh", "Sigmoid", "LeakyRelu")}


def string_candidates(a: Attr) -> tuple[str, ...]:
    """Values a string attribute may take: those its description quotes ('qsa', `zeros`),
    else a known list for its name (activation names)."""
    quoted = re.findall(r"""['`"]([A-Za-z_][A-Za-z0-9_]*)['`"]""", a.doc)
    return tuple(dict.fromkeys(quoted)) or STRING_CANDIDATES.get(a.name, ())
