"""Bug signatures: one bug, one signature, whatever the model, names or numbers.

Error text is normalized (addresses, numbers, tensor and node names, paths, quoted
values removed) so that hits of one bug fall in one bundle, while the backend, the
verdict, the stage and the error's own words keep distinct bugs apart. A crash is told
by its signal or exit, the last words its library wrote, and the innermost frames of the
crashing thread (``onnxfuzz.execute.crashdump``: function and file names only).

A signature's *family* (``family``) leaves out what the model holds (op names, element
types, shapes, a crash's last words): the bundles of one root cause, which reports lead with
and known-findings files (``onnxfuzz.store.known``) match crashes by.
"""

from __future__ import annotations

import functools
import hashlib
import re

import onnx

from onnxfuzz.execute.crashdump import dump_of
from onnxfuzz.judge.oracle import Judgement, Verdict

TOP_FRAMES = 3  # the crash site and two callers: where, and through which call
_PY_NAME = r"'([A-Za-z_][\w.]{0,79})'"  # a quoted Python name: 'NoneType', 'torch.nn'

_PYTHON_NAMES: list[tuple[re.Pattern[str], str]] = [
    # Python's own messages quote the class, attribute, module or keyword at fault: code,
    # not model data, and what tells one bug from another ("'tuple' object has no
    # attribute 'to'" is onnx2torch's Split, "'OnnxReduceSumStaticAxes' object has no
    # attribute 'math_op_function'" a converter's missing method). They lose their quotes
    # rather than become S, which made every AttributeError of a backend one bug.
    (re.compile(rf"{_PY_NAME}(?= object\b)"), r"\1"),
    (re.compile(rf"(?<=\bhas no attribute ){_PY_NAME}"), r"\1"),
    (re.compile(rf"(?<=\bobject of type ){_PY_NAME}"), r"\1"),
    (re.compile(rf"(?<=\bmodule ){_PY_NAME}(?= has no attribute\b)"), r"\1"),
    (re.compile(rf"(?<=\bkeyword argument ){_PY_NAME}"), r"\1"),
    (
        re.compile(rf"(?<=\btype\(s\) for )([^:' ]{{1,3}}): {_PY_NAME} and {_PY_NAME}"),
        r"\1: \2 and \3",
    ),
]

RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\x1b\[[0-9;]*[A-Za-z]"), ""),  # terminal colors
    (re.compile(r"0x[0-9a-fA-F]+"), "ADDR"),
    (re.compile(r"(/[\w.\-+]+)+\.(py|cc|cpp|h|hpp|c)(:\d+)?"), "FILE"),
    (re.compile(r"\b\d{4}-\d\d-\d\d[ T][\d:.]+"), "TIME"),
    # TVM Relax's variable names (its BlockBuilder's lv, lv1, ..., gv, gv1, ...): the
    # first has no number, so one converter bug read "R.subtract(..., lv)" on an op fed by
    # a graph input and "lv1" after another op: two signatures, and a reduction that
    # could not drop the op before it (three bundles of Mul -> Elu, Einsum -> Elu, ...)
    (re.compile(r"\b[lg]v\d*\b"), "T"),
    # onnxfuzz's tensor/node names: in3, relu2_out, conv0_W, add1_out0
    (re.compile(r"\b[a-z][a-z0-9_]*?\d+(_[A-Za-z]\w*)?\b"), "T"),
    *_PYTHON_NAMES,
    (re.compile(r"'[^']{0,80}'|\"[^\"]{0,80}\""), "S"),
    (re.compile(r"[-+]?\d+(\.\d+)?([eE][-+]?\d+)?"), "N"),
    # shapes as tuples, e.g. TVM's R.Tensor((N, N, N), ...): one bug across ranks
    (re.compile(r"\(\s*N(\s*,\s*N)*\s*,?\s*\)"), "(SHAPE)"),
    # ... and the scalar's empty shape, (): ``f()`` (a call, after a name) is not a shape
    (re.compile(r"(?<![\w\])>])\(\s*\)"), "(SHAPE)"),
    (re.compile(r"\s+"), " "),
]


# The rules before Python's quoted names were kept (2026-11-27): bundles written then.
_RULES_BEFORE_NAMES = [rule for rule in RULES if rule not in _PYTHON_NAMES]

# A line that says only where an error passed through, once normalized: OpenVINO wraps each
# error in "Exception from src/inference/src/cpp/core.cpp:105:" and "Check 'false' failed
# at ...:" lines, and its frontend puts "FrontEnd API failed with OpConversionFailure:",
# "Model wasn't fully converted. Failed operations detailed log:" and "While validating
# ONNX node '<Node(...)>':" before the words. As the first two lines they made every
# OpenVINO conversion failure one signature (a GridSample rank limit, GatherElements' shape
# check and Resize's axes were one bug, 201 hits). Such lines are skipped when the first
# lines are picked; the error's type on the first of them stays.
WHERE_ONLY = (
    r"^(?:\w+: )?(?:Exception from \S*FILE\S*:|Check S failed at \S*FILE\S*:|"
    r"FrontEnd API failed with \w+:|Model wasn.t fully converted\. Failed operations detailed "
    r"log:|While validating (?:ONNX )?node .*:)$"
)
# Words one of those lines holds (only such lines are normalized one by one to test them).
WHERE_HINTS = r"Exception from|failed at|FrontEnd API failed|fully converted|While validating"
_WHERE_ONLY, _WHERE_HINTS = re.compile(WHERE_ONLY), re.compile(WHERE_HINTS)


# A signature keeps this much of an error's normalized text.
DETAIL_CHARS = 300
# A family keeps this much of a cut signature's text once its own rules have run: the rules
# shorten one bug's texts by different amounts ("dim=[N]" and "dim=[]" are "[SHAPE]"), so the
# cut fell at different words ("... Expected a floating poi" and "... floating po": two
# families of one error).
FAMILY_CHARS = 270


def _rewritten(text: str, rules: list[tuple[re.Pattern[str], str]]) -> str:
    for rx, rep in rules:
        text = rx.sub(rep, text)
    return text


def _saying(lines: list[str], n: int, rules: list[tuple[re.Pattern[str], str]]) -> list[str]:
    """The first ``n`` of ``lines`` that say what went wrong, not only where it passed
    (``WHERE_ONLY``), the error's type from a first line skipped kept in front; the first
    ``n`` lines where none says more."""
    kept: list[str] = []
    prefix = ""
    for k, line in enumerate(lines):
        if _WHERE_HINTS.search(line) and _WHERE_ONLY.match(_rewritten(line, rules).strip()):
            if k == 0 and (m := re.match(r"\w+: ", line)):
                prefix = m.group(0)
            continue
        kept.append(line)
        if len(kept) == n:
            break
    if not kept:
        return lines[:n]
    return [prefix + kept[0], *kept[1:]]


def normalize(
    text: str,
    lines: int = 2,
    rules: list[tuple[re.Pattern[str], str]] = RULES,
    skip_where: bool = True,
) -> str:
    """The first ``lines`` non-empty lines of ``text`` that say what went wrong (with
    ``skip_where``: not those that say only where, ``WHERE_ONLY``), without incidental
    detail."""
    kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
    kept = _saying(kept, lines, rules) if skip_where else kept[:lines]
    return _rewritten(" | ".join(kept), rules).strip()[:DETAIL_CHARS]


def earlier_forms(sig: str, message: str) -> list[str]:
    """``sig``, the signature of an error whose text is ``message``, and the forms
    normalization gave it before a rule changed: before Python's quoted names were kept,
    and before lines that say only where an error passed were skipped (both 2026-11-27).
    A bundle or known-findings file written then holds such a form, and is the same bug
    (``run.replay``, ``store.known``). Other signatures are only themselves."""
    backend, verdict, stage, detail = (sig.split("|", 3) + ["", "", ""])[:4]
    if verdict == Verdict.MISMATCH or normalize(message) != detail:
        return [sig]  # a wrong value's words, or a crash told by its frames: not error text
    forms = [
        normalize(message, rules=rules, skip_where=skip)
        for rules in (RULES, _RULES_BEFORE_NAMES)
        for skip in (True, False)
    ]
    return list(dict.fromkeys(f"{backend}|{verdict}|{stage}|{form}" for form in forms))


def _crash_detail(v: Judgement, trace: str) -> str:
    msg = v.message
    if msg.startswith("killed by signal") or msg.startswith("worker exited"):
        # A dying native library often leaves a line on stderr (glibc's "free(): invalid
        # pointer", a failed check): keep it. The frames say where it died; they are
        # normalized already (no line numbers or addresses), so the rules, made for error
        # text, would only blur them (``conv2d_nchw`` is not a tensor name).
        dump = dump_of(trace)
        detail = normalize("\n".join([msg, *dump.note]), lines=1 + len(dump.note))
        if dump.frames:
            detail += " | at " + " < ".join(dump.frames[:TOP_FRAMES])
        if dump.native and dump.python:
            # A native site is often generic (memcpy, a kernel launcher): the Python call
            # into the library tells which of the adapter's calls reached it.
            detail += " | via " + " < ".join(dump.python[:TOP_FRAMES])
        return detail
    return normalize(msg)


def signature(
    backend: str, v: Judgement, producer: str = "", dtype: str = "", trace: str = ""
) -> str:
    if v.verdict == Verdict.MISMATCH:
        # Not the dtype: one wrong kernel usually shows in every dtype it serves.
        detail = f"{v.kind} in {producer or '?'} output"
        if v.kind == "input":  # written by run(): no node to name without more runs
            detail = "input written in place"
    else:
        detail = _crash_detail(v, trace)
    return f"{backend}|{v.verdict}|{v.stage or '-'}|{detail}"


# Words that name what a model holds rather than what went wrong: element types (those
# with digits, float16 or int64, are "T" already), Relax operators (R.add) and, below, the
# ONNX op types.
_FAMILY_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bR\.const\([^()]*\)"), "T"),  # a constant operand is an operand
    # a Relax tensor's shape, symbolic dims too (TVM names NonZero's count nonzero_numbers):
    # R.Tensor((N, nonzero_numbers, N), ...) is a shape as R.Tensor((N, N, N), ...) is
    (re.compile(r"\bR\.Tensor\(\([^()]*\)"), "R.Tensor((SHAPE)"),
    # a list of numbers is a shape, axes or sizes as a tuple is (tuples are (SHAPE) in
    # signatures already): OpenVINO's shape checks quote [N,N,N], torch's fake-tensor
    # errors a call's dim=[N] or dim=[], one check at each rank
    (re.compile(r"\[\s*(N(\s*,\s*N)*\s*,?)?\s*\]"), "[SHAPE]"),
    (re.compile(r"\btensor\((\w+)\)"), "DT"),
    (re.compile(r"\b(float|double|half|bool|string|T)\b"), "DT"),
    # torch's scalar type names ("Expected a floating point tensor. Got Int", or Long)
    (re.compile(r"\b(Byte|Char|Short|Int|Long|Half|Float|Double|BFloat16|Bool)\b"), "DT"),
    (re.compile(r"\b(Complex(Half|Float|Double)|UInt(16|32|64))\b"), "DT"),
    (re.compile(r"\bR\.[a-z_][\w.]*"), "R.OP"),
]

_RELAX_CALL = re.compile(r"\bR\.OP\([^()]*\)")


@functools.cache
def _op_types() -> re.Pattern[str]:
    names = {s.name for s in onnx.defs.get_all_schemas_with_history()}
    return re.compile(r"\b(" + "|".join(sorted(names, key=len, reverse=True)) + r")\b")


def root_kind(kind: str) -> str:
    """A mismatch's kind as a root cause: "precision" (an error beyond the op's own budget,
    within the end-to-end tolerance: ``judge.budget``) is "values". One wrong kernel's error
    lands on either side of the end-to-end tolerance from run to run and input to input (a
    flaky kernel, a 1e-3 error on values near the tolerance), so the two kinds split one bug."""
    return "values" if kind == "precision" else kind


def blamed_op(sig: str) -> str | None:
    """The op a value mismatch's signature blames ("values in Softmax output": Softmax);
    None for any other signature."""
    parts = sig.split("|", 3)
    if len(parts) < 4 or parts[1] != Verdict.MISMATCH or " in " not in parts[3]:
        return None
    return parts[3].split(" in ", 1)[1].removesuffix(" output")


def root_signature(sig: str) -> str:
    """``sig`` with a precision mismatch's kind as a wrong value's (``root_kind``): the
    signature one op's wrong value has whichever side of the tolerance it fell."""
    backend, verdict, stage, detail = (sig.split("|", 3) + ["", "", ""])[:4]
    if verdict != Verdict.MISMATCH:
        return sig
    kind, sep, rest = detail.partition(" in ")
    return f"{backend}|{verdict}|{stage}|{root_kind(kind)}{sep}{rest}"


# The kinds of one op's wrong output: "precision" is "values" inside the end-to-end
# tolerance (``root_kind``), and "shape" is what a wrong value is where the values decide
# the shape: onnx2torch's untransposed NonZero is [N, rank] for [rank, N], a wrong shape,
# and a wrong value where N is the rank (four bundles of one bug, two reductions kept a
# Slice or a GatherElements after it to keep "values").
OUTPUT_KINDS = ("values", "precision", "shape")


def kind_twins(sig: str) -> list[str]:
    """The signatures of the same op's wrong output of the other ``OUTPUT_KINDS`` ("values
    in X output" for "precision in X output", "shape in X output", ...); none for any other
    signature."""
    head, sep, detail = sig.rpartition("|")
    if not sep or sig.split("|", 2)[1:2] != [Verdict.MISMATCH]:
        return []
    kind, sep, rest = detail.partition(" in ")
    if not sep or kind not in OUTPUT_KINDS:
        return []
    return [f"{head}|{other} in {rest}" for other in OUTPUT_KINDS if other != kind]


def same_fault(a: str, b: str) -> bool:
    """Whether two signatures are one op's wrong output (``kind_twins``), or equal."""
    return a == b or a in kind_twins(b)


@functools.lru_cache(maxsize=8192)
def family(sig: str) -> str:
    """The root-cause family of a bug signature (``signature``): the same signature without
    op names, shapes, element types and numbers, so that one bug that shows through many
    ops (a TVM converter that mixes float32 constants into float16 graphs, a flaky kernel
    blamed on whichever node it hit) is one family. A crash with native frames is told by
    its signal or exit and those frames alone: where it died is the root cause, whatever
    its last words named. A wrong value carries no words: its family is its backend, stage
    and kind (values, shape, dtype); a precision finding is a wrong value (``root_kind``).
    A second run's failure is of its first run's family (the same kernel's)."""
    backend, verdict, stage, detail = (sig.split("|", 3) + ["", "", ""])[:4]
    # A flaky kernel is wrong on a first run or on a second alike: one family.
    stage = "run" if stage == "rerun" else stage
    if verdict == Verdict.MISMATCH:
        detail = root_kind(detail.split(" in ", 1)[0])
    elif " | at " in detail:
        head, _, frames = detail.partition(" | at ")
        detail = head.split(" | ", 1)[0] + " | at " + frames
    else:
        cut = len(detail) >= DETAIL_CHARS
        for rx, rep in _FAMILY_RULES:
            detail = rx.sub(rep, detail)
        # a Relax call's operands are whatever the model computed: R.OP(DT, R.OP(N, S)) is
        # R.OP (innermost first, until none is left)
        while (collapsed := _RELAX_CALL.sub("R.OP", detail)) != detail:
            detail = collapsed
        detail = _op_types().sub("OP", detail)
        if cut:  # up to the last whole word within FAMILY_CHARS
            detail = detail[: FAMILY_CHARS + 1].rsplit(" ", 1)[0]
    return f"{backend}|{verdict}|{stage}|{detail}"


def family_id(fam: str, names: dict[str, str] | None = None) -> str:
    """A short stable name for a family (``family``): the backend's display name (``names``,
    as in ``bug_id``), the verdict and a hash of the family."""
    backend, verdict, _ = (fam.split("|", 2) + ["", ""])[:3]
    if names and backend in names:
        backend = names[backend]
    backend = backend.rsplit("/", 1)[-1].replace(".py:", ":")
    safe = re.sub(r"[^A-Za-z0-9]+", "-", backend).strip("-")
    return f"{safe}-{verdict}-F{hashlib.sha1(fam.encode()).hexdigest()[:6]}"


def bug_id(sig: str, names: dict[str, str] | None = None) -> str:
    """A bundle's folder name: the backend's display name (``names``: label -> name, see
    ``onnxfuzz.backend.display_names``), the verdict, the stage and a hash."""
    backend, verdict, stage, _ = sig.split("|", 3)
    if names and backend in names:
        backend = names[backend]
    backend = backend.rsplit("/", 1)[-1].replace(".py:", ":")  # path/to/x.py:Cls -> x:Cls
    safe = re.sub(r"[^A-Za-z0-9]+", "-", backend).strip("-")
    return f"{safe}-{verdict}-{stage}-{hashlib.sha1(sig.encode()).hexdigest()[:8]}"
