"""Does a candidate still fail the same way?"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx

from onnxfuzz.execute.messages import Test
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.attribution import known_if_disputed, known_if_documented
from onnxfuzz.judge.judge import Assessed, Judge
from onnxfuzz.judge.localize import exposures
from onnxfuzz.judge.oracle import OracleConfig, Verdict
from onnxfuzz.judge.signature import blamed_op, family, root_signature, same_fault
from onnxfuzz.reduce.measure import value_bytes

# A state-dependent finding's candidate runs in a fresh process of its own (after the
# earlier models): one to two seconds each. The reduction keeps its time budget and tries
# no candidate once this many processes have started (localizing a candidate's mismatch
# may start a few more: at most one candidate's worth past it).
STATE_PROCESSES = 48

# A hang's per-try time limit while reducing it: a few times what the reference took on
# the model, at least the floor (seconds), never past the hang's own --timeout.
HANG_TRY_FLOOR, HANG_TRY_FACTOR = 2.0, 4.0


def hang_try_limit(reference_s: float, timeout: float) -> float:
    """The per-candidate limit reducing a hang (or a memory blow-up) of a model the
    reference ran in ``reference_s`` seconds, under ``timeout``: each candidate that still
    hangs costs seconds, not the whole ``timeout``."""
    return min(timeout, max(HANG_TRY_FLOOR, HANG_TRY_FACTOR * reference_s))


CONTAINERS = frozenset({"If", "Loop", "Scan"})  # ops whose bodies hold ops of their own


@dataclass
class Target:
    """The failure to preserve: ``backend``'s exact ``signature`` against ``reference``, or
    (``match``) any failure of ``backend`` whose signature or message matches a regex.

    An intermittent failure (``attempts`` > 1) is kept when it shows at least once in
    ``attempts`` runs, and by its signature's family (``judge.signature.family``): where a
    flaky kernel's wrong value is localized depends on the run."""

    backend: str
    reference: str
    signature: str | None = None
    match: re.Pattern[str] | None = None
    attempts: int = 1
    # A failure that shows only after earlier models in the same process (a stale compile
    # cache; ``onnxfuzz.run.confirm``): each candidate runs on ``backend`` in a fresh
    # process after these, so that neither the campaign's worker nor an earlier candidate
    # leaves state behind that makes a candidate fail.
    earlier: Sequence[Test] = ()


@dataclass
class AfterEarlier:
    """A runner (``judge.judge.Runner``) whose ``backend`` runs each model in a new process
    after the ``earlier`` models; every other backend runs in ``pool``'s workers."""

    pool: BackendPool
    backend: str
    earlier: Sequence[Test]
    processes: int = 0  # fresh processes started

    def run_one(self, label: str, model_bytes: bytes, inputs: dict[str, np.ndarray]) -> Outcome:
        if label != self.backend:
            return self.pool.run_one(label, model_bytes, inputs)
        self.processes += 1
        return self.pool.fresh_runs(label, model_bytes, inputs, 1, self.earlier)[0]

    def run_all(
        self,
        model_bytes: bytes,
        inputs: dict[str, np.ndarray],
        only: Iterable[str] | None = None,
    ) -> dict[str, Outcome]:
        labels = self.pool.labels if only is None else list(dict.fromkeys(only))
        return {label: self.run_one(label, model_bytes, inputs) for label in labels}


@dataclass
class Reproducer:
    pool: BackendPool  # runs the reference and the backend (others it holds are left idle)
    target: Target
    cfg: OracleConfig = field(default_factory=OracleConfig)
    runs: int = 0
    seconds: float = 0.0
    fresh: AfterEarlier | None = None  # the target's runner when it has earlier models
    # a deterministic target's verdict per candidate (``_key``): a candidate made twice
    # runs once (remember=False: every time; tools/bench_reduce_strategy.py's reference)
    remember: bool = True
    verdicts: dict[bytes, bool] = field(default_factory=dict)
    # A deterministic target whose failure the backend's importer raises (``at_import``,
    # set by ``check_at_import``) has its candidates checked by the import alone
    # (``Test.frontend``): one that imports cleanly no longer fails, and is not built and
    # run for nothing (use_frontend=False: never; tools/bench_reduce_strategy.py's reference)
    use_frontend: bool = True
    at_import: bool = False
    frontend_runs: int = 0
    # what the last run that showed the target's failure said (the reduction tries the
    # node it names alone: ``reduce.suspects``)
    last_message: str = ""
    _asked: bool = False
    # the op types inside the control-flow bodies of the model reduced (``learn_bodies``):
    # a wrong value blamed on an If, Loop or Scan node is one of theirs
    body_ops: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.target.earlier:
            self.fresh = AfterEarlier(self.pool, self.target.backend, self.target.earlier)

    @property
    def judge(self) -> Judge:
        return Judge(self.target.reference, self.cfg, self.fresh or self.pool)

    @property
    def deterministic(self) -> bool:
        """Whether a candidate's verdict is the same on every run: not an intermittent
        target's, nor a state-dependent one's (each run in a fresh process after others)."""
        return self.target.attempts == 1 and self.fresh is None

    @property
    def hang(self) -> bool:
        """Whether the failure kept is a hang (a timeout): each candidate that still shows
        it costs the per-candidate limit (``graph_passes.cut_at_tensors``)."""
        sig = self.target.signature
        return sig is not None and sig.split("|", 3)[1:2] == [str(Verdict.TIMEOUT)]

    @property
    def spent(self) -> bool:
        """Whether a state-dependent target has used up its fresh processes."""
        return self.fresh is not None and self.fresh.processes >= STATE_PROCESSES

    def run_all(self, data: bytes, inputs: dict[str, np.ndarray]) -> dict[str, Outcome]:
        runner = self.fresh or self.pool
        return runner.run_all(data, inputs, only=(self.target.reference, self.target.backend))

    def assess(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Assessed:
        return self.run(model, inputs)[0]

    def run(
        self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]
    ) -> tuple[Assessed, dict[str, Outcome]]:
        """The backend's assessment, and the outcomes of both backends it was made from."""
        t0 = time.perf_counter()
        self.runs += 1
        outcomes = self.run_all(model.SerializeToString(), inputs)
        label = self.target.backend
        a = self.judge.assess(model, inputs, outcomes)[label]
        a = known_if_disputed(model, known_if_documented(model, label, a))
        self.seconds += time.perf_counter() - t0
        if self.matches(a):
            self.last_message = a.judgement.message
        return a, outcomes

    def __call__(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> bool:
        """Whether the model shows the target's failure (at least once in its attempts);
        False, untried, once a state-dependent target's fresh processes are spent."""
        if self.spent:
            return False
        if not self.deterministic or not self.remember:
            attempts = self.target.attempts
            return any(self.matches(self.assess(model, inputs)) for _ in range(attempts))
        key = self._key(model, inputs)
        verdict = self.verdicts.get(key)
        if verdict is None:
            if self.at_import:
                a = self._at_import(model, inputs)
                verdict = a is not None and self.matches(a)
            else:
                verdict = self.matches(self.assess(model, inputs))
            self.verdicts[key] = verdict
        return verdict

    def message(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> str:
        """What the target's failure said the last time a run showed it; before any has,
        what ``model``'s run says, if it shows it (one run, asked once)."""
        if not self.last_message and not self._asked:
            self._asked = True
            self.assess(model, inputs)
        return self.last_message

    def check_at_import(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> bool:
        """Whether ``model`` fails as the target does at its backend's import alone: then
        (``at_import``) a deterministic target's candidates are checked so. An adapter
        without the ``frontend`` hook runs the whole test for it: its failure counts
        only where its outcome is not a clean run (a mismatch never turns this on)."""
        self.at_import = False
        if not self.use_frontend or not self.deterministic or self.spent:
            return False
        a = self._at_import(model, inputs)
        self.at_import = a is not None and self.matches(a)
        return self.at_import

    def _at_import(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Assessed | None:
        """The target's assessment of its import of ``model`` (None: it imports cleanly),
        against the reference's whole run."""
        t0 = time.perf_counter()
        self.runs += 1
        self.frontend_runs += 1
        data = model.SerializeToString()
        backend, reference = self.target.backend, self.target.reference
        out = self.pool.run_one(backend, data, inputs, frontend=True)
        a = None
        if out.status != Status.OK:
            outcomes = {reference: self.pool.run_one(reference, data, inputs), backend: out}
            a = self.judge.assess(model, inputs, outcomes)[backend]
            if self.matches(a):
                self.last_message = a.judgement.message
        self.seconds += time.perf_counter() - t0
        return a

    def _key(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> bytes:
        """What a deterministic target's verdict depends on: the target, the model's bytes
        and the inputs (two passes, or two choice records, often make the same candidate)."""
        t = self.target
        h = hashlib.blake2b(repr((t.backend, t.reference, t.signature, t.match)).encode())
        h.update(model.SerializeToString())
        for name in sorted(inputs):
            x = np.ascontiguousarray(inputs[name])
            h.update(f"{name}:{x.dtype.str}:{x.shape}".encode())
            h.update(value_bytes(x))
        return h.digest()

    def matches(self, a: Assessed) -> bool:
        """Whether an assessment shows the target's failure."""
        if a.signature is None:
            return False
        if self.target.match is not None:
            return bool(self.target.match.search(f"{a.signature}\n{a.judgement.message}"))
        if self.target.attempts > 1 and self.target.signature is not None:
            return family(a.signature) == family(self.target.signature)
        if self.target.signature is None:
            return False
        # One op's wrong output is "values" past the tolerance and "precision" inside it,
        # and "shape" where its values decide its shape: a smaller model may move it
        # across (an Add off by 1 was kept beside a Sigmoid that held its error inside the
        # tolerance, where Add alone shows it past; a wrong NonZero kept a Slice after it).
        if same_fault(a.signature, self.target.signature):
            return True
        got, want = root_signature(a.signature), root_signature(self.target.signature)
        return got == want or self._from_body(got, want)

    def _from_body(self, got: str, want: str) -> bool:
        """Whether ``got`` is ``want``'s wrong value of an If, Loop or Scan node blamed on
        an op of its bodies instead: the localization stops at the container node, and the
        reduction's inlining or unrolling of it names the op inside (a wrong Softmax in an
        If's branch kept the If and both branches: "values in Softmax output" was not
        "values in If output")."""
        return (
            blamed_op(want) in CONTAINERS
            and blamed_op(got) in self.body_ops
            and got.rpartition(" in ")[0] == want.rpartition(" in ")[0]  # but for the op
        )

    def learn_bodies(self, model: onnx.ModelProto) -> None:
        """Note the op types inside ``model``'s control-flow bodies (``_from_body``)."""
        ops: set[str] = set()
        graphs = [
            a.g
            for n in model.graph.node
            if n.op_type in CONTAINERS
            for a in n.attribute
            if a.HasField("g")
        ]
        while graphs:
            g = graphs.pop()
            for n in g.node:
                ops.add(n.op_type)
                graphs += [a.g for a in n.attribute if a.HasField("g")]
        self.body_ops = frozenset(ops)

    def reference_values(
        self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray] | None:
        """Every tensor's value (to stand in for removed nodes): the reference's, or where
        it gives none, another backend's in the pool. The reference fails where it is the
        backend at fault (the campaign's reference crashing, outvoted by the others), and
        without values no node could be replaced by an input or a constant."""
        at_fault = self.target.backend
        others = [b for b in (self.target.reference, *self.pool.labels) if b != at_fault]
        for probe in exposures(model):
            data = probe.SerializeToString()
            for label in dict.fromkeys([*others, at_fault]):  # the culprit's values come last
                out = self.pool.run_one(label, data, inputs)
                if out.status == Status.OK and out.outputs is not None:
                    return {**inputs, **out.outputs}
        return None
