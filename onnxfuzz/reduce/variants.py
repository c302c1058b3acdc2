"""One-change variants of a reduced model around one node (``reduce.neighbours`` runs them).

- each attribute the node's spec draws (``CheckBuilder`` records its domain) set to other
  values of that domain: its default, 1, its neighbouring ints, half and double, the other
  options of a flag or mode;
- each graph input's dims, one axis at a time, one smaller and halved (its values cut);
- the element type of the node's data switched to another of the same kind.

Every variant is checked by the node's hand spec (``CheckBuilder``: the domains the
generator draws from) and by the checker with strict shape inference (``check_static``),
as a reduction candidate is. Where a change moves another input out of its domain (group=1
needs W's C/group channels), that input, an initializer or graph input only the node reads,
is resized to the domain's nearest dim ("refit"), and the variant says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.build.builder import CheckBuilder, OutOfDomain
from onnxfuzz.generate.corpus.validate import check_static, model_opset
from onnxfuzz.generate.lang.config import MAX_DIM, MAX_OPSET, MAX_RANK, MIN_OPSET, Config
from onnxfuzz.generate.lang.domains import Domain, Ints, OneOf
from onnxfuzz.generate.lang.spec import load_specs, op_info
from onnxfuzz.generate.lang.spec_api import MISSING
from onnxfuzz.generate.measure.completeness import attr_value
from onnxfuzz.reduce.static_dims import with_static_inputs

PER_SUBJECT = 2  # values tried per attribute, dims per axis
MAX_REFITS = 6  # inputs resized to fit one change
# the element types a variant may switch to, by kind (the spec and the op's schema decide)
_SWITCH = {"f": (dt.FLOAT, dt.FLOAT16, dt.DOUBLE), "i": (dt.INT64, dt.INT32)}


@dataclass(frozen=True)
class Variant:
    """The reduced model with one change: ``subject`` (an attribute's name, a graph
    input's name, or "dtype") from ``was`` to ``value``."""

    kind: str  # "attribute" | "shape" | "dtype"
    subject: str
    was: Any
    value: Any
    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    # inputs resized to keep it valid, and their new shapes ("W", (2, 2, 1))
    refit: tuple[tuple[str, tuple[int, ...]], ...] = ()
    same_outputs: bool = True  # its outputs have the model's types and shapes
    # A shape's cut keeps the input's first entries and drops the rest, values and all:
    # the same cut keeping its last entries instead, where they differ. A pass that the
    # other end's cut does not share came from the values cut away, not from the size (an
    # audit's LeakyRelu wrong below -4 "passed with [1, 2, 2]": the cut dropped -5.5).
    other_end: Variant | None = None

    @property
    def change(self) -> str:
        if self.kind == "attribute":
            said = f"{self.subject}={_show(self.value)}"
        elif self.kind == "shape":
            said = f"{self.subject} {shape_words(self.value)}"
        else:
            said = f"element type {self.value}"
        resized = ", ".join(f"{t} to {list(shape)}" for t, shape in self.refit)
        return said + (f" ({resized} to fit)" if resized else "")


# --- making them -------------------------------------------------------------------------
def variants(model: onnx.ModelProto, inputs: dict[str, np.ndarray], k: int) -> Iterator[Variant]:
    """The valid one-change variants of ``model`` around node ``k``, in tiers: the
    simplest value of each attribute and one dim less on each axis first, then the element
    types, then each subject's further values (so that a bound cuts the least telling)."""
    seen = {_key(model, inputs)}
    tiers: list[list[Variant]] = [[], [], []]
    attrs = _attribute_variants(model, inputs, k)
    shapes = _shape_variants(model, inputs, k)
    for i in range(PER_SUBJECT):
        tiers[0 if i == 0 else 2] += [vs[i] for vs in attrs if len(vs) > i]
        tiers[0 if i == 0 else 2] += [vs[i] for vs in shapes if len(vs) > i]
    tiers[1] += _dtype_variants(model, inputs, k)
    outputs = _output_types(model)
    for tier in tiers:
        for v in tier:
            key = _key(v.model, v.inputs)
            if key not in seen:
                seen.add(key)
                yield replace(v, same_outputs=_output_types(v.model) == outputs)


class _Refit(Exception):  # noqa: N818 - a request, not an error
    """An input of the node, at ``pos``, needs dim ``axis`` to be ``size``."""

    def __init__(self, pos: int, axis: int, size: int) -> None:
        super().__init__(f"input {pos} dim {axis} -> {size}")
        self.pos, self.axis, self.size = pos, axis, size


class _Checker(CheckBuilder):
    """Checks a node against its spec, recording each attribute's domain and default;
    an input at a ``free`` position whose dim is out of its domain asks to be resized
    (``_Refit``) to the domain's nearest dim."""

    def __init__(self, *args: Any, free: frozenset[int] = frozenset(), **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.domains: dict[str, tuple[Domain, Any]] = {}
        self.free = free

    def attr(self, name: str, domain: Domain, default: Any = MISSING) -> Any:
        self.domains.setdefault(name, (domain, default))
        return super().attr(name, domain, default)

    def input(self, name: str | int, **kw: Any):  # type: ignore[override]
        try:
            return super().input(name, **kw)
        except OutOfDomain as e:
            m = re.search(r"\.shape\[(\d+)\]$", e.variable)
            pos = self._position(self._formal(name), kw.get("index", 0))
            o = self._obs_input(pos)
            if m is None or pos not in self.free or o is None:
                raise
            axis, shape = int(m[1]), o[1]
            pattern = self._dims_at(kw.get("dims"), len(shape))
            entry = pattern[axis] if pattern else None
            size = _nearest(entry, shape[axis], max(self.cfg.max_dim, 2 * shape[axis]))
            if size is None or size == shape[axis]:
                raise
            raise _Refit(pos, axis, size) from None


def _nearest(entry: Any, d: int, hi: int) -> int | None:
    """The dim nearest ``d`` in a spec's dim entry (an int, a domain, or None: any)."""
    if entry is None:
        return min(d, hi)
    if isinstance(entry, int):
        return entry
    for step in range(hi + 1):
        for c in (d - step, d + step):
            if 1 <= c <= hi and entry.contains(c):
                return c
    return None


@dataclass
class _Model:
    """A model being changed: the model, its feeds, and the node's position."""

    model: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    k: int

    @property
    def node(self) -> onnx.NodeProto:
        return self.model.graph.node[self.k]

    def copy(self) -> _Model:
        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        return _Model(m, dict(self.inputs), self.k)


def _check(s: _Model, free: frozenset[str] = frozenset()) -> tuple[_Checker | None, list[str]]:
    """``s``'s node checked against its spec (None: no spec covers it; raises OutOfDomain
    where it is outside its domains), resizing the inputs named in ``free`` where the
    spec asks (``_Refit``; ``s`` is changed in place); and what was resized."""
    opset = model_opset(s.model)
    node = s.node
    specs = load_specs()
    spec = specs.get(node.op_type)
    info = op_info(node.op_type, opset) if spec is not None else None
    if (
        spec is None
        or info is None
        or node.domain not in ("", "ai.onnx")
        or not spec.covers(opset)
        or not MIN_OPSET <= opset <= MAX_OPSET
    ):
        return None, []
    refit: list[str] = []
    for _ in range(MAX_REFITS + 1):
        observed = _observed(s)
        dims = [d for o in observed if o is not None for d in o[1]]
        cfg = Config(opset=opset, max_rank=MAX_RANK, max_dim=min(MAX_DIM, max([1, *dims])))
        attrs = {a.name: attr_value(a) for a in node.attribute}
        positions = frozenset(i for i, t in enumerate(node.input) if t in free)
        b = _Checker(spec, info, cfg, attrs, observed, free=positions)
        try:
            spec.build(b, spec.params)
            b.check_consumed()
            # The node's outputs as the spec makes them: a count the changed attribute
            # contradicts (a Split given num_outputs=1 beside its 2 outputs) is no node
            # ONNX allows, and its shape inference aborts the process on it (audit 16).
            made, have = len(b.outs), len(node.output)
            if have > made or (info.variadic_output and have != made):
                raise OutOfDomain(node.op_type, "outputs", f"{have} outputs, the spec makes {made}")
            return b, refit
        except _Refit as r:
            name = node.input[r.pos]
            if not _resize(s, name, r.axis, r.size):
                raise OutOfDomain(node.op_type, name, "cannot be resized") from None
            refit.append(name)
    raise OutOfDomain(node.op_type, "inputs", "no fit within the refits")


def _observed(s: _Model) -> list[tuple[int, tuple[int, ...], np.ndarray | None] | None]:
    """The node's inputs as ``CheckBuilder`` observes them: (element type, shape, values
    where known: the graph's inputs and initializers)."""
    g = s.model.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    types = _types(_before(s.model, s.k))
    out: list[tuple[int, tuple[int, ...], np.ndarray | None] | None] = []
    for t in s.node.input:
        if not t:
            out.append(None)
        elif t in inits or t in s.inputs:
            a = np.asarray(inits[t] if t in inits else s.inputs[t])
            out.append((helper.np_dtype_to_tensor_dtype(a.dtype), tuple(a.shape), a))
        elif t in types:
            out.append((*types[t], None))
        else:
            out.append(None)
    return out


def _before(model: onnx.ModelProto, k: int) -> onnx.ModelProto:
    """``model`` cut before its node ``k`` (graph nodes are in topological order: what
    node ``k`` reads is made before it), no outputs declared: the types of what it reads,
    inferred without the changed node. ONNX's shape inference runs in this process, and a
    node that contradicts itself can abort it (a C++ assertion), not raise."""
    cut = onnx.ModelProto()
    cut.CopyFrom(model)
    del cut.graph.node[k:]
    del cut.graph.output[:]
    return cut


def _types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple[int, ...]]]:
    try:
        g = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - inference raises several types
        g = model.graph
    return {
        vi.name: (
            vi.type.tensor_type.elem_type,
            tuple(d.dim_value for d in vi.type.tensor_type.shape.dim),
        )
        for vi in [*g.input, *g.value_info, *g.output]
        if vi.type.HasField("tensor_type")
    }


def _resize(s: _Model, name: str, axis: int, size: int) -> bool:
    """Input ``name`` (an initializer or a graph input) cut or repeated along ``axis`` to
    ``size``; False for any other tensor."""
    g = s.model.graph
    for i, init in enumerate(g.initializer):
        if init.name == name:
            g.initializer[i].CopyFrom(
                numpy_helper.from_array(_fit(numpy_helper.to_array(init), axis, size), name)
            )
            return True
    if name in s.inputs:
        s.inputs[name] = _fit(s.inputs[name], axis, size)
        return True
    return False


def _fit(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    """``a`` with ``size`` entries along ``axis``: its first ones, repeated as needed."""
    return np.take(a, np.arange(size) % a.shape[axis], axis=axis)


def _valid(s: _Model, free: frozenset[str]) -> tuple[bool, list[str]]:
    """Whether ``s`` is a model the node's spec allows (inputs in ``free`` resized to
    fit) and the checker with strict shape inference accepts, its declared shapes inferred
    again; ``s`` is changed in place."""
    try:
        checked, refit = _check(s, free)
    except OutOfDomain:
        return False, []
    except Exception:  # noqa: BLE001 - a node its spec cannot describe
        return False, []
    if checked is None:
        return False, []
    for o in s.model.graph.output:  # the change may change them: inferred again
        o.type.tensor_type.ClearField("shape")
    static = with_static_inputs(s.model, s.inputs)
    if static is None or check_static(static):
        return False, []
    s.model = static
    return True, refit


def _free(s: _Model, but: str = "") -> frozenset[str]:
    """The node's inputs a change may resize: initializers and graph inputs only it reads
    (another reader would be changed too), but ``but``."""
    g = s.model.graph
    sources = {i.name for i in g.initializer} | set(s.inputs)
    readers: dict[str, int] = {}
    for n in g.node:
        for t in set(n.input):
            readers[t] = readers.get(t, 0) + 1
    outputs = {o.name for o in g.output}
    return frozenset(
        t
        for t in s.node.input
        if t and t in sources and readers.get(t) == 1 and t not in outputs and t != but
    )


def _attribute_variants(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], k: int
) -> list[list[Variant]]:
    """Per attribute the node's spec draws: up to ``PER_SUBJECT`` valid variants."""
    base = _Model(model, inputs, k)
    try:
        checked, _ = _check(base.copy())
    except Exception:  # noqa: BLE001 - the reduced node outside its spec: no domains
        return []
    if checked is None:
        return []
    attrs = {a.name: attr_value(a) for a in base.node.attribute}
    out = []
    for name, (domain, default) in checked.domains.items():
        if isinstance(domain, OneOf) and len(domain.options) < 2:
            continue  # derived from the inputs (Conv's kernel_shape): no other value
        was = attrs.get(name, default)
        found: list[Variant] = []
        for value in _values(domain, was, default):
            if len(found) == PER_SUBJECT:
                break
            s = base.copy()
            _set_attr(s.node, name, value, default)
            ok, refit = _valid(s, _free(s))
            if ok:
                shown = [(t, _shape_of(s, t)) for t in dict.fromkeys(refit)]
                found.append(
                    Variant("attribute", name, was, value, s.model, s.inputs, tuple(shown))
                )
        if found:
            out.append(found)
    return out


def _values(domain: Domain, was: Any, default: Any) -> list[Any]:
    """Other values of ``domain`` than ``was``, simplest first: the default, then for an
    int 1, its neighbours, half and double; for a choice, its other options."""
    cands: list[Any] = []
    if default is not MISSING and default is not None:
        cands.append(default)
    if _is_int(was) and isinstance(domain, Ints | OneOf):
        w = int(was)
        cands += [1, w - 1, w + 1, w // 2, w * 2]
    if isinstance(domain, OneOf):
        cands += list(domain.options)
    out: list[Any] = []
    for c in cands:
        if _same(c, was) or any(_same(c, o) for o in out):
            continue
        try:
            if domain.contains(c):
                out.append(c)
        except Exception:  # noqa: BLE001 - a domain that cannot say
            continue
    return out


def _set_attr(node: onnx.NodeProto, name: str, value: Any, default: Any) -> None:
    """``name`` set to ``value`` on ``node``; removed where ``value`` is its default."""
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend(kept)
    if default is not MISSING and default is not None and _same(value, default):
        return
    node.attribute.append(helper.make_attribute(name, plain(value)))


def _shape_variants(
    model: onnx.ModelProto, inputs: dict[str, np.ndarray], k: int
) -> list[list[Variant]]:
    """Per axis of each graph input: one dim less, then half the dim (the input cut)."""
    out = []
    for name, a in inputs.items():
        for axis, d in enumerate(a.shape):
            found: list[Variant] = []
            for size in dict.fromkeys([d - 1, d // 2]):
                if size < 1 or len(found) == PER_SUBJECT:
                    continue
                made = [
                    _cut(model, inputs, k, name, cut, list(a.shape))
                    for cut in (_fit(a, axis, size), _last(a, axis, size))
                ]
                first, last = made
                if first is None:
                    continue
                if last is not None and not np.array_equal(
                    first.inputs[name], last.inputs[name], equal_nan=a.dtype.kind in "fc"
                ):
                    first = replace(first, other_end=last)
                found.append(first)
            if found:
                out.append(found)
    return out


def _cut(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    k: int,
    name: str,
    cut: np.ndarray,
    was: list[int],
) -> Variant | None:
    """Input ``name`` given as ``cut``, if valid (other inputs refit to it)."""
    s = _Model(model, dict(inputs), k).copy()
    s.inputs[name] = cut
    ok, refit = _valid(s, _free(s, but=name))
    if not ok:
        return None
    shown = [(t, _shape_of(s, t)) for t in dict.fromkeys(refit)]
    return Variant("shape", name, was, list(cut.shape), s.model, s.inputs, tuple(shown))


def _last(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    """``a`` cut to its last ``size`` entries along ``axis``."""
    return np.take(a, np.arange(a.shape[axis] - size, a.shape[axis]), axis=axis)


def _dtype_variants(model: onnx.ModelProto, inputs: dict[str, np.ndarray], k: int) -> list[Variant]:
    """The whole model's tensors of the node's first input's element type switched to
    another one of the same kind (float16 -> float32), where the model has no node whose
    attributes name types or hold tensors (a Cast's ``to``, a Constant's value)."""
    g = model.graph
    for n in g.node:
        if any(
            a.type in (onnx.AttributeProto.TENSOR, onnx.AttributeProto.GRAPH) for a in n.attribute
        ):
            return []
        if any(a.name in dt.TYPE_ATTRIBUTES for a in n.attribute):
            return []
    observed = _observed(_Model(model, inputs, k))
    first = next((o for o in observed if o is not None), None)
    if first is None:
        return []
    elem = first[0]
    kind = np.dtype(helper.tensor_dtype_to_np_dtype(elem)).kind
    out = []
    for other in _SWITCH.get(kind, ()):
        if other == elem:
            continue
        s = _Model(model, inputs, k).copy()
        _switch(s, elem, other)
        ok, _ = _valid(s, frozenset())
        if ok:
            out.append(
                Variant(
                    "dtype", "dtype", dt.NAMES.get(elem), dt.NAMES.get(other), s.model, s.inputs
                )
            )
    return out[:PER_SUBJECT]


def _switch(s: _Model, elem: int, other: int) -> None:
    """Every tensor of element type ``elem`` in ``s`` made ``other``."""
    g = s.model.graph
    np_other = helper.tensor_dtype_to_np_dtype(other)
    for vi in [*g.input, *g.output, *g.value_info]:
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.elem_type == elem:
            tt.elem_type = other
    for i, init in enumerate(g.initializer):
        if init.data_type == elem:
            a = numpy_helper.to_array(init).astype(np_other)
            g.initializer[i].CopyFrom(numpy_helper.from_array(a, init.name))
    for name, a in s.inputs.items():
        if helper.np_dtype_to_tensor_dtype(a.dtype) == elem:
            s.inputs[name] = a.astype(np_other)


# --- small helpers --------------------------------------------------------------------
def _shape_of(s: _Model, name: str) -> tuple[int, ...]:
    for init in s.model.graph.initializer:
        if init.name == name:
            return tuple(init.dims)
    return tuple(np.shape(s.inputs.get(name, ())))


def _output_types(model: onnx.ModelProto) -> list[bytes]:
    return [o.type.SerializeToString() for o in model.graph.output]


def _key(model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> bytes:
    return model.SerializeToString() + b"".join(
        k.encode() + str(v.dtype).encode() + str(v.shape).encode() + v.tobytes()
        for k, v in sorted(inputs.items())
    )


def _is_int(v: Any) -> bool:
    return isinstance(v, int | np.integer) and not isinstance(v, bool)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return isinstance(a, list | tuple) and isinstance(b, list | tuple) and list(a) == list(b)
    return bool(a == b)


def plain(v: Any) -> Any:
    """A value as JSON and ``make_attribute`` take it."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, tuple):
        return [plain(x) for x in v]
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def _show(v: Any) -> str:
    return attribute_words(plain(v))


def attribute_words(v: Any) -> str:
    """An attribute's value as issue.md says it: a float as it was written, not as float32
    stored it (alpha=0.1, not 0.10000000149011612)."""
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, float):
        return f"{v:.7g}"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(attribute_words(x) for x in v) + "]"
    return str(v)


def elements(shape: Any) -> int:
    return int(np.prod(shape)) if shape else 1


def shape_words(shape: Any) -> str:
    """ "[1, 2, 5] (10 elements)": a shape as issue.md and the variants say it."""
    n = elements(shape)
    return f"{_show(shape)} ({n} element{'s' if n != 1 else ''})"
