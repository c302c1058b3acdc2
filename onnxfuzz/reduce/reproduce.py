"""Does a candidate still fail the same way?"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np
import onnx

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Outcome, Status
from onnxfuzz.judge.judge import Assessed, Judge
from onnxfuzz.judge.localize import expose_all
from onnxfuzz.judge.oracle import OracleConfig
from onnxfuzz.judge.signature import family


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


@dataclass
class Reproducer:
    pool: BackendPool  # runs the reference and the backend (others it holds are left idle)
    target: Target
    cfg: OracleConfig = field(default_factory=OracleConfig)
    runs: int = 0
    seconds: float = 0.0

    @property
    def judge(self) -> Judge:
        return Judge(self.target.reference, self.cfg, self.pool)

    def run_all(self, data: bytes, inputs: dict[str, np.ndarray]) -> dict[str, Outcome]:
        return self.pool.run_all(data, inputs, only=(self.target.reference, self.target.backend))

    def assess(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Assessed:
        return self.run(model, inputs)[0]

    def run(
        self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]
    ) -> tuple[Assessed, dict[str, Outcome]]:
        """The backend's assessment, and the outcomes of both backends it was made from."""
        t0 = time.perf_counter()
        self.runs += 1
        outcomes = self.run_all(model.SerializeToString(), inputs)
        a = self.judge.assess(model, inputs, outcomes)[self.target.backend]
        self.seconds += time.perf_counter() - t0
        return a, outcomes

    def __call__(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> bool:
        """Whether the model shows the target's failure (at least once in its attempts)."""
        return any(self.matches(self.assess(model, inputs)) for _ in range(self.target.attempts))

    def matches(self, a: Assessed) -> bool:
        """Whether an assessment shows the target's failure."""
        if a.signature is None:
            return False
        if self.target.match is not None:
            return bool(self.target.match.search(f"{a.signature}\n{a.judgement.message}"))
        if self.target.attempts > 1 and self.target.signature is not None:
            return family(a.signature) == family(self.target.signature)
        return a.signature == self.target.signature

    def reference_values(
        self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray] | None:
        """Every tensor's value on the reference backend (to stand in for removed nodes)."""
        out = self.pool.run_one(
            self.target.reference, expose_all(model).SerializeToString(), inputs
        )
        if out.status != Status.OK or out.outputs is None:
            return None
        return {**inputs, **out.outputs}
