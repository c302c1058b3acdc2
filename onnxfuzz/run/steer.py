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

``--guide optcov`` is rewarded by *new* optimization coverage: what the test made the
backends' optimizers do first (a fused-kernel pattern, an ONNX Runtime transformer or
rewrite rule, a TVM pass: the adapters' ``optimizations`` feedback, ``optimization_keys``)
and new bug families (``judge.signature.family``: a new signature of a known family is
one bug seen through another op); what earlier tests made fire or fail already earns
nothing. It steers as coverage-guided fuzzers do, with a bandit whose memory fades
(``Recent``: an arm that stops paying, its patterns found, loses its weight within
~``1 / (1 - OPT_DECAY)`` tests). A share of the tests (``OPT_VARIETY_SHARE``) keeps the op
variety where bug families are (converter gaps of rarer ops): they start with one op, each
time one of those such tests forced least (``OPT_VARIETY_CHAINED`` of the time then a
fusable chain, below), and are random from there on. Otherwise
a test starts with an ad-hoc chain of ops each taking the previous one's output
(``OPT_CHAIN_SHARE``) in ``OPT_SEGMENTS`` segments, each an anchor (MatMul, Conv, Gemm;
the first segment's half the time) then elementwise ops (``FUSION_ELEMENTWISE``), as
fusion passes fuse them, so that a segment not made before is a fused pattern not seen
before; or with two blocks (with ``--op-mix
layers`` the optimizers' own patterns among them); every op and block drawn in
proportion to the new coverage it brought recently. (A share ``OPT_MUTANT_SHARE`` may
instead mutate a test that found new optimization coverage, the seeds coverage-guided
fuzzers keep; measured, they found fewer new patterns than random tests: 0 by default.)

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

from onnxfuzz.generate.build import blocks
from onnxfuzz.generate.build.guide import (
    BLOCK_ACTION,
    CHAIN_ACTION,
    CHAIN_SEP,
    MAX_LINEAGE,
    OP_ACTION,
    Decision,
    Guided,
    Uct,
    chain_action,
    depth,
)
from onnxfuzz.generate.measure.metrics import Features, key_digest
from onnxfuzz.judge.signature import family

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
# --guide optcov: optimization keys by kind, in the slots the other guides use (a campaign
# has one guide mode: the meanings never mix): fused patterns, rewrites (ORT transformers
# and rules), passes (TVM's: nearly all fire in the first tests).
OPT_FUSED, OPT_REWRITE, OPT_PASS = TRIPLE, INSTANCE, EDGE
OPT_KIND_SLOT = {"fused": OPT_FUSED, "transformer": OPT_REWRITE, "rule": OPT_REWRITE}
# Tests that mutate a test that found new optimization coverage. 0: in a 300-test
# ORT vs tvm:pipeline=fuse campaign (seed 9100, --op-mix layers) with 15 % mutants and 45 %
# chains, each mutant made 0.54 new fused patterns, a chain 0.90, two blocks 1.04, a random
# test 0.87 (a mutant keeps its parent's fused groups but one op).
OPT_MUTANT_SHARE = 0.0
# --guide optcov's tests by kind: OPT_VARIETY_SHARE start with one op drawn among the ops
# such tests forced least so far, then a fusable chain (the rest of the model random: op
# variety, where a backend's converter gaps are, the bug families), OPT_CHAIN_SHARE with a fusable
# chain drawn by the bandit (fused patterns), the rest with two blocks drawn by it. With
# no variety draws (chains 0.5, blocks 0.5), two 300-test ORT vs tvm:pipeline=fuse
# campaigns at the default mix found 1.92x / 1.96x random's fused patterns but 0.72x /
# 0.53x its TVM bug families (13 / 10 against 18 / 19). With these shares (and families,
# not signatures, rewarded), seeds 9100 / 20000 / 40000 at the default mix: fused 1.72x /
# 1.35x / 1.59x, families 0.78x / 0.73x / 0.73x; at --op-mix layers: fused 1.18x / 1.12x /
# 1.02x, families 1.33x / 2.00x / 1.00x (the layers mix itself has little op variety).
# Variety 0.5, chains 0.4 (default mix, 9100 / 20000): fused 1.74x / 1.24x, families
# 0.72x / 1.07x: within the seeds' spread, so not taken then. Since 2026-11-26: variety
# 0.5 (no chain after the op), chains 0.3, blocks 0.2, measured as default campaigns run
# (--probe steer, seeds 9100 / 20000 / 40000, 300 tests; random 274 / 278 / 301 fused,
# 21 / 23 / 16 TVM families): fused 325 / 338 / 308 (1.14x summed), families 24 / 17 / 18
# (0.98x; 29 distinct over the three, random 33), where the shares before (variety 0.3
# chained, chains 0.45, blocks 0.25) gave 344 / 348 / 352 (1.22x) and 13 / 14 / 12
# (0.65x; 19 distinct). With --probe off: fused 235 / 252 / 251 (1.41x; before 1.73x),
# families 16 / 16 / 13 (0.94x; before 0.83x). ORT optimizer families (the 8 5,000-test
# ort:opt=none+ort campaigns at --op-mix layers, --opset 16,21): 56 against random's 36
# (1.56x; before 59, 1.64x), the same with and without the probe. Taken: as many TVM
# bug families as random (not a third fewer), for a few fused patterns.
OPT_VARIETY_SHARE = 0.5
# A variety draw's op is followed by a fusable chain this often (the op's converter gaps
# and a fused pattern in one test). Seeds 9100 / 20000 / 40000, default mix, against the
# same random campaigns (2026-11-26): fused 2.02x / 1.43x / 1.83x (without: 1.72x /
# 1.35x / 1.59x), families 0.72x / 0.93x / 0.87x (without: 0.78x / 0.73x / 0.73x). With
# three chain segments instead of two: fused 2.01x / 1.50x / 1.87x, families 0.72x /
# 0.67x / 0.87x, so two. With the probe the chain cost families more than it gave fused
# patterns (variety 0.5 chained, chains 0.3: seeds 20000 / 40000 fused 350 / 361,
# families 16 / 13, against 338 / 308 and 17 / 18 unchained), so none since 2026-11-26.
OPT_VARIETY_CHAINED = 0.0
# Tried against the same random campaigns (seeds 9100 / 20000 / 40000, 300 tests, default
# mix; random: 155 / 206 / 163 fused patterns, 18 / 15 / 15 families), none taken: chains
# 0.6 of the tests, blocks 0.1: fused 327 / 303 / 311, families 10 / 12 / 13; chains sized
# to the seed's node count (half of chain tests ran out of nodes before their chain's
# end): fused 302 / 294 / 294, families 13 / 13 / 13; sized to half of it (room for
# random ops): fused 254 / 257 / 255, families 14 / 15 / 15; comparisons, Where and
# injective ops among the chain's ops, pools, BatchNormalization and reductions among its
# anchors: fused 291 / 266 / 278, families 13 / 15 / 16; every segment anchored
# (OPT_ANCHORED 1.0): fused 293 / 288 / 306, families 15 / 11 / 13; segments of 2-4 ops:
# fused 299 / 291 / 294, families 12 / 11 / 12. The shares then: fused 313 / 294 / 299,
# families 13 / 14 / 13. Fused patterns and families trade against each other here.
# All of the above ran with --probe off. With the probe (fuzz's default, --probe steer),
# random's models all import into TVM: random 274 / 278 / 301 fused, 21 / 23 / 16
# families; those shares 344 / 348 / 352 (1.22x) and 13 / 14 / 12 (0.65x); chains on
# every test (seed 9100) 388, three segments all anchored 394 (1.42x / 1.44x): under the
# probe, chains cannot reach 2x random while tests keep their seed's node count. Fused
# counts in these notes kept TVM's numbers inside names (``cast1``), as the tvm adapter
# did until the afternoon of 2026-11-26: 5-10 % above today's count (README). Counted
# without them, chains as branches (three segments, each past the first taking the
# chain's first input, so no anchor is needed to part the groups; unanchored segments of
# 2-3 ops): fused 309 / 326 / 291 (1.17x random's 260 / 261 / 272; these shares 299 /
# 306 / 284, 1.12x), families 22 / 15 / 17 (these shares 24 / 17 / 18); on every test
# 359 (plain chains 358): not taken.
OPT_CHAIN_SHARE = 0.3
VARIETY = "variety"  # the key that marks a variety draw's decision
# A chain is OPT_SEGMENTS segments, each an anchor op (always, past the first segment:
# fusion starts a new group there, so each segment is a fused pattern of its own; the
# first, OPT_ANCHORED of the time) and OPT_SEGMENT_LEN elementwise ops (drawn uniformly).
# One segment of 2-4 ops (v3, OPT_CHAIN_SHARE 0.3): 0.98 and 1.17 new fused patterns per
# chain test in two 300-test campaigns, random tests 0.82 and 0.80.
OPT_SEGMENTS = 2
OPT_SEGMENT_LEN = (1, 3)
OPT_ANCHORED = 0.5
# What fusion passes fuse (TVM's FuseOps: an out-elementwise-fusable anchor and the
# elementwise/injective ops after it; ONNX Runtime's Conv/MatMul/Gemm + activation and
# elementwise fusions): a chain's anchor, and its further ops. In a first version drawn
# from every op, chains were mostly ops TVM does not import or fuse: fewer patterns than
# random (64 against 84 distinct after 70 tests of seed 9100).
FUSION_ANCHORS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
FUSION_ELEMENTWISE = (
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Reciprocal", "Sqrt", "Exp", "Log", "Abs",
    "Max", "Min", "Sum", "Mean", "Erf", "PRelu", "Cast", *blocks.ACTIVATIONS,
)  # fmt: skip
OPT_DECAY = 0.995  # per test, the weight an arm's record keeps (half-life ~140 tests)
OPT_EXPLORE = 0.25  # the bandit's draws that take any arm alike


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
    on it (``(backend, kind, name)``, from their ``optimizations`` feedback), each in its
    kind's slot (``OPT_KIND_SLOT``; any other kind, such as TVM's passes: ``OPT_PASS``),
    and the bug families (``judge.signature.family``) of its ``(backend, signature)``
    failures: a signature of a family found already (one bug through another op) is no
    new bug, so it earns nothing."""
    keys = array("I")
    for backend, kind, name in sorted(set(fired)):
        slot = OPT_KIND_SLOT.get(kind, OPT_PASS)
        keys.append((slot << 30) | (key_digest(f"opt|{backend}|{kind}|{name}") & _LOW))
    for fam in sorted({f"{backend}|{family(sig)}" for backend, sig in signatures}):
        keys.append((SIGNATURE << 30) | (zlib.crc32(f"family|{fam}".encode()) & _LOW))
    return keys.tobytes()


def optimization_reward(new: list[int]) -> float:
    """``--guide optcov``'s reward in [0, 1] from what no earlier test made fire: fused
    patterns, rewrites (an unfired transformer or rule counts twice: they are few and
    rare), passes (half), up to 2 in all; and a new bug family; half each."""
    coverage = new[OPT_FUSED] + 2 * new[OPT_REWRITE] + 0.5 * new[OPT_PASS]
    return 0.5 * min(1.0, coverage / 2) + 0.5 * min(1.0, float(new[SIGNATURE]))


class Recent:
    """A bandit whose memory fades: per arm (an op or block action), the rewards of the
    tests that used it and how many there were, both discounted by ``decay`` per test
    applied since; likewise over all tests (their mean reward ``m``). An arm's weight is
    its discounted mean with one pseudo-test at ``m`` (an untried arm: ``m``; one that
    paid above the others' recent mean: more); a draw takes an arm in proportion to its
    weight, or (``explore`` of the draws, and while nothing has paid) uniformly. So an arm
    whose new patterns dried up falls back within a few hundred tests, one that paid
    recently is drawn often, and every arm stays reachable. Plain data: the same rewards
    in the same order give the same draws."""

    def __init__(
        self, arms: Iterable[str], decay: float = OPT_DECAY, explore: float = OPT_EXPLORE
    ) -> None:
        self.arms = list(arms)
        self.decay = decay
        self.explore = explore
        self.step = 0  # tests applied
        self._w = dict.fromkeys(self.arms, 0.0)
        self._n = dict.fromkeys(self.arms, 0.0)
        self._at = dict.fromkeys(self.arms, 0)  # the step of each arm's last update
        self._all_w = self._all_n = 0.0  # over every test

    def _fade(self, a: str) -> None:
        k = self.decay ** (self.step - self._at[a])
        self._w[a] *= k
        self._n[a] *= k
        self._at[a] = self.step

    def mean(self) -> float:
        """The discounted mean reward of every test."""
        return self._all_w / self._all_n if self._all_n else 0.0

    def weight(self, a: str) -> float:
        self._fade(a)
        return (self._w[a] + self.mean()) / (self._n[a] + 1.0)

    def draw(self, rng: random.Random, among: list[str] | None = None) -> str:
        arms = self.arms if among is None else among
        weights = [self.weight(a) for a in arms]
        total = sum(weights)
        if rng.random() < self.explore or total <= 0:
            return arms[rng.randrange(len(arms))]
        x = rng.random() * total
        for a, w in zip(arms, weights, strict=True):
            x -= w
            if x < 0:
                return a
        return arms[-1]

    def reward(self, used: Iterable[str], r: float) -> None:
        """One test applied: ``r`` to each arm it used (once each)."""
        self.step += 1
        self._all_w = self._all_w * self.decay + r
        self._all_n = self._all_n * self.decay + 1.0
        for a in sorted(set(used)):
            if a in self._w:
                self._fade(a)
                self._w[a] += r
                self._n[a] += 1.0


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
        uct = mode == "mcts" or (mode == "frontier" and FRONTIER_REST == "mcts")
        self.tree = Uct(guided.actions) if uct else None
        self.bandit = Recent(guided.actions) if mode == "optcov" else None
        acts = set(guided.actions)
        self._anchors = [OP_ACTION + op for op in FUSION_ANCHORS if OP_ACTION + op in acts]
        self._elementwise = [
            OP_ACTION + op for op in dict.fromkeys(FUSION_ELEMENTWISE) if OP_ACTION + op in acts
        ]
        self._blocks = [a for a in guided.actions if a.startswith(BLOCK_ACTION)]
        # how often variety draws forced each op so far (their next: one of the fewest)
        self._variety = dict.fromkeys((a for a in guided.actions if a.startswith(OP_ACTION)), 0)
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
                if d is not None and d.get(VARIETY):  # replayed ones count too (--resume)
                    a = d["path"][0]  # its op (a chain may follow)
                    self._variety[a] = self._variety.get(a, 0) + 1
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
        if self.bandit is not None:
            return self._optcov(rng)
        if self.tree is None:
            return None
        if self.pool and rng.random() < self.mutants:
            parent_id, parent = self.pool[rng.randrange(len(self.pool))]
            if depth(parent) < MAX_LINEAGE:
                return {"of": [self.seed + parent_id, parent]}
        return {"path": self.tree.select(rng)}

    def _optcov(self, rng: random.Random) -> Decision:
        """A mutant of a test that found new optimization coverage, a variety draw (one op
        among those variety draws forced least, the rest of the model random), a fusable
        chain (of ``OPT_SEGMENTS`` segments: an anchor, then elementwise ops), or two blocks
        (ops where the run has none), each chain op and block drawn by ``Recent`` (the
        module's docstring)."""
        assert self.bandit is not None
        x = rng.random()
        if self.pool and x < OPT_MUTANT_SHARE:
            parent_id, parent = self.pool[rng.randrange(len(self.pool))]
            if depth(parent) < MAX_LINEAGE:
                return {"of": [self.seed + parent_id, parent]}
        x -= OPT_MUTANT_SHARE
        if 0 <= x < OPT_VARIETY_SHARE and self._variety:
            fewest = min(self._variety.values())
            least = [a for a, n in self._variety.items() if n == fewest]
            path = [least[rng.randrange(len(least))]]
            if self._elementwise and rng.random() < OPT_VARIETY_CHAINED:
                path.append(self._chain(rng))
            return {"path": path, VARIETY: True}
        if 0 <= x - OPT_VARIETY_SHARE < OPT_CHAIN_SHARE and self._elementwise:
            return {"path": [self._chain(rng)]}
        among = self._blocks or None
        return {"path": [self.bandit.draw(rng, among) for _ in range(2)]}

    def _chain(self, rng: random.Random) -> str:
        """A fusable chain's action: ``OPT_SEGMENTS`` segments, each an anchor (past the
        first; the first ``OPT_ANCHORED`` of the time) and elementwise ops, each drawn by
        the bandit."""
        assert self.bandit is not None
        arms = []
        for segment in range(OPT_SEGMENTS):
            if self._anchors and (segment or rng.random() < OPT_ANCHORED):
                arms.append(self.bandit.draw(rng, self._anchors))
            n = rng.randint(*OPT_SEGMENT_LEN)
            arms.extend(self.bandit.draw(rng, self._elementwise) for _ in range(n))
        return chain_action([a[len(OP_ACTION) :] for a in arms])

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
            if self.bandit is not None:
                self.bandit.reward(_arms(d), r)
                # the seeds kept: a test that made an optimization fire first, or failed anew
                if new[OPT_FUSED] or new[OPT_REWRITE] or new[SIGNATURE]:
                    self.pool.append((j, d))
            elif new[TRIPLE] or new[SIGNATURE]:  # it added coverage (instances nearly all do)
                self.pool.append((j, d))
            if new[SIGNATURE] and d is not None and self.mode == "frontier":
                for a in d.get("path", ()):
                    if a.startswith(CHAIN_ACTION):
                        self.hot.append(a[len(CHAIN_ACTION) :].split(CHAIN_SEP))
            self._applied += 1


def _uct_path(d: Decision) -> bool:
    """Whether ``d`` is a path the tree search chose (not a chain, a mutant, a seed)."""
    return d is not None and "path" in d and not d["path"][0].startswith(CHAIN_ACTION)


def _arms(d: Decision) -> list[str]:
    """The bandit arms a decision used: its path's ops and blocks, a chain's ops (a mutant
    or a seed model: none, its coverage is its parent's lineage's)."""
    if d is None or "path" not in d:
        return []
    arms: list[str] = []
    for a in d["path"]:
        if a.startswith(CHAIN_ACTION):
            arms.extend(OP_ACTION + op for op in a[len(CHAIN_ACTION) :].split(CHAIN_SEP))
        else:
            arms.append(a)
    return arms


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
