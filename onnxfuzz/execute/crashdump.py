"""What a dying worker leaves on stderr: the innermost frames of the crashing thread.

Workers run with ``faulthandler`` on (``arm``, then ``rearm`` once the adapter has loaded),
so a fatal signal leaves the Python stack of every thread; some libraries print their own
native backtrace too (TVM on a segfault or a failed check, glibc's ``backtrace_symbols``,
LLVM, gdb-like dumps). ``read_dump`` finds both in one test's stderr text, with the last
words written before them (glibc's "free(): invalid pointer", a check's message).
``evidence`` puts those first and the tail of the text after them (what the user reads);
``dump_of`` reads them back, for the signature.

Frames are normalized to a function name and a file basename: no line numbers, addresses,
offsets, directories, template or parameter lists, so that one crash site gives the same
frames whatever the model, the test, the build's paths or a minor version of the library.
"""

from __future__ import annotations

import ctypes
import faulthandler
import os
import re
import signal
import sys
from dataclasses import dataclass
from typing import Any

SHOWN = 6  # frames the evidence shows (a signature takes fewer: see judge.signature)
NOTE_LINES = 3  # last lines before the dump kept as its words (as the signature did before)
NOTE_CHARS = 300  # of each (a signature keeps no more)
TAIL = 2000  # characters of the test's stderr shown after the frames
FRAMES_HEAD = "crash site ({kind}, innermost frame first):"  # kind: native or Python
_FRAMES_HEAD = re.compile(r"^crash site \((?P<kind>native|Python), innermost frame first\):$")
PYTHON_HEAD = "Python stack: "
NOTE_HEAD = "last words before the dump:"
TAIL_HEAD = "--- stderr of this test (tail) ---"


@dataclass(frozen=True)
class Dump:
    """One test's crash as its stderr shows it (every field innermost first / last written
    last; empty where the text has none)."""

    native: tuple[str, ...] = ()  # the library's own backtrace of the crash
    python: tuple[str, ...] = ()  # faulthandler's Python stack of the crashing thread
    note: tuple[str, ...] = ()  # the last lines written before any dump

    @property
    def frames(self) -> tuple[str, ...]:
        """The crash site: the native trace where the library printed one (it names the
        function that failed inside the library, where Python only shows the call into it),
        else the Python stack."""
        return self.native or self.python


# --- lines --------------------------------------------------------------------------------
_ADDR = r"0x[0-9a-fA-F]+"
# faulthandler: `  File "x.py", line 8 in f` (no comma before "in"; "line ???" when unknown)
_FH_FRAME = re.compile(r'^\s+File "(?P<file>[^"]*)", line (?:\d+|\?+) in (?P<func>.+?)\s*$')
# A Python traceback's, and TVM FFI's native trace's: `  File "x", line 8, in f`
_PY_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)"(?:, line \d+)?, in (?P<func>.+?)\s*$')
# TVM's "Stack trace:" / "Traceback" entries: `  0: tvm::relax::Foo(...)`, then `at file:N`
_NUM_FRAME = re.compile(r"^\s*(?P<n>\d+): (?P<func>\S.*?)\s*$")
_AT = re.compile(r"^\s+at (?P<file>\S+?)(?::\d+)*\s*$")
# gdb `#0  0x7f.. in f (a=1) at x.c:3`, LLVM `#0 0x55.. f(int) (/bin/x+0x1)`, c10 `frame #0: f`
_HASH_FRAME = re.compile(rf"^\s*(?:frame )?#(?P<n>\d+):?\s+(?:{_ADDR}\s+(?:in\s+)?)?(?P<rest>.+)$")
# glibc backtrace_symbols(_fd): `/lib/libfoo.so(_ZN3foo3barEv+0x1a) [0x7f..]`
_SYM_FRAME = re.compile(
    rf"^\s*(?P<obj>[^\s()\[\]]+)\((?P<func>[^()+]*)(?:\+{_ADDR})?\)\s*\[{_ADDR}\]\s*$"
)
# faulthandler's C stack (Python 3.14): `  Binary file "python3", at f+0x31 [0x55..]`
_BIN_FRAME = re.compile(
    rf'^\s*Binary file "(?P<obj>[^"]*)"(?:, at (?P<func>[^\s+]+))?.*\[{_ADDR}\]'
)
# A line of ONNX Runtime's session log (the ``ort`` adapter's optimization feedback turns
# it on while a session is made; a crash meanwhile leaves it): timestamped, so never the
# library's last words (it would make every such crash's signature differ).
_LIBRARY_LOG = re.compile(
    r"^(?:\x1b\[[0-9;]*m)?\d{4}-\d\d-\d\d \S+ \[[VIWE]:onnxruntime:|^\x1b\[m$"
)
# What a dump prints besides its frames: not the library's last words.
_BOILERPLATE = re.compile(
    r"^(Fatal Python error: (Segmentation fault|Aborted|Bus error|Floating[- ]point exception"
    r"|Illegal instruction)"
    r"|Python runtime state:.*|Extension modules:.*|\s*<no Python frame>|\s*\.\.\."
    r"|Stack trace:?|Traceback \(most recent call last\):"
    r"|.*\(most recent call (first|last)\):|!{3,}.*!{3,}"
    r"|Current thread's C stack trace.*|Stack dump:|PLEASE submit a bug report.*)\s*$"
)
_PY_SOURCE = re.compile(r"^\s{4,}\S")  # a Python traceback's source line or its ^^^ marks

# --- frames -------------------------------------------------------------------------------
# The signal's own delivery: frames above it (inner to it) are the handler printing the trace.
_TRAMPOLINE_FUNCS = re.compile(r"^(__restore_rt|<signal handler called>|killpg)$")
_TRAMPOLINE_FILES = frozenset({"libc_sigaction.c", "sigaction.c"})
# Frames every abort, failed check or dump passes through: not where the bug is.
_MACHINERY = re.compile(
    r"^(raise|__GI_raise|gsignal|abort|__GI_abort|__pthread_kill\w*|pthread_kill"
    r"|__libc_message\w*|malloc_printerr|__malloc_assert|__assert_fail\w*|__fortify_fail\w*"
    r"|__chk_fail|__stack_chk_fail|std::terminate|__cxxabiv1::__terminate"
    r"|__gnu_cxx::__verbose_terminate_handler|__cxa_throw|__cxa_rethrow|__cxa_call_terminate"
    r"|_Unwind_\w+|_Py_DumpStack|_Py_FatalError\w*|fatal_error\w*|faulthandler\w*"
    r"|.*::Backtrace|.*Traceback|.*backtrace_handler|\w+::LogFatal\b.*|.*::LogFatal\b.*"
    r"|.*::LogMessageFatal\b.*|tvm::ffi::details::ErrorBuilder\b.*)$"
)
# The worker's loop that calls the adapter, and what runs that loop: the same in every
# crash, so no evidence (the stack is cut at the loop's frame).
_HARNESS = frozenset({("serve", "sandbox.py"), ("serve_loaded", "sandbox.py")})
_OUTERMOST = frozenset({"runpy.py", "<frozen runpy>"})
_OPERATOR = re.compile(r"operator\s*(<<=|>>=|<=>|<<|>>|<=|>=|->\*|->|\(\)|\[\]|<|>)")
_MAX_FRAME = 120


def _base(path: str) -> str:
    """A file's basename, without a trailing ``:line`` (empty for an unknown file)."""
    path = re.sub(r"(:\d+)+$", "", path.strip())
    if path in ("", "<unknown>", "??"):
        return ""
    return os.path.basename(path.rstrip("/"))


def _native_name(name: str) -> str:
    """A native function's name without its parameter and template lists, clone suffix or
    offset (they vary with the build and make a trace unreadable): ``ns::Cls::method``."""
    name = re.sub(r"\s*\[clone [^\]]*\]", "", name.strip())
    name = re.sub(rf"\s*\+\s*{_ADDR}$", "", name)
    name = name.replace("(anonymous namespace)", "{anonymous}")
    ops: list[str] = []

    def keep(m: re.Match[str]) -> str:  # operator<, operator() are names, not lists
        ops.append(m.group(0))
        return f"\x00{len(ops) - 1}\x00"

    name = _OPERATOR.sub(keep, name)
    for group in (re.compile(r"<[^<>]*>"), re.compile(r"\([^()]*\)")):
        while True:
            stripped = group.sub("", name)
            if stripped == name:
                break
            name = stripped
    name = re.sub(r"\x00(\d+)\x00", lambda m: ops[int(m.group(1))], name)
    return re.sub(r"\s+(const|volatile|&|&&)$", "", name).strip()


def _frame(func: str | None, file: str = "", native: bool = True) -> str | None:
    """``func (file)``, normalized; None for a frame without a name (an address alone)."""
    if func is None:
        return None
    func = _native_name(func) if native else func.strip()
    if not func or func in ("<unknown>", "??") or re.fullmatch(_ADDR, func):
        return None
    base = _base(file)
    return _clip(f"{func} ({base})" if base else func, _MAX_FRAME)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _name(frame: str) -> tuple[str, str]:
    """(function, file) of a normalized frame."""
    m = re.fullmatch(r"(?P<func>.*?)(?: \((?P<file>[^()]*)\))?", frame)
    assert m is not None
    return m.group("func"), m.group("file") or ""


def _dedupe(frames: list[str]) -> list[str]:
    """Consecutive repeats dropped (an inlined function shows twice at one site)."""
    return [f for i, f in enumerate(frames) if i == 0 or frames[i - 1] != f]


def _crash_site(frames: list[tuple[str | None, str]]) -> tuple[str, ...]:
    """A native trace (innermost first) from where the crash happened: the handler that
    printed it, the signal's delivery and the abort/throw machinery cut off; frames
    without a name (bare addresses, which move with every run) dropped."""
    cut = 0
    for i, (func, file) in enumerate(frames[:24]):
        if _base(file) in _TRAMPOLINE_FILES or (func and _TRAMPOLINE_FUNCS.match(func.strip())):
            cut = i + 1
    named = [f for f in (_frame(func, file) for func, file in frames[cut:]) if f is not None]
    while named and _MACHINERY.match(_name(named[0])[0]):
        named.pop(0)
    return tuple(_dedupe(named))


def _python_stack(frames: list[tuple[str, str]]) -> tuple[str, ...]:
    """faulthandler's frames (innermost first) up to the worker's loop, normalized."""
    kept: list[str] = []
    for func, file in frames:
        if (func.strip(), _base(file)) in _HARNESS:
            break
        if _base(file) in _OUTERMOST:
            continue
        f = _frame(func, file, native=False)
        if f is not None:
            kept.append(f)
    return tuple(_dedupe(kept))


@dataclass
class _Block:
    kind: str  # fh (faulthandler), py (File ..., in f), num, hash, sym, bin
    header: str  # the line before its first frame
    frames: list[tuple[int, str | None, str]]  # (order key, function, file)
    rows: list[int]  # the lines it spans (frames and their continuation lines)


def _parse_hash(rest: str) -> tuple[str, str]:
    """(function, file) of a gdb / LLVM / c10 frame's text after its number."""
    file = ""
    m = re.search(r"\s+at\s+(\S+)\s*$", rest)  # gdb: `f (args) at x.c:3`
    if m:
        file, rest = m.group(1), rest[: m.start()]
    m = re.search(rf"\s+\((?:{_ADDR} in )?(/[^()\s]+?)(?:\+{_ADDR})?\)\s*$", rest)  # LLVM/c10
    if m:
        file = file or m.group(1)
        rest = rest[: m.start()]
    m = re.search(r"\s+from\s+(\S+)\s*$", rest)  # gdb without symbols' file: `from lib.so`
    if m:
        file, rest = file or m.group(1), rest[: m.start()]
    rest = re.sub(rf"\s*\+\s*{_ADDR}\s*$", "", rest)  # c10: `f + 0x1a`
    return rest, file


def _blocks(lines: list[str]) -> tuple[list[_Block], set[int]]:
    """Runs of frame lines of one format, and the indices of every line a dump wrote."""
    blocks: list[_Block] = []
    boilerplate: set[int] = set()
    current: _Block | None = None
    for i, line in enumerate(lines):
        kind, key, func, file = "", 0, None, ""
        if m := _FH_FRAME.match(line):
            kind, func, file = "fh", m.group("func"), m.group("file")
        elif m := _PY_FRAME.match(line):
            kind, func, file = "py", m.group("func"), m.group("file")
        elif m := _BIN_FRAME.match(line):
            kind, func, file = "bin", m.group("func"), m.group("obj")
        elif m := _SYM_FRAME.match(line):
            kind, func, file = "sym", m.group("func") or None, m.group("obj")
        elif m := _HASH_FRAME.match(line):
            kind, key = "hash", int(m.group("n"))
            func, file = _parse_hash(m.group("rest"))
        elif m := _NUM_FRAME.match(line):
            kind, key, func = "num", int(m.group("n")), m.group("func")
        if current is not None and not kind:
            at = _AT.match(line)
            if at and current.kind in ("num", "hash") and current.frames:
                k, f, _ = current.frames[-1]
                current.frames[-1] = (k, f, at.group("file"))
                current.rows.append(i)
                continue
            if current.kind == "py" and _PY_SOURCE.match(line):
                current.rows.append(i)  # the source line under a traceback's frame
                continue
        if not kind:
            current = None
            if _BOILERPLATE.match(line):
                boilerplate.add(i)
            continue
        if current is None or current.kind != kind:
            header = lines[i - 1].strip() if i > 0 else ""
            current = _Block(kind, header, [], [])
            blocks.append(current)
        current.frames.append((key if kind in ("num", "hash") else len(current.frames), func, file))
        current.rows.append(i)
    real = [b for b in blocks if _is_trace(b)]
    return real, boilerplate.union(*(b.rows for b in real))


def _is_trace(b: _Block) -> bool:
    """Numbered lines are a trace only under a trace's header (TVM's "Stack trace:",
    "Traceback ...") or, for ``#N`` frames, counted from #0: else a log's numbered list."""
    headed = re.search(r"(?i)stack|trace", b.header) is not None
    if b.kind == "num":
        return headed
    if b.kind == "hash":
        keys = sorted(k for k, _, _ in b.frames)
        return headed or (len(keys) > 1 and keys == list(range(len(keys))))
    return True


def read_dump(text: str) -> Dump:
    """The crash in one test's stderr text (see ``Dump``)."""
    lines = text.splitlines()
    blocks, used = _blocks(lines)
    native: tuple[str, ...] = ()
    python: tuple[str, ...] = ()
    for b in blocks:  # the last of each kind wins: the fatal dump is written last
        pairs = [(func, file) for _, func, file in sorted(b.frames, key=lambda f: f[0])]
        if b.kind == "fh":
            # Only the crashing thread ("Current thread", or "Stack" when one is dumped):
            # the other threads' stacks say where they waited, not what crashed.
            if b.header.startswith(("Current thread", "Stack")):
                python = _python_stack([(func or "", file) for func, file in pairs])
            continue
        if b.kind == "py":
            if "most recent call last" in b.header:
                pairs.reverse()
            if all(file.endswith(".py") for _, file in pairs):
                continue  # a Python exception's traceback: printed, not the crash
        # (TVM numbers its frames from the innermost, 0, whatever its header says.)
        site = _crash_site(pairs)
        if site:
            native = site
    note = [
        ln.strip()
        for i, ln in enumerate(lines)
        if i not in used and ln.strip() and not _LIBRARY_LOG.match(ln)
    ]
    return Dump(native, python, tuple(_clip(n, NOTE_CHARS) for n in note[-NOTE_LINES:]))


# How much of a crashed test's stderr is searched for its dump: faulthandler's stacks of
# many threads and a native trace run to tens of KB; more than this is a runaway log.
DUMP_BYTES = 256 * 1024


def file_tail(f: Any, limit: int = 2000, since: int = 0) -> str:
    """The last ``limit`` bytes written to the stderr file ``f`` after byte ``since``. Read
    with ``pread``: the file's offset is shared with the process appending to it."""
    if f is None:
        return ""
    try:
        size = os.fstat(f.fileno()).st_size
        start = max(since, size - limit)
        return os.pread(f.fileno(), size - start, start).decode(errors="replace").strip()
    except (OSError, ValueError):
        return ""


def evidence(text: str, limit: int = TAIL) -> str:
    """What the user reads about a crash: the crash site's frames, the Python stack where
    the site is native, the last words before the dump, then the tail of ``text`` (without
    faulthandler's list of loaded extension modules: it names no cause). Only the tail
    where ``text`` holds no frames."""
    d = read_dump(text)
    kept = [ln for ln in text.splitlines() if not ln.startswith("Extension modules:")]
    tail = "\n".join(kept).strip()
    tail = tail if len(tail) <= limit else "..." + tail[-limit:]
    if not d.frames:
        return tail
    out = [FRAMES_HEAD.format(kind="native" if d.native else "Python")]
    out += [f"  {f}" for f in d.frames[:SHOWN]]
    if d.native and d.python:
        out.append(PYTHON_HEAD + " < ".join(d.python[:SHOWN]))
    if d.note:
        out += [NOTE_HEAD, *(f"  {n}" for n in d.note)]
    return "\n".join([*out, TAIL_HEAD, tail])


def dump_of(trace: str) -> Dump:
    """The crash an Outcome's ``trace`` records: read back from ``evidence``'s header, or
    read from the text itself where it has none (only a tail, or a trace written some
    other way)."""
    lines = trace.splitlines()
    head = _FRAMES_HEAD.match(lines[0]) if lines else None
    if head is None:
        return read_dump(trace)
    frames: list[str] = []
    note: list[str] = []
    python: tuple[str, ...] = ()
    into = frames
    for line in lines[1:]:
        if line == TAIL_HEAD:
            break
        if line.startswith(PYTHON_HEAD):
            python = tuple(line[len(PYTHON_HEAD) :].split(" < "))
        elif line == NOTE_HEAD:
            into = note
        elif line.startswith("  "):
            into.append(line[2:])
    if head.group("kind") == "native":
        return Dump(tuple(frames), python, tuple(note))
    return Dump((), tuple(frames), tuple(note))


# --- in the worker ------------------------------------------------------------------------
# The signals faulthandler handles. A ``struct sigaction`` is copied as opaque bytes (its
# layout differs between platforms, and libc leaves stack garbage in the unused words of
# its signal mask); only its first member, the handler, is compared.
_FATAL = (signal.SIGSEGV, signal.SIGFPE, signal.SIGABRT, signal.SIGBUS, signal.SIGILL)
_SIGACTION_BYTES = 512  # more than any libc's struct sigaction
_HANDLER_BYTES = ctypes.sizeof(ctypes.c_void_p)


def _actions() -> dict[int, bytes] | None:
    """Each fatal signal's installed action; None where libc's sigaction cannot be used or
    the handler is not the struct's first member (MIPS puts the flags first)."""
    if sys.platform != "linux" or os.uname().machine.startswith("mips"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        out = {}
        for sig in _FATAL:
            buf = ctypes.create_string_buffer(_SIGACTION_BYTES)
            if libc.sigaction(int(sig), None, buf) != 0:
                return None
            out[int(sig)] = buf.raw
        return out
    except (OSError, AttributeError):
        return None


def arm() -> dict[int, bytes] | None:
    """In a worker, before its adapter loads (a crash while loading shows too): a fatal
    signal dumps every thread's Python stack to stderr (the worker's stderr file, which the
    parent reads). Returns the signals' actions as armed, for ``rearm`` (None where it could
    not be armed: no stderr; the worker still serves, with the stderr text alone)."""
    try:
        faulthandler.enable(sys.stderr, all_threads=True)
    except (RuntimeError, ValueError, OSError, AttributeError):
        return None
    return _actions()


def rearm(armed: dict[int, bytes] | None) -> None:
    """Once the adapter has loaded: a library that installed its own handler of a fatal
    signal (TVM prints its native backtrace on SIGSEGV) replaced faulthandler's. Put
    faulthandler back in front of it: it dumps the Python stack, then restores the library's
    handler and raises the signal again, so both stacks are printed. Never fails: at worst
    the library's handler alone prints."""
    if armed is None or not faulthandler.is_enabled():
        return
    now = _actions()
    if now is None:
        return
    theirs = {
        sig: action
        for sig, action in now.items()
        if action[:_HANDLER_BYTES] != armed[sig][:_HANDLER_BYTES]
    }
    if not theirs:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        faulthandler.disable()  # puts back the actions from before ``arm``: the library's
        for sig, action in theirs.items():  # are lost, so write them back, to chain to
            libc.sigaction(sig, ctypes.create_string_buffer(action, len(action)), None)
        faulthandler.enable(sys.stderr, all_threads=True)
    except (OSError, RuntimeError, ValueError, AttributeError):
        return
