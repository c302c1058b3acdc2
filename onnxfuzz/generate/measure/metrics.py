"""Diversity of a set of ONNX models: the operator-level coverage of GraphFuzzer and Isra.

Over each model's top-level graph; subgraphs (If branches, Loop and Scan bodies) add their
op types to ``ops`` and their nodes to ``nodes``, the rest is the top-level graph's:

- ``ops``: distinct op types (``domain:Op`` outside the default domain), bodies' included;
- ``instances``: distinct (op type, input types and shapes, attributes): GraphFuzzer's
  shape-and-parameter instances (a Constant's tensor counts by type and shape, not value);
- ``in_degree`` / ``out_degree``: distinct (op type, inputs present) and (op type, outputs
  consumed: read by a node or exposed as a graph output);
- ``edges``: distinct producer -> consumer op-type pairs over node -> node edges;
- ``triples``: distinct a -> b -> c op-type chains over node -> node -> node paths;
- per model, averaged over models: ``connectivity`` (the share of node inputs produced by
  another node, not by a graph input or an initializer), ``longest`` (the longest chain of
  nodes) and ``nodes``.

A campaign folds every test into a ``Diversity`` (about 0.25 ms for a 20-node model, most
of it protobuf field reads: the types come from the model's value_info, which the
generator writes for every tensor; shape inference runs only for a model that lacks some).
Sets keep 64-bit digests of their keys, exact up to ``EXACT_CAP`` and then as a
HyperLogLog sketch (about 1% error): a long campaign's instances are nearly all distinct,
and its memory and campaign.db must not grow with every test. A sketch is a function of
the set alone, so merging, persisting and resuming give the counts one uninterrupted run
would.
"""

from __future__ import annotations

import base64
import hashlib
import math
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import onnx

RECORD_VERSION = 1
EXACT_CAP = 16384  # distinct keys kept exactly; past it, a sketch
HLL_BITS = 14  # 2**14 one-byte registers: 16 KiB per sketch, ~0.8% standard error
_HLL_M = 1 << HLL_BITS
_LOW_BITS = 64 - HLL_BITS
_LOW_MASK = (1 << _LOW_BITS) - 1
KINDS = ("instances", "in_degree", "out_degree", "edges", "triples")

_A = onnx.AttributeProto


# --- one model -------------------------------------------------------------------------
@dataclass
class Features:
    """What one model contributes: its keys per kind and its figures. Keys are readable
    (``Relu>Neg``, ``Add/2``) except the types in instance keys (serialized, in hex)."""

    ops: set[str]
    keys: dict[str, set[str]]  # kind (KINDS) -> keys
    nodes: int
    connectivity: float  # share of node inputs produced by another node
    longest: int  # nodes on the longest node -> node path
    _digests: dict[str, set[int]] | None = field(default=None, repr=False, compare=False)

    def digests(self) -> dict[str, set[int]]:
        """The keys as 64-bit digests, computed once (a campaign adds one model to several
        accumulators)."""
        if self._digests is None:
            cache = _DIGESTS
            out: dict[str, set[int]] = {}
            for kind, keys in self.keys.items():
                if kind == "instances":  # rarely repeat: they would only churn the cache
                    out[kind] = {_digest(k, cache=False) for k in keys}
                else:
                    out[kind] = {cache.get(k) or _digest(k) for k in keys}
            self._digests = out
        return self._digests


def op_name(node: onnx.NodeProto) -> str:
    d = node.domain
    return node.op_type if d in ("", "ai.onnx") else f"{d}:{node.op_type}"


def features(model: onnx.ModelProto) -> Features:
    """The keys and figures of ``model``'s top-level graph. Each protobuf field is read
    once (a read costs about as much as the Python work on it)."""
    g = model.graph
    ops: list[str] = []
    inputs: list[list[str]] = []
    outputs: list[list[str]] = []
    attributes: list[str] = []
    producer: dict[str, int] = {}
    for i, node in enumerate(g.node):
        ops.append(op_name(node))
        inputs.append(node.input[:])  # a slice: twice as fast as list()
        outs = node.output[:]
        outputs.append(outs)
        for o in outs:
            if o:
                producer[o] = i
        attrs = node.attribute
        attributes.append(_attributes(attrs) if len(attrs) else "")
    n = len(ops)
    types = _Types(model)

    instances: set[str] = set()
    in_degree: set[str] = set()
    edges: set[str] = set()
    preds: list[set[int]] = []
    succs: list[set[int]] = [set() for _ in range(n)]
    depth: list[int] = []  # nodes on the longest path ending at each node
    ordered = True  # every producer before its consumer (as ONNX requires)
    consumed: set[str] = set(types.outputs)
    type_key, known = types.key, types.cache
    total = linked = 0
    for j, names in enumerate(inputs):
        op = ops[j]
        present = [x for x in names if x]
        total += len(present)
        consumed.update(present)
        mine: set[int] = set()
        for x in present:
            p = producer.get(x)
            if p is not None and p != j:
                linked += 1
                mine.add(p)
        preds.append(mine)
        d = 0
        for p in mine:
            succs[p].add(j)
            edges.add(f"{ops[p]}>{op}")
            if p < j:
                d = max(d, depth[p])
            else:
                ordered = False
        depth.append(d + 1)
        in_degree.add(f"{op}/{len(present)}")
        shapes = ";".join([(known.get(x) or type_key(x)) if x else "" for x in names])
        instances.add(f"{op}|{shapes}|{attributes[j]}")
    out_degree: set[str] = set()
    triples: set[str] = set()
    for i, op in enumerate(ops):
        out_degree.add(f"{op}/{len([o for o in outputs[i] if o and o in consumed])}")
        for p in preds[i]:
            for c in succs[i]:
                triples.add(f"{ops[p]}>{op}>{ops[c]}")
    body_ops: set[str] = set()
    body_nodes = sum(_walk_bodies(node, body_ops) for node in g.node if len(node.attribute))
    return Features(
        ops=set(ops) | body_ops,
        keys={
            "instances": instances,
            "in_degree": in_degree,
            "out_degree": out_degree,
            "edges": edges,
            "triples": triples,
        },
        nodes=n + body_nodes,
        connectivity=linked / total if total else 0.0,
        longest=max(depth, default=0) if ordered else _longest(preds),
    )


def _walk_bodies(node: onnx.NodeProto, ops: set[str]) -> int:
    """The nodes inside ``node``'s subgraphs (recursively), their op types added to ``ops``."""
    count = 0
    for a in node.attribute:
        if a.type == _A.GRAPH:
            subs = [a.g]
        elif a.type == _A.GRAPHS:
            subs = list(a.graphs)
        else:
            continue
        for sub in subs:
            for n in sub.node:
                ops.add(op_name(n))
                count += 1 + (_walk_bodies(n, ops) if len(n.attribute) else 0)
    return count


def _longest(preds: list[set[int]]) -> int:
    """Nodes on the longest path of a graph whose nodes are not in topological order
    (invalid ONNX, but readable): relaxed until nothing changes (at most n passes)."""
    n = len(preds)
    depth = [1] * n
    for _ in range(n):
        changed = False
        for j, ps in enumerate(preds):
            d = 1 + max((depth[p] for p in ps), default=0)
            if d > depth[j]:
                depth[j], changed = d, True
        if not changed:
            break
    return max(depth, default=0)


class _Types:
    """Tensor name -> its type and shape as a canonical string, from the graph's inputs,
    value_info, outputs and initializers; shape inference only when a node input is found
    in none of them. The string is the serialized ``TypeProto`` in hex: one C call, ten
    times faster than reading the dims field by field (a campaign pays it on every test)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.inferred = False
        self._load(model.graph)
        self.cache: dict[str, str] = {}

    def _load(self, g: onnx.GraphProto) -> None:
        self.protos: dict[str, onnx.TypeProto] = {}
        for vis in (g.input, g.value_info, g.output):
            for vi in vis:
                self.protos[vi.name] = vi.type
        self.outputs = [vi.name for vi in g.output]
        self.inits = {t.name: t for t in g.initializer}

    def key(self, name: str) -> str:
        got = self.cache.get(name)
        if got is not None:
            return got
        init = self.inits.get(name)
        if init is not None:
            got = _tensor_key(init.data_type, tuple(init.dims))
        else:
            tp = self.protos.get(name)
            if tp is None and not self.inferred:
                self.inferred = True
                try:
                    inferred = onnx.shape_inference.infer_shapes(self.model)
                except Exception:  # noqa: BLE001 - an unknown type is "?", not a failure
                    inferred = None
                if inferred is not None:
                    self._load(inferred.graph)
                    tp = self.protos.get(name)
            got = tp.SerializeToString().hex() if tp is not None else "?"
        self.cache[name] = got
        return got


_TENSOR_KEYS: dict[tuple[int, tuple[int, ...]], str] = {}


def _tensor_key(elem_type: int, dims: tuple[int, ...]) -> str:
    """An initializer's key: the key of the value_info it would have."""
    got = _TENSOR_KEYS.get((elem_type, dims))
    if got is None:
        tp = onnx.helper.make_tensor_type_proto(elem_type, dims)
        got = tp.SerializeToString().hex()
        if len(_TENSOR_KEYS) >= 1 << 14:
            _TENSOR_KEYS.clear()
        _TENSOR_KEYS[(elem_type, dims)] = got
    return got


def _type_key(tp: onnx.TypeProto) -> str:
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        t = tp.tensor_type
        if not t.HasField("shape"):
            return f"{t.elem_type}[*]"
        dims = ",".join(
            str(d.dim_value) if d.WhichOneof("value") == "dim_value" else (d.dim_param or "?")
            for d in t.shape.dim
        )
        return f"{t.elem_type}[{dims}]"
    if which == "sequence_type":
        return f"seq({_type_key(tp.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"opt({_type_key(tp.optional_type.elem_type)})"
    return which or "?"


def _attributes(attrs: Iterable[onnx.AttributeProto]) -> str:
    """A canonical form of a node's attributes: sorted by name; a tensor by type and
    shape, a subgraph as ``graph`` (subgraphs are not walked)."""
    return ",".join(sorted([f"{a.name}={_attribute(a)}" for a in attrs]))


def _attribute(a: onnx.AttributeProto) -> object:
    t = a.type
    if t == _A.INT:
        return a.i
    if t == _A.FLOAT:
        return repr(a.f)
    if t == _A.STRING:
        return a.s
    if t == _A.INTS:
        return tuple(a.ints)
    if t == _A.FLOATS:
        return tuple(a.floats)
    if t == _A.STRINGS:
        return tuple(a.strings)
    if t == _A.TENSOR:
        return f"tensor({a.t.data_type}[{','.join(map(str, a.t.dims))}])"
    if t == _A.TENSORS:
        return tuple(f"tensor({x.data_type}[{','.join(map(str, x.dims))}])" for x in a.tensors)
    if t == _A.SPARSE_TENSOR:
        return f"sparse({','.join(map(str, a.sparse_tensor.dims))})"
    if t == _A.TYPE_PROTO:
        return _type_key(a.tp)
    if t == _A.TYPE_PROTOS:
        return tuple(_type_key(x) for x in a.type_protos)
    if t in (_A.GRAPH, _A.GRAPHS):
        return "graph"
    return f"type{t}"


# --- sets of digests ---------------------------------------------------------------------
_DIGESTS: dict[str, int] = {}  # keys repeat (edges, degrees): most digests are look-ups


def key_digest(key: str) -> int:
    """The digest ``Features.digests`` gives ``key`` (a guide asks whether a triple or an
    edge it has not made yet was seen, by digest)."""
    return _digest(key)


def _digest(key: str, cache: bool = True) -> int:
    """A stable 64-bit digest (Python's ``hash`` of a str changes between processes)."""
    d = _DIGESTS.get(key)
    if d is None:
        d = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
        if cache:
            if len(_DIGESTS) >= 1 << 16:
                _DIGESTS.clear()
            _DIGESTS[key] = d
    return d


class Distinct:
    """A set of 64-bit digests: exact up to ``EXACT_CAP`` members, then a HyperLogLog
    sketch. Either form is a function of the set alone (order and merges do not matter).
    Its record is kept until the set changes: a campaign writes every few seconds, and most
    sets (op types, degrees, edges) stop growing early."""

    __slots__ = ("exact", "registers", "_record")

    def __init__(self) -> None:
        self.exact: set[int] | None = set()
        self.registers: bytearray | None = None
        self._record: dict[str, str] | None = None

    def update(self, digests: Iterable[int]) -> None:
        if self.exact is not None:
            before = len(self.exact)
            self.exact.update(digests)
            if len(self.exact) != before:
                self._record = None
                if len(self.exact) > EXACT_CAP:
                    self._to_sketch()
            return
        regs = self.registers
        assert regs is not None
        for h in digests:
            i, rank = h >> _LOW_BITS, _LOW_BITS + 1 - (h & _LOW_MASK).bit_length()
            if regs[i] < rank:
                regs[i] = rank
                self._record = None

    def _to_sketch(self) -> None:
        assert self.exact is not None
        members, self.exact = self.exact, None
        self.registers = bytearray(_HLL_M)
        self.update(members)

    def merge(self, other: Distinct) -> None:
        if other.exact is not None:
            self.update(other.exact)
            return
        if self.exact is not None:
            self._to_sketch()
        assert self.registers is not None and other.registers is not None
        self.registers = bytearray(map(max, self.registers, other.registers))
        self._record = None

    def __len__(self) -> int:
        if self.exact is not None:
            return len(self.exact)
        assert self.registers is not None
        regs = self.registers
        m = _HLL_M
        est = (0.7213 / (1 + 1.079 / m)) * m * m / sum(math.ldexp(1.0, -r) for r in regs)
        zeros = regs.count(0)
        if est <= 2.5 * m and zeros:
            est = m * math.log(m / zeros)  # linear counting: exact-ish at small counts
        return round(est)

    @property
    def estimated(self) -> bool:
        return self.exact is None

    def to_record(self) -> dict[str, str]:
        """``{"exact": base64 of the digests}`` (little-endian uint64, in no particular
        order: sorting would triple the cost) or ``{"sketch": base64 of the registers}``."""
        if self._record is None:
            if self.exact is not None:
                data = array("Q", self.exact)
                if sys.byteorder == "big":  # the record is little-endian everywhere
                    data.byteswap()
                self._record = {"exact": base64.b64encode(data.tobytes()).decode()}
            else:
                assert self.registers is not None
                self._record = {"sketch": base64.b64encode(self.registers).decode()}
        return self._record

    @classmethod
    def from_record(cls, rec: dict[str, str]) -> Distinct:
        d = cls()
        if "sketch" in rec:
            regs = bytearray(base64.b64decode(rec["sketch"]))
            if len(regs) != _HLL_M:
                raise ValueError(f"a sketch of {len(regs)} registers, not {_HLL_M}")
            d.exact, d.registers = None, regs
        else:
            data = array("Q")
            data.frombytes(base64.b64decode(rec["exact"]))
            if sys.byteorder == "big":
                data.byteswap()
            d.exact = set(data)
        d._record = dict(rec)
        return d


# --- many models -------------------------------------------------------------------------
class Diversity:
    """The metrics over the models added so far: ``add`` one, ``merge`` another
    accumulator, persist with ``to_record``/``from_record``, read counts with ``summary``."""

    def __init__(self) -> None:
        self.models = 0
        self.nodes = 0
        self.connectivity = 0.0  # sums over models; summary() gives the means
        self.longest = 0
        self.ops: set[str] = set()
        self.sets: dict[str, Distinct] = {kind: Distinct() for kind in KINDS}

    def add(self, model: onnx.ModelProto) -> Features:
        f = features(model)
        self.add_features(f)
        return f

    def add_features(self, f: Features) -> None:
        self.models += 1
        self.nodes += f.nodes
        self.connectivity += f.connectivity
        self.longest += f.longest
        self.ops.update(f.ops)
        for kind, digests in f.digests().items():
            self.sets[kind].update(digests)

    def merge(self, other: Diversity) -> None:
        self.models += other.models
        self.nodes += other.nodes
        self.connectivity += other.connectivity
        self.longest += other.longest
        self.ops.update(other.ops)
        for kind in KINDS:
            self.sets[kind].merge(other.sets[kind])

    def summary(self) -> dict[str, float | int]:
        """Counts of distinct keys, and the per-model figures as means."""
        n = self.models
        out: dict[str, float | int] = {
            "models": n,
            "ops": len(self.ops),
            **{kind: len(self.sets[kind]) for kind in KINDS},
            "connectivity": self.connectivity / n if n else 0.0,
            "longest": self.longest / n if n else 0.0,
            "nodes": self.nodes / n if n else 0.0,
        }
        return out

    def estimated(self) -> list[str]:
        """The kinds whose count is a sketch's estimate (past ``EXACT_CAP`` distinct)."""
        return [kind for kind in KINDS if self.sets[kind].estimated]

    def to_record(self) -> dict[str, Any]:
        return {
            "version": RECORD_VERSION,
            "models": self.models,
            "nodes": self.nodes,
            "connectivity": self.connectivity,
            "longest": self.longest,
            "ops": sorted(self.ops),
            **{kind: self.sets[kind].to_record() for kind in KINDS},
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Diversity:
        if rec.get("version") != RECORD_VERSION:
            raise ValueError(f"diversity record version {rec.get('version')!r}")
        d = cls()
        d.models = int(rec["models"])
        d.nodes = int(rec["nodes"])
        d.connectivity = float(rec["connectivity"])
        d.longest = int(rec["longest"])
        d.ops = set(rec["ops"])
        d.sets = {kind: Distinct.from_record(rec[kind]) for kind in KINDS}
        return d
