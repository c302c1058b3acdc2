"""Which tests ask a backend for optimization feedback (``ort:feedback=new``, the default).

ORT names the transformers that modified a graph only in its INFO session log, and
formatting that log costs 25-50 % of a small model's session creation; the rule attribution
adds sessions. Asking on every test cost +65 % of ORT's CPU time on 1-10-node models. The
guide's signal is *new* coverage only (repeated coverage earns nothing), so a test is asked
when its model could show something new:

- it holds what an optimizer that has not fired yet needs (the adapter's table,
  ``feedback_needs``: an op type or an edge producer -> consumer per transformer or rule,
  ``feedback_tokens`` says what a model holds): the first ``FIRST`` such models ask, then
  ever fewer - the m-th one with a chance of about ``FIRST / m`` (a hash of the seed, the
  test and the optimizer), so ``FIRST * (1 + ln(m / FIRST))`` ask in all: a pattern that
  never fires here (or fires on few of the models holding it) is still sought for ever,
  at a cost that grows with the logarithm of the tests;
- or it is in the sample: the first ``WARMUP`` tests (no result is in yet: a short campaign
  still sees what its models fire), then one test in ``SAMPLE``, by a hash of the campaign
  seed and the test number (what no table names: the generic transformers, a pattern the
  table misses).

Determinism: test ``i`` is decided from its own model and the results of the tests below
``i - LAG`` (``ready`` says when those are in; with one lane they always are). Under
``--guide optcov``, where the answers steer generation, a lane waits for them, so however
lanes interleave the same tests ask; elsewhere it does not wait (``CampaignFeedback``),
and with several lanes which tests ask may vary with timing, never which models run.
On ``--resume`` the first test of each optimizer that fired is read back from campaign.db;
the counts of models holding an unfired one's needs start again (a resumed campaign asks a
few more tests than one run straight through).
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections.abc import Iterable, Mapping

Token = str | tuple[str, str]  # an op type, or an edge producer -> consumer
Need = Token | frozenset[Token]  # a token, or several all needed

LAG = 16  # test i is decided from the results of the tests below i - LAG
SAMPLE = 64  # one test in SAMPLE asks whatever its model holds
WARMUP = 16  # the first tests ask whatever their models hold (a short campaign sees coverage)
FIRST = 8  # models holding an unfired optimizer's needs that ask before the back-off


class FeedbackPolicy:
    """One backend's policy: ``wants(i, tokens)`` before test ``i`` starts, ``report(i,
    ...)`` once its feedback (if any) is in."""

    def __init__(
        self,
        seed: int,
        needs: Mapping[str, Iterable[Need]],
        sample: int = SAMPLE,
        lag: int = LAG,
        first: int = FIRST,
        warmup: int = WARMUP,
    ) -> None:
        self.seed = seed
        self.needs = {name: frozenset(n) for name, n in needs.items()}
        # per name: the one-token alternatives (one set test) and the all-needed ones
        self._single = {
            n: frozenset(a for a in alts if not isinstance(a, frozenset))
            for n, alts in self.needs.items()
        }
        self._joint = {
            n: [a for a in alts if isinstance(a, frozenset)] for n, alts in self.needs.items()
        }
        self.sample = sample
        self.lag = lag
        self.first = first
        self.warmup = warmup
        self._fired_at: dict[str, int] = {}  # name -> the first test it fired on
        # name -> the tests whose models held its needs (sorted; until it fired)
        self._held: dict[str, list[int]] = {}
        self._reported: set[int] = set()
        self._below = 0  # every test below this is reported
        self._cond = threading.Condition()

    # --- deciding ------------------------------------------------------------------
    def _draw(self, i: int, n: int, name: str = "") -> bool:
        """A one-in-``n`` draw of test ``i`` (for ``name``): a function of the seed, ``i``
        and ``name`` only."""
        h = hashlib.blake2b(f"{self.seed}:{i}:{name}".encode(), digest_size=8).digest()
        return int.from_bytes(h, "little") % n == 0

    def sampled(self, i: int) -> bool:
        """Is test ``i`` in the sample (one of the first ``warmup``, or one in ``sample``)?"""
        return i < self.warmup or self._draw(i, self.sample)

    def sought(self, i: int, tokens: set[Token]) -> list[str]:
        """The optimizers test ``i``'s model (holding ``tokens``) could fire for the
        first time, as the results below ``i - LAG`` stand."""
        cutoff = i - self.lag
        out = []
        for name in self.needs:
            if not self._holds(name, tokens):
                continue
            first = self._fired_at.get(name)
            if first is not None and first < cutoff:
                continue
            held = bisect.bisect_left(self._held.get(name, []), cutoff)
            if held < self.first or self._draw(i, held // self.first + 1, name):
                out.append(name)
        return out

    def _holds(self, name: str, tokens: set[Token]) -> bool:
        """Does a model holding ``tokens`` hold one of ``name``'s alternatives?"""
        return bool(self._single[name] & tokens) or any(a <= tokens for a in self._joint[name])

    def wants(self, i: int, tokens: set[Token]) -> bool:
        """Should test ``i`` (its model holding ``tokens``) ask for feedback?"""
        with self._cond:
            return self.sampled(i) or bool(self.sought(i, tokens))

    # --- learning ------------------------------------------------------------------
    def report(self, i: int, asked: bool, tokens: set[Token], fired: Iterable[str]) -> None:
        """Test ``i``'s result: was it asked, what its model held, what fired on it."""
        with self._cond:
            if asked:
                for name in fired:
                    if name in self.needs and i < self._fired_at.get(name, i + 1):
                        self._fired_at[name] = i
            for name in self.needs:
                if name not in self._fired_at and self._holds(name, tokens):
                    bisect.insort(self._held.setdefault(name, []), i)
            self._reported.add(i)
            while self._below in self._reported:
                self._reported.discard(self._below)
                self._below += 1
            self._cond.notify_all()

    def resume(self, first_fired: Mapping[str, int], done: Iterable[int]) -> None:
        """A resumed campaign: the first test each optimizer fired on, the tests stored."""
        with self._cond:
            for name, first in first_fired.items():
                if name in self.needs:
                    self._fired_at[name] = first
        for i in done:
            self.report(i, False, set(), ())

    # --- several lanes ---------------------------------------------------------------
    def ready(self, i: int) -> bool:
        """Are the results of every test below ``i - LAG`` in?"""
        with self._cond:
            return self._below >= i - self.lag

    def wait(self, i: int, timeout: float) -> bool:
        """Wait until ``ready(i)`` or ``timeout`` seconds pass (another lane holds a test
        that long: then test ``i`` is decided from what is in); True when ready."""
        with self._cond:
            return self._cond.wait_for(lambda: self._below >= i - self.lag, timeout)


# --- a campaign's backends ----------------------------------------------------------------
ON_REQUEST = {"ort", "ort-cuda"}  # the adapters whose ``feedback=new`` takes requests
WAIT_S = 30.0  # how long a lane waits for another's results before deciding without them


def _policy_of(label: str, seed: int) -> FeedbackPolicy | None:
    """``label``'s policy, or None where it gives feedback on every test (another adapter,
    ``feedback=all``/``1``/``0``, ``isolate=1``)."""
    from onnxfuzz.backend import parse_backend
    from onnxfuzz.backends.ort import feedback_needs

    ref = parse_backend(label)
    o = ref.options
    if ref.target not in ON_REQUEST or o.get("feedback", "new") != "new" or o.get("isolate") == "1":
        return None
    disabled = set(filter(None, o.get("disable", "").split("+")))
    # At opt=none only the always-on float16 housekeeping runs: nothing to seek.
    table = {} if o.get("opt") == "none" else feedback_needs()
    return FeedbackPolicy(seed, {k: v for k, v in table.items() if k not in disabled})


class CampaignFeedback:
    """The policies of a campaign's backends that take requests."""

    def __init__(self, labels: Iterable[str], seed: int, wait_s: float = 0.0) -> None:
        """``wait_s``: how long a lane waits for the results test ``i`` is decided from
        (``WAIT_S`` where the decisions steer generation: ``--guide optcov``, whose own wait
        has them in already). Elsewhere a lane never waits: it holds started tests, and
        lanes waiting on each other's would stall a many-worker campaign; with several
        lanes which tests ask then depends on timing (the models never do), with one it
        never does (its 2 tests in flight are well within ``LAG``)."""
        self.wait_s = wait_s
        labels = list(labels)
        self.policies = {
            label: p for label in labels if (p := _policy_of(label, seed)) is not None
        }
        self._always = {label for label in labels if label not in self.policies}
        self._tokens: dict[int, set[Token]] = {}  # what a started test's model holds
        self.asked = dict.fromkeys(self.policies, 0)  # tests that asked, per backend
        from onnxfuzz.backends.ort import feedback_tokens  # once, not per test

        self._tokens_of = feedback_tokens

    def __bool__(self) -> bool:
        return bool(self.policies)

    def decide(self, i: int, model_bytes: bytes) -> set[str]:
        """The labels that test ``i`` asks for feedback: those without a policy (an
        adapter of another's with ``want_feedback`` gives it on every test) and those whose
        policy wants it."""
        try:
            tokens, readable = self._tokens_of(model_bytes), True
        except Exception:  # noqa: BLE001 - an unreadable model: ask (it says why itself)
            tokens, readable = set(), False
        self._tokens[i] = tokens
        asked = set(self._always)
        for label, p in self.policies.items():
            if readable and self.wait_s and not p.ready(i):
                p.wait(i, self.wait_s)
            if not readable or p.wants(i, tokens):
                asked.add(label)
                self.asked[label] += 1
        return asked

    def report(self, i: int, asked: Iterable[str], fired: Mapping[str, Iterable[str]]) -> None:
        """Test ``i`` ended: the labels asked, and per label the names that fired."""
        tokens = self._tokens.pop(i, set())
        asked = set(asked)
        for label, p in self.policies.items():
            p.report(i, label in asked, tokens, fired.get(label, ()))

    def resume(self, rows: Iterable[tuple], done: Iterable[int]) -> None:
        """From campaign.db: ``Store.optimizations()`` rows and the tests stored."""
        rows, done = list(rows), list(done)
        for label, p in self.policies.items():
            first = {n: f for b, _, n, tests, f in rows if b == label and tests and f is not None}
            p.resume(first, done)
