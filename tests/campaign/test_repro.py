"""A bundle's repro.py tells the truth, run as a user runs it: `python repro.py` in a fresh
process, from a copy of the bundle, by an interpreter that has the backends' libraries but
cannot import onnxfuzz. REPRODUCES (1) only for the same failure, FIXED (0) once the backend
agrees with the stored reference outputs, DIFFERENT (4) otherwise, and SETUP ERROR (2) when
it cannot even load its backend: never REPRODUCES then."""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import shutil
import subprocess
import sysconfig
import venv
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE, Judgement, Verdict
from onnxfuzz.judge.signature import RULES, normalize
from onnxfuzz.run.campaign import Campaign, CampaignOptions
from onnxfuzz.store.bundle import Finding, write_bundle

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
X = {"x": np.linspace(-1.5, 1.5, 6, dtype=np.float32).reshape(2, 3)}
OUT = {"Relu": np.maximum(X["x"], 0), "Add": X["x"] + X["x"]}
REFERENCE = "ort:opt=none"  # its outputs are stored in the bundle

# Shipped adapters and the module whose absence makes them unavailable here.
SHIPPED = {
    "ort": "onnxruntime",
    "onnx-reference": "onnx",
    "tvm": "tvm",
    "torch": "onnx2torch",
    "torch-compile": "onnx2torch",
    "openvino": "openvino",
}

# An ad hoc adapter of a vendor's: one class whose device may be absent, one whose SDK is
# imported only when it compiles (the set-up check must find both before any verdict).
NPU = """
from onnx.reference import ReferenceEvaluator


class Npu:
    name = "npu"

    def __init__(self, device="npu0"):
        self.device = device

    def available(self):
        return None if self.device == "npu0" else f"no NPU device {self.device} here"

    def version(self):
        return "1.0"

    def supported_opsets(self):
        return (7, 26)

    def compile(self, model):
        return ReferenceEvaluator(model)

    def run(self, exe, inputs):
        return dict(zip(exe.output_names, exe.run(None, inputs)))


class LazyNpu(Npu):
    def compile(self, model):
        import npu_sdk_that_is_not_here

        return npu_sdk_that_is_not_here.compile(model)
"""


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An interpreter with this environment's libraries and without onnxfuzz: a private
    virtual environment whose site-packages names ours by path, so that none of our .pth
    files runs (onnxfuzz's editable install is one). Run with -I (no PYTHON* variables, no
    script folder on the path), its spawned children are the same."""
    root = tmp_path_factory.mktemp("standalone-python")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = next((root / "lib").glob("python*/site-packages"))
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "libraries.pth").write_text("".join(f"{p}\n" for p in paths))
    return root / "bin" / "python"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def _model(op: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    node = helper.make_node(op, ["x"] * (2 if op == "Add" else 1), ["y"])
    graph = helper.make_graph([node], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _bundle(
    root: Path,
    backend: str,
    judgement: Judgement,
    got: Outcome,
    reference_y: np.ndarray,
    op: str = "Relu",
    timeout: float = 60.0,
) -> Path:
    f = Finding(
        signature=f"{backend}|{judgement.verdict}|test",
        bug_id="bug",
        judgement=judgement,
        backend=backend,
        reference=REFERENCE,
        seed=0,
        opset=17,
        ops=[op],
        model=_model(op),
        inputs=X,
        outcomes={REFERENCE: Outcome(Status.OK, outputs={"y": reference_y}), backend: got},
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=timeout,
    )
    return write_bundle(root, f)


def _mismatch(root: Path, backend: str, reference_y: np.ndarray) -> Path:
    j = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "output y: 3/6 elements off")
    return _bundle(root, backend, j, Outcome(Status.OK, outputs={"y": OUT["Relu"]}), reference_y)


def _failure(
    root: Path,
    backend: str,
    message: str,
    stage: Stage = Stage.RUN,
    op: str = "Add",
    verdict: Verdict = Verdict.CRASH,
    timeout: float = 60.0,
) -> Path:
    j = Judgement(verdict, stage, message=message)
    status = Status.TIMEOUT if verdict == Verdict.TIMEOUT else Status.CRASH
    got = Outcome(status, stage, message=message)
    return _bundle(root, backend, j, got, OUT[op], op=op, timeout=timeout)


def _replace(old: str, new: str) -> Callable[[str], str]:
    def edit(script: str) -> str:
        assert old in script, old
        return script.replace(old, new)

    return edit


def _run(
    python: Path, bundle: Path, tmp: Path, edit: Callable[[str], str] | None = None
) -> subprocess.CompletedProcess:
    """``python -I repro.py`` in a fresh process, from a copy of the bundle."""
    copy = tmp / f"copy{len(list(tmp.glob('copy*')))}"
    shutil.copytree(bundle, copy)
    if edit is not None:
        script = copy / "repro.py"
        script.write_text(edit(script.read_text()))
    return subprocess.run(
        [str(python), "-I", "repro.py"],
        cwd=copy,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _check(r: subprocess.CompletedProcess, code: int, word: str) -> None:
    lines = r.stdout.splitlines()
    ok = r.returncode == code and len(lines) == 1 and lines[0].startswith(word + ":")
    assert ok, (r.returncode, r.stdout, r.stderr[-3000:])


def test_the_standalone_python_has_the_libraries_but_not_onnxfuzz(python) -> None:
    probe = (
        "import importlib.util as u\n"
        "for m in ('onnxfuzz', 'backends'):\n"
        "    assert u.find_spec(m) is None, m\n"
        "import numpy, onnx, onnxruntime\n"
    )
    r = subprocess.run(
        [str(python), "-I", "-c", probe], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("label", sorted(SHIPPED))
def test_every_shipped_adapter_reproduces_and_reports_fixed(python, label, tmp_path) -> None:
    if importlib.util.find_spec(SHIPPED[label]) is None:
        pytest.skip(f"{SHIPPED[label]} is not installed: the {label} adapter cannot run here")
    # The bundle's stored reference outputs are off: the backend "differs" in values on y.
    bundle = _mismatch(tmp_path / "wrong", label, OUT["Relu"] + 1.0)
    _check(_run(python, bundle, tmp_path), 1, "REPRODUCES")
    # The same bundle, its stored reference outputs right: the backend agrees, fixed.
    bundle = _mismatch(tmp_path / "right", label, OUT["Relu"])
    _check(_run(python, bundle, tmp_path), 0, "FIXED")


def test_an_adhoc_adapter_crash_reproduces_and_a_fixed_one_is_fixed(python, tmp_path) -> None:
    label = f"{ADAPTERS}:Segfault:op=Add"
    bundle = _failure(tmp_path / "a", label, "killed by signal SIGSEGV")
    _check(_run(python, bundle, tmp_path), 1, "REPRODUCES")
    # The vendor fixes the bug: the adapter no longer crashes on Add.
    fixed = _replace("{'op': 'Add'}", "{'op': 'NoSuchOp'}")
    _check(_run(python, bundle, tmp_path, fixed), 0, "FIXED")
    # A worker dying of another signal is another bug.
    bundle = _failure(tmp_path / "b", label, "killed by signal SIGABRT")
    r = _run(python, bundle, tmp_path)
    _check(r, 4, "DIFFERENT")
    assert "SIGSEGV" in r.stdout


def test_an_adapter_that_cannot_load_is_a_setup_error(python, tmp_path) -> None:
    bundle = _failure(tmp_path, f"{ADAPTERS}:Segfault:op=Add", "killed by signal SIGSEGV")
    r = _run(python, bundle, tmp_path, _replace("import ctypes", "import npu_sdk_not_here"))
    _check(r, 2, "SETUP ERROR")
    assert "npu_sdk_not_here" in r.stdout


def test_a_backend_that_dies_while_loading_is_a_setup_error(python, tmp_path) -> None:
    # The spawned child dies of the very signal the bundle recorded, but before it has
    # loaded its adapter: this machine's problem, not the bug.
    bundle = _failure(tmp_path, f"{ADAPTERS}:Segfault:op=Add", "killed by signal SIGSEGV")
    die = (
        "import ctypes; import multiprocessing as _mp, os as _os, signal as _sig; "
        "_mp.parent_process() is None or _os.kill(_os.getpid(), _sig.SIGSEGV)"
    )
    r = _run(python, bundle, tmp_path, _replace("import ctypes", die))
    _check(r, 2, "SETUP ERROR")
    assert "while loading" in r.stdout and "SIGSEGV" in r.stdout


def test_a_missing_device_or_library_is_a_setup_error(python, tmp_path) -> None:
    (tmp_path / "npu.py").write_text(NPU)
    absent = _failure(tmp_path / "a", f"{tmp_path}/npu.py:Npu:device=npu7", "killed by signal 11")
    r = _run(python, absent, tmp_path)
    _check(r, 2, "SETUP ERROR")
    assert "no NPU device npu7 here" in r.stdout
    # An SDK imported inside compile(): found missing before the backend runs, even where
    # the bundle recorded the very error its absence gives.
    message = "ModuleNotFoundError: No module named 'npu_sdk_that_is_not_here'"
    lazy = _failure(tmp_path / "b", f"{tmp_path}/npu.py:LazyNpu", message, Stage.COMPILE)
    r = _run(python, lazy, tmp_path)
    _check(r, 2, "SETUP ERROR")
    assert "npu_sdk_that_is_not_here" in r.stdout


def test_a_crash_with_another_message_or_stage_is_different(python, tmp_path) -> None:
    label = f"{ADAPTERS}:Raise:op=Add"
    same = "RuntimeError: InternalError: lowering of Add failed at node 0x55aa"
    bundle = _failure(tmp_path / "a", label, same, Stage.COMPILE)
    _check(_run(python, bundle, tmp_path), 1, "REPRODUCES")
    other = "RuntimeError: InternalError: out of registers in the tiler"
    r = _run(python, _failure(tmp_path / "b", label, other, Stage.COMPILE), tmp_path)
    _check(r, 4, "DIFFERENT")
    assert "lowering of Add failed" in r.stdout and "out of registers" in r.stdout
    # and a crash recorded at another stage is not this one either
    r = _run(python, _failure(tmp_path / "c", label, same, Stage.RUN), tmp_path)
    _check(r, 4, "DIFFERENT")


def test_a_ragged_output_reproduces_in_the_workers_words(python, tmp_path) -> None:
    """Found in a campaign: the reference evaluator returned a list of arrays of different
    shapes for a tensor output. The worker says so in words; repro.py said numpy's
    "inhomogeneous shape" instead, so the bundle read DIFFERENT."""
    label = f"{ADAPTERS}:RaggedOutput:op=Add"
    with BackendPool([label]) as pool:
        got = pool.run_one(label, _model("Add").SerializeToString(), X)
    assert got.status == Status.ERROR and "arrays of different shapes" in got.message, got
    bundle = _failure(tmp_path / "a", label, got.message, got.stage)
    _check(_run(python, bundle, tmp_path), 1, "REPRODUCES")
    # the vendor fixes it: the adapter returns one array again
    fixed = _replace("{'op': 'Add'}", "{'op': 'NoSuchOp'}")
    _check(_run(python, bundle, tmp_path, fixed), 0, "FIXED")


def test_a_mismatch_of_another_kind_is_different(python, tmp_path) -> None:
    j = Judgement(Verdict.MISMATCH, Stage.RUN, "shape", "y", "output y: shape [3, 2] vs [2, 3]")
    got = Outcome(Status.OK, outputs={"y": OUT["Relu"]})
    bundle = _bundle(tmp_path, "ort", j, got, OUT["Relu"] + 1.0)
    _check(_run(python, bundle, tmp_path), 4, "DIFFERENT")


def test_a_hang_reproduces_as_a_timeout_and_a_rejection_is_different(python, tmp_path) -> None:
    hang = _failure(
        tmp_path / "a",
        f"{ADAPTERS}:Hang:op=Add",
        "no result within 1 s (on the worker's clock: compile 1.0 s, run 0.0 s)",
        Stage.COMPILE,
        verdict=Verdict.TIMEOUT,
        timeout=1.0,
    )
    _check(_run(python, hang, tmp_path), 1, "REPRODUCES")
    # The backend now says it does not implement Add (its is_unsupported reading, as
    # onnxfuzz's worker makes it): not the recorded crash, and not fixed either.
    message = "NotImplementedError: Add is not implemented"
    rejects = _failure(tmp_path / "b", f"{ADAPTERS}:Unsupported:op=Add", message, Stage.COMPILE)
    r = _run(python, rejects, tmp_path)
    _check(r, 4, "DIFFERENT")
    assert "unsupported" in r.stdout


def _one_bundle(tmp_path: Path, label: str) -> Path:
    """The one bundle a 15-test campaign of ``ort`` against ``label`` (small float32 models
    of Add, Relu, Mul, Sigmoid, Tanh) files."""
    opts = CampaignOptions(
        backends=["ort", label],
        tests=15,
        seed=0,
        timeout=10.0,
        generator={
            "min_nodes": 2,
            "max_nodes": 5,
            "ops": ["Add", "Relu", "Mul", "Sigmoid", "Tanh"],
            "dtypes": ["float32"],
        },
    )
    c = Campaign(tmp_path / "camp", opts, resume=False)
    c.start()
    try:
        c.run()
    finally:
        c.close()
    bundles = sorted((c.out / "bugs").iterdir())
    assert len(bundles) == 1, bundles
    return bundles[0]


def test_a_campaigns_bundle_and_its_reduction_reproduce_standalone(python, tmp_path) -> None:
    bundle = _one_bundle(tmp_path, f"{ADAPTERS}:WrongOp:op=Sigmoid")
    assert (bundle / "reduced" / "repro.py").exists()
    _check(_run(python, bundle, tmp_path), 1, "REPRODUCES")
    # reduced/ stores no reference outputs: its repro.py runs the reference (ort) itself
    _check(_run(python, bundle / "reduced", tmp_path), 1, "REPRODUCES")
    fixed = _replace("'op': 'Sigmoid'", "'op': 'NoSuchOp'")
    _check(_run(python, bundle, tmp_path, fixed), 0, "FIXED")


def test_the_normalization_is_onnxfuzzs(tmp_path) -> None:
    message = "RuntimeError: node add3_out at 0x7ffd12 failed\n  File /a/b/x.py:12, 'in3'"
    bundle = _failure(tmp_path, "ort", message)
    ns = runpy.run_path(str(bundle / "repro.py"))  # defines, does not run (not __main__)
    assert ns["RULES"] == [(p.pattern, r) for p, r in RULES]
    assert ns["EXPECT"]["message"] == normalize(message)
    # OpenVINO's: lines that say only where the error passed go, the type stays
    openvino = (
        "RuntimeError: Exception from src/inference/src/cpp/core.cpp:105:\nCheck 'false' "
        "failed at src/frontends/x.cpp:151:\nFrontEnd API failed with OpConversionFailure:\n"
        "Model wasn't fully converted. Failed operations detailed log:\n-- Resize-21 with a "
        "message:\nWhile validating ONNX node '<Node(Resize): resize0>': Check 'a < b' failed "
        "at src/core/y.hpp:57:\nAll axes values should less than input rank: 4"
    )
    where_only = "RuntimeError: Exception from src/inference/src/cpp/core.cpp:117:"
    samples = [message, "killed by signal SIGSEGV", "\x1b[31mCheck failed: 2 == 3\x1b[0m", ""]
    samples += [openvino, where_only]
    assert normalize(openvino).startswith("RuntimeError: -- ResizeN with a message: | All axes")
    assert [ns["normalize"](s) for s in samples] == [normalize(s) for s in samples]


@pytest.mark.parametrize(
    ("adapter", "stage", "kind"),
    [("SecondRunWrong", "rerun", "values"), ("WritesIntoInputs", "run", "input")],
)
def test_a_bug_no_single_run_shows_is_filed_once_reduced_and_reproduces(
    python, tmp_path, adapter, stage, kind
) -> None:
    """A compiled model right on its first run and wrong on its second (a buffer not reset),
    and a run that writes into the caller's input arrays: both found by running each
    compiled model twice, filed once, reduced to the one op, and repro.py (which runs the
    model twice too) reproduces them from a copy and reads FIXED once they are gone."""
    bundle = _one_bundle(tmp_path, f"{ADAPTERS}:{adapter}:op=Sigmoid")
    meta = json.loads((bundle / "meta.json").read_text())
    assert (meta["stage"], meta["kind"], meta["reproducibility"]) == (stage, kind, "deterministic")
    reduced = onnx.load(str(bundle / "reduced" / "model.onnx"))
    assert [n.op_type for n in reduced.graph.node] == ["Sigmoid"]
    for folder in (bundle, bundle / "reduced"):
        _check(_run(python, folder, tmp_path), 1, "REPRODUCES")
    fixed = _replace("'op': 'Sigmoid'", "'op': 'NoSuchOp'")
    _check(_run(python, bundle / "reduced", tmp_path, fixed), 0, "FIXED")
    issue = (bundle / "issue.md").read_text()
    assert "disagree" not in issue.splitlines()[0]  # the backend is at odds with itself
    words = "runs a second time" if stage == "rerun" else "writes into the caller's input"
    assert words in issue.splitlines()[0], issue.splitlines()[0]
