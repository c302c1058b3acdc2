"""A campaign's guide: the decision for each test, made in order from earlier rewards.

The guide (``--guide mcts``, and ``--seed-models``) decides something about test *i*
(``onnxfuzz.generate.build.guide``: the ops or blocks its model starts with, by UCT; a mutant of
an interesting earlier test; a mutant of a user model) in the campaign process, and the
decision travels with ``(i, seed)`` to the generator. For a campaign to stay a function of
its seed and history, the decision for test *i* depends only on the rewards of the tests
below ``i - LAG``, applied in test order: however lanes interleave, and whether or not the
campaign was stopped and resumed, test *i* gets the same decision. A lane that needs a
reward not in yet runs what it holds to the end first, then waits (so lanes can never wait
on each other in a circle: a waiting lane holds no unfinished test).

A test's reward is what it covered first: op-type triples and shape-attribute instances
(the diversity features the campaign computes anyway) and failure signatures per backend.

``--guide optcov`` is UCT as under ``mcts`` (the ops or blocks a model starts with; with
``--op-mix layers`` the blocks include the optimizers' own patterns), rewarded instead by
what the test made the backends' optimizers do first (an ONNX Runtime transformer or rewrite
rule, a TVM pass or fused-kernel pattern: the adapters' ``optimizations`` feedback) and by
new failure signatures (``optimization_keys``).

``--guide frontier`` aims at the triples directly: a share of its tests start with an
ad-hoc chain of op types (``{"path": ["chain:A>B>C>..."]}``) walked from a uniformly drawn
op over the op-type edges ``a -> b`` the campaign has already produced (so each link is
one the solver has made), each step preferring a successor that makes an op-type triple
not seen yet; the other tests are UCT's, as under ``mcts`` (which found more failure
signatures than seeds' own models did). A chain whose test found a new failure signature
is walked again now and then (``HOT_SHARE``), one of its ops swapped for another of the
op's family, at the new test's own shapes, types and attributes.
"Seen" is a fixed-size bit set of those keys (bounded memory, a rare collision costs a
slightly low reward). Each test's decision and keys are stored with it in campaign.db
(``Store.record``'s ``guide``), and ``--resume`` rebuilds the guide by replaying them: the
same state as a campaign that never stopped.
"""

from __future__ import annotations

import random
import threading
import zlib
from array import array
from bisect import insort
from collections import deque
from collections.abc import Iterable

from onnxfuzz.generate.build.guide import (
    CHAIN_ACTION,
    CHAIN_SEP,
    MAX_LINEAGE,
    Decision,
    Guided,
    Uct,
    chain_action,
    depth,
)
from onnxfuzz.generate.measure.metrics import Features, key_digest

LAG = 16  # test i is decided from the rewards of the tests below i - LAG
# Guided tests that are mutants of an interesting earlier test, by default (--mutants). 0:
# in two 250-test ORT vs TVM campaigns (seed 9100), mutants at 0.2 gave 554 triples and 24
# TVM signatures, none gave 601 and 29 (random: 620 and 24): a mutant mostly repeats its
# parent's triples and failure.
MUTANT_SHARE = 0.0
SEED_SHARE = 0.5  # tests made from a user model, when --seed-models gives some
POOL = 256  # interesting tests (a new triple or failure) kept as parents: the latest
SEEN_BITS = 1 << 24  # the seen-key bit set (2 MiB)
TRIPLE, INSTANCE, SIGNATURE, EDGE = 0, 1, 2, 3  # key kinds (the top two bits of a key)
_LOW = (1 << 30) - 1
MODES = ("random", "mcts", "frontier", "optcov")
# --guide frontier: the share of tests that start with a walked chain (more narrowed the
# op types: 250 models at 1:10, an earlier walk that started only at linked ops, had 136
# op types with every test a chain, 163 with half, 174 with none)
CHAIN_SHARE = 0.5
CHAIN_MAX = 12  # ops a walked chain has at most (a model stops it at its node count)
HOT_SHARE = 0.15  # chain tests that walk again a chain that found a new failure signature
HOT = 64  # such chains kept: the latest
# --guide frontier: what the tests without a chain are: "seed" (their seeds' own models)
# or "mcts" (UCT's first ops or blocks, as --guide mcts picks them). mcts: in 250-test ORT
# vs TVM campaigns (seeds 9100, 9300) 805 and 764 triples, 24 and 27 TVM signatures;
# seed: 756 and 744, 24 and 29 (README's guided paragraph).
FRONTIER_REST = "mcts"
KEY_CACHE = 1 << 18  # triple keys whose seen-set bits are kept (a walk's lookups)


def reward_keys(features: Features | None, signatures: Iterable[tuple[str, str]]) -> bytes:
    """A test's coverage keys, packed (32-bit: the kind, then 30 bits of its digest):
    its triples and instances, and its ``(backend, signature)`` failures."""
    keys = array("I")
    if features is not None:
        d = features.digests()
        keys.extend((TRIPLE << 30) | (k & _LOW) for k in sorted(d.get("triples", ())))
        keys.extend((INSTANCE << 30) | (k & _LOW) for k in sorted(d.get("instances", ())))
        keys.extend((EDGE << 30) | (k & _LOW) for k in sorted(d.get("edges", ())))
    for backend, sig in sorted(set(signatures)):
        keys.append((SIGNATURE << 30) | (zlib.crc32(f"{backend}|{sig}".encode()) & _LOW))
    return keys.tobytes()


def optimization_keys(
    fired: Iterable[tuple[str, str, str]], signatures: Iterable[tuple[str, str]]
) -> bytes:
    """A test's coverage keys under ``--guide optcov``: what the backends' optimizers did
    on it (``(backend, kind, name)``, from their ``optimizations`` feedback), packed in the
    slot ``reward_keys`` gives triples (a campaign has one guide mode: the two never mix),
    and its ``(backend, signature)`` failures."""
    keys = array("I")
    for backend, kind, name in sorted(set(fired)):
        keys.append((TRIPLE << 30) | (key_digest(f"opt|{backend}|{kind}|{name}") & _LOW))
    for backend, sig in sorted(set(signatures)):
        keys.append((SIGNATURE << 30) | (zlib.crc32(f"{backend}|{sig}".encode()) & _LOW))
    return keys.tobytes()


def optimization_reward(new: list[int]) -> float:
    """``--guide optcov``'s reward in [0, 1]: an optimization (a transformer, rule, pass
    or fused pattern) no earlier test made fire, and a new failure signature, half each."""
    return 0.5 * min(1.0, new[TRIPLE] / 2) + 0.5 * min(1.0, float(new[SIGNATURE]))


def reward(new: list[int]) -> float:
    """A test's reward in [0, 1] from the keys it saw first, per kind: new failure
    signatures weigh most (bugs), then triples (the passes that match chains), then
    instances (nearly every model has some new ones, so they tell models apart least)."""
    t, i, s = new[:3]  # (edges: the frontier guide's map, no reward of their own)
    return 0.4 * min(1.0, t / 8) + 0.1 * min(1.0, i / 16) + 0.5 * min(1.0, float(s))


class Steering:
    """The decisions of one campaign (``mode`` "mcts" or "random"; ``seed_names``: the
    lifted user-model blocks), rebuilt from ``history`` (stored test -> its decision and
    reward keys)."""

    def __init__(
        self,
        guided: Guided,
        seed: int,
        mode: str,
        seed_names: list[str],
        history: dict[int, tuple[Decision, bytes]] | None = None,
        lag: int = LAG,
        mutants: float = MUTANT_SHARE,
    ) -> None:
        self.seed = seed
        self.mode = mode
        self.seed_names = sorted(seed_names)
        self.lag = lag
        self.mutants = mutants
        if mode not in MODES:
            raise ValueError(f"guide mode {mode!r}: one of {', '.join(MODES)}")
        uct = mode in ("mcts", "optcov") or (mode == "frontier" and FRONTIER_REST == "mcts")
        self.tree = Uct(guided.actions) if uct else None
        # the op types a frontier chain may use, and the names features give them
        self._ops = [sp.op_type for sp in guided.gen.specs] if mode == "frontier" else []
        self._names = {op: _feature_name(op) for op in self._ops}
        self._index = {op: k for k, op in enumerate(self._ops)}
        self._family: dict[str, list[str]] = {}  # op -> the ops of its spec's family
        if mode == "frontier":
            families: dict[str, list[str]] = {}
            for sp in guided.gen.specs:
                families.setdefault(sp.family or sp.op_type, []).append(sp.op_type)
            for sp in guided.gen.specs:
                self._family[sp.op_type] = families[sp.family or sp.op_type]
        self._keys_of: dict[str, int] = {}  # a triple -> its seen-set bit
        # every possible edge a -> b by its seen-set bit, and the edges seen so far: for
        # each op, the indices of its successors in ``_ops``, ascending
        self._edge_at: dict[int, list[tuple[int, int]]] = {}
        for ia, a in enumerate(self._ops):
            for ib, b in enumerate(self._ops):
                bit = _key_bit(EDGE, f"{self._names[a]}>{self._names[b]}")
                self._edge_at.setdefault(bit, []).append((ia, ib))
        self._succ: list[list[int]] = [[] for _ in self._ops]
        self.hot: deque[list[str]] = deque(maxlen=HOT)
        self._seen = bytearray(SEEN_BITS // 8)
        self._history = {i: d for i, (d, _) in (history or {}).items()}
        self._keys: dict[int, bytes] = {i: k for i, (_, k) in (history or {}).items()}
        self._decided: dict[int, Decision] = {}  # decided, reward not yet applied
        self._next = 0  # every test below is decided
        self._applied = 0  # every test below has its reward applied
        self.pool: deque[tuple[int, Decision]] = deque(maxlen=POOL)
        self.rewarded = 0.0  # sum of the rewards applied (for the summary)
        self._cond = threading.Condition()

    @property
    def active(self) -> bool:
        """Whether any test gets a decision (random with no seed models: none)."""
        return self.mode != "random" or bool(self.seed_names)

    # --- the lanes' side -----------------------------------------------------------
    def ready(self, i: int) -> bool:
        """Whether test ``i`` can be decided now (every reward it depends on is in)."""
        with self._cond:
            return all(j in self._keys for j in range(self._applied, i - self.lag))

    def wait(self, i: int, stop: threading.Event) -> None:
        with self._cond:
            while not stop.is_set() and not all(
                j in self._keys for j in range(self._applied, i - self.lag)
            ):
                self._cond.wait(0.25)

    def decide(self, i: int) -> Decision:
        """The decision for test ``i`` (tests are decided in increasing order; the ones
        skipped, stored already, take their stored decisions). Needs ``ready(i)``."""
        with self._cond:
            while self._next <= i:
                j = self._next
                self._apply_below(j - self.lag)
                d = self._history.pop(j) if j in self._history else self._select(j)
                if self.tree is not None and _uct_path(d):
                    self.tree.visit(d["path"])
                self._decided[j] = d
                self._next += 1
            return self._decided[i]

    def report(self, i: int, keys: bytes) -> None:
        """Test ``i``'s reward keys (``reward_keys``), once it is stored."""
        with self._cond:
            self._keys[i] = keys
            self._cond.notify_all()

    # --- in test order --------------------------------------------------------------
    def _select(self, j: int) -> Decision:
        rng = random.Random(f"onnxfuzz-guide:{self.seed}:{j}")  # str seeds: stable
        if self.seed_names and rng.random() < SEED_SHARE:
            name = self.seed_names[rng.randrange(len(self.seed_names))]
            return {"seed": name, "mutant": rng.random() < 0.75}
        if self.mode == "frontier":
            return self._frontier(rng)
        if self.tree is None:
            return None
        if self.pool and rng.random() < self.mutants:
            parent_id, parent = self.pool[rng.randrange(len(self.pool))]
            if depth(parent) < MAX_LINEAGE:
                return {"of": [self.seed + parent_id, parent]}
        return {"path": self.tree.select(rng)}

    def _frontier(self, rng: random.Random) -> Decision:
        """A walked chain (``CHAIN_SHARE`` of the tests), else what ``FRONTIER_REST``
        says."""
        if rng.random() >= CHAIN_SHARE:
            return {"path": self.tree.select(rng)} if self.tree is not None else None
        if self.hot and rng.random() < HOT_SHARE:
            ops = self._variant(self.hot[rng.randrange(len(self.hot))], rng)
        else:
            ops = self._walk(rng)
        return {"path": [chain_action(ops)]}

    def _variant(self, ops: list[str], rng: random.Random) -> list[str]:
        """A chain that found a new failure, one op swapped for another of its family
        (Add for Mul, ReduceMax for ReduceSum: a converter's bug in one often has a
        sibling in the other, a signature of its own)."""
        k = rng.randrange(len(ops))
        kin = [op for op in self._family.get(ops[k], ()) if op != ops[k]]
        if not kin:
            return list(ops)
        return ops[:k] + [kin[rng.randrange(len(kin))]] + ops[k + 1 :]

    def _walk(self, rng: random.Random) -> list[str]:
        """A chain of op types from a uniformly drawn first op (so chains start at every
        op alike, not only at the well-linked ones) over seen edges, each step preferring
        a successor that makes an unseen triple; the first op alone while no edge from it
        was seen."""
        ops = self._ops
        path = [ops[rng.randrange(len(ops))]]
        while len(path) < CHAIN_MAX:
            b = path[-1]
            succ = self._successors(b)
            if not succ:
                break
            if len(path) >= 2:
                na, nb = self._names[path[-2]], self._names[b]
                new = [c for c in succ if not self._seen_key(TRIPLE, f"{na}>{nb}>{self._names[c]}")]
                succ = new or succ
            path.append(succ[rng.randrange(len(succ))])
        return path

    def _successors(self, a: str) -> list[str]:
        """The ops ``b`` whose edge ``a -> b`` was seen, in ``_ops`` order."""
        return [self._ops[b] for b in self._succ[self._index[a]]]

    def _seen_key(self, kind: int, key: str) -> bool:
        bit = self._keys_of.get(key)
        if bit is None:
            if len(self._keys_of) >= KEY_CACHE:
                self._keys_of.clear()
            bit = self._keys_of[key] = _key_bit(kind, key)
        return bool(self._seen[bit >> 3] & (1 << (bit & 7)))

    def _apply_below(self, k: int) -> None:
        while self._applied < k:
            j = self._applied
            keys = array("I")
            keys.frombytes(self._keys.pop(j))
            new = [0, 0, 0, 0]
            seen = self._seen
            for key in keys:
                bit = _bit(key)
                byte, mask = bit >> 3, 1 << (bit & 7)
                if not seen[byte] & mask:
                    seen[byte] |= mask
                    new[key >> 30] += 1
                    if key >> 30 == EDGE and self._edge_at:
                        for a, b in self._edge_at.get(bit, ()):
                            insort(self._succ[a], b)
            r = optimization_reward(new) if self.mode == "optcov" else reward(new)
            self.rewarded += r
            d = self._decided.pop(j, None)
            if self.tree is not None and _uct_path(d):
                self.tree.reward(d["path"], r)
            if new[TRIPLE] or new[SIGNATURE]:  # it added coverage (instances nearly all do)
                self.pool.append((j, d))
            if new[SIGNATURE] and d is not None and self.mode == "frontier":
                for a in d.get("path", ()):
                    if a.startswith(CHAIN_ACTION):
                        self.hot.append(a[len(CHAIN_ACTION) :].split(CHAIN_SEP))
            self._applied += 1


def _uct_path(d: Decision) -> bool:
    """Whether ``d`` is a path the tree search chose (not a chain, a mutant, a seed)."""
    return d is not None and "path" in d and not d["path"][0].startswith(CHAIN_ACTION)


def _bit(key: int) -> int:
    """A reward key's bit in the seen set (the kind mixed in: kinds share the set)."""
    return ((key & _LOW) ^ ((key >> 30) * 0x9E3779B1)) % SEEN_BITS


def _key_bit(kind: int, key: str) -> int:
    """The seen-set bit of a readable key (as ``reward_keys`` packs its digest)."""
    return _bit((kind << 30) | (key_digest(key) & _LOW))


def _feature_name(op_type: str) -> str:
    """The name the diversity features give an op (``metrics.op_name``): a spec's
    qualified ``domain.Op`` is ``domain:Op`` there."""
    if "." not in op_type:
        return op_type
    domain, op = op_type.rsplit(".", 1)
    return f"{domain}:{op}"
