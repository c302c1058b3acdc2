"""`onnxfuzz generate`: the backend-test layout, resuming, and one-line flag errors."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from onnxfuzz.cli.main import main
from onnxfuzz.generate.corpus.validate import run_reference

ARGS = ["generate", "--count", "12", "--seed", "7", "--nodes", "2:6"]


def _run(*argv: str) -> int:
    return main(list(argv))


def _load_case(folder: Path):
    model = onnx.load(folder / "model.onnx")
    data = folder / "test_data_set_0"
    ins = {}
    for k in range(len(model.graph.input)):
        t = onnx.TensorProto()
        t.ParseFromString((data / f"input_{k}.pb").read_bytes())
        ins[t.name] = numpy_helper.to_array(t)
    outs = []
    for k in range(len(model.graph.output)):
        t = onnx.TensorProto()
        t.ParseFromString((data / f"output_{k}.pb").read_bytes())
        outs.append(numpy_helper.to_array(t))
    return model, ins, outs


def test_layout_index_and_reference_outputs(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    assert _run(*ARGS, "--out", str(out)) == 0
    index = json.loads((out / "index.json").read_text())
    assert sorted(index["cases"]) == [f"case_{i:06d}" for i in range(12)]
    entry = index["cases"]["case_000003"]
    assert entry["seed"] == 10 and entry["ops"] and entry["dtypes"]
    for name in index["cases"]:
        model, ins, outs = _load_case(out / name)
        onnx.checker.check_model(model, full_check=True)
        got = run_reference(model, ins)
        for o, want in zip(model.graph.output, outs, strict=True):
            np.testing.assert_array_equal(got[o.name], want)


def test_rerun_continues_without_duplicating(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    assert _run("generate", "--count", "5", "--seed", "7", "--nodes", "2:6", "--out", str(out)) == 0
    before = (out / "case_000002" / "model.onnx").read_bytes()
    assert _run(*ARGS, "--out", str(out)) == 0
    assert (out / "case_000002" / "model.onnx").read_bytes() == before
    assert len([p for p in out.iterdir() if p.name.startswith("case_")]) == 12
    fresh = tmp_path / "fresh"
    assert _run(*ARGS, "--out", str(fresh)) == 0
    for i in range(12):
        name = f"case_{i:06d}/model.onnx"
        assert (out / name).read_bytes() == (fresh / name).read_bytes()


def test_a_killed_run_is_finished_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    cmd = [sys.executable, "-m", "onnxfuzz", *ARGS[:2], "400", *ARGS[3:], "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = out / ".journal.jsonl"
    for _ in range(600):  # wait until some cases are written, then SIGKILL
        if journal.exists() and journal.read_text().count("\n") >= 5:
            break
        subprocess.run(["sleep", "0.05"])
    proc.kill()
    proc.wait()
    with open(journal, "a") as f:
        f.write('{"case": "case_0000')  # a line cut short
    (out / ".tmp_case_000399").mkdir(exist_ok=True)  # a case cut short
    assert _run(*ARGS, "--out", str(out)) == 0
    index = json.loads((out / "index.json").read_text())
    assert len(index["cases"]) >= 12
    assert not list(out.glob(".tmp_*"))
    fresh = tmp_path / "fresh"
    assert _run(*ARGS, "--out", str(fresh)) == 0
    for i in range(12):
        name = f"case_{i:06d}/model.onnx"
        assert (out / name).read_bytes() == (fresh / name).read_bytes()
    shutil.rmtree(fresh)


def test_changed_options_are_refused_naming_the_flag(tmp_path: Path, capsys) -> None:
    out = tmp_path / "corpus"
    assert _run(*ARGS, "--out", str(out)) == 0
    assert (
        _run("generate", "--count", "12", "--seed", "8", "--nodes", "2:6", "--out", str(out)) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("onnxfuzz: error: --seed:") and "\n" not in err


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["generate", "--count", "x", "--out", "o"], "'--count'"),
        (["generate", "--count", "3", "--out", "o", "--nodes", "9:2"], "'--nodes'"),
        (["generate", "--count", "3", "--out", "o", "--nodes", "a:b"], "'--nodes'"),
        (["generate", "--count", "3", "--out", "o", "--dtypes", "float33"], "--dtypes"),
        (["generate", "--count", "3", "--out", "o", "--ops", "Nope"], "--ops"),
        (["generate", "--count", "3", "--out", "o", "--picking-rate", "2"], "'--picking-rate'"),
        (["generate", "--count", "3", "--out", "o", "--opset", "40"], "'--opset'"),
        (["generate", "--count", "3", "--out", "o", "--frobnicate"], "--frobnicate"),
    ],
)
def test_bad_flags_give_one_line(argv, flag, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert _run(*argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and flag in err and err.startswith("onnxfuzz: error:")
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").glob("case_*"))


def test_specs_command_lists_ops(capsys) -> None:
    assert _run("specs") == 0
    out = capsys.readouterr().out
    assert "Relu" in out and "ops at opset 21" in out


def test_ort_kernel_table_matches_installed_onnxruntime() -> None:
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run(
        [sys.executable, str(root / "tools" / "gen_ort_kernels.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
