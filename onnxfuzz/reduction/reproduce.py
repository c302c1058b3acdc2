"""Does a candidate still fail the same way?"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np
import onnx

from onnxfuzz.assess import Assessed, assess
from onnxfuzz.localize import expose_all
from onnxfuzz.oracle import OracleConfig
from onnxfuzz.sandbox import OK, Outcome, Worker


@dataclass
class Target:
    """The failure to preserve: ``backend``'s exact ``signature`` against ``reference``, or
    (``match``) any failure of ``backend`` whose signature or message matches a regex."""

    backend: str
    reference: str
    signature: str | None = None
    match: re.Pattern[str] | None = None


@dataclass
class Reproducer:
    workers: dict[str, Worker]  # the reference's and the backend's
    target: Target
    cfg: OracleConfig = field(default_factory=OracleConfig)
    runs: int = 0
    seconds: float = 0.0

    def run_all(self, data: bytes, inputs: dict[str, np.ndarray]) -> dict[str, Outcome]:
        sent = {label: w.submit(data, inputs) for label, w in self.workers.items()}
        return {
            label: failed if failed is not None else self.workers[label].collect()
            for label, failed in sent.items()
        }

    def assess(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> Assessed:
        t0 = time.perf_counter()
        self.runs += 1
        outcomes = self.run_all(model.SerializeToString(), inputs)
        a = assess(
            model,
            inputs,
            outcomes,
            self.target.reference,
            self.cfg,
            lambda data: self.run_all(data, inputs),
            lambda label, data, feeds: self.workers[label].execute(data, feeds),
        )[self.target.backend]
        self.seconds += time.perf_counter() - t0
        return a

    def __call__(self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> bool:
        a = self.assess(model, inputs)
        if a.signature is None:
            return False
        if self.target.match is not None:
            return bool(self.target.match.search(f"{a.signature}\n{a.verdict.message}"))
        return a.signature == self.target.signature

    def reference_values(
        self, model: onnx.ModelProto, inputs: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray] | None:
        """Every tensor's value on the reference backend (to stand in for removed nodes)."""
        out = self.workers[self.target.reference].execute(
            expose_all(model).SerializeToString(), inputs
        )
        if out.status != OK or out.outputs is None:
            return None
        return {**inputs, **out.outputs}
