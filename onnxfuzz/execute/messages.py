"""What a worker process and its parent say to each other (pickled over a socket pair).

Parent -> worker: a ``Test``, or ``None`` to leave. Worker -> parent: ``Ready`` or
``LoadError`` once at start (a fork server: ``Hello``), then ``Done`` or ``Failed`` for each
test, in the order the tests came (a parent may send the next test before the last one's
answer: it waits in the socket, and the worker goes on to it without waiting for the
parent).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onnxfuzz.backend import Feedback


@dataclass(frozen=True)
class Test:
    model_bytes: bytes
    inputs: dict[str, np.ndarray]
    seq: int = 0  # the worker marks it on the shared test clock when it begins the test
    # Whether the campaign wants optimization feedback on it from an adapter that takes
    # requests (``want_feedback``: ``onnxfuzz.run.feedback_policy``); others always give it.
    feedback: bool = True
    # Only the adapter's import (``Adapter.frontend``; a full test where it has none): a
    # reduction's candidate of a failure the importer raises. Done with no outputs.
    frontend: bool = False


@dataclass(frozen=True)
class Ready:
    name: str
    version: str
    opsets: tuple[int, int]
    unavailable: str | None  # why the backend cannot run on this machine
    preferred: int | None  # the opset where the adapter covers the most ops


@dataclass(frozen=True)
class LoadError:
    message: str


@dataclass(frozen=True)
class Done:
    outputs: dict[str, np.ndarray]
    compile_s: float
    run_s: float
    started: float  # time.perf_counter() when compile began (a system-wide clock)
    cpu_s: float  # the worker's CPU time in compile + run (all its threads)
    # What the backend's optimizer did (its ``optimizations`` hook; None: no hook), the
    # time the hook took, and why it failed (empty: it did not).
    optimizations: Feedback | None = None
    feedback_s: float = 0.0
    feedback_error: str = ""
    # The same compiled model run a second time on the same inputs: its outputs where they
    # are not bit-identical to the first run's (None: they are), the caller's input arrays
    # the first run changed, and the second run's time.
    second: dict[str, np.ndarray] | None = None
    inputs_changed: tuple[str, ...] = ()
    rerun_s: float = 0.0


@dataclass(frozen=True)
class Failed:
    stage: str
    unsupported: bool  # missing support for an op, dtype or opset: not a bug
    message: str
    trace: str
    compile_s: float
    run_s: float
    started: float
    cpu_s: float
    protocol: bool = False  # run() answered in a form the adapter protocol does not allow


@dataclass(frozen=True)
class Hello:
    """A fork server's first word (``onnxfuzz.execute.fork_server``): the backend's
    ``Ready`` (or its ``LoadError``), and why it will not fork (None: it will)."""

    loaded: Ready | LoadError
    unforkable: str | None
