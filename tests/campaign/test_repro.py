"""A bundle's repro.py tells the truth, run as a user runs it: `python repro.py` in a fresh
process, from a copy of the folder, with onnxfuzz not importable. REPRODUCES (1) only for
the same failure, FIXED (0) once the backend agrees, DIFFERENT (4) otherwise, and SETUP
ERROR (2) when it cannot even load its backend — never REPRODUCES then."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE, Judgement, Verdict
from onnxfuzz.store.bundle import Finding, write_bundle

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
X = {"x": np.linspace(-1.5, 1.5, 6, dtype=np.float32).reshape(2, 3)}
RELU = np.maximum(X["x"], 0)
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


def _relu_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _bundle(
    root: Path, backend: str, judgement: Judgement, got: Outcome, reference_y: np.ndarray
) -> Path:
    model = _relu_model()
    f = Finding(
        signature=f"{backend}|{judgement.verdict}|test",
        bug_id="bug",
        judgement=judgement,
        backend=backend,
        reference=REFERENCE,
        seed=0,
        opset=17,
        ops=["Relu"],
        model=model,
        inputs=X,
        outcomes={REFERENCE: Outcome(Status.OK, outputs={"y": reference_y}), backend: got},
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=60.0,
    )
    return write_bundle(root, f)


def _mismatch(root: Path, backend: str, reference_y: np.ndarray) -> Path:
    j = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "output y: 3/6 elements off")
    return _bundle(root, backend, j, Outcome(Status.OK, outputs={"y": RELU}), reference_y)


def _crash(root: Path, backend: str, message: str, stage: Stage = Stage.RUN) -> Path:
    j = Judgement(Verdict.CRASH, stage, message=message)
    return _bundle(root, backend, j, Outcome(Status.CRASH, stage, message=message), RELU)


def _run(bundle: Path, tmp: Path, edit=None) -> subprocess.CompletedProcess:
    """``python repro.py`` in a fresh process, from a copy, without onnxfuzz importable."""
    copy = tmp / f"copy{len(list(tmp.iterdir()))}"
    shutil.copytree(bundle, copy)
    if edit is not None:
        script = copy / "repro.py"
        script.write_text(edit(script.read_text()))
    blocker = tmp / "no-onnxfuzz" / "onnxfuzz"
    blocker.mkdir(parents=True, exist_ok=True)
    (blocker / "__init__.py").write_text("raise ImportError('onnxfuzz is not installed here')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(blocker.parent)  # shadows the installed onnxfuzz
    return subprocess.run(
        [sys.executable, "repro.py"], cwd=copy, env=env, capture_output=True, text=True, timeout=600
    )


def _check(r: subprocess.CompletedProcess, code: int, word: str) -> None:
    assert r.returncode == code and r.stdout.startswith(word), (r.returncode, r.stdout, r.stderr)


@pytest.mark.parametrize("label", sorted(SHIPPED))
def test_every_shipped_adapter_reproduces_and_reports_fixed(label, tmp_path) -> None:
    if importlib.util.find_spec(SHIPPED[label]) is None:
        pytest.skip(f"{SHIPPED[label]} is not installed: the {label} adapter cannot run here")
    # The bundle's reference outputs are off: the backend "differs" in values on y.
    bundle = _mismatch(tmp_path / "wrong", label, RELU + 1.0)
    _check(_run(bundle, tmp_path), 1, "REPRODUCES")
    # The same bundle once the backend agrees with the reference: fixed.
    bundle = _mismatch(tmp_path / "right", label, RELU)
    _check(_run(bundle, tmp_path), 0, "FIXED")


def test_an_adhoc_adapter_crash_reproduces_and_a_fixed_one_is_fixed(tmp_path) -> None:
    label = f"{ADAPTERS}:Segfault:op=Relu"
    bundle = _crash(tmp_path, label, "killed by signal SIGSEGV")
    _check(_run(bundle, tmp_path), 1, "REPRODUCES")
    # The vendor fixes the bug: the adapter no longer crashes on Relu.
    fixed = _run(bundle, tmp_path, lambda s: s.replace("{'op': 'Relu'}", "{'op': 'NoSuchOp'}"))
    _check(fixed, 0, "FIXED")


def test_an_adapter_that_cannot_load_is_a_setup_error_not_a_reproduction(tmp_path) -> None:
    bundle = _crash(tmp_path, f"{ADAPTERS}:Segfault:op=Relu", "killed by signal SIGSEGV")

    def break_import(script: str) -> str:
        return script.replace("import ctypes", "import npu_sdk_that_is_not_here", 1)

    r = _run(bundle, tmp_path, break_import)
    _check(r, 2, "SETUP ERROR")
    assert "npu_sdk_that_is_not_here" in r.stdout and "REPRODUCES" not in r.stdout


def test_a_crash_with_another_message_is_different(tmp_path) -> None:
    label = f"{ADAPTERS}:Raise:op=Relu"
    same = "RuntimeError: InternalError: lowering of Relu failed at node 0x55aa"
    _check(_run(_crash(tmp_path / "a", label, same, Stage.COMPILE), tmp_path), 1, "REPRODUCES")
    other = "RuntimeError: InternalError: out of registers in the tiler"
    r = _run(_crash(tmp_path / "b", label, other, Stage.COMPILE), tmp_path)
    _check(r, 4, "DIFFERENT")
    # and a crash recorded at another stage is not this one either
    r = _run(_crash(tmp_path / "c", label, same, Stage.RUN), tmp_path)
    _check(r, 4, "DIFFERENT")


def test_a_mismatch_on_another_output_or_kind_is_different(tmp_path) -> None:
    j = Judgement(Verdict.MISMATCH, Stage.RUN, "shape", "y", "output y: shape [3, 2] vs [2, 3]")
    bundle = _bundle(tmp_path, "ort", j, Outcome(Status.OK, outputs={"y": RELU}), RELU + 1.0)
    _check(_run(bundle, tmp_path), 4, "DIFFERENT")


def test_the_normalization_rules_are_onnxfuzzs(tmp_path) -> None:
    from onnxfuzz.judge.signature import RULES

    bundle = _crash(tmp_path, "ort", "RuntimeError: x")
    text = (bundle / "repro.py").read_text()
    rules = re.search(r"^RULES = (.*)$", text, re.M)
    assert rules is not None and eval(rules.group(1)) == [(p.pattern, r) for p, r in RULES]
