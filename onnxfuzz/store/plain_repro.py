"""``repro_plain.py``: the bug as the backend's own test would show it.

A short script (at most ``MAX_LINES`` lines) that imports only onnx, numpy and the culprit
backend's public API (ONNX Runtime's ``InferenceSession``; TVM's ``from_onnx`` ->
``tvm.compile`` -> ``relax.VirtualMachine``; ``onnx2torch.convert`` -> torch, and under
``torch.compile`` for torch-compile; OpenVINO's
``Core().read_model`` -> ``compile_model`` with the adapter's config; the ONNX reference
evaluator), loads ``model.onnx`` and ``test_data_set_0/input_*.pb`` beside it,
prints actual vs expected and exits 1 while the bug is there (0 once fixed). An exception
in the backend prints its traceback; it is the bug (exit 1) where it is the bug's own
error, its type and words as the bundle recorded them, and another failure (exit 4)
otherwise: a wrong result that now raises, or a crash that now raises something else. A
process crash kills the script (a signal exit, not 1): the backend's own crash is the
evidence.

Expected values come from the ONNX reference evaluator, run by the script, when it runs
the model and agrees with the comparison's reference backend; otherwise from that
backend's outputs, stored as ``test_data_set_0/output_<k>.pb`` (the ONNX test layout).
onnxfuzz's full ``repro.py`` (signature matching, sandboxing) stays beside it.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.generate.corpus.testdata import DATA_SET, write_outputs
from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE

NAME = "repro_plain.py"
MAX_LINES = 50
MAX_EVALUATOR_NODES = 40
_ORT_LEVELS = {
    "none": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_ALL",  # ORT_ENABLE_LAYOUT is missing from older wheels
    "all": "ORT_ENABLE_ALL",
}
_NO_WORKAROUND = "# optimizers to switch off (none: the bug is there)"
SHIPPED = ("ort", "ort-cuda", "tvm", "torch", "torch-compile", "openvino", "onnx-reference")
# A user adapter's class attribute: Python source that compiles and runs a model with its
# backend's own API, which a plain reproducer embeds (docs/adapters.md). It is read from
# the adapter's source, never imported: the campaign process does not import adapters.
HOOK = "plain_reproducer"
HOOK_FUNCTIONS = {
    "compile_model": "compile_model(path, options)",
    "run_model": "run_model(compiled, inputs)",
}


def exit_note(verdict: str, signature: str) -> str:
    """How the plain reproducer ends while the bug is there, and once it is fixed: a
    process crash kills it (no exit 1 can be printed), a hang never ends."""
    if verdict == "crash" and ("killed by signal" in signature or "worker exited" in signature):
        return (
            "the backend's crash kills this process while the bug is there (a shell "
            "reports exit 128 + the signal: 134 SIGABRT, 139 SIGSEGV), exit 0 once it is fixed"
        )
    if verdict == "timeout":
        return "it hangs while the bug is there (Ctrl-C to stop it), exit 0 once it is fixed"
    if verdict == "crash":
        return (
            "exit 1 while the bug is there (the same error), 4 where it raises another, "
            "0 once it is fixed"
        )
    return "exit 1 while the bug is there, 4 where the backend raises instead, 0 once it is fixed"


def error_words(message: str) -> list[str]:
    """The words a plain reproducer looks for in the backend's exception to call it the
    bug's: its error type and the words of the first line of the recorded message, less
    what another machine or run may say otherwise (quoted names, paths, addresses)."""
    lines = message.strip().splitlines()
    line = lines[0] if lines else ""
    line = re.sub(r"'[^']*'|\"[^\"]*\"", " ", line)
    line = re.sub(r"0x[0-9a-fA-F]+|(/[\w.\-+]+)+", " ", line)
    return list(dict.fromkeys(re.findall(r"[A-Za-z]{3,}", line)))[:12]


# No expected values: the evaluator cannot run the model and no backend's outputs were
# kept. A crash's script always ran the evaluator, which failed, so it never said "fixed".
NO_EXPECTED = "none"


@dataclass
class PlainRepro:
    """What a plain reproducer needs to know about one bundle."""

    backend: str  # the culprit's label, e.g. "ort", "tvm:opt_level=2"
    title: str  # one line: what goes wrong
    tolerance: dict[str, tuple[float, float]] = field(
        default_factory=lambda: dict(DEFAULT_TOLERANCE)
    )
    # where expected values come from: "reference" (the evaluator, run by the script), a
    # sentence naming the backend whose stored outputs (test_data_set_0/output_<k>.pb) it
    # reads, or NO_EXPECTED (none: a crash's script then checks that the model runs)
    expected: str = "reference"
    exits: str = exit_note("mismatch", "")  # how it ends (``exit_note``)
    # where the bug shows: "rerun" (the same compiled model's second run) or "input" (the
    # run writes into the caller's input arrays); "": one run's outputs
    shows: str = ""
    # the bug's own exception (``error_words``); None where the bug is no exception, so
    # that any exception is another failure
    error: list[str] | None = None
    # a user adapter's own code (``HOOK``, ``hook_source``); None for a shipped adapter
    hook: str | None = None


# The lines of each backend's script that run the compiled model (the rest compile it): a
# bug on the second run repeats them; the number counted from the end.
_RUN_LINES = {
    "ort": 1,
    "ort-cuda": 1,
    "tvm": 3,
    "torch": 4,
    "torch-compile": 4,
    "openvino": 5,
    "onnx-reference": 1,
    HOOK: 2,
}


def supported(label: str) -> bool:
    """Whether ``label`` is a shipped adapter this module writes a plain reproducer for."""
    try:
        ref = parse_backend(label)
    except BackendError:
        return False
    return ref.target in SHIPPED


def hook_source(source: str, cls_name: str, origin: str) -> str | None:
    """The ``HOOK`` of adapter class ``cls_name`` (or of a base class in the same module),
    read from its module's ``source``, dedented; None where it has none. A hook that is not
    a string literal, not Python, or without both ``HOOK_FUNCTIONS`` is refused, naming
    the adapter (``origin``) and what is wrong."""
    where = f"adapter {origin}: {HOOK}"
    try:
        body = ast.parse(source).body
    except SyntaxError:  # its import says so, where the campaign loads it
        return None
    classes = {n.name: n for n in body if isinstance(n, ast.ClassDef)}
    todo, seen = [cls_name], set()
    while todo:
        name = todo.pop(0)
        if name not in classes or name in seen:
            continue
        seen.add(name)
        for stmt in classes[name].body:
            target = (
                stmt.targets[0]
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                else stmt.target if isinstance(stmt, ast.AnnAssign) else None
            )
            if not (isinstance(target, ast.Name) and target.id == HOOK):
                continue
            value = getattr(stmt, "value", None)
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                raise BackendError(
                    f"{where} must be a string literal of Python source (onnxfuzz reads it "
                    "from the adapter's file without importing it), not an expression"
                )
            return _checked_hook(textwrap.dedent(value.value).strip("\n") + "\n", where)
        todo += [b.id for b in classes[name].bases if isinstance(b, ast.Name)]
    return None


def _checked_hook(code: str, where: str) -> str:
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise BackendError(f"{where} is not valid Python: line {e.lineno}: {e.msg}") from None
    defined = {
        n.name: len(n.args.args) for n in tree.body if isinstance(n, ast.FunctionDef)
    }
    wrong = [sig for name, sig in HOOK_FUNCTIONS.items() if defined.get(name, 0) < 2]
    if wrong:
        raise BackendError(
            f"{where} must define " + " and ".join(wrong) + " at its top level (path: the "
            "model file; options: the adapter's options, a dict of strings; inputs: a dict "
            "of numpy arrays by input name; run_model returns the outputs, a list in the "
            "model's output order or a dict by name)"
        )
    return code


def _run_hook(options: dict[str, str]) -> tuple[str, list[str]]:
    """A user adapter's ``HOOK`` (its functions are defined above the run)."""
    return "", [
        f"OPTIONS = {options!r}  # the adapter's options, as its label gave them",
        'compiled = compile_model(HERE / "model.onnx", OPTIONS)',
        "result = run_model(compiled, inputs)",
        "actual = [result[o.name] for o in model.graph.output] if isinstance(result, dict) "
        "else list(result)",
    ]


def _run_ort(label: str, options: dict[str, str]) -> tuple[str, list[str]]:
    level = _ORT_LEVELS.get(options.get("opt", "all"), "ORT_ENABLE_ALL")
    provider = "CUDAExecutionProvider" if label == "ort-cuda" else "CPUExecutionProvider"
    return "import onnxruntime as ort", [
        "options = ort.SessionOptions()",
        f"options.graph_optimization_level = ort.GraphOptimizationLevel.{level}",
        f"disabled = []  {_NO_WORKAROUND}",
        f'session = ort.InferenceSession(HERE / "model.onnx", options, ["{provider}"],',
        "                               disabled_optimizers=disabled)",
        "actual = session.run(None, inputs)",
    ]


def _run_tvm(options: dict[str, str]) -> tuple[str, list[str]]:
    target = options.get("target", "llvm")
    device = "tvm.cuda()" if target == "cuda" else "tvm.cpu()"
    level = int(options.get("opt_level", "3"))
    return "import tvm\nfrom tvm import relax\nfrom tvm.relax.frontend.onnx import from_onnx", [
        "mod = from_onnx(model, keep_params_in_input=False)",
        f'with tvm.target.Target("{target}"), tvm.transform.PassContext(opt_level={level}):',
        f'    vm = relax.VirtualMachine(tvm.compile(mod, target="{target}"), {device})',
        f'result = vm["main"](*[tvm.runtime.tensor(a, {device}) for a in args])',
        "result = list(result) if len(model.graph.output) > 1 else [result]",
        'actual = [r.numpy() if hasattr(r, "numpy") else np.asarray(r) for r in result]  # Shape',
    ]


def _run_torch(compiled: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """onnx2torch's module; ``compiled`` (torch-compile's options): under torch.compile as
    the adapter (backends/torch.py) compiles it, its mode and backend as the label says."""
    compile_ = []
    if compiled is not None:
        mode, backend = compiled.get("mode", "default"), compiled.get("backend", "inductor")
        compile_ = [
            f'module = torch.compile(module, mode="{mode}", backend="{backend}", dynamic=False)'
        ]
    return "import onnx2torch\nimport torch", [
        'module = onnx2torch.convert(onnx.load(HERE / "model.onnx")).eval()',
        *compile_,
        "with torch.no_grad():",
        "    result = module(*[torch.from_numpy(a.copy()) for a in args])",
        "result = list(result) if len(model.graph.output) > 1 else [result]",
        "actual = [np.asarray(r) for r in result]  # a tuple for one output: shape [1, ...]",
    ]


def _run_openvino(options: dict[str, str]) -> tuple[str, list[str]]:
    """The adapter's (backends/openvino.py) compile and run: its options as the bundle's
    label records them, with its defaults (f32: OpenVINO otherwise runs f32 models in bf16
    on CPUs with AMX or AVX512-BF16; one thread); bfloat16 in and out as raw bits."""
    device = options.get("device", "CPU")
    config: dict[str, str | int] = {"INFERENCE_PRECISION_HINT": options.get("precision", "f32")}
    if device == "CPU":
        config["INFERENCE_NUM_THREADS"] = int(options.get("threads", "1"))
    return "import openvino as ov", [
        f"core, config = ov.Core(), {config!r}",
        f'compiled = core.compile_model(core.read_model(HERE / "model.onnx"), "{device}", config)',
        "request = compiled.create_infer_request()  # bfloat16 in and out as raw bits, else",
        "bf16 = onnx.helper.tensor_dtype_to_np_dtype(onnx.TensorProto.BFLOAT16)  # it goes via f16",
        "request.infer({p: ov.Tensor(a.view(np.uint16), a.shape, ov.Type.bf16) if a.dtype == bf16",
        "               else ov.Tensor(a) for p, a in zip(compiled.inputs, args)})",
        "outs = [request.get_tensor(port) for port in compiled.outputs]",
        "actual = [np.array(t.data).view(np.uint16).view(bf16) if t.element_type == ov.Type.bf16",
        "          else np.array(t.data) for t in outs]",
    ]


def render(p: PlainRepro, output_dtypes: list[str]) -> str:
    """The script's text; ``output_dtypes``: the model's output element types (numpy
    names), whose tolerances it carries."""
    ref = parse_backend(p.backend)
    options = dict(ref.options)
    if ref.target in ("ort", "ort-cuda"):
        imports, run = _run_ort(ref.target, options)
    elif ref.target == "tvm":
        imports, run = _run_tvm(options)
    elif ref.target == "torch":
        imports, run = _run_torch()
    elif ref.target == "torch-compile":
        imports, run = _run_torch(options)
    elif ref.target == "openvino":
        imports, run = _run_openvino(options)
    elif ref.target == "onnx-reference":
        imports = ""
        run = ["evaluator = ReferenceEvaluator(model)", "actual = evaluator.run(None, inputs)"]
    elif p.hook is not None:
        imports, run = _run_hook(options)
    else:
        raise BackendError(f"no plain reproducer for backend {p.backend!r}")
    by_evaluator = p.expected == "reference" and ref.target != "onnx-reference"
    if p.expected == NO_EXPECTED:
        expect = [
            "# expected: none (the ONNX reference evaluator cannot run this model and no",
            "# other backend's outputs were kept): it runs, so the bug is gone",
            "expected = []",
        ]
    elif by_evaluator:
        expect = ["expected = ReferenceEvaluator(model).run(None, inputs)  # the ONNX spec's"]
    else:
        source = p.expected if p.expected != "reference" else "the stored outputs"
        expect = [
            f"# expected: {source}",
            'expected = [numpy_helper.to_array(onnx.load_tensor(data / f"output_{k}.pb"))',
            "            for k in range(len(model.graph.output))]",
        ]
    tol = {k: tuple(v) for k, v in sorted(p.tolerance.items()) if k in output_dtypes}
    check_inputs: list[str] = []
    if p.shows == "rerun":
        k = len(run) - _RUN_LINES[ref.target if ref.target in SHIPPED else HOOK]
        once = [f"    {line}" for line in run[k:]]
        twice = "for _ in range(2):  # the same compiled model, run twice: the second is wrong"
        run = [*run[:k], twice, *once]
    elif p.shows == "input":
        run = ["before = {k: v.copy() for k, v in inputs.items()}", *run]
        check_inputs = [
            "written = [k for k, v in inputs.items() if v.tobytes() != before[k].tobytes()]",
            'print("input arrays the run wrote into (the bug):", written or "none")',
            "bug = bug or bool(written)",
        ]
    evaluator = by_evaluator or ref.target == "onnx-reference"
    if p.error is not None:
        raised = [
            f"    sys.exit(1 if all(w in said for w in {p.error!r}) else 4)  # 4: not the bug's"
        ]
    else:
        raised = ["    sys.exit(4)  # another failure than this bug's"]
    # the whole chain, as printed: an adapter may raise the error inside (the evaluator's
    # of a node in an If body is the wrapper's cause)
    said = [
        "    said = ''.join(traceback.format_exception(e))",
        "    print(said, file=sys.stderr)",
    ]
    run = [
        "try:",
        *[f"    {line}" for line in run],
        "except Exception as e:  # the backend raised",
        *(said if p.error is not None else ["    traceback.print_exc()"]),
        *raised,
    ]
    lines = [
        f'"""{p.title}',
        f'{p.exits[0].upper()}{p.exits[1:]}."""',
        "import sys",
        "import traceback",
        "from pathlib import Path",
        "",
        "import numpy as np",
        "import onnx",
        *([imports] if imports else []),
        "from onnx import numpy_helper",
        *(["from onnx.reference import ReferenceEvaluator"] if evaluator else []),
        "",
        *(
            [f"# the backend's own code (its adapter's {HOOK}):", p.hook.rstrip(), ""]
            if p.hook is not None
            else []
        ),
        "HERE = Path(__file__).resolve().parent",
        'model, data = onnx.load(HERE / "model.onnx"), HERE / "test_data_set_0"',
        'files = [data / f"input_{k}.pb" for k in range(len(list(data.glob("input_*.pb"))))]',
        "inputs = {t.name: numpy_helper.to_array(t) for t in map(onnx.load_tensor, files)}",
        *(["inputs = {k: v.copy() for k, v in inputs.items()}  # writable, as a caller's are"]
          if p.shows == "input" else []),
        "args = [inputs[i.name] for i in model.graph.input if i.name in inputs]  # in order",
        *run,
        *expect,
        f"TOLERANCE = {tol!r}  # (atol, rtol); other types must be equal",
        "bug = len(actual) != len(expected)" if p.expected != NO_EXPECTED else "bug = False",
        "for out, a, e in zip(model.graph.output, map(np.asarray, actual), expected):",
        '    print(f"{out.name}: actual   {a.dtype} {list(a.shape)}", a.ravel()[:8])',
        '    print(f"{out.name}: expected {e.dtype} {list(e.shape)}", e.ravel()[:8])',
        "    atol, rtol = TOLERANCE.get(str(e.dtype), (0, 0))",
        "    if a.dtype != e.dtype or a.shape != e.shape:",
        "        bug = True",
        "    elif (bad := ~np.isclose(a, e, rtol, atol, equal_nan=True) if atol else a != e)"
        ".any():",
        "        kind = object if a.dtype.kind in 'iu' else np.float64  # int64 past 2**53",
        "        err = np.abs(a.astype(kind) - e.astype(kind))[bad]",
        '        print(f"  {bad.sum()} of {a.size} differ, max abs error {err.max():.6g}")',
        "        bug = True",
        *check_inputs,
        "sys.exit(1 if bug else 0)",
    ]
    return "\n".join(lines) + "\n"


def set_workaround(script: Path, optimizers: list[str]) -> None:
    """Name ONNX Runtime optimizers whose disabling was seen to avoid the bug in the
    script's ``disabled`` line, as a comment: the script still shows the bug."""
    old = f"disabled = []  {_NO_WORKAROUND}"
    new = f"disabled = []  # workaround: disabled = {optimizers!r} avoids the bug"
    script.write_text(script.read_text().replace(old, new))


def reference_agrees(
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    stored: dict[str, np.ndarray] | None,
    tolerance: dict[str, tuple[float, float]],
) -> bool:
    """Whether the ONNX reference evaluator runs ``model`` and gives ``stored`` (the
    comparison reference's outputs) within ``tolerance``; with nothing stored, whether it
    runs at all. Reduced models are a few nodes: this takes milliseconds; a model of more
    than ``MAX_EVALUATOR_NODES`` nodes is not tried (its stored outputs are used)."""
    from onnx.reference import ReferenceEvaluator

    if len(model.graph.node) > MAX_EVALUATOR_NODES:
        return False  # pure Python: a large original model could take the campaign minutes
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            got = ReferenceEvaluator(model).run(None, inputs)
    except Exception:  # noqa: BLE001 - any failure means: not the source of expected values
        return False
    if stored is None:
        return True
    for out, value in zip(model.graph.output, got, strict=False):
        want = stored.get(out.name)
        if want is None:
            continue
        if not isinstance(value, np.ndarray | np.generic):
            # not a tensor where the graph declares one (onnx 1.23's evaluator gives
            # SequenceAt's whole sequence, a list, after Optional -> OptionalGetElement)
            return False
        a, e = np.asarray(value), np.asarray(want)
        if a.dtype != e.dtype or a.shape != e.shape:
            return False
        atol, rtol = tolerance.get(str(e.dtype), (0.0, 0.0))
        same = np.isclose(a, e, rtol, atol, equal_nan=True) if atol else a == e
        if not np.all(same):
            return False
    return True


def output_dtypes(model: onnx.ModelProto) -> list[str]:
    """The numpy names of the model's output element types (bfloat16 as ml_dtypes names it)."""
    names = []
    for out in model.graph.output:
        try:
            names.append(
                np.dtype(onnx.helper.tensor_dtype_to_np_dtype(out.type.tensor_type.elem_type)).name
            )
        except (KeyError, TypeError, ValueError):
            continue
    return names


def write_plain(
    folder: Path,
    p: PlainRepro,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    stored: dict[str, np.ndarray] | None,
    reference_name: str,
) -> Path:
    """``folder/repro_plain.py`` beside ``folder/model.onnx`` and its inputs. ``stored``:
    the comparison reference's outputs on this model (None: none kept). Where the ONNX
    reference evaluator does not give them (or is the culprit), they are written as
    ``test_data_set_0/output_<k>.pb`` and the script reads them."""
    evaluator_ok = parse_backend(p.backend).target != "onnx-reference" and reference_agrees(
        model, inputs, stored, p.tolerance
    )
    if not evaluator_ok and stored is not None:
        write_outputs(folder / DATA_SET, model, stored)
        p.expected = f"{reference_name}'s outputs (the ONNX reference evaluator disagrees or fails)"
    elif not evaluator_ok and p.expected == "reference" and not p.shows:
        p.expected = NO_EXPECTED
    path = folder / NAME
    path.write_text(render(p, output_dtypes(model)))
    return path
