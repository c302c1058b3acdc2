"""Backends run in persistent *spawned* worker processes (never forked from the campaign:
CUDA); a fresh process after the first may be forked from a fork server that loaded the
backend and never ran a model (``onnxfuzz.execute.zygote``), never from one that touched
CUDA.

A worker loads one adapter once and serves tests over a pipe. The parent enforces a
per-test timeout and a memory cap (resident set size, polled), and turns a segfault,
abort, hang, out-of-memory or exception into an ``Outcome`` with its stage (compile, run,
or rerun). A dead or killed worker is respawned for the next test: the campaign goes on.

Each compiled model runs twice on the same input arrays, as a user calls a session twice:
a second run that fails or differs from the first (a buffer reused without reset, a
kernel that wrote into the caller's input) is a bug no single run shows. It costs one run,
next to a compile that takes ten to a thousand times as long.

A worker may hold the next test while it runs one (``QUEUE_AHEAD``): it goes on to it the
moment it answers, without waiting for the parent to collect the answer and send more, so
the backend is not idle while the parent judges and stores. Each test is timed, capped and
blamed on its own: the shared test clock names the test the worker is on.

A crash's evidence (``Outcome.trace``) is what that test alone wrote to the worker's
stderr, led by the innermost frames of the crashing thread: the worker runs with
faulthandler on, and a library's own native backtrace is read too (``crashdump``).
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import onnx

from onnxfuzz.backend import (
    Adapter,
    BackendRef,
    Feedback,
    feedback_of,
    is_unsupported,
    load_adapter,
    parse_backend,
)
from onnxfuzz.errors import AdapterProtocolError, BackendError, OnnxFuzzError, UsageError
from onnxfuzz.execute import crashdump
from onnxfuzz.execute.messages import Done, Failed, LoadError, Ready, Test
from onnxfuzz.execute.zygote import ForkedProcess, Zygote

OUT_OF_MEMORY = "out of memory"  # how a crash for the memory cap begins
PICKUP_GRACE = 10.0  # seconds a worker may take to receive a test before its clock runs
QUEUE_AHEAD = 1  # tests a worker holds behind the one it runs
TRACE_FRAMES = 40  # a Python exception's innermost frames kept (its raise site last)
# A test larger than this waits for a free worker instead: the queued test and the answer
# to the running one would cross in the socket pair's buffers (about 200 KiB each way), and
# one that does not fit blocks its sender while the other side is blocked sending too.
QUEUE_BYTES = 32 * 1024
# What a worker remembers of the tests its process ran (model and inputs, pickled), so that
# a finding that fails only after earlier models (a stale compile cache) can be re-created
# in a fresh process: the most recent ``HISTORY_TESTS``, at most ``HISTORY_BYTES`` in all.
HISTORY_TESTS = 64
HISTORY_BYTES = 64 * 2**20
# Beyond those, the first ``FIRST_PER_INPUTS`` tests of each input signature (the inputs'
# names, element types and shapes) the process ran, and of each list of op types, at most
# ``FIRST_BYTES`` in all (the keys seen least recently go first): a compile cache keyed by
# the inputs (a TVM or TensorRT engine per shape), or by the graph's ops without their
# attributes, is filled by the first model of its key and returned, stale, to a later one
# thousands of tests on; the last 64 never held that first model, and every such finding
# was dropped as not reproducible (an audit's cache keyed by op types: 649 of 650).
FIRST_PER_INPUTS = 4
FIRST_BYTES = 32 * 2**20
EARLIER_MAX = 32  # the most recent earlier models of a process a confirmation replays
# How long a worker may take to load its adapter (the import, __init__, version(),
# available()): TVM's import takes several seconds, a CUDA start about 30 s, either more on
# a loaded machine; a hung start-up is one error at the limit, not a silent wait.
START_LIMIT_S = 300.0
START_LIMIT_ENV = "ONNXFUZZ_START_TIMEOUT"  # seconds, to set another limit
SLOW_START_S = 10.0  # a start-up this long is said on stderr (or at half the limit)...
SLOW_START_EVERY_S = 30.0  # ...and again this often
HUNG_FRAMES = 3  # of a hung start-up's Python stack, innermost first, in its error


class Status(StrEnum):
    """What a worker's handling of one test came to (the oracle turns it into a verdict)."""

    OK = "ok"
    ERROR = "error"  # the adapter raised
    UNSUPPORTED = "unsupported"  # the adapter raised for an op, dtype or opset it lacks
    CRASH = "crash"  # the worker died (signal, exit, out of memory)
    TIMEOUT = "timeout"


class Stage(StrEnum):
    COMPILE = "compile"
    RUN = "run"
    RERUN = "rerun"  # the same compiled model's second run on the same inputs


_STAGE_BYTES = (Stage.COMPILE, Stage.RUN, Stage.RERUN)  # the test clock's stage byte


@dataclass
class Outcome:
    status: Status
    stage: Stage | None = None
    outputs: dict[str, np.ndarray] | None = None
    message: str = ""
    trace: str = ""
    compile_s: float = 0.0
    run_s: float = 0.0
    started: float = 0.0  # time.perf_counter() when compile began (a system-wide clock)
    cpu_s: float = 0.0  # the worker's CPU time in compile + run (all its threads)
    # The adapter's optimization feedback (``Adapter.optimizations``): None where it has no
    # hook; the hook's own time (inside compile_s); why the hook failed (empty: it did not).
    optimizations: Feedback | None = None
    feedback_s: float = 0.0
    feedback_error: str = ""
    # The second run of the same compiled model (``serve``): its outputs where they are not
    # bit-identical to the first's (None: they are), the inputs the first run changed, its time.
    second: dict[str, np.ndarray] | None = None
    inputs_changed: tuple[str, ...] = ()
    rerun_s: float = 0.0

    @property
    def backend_s(self) -> float:
        return self.compile_s + self.run_s + self.rerun_s

    @property
    def too_costly(self) -> bool:
        """Past the time limit or the memory cap (not a failure of its own words)."""
        return self.status == Status.TIMEOUT or (
            self.status == Status.CRASH and self.message.startswith(OUT_OF_MEMORY)
        )


@dataclass
class BackendInfo:
    label: str
    name: str
    version: str
    opsets: tuple[int, int]
    available: str | None  # None, or why the backend cannot run here
    preferred: int | None = None  # the opset where the adapter covers the most ops


# The worker's clock for the test in flight, in a small file both processes map: the stage
# byte (0 compile, 1 run, 2 rerun), the test's number (``Test.seq``), when the worker began
# the test and its run (perf_counter, a system-wide monotonic clock) and where its stderr
# stood then.
# The parent reads it instead of a message per test: a timeout is measured from when the
# *worker* started, whatever the parent was doing, and a test queued behind another is
# not timed (nor blamed for a crash) until the worker is on it.
_CLOCK = struct.Struct("=B7xQddQ")
CLOCK_BYTES = _CLOCK.size


def start_limit() -> float:
    """Seconds a backend worker may take to start: ``$ONNXFUZZ_START_TIMEOUT``, else
    ``START_LIMIT_S``."""
    text = os.environ.get(START_LIMIT_ENV, "").strip()
    if not text:
        return START_LIMIT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise UsageError(
            f"{START_LIMIT_ENV}={text}: give the seconds a backend may take to start, "
            f"e.g. {START_LIMIT_ENV}=600 (default {START_LIMIT_S:.0f})"
        )
    return seconds


def _mark(clock: Any, stage: int, seq: int, began: float, run_began: float, err_at: int) -> None:
    _CLOCK.pack_into(clock, 0, stage, seq, began, run_began, err_at)


def _stderr_at() -> int:
    """In the worker: where its stderr stands (what earlier tests wrote is flushed)."""
    try:
        return os.fstat(2).st_size
    except OSError:
        return 0


def load(text: str) -> tuple[Adapter, Ready]:
    """The adapter of backend ``text``, loaded (its library imported), and what the worker
    tells its parent of it."""
    adapter = load_adapter(parse_backend(text))
    backend = adapter.backend

    def ask(hook: str, call: Any) -> Any:
        # a hook that raises is named with its adapter ("RuntimeError: device probe
        # exploded" named neither)
        try:
            return call()
        except OnnxFuzzError:
            raise  # ours already names the thing and the fix (openvino not installed)
        except Exception as e:  # noqa: BLE001 - any failure of the adapter's own code
            raise BackendError(f"adapter {text}: {hook}() raised {type(e).__name__}: {e}") from e

    return adapter, Ready(
        backend.name,
        str(ask("version", backend.version)),
        tuple(backend.supported_opsets()),
        ask("available", adapter.available) if adapter.available else None,
        ask("preferred_opset", adapter.preferred_opset) if adapter.preferred_opset else None,
    )


def load_error(e: BaseException) -> LoadError:
    # Our own errors already name the thing and the fix; others need their type.
    return LoadError(str(e) if isinstance(e, OnnxFuzzError) else f"{type(e).__name__}: {e}")


def serve(text: str, conn: Any, clock: Any = None) -> None:
    """Worker main loop (runs in the spawned process). ``clock``: the shared test clock
    (``_CLOCK``) the parent reads for timeouts and for the stage after a crash."""
    armed = crashdump.arm()  # a fatal signal leaves the stacks on stderr, for the parent
    try:
        adapter, ready = load(text)
        conn.send(ready)
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(load_error(e))
        return
    # The library is loaded now (its version and availability asked too): faulthandler goes
    # back in front of a fatal-signal handler the library installed, chaining to it.
    crashdump.rearm(armed)
    serve_loaded(adapter, conn, clock)


def serve_loaded(adapter: Adapter, conn: Any, clock: Any = None) -> None:
    """``serve``'s loop over tests, for an adapter loaded (in this process, or in the fork
    server this process was forked from: ``onnxfuzz.execute.zygote``)."""
    clock = clock if clock is not None else bytearray(CLOCK_BYTES)
    backend = adapter.backend
    import onnx

    # An adapter without supports() that can compile serialized bytes skips a parse here
    # and a serialization in the adapter.
    from_bytes = adapter.compile_bytes if adapter.supports is None else None
    while True:
        try:
            req = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if req is None:
            return
        stage = Stage.COMPILE
        seq = getattr(req, "seq", 0)
        err_at = _stderr_at()  # this test's evidence begins here (the parent reads it)
        t0 = time.perf_counter()
        _mark(clock, 0, seq, t0, 0.0, err_at)
        c0 = time.process_time()
        compile_s = 0.0
        # An adapter that takes requests makes its feedback only on the tests that want it.
        wanted = adapter.want_feedback is None or getattr(req, "feedback", True)
        try:
            if getattr(req, "frontend", False) and adapter.frontend is not None:
                adapter.frontend(onnx.load_from_string(req.model_bytes))
                _flush_stderr()
                elapsed = time.perf_counter() - t0
                cpu_s = time.process_time() - c0
                conn.send(Done({}, elapsed, 0.0, t0, cpu_s, None, 0.0, "", None, (), 0.0))
                continue
            if adapter.want_feedback is not None:
                adapter.want_feedback(wanted)
            if from_bytes is not None:
                exe = from_bytes(req.model_bytes)
            else:
                model = onnx.load_from_string(req.model_bytes)
                reason = _supports(adapter, model)
                if reason:
                    _flush_stderr()
                    conn.send(Failed(Stage.COMPILE, True, reason, "", 0.0, 0.0, t0, 0.0))
                    continue
                exe = backend.compile(model)
            feedback, feedback_s, feedback_error = (
                _feedback(adapter, exe) if wanted else (None, 0.0, "")
            )
            compile_s = time.perf_counter() - t0
            stage = Stage.RUN
            t1 = time.perf_counter()
            _mark(clock, 1, seq, t0, t1, err_at)
            pristine = {k: np.array(v, copy=True) for k, v in req.inputs.items()}
            outs = _outputs(backend.run(exe, req.inputs))
            run_s = time.perf_counter() - t1
            stage = Stage.RERUN
            t2 = time.perf_counter()
            _mark(clock, 2, seq, t0, t1, err_at)
            again = _outputs(backend.run(exe, req.inputs))
            rerun_s = time.perf_counter() - t2
            cpu_s = time.process_time() - c0
            changed = tuple(k for k, v in req.inputs.items() if not identical(pristine[k], v))
            second = None if same_outputs(outs, again) else again
            _flush_stderr()
            conn.send(
                Done(
                    outs,
                    compile_s,
                    run_s,
                    t0,
                    cpu_s,
                    feedback,
                    feedback_s,
                    feedback_error,
                    second,
                    changed,
                    rerun_s,
                )
            )
        except BaseException as e:  # noqa: BLE001 - every failure is a verdict
            if isinstance(e, KeyboardInterrupt):
                return
            elapsed = time.perf_counter() - t0
            _flush_stderr()
            # a model that ran once is supported: a second run's failure is a bug
            unsupported = False
            if stage != Stage.RERUN and not isinstance(e, AdapterProtocolError):
                try:
                    unsupported = is_unsupported(adapter, e)
                except Exception as hook:  # noqa: BLE001 - the adapter's hook, not the backend
                    # it killed the worker, and each test was filed as a crash of the backend
                    e = AdapterProtocolError(
                        f"is_unsupported() raised {type(hook).__name__}: {hook} (asked about "
                        f"{type(e).__name__}: {str(e)[:200]})"
                    )
            conn.send(
                Failed(
                    stage,
                    unsupported,
                    f"{type(e).__name__}: {e}",
                    # the innermost frames: where it was raised (a TVM error's own C++
                    # frames come last; the first 20 frames, kept until 2026-11-27, left
                    # them out of deep pass pipelines' traces)
                    traceback.format_exc(limit=-TRACE_FRAMES),
                    compile_s if stage != Stage.COMPILE else elapsed,  # a failed compile took time
                    elapsed - compile_s if stage != Stage.COMPILE else 0.0,
                    t0,
                    time.process_time() - c0,
                    protocol=isinstance(e, AdapterProtocolError),
                )
            )


def _supports(adapter: Any, model: Any) -> str | None:
    """The adapter's ``supports()`` answer: None, or why it does not take the model. A hook
    that raises, or answers with anything but a string or None, is the adapter's defect
    (``AdapterProtocolError``): a raise was filed as a compile crash of the backend, and
    an answer of 42 crashed the probe."""
    if adapter.supports is None:
        return None
    try:
        reason = adapter.supports(model)
    except Exception as e:  # noqa: BLE001 - any failure of the hook is the adapter's
        raise AdapterProtocolError(f"supports() raised {type(e).__name__}: {e}") from None
    if reason is not None and not isinstance(reason, str):
        raise AdapterProtocolError(
            f"supports() returned {type(reason).__name__} ({reason!r}), not None (it takes "
            "the model) or a string (why it does not)"
        )
    return reason or None


def _outputs(outs: object) -> dict[str, np.ndarray]:
    """What ``run()`` returned, checked against the protocol, as arrays of our own (a copy:
    an adapter may hand out views of buffers its next run overwrites)."""
    problem = protocol_problem(outs)
    if problem is not None:
        raise AdapterProtocolError(problem)
    assert isinstance(outs, Mapping)
    return {k: np.array(_as_array(k, v), copy=True) for k, v in outs.items()}


def identical(a: np.ndarray, b: np.ndarray) -> bool:
    """Bit for bit the same dtype, shape and values (NaN equal to NaN)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind in "fc":
        return bool(np.array_equal(a, b, equal_nan=True))
    if a.dtype.kind in "biu":
        return bool(np.array_equal(a, b))
    # bfloat16, float8, strings, objects: compare what they hold
    return a.tobytes() == b.tobytes() if a.dtype.kind == "V" else bool((a == b).all())


def same_outputs(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(identical(a[k], b[k]) for k in a)


def _as_array(name: str, value: object) -> np.ndarray:
    """An output as one array; a list of arrays of different shapes (a ragged sequence, or
    a sequence given where the graph declares a tensor) fails in words, not numpy's
    ("inhomogeneous shape after 5 dimensions")."""
    try:
        return np.asarray(value)
    except ValueError:
        if not isinstance(value, list | tuple):
            raise
        shapes = [list(x.shape) if hasattr(x, "shape") else type(x).__name__ for x in value[:4]]
        raise ValueError(
            f"output {name!r} is a list of {len(value)} arrays of different shapes "
            f"({', '.join(map(str, shapes))}{' ...' if len(value) > 4 else ''}), not one array"
        ) from None


def protocol_problem(outs: object) -> str | None:
    """Why what an adapter's ``run()`` returned is not what the protocol asks for (a dict
    of graph output name -> numpy array, anything ``np.asarray`` makes a numeric or string
    array of, or a list of them for a sequence output), or None when it is."""
    if not isinstance(outs, Mapping):
        return f"run() returned {type(outs).__name__}, not a dict of output name -> numpy array"
    for name, value in outs.items():
        if not isinstance(name, str):
            kind = type(name).__name__
            return f"run() returned a dict keyed by {kind} ({name!r}), not by output name"
        if value is None:
            return f"run()'s output {name!r} is None, not an array"
        kind = _python_number(value)
        if kind:
            # np.asarray would read it as float64 or int64: a float32 output was then filed
            # as the backend's wrong element type, each test a bug
            return (
                f"run()'s output {name!r} is {kind}, not a numpy array: its element type "
                "is lost (a Python float reads as float64); return np.asarray(value, dtype)"
            )
        if isinstance(value, list | tuple):
            continue  # a sequence output (a list of arrays), or a nested list: both allowed
        try:
            array = np.asarray(value)
        except Exception as e:  # noqa: BLE001 - odd objects numpy cannot read
            return f"run()'s output {name!r} is not an array ({type(e).__name__}: {e})"
        if array.dtype == object and not all(isinstance(x, str | bytes) for x in array.flat):
            kind = type(value).__name__
            return f"run()'s output {name!r} is a {kind}, not a numeric or string array"
    return None


def _python_number(value: object) -> str:
    """ "a Python float" where ``value`` is a Python number, "a list of Python floats" where it
    is a (nested) list or tuple of them, else "": none is an array of a declared element
    type (a sequence output is a list of arrays)."""
    leaf, nested = value, False
    while isinstance(leaf, list | tuple) and leaf:
        leaf, nested = leaf[0], True
    if isinstance(leaf, np.generic) or not isinstance(leaf, bool | int | float | complex):
        return ""
    kind = type(leaf).__name__
    return f"a {type(value).__name__} of Python {kind}s" if nested else f"a Python {kind}"


def _feedback(adapter: Any, exe: Any) -> tuple[Feedback | None, float, str]:
    """The adapter's optimization feedback on a compiled model, what it cost, and why it
    failed: a hook that raises or answers in the wrong shape costs the test nothing (the
    test goes on; the campaign warns once, naming the adapter)."""
    if adapter.optimizations is None:
        return None, 0.0, ""
    t = time.perf_counter()
    try:
        got = feedback_of(adapter.optimizations(exe))
    except Exception as e:  # noqa: BLE001 - an adapter's hook failing is reported, not fatal
        return None, time.perf_counter() - t, f"{type(e).__name__}: {e}"
    return got, time.perf_counter() - t, ""


def _flush_stderr() -> None:
    """Before a result goes to the parent: what this test printed is written before the
    parent marks where the next test's stderr begins (its evidence starts there)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stderr.flush()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process (Linux ``/proc``; 0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def busy_seconds(outcomes: list[Outcome]) -> float:
    """Wall time during which at least one backend compiled or ran: the union of the
    outcomes' [started, started + backend_s] intervals (they may overlap: backends run in
    parallel)."""
    spans = sorted((o.started, o.started + o.backend_s) for o in outcomes if o.backend_s > 0)
    total, end = 0.0, float("-inf")
    for a, b in spans:
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def spawn(module: str, args: list[str], fds: tuple[int, ...] = (), stderr: Any = None) -> tuple:
    """``python -m module FD *args`` in a new session (never forked), talking over a
    socket pair whose far end is FD; ``fds`` are passed on too. Returns (process, conn)."""
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", module, str(theirs.fileno()), *args],
        pass_fds=(theirs.fileno(), *fds),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        start_new_session=True,
    )
    theirs.close()
    return proc, Connection(ours.detach())


def kill(proc: Any, conn: Any) -> None:
    """End a spawned process at once and close its connection (either may be None)."""
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)
    if conn is not None:
        conn.close()


def stop(proc: Any, conn: Any) -> None:
    """Ask a spawned process to leave (``None`` on its connection), then make sure."""
    if proc is not None and proc.poll() is None and conn is not None:
        try:
            conn.send(None)
            proc.wait(2)
        except (OSError, subprocess.TimeoutExpired):
            pass
    kill(proc, conn)


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


_SEQ = itertools.count(1)  # test numbers, unique in this process (0: no test on a clock)


@dataclass(frozen=True)
class Packed:
    """A test as it crosses to a worker: pickled once for every worker that runs it."""

    seq: int
    data: bytes  # the pickled ``Test``
    inputs_key: str = ""  # its inputs' names, element types and shapes (``inputs_key``)
    ops_key: str = ""  # its graph's op types, in order (``ops_key``)


def ops_key(model_bytes: bytes) -> str:
    """What a compile cache keyed by a graph's ops, not their attributes, would key it by
    ("" where the bytes are no model: such a test has no key)."""
    try:
        graph = onnx.ModelProto.FromString(model_bytes).graph
    except Exception:  # noqa: BLE001 - a test of unreadable bytes is keyed by nothing
        return ""
    return ",".join(f"{n.domain}:{n.op_type}" if n.domain else n.op_type for n in graph.node)


def inputs_key(inputs: dict[str, np.ndarray]) -> str:
    """What a compile cache keyed by a model's inputs would key it by."""
    return ";".join(
        f"{k}:{getattr(v, 'dtype', '?')}{list(getattr(v, 'shape', ()))}"
        for k, v in sorted(inputs.items())
    )


def pack(
    model_bytes: bytes,
    inputs: dict[str, np.ndarray],
    feedback: bool = True,
    seq: int | None = None,
    frontend: bool = False,
) -> Packed:
    """A test pickled once for its workers (``seq``: the number of a test packed already,
    packed again with another ``feedback``; ``frontend``: ``Test.frontend``)."""
    seq = next(_SEQ) if seq is None else seq
    test = Test(model_bytes, inputs, seq, feedback, frontend)
    return Packed(seq, bytes(ForkingPickler.dumps(test)), inputs_key(inputs), ops_key(model_bytes))


@dataclass
class _Queued:
    """A test submitted to a worker and not yet collected."""

    seq: int
    data: bytes  # the pickled ``Test``
    since: float  # its pick-up clock: from its hand-over, or the answer to the test ahead
    sent: bool = False
    inputs_key: str = ""
    ops_key: str = ""


@dataclass
class Worker:
    """One backend in one persistent spawned process. Tests are collected in the order
    they were submitted; up to ``1 + QUEUE_AHEAD`` of them are in the worker at once."""

    ref: BackendRef
    timeout: float = 30.0
    memory_mb: float = 8192.0
    startup_timeout: float = field(default_factory=start_limit)
    info: BackendInfo | None = None
    _proc: Any = field(default=None, repr=False)
    _conn: Any = field(default=None, repr=False)
    restarts: int = 0
    starts: int = 0  # processes started so far: the one running now is number ``starts``
    _test_stderr: int = field(default=0, repr=False)  # stderr offset where the test began
    _queue: deque[_Queued] = field(default_factory=deque, repr=False)  # oldest first
    # the tests collected, oldest first: (test number, the process that ran it, the test,
    # its keys: inputs, ops)
    _ran: deque[tuple[int, int, bytes, tuple[str, ...]]] = field(default_factory=deque, repr=False)
    _ran_bytes: int = field(default=0, repr=False)
    # (process, "in"/"ops" key) -> the first FIRST_PER_INPUTS tests of that key it ran, as
    # (test number, the test); least recently seen keys first
    _first: OrderedDict[tuple[int, str], list[tuple[int, bytes]]] = field(
        default_factory=OrderedDict, repr=False
    )
    _first_bytes: int = field(default=0, repr=False)
    _loading: tuple[Any, Any] | None = field(default=None, repr=False)  # launched, not ready
    # A fork server of this backend (``onnxfuzz.execute.zygote``): where there is one, a
    # fresh process is forked from it (milliseconds) rather than spawned (seconds).
    zygote: Zygote | None = field(default=None, repr=False)

    def start(self) -> BackendInfo:
        """Spawn a fresh interpreter (``python -m onnxfuzz.execute.worker``) talking over a socket
        pair, or fork one from ``zygote``; its stderr goes to a file whose tail is kept when
        it crashes. Returns once it has loaded its backend."""
        self.launch()
        forked = self._loading is not None and isinstance(self._loading[0], ForkedProcess)
        try:
            return self.ready()
        except BackendError:
            if not forked:
                raise
            # A forked process that did not come up: spawn them from now on (a backend that
            # cannot load fails again here, in its own words).
            self.zygote = None
            self.launch()
            return self.ready()

    def launch(self) -> None:
        """``start``'s first half: the process is spawned and loads its backend while the
        caller goes on; ``ready`` waits for it."""
        self.starts += 1
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        stage_file = tempfile.TemporaryFile()  # noqa: SIM115 - mapped, then closed
        stage_file.write(bytes(CLOCK_BYTES))
        stage_file.flush()
        self._clock = mmap.mmap(stage_file.fileno(), CLOCK_BYTES)
        forked = self._fork(stage_file.fileno()) if self.zygote is not None else None
        proc, conn = forked or spawn(
            "onnxfuzz.execute.worker",
            [str(stage_file.fileno()), self.ref.text],
            (stage_file.fileno(),),
            self._stderr,
        )
        stage_file.close()
        self._loading = (proc, conn)

    def _fork(self, clock_fd: int) -> tuple[ForkedProcess, Connection] | None:
        """A process forked from ``zygote``, talking over a new socket pair (None where
        the zygote cannot fork one: the caller spawns it)."""
        assert self.zygote is not None
        ours, theirs = socket.socketpair()
        try:
            proc = self.zygote.fork((theirs.fileno(), clock_fd, self._stderr.fileno()))
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        return proc, Connection(ours.detach())

    def ready(self) -> BackendInfo:
        """Wait for the process ``launch`` spawned to have loaded its backend."""
        assert self._loading is not None, "launch() first"
        proc, conn = self._loading
        self._loading = None
        if not self._answered(conn):
            where = self._hung_at(proc)
            raise BackendError(
                f"backend {self.ref.text}: its start-up (the adapter's import, __init__, "
                f"version(), available()) hung: no answer within {self.startup_timeout:g} s"
                + (f", stuck in {where}" if where else "")
                + f"; fix the adapter, or give a slow start more time with "
                f"{START_LIMIT_ENV}=SECONDS"
            )
        try:
            msg = conn.recv()
        except EOFError:
            proc.wait(5)
            raise BackendError(
                f"backend {self.ref.text}: worker died while loading "
                f"({_death(_code(proc))}): "
                f"{crashdump.evidence(self.stderr_tail(crashdump.DUMP_BYTES))}"
            ) from None
        if isinstance(msg, LoadError):
            proc.wait(5)
            raise BackendError(msg.message)
        self._proc, self._conn = proc, conn
        self.info = BackendInfo(
            self.ref.text, msg.name, msg.version, tuple(msg.opsets), msg.unavailable, msg.preferred
        )
        return self.info

    def _answered(self, conn: Connection) -> bool:
        """Whether the loading process answered (or died) within ``startup_timeout``; a
        start-up past ``SLOW_START_S`` (or half the limit) is said on stderr, then every
        ``SLOW_START_EVERY_S``: a hung adapter's start was silent for the whole limit."""
        began = time.monotonic()
        say = min(SLOW_START_S, self.startup_timeout / 2)
        while True:
            waited = time.monotonic() - began
            if waited >= self.startup_timeout:
                return False
            if conn.poll(max(0.0, min(say, self.startup_timeout) - waited)):
                return True
            waited = time.monotonic() - began
            if say <= waited < self.startup_timeout:
                print(
                    f"starting backend {self.ref.text} has taken {waited:.0f} s (its "
                    f"adapter's import, __init__, version(), available()); it is given "
                    f"{self.startup_timeout:g} s ({START_LIMIT_ENV} sets it)",
                    file=sys.stderr,
                    flush=True,
                )
                say += SLOW_START_EVERY_S

    def _hung_at(self, proc: Any) -> str:
        """Where a process that never finished loading its adapter is stuck: the
        innermost frames of the Python stack faulthandler dumps on SIGABRT ("" where none
        comes); the process is gone afterwards."""
        if isinstance(proc, subprocess.Popen):  # spawned: faulthandler armed (``serve``)
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                proc.send_signal(signal.SIGABRT)
                proc.wait(5)
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        frames = crashdump.read_dump(self.stderr_tail(crashdump.DUMP_BYTES)).python
        return " < ".join(frames[:HUNG_FRAMES])

    def stderr_tail(self, limit: int = 2000, since: int = 0) -> str:
        """The last ``limit`` bytes the worker wrote to stderr after byte ``since``."""
        return crashdump.file_tail(getattr(self, "_stderr", None), limit, since)

    def _stderr_size(self) -> int:
        f = getattr(self, "_stderr", None)
        try:
            return os.fstat(f.fileno()).st_size if f is not None else 0
        except (OSError, ValueError):
            return 0

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self) -> None:
        kill(self._proc, self._conn)
        self._proc = self._conn = None

    def close(self) -> None:
        stop(self._proc, self._conn)
        self._proc = self._conn = None
        self._queue.clear()
        if self._loading is not None:  # launched and never waited for
            kill(*self._loading)
            self._loading = None

    def _crash(self, stage: str) -> Outcome:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(5)
        code = _code(self._proc) if self._proc is not None else None
        self._kill()
        # Only what this test wrote: earlier tests' log lines are not its evidence. The
        # crash site's frames first (faulthandler's, or the library's own trace), then the
        # tail of that text.
        text = self.stderr_tail(crashdump.DUMP_BYTES, since=self._test_stderr)
        return Outcome(Status.CRASH, stage, message=_death(code), trace=crashdump.evidence(text))

    def cpu_seconds(self) -> float:
        """CPU time the worker process has used so far (0 when it is not running)."""
        return process_cpu_seconds(self._proc.pid) if self._alive() else 0.0

    def _read_clock(self, seq: int) -> tuple[Stage, float, float, int | None]:
        """Test ``seq`` on the worker's clock: stage, when it began (0: not yet), when its
        run began (0: still compiling), where its stderr began (None: not begun)."""
        stage, on, began, run_began, err_at = _CLOCK.unpack_from(self._clock, 0)
        if on != seq or began == 0.0:  # the worker is on an earlier test, or receiving
            return Stage.COMPILE, 0.0, 0.0, None
        return _STAGE_BYTES[min(stage, 2)], began, run_began, err_at

    def _stage(self, seq: int) -> Stage:
        return self._read_clock(seq)[0]

    def _timed_out(self, now: float, head: _Queued) -> Outcome | None:
        """A timeout, measured from when the worker began the test (not from ``submit``:
        a parent busy elsewhere must not turn a finished test into a timeout)."""
        stage, began, run_began, _ = self._read_clock(head.seq)
        if began == 0.0:
            # Not begun: the worker is still receiving it. Only a worker that never picks
            # the test up (wedged between tests) is timed from the hand-over.
            if now - head.since <= self.timeout + PICKUP_GRACE:
                return None
            self._kill()
            return Outcome(
                Status.TIMEOUT,
                Stage.COMPILE,
                message=f"the worker did not begin the test within "
                f"{self.timeout + PICKUP_GRACE:g} s of receiving it",
            )
        if now - began <= self.timeout:
            return None
        compile_s = (run_began or now) - began
        run_s = now - run_began if run_began else 0.0
        self._kill()
        return Outcome(
            Status.TIMEOUT,
            stage,
            message=f"no result within {self.timeout:g} s (on the worker's clock: compile "
            f"{compile_s:.1f} s, run {run_s:.1f} s)",
            compile_s=compile_s,
            run_s=run_s,
            started=began,
        )

    def execute(
        self, model_bytes: bytes, inputs: dict[str, np.ndarray], frontend: bool = False
    ) -> Outcome:
        """Run a test now (``frontend``: only the adapter's import, ``Test.frontend``)."""
        assert not self._queue, "collect the tests submitted first"
        failed = self.submit_packed(pack(model_bytes, inputs, frontend=frontend))
        return failed if failed is not None else self.collect()

    def submit(self, model_bytes: bytes, inputs: dict[str, np.ndarray]) -> Outcome | None:
        """Send a test; returns an Outcome only if it could not even be sent. Several
        workers can be submitted to before collecting: they run in parallel. A worker still
        on an earlier test holds this one behind it (``QUEUE_AHEAD``; larger tests wait
        here until it is free) and begins it as soon as it answers the earlier one."""
        return self.submit_packed(pack(model_bytes, inputs))

    def submit_packed(self, test: Packed) -> Outcome | None:
        """``submit`` of a test already pickled (``pack``)."""
        q = _Queued(
            test.seq,
            test.data,
            time.perf_counter(),
            inputs_key=test.inputs_key,
            ops_key=test.ops_key,
        )
        if self._queue:  # behind an earlier test: collect() answers for a dead worker
            self._queue.append(q)
            self._pump()
            return None
        if not self._alive():
            if self._proc is not None:
                self.restarts += 1
            self._kill()
            self.start()
        self._test_stderr = self._stderr_size()  # this test's stderr begins here
        try:
            self._conn.send_bytes(q.data)
        except OSError:
            return self._crash(Stage.COMPILE)
        q.sent = True
        self._queue.append(q)
        return None

    def _pump(self) -> None:
        """Send the queued tests the worker may hold now: the one it runs and
        ``QUEUE_AHEAD`` more, a large one only to a free worker (``QUEUE_BYTES``). Never
        to a dead worker: collecting the test it died on starts a fresh one."""
        if not self._alive():
            return
        held = sum(q.sent for q in self._queue)
        for q in self._queue:
            if q.sent:
                continue
            if held > QUEUE_AHEAD or (held and len(q.data) > QUEUE_BYTES):
                return
            try:
                self._conn.send_bytes(q.data)
            except OSError:
                return
            q.sent, held = True, held + 1

    def collect(self) -> Outcome:
        """Wait for the outcome of the oldest test submitted and not yet collected
        (timeout and memory cap enforced). The tests behind it go on: to a fresh worker
        if this one died or had to be killed on it."""
        assert self._queue, "no test submitted"
        head = self._queue[0]
        if not head.sent:  # it waited for a free (or fresh) worker
            if not self._alive():
                if self._proc is not None:
                    self.restarts += 1
                self._kill()
                self.start()
            self._test_stderr = self._stderr_size()
            head.since = time.perf_counter()
            try:
                self._conn.send_bytes(head.data)
                head.sent = True
            except OSError:
                pass  # the worker died at once: reported as the crash of this test
        got = self._collect(head) if head.sent else self._crash(Stage.COMPILE)
        self._remember(head)
        self._queue.popleft()
        if self._queue:
            # The next test's pick-up clock starts now at the latest; its stderr where the
            # worker's stands (the worker marks its own start on the clock, preferred).
            nxt = self._queue[0]
            nxt.since = max(nxt.since, time.perf_counter())
            if self._proc is None:  # killed on the test collected: those behind went too
                self.start()
                for q in self._queue:
                    q.sent = False
                    q.since = time.perf_counter()
            # (A worker that died by itself after answering died on the next test: its
            # collect reports that crash, with its evidence.)
            self._test_stderr = self._stderr_size()
            self._pump()
        return got

    def _remember(self, q: _Queued) -> None:
        """Keep a collected test in the history of the process that ran it (bounded)."""
        keys = tuple(
            f"{kind} {key}" for kind, key in (("in", q.inputs_key), ("ops", q.ops_key)) if key
        )
        self._ran.append((q.seq, self.starts, q.data, keys))
        self._ran_bytes += len(q.data)
        while len(self._ran) > HISTORY_TESTS or self._ran_bytes > HISTORY_BYTES:
            self._ran_bytes -= len(self._ran.popleft()[2])
        for key in keys:
            where = (self.starts, key)
            firsts = self._first.setdefault(where, [])
            self._first.move_to_end(where)
            if len(firsts) < FIRST_PER_INPUTS:
                firsts.append((q.seq, q.data))
                self._first_bytes += len(q.data)
        while self._first_bytes > FIRST_BYTES and len(self._first) > 1:
            _, gone = self._first.popitem(last=False)
            self._first_bytes -= sum(len(data) for _, data in gone)

    def ran_before(self, seq: int, limit: int = HISTORY_TESTS) -> list[Test]:
        """The tests the process that ran test ``seq`` had run before it, oldest first: the
        most recent ``limit``, and before them the first ones it ran with ``seq``'s input
        signature or its list of op types (``FIRST_PER_INPUTS`` of each), however long
        ago; none when ``seq`` is no longer remembered."""
        at = next((i for i, (s, *_) in enumerate(self._ran) if s == seq), None)
        if at is None or limit <= 0:
            return []
        _, process, _, keys = self._ran[at]
        recent = [(s, data) for s, p, data, _ in list(self._ran)[:at] if p == process][-limit:]
        have = {s for s, _ in recent}
        alike: dict[int, bytes] = {}
        for key in keys:
            for s, data in self._first.get((process, key), []):
                if s < seq and s not in have:
                    alike[s] = data
        return [ForkingPickler.loads(alike[s]) for s in sorted(alike)] + [
            ForkingPickler.loads(data) for _, data in recent
        ]

    def _crash_of(self, head: _Queued) -> Outcome:
        """The worker died: the crash of ``head``, with the stderr it wrote (from where the
        worker marked its start, when it got that far)."""
        stage, _, _, err_at = self._read_clock(head.seq)
        if err_at is not None:
            self._test_stderr = err_at
        return self._crash(stage)

    def _collect(self, head: _Queued) -> Outcome:
        """``head``'s outcome (sent: the worker has it or has had it)."""
        while True:
            # A result that arrived counts, however late the parent comes to it.
            ready = False
            with contextlib.suppress(OSError, EOFError):
                ready = self._conn.poll(0)
            if not ready:
                timed_out = self._timed_out(time.perf_counter(), head)
                if timed_out is not None:
                    return timed_out
                with contextlib.suppress(OSError, EOFError):
                    ready = self._conn.poll(0.05)
            if not ready:
                if not self._alive():
                    return self._crash_of(head)
                rss = _rss_mb(self._proc.pid)
                if rss > self.memory_mb:
                    stage = self._stage(head.seq)
                    self._kill()
                    return Outcome(
                        Status.CRASH,
                        stage,
                        message=f"{OUT_OF_MEMORY}: resident set "
                        f"{rss:.0f} MB > cap {self.memory_mb:.0f} MB",
                    )
                continue
            try:
                msg = self._conn.recv()
            except (EOFError, OSError):
                return self._crash_of(head)
            if isinstance(msg, Done):
                return Outcome(
                    Status.OK,
                    None,
                    msg.outputs,
                    compile_s=msg.compile_s,
                    run_s=msg.run_s,
                    started=msg.started,
                    cpu_s=msg.cpu_s,
                    optimizations=msg.optimizations,
                    feedback_s=msg.feedback_s,
                    feedback_error=msg.feedback_error,
                    second=msg.second,
                    inputs_changed=msg.inputs_changed,
                    rerun_s=msg.rerun_s,
                )
            if msg.protocol:  # the adapter's defect, the same on every test: stop here
                raise AdapterProtocolError(
                    f"adapter {self.ref.text}: "
                    f"{msg.message.removeprefix(AdapterProtocolError.__name__ + ': ')}; "
                    "every test would fail the same "
                    "way, so none is filed as a bug (the protocol: docs/adapters.md)"
                )
            return Outcome(
                Status.UNSUPPORTED if msg.unsupported else Status.ERROR,
                msg.stage,
                message=msg.message,
                trace=msg.trace,
                compile_s=msg.compile_s,
                run_s=msg.run_s,
                started=msg.started,
                cpu_s=msg.cpu_s,
            )


def _code(proc: Any) -> int | None:
    """``proc``'s exit code (None where it is not known: still running, or a forked process
    whose status went with its zygote)."""
    return None if getattr(proc, "lost", False) else proc.returncode


def _death(code: int | None) -> str:
    if code is None:
        return "worker vanished"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"worker exited with status {code}"
