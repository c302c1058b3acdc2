"""A bundle's ``repro_plain.py`` is the backend's own test: at most 50 lines, importing only
onnx, numpy and the culprit backend's public API, run from a copy of the script with its
model and inputs alone, by an interpreter that cannot import onnxfuzz. Exit 1 while the
bug is there, 0 once it is not, for every shipped adapter, on real bugs of the real
backends (ONNX Runtime's Relu->Clip fusion, TVM's float16 Acos, onnx2torch's Clip dtype)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE, Judgement, Verdict
from onnxfuzz.run.culprit import annotate, find_culprit
from onnxfuzz.store.bundle import Finding, write_bundle
from onnxfuzz.store.issue import write_issue
from onnxfuzz.store.plain_repro import MAX_LINES, NAME

REFERENCE = "ort:opt=none"
# what each shipped adapter's script may import besides onnx, numpy and the standard library
API = {
    "ort": {"onnxruntime"},
    "tvm": {"tvm"},
    "torch": {"torch", "onnx2torch"},
    "torch-compile": {"torch", "onnx2torch"},
    "openvino": {"openvino"},
}


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment that sees this environment's libraries by path (a .pth
    line naming our site-packages: the .pth files there, onnxfuzz's editable finder among
    them, are not run), so onnxfuzz cannot be imported. Run with -I."""
    root = tmp_path_factory.mktemp("no-onnxfuzz")
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    site = next((root / "lib").glob("python*/site-packages"))
    paths = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "libraries.pth").write_text("".join(f"{p}\n" for p in paths))
    return root / "bin" / "python"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


def _model(
    nodes: list[onnx.NodeProto],
    x: tuple[int, list[int]],
    y: tuple[int, list[int]],
    initializers: list[onnx.TensorProto] | None = None,
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", x[0], x[1])],
        [helper.make_tensor_value_info("y", y[0], y[1])],
        initializers or [],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _relu_clip(dtype: int) -> onnx.ModelProto:
    """Relu -> Clip with int32 bounds: ORT's FuseReluClip rewrite rule throws on the bounds'
    type at session creation (relu_clip_fusion.cc); float bounds are fused fine."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    bounds = [
        helper.make_tensor("lo", dtype, [], np.array([-5], np_type)),
        helper.make_tensor("hi", dtype, [], np.array([3], np_type)),
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Clip", ["r", "lo", "hi"], ["y"]),
    ]
    return _model(nodes, (dtype, [4]), (dtype, [4]), bounds)


def _unary(op: str, dtype: int) -> onnx.ModelProto:
    return _model([helper.make_node(op, ["x"], ["y"])], (dtype, [2, 3]), (dtype, [2, 3]))


def _clip(dtype: int) -> onnx.ModelProto:
    """Clip with bounds: onnx2torch's converter reads them with float(), and the result
    comes back float32 for an integer input."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    bounds = [
        helper.make_tensor("lo", dtype, [], np.array([0], np_type)),
        helper.make_tensor("hi", dtype, [], np.array([3], np_type)),
    ]
    nodes = [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])]
    return _model(nodes, (dtype, [2, 3]), (dtype, [2, 3]), bounds)


def _inputs(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    t = model.graph.input[0].type.tensor_type
    shape = [d.dim_value for d in t.shape.dim]
    values = np.linspace(-0.9, 0.9, int(np.prod(shape))).reshape(shape)
    if t.elem_type in (TensorProto.INT32, TensorProto.INT64):
        values = np.arange(-3, -3 + int(np.prod(shape))).reshape(shape)
    return {"x": values.astype(helper.tensor_dtype_to_np_dtype(t.elem_type))}


def _bundle(
    root: Path,
    backend: str,
    model: onnx.ModelProto,
    judgement: Judgement,
    reference_y: np.ndarray | None = None,
    signature: str | None = None,
) -> Path:
    """A bundle as the campaign writes it; the reference's stored outputs are ORT's without
    optimizations unless ``reference_y`` plants others."""
    import onnxruntime as ort

    inputs = _inputs(model)
    y = reference_y
    if y is None:  # ORT has no kernel for some types (bfloat16 Neg): those plant theirs
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        providers = ["CPUExecutionProvider"]
        y = ort.InferenceSession(model.SerializeToString(), options, providers).run(None, inputs)[0]
    if judgement is CRASH:  # the backend's own error, as the campaign records it
        judgement = Judgement(Verdict.CRASH, Stage.COMPILE, message=_raised(backend, model))
    f = Finding(
        signature=signature or f"{backend}|{judgement.verdict}|test",
        bug_id="bug",
        judgement=judgement,
        backend=backend,
        reference=REFERENCE,
        seed=0,
        opset=17,
        ops=[n.op_type for n in model.graph.node],
        model=model,
        inputs=inputs,
        outcomes={
            REFERENCE: Outcome(Status.OK, outputs={"y": y}),
            backend: Outcome(Status.CRASH, judgement.stage, message=judgement.message),
        },
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=60.0,
    )
    return write_bundle(root, f)


def _raised(backend: str, model: onnx.ModelProto) -> str:
    """What the backend raises on ``model`` (compiling it, then running it on the test's
    inputs) as the sandbox words it; "the backend threw" where it raises nothing here (a
    backend this machine lacks)."""
    from onnxfuzz.backend import load_backend

    try:
        adapter = load_backend(backend)
        adapter.run(adapter.compile(model), _inputs(model))
    except Exception as e:  # noqa: BLE001 - the error the finding is about
        return f"{type(e).__name__}: {e}"
    return "the backend threw"


def _run(python: Path, bundle: Path, tmp: Path, edit: tuple[str, str] | None = None):
    """``python -I repro_plain.py`` from a folder holding only it, the model and inputs."""
    copy = tmp / f"copy{len(list(tmp.glob('copy*')))}"
    copy.mkdir()
    for name in (NAME, "model.onnx"):
        shutil.copy(bundle / name, copy / name)
    shutil.copytree(bundle / "test_data_set_0", copy / "test_data_set_0")
    if edit is not None:
        script = (copy / NAME).read_text()
        assert edit[0] in script, edit[0]
        (copy / NAME).write_text(script.replace(*edit))
    return subprocess.run(
        [str(python), "-I", NAME],
        cwd=copy,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _plain(bundle: Path, backend: str) -> str:
    """The script, checked: short, and its imports only onnx, numpy, the standard library
    and the backend's own API."""
    script = (bundle / NAME).read_text()
    assert len(script.splitlines()) <= MAX_LINES, script
    allowed = {"onnx", "numpy", *API.get(backend, set())}
    for node in ast.walk(ast.parse(script)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        for name in names:
            top = name.split(".")[0]
            assert top in allowed or top in sys.stdlib_module_names, (name, script)
    return script


CRASH = Judgement(Verdict.CRASH, Stage.COMPILE, message="the backend threw")
DTYPE = Judgement(Verdict.MISMATCH, Stage.RUN, "dtype", "y", "dtype float32, declared int32")


def test_the_fresh_python_has_the_libraries_but_not_onnxfuzz(python) -> None:
    probe = "import onnxfuzz"
    r = subprocess.run([str(python), "-I", "-c", probe], env=_env(), capture_output=True)
    assert r.returncode == 1 and b"No module named 'onnxfuzz'" in r.stderr, r.stderr
    probe = "import numpy, onnx, onnxruntime, tvm, torch, onnx2torch"
    r = subprocess.run([str(python), "-I", "-c", probe], env=_env(), capture_output=True)
    assert r.returncode == 0, r.stderr


def test_ort_fusion_crash_exits_1_and_the_workaround_passes(python, tmp_path) -> None:
    bundle = _bundle(tmp_path / "b", "ort", _relu_clip(TensorProto.INT32), CRASH)
    script = _plain(bundle, "ort")
    assert "InferenceSession" in script and "ReferenceEvaluator" in script
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "FuseReluClip" in r.stderr, (r.stdout, r.stderr[-2000:])
    # the same script with that rewrite rule switched off: the bug is gone, values right
    r = _run(python, bundle, tmp_path, ("disabled = []", "disabled = ['FuseReluClip']"))
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    assert "y: actual   int32 [4] [0 0 0 0]" in r.stdout, r.stdout


def test_another_error_than_the_bugs_exits_4_not_1(python, tmp_path) -> None:
    """A crash bundle's script exited 1 on any exception (a traceback), so a bug that now
    fails another way read as still there, and so did a wrong result that now raises:
    both exit 4 now, with the traceback; the bug's own error still exits 1."""
    crash = _bundle(tmp_path / "b", "ort", _relu_clip(TensorProto.INT32), CRASH)
    assert "'FuseReluClip'" in (crash / NAME).read_text()  # among the bug's error's words
    assert _run(python, crash, tmp_path).returncode == 1
    # the session made of a file that is not there: an error of ORT's own, not the bug's
    other = ('InferenceSession(HERE / "model.onnx"', 'InferenceSession(HERE / "gone.onnx"')
    r = _run(python, crash, tmp_path, other)
    assert r.returncode == 4 and "gone.onnx" in r.stderr, (r.stdout, r.stderr)
    # the wrong int32 Clip of onnx2torch, now raising: another failure than its wrong type
    wrong = _bundle(tmp_path / "c", "torch", _clip(TensorProto.INT32), DTYPE)
    assert _run(python, wrong, tmp_path).returncode == 1
    raises = ("for a in args])", "for a in args], None)")  # an input the module lacks
    r = _run(python, wrong, tmp_path, raises)
    assert r.returncode == 4 and "Traceback" in r.stderr, (r.returncode, r.stderr[-2000:])


def test_an_ort_process_crash_kills_the_script_and_both_say_so(python, tmp_path) -> None:
    """Found in a campaign: ORT segfaults running a blocked DequantizeLinear (5 elements,
    block_size 4) into MatMul, optimized. The script cannot exit 1 when the crash kills it:
    its docstring and issue.md say what it does instead (they said "exit 1")."""
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "qs"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "ds"], ["d"], axis=-1, block_size=4),
            helper.make_node("MatMul", ["d", "d"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", f32, [5])],
        [helper.make_tensor_value_info("y", f32, [])],
        [
            onnx.numpy_helper.from_array(np.array(0.5, np.float32), "qs"),
            onnx.numpy_helper.from_array(np.array([0.86, 0.42], np.float32), "ds"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    crash = Judgement(Verdict.CRASH, Stage.RUN, message="killed by signal SIGSEGV")
    signature = "ort|crash|run|killed by signal SIGSEGV | at run (ort.py)"
    bundle = _bundle(tmp_path / "b", "ort", model, crash, signature=signature)
    script = _plain(bundle, "ort")
    assert "kills this process" in script.splitlines()[1], script
    r = _run(python, bundle, tmp_path)
    assert r.returncode == -signal.SIGSEGV, (r.returncode, r.stdout, r.stderr[-2000:])
    issue = (bundle / "issue.md").read_text()
    assert "kills this process" in issue and "exit 1 while" not in issue.split("repro.py")[0]


def test_tvm_float16_acos_exits_1_and_float32_exits_0(python, tmp_path) -> None:
    bundle = _bundle(tmp_path / "b", "tvm", _unary("Acos", TensorProto.FLOAT16), CRASH)
    assert "from_onnx" in _plain(bundle, "tvm")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "acos" in r.stderr, (r.stdout, r.stderr[-2000:])
    bundle = _bundle(tmp_path / "c", "tvm", _unary("Acos", TensorProto.FLOAT), CRASH)
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])


def test_torch_clip_dtype_exits_1_and_a_float_clip_exits_0(python, tmp_path) -> None:
    bundle = _bundle(tmp_path / "b", "torch", _clip(TensorProto.INT32), DTYPE)
    assert "onnx2torch.convert" in _plain(bundle, "torch")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr[-2000:])
    assert "y: actual   float32 [2, 3]" in r.stdout and "expected int32" in r.stdout, r.stdout
    bundle = _bundle(tmp_path / "c", "torch", _clip(TensorProto.FLOAT), DTYPE)
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])


def test_torch_compile_scripts_compile_the_module_as_the_adapter_does(python, tmp_path) -> None:
    """torch-compile bundles had no plain script (15 of 15 in a campaign): its script
    runs onnx2torch's module under torch.compile with the label's mode and backend; the
    int32 Clip comes back float32 (exit 1), a float Clip is right (exit 0)."""
    bundle = _bundle(
        tmp_path / "b",
        "torch-compile:mode=max-autotune-no-cudagraphs",
        _clip(TensorProto.INT32),
        DTYPE,
    )
    script = _plain(bundle, "torch-compile")
    assert "onnx2torch.convert" in script
    assert 'torch.compile(module, mode="max-autotune-no-cudagraphs", backend="inductor"' in script
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr[-2000:])
    assert "y: actual   float32 [2, 3]" in r.stdout and "expected int32" in r.stdout, r.stdout
    bundle = _bundle(tmp_path / "c", "torch-compile", _clip(TensorProto.FLOAT), DTYPE)
    assert 'mode="default", backend="inductor"' in _plain(bundle, "torch-compile")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])


def test_reference_evaluator_reads_the_stored_expected_outputs(python, tmp_path) -> None:
    """The reference evaluator as the culprit: its expected values are the comparison
    reference's outputs, stored beside the inputs (here planted off by one: a bug)."""
    model = _unary("Relu", TensorProto.FLOAT)
    right = np.maximum(_inputs(model)["x"], 0)
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "6/6 elements off")
    bundle = _bundle(tmp_path / "b", "onnx-reference", model, values, right + 1)
    assert "output_{k}.pb" in _plain(bundle, "onnx-reference")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "6 of 6 differ, max abs error 1" in r.stdout, r.stdout
    bundle = _bundle(tmp_path / "c", "onnx-reference", model, values, right)
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])


def test_a_reference_the_evaluator_disagrees_with_gives_the_expected_values(
    python, tmp_path
) -> None:
    """Where the evaluator does not give the comparison reference's outputs (planted off
    here), the script reads those outputs, stored beside the inputs, and says whose."""
    model = _unary("Sigmoid", TensorProto.FLOAT)
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "off")
    bundle = _bundle(tmp_path / "b", "ort", model, values, np.zeros((2, 3), np.float32))
    script = _plain(bundle, "ort")
    assert "# expected: ort:opt=none's outputs" in script and "ReferenceEvaluator" not in script
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "6 of 6 differ" in r.stdout, (r.stdout, r.stderr[-2000:])
    # the same model, the reference's outputs as the evaluator computes them: expected
    # values come from the evaluator, and ORT agrees
    bundle = _bundle(tmp_path / "c", "ort", model, values)
    assert "ReferenceEvaluator(model).run" in _plain(bundle, "ort")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])


def test_ort_cuda_reproduces_the_fusion_crash(python, tmp_path) -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("onnxruntime has no CUDAExecutionProvider here: ort-cuda cannot run")
    bundle = _bundle(tmp_path / "b", "ort-cuda", _relu_clip(TensorProto.INT32), CRASH)
    assert "CUDAExecutionProvider" in _plain(bundle, "ort")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "FuseReluClip" in r.stderr, (r.stdout, r.stderr[-2000:])


@pytest.fixture
def openvino_here() -> None:
    if importlib.util.find_spec("openvino") is None:
        pytest.skip("openvino is not installed (pip install -e '.[openvino]'): adapter unusable")


def test_openvino_wrong_result_exits_1_and_a_right_one_exits_0(
    python, tmp_path, openvino_here
) -> None:
    """OpenVINO's own API (read_model, compile_model on the CPU with the adapter's f32
    precision hint); a reference whose stored outputs OpenVINO does not give (planted off by
    one) is a bug, one it gives is none."""
    model = _unary("Relu", TensorProto.FLOAT)
    right = np.maximum(_inputs(model)["x"], 0)
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "6/6 elements off")
    bundle = _bundle(tmp_path / "b", "openvino", model, values, right + 1)
    script = _plain(bundle, "openvino")
    assert "core.read_model(" in script and "core.compile_model(" in script, script
    assert "{'INFERENCE_PRECISION_HINT': 'f32', 'INFERENCE_NUM_THREADS': 1}" in script, script
    assert "# expected: ort:opt=none's outputs" in script, script
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "6 of 6 differ, max abs error 1" in r.stdout, (
        r.stdout,
        r.stderr[-2000:],
    )
    bundle = _bundle(tmp_path / "c", "openvino", model, values, right)
    assert "ReferenceEvaluator(model).run" in _plain(bundle, "openvino")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0 and "y: actual   float32 [2, 3]" in r.stdout, (
        r.stdout,
        r.stderr[-2000:],
    )


def test_openvino_script_honours_the_adapters_options(python, tmp_path, openvino_here) -> None:
    """The options the bundle's label records reach compile_model as the adapter passes
    them: a MatMul whose result cancels (1001 * -0.9 - 5005 * -0.18) is right in f32, the
    adapter's default, and 1.4 off with precision=bf16 (inputs and weights rounded to 8
    bits), in the adapter and in the script alike, on a CPU with bfloat16 (elsewhere
    OpenVINO computes in f32 whatever the hint, and that part is skipped)."""
    import inspect

    from onnxfuzz.backend import load_backend

    defaults = inspect.signature(load_backend("openvino").__init__).parameters
    assert (defaults["precision"].default, defaults["threads"].default) == ("f32", "1")
    w = onnx.numpy_helper.from_array(np.array([[1001], [0], [-5005]], np.float32), "w")
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        (TensorProto.FLOAT, [2, 3]),
        (TensorProto.FLOAT, [2, 1]),
        [w],
    )
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "off")
    bundle = _bundle(tmp_path / "a", "openvino", model, values)
    assert _run(python, bundle, tmp_path).returncode == 0
    label = "openvino:precision=bf16,threads=2"
    bundle = _bundle(tmp_path / "b", label, model, values)
    script = _plain(bundle, "openvino")
    assert "{'INFERENCE_PRECISION_HINT': 'bf16', 'INFERENCE_NUM_THREADS': 2}" in script, script
    import openvino as ov

    capabilities = ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if "BF16" not in capabilities:  # the hint is a hint: such a CPU computes in f32
        pytest.skip(f"this CPU has no bfloat16 ({capabilities}): the hint changes nothing")
    ours = load_backend(label)
    got = ours.run(ours.compile(model), _inputs(model))["y"]
    assert abs(got[0, 0]) > 1, got  # the adapter's own result with these options
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "1 of 2 differ, max abs error 1.43" in r.stdout, (
        r.stdout,
        r.stderr[-2000:],
    )


def test_openvino_bfloat16_goes_in_and_out_as_raw_bits(python, tmp_path, openvino_here) -> None:
    """bfloat16 as the adapter hands it over (openvino shows bf16 data as float16 bits)."""
    import ml_dtypes

    model = _unary("Neg", TensorProto.BFLOAT16)
    right = -_inputs(model)["x"]
    assert right.dtype == ml_dtypes.bfloat16
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "off")
    bundle = _bundle(tmp_path / "b", "openvino", model, values, right)
    _plain(bundle, "openvino")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0 and "y: actual   bfloat16 [2, 3]" in r.stdout, (
        r.stdout,
        r.stderr[-2000:],
    )
    bundle = _bundle(tmp_path / "c", "openvino", model, values, (right + 1).astype(right.dtype))
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "6 of 6 differ" in r.stdout, (r.stdout, r.stderr[-2000:])


def test_ort_culprit_names_the_rewrite_rule_and_its_workaround_passes(python, tmp_path) -> None:
    """Both directions: the plain reproducer fails as written and with another optimizer
    disabled, and passes with the named rule alone disabled."""
    bundle = _bundle(tmp_path / "b", "ort", _relu_clip(TensorProto.INT32), CRASH)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.component == "FuseReluClip", culprit
    assert culprit.stage == "optimizer" and culprit.level == "ORT_ENABLE_BASIC", culprit
    assert json.loads((bundle / "meta.json").read_text())["culprit"]["component"] == "FuseReluClip"
    assert "workaround: disabled = ['FuseReluClip']" in (bundle / NAME).read_text()
    assert _run(python, bundle, tmp_path).returncode == 1
    other = _run(python, bundle, tmp_path, ("disabled = []", "disabled = ['EliminateIdentity']"))
    assert other.returncode == 1, other.stdout
    fixed = _run(python, bundle, tmp_path, ("disabled = []", "disabled = ['FuseReluClip']"))
    assert fixed.returncode == 0, (fixed.stdout, fixed.stderr[-2000:])


def test_ort_culprit_of_a_bug_optimizations_do_not_change_is_the_kernel(tmp_path) -> None:
    """Float bounds fuse correctly: ORT optimized equals ORT unoptimized, so whatever the
    bundle says is wrong is not an optimizer's doing, and no transformer is named."""
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "off")
    bundle = _bundle(tmp_path / "b", "ort", _relu_clip(TensorProto.FLOAT), values)
    culprit = find_culprit(bundle)
    assert culprit is not None and culprit.stage == "kernel" and not culprit.component, culprit


def _dq_matmul() -> onnx.ModelProto:
    """A per-axis DequantizeLinear of a 1-D uint8 tensor squared by MatMul: ONNX Runtime
    1.31.1 fuses the pair (QDQSelectorActionTransformer) into a kernel that segfaults at
    run (found by onnxfuzz's `ort` against `ort:opt=none`, reduced from 6 nodes)."""
    scale = numpy_helper.from_array(np.array([0.28, 0.44, 0.73, 0.13], np.float32), "s")
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s"], ["d"], axis=0),
        helper.make_node("MatMul", ["d", "d"], ["y"]),
    ]
    return _model(nodes, (TensorProto.UINT8, [4]), (TensorProto.FLOAT, []), [scale])


def test_ort_culprit_of_a_crash_that_kills_the_process_is_the_transformer(python, tmp_path) -> None:
    """A bug that kills the process ended the search at its first run with the bug on:
    the bundle said "Stage: kernel" of an optimizer's crash. Each configuration that
    kills the search is counted as showing the bug and the search goes on in a fresh
    process, down to the transformer whose disabling alone avoids it."""
    model = _dq_matmul()
    on, off = (_child_run(python, model, tmp_path, lv) for lv in ("ENABLE_ALL", "DISABLE_ALL"))
    if off != 0 or on >= 0:
        pytest.skip(
            f"this onnxruntime does not segfault on DQ -> MatMul only with its "
            f"optimizations on (exit {on} on, {off} off): the crash is gone"
        )
    crash = Judgement(Verdict.CRASH, Stage.RUN, "", "", "killed by signal SIGSEGV")
    bundle = _bundle(tmp_path / "b", "ort", model, crash)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.stage == "optimizer", culprit
    assert culprit.component == "QDQSelectorActionTransformer", culprit
    assert culprit.level == "ORT_ENABLE_EXTENDED", culprit
    issue = (bundle / "issue.md").read_text()
    assert "Stage: optimizer (QDQSelectorActionTransformer)" in issue, issue[:1500]
    assert _run(python, bundle, tmp_path).returncode == -signal.SIGSEGV
    workaround = ("disabled = []", "disabled = ['QDQSelectorActionTransformer']")
    fixed = _run(python, bundle, tmp_path, workaround)
    assert fixed.returncode == 0, (fixed.stdout, fixed.stderr[-2000:])


def test_ort_culprit_names_the_transformers_that_each_make_the_bug(python, tmp_path) -> None:
    """An int32 DequantizeLinear before a Transpose: ONNX Runtime 1.31's QDQ propagation
    puts a QuantizeLinear with the int32 zero point after the Transpose (invalid: Q has
    no int32 output), and with it disabled the transpose optimizers do the same. No one
    transformer disabled alone avoids it, and the bundle named none; the search reads the
    log again with the ones found disabled, and the workaround it names is checked."""
    scale = numpy_helper.from_array(np.array(0.66, np.float32), "s")
    zero = numpy_helper.from_array(np.array(0, np.int32), "z")
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"]),
        helper.make_node("Transpose", ["d"], ["y"]),
    ]
    model = _model(nodes, (TensorProto.INT32, []), (TensorProto.FLOAT, []), [scale, zero])
    crash = Judgement(Verdict.CRASH, Stage.COMPILE, "", "", _raised("ort", model))
    assert crash.message.startswith("InvalidGraph: "), crash.message
    bundle = _bundle(tmp_path / "b", "ort", model, crash)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.stage == "optimizer", culprit
    if len(culprit.disabled) == 1:
        pytest.skip(f"this onnxruntime shows it through one transformer: {culprit.disabled}")
    assert "QDQPropagationTransformer" in culprit.disabled and len(culprit.disabled) > 1, culprit
    assert culprit.component == " + ".join(culprit.disabled)
    assert "all of them disabled" in (bundle / "issue.md").read_text()
    assert _run(python, bundle, tmp_path).returncode == 1
    workaround = ("disabled = []", f"disabled = {culprit.disabled!r}")
    fixed = _run(python, bundle, tmp_path, workaround)
    assert fixed.returncode == 0, (fixed.stdout, fixed.stderr[-2000:])
    first = ("disabled = []", f"disabled = {culprit.disabled[:1]!r}")
    assert _run(python, bundle, tmp_path, first).returncode == 1


def test_ort_culprit_of_a_crash_tries_the_transformer_in_flight_first(python, tmp_path) -> None:
    """DequantizeLinear -> QuantizeLinear whose result only an If's branches read: ONNX
    Runtime's QDQFinalCleanupTransformer indexes past a vector and aborts the process
    (found by a campaign, in a Scan body). Every transformer tried before it crashed a
    process too, and the search gave up after MAX_RESTARTS fresh processes with "Stage:
    unknown", long before it came to the one the session log showed in flight when the
    process died. That one is tried first now."""
    branch = [
        helper.make_node("Equal", ["q", "q"], ["e"]),
        helper.make_node("Cast", ["e"], ["o"], to=TensorProto.FLOAT),
    ]
    out = [helper.make_tensor_value_info("o", TensorProto.FLOAT, [4])]
    then = helper.make_graph(branch, "then", [], out)
    other = helper.make_graph(branch, "else", [], out)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"]),
        helper.make_node("QuantizeLinear", ["d", "s", "z"], ["q"]),
        # a condition known at run time only (a constant one has ORT inline the branch)
        helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0),
        helper.make_node("Cast", ["m"], ["c"], to=TensorProto.BOOL),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    scale = numpy_helper.from_array(np.array(0.25, np.float32), "s")
    zero = numpy_helper.from_array(np.array(0, np.int8), "z")
    model = _model(nodes, (TensorProto.INT8, [4]), (TensorProto.FLOAT, [4]), [scale, zero])
    if _child_run(python, model, tmp_path, "ENABLE_ALL", np.int8) == 0:
        pytest.skip("this onnxruntime no longer aborts on it")
    crash = Judgement(Verdict.CRASH, Stage.COMPILE, "", "", "killed by signal SIGABRT")
    bundle = _bundle(tmp_path / "b", "ort", model, crash)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.stage == "optimizer", culprit
    assert culprit.disabled == ["QDQFinalCleanupTransformer"], culprit
    assert culprit.tried[0] == "QDQFinalCleanupTransformer", culprit
    workaround = ("disabled = []", f"disabled = {culprit.disabled!r}")
    fixed = _run(python, bundle, tmp_path, workaround)
    assert fixed.returncode == 0, (fixed.stdout, fixed.stderr[-2000:])

    # The same crash as the reference's own failure (set aside in reference-bugs/), which
    # the ONNX reference evaluator cannot run (it has no DequantizeLinear-13): the script
    # ran the evaluator for its expected values, failed, and could never say "fixed".
    # With another backend's outputs kept, it reads them; with none, a run is the fix.
    x = _inputs(model)
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    right = ort.InferenceSession(model.SerializeToString(), options).run(None, x)[0]
    failed = Outcome(Status.CRASH, Stage.COMPILE, message=crash.message)
    for name, others in [
        ("other", {REFERENCE: Outcome(Status.OK, outputs={"y": right})}),
        ("none", {}),
    ]:
        f = Finding(
            signature="ort|crash|compile|killed by signal SIGABRT",
            bug_id=name,
            judgement=crash,
            backend="ort",
            reference="ort",
            seed=0,
            opset=17,
            ops=[n.op_type for n in model.graph.node],
            model=model,
            inputs=x,
            outcomes={"ort": failed, **others},
            versions={},
            tolerance=dict(DEFAULT_TOLERANCE),
            timeout=60.0,
        )
        alone = write_bundle(tmp_path / name, f, where="reference-bugs")
        script = _plain(alone, "ort")
        assert ("ReferenceEvaluator" not in script) and (
            ("ort:opt=none's outputs" in script) == (name == "other")
        ), script
        assert _run(python, alone, tmp_path).returncode == -signal.SIGABRT
        fixed = _run(python, alone, tmp_path, workaround)
        assert fixed.returncode == 0, (name, fixed.stdout, fixed.stderr[-2000:])


def _child_run(
    python: Path, model: onnx.ModelProto, tmp: Path, level: str, dtype: type = np.uint8
) -> int:
    """The exit code of one ORT run of ``model`` at ``ORT_<level>`` in a child."""
    path = tmp / "premise.onnx"
    onnx.save(model, str(path))
    code = (
        "import sys, numpy as np, onnxruntime as ort\n"
        "o = ort.SessionOptions()\n"
        f"o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_{level}\n"
        "s = ort.InferenceSession(sys.argv[1], o, ['CPUExecutionProvider'])\n"
        f"s.run(None, {{'x': np.zeros(4, np.{np.dtype(dtype).name})}})\n"
    )
    return subprocess.run([str(python), "-c", code, str(path)], capture_output=True).returncode


@pytest.mark.slow  # two TVM imports in child processes, a pass pipeline each
def test_tvm_culprit_tells_the_importer_from_code_generation(tmp_path) -> None:
    """float16 Acos imports and lowers, then LLVM code generation has no intrinsic for it;
    float16 Elu fails in the importer's Elu converter (float32 constants in a float16
    graph). Neither is the ONNX frontend's and the code generator's alike."""
    codegen = _bundle(tmp_path / "a", "tvm", _unary("Acos", TensorProto.FLOAT16), CRASH)
    culprit = find_culprit(codegen)
    assert culprit is not None and culprit.stage == "codegen", culprit
    assert "acos" in culprit.note and culprit.llvm, culprit
    frontend = _bundle(tmp_path / "b", "tvm", _unary("Elu", TensorProto.FLOAT16), CRASH)
    culprit = find_culprit(frontend)
    assert culprit is not None and (culprit.stage, culprit.component) == ("import", "Elu"), culprit


def test_torch_culprit_names_the_onnx2torch_converter(tmp_path) -> None:
    bundle = _bundle(tmp_path / "b", "torch", _clip(TensorProto.INT32), DTYPE)
    culprit = find_culprit(bundle)
    assert culprit is not None and culprit.project == "onnx2torch", culprit
    assert culprit.component == "onnx2torch.node_converters.clip.OnnxClip", culprit
    # the same Clip in torch eager, bounds as tensors of x's dtype, gives int32 as ONNX
    # says: the conversion (float() bounds) is at fault, not torch
    assert "gives float32" in culprit.note and "so the conversion is at fault" in culprit.note
    assert "torch.clamp" in culprit.note, culprit.note


def test_torch_culprit_blames_torch_when_torch_eager_fails_the_same_way(tmp_path) -> None:
    """uint32 Add: onnx2torch's module calls torch's add, and torch eager ``x + y`` on the
    same tensors raises the same (no CPU kernel for UInt32), while the reference evaluator
    computes it: torch's own fault, filed with PyTorch; Clip on uint8 stays onnx2torch's."""
    c = [helper.make_tensor("c", TensorProto.UINT32, [], np.array([7], np.uint32))]
    add = _model(
        [helper.make_node("Add", ["x", "c"], ["y"])],
        (TensorProto.UINT32, [2, 3]),
        (TensorProto.UINT32, [2, 3]),
        c,
    )
    bundle = _bundle(tmp_path / "a", "torch", add, CRASH)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.project == "torch", culprit
    assert "so torch's own op is at fault" in culprit.note, culprit.note
    issue = (bundle / "issue.md").read_text()
    assert "File with PyTorch" in issue and "### 🐛 Describe the bug" in issue
    uint8 = _bundle(tmp_path / "b", "torch", _clip(TensorProto.UINT8), DTYPE)
    culprit = annotate(uint8)
    assert culprit is not None and culprit.project == "onnx2torch", culprit
    issue = (uint8 / "issue.md").read_text()
    assert "File with onnx2torch" in issue and "### Describe the bug" in issue
    # expected values: the evaluator's and numpy's side by side, and Clip's schema text
    expected = issue.split("### Expected behavior", 1)[1].split("### Actual", 1)[0]
    assert "| output | ONNX reference evaluator | numpy |" in expected, expected
    assert expected.count("uint8[2, 3]") == 2, expected
    assert '"Constrain input and output types to all numeric tensors."' in expected, expected


def test_torch_culprit_names_the_first_wrong_node_not_the_one_that_raised(tmp_path) -> None:
    """From the campaign: onnx2torch's Clip turns int64 indices into float32 and the next
    GatherElements raises on them; the culprit is the Clip's converter, checked in torch
    eager, not GatherElements'."""
    inits = [
        helper.make_tensor("lo", TensorProto.INT64, [], np.array([-5], np.int64)),
        helper.make_tensor("hi", TensorProto.INT64, [], np.array([1], np.int64)),
        numpy_helper_from(np.ones((3, 1, 1), np.float32), "data"),
    ]
    nodes = [
        helper.make_node("Clip", ["x", "lo", "hi"], ["i"]),
        helper.make_node("GatherElements", ["data", "i"], ["y"]),
    ]
    model = _model(nodes, (TensorProto.INT64, [1, 1, 1]), (TensorProto.FLOAT, [1, 1, 1]), inits)
    culprit = find_culprit(_bundle(tmp_path / "b", "torch", model, CRASH))
    assert culprit is not None and culprit.project == "onnx2torch", culprit
    assert culprit.component == "onnx2torch.node_converters.clip.OnnxClip", culprit
    assert culprit.note.startswith("Clip on the same tensors"), culprit.note


def test_torch_culprit_sees_a_tuple_where_onnx_has_one_tensor(tmp_path) -> None:
    """From the campaign: onnx2torch's Split with one output gives a tuple, and the Div
    after it raises on the tuple; the culprit is the Split's converter."""
    nodes = [
        helper.make_node("Split", ["x"], ["s"], axis=-2),
        helper.make_node("Div", ["s", "x"], ["y"]),
    ]
    model = _model(nodes, (TensorProto.FLOAT, [1, 1]), (TensorProto.FLOAT, [1, 1]))
    bundle = _bundle(tmp_path / "b", "torch", model, CRASH)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.project == "onnx2torch", culprit
    assert culprit.component.startswith("onnx2torch.node_converters.split."), culprit
    assert "first wrong node: Split" in culprit.note and "a tuple of 1" in culprit.note
    # Split has no torch eager form here: whose fault it is was not checked, and the
    # report says so (it said "its conversion is at fault" of torch's own NonMaxSuppression
    # and InstanceNormalization)
    assert culprit.unchecked, culprit
    issue = (bundle / "issue.md").read_text()
    assert "File with onnx2torch (github.com/ENOT-AutoDL/onnx2torch) first" in issue
    assert "its conversion is at fault" not in issue and "was not checked" in issue


def test_a_tuple_for_one_output_is_worded_as_a_tuple_not_a_wrong_shape(tmp_path) -> None:
    """onnx2torch's Split of one output gives a 1-tuple as the model's output; read as an
    array it has shape [1, 1, 1] where [1, 1] is declared. The headline said "returns an
    output of the wrong shape", and its readers looked at the values (an audit): it now says
    a tuple came back where one tensor is the output."""
    model = _model(
        [helper.make_node("Split", ["x"], ["y"], axis=-2)],
        (TensorProto.FLOAT, [1, 1]),
        (TensorProto.FLOAT, [1, 1]),
    )
    shape = Judgement(
        Verdict.MISMATCH, Stage.RUN, "shape", "y", "shape [1, 1, 1], the model declares [1, 1]"
    )
    bundle = _bundle(tmp_path / "b", "torch", model, shape)
    # as a campaign files it: the declared shape [1, 1] names torch (``judge.declared``)
    meta = json.loads((bundle / "meta.json").read_text())
    (bundle / "meta.json").write_text(json.dumps({**meta, "suspect": "torch"}))
    culprit = annotate(bundle)
    assert culprit is not None and "a tuple of 1" in culprit.note, culprit
    issue = (bundle / "issue.md").read_text()
    head = issue.split("\n", 1)[0]
    assert "returns a tuple of 1 tensor(s) for an output that is one tensor" in head, head
    assert "wrong shape" not in head, head


def test_torch_compile_culprit_says_a_bug_shows_without_torch_compile(tmp_path) -> None:
    """onnx2torch's GatherElements raises on a negative index in eager mode too: a
    torch-compile bundle of it is not torch.compile's (it was filed as a compiled kernel's
    assert); the culprit search runs onnx2torch's eager model and says so."""
    data = numpy_helper_from(np.arange(3, dtype=np.float32).reshape(3, 1), "data")
    nodes = [helper.make_node("GatherElements", ["data", "x"], ["y"], axis=0)]
    # x is [[-3]] (the helper's integer inputs): row 0, as ONNX counts from the end
    model = _model(nodes, (TensorProto.INT64, [1, 1]), (TensorProto.FLOAT, [1, 1]), [data])
    bundle = _bundle(tmp_path / "b", "torch-compile", model, CRASH)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.project == "onnx2torch", culprit
    assert culprit.note.startswith("it shows without torch.compile too"), culprit.note
    assert "torch.compile is at fault" not in (bundle / "issue.md").read_text()


def test_torch_culprit_that_finds_every_node_right_names_no_project(tmp_path) -> None:
    """A torch bundle whose converted model computes every node as the ONNX reference
    evaluator does (the audit's int64 Mod, where ORT, the reference, was the wrong one):
    no project is named, and the report says nothing of torch is shown wrong (it said
    "File with onnx2torch first: the converted model computes it wrong")."""
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "output y: 6/6 differ")
    bundle = _bundle(tmp_path / "b", "torch", _unary("Relu", TensorProto.FLOAT), values)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.project == "", culprit
    assert "computes every node as the ONNX reference evaluator does" in culprit.note
    issue = (bundle / "issue.md").read_text()
    assert "File with" not in issue.split("### To reproduce")[0], issue


def _torch_vs_ort(
    root: Path,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    judgement: Judgement,
    outputs: dict[str, dict[str, np.ndarray]],
    opinion: dict | None = None,
    backend: str = "torch",
) -> Path:
    """The bundle of a torch (or ``backend``) finding against ORT, with the backends'
    ``outputs`` and the evaluator's ``opinion`` (if any), as the campaign writes it."""
    f = Finding(
        signature=f"{backend}|mismatch|run|{judgement.kind} in {model.graph.node[0].op_type}"
        " output",
        bug_id="bug",
        judgement=judgement,
        backend=backend,
        reference="ort",
        seed=0,
        opset=17,
        ops=[n.op_type for n in model.graph.node],
        model=model,
        inputs=inputs,
        outcomes={k: Outcome(Status.OK, outputs=v) for k, v in outputs.items()},
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=60.0,
        extra={"second_opinion": opinion} if opinion else {},
    )
    return write_bundle(root, f)


def test_a_reference_the_evaluator_finds_wrong_gets_the_report(python, tmp_path) -> None:
    """ORT as the comparison's reference, wrong: its int64 Mod with fmod=1 goes through
    double and loses 9611230659012167 mod 3 (a real ORT fault a torch campaign found).
    torch and the ONNX reference evaluator give 2: the report is ORT's (its tracker, a
    culprit search of ORT, repro_plain.py in ORT's API against the evaluator's values,
    exit 1 in a fresh process), where it was filed "torch returns wrong results" with
    ORT's 0 as the expected value. The comparison itself stays as it ran."""
    import onnxruntime as ort

    int64 = TensorProto.INT64
    three = [helper.make_tensor("d", int64, [], np.array([3], np.int64))]
    mod = [helper.make_node("Mod", ["x", "d"], ["y"], fmod=1)]
    model = _model(mod, (int64, [2]), (int64, [2]), three)
    x = np.array([9611230659012167, -10708639069530107], np.int64)
    wrong = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    right = np.fmod(x, 3)
    assert (wrong != right).all()  # the fault this test needs is still in ORT
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "2/2 elements differ")
    outcomes = {"ort": {"y": wrong}, "torch": {"y": right}}
    opinion = {"by": "onnx-reference", "agrees": ["torch"], "said": "ran"}
    bundle = _torch_vs_ort(tmp_path / "b", model, {"x": x}, values, outcomes, opinion)
    meta = json.loads((bundle / "meta.json").read_text())
    assert (meta["backend"], meta["reference"]) == ("torch", "ort")
    script = _plain(bundle, "ort")
    assert script.startswith('"""ort returns wrong results on Mod')
    assert "ReferenceEvaluator(model).run" in script  # torch's values, as the evaluator's
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "2 of 2 differ" in r.stdout, (r.stdout, r.stderr[-2000:])
    culprit = annotate(bundle)  # ORT's, searched: its optimizers change nothing
    assert culprit is not None and (culprit.project, culprit.stage) == ("onnxruntime", "kernel")
    issue = (bundle / "issue.md").read_text()
    title = issue.splitlines()[0]
    assert title.startswith("# ort and torch disagree on a 1-node model: Mod"), title
    assert title.endswith("; the ONNX reference evaluator sides with torch"), title
    assert "### Describe the issue" in issue  # ONNX Runtime's form
    assert "onnx2torch" not in issue and "File with ONNX Runtime" in issue
    assert "agrees with torch and not with ort: ort is the likely culprit" in issue


def _repro_py(python: Path, bundle: Path, tmp: Path) -> subprocess.CompletedProcess:
    """The bundle's onnxfuzz-free ``repro.py``, run from a copy of the whole bundle."""
    copy = tmp / f"whole{len(list(tmp.glob('whole*')))}"
    shutil.copytree(bundle, copy)
    return subprocess.run(
        [str(python), "-I", "repro.py"],
        cwd=copy,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


# a backend right where ORT is wrong, without torch's imports (tests/campaign/adapters.py)
EVALUATED = f"{Path(__file__).resolve().parent / 'adapters.py'}:Evaluated"


def test_repro_py_of_a_reference_the_evaluator_finds_wrong_runs_it_and_names_it(
    python, tmp_path
) -> None:
    """Where the evaluator sides with the backend, the reference is the likely culprit:
    repro.py says the two still disagree and which one the evaluator sided with (it said
    "REPRODUCES: torch: values mismatch"), and it runs the reference rather than reading
    its stored outputs, which are the wrong values: once the reference is fixed, it says
    FIXED (against the stored values it said REPRODUCES for ever). Here ORT's Relu is
    right today, and the bundle stores the wrong values it is said to have given. The
    backend that the evaluator sides with is ``EVALUATED`` (a planted adapter that runs the
    evaluator, right on both models as torch is): the reference is what is tested here,
    and each repro.py run would import torch twice (its check, its child)."""
    relu = _unary("Relu", TensorProto.FLOAT)
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -0.25, 0.0]], np.float32)
    right = np.maximum(x, 0)
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "2/6 elements differ")
    outcomes = {"ort": {"y": np.abs(x)}, EVALUATED: {"y": right}}  # ORT "was" wrong
    opinion = {"by": "onnx-reference", "agrees": [EVALUATED], "said": "ran"}
    fixed = _torch_vs_ort(tmp_path / "fixed", relu, {"x": x}, values, outcomes, opinion, EVALUATED)
    r = _repro_py(python, fixed, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])
    assert r.stdout.startswith(f"FIXED: {EVALUATED} and ort agree now"), r.stdout
    assert (
        f"sides with {EVALUATED}, so ort is the likely culprit" in (fixed / "repro.py").read_text()
    )

    # ORT's int64 Mod with fmod=1 is wrong today: the script reproduces it and says whose
    int64 = TensorProto.INT64
    three = [helper.make_tensor("d", int64, [], np.array([3], np.int64))]
    mod = _model(
        [helper.make_node("Mod", ["x", "d"], ["y"], fmod=1)], (int64, [2]), (int64, [2]), three
    )
    big = np.array([9611230659012167, -10708639069530107], np.int64)
    import onnxruntime as ort

    wrong = ort.InferenceSession(mod.SerializeToString()).run(None, {"x": big})[0]
    outcomes = {"ort": {"y": wrong}, EVALUATED: {"y": np.fmod(big, 3)}}
    still = _torch_vs_ort(tmp_path / "still", mod, {"x": big}, values, outcomes, opinion, EVALUATED)
    r = _repro_py(python, still, tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr[-2000:])
    assert r.stdout.startswith(
        f"REPRODUCES: {EVALUATED} and ort still disagree: values mismatch"
    ), r.stdout
    assert f"evaluator sided with {EVALUATED}: ort is the likely culprit" in r.stdout, r.stdout


def test_a_disagreement_nothing_decided_blames_neither_side(python, tmp_path) -> None:
    """Two backends, no majority, and no opinion that took a side (the evaluator is not
    asked where a documented fault of its applies): ORT's right NonMaxSuppression against
    TVM's was titled "[kernel]", "File with ONNX Runtime", its repro_plain.py "ort returns
    wrong results". ORT's culprit search says only that no optimizer is involved: the
    report keeps it as a condition, and the script says the two disagree."""
    from onnxfuzz.store.issue import issue_markdown

    int64 = TensorProto.INT64
    big = [helper.make_tensor("big", int64, [], np.array([2**60], np.int64))]
    add = [helper.make_node("Add", ["x", "big"], ["y"])]
    model = _model(add, (int64, [2]), (int64, [2]), big)
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "2/2 elements differ")
    right = _inputs(model)["x"] + np.int64(2**60)
    bundle = _bundle(tmp_path / "b", "ort", model, values, right + 1)  # off by one
    script = _plain(bundle, "ort")
    assert script.startswith('"""ort and ort:opt=none disagree on Add (either may be wrong')
    culprit = annotate(bundle)
    assert culprit is not None and culprit.stage == "kernel"
    text = issue_markdown(bundle)
    title = text.splitlines()[0]
    assert "[kernel]" not in title, title
    assert "If ort is the wrong one (nothing here decided it): Stage: kernel." in text
    assert "no optimizer is involved" in text
    # the int64 difference of 1 past 2**53: float64 made it 0
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1 and "2 of 2 differ, max abs error 1\n" in r.stdout, r.stdout


def test_torch_culprit_does_not_call_a_node_the_evaluator_cannot_run_right(tmp_path) -> None:
    """NonMaxSuppression without its optional inputs: the evaluator raises on it (a
    documented fault), and the node-by-node check counted the node as right: "computes
    every node as the ONNX reference evaluator does ... no part of onnx2torch or torch is
    shown wrong", where onnx2torch kept a box it should have suppressed."""
    f32 = TensorProto.FLOAT
    nms = helper.make_node("NonMaxSuppression", ["boxes", "scores"], ["y"])
    graph = helper.make_graph(
        [nms],
        "g",
        [
            helper.make_tensor_value_info("boxes", f32, [1, 3, 4]),
            helper.make_tensor_value_info("scores", f32, [1, 1, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [None, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    boxes = np.array([[[0, 0, 1, 1], [1, 1, 0, 0], [0, 0, 5, 1]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7]]], np.float32)
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "shape", "y", "shape differs")
    inputs = {"boxes": boxes, "scores": scores}
    outcomes = {"ort": {"y": np.zeros((0, 3), np.int64)}}
    bundle = _torch_vs_ort(tmp_path / "b", model, inputs, values, outcomes)
    culprit = annotate(bundle)
    assert culprit is not None, culprit
    assert "could not check NonMaxSuppression" in culprit.note, culprit.note
    assert "no part of onnx2torch or torch is shown wrong" not in culprit.note
    # the one node's module is onnx2torch's: the project is named, first and unchecked (a
    # 1-node NonMaxSuppression said "Stage: unknown" and named none)
    assert (culprit.project, culprit.stage, culprit.unchecked) == ("onnx2torch", "run", True)
    assert culprit.component == "onnx2torch.node_converters.nms.OnnxNonMaxSuppression"
    issue = (bundle / "issue.md").read_text()
    assert "File with onnx2torch (github.com/ENOT-AutoDL/onnx2torch) first" in issue, issue


def test_torch_culprit_does_not_call_a_node_the_evaluator_is_known_wrong_on_right(
    tmp_path,
) -> None:
    """A Slice with a negative step from INT64_MIN: onnx2torch and the ONNX reference
    evaluator both give an empty tensor where ORT gives the element (a documented fault of
    the evaluator, a campaign's real onnx2torch bug). The node check agreed with the
    evaluator and said "no part of onnx2torch or torch is shown wrong", beside an issue.md
    that called the evaluator known wrong on the model."""
    i64 = TensorProto.INT64
    params = [
        helper.make_tensor("starts", i64, [1], [-(2**63)]),
        helper.make_tensor("ends", i64, [1], [-2]),
        helper.make_tensor("axes", i64, [1], [0]),
        helper.make_tensor("steps", i64, [1], [-1]),
    ]
    node = helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", f32, [1])],
        [helper.make_tensor_value_info("y", f32, [None])],
        params,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = np.array([2.0], np.float32)
    import onnxruntime as ort

    got = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    assert got.shape == (1,)  # ORT keeps the element, as ONNX's clamping rules say
    values = Judgement(Verdict.MISMATCH, Stage.RUN, "shape", "y", "shape differs")
    bundle = _torch_vs_ort(tmp_path / "b", model, {"x": x}, values, {"ort": {"y": got}})
    culprit = find_culprit(bundle)
    assert culprit is not None, culprit
    assert "no part of onnx2torch or torch is shown wrong" not in culprit.note, culprit.note
    assert "could not check Slice" in culprit.note, culprit


def test_torch_culprit_runs_einsum_in_torch_eager(tmp_path) -> None:
    """int32 Einsum 'ab,cda->cd': torch.einsum itself raises "expected scalar type Long but
    found Int" on the same tensors, so it is torch's fault (it was filed with onnx2torch,
    "its conversion is at fault", Einsum having no eager form then)."""
    w = helper.make_tensor("w", TensorProto.INT32, [4, 5, 2], np.ones(40, np.int32))
    nodes = [helper.make_node("Einsum", ["x", "w"], ["y"], equation="ab,cda->cd")]
    model = _model(nodes, (TensorProto.INT32, [2, 3]), (TensorProto.INT32, [4, 5]), [w])
    culprit = find_culprit(_bundle(tmp_path / "b", "torch", model, CRASH))
    assert culprit is not None and culprit.project == "torch" and not culprit.unchecked, culprit
    assert "torch eager torch.einsum gives RuntimeError" in culprit.note, culprit.note


def test_torch_culprit_files_a_refusal_torch_makes_on_purpose_with_onnx2torch(tmp_path) -> None:
    """InstanceNormalization over one spatial element: ONNX defines it (B), torch's
    instance_norm refuses it with a ValueError on purpose (pytorch#19250 asked for the
    check, pytorch#45687 was closed). It was filed with PyTorch, "torch's own op is at
    fault"; the conversion, which maps the ONNX op onto torch's, is."""
    f32 = TensorProto.FLOAT
    inits = [
        helper.make_tensor("scale", f32, [1], [1.0]),
        helper.make_tensor("b", f32, [1], [0.5]),
    ]
    nodes = [helper.make_node("InstanceNormalization", ["x", "scale", "b"], ["y"])]
    model = _model(nodes, (f32, [1, 1, 1]), (f32, [1, 1, 1]), inits)
    run_crash = Judgement(Verdict.CRASH, Stage.RUN, message="ValueError: Expected more than 1")
    bundle = _bundle(tmp_path / "b", "torch", model, run_crash)
    culprit = annotate(bundle)
    assert culprit is not None and culprit.project == "onnx2torch", culprit
    assert not culprit.unchecked and "ValueError" in culprit.note, culprit
    assert "an argument check torch makes on purpose" in culprit.note, culprit.note
    issue = (bundle / "issue.md").read_text()
    assert "File with onnx2torch" in issue and "File with PyTorch" not in issue, issue
    # titled by what fails, onnx2torch's converted model (it read "torch raises ...")
    assert issue.startswith("# onnx2torch's converted model raises"), issue[:200]


def test_a_conv_weight_onnx2torch_cannot_read_links_its_upstream_issues(tmp_path) -> None:
    """onnx2torch's Conv converter reads W and B from the initializers only: a weight a
    node computes raises KeyError while converting, as onnx2torch#156 and #243 report."""
    f32 = TensorProto.FLOAT
    nodes = [
        helper.make_node("Identity", ["c"], ["w"]),
        helper.make_node("Conv", ["x", "w"], ["y"]),
    ]
    c = [helper.make_tensor("c", f32, [1, 1, 1, 1], [2.0])]
    model = _model(nodes, (f32, [1, 1, 3, 3]), (f32, [1, 1, 3, 3]), c)
    import onnx2torch

    with pytest.raises(KeyError):  # the fault this test needs is still in onnx2torch
        onnx2torch.convert(model)
    key_error = Judgement(Verdict.CRASH, Stage.COMPILE, message="KeyError: 'w'")
    for backend, linked in (("torch", True), ("ort", False)):  # onnx2torch's alone
        signature = f"{backend}|crash|compile|KeyError: S"
        y = np.zeros((1, 1, 3, 3))
        bundle = _bundle(tmp_path / backend, backend, model, key_error, y, signature)
        issue = write_issue(bundle).read_text()
        said = "Probably known upstream: onnx2torch's Conv/ConvTranspose converter" in issue
        assert said == linked, issue
        assert ("github.com/ENOT-AutoDL/onnx2torch/issues/156" in issue) == linked, issue


def numpy_helper_from(a: np.ndarray, name: str) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(a, name)


# A relax pass planted into tvm.compile's pipeline in the culprit search's child process (it
# inherits PYTHONPATH): it doubles every constant, and like TVM's own optimizations it runs
# only above opt_level 0 and obeys PassContext(disabled_pass=...).
_PLANTED_PASS = """
import tvm
from tvm import relax


@relax.expr_functor.mutator
class _Double(relax.PyExprMutator):
    def visit_generic_const_(self, op):
        return relax.const(op.value.numpy() * 2, str(op.value.dtype))


@relax.transform.function_pass(opt_level=1, name="PlantedDoubleConstants")
class _Planted:
    def transform_function(self, func, mod, ctx):
        return _Double(mod).visit_expr(func)


_compile = tvm.compile


def _wrapped(mod, *args, **kwargs):
    return _compile(tvm.transform.Sequential([_Planted()])(mod), *args, **kwargs)


tvm.compile = _wrapped
"""
VALUES = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "values differ")


@pytest.mark.slow  # TVM compiles the model once per pass tried, in a child process
def test_tvm_wrong_result_is_bisected_to_the_pass(tmp_path, monkeypatch) -> None:
    """A wrong result that opt_level 0 does not show is bisected to the one pass whose
    disabling alone fixes it, with that as the workaround; without the planted pass the
    same bundle does not show the bug at all."""
    c = [helper.make_tensor("c", TensorProto.FLOAT, [], np.array([1.5], np.float32))]
    add = _model(
        [helper.make_node("Add", ["x", "c"], ["y"])],
        (TensorProto.FLOAT, [2, 3]),
        (TensorProto.FLOAT, [2, 3]),
        c,
    )
    bundle = _bundle(tmp_path / "b", "tvm", add, VALUES)
    clean = find_culprit(bundle)
    assert clean is not None and clean.stage == "run" and not clean.component, clean
    plant = tmp_path / "plant"
    plant.mkdir()
    (plant / "sitecustomize.py").write_text(_PLANTED_PASS)
    monkeypatch.setenv("PYTHONPATH", str(plant))
    culprit = find_culprit(bundle)
    assert culprit is not None and culprit.stage == "optimization", culprit
    assert culprit.component == "PlantedDoubleConstants", culprit
    assert "disabled_pass=['PlantedDoubleConstants']" in culprit.workaround, culprit


def test_a_bundle_is_written_where_the_evaluator_gives_a_sequence_for_a_tensor(
    tmp_path,
) -> None:
    # onnx 1.23's evaluator gives SequenceAt's whole sequence (a list of arrays of two
    # shapes) after Optional -> OptionalGetElement; comparing it once raised numpy's
    # "inhomogeneous shape" and ended the campaign that was writing the bundle.
    from onnx.reference import ReferenceEvaluator

    from onnxfuzz.store.issue import issue_markdown

    starts = [helper.make_tensor(n, TensorProto.INT64, [1], [v]) for n, v in (("a", 0), ("b", 1))]
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    pos = helper.make_tensor("pos", TensorProto.INT64, [], [0])
    nodes = [
        helper.make_node("Slice", ["x", "a", "b", "axes"], ["col"]),
        helper.make_node("SequenceConstruct", ["x", "col"], ["seq"]),
        helper.make_node("Optional", ["seq"], ["opt"]),
        helper.make_node("OptionalGetElement", ["opt"], ["seq2"]),
        helper.make_node("SequenceAt", ["seq2", "pos"], ["y"]),
    ]
    f32 = TensorProto.FLOAT
    model = _model(nodes, (f32, [2, 3]), (f32, [2, 3]), [*starts, axes, pos])
    onnx.checker.check_model(model, full_check=True)
    got = ReferenceEvaluator(model).run(None, _inputs(model))[0]
    if not isinstance(got, list):
        pytest.skip("this onnx's evaluator gives SequenceAt's tensor here: nothing to check")
    bundle = _bundle(tmp_path, "ort", model, CRASH)
    assert (bundle / "model.onnx").exists() and (bundle / NAME).exists()
    # the evaluator is not the source of expected values: the reference's are stored
    assert (bundle / "test_data_set_0" / "output_0.pb").exists()
    assert "ONNX reference evaluator disagrees or fails" in (bundle / NAME).read_text()
    issue_markdown(bundle)  # the evaluator's values, where shown, are said as a sequence


SHIPPED_HERE = ["ort", "tvm", "torch", "torch-compile", "onnx-reference"]
RERUN = Judgement(Verdict.MISMATCH, Stage.RERUN, "values", "y", "the second run differs")
WRITTEN = Judgement(Verdict.MISMATCH, Stage.RUN, "input", "x", "run() wrote into x")


@pytest.mark.parametrize("backend", SHIPPED_HERE)
def test_a_second_run_bug_runs_the_compiled_model_twice(python, tmp_path, backend) -> None:
    """A bug of the second run: the script runs the compiled model's run lines twice and
    judges the second; the real backends give the same outputs twice (exit 0)."""
    model = _unary("Relu", TensorProto.FLOAT)
    bundle = _bundle(tmp_path / "b", backend, model, RERUN)
    script = _plain(bundle, backend)
    loop = "for _ in range(2):  # the same compiled model, run twice: the second is wrong"
    assert loop in script, script
    body = script.split(loop + "\n", 1)[1].splitlines()
    assert body[0].startswith("    ") and not body[-1].startswith("    "), script
    # compiling stays outside the loop: the model is compiled once
    compile_call = {
        "ort": "ort.InferenceSession(",
        "tvm": "tvm.compile(",
        "torch": "onnx2torch.convert(",
        "torch-compile": "torch.compile(",
        "onnx-reference": "ReferenceEvaluator(model)",
    }[backend]
    assert script.index(compile_call) < script.index(loop), script
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])


def test_ort_scripts_show_a_wrong_second_run_and_a_written_input(python, tmp_path) -> None:
    """Both checks catch what they are for: a second run planted wrong in the script, an
    input array planted overwritten by the run (exit 1); as written, ORT has neither (0)."""
    model = _unary("Relu", TensorProto.FLOAT)
    call = "    actual = session.run(None, inputs)"
    bundle = _bundle(tmp_path / "b", "ort", model, RERUN)
    wrong = f"{call} if _ == 0 else [a + 1 for a in session.run(None, inputs)]"
    r = _run(python, bundle, tmp_path, (call, wrong))
    assert r.returncode == 1 and "6 of 6 differ" in r.stdout, (r.stdout, r.stderr[-2000:])
    bundle = _bundle(tmp_path / "c", "ort", model, WRITTEN)
    script = _plain(bundle, "ort")
    assert "before = {k: v.copy() for k, v in inputs.items()}" in script, script
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0 and "wrote into (the bug): none" in r.stdout, r.stdout
    call = "actual = session.run(None, inputs)"
    r = _run(python, bundle, tmp_path, (call, f"{call}; inputs['x'][...] = 0"))
    assert r.returncode == 1 and "wrote into (the bug): ['x']" in r.stdout, r.stdout


def test_tvm_culprit_of_a_crash_that_kills_the_process_names_the_pass(
    tmp_path, monkeypatch
) -> None:
    """A segfault or an LLVM abort inside tvm.compile killed the search with nothing said:
    stage unknown. The driver says each pass before it runs it, so the parent names the
    one in flight when the process died. Planted: the driver's own pass instrument kills
    its process with SIGSEGV when LegalizeOps starts (real TVM, real pipeline)."""
    import onnxfuzz.run.culprit as culprit_module

    start = "        self.stack.append(info.name)\n"
    assert culprit_module._TVM_DRIVER.count(start) == 1
    planted = start + (
        "        if self.saying and info.name == 'LegalizeOps':\n"
        "            say('pass:' + info.name)\n"
        "            import signal; os.kill(os.getpid(), signal.SIGSEGV)\n"
    )
    monkeypatch.setattr(
        culprit_module, "_TVM_DRIVER", culprit_module._TVM_DRIVER.replace(start, planted)
    )
    bundle = _bundle(tmp_path / "a", "tvm", _unary("Relu", TensorProto.FLOAT), CRASH)
    culprit = find_culprit(bundle)
    assert culprit is not None, culprit
    assert (culprit.stage, culprit.component) == ("relax pass", "LegalizeOps"), culprit
    assert "exit -11" in culprit.note, culprit


NPU = Path(__file__).resolve().parent / "npu_adapter.py"


def test_a_user_adapter_s_plain_reproducer_speaks_its_own_api(
    python, tmp_path, monkeypatch
) -> None:
    """A user adapter got repro.py alone, which runs the adapter: its vendor's engineers
    read onnxfuzz's code, not their API. Its ``plain_reproducer`` (compile_model, run_model
    in the vendor's API) makes a repro_plain.py that calls the library directly, exits 1
    while the bug is there and 0 once the library is fixed."""
    label = f"{NPU}:Npu"
    model = _model(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        (TensorProto.FLOAT, [2, 3]),
        (TensorProto.FLOAT, [2, 3]),
    )
    wrong = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "output y: values")
    bundle = _bundle(tmp_path / "b", label, model, wrong)
    script = (bundle / NAME).read_text()
    assert "npu_lib.load(str(path))" in script and "onnxfuzz" not in script, script
    assert "import onnxruntime" not in script  # the vendor's API, not what it wraps
    site = next((python.parent.parent / "lib").glob("python*/site-packages"))
    shutil.copy(NPU.parent / "npu_lib.py", site / "npu_lib.py")  # installed, as a vendor's is
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 1, (r.stdout, r.stderr[-2000:])
    assert "6 of 6 differ, max abs error 0.5" in r.stdout, r.stdout
    monkeypatch.setenv("NPU_LIB_FIXED", "1")
    r = _run(python, bundle, tmp_path)
    assert r.returncode == 0, (r.stdout, r.stderr[-2000:])


def test_a_malformed_plain_reproducer_is_refused_before_the_campaign_starts(
    tmp_path, capsys
) -> None:
    from onnxfuzz.cli.main import main

    for cls, said in (
        ("NpuHookNotLiteral", "must be a string literal of Python source"),
        ("NpuHookMissingRun", "must define run_model(compiled, inputs) at its top level"),
    ):
        out = tmp_path / cls
        argv = ["fuzz", "--backend", "ort", "--backend", f"{NPU}:{cls}", "--tests", "1"]
        code = main([*argv, "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and f"adapter {NPU}:{cls}: plain_reproducer {said}" in err, (code, err)
        assert not (out / "bugs").exists()
