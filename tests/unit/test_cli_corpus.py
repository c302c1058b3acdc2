"""`onnxfuzz generate`: the backend-test layout, resuming, and one-line flag errors."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from onnxfuzz.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
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
    assert sorted(index["cases"]) == [f"test_{i:06d}" for i in range(12)]
    entry = index["cases"]["test_000003"]
    assert entry["seed"] == 10 and entry["ops"] and entry["dtypes"]
    for name in index["cases"]:
        model, ins, outs = _load_case(out / name)
        onnx.checker.check_model(model, full_check=True)
        # the stored outputs against a session that did not write them (the reference is
        # ORT with graph optimizations off; this one has them on, as a user's would)
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        got = session.run(None, ins)
        for o, want, have in zip(model.graph.output, outs, got, strict=True):
            tol = (2e-2, 1e-2) if want.dtype == np.float16 else (1e-4, 1e-5)
            np.testing.assert_allclose(have, want, rtol=tol[0], atol=tol[1], err_msg=o.name)


def test_onnx_own_runner_reads_and_passes_the_corpus(tmp_path: Path) -> None:
    """`onnx.backend.test.runner.Runner` with ONNX Runtime's backend loads every case (it
    refuses folders not named test_*) and passes it, each at its data.json tolerance."""
    out = tmp_path / "corpus"
    assert _run("generate", "--count", "40", "--seed", "0", "--out", str(out)) == 0
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "onnx_runner_check.py"), str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "80 run: 40 passed" in r.stdout, r.stdout  # each case on CPU, and CUDA (skipped)


def test_only_cases_computing_in_float16_get_a_looser_tolerance(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    assert _run("generate", "--count", "40", "--seed", "0", "--out", str(out)) == 0
    loose = 0
    for case in sorted(out.glob("test_*")):
        model = onnx.shape_inference.infer_shapes(onnx.load(case / "model.onnx"))
        g = model.graph
        half = {onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
        types = [v.type.tensor_type.elem_type for v in [*g.input, *g.output, *g.value_info]]
        types += [t.data_type for t in g.initializer]
        if (case / "data.json").exists():
            loose += 1
            assert json.loads((case / "data.json").read_text()) == {"atol": 1e-2, "rtol": 2e-2}
        elif not any(n.attribute for n in g.node if n.op_type in ("If", "Loop", "Scan")):
            assert not half & set(types), case.name  # a float16 model at 1e-3 relative
    assert 0 < loose < 40


def test_files_it_did_not_write_are_refused_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "d"
    (out / "test_000001").mkdir(parents=True)
    (out / "test_000001" / "model.onnx").write_text("mine")
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "generate", "--count", "3", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert err.startswith("onnxfuzz: error: --out:") and "\n" not in err
    assert "test_000001" in err and "not written by this corpus" in err
    assert (out / "test_000001" / "model.onnx").read_text() == "mine"
    assert sorted(p.name for p in out.iterdir()) == ["test_000001"]  # nothing else written
    (out / "index.json").write_text('{"mine": 1}')  # an index.json of someone else's
    shutil.rmtree(out / "test_000001")
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "generate", "--count", "3", "--out", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "was not written by onnxfuzz generate" in r.stderr
    assert (out / "index.json").read_text() == '{"mine": 1}'


@pytest.mark.parametrize("where", ["/proc/onnxfuzz-x", "{tmp}/a-file/sub"])
def test_an_unwritable_out_is_one_line_and_exit_2(where: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    out = where.format(tmp=tmp_path)
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "generate", "--count", "3", "--out", out],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip()
    assert err.startswith(f"onnxfuzz: error: --out: cannot create or write {out}"), err
    assert "\n" not in err


def test_rerun_continues_without_duplicating(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    assert _run("generate", "--count", "5", "--seed", "7", "--nodes", "2:6", "--out", str(out)) == 0
    before = (out / "test_000002" / "model.onnx").read_bytes()
    assert _run(*ARGS, "--out", str(out)) == 0
    assert (out / "test_000002" / "model.onnx").read_bytes() == before
    assert len([p for p in out.iterdir() if p.name.startswith("test_")]) == 12
    fresh = tmp_path / "fresh"
    assert _run(*ARGS, "--out", str(fresh)) == 0
    for i in range(12):
        name = f"test_{i:06d}/model.onnx"
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
        f.write('{"case": "test_0000')  # a line cut short
    (out / ".tmp_test_000399").mkdir(exist_ok=True)  # a case cut short
    assert _run(*ARGS, "--out", str(out)) == 0
    index = json.loads((out / "index.json").read_text())
    assert len(index["cases"]) >= 12
    assert not list(out.glob(".tmp_*"))
    fresh = tmp_path / "fresh"
    assert _run(*ARGS, "--out", str(fresh)) == 0
    for i in range(12):
        name = f"test_{i:06d}/model.onnx"
        assert (out / name).read_bytes() == (fresh / name).read_bytes()
    shutil.rmtree(fresh)


def test_ctrl_c_says_how_to_continue_and_the_same_command_does(tmp_path: Path) -> None:
    """Ctrl-C exited 3, whose meaning was "fuzz --resume continues it". It says to run
    the same command again, which continues the corpus; the options are in index.json from
    the first case on (a run stopped before its first index write let a rerun with
    another --seed go on into the same corpus)."""
    out = tmp_path / "corpus"
    cmd = [sys.executable, "-m", "onnxfuzz", *ARGS[:2], "400", *ARGS[3:], "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = out / ".journal.jsonl"
    for _ in range(600):  # wait until some cases are written, then Ctrl-C
        if journal.exists() and journal.read_text().count("\n") >= 5:
            break
        subprocess.run(["sleep", "0.05"])
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 3, err
    said = err.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"interrupted: \d+ of 400 cases are in {re.escape(str(out))}; run the same command "
        "again to continue it",
        said,
    ), err
    assert _run(*ARGS[:4], "8", *ARGS[5:], "--out", str(out)) == 2  # --seed 8: refused
    assert _run(*ARGS, "--out", str(out)) == 0
    fresh = tmp_path / "fresh"
    assert _run(*ARGS, "--out", str(fresh)) == 0
    for i in range(12):
        name = f"test_{i:06d}/model.onnx"
        assert (out / name).read_bytes() == (fresh / name).read_bytes()


def test_a_corpus_holding_more_than_count_says_so(tmp_path: Path, capsys) -> None:
    """It read "12 cases in DIR (0 new, 5 already there)": 5 of what?"""
    out = tmp_path / "corpus"
    assert _run(*ARGS, "--out", str(out)) == 0
    capsys.readouterr()
    assert _run(*ARGS[:2], "5", *ARGS[3:], "--out", str(out)) == 0
    said = capsys.readouterr().out
    assert f"12 cases in {out} (0 new; 12 were already there, more than --count 5; " in said
    assert _run(*ARGS, "--out", str(out)) == 0
    assert f"12 cases in {out} (0 new, 12 already there; " in capsys.readouterr().out


def test_changed_options_are_refused_naming_the_flag(tmp_path: Path, capsys) -> None:
    out = tmp_path / "corpus"
    assert _run(*ARGS, "--out", str(out)) == 0
    assert (
        _run("generate", "--count", "12", "--seed", "8", "--nodes", "2:6", "--out", str(out)) == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.startswith("onnxfuzz: error: --seed:") and "\n" not in err


def test_an_option_a_record_leaves_out_is_compared_as_its_default(tmp_path: Path, capsys) -> None:
    # to_record leaves out --wide-values 0 (and a corpus from before the option has no
    # such key): continuing either with wide values, or a wide corpus without, would mix
    # two kinds of models in one corpus.
    for first, then in (("0", "0.2"), ("0.2", "0")):
        out = tmp_path / f"corpus{first}"
        assert _run(*ARGS, "--wide-values", first, "--out", str(out)) == 0
        assert _run(*ARGS, "--wide-values", then, "--out", str(out)) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("onnxfuzz: error: --wide-values:") and "\n" not in err, err
        assert _run(*ARGS, "--wide-values", first, "--out", str(out)) == 0


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
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").glob("test_*"))


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


def test_onnx_runtime_error_logs_stay_off_generates_stderr(tmp_path: Path) -> None:
    """Seed 2246 (5..20 nodes) is a valid model on which ONNX Runtime logs an ERROR line
    about its own shape propagation (an Unsqueeze axis) while creating the session; such
    lines broke `generate`'s progress bar. The corpus command prints nothing on stderr."""
    out = tmp_path / "c"
    # (--wide-values 0: the seed's model as it was found, before wide values drew others)
    argv = ["generate", "--count", "1", "--seed", "2246", "--nodes", "5:20", "--wide-values", "0"]
    argv += ["--out", str(out)]
    r = subprocess.run([sys.executable, "-m", "onnxfuzz", *argv], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    # the trigger is still there: at ERROR severity, the same session logs the line
    probe = (
        "import sys, onnxruntime as ort; o = ort.SessionOptions(); o.log_severity_level = 3; "
        "o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL; "
        "ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])"
    )
    model = str(out / "test_000000" / "model.onnx")
    logged = subprocess.run([sys.executable, "-c", probe, model], capture_output=True, text=True)
    assert "E:onnxruntime" in logged.stderr, "seed 2246 no longer triggers it: search another"
