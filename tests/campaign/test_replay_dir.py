"""``onnxfuzz replay DIR``: every bundle of a folder against the installed backends, as a
table or JSON: still / fixed / different / damaged, and the exit code of the table
(2 damaged, else 4 different, else 1 still, else 0). Real ONNX Runtime, a real bug (its
FuseReluClip rewrite rule throws on int32 Clip bounds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz.cli.main import main
from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE, Judgement, Verdict
from onnxfuzz.run.replay_all import current_form
from onnxfuzz.store.bundle import Finding, write_bundle

REFERENCE = "ort:opt=none"


def _relu_clip(dtype: int) -> onnx.ModelProto:
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    bounds = [
        helper.make_tensor("lo", dtype, [], np.array([-5], np_type)),
        helper.make_tensor("hi", dtype, [], np.array([3], np_type)),
    ]
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Clip", ["r", "lo", "hi"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", dtype, [4])],
        [helper.make_tensor_value_info("y", dtype, [4])],
        bounds,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _bundle(
    root: Path,
    bug_id: str,
    dtype: int,
    signature: str,
    backend: str = "ort",
    message: str = "Fail: FuseReluClip",
) -> Path:
    """A bundle of ``backend`` crashing at compile on Relu -> Clip with ``message``."""
    model = _relu_clip(dtype)
    x = np.array([-3, 1, 5, -7], helper.tensor_dtype_to_np_dtype(dtype))
    y = np.clip(np.maximum(x, 0), -5, 3)
    j = Judgement(Verdict.CRASH, Stage.COMPILE, message=message)
    f = Finding(
        signature=signature,
        bug_id=bug_id,
        judgement=j,
        backend=backend,
        reference=REFERENCE,
        seed=0,
        opset=17,
        ops=["Relu", "Clip"],
        model=model,
        inputs={"x": x},
        outcomes={
            REFERENCE: Outcome(Status.OK, outputs={"y": y}),
            backend: Outcome(Status.CRASH, Stage.COMPILE, message=j.message),
        },
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=60.0,
    )
    return write_bundle(root, f)


def _replay(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["replay", *args])
    return code, capsys.readouterr().out


def test_replay_over_a_folder_gives_the_table_and_its_exit_code(tmp_path, capsys) -> None:
    campaign = tmp_path / "run"
    still = _bundle(campaign, "a-fusion", TensorProto.INT32, "ort|crash|compile|placeholder")
    _bundle(campaign, "b-float", TensorProto.FLOAT, "ort|crash|compile|placeholder")
    damaged = shutil.copytree(still, campaign / "bugs" / "c-damaged")
    (damaged / "model.onnx").unlink()

    code, out = _replay(capsys, str(campaign), "--format", "json")
    rows = {r["bundle"]: r for r in json.loads(out)["bundles"]}
    assert code == 2, out  # a damaged bundle: a set-up error, after the others ran
    assert rows["a-fusion"]["status"] == "different"  # its stored signature is not this one
    assert rows["b-float"]["status"] == "fixed"  # float bounds fuse fine
    assert rows["c-damaged"]["status"] == "damaged"
    assert "bundle damaged: " in rows["c-damaged"]["detail"] and "model.onnx" in out
    assert json.loads(out)["counts"] == {"still": 0, "fixed": 1, "different": 1, "damaged": 1}

    shutil.rmtree(damaged)  # nothing damaged: one that fails differently sets the code
    assert _replay(capsys, str(campaign), "--format", "json")[0] == 4

    # the signature ORT gives now, stored: the bug is still there
    now = rows["a-fusion"]["detail"].removeprefix("fails differently: ")
    meta = json.loads((still / "meta.json").read_text())
    (still / "meta.json").write_text(json.dumps({**meta, "signature": now}))
    code, out = _replay(capsys, str(campaign))  # the table
    assert code == 1, out
    assert "FuseReluClip" in now
    lines = {ln.split()[0]: ln.split()[1] for ln in out.splitlines()[1:-1]}
    assert lines == {"a-fusion": "still", "b-float": "fixed"}, out
    assert out.splitlines()[-1] == "1 still, 1 fixed, 0 different, 0 damaged"

    # a folder of bundles (not a campaign): the same; all fixed is 0
    shutil.rmtree(still)
    code, out = _replay(capsys, str(campaign / "bugs"))
    assert code == 0 and "b-float" in out, out


def test_a_folder_without_bundles_is_a_one_line_error(tmp_path, capsys) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["replay", str(tmp_path / "empty")]) == 2
    assert "no bug bundles here" in capsys.readouterr().err
    # a campaign that found nothing replays nothing, cleanly (it was exit 2: a CI step
    # replaying a clean campaign failed)
    clean = tmp_path / "clean"
    argv = ["fuzz", "--backend", "ort", "--backend", "ort:opt=none", "--ops", "Relu"]
    assert main([*argv, "--tests", "2", "--probe", "off", "--out", str(clean)]) == 0
    capsys.readouterr()
    assert main(["replay", str(clean)]) == 0
    assert "a campaign with no bug bundles: nothing to replay" in capsys.readouterr().out


def test_old_signatures_are_read_under_todays_rules() -> None:
    """A bundle written before TVM's empty argument list was read as a shape is the same
    bug today; mismatch details and native frames are left as they are."""
    old = "tvm|crash|compile|InternalError: unknown intrinsic ir.Op(arguments=(), name=S)"
    assert current_form(old).endswith("arguments=(SHAPE), name=S)")
    assert current_form(current_form(old)) == current_form(old)
    kept = "ort|mismatch|run|values in Add1 output"
    assert current_form(kept) == kept


ADAPTERS = Path(__file__).resolve().parent / "adapters.py"


def test_a_bundle_written_before_pythons_names_were_kept_still_reproduces(tmp_path, capsys) -> None:
    """Signatures kept Python's quoted names from 2026-11-27 on ("FusedKernel object has no
    attribute tile", where every quoted word was S): a bundle written before then, with the
    earlier form, is the same bug, not one that fails differently."""
    label = f"{ADAPTERS}:MissingAttribute:op=Relu"
    message = "AttributeError: 'FusedKernel' object has no attribute 'tile'"
    root = tmp_path / "run"
    for bug_id, detail in [
        ("a-before", "AttributeError: S object has no attribute S"),
        ("b-now", "AttributeError: FusedKernel object has no attribute tile"),
        ("c-other", "AttributeError: S object has no attribute S | S"),
    ]:
        signature = f"{label}|crash|compile|{detail}"
        _bundle(root, bug_id, TensorProto.FLOAT, signature, label, message)
    code, out = _replay(capsys, str(root), "--format", "json")
    rows = {r["bundle"]: r["status"] for r in json.loads(out)["bundles"]}
    assert rows == {"a-before": "still", "b-now": "still", "c-other": "different"}, out
    assert code == 4


def test_a_bug_the_backend_now_rejects_as_unsupported_is_not_fixed(tmp_path, capsys) -> None:
    """A crash whose backend now refuses the model as unsupported (a release that drops a
    form, or an adapter that now reads its error as a stated limit, as OpenVINO's "only
    supported for 4D input tensors") is not fixed: replay says so, as the bundle's own
    repro.py does; a backend that runs the model right is fixed."""
    root = tmp_path / "run"
    refuses = f"{ADAPTERS}:Unsupported:op=Relu"  # NotImplementedError on Relu
    sig = f"{refuses}|crash|compile|Fail: FuseReluClip"
    refused = _bundle(root, "a-refused", TensorProto.FLOAT, sig, refuses)
    ort_sig = "ort|crash|compile|Fail: FuseReluClip"
    fixed = _bundle(root, "b-fixed", TensorProto.FLOAT, ort_sig, "ort")
    code, out = _replay(capsys, str(root), "--format", "json")
    rows = {r["bundle"]: r for r in json.loads(out)["bundles"]}
    assert rows["a-refused"]["status"] == "different", out
    assert "now rejects the model as unsupported at compile stage" in out
    assert "Relu is not implemented" in out
    assert rows["b-fixed"]["status"] == "fixed", out  # float Clip bounds: ORT is right
    assert code == 4
    # the bundle's own script says the same
    r = subprocess.run([sys.executable, "repro.py"], cwd=refused, capture_output=True, text=True)
    assert r.returncode == 4 and "now rejects the model as unsupported" in r.stdout, r.stdout
    # a reference that now fails on the model tells nothing: not fixed either
    meta = json.loads((fixed / "meta.json").read_text())
    meta["reference"] = f"{ADAPTERS}:Raise:op=Relu"
    (fixed / "meta.json").write_text(json.dumps(meta))
    code, out = _replay(capsys, str(fixed))
    assert code == 4 and "cannot tell: the reference" in out and "fails on the model now" in out


def test_a_mismatch_against_the_evaluators_documented_fault_replays_as_cannot_tell(
    tmp_path, capsys
) -> None:
    """NegativeLogLikelihoodLoss at ignore_index=-1 without a weight: the ONNX reference
    evaluator counts the ignored targets, ORT leaves them out as the spec says. A bundle
    filed against ORT before the fault was documented replays as 'cannot tell' naming the
    fault (exit 4), not as ORT's bug still there."""
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    node = helper.make_node(
        "NegativeLogLikelihoodLoss", ["x", "t"], ["y"], ignore_index=-1, reduction="mean"
    )
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("x", f32, [2, 3]),
            helper.make_tensor_value_info("t", i64, [2]),
        ],
        [helper.make_tensor_value_info("y", f32, [])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x, t = np.ones((2, 3), np.float32), np.array([1, -1], np.int64)
    j = Judgement(Verdict.MISMATCH, Stage.RUN, "values", "y", "output y: 1/1 elements outside")
    f = Finding(
        signature="ort|mismatch|run|values in NegativeLogLikelihoodLoss output",
        bug_id="nll",
        judgement=j,
        backend="ort",
        reference="onnx-reference",
        seed=0,
        opset=17,
        ops=["NegativeLogLikelihoodLoss"],
        model=model,
        inputs={"x": x, "t": t},
        outcomes={
            "onnx-reference": Outcome(Status.OK, outputs={"y": np.array(-0.5, np.float32)}),
            "ort": Outcome(Status.OK, outputs={"y": np.array(-1.0, np.float32)}),
        },
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=60.0,
    )
    bundle = write_bundle(tmp_path / "run", f)
    code, out = _replay(capsys, str(bundle))
    assert code == 4 and "cannot tell: the reference onnx-reference is known wrong" in out, out
    assert "NegativeLogLikelihoodLoss: without a weight input" in out, out
