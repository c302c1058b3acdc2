"""`onnxfuzz backend list|check`, `--config` and generator errors inside a campaign."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnxfuzz.cli.main import main
from onnxfuzz.errors import UsageError
from onnxfuzz.judge.oracle import OracleConfig
from onnxfuzz.run.campaign import Campaign, CampaignOptions
from onnxfuzz.store.db import Store


def test_backend_list_shows_builtin_adapters(capsys) -> None:
    assert main(["backend", "list"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}

    def state(name: str) -> str:  # the last column: "available" or "unavailable: why"
        m = re.search(r" (available|unavailable: \S.*)$", rows[name])
        assert m, rows[name]
        return m.group(1)

    assert state("ort") == "available" and "7..26" in rows["ort"]
    assert "onnx-reference" in rows and "tvm" in rows and "torch" in rows
    # openvino is an optional extra: its state must say what the machine really has
    if importlib.util.find_spec("openvino") is None:
        assert state("openvino").startswith("unavailable: openvino is not installed")
    else:
        assert state("openvino") == "available"


def test_backend_check_runs_node_tests_and_a_smoke_fuzz(capsys) -> None:
    assert main(["backend", "check", "ort", "--ops", "Relu,Add", "--smoke", "5"]) == 0
    out = capsys.readouterr().out
    relu = next(line for line in out.splitlines() if line.startswith("Relu "))
    assert int(relu.split()[1]) >= 1  # passes
    assert "smoke fuzz: 5 tests" in out and "5 tests in" in out
    # an op no node test is of ran nothing and passed (exit 0)
    assert main(["backend", "check", "ort", "--ops", "NotAnOp,Relu", "--smoke", "0"]) == 2
    assert "--ops: no ONNX node test is of NotAnOp" in capsys.readouterr().err


def test_config_file_sets_tolerances_and_known_issues(tmp_path: Path) -> None:
    cfg = tmp_path / "onnxfuzz.toml"
    cfg.write_text(
        "[tolerance.float32]\natol = 0.5\nrtol = 0.0\n"
        '[pair."ort:tvm".float16]\natol = 0.1\nrtol = 0.1\n'
        '[[known]]\nbackend = "tvm"\nregex = "Only constant axes"\nnote = "importer"\n'
    )
    o = OracleConfig.load(cfg)
    assert o.tol("ort", "x", "float32") == (0.5, 0.0)
    assert o.tol("ort", "tvm", "float16") == (0.1, 0.1)
    assert o.known[0].backend == "tvm"
    bad = tmp_path / "bad.toml"
    bad.write_text("[tolerance.float32]\natol = 'x'\n")
    with pytest.raises(UsageError, match=r"\[tolerance.float32\] needs numbers"):
        OracleConfig.load(bad)


def test_a_generator_error_is_recorded_and_the_campaign_goes_on(tmp_path, monkeypatch) -> None:
    opts = CampaignOptions(
        backends=["ort", "ort:opt=none"],
        tests=6,
        probe="off",
        generator={"min_nodes": 1, "max_nodes": 3, "ops": ["Relu"]},
        pregen=False,  # generated in this process, where the planted error is
    )
    c = Campaign(tmp_path / "c", opts, resume=False)
    c.start()
    real = c.generator.generate

    def flaky(seed, prefix=None):
        if seed == 3:
            raise ZeroDivisionError("planted spec bug")
        return real(seed, prefix)

    monkeypatch.setattr(c.generator, "generate", flaky)
    try:
        c.run()
    finally:
        c.close()
    store = Store(c.out / "campaign.db")
    try:
        assert store.n_tests() == 6
        assert store.counts_by_backend()[("onnxfuzz", "generator-error")] == 1
    finally:
        store.close()
    assert "seed 3: ZeroDivisionError" in (c.out / "generator-errors.log").read_text()


def test_resume_without_a_campaign_and_reuse_of_a_campaign_folder(tmp_path, capsys) -> None:
    assert main(["fuzz", "--resume", "--out", str(tmp_path / "none")]) == 2
    assert "holds no campaign" in capsys.readouterr().err
    args = [
        "fuzz",
        "--backend",
        "ort",
        "--backend",
        "ort:opt=none",
        "--tests",
        "3",
        "--ops",
        "Relu",
        "--out",
        str(tmp_path / "c"),
    ]
    assert main(args) == 0
    assert main(args) == 2
    assert "already holds a campaign" in capsys.readouterr().err
    meta = json.loads(json.dumps(Store(tmp_path / "c" / "campaign.db").get_meta("options")))
    assert meta["tests"] == 3
    # bundles whose campaign.db is gone: a new campaign overwrote them under the same ids
    orphans = tmp_path / "orphans"
    (orphans / "bugs" / "ort-crash-compile-0123abcd").mkdir(parents=True)
    (orphans / "bugs" / "ort-crash-compile-0123abcd" / "meta.json").write_text("{}")
    assert main([*args[:-1], str(orphans)]) == 2
    assert "holds bug bundles of another campaign" in capsys.readouterr().err
    assert not (orphans / "campaign.db").exists()
    assert [p.name for p in (orphans / "bugs").iterdir()] == ["ort-crash-compile-0123abcd"]


def test_a_corpus_and_a_campaign_do_not_share_a_folder(tmp_path, capsys) -> None:
    """`generate --out` into a campaign's folder wrote its cases beside campaign.db, and
    `fuzz --out` into a corpus's folder wrote campaign.db beside its cases: each is one
    line naming the folder and what it holds, exit 2, nothing written."""
    campaign, corpus = tmp_path / "campaign", tmp_path / "corpus"
    assert _fuzz(campaign, "--tests", "1") == 0
    assert main(["generate", "--count", "2", "--nodes", "2:4", "--out", str(corpus)]) == 0
    capsys.readouterr()
    assert main(["generate", "--count", "2", "--out", str(campaign)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"onnxfuzz: error: --out: {campaign} holds a fuzz campaign (campaign.db); a corpus "
        "goes in a folder of its own: choose another --out\n"
    ), err
    assert _fuzz(corpus, "--tests", "1") == 2
    err = capsys.readouterr().err
    assert err == (
        f"onnxfuzz: error: --out: {corpus} holds a corpus of onnxfuzz generate (index.json); "
        "a campaign goes in a folder of its own: choose another --out\n"
    ), err
    assert not list(campaign.glob("test_*")) and not (campaign / "index.json").exists()
    assert not (corpus / "campaign.db").exists()


def test_a_reference_that_is_not_among_the_backends_is_said_to_be_a_third(tmp_path, capsys) -> None:
    """`--reference X` beside two --backend flags that do not name X runs X as a third
    backend (its start and probe can take minutes): it was done without a word."""
    assert _fuzz(tmp_path / "a", "--tests", "1", "--reference", "onnx-reference") in (0, 1)
    err = capsys.readouterr().err
    third = "--reference onnx-reference is not among the --backend flags: it is run as a third"
    assert err.count(third) == 1, err
    store = Store(tmp_path / "a" / "campaign.db")
    try:
        assert set(store.get_meta("names")) == {"ort", "ort:opt=none", "onnx-reference"}
    finally:
        store.close()
    assert _fuzz(tmp_path / "b", "--tests", "1", "--reference", "ort") in (0, 1)
    assert "is not among the --backend flags" not in capsys.readouterr().err


def test_an_empty_time_budget_is_refused_before_anything_is_written(tmp_path, capsys) -> None:
    out = tmp_path / "c"
    argv = ["fuzz", "--backend", "ort", "--backend", "ort:opt=none", "--out", str(out)]
    assert main([*argv, "--time", "0s"]) == 2
    assert "a time budget must be positive" in capsys.readouterr().err
    assert not out.exists()


def _fuzz(out: Path, *extra: str) -> int:
    return main(
        [
            "fuzz",
            "--backend",
            "ort",
            "--backend",
            "ort:opt=none",
            "--nodes",
            "1:3",
            "--ops",
            "Relu,Add",
            "--probe",
            "off",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_resume_extends_the_budget_and_refuses_what_would_change_the_tests(
    tmp_path, capsys
) -> None:
    out = tmp_path / "c"
    assert _fuzz(out, "--tests", "4") == 0
    assert main(["fuzz", "--resume", "--out", str(out), "--tests", "3"]) == 0
    store = Store(out / "campaign.db")
    try:
        assert store.n_tests() == 7  # 4, then 3 more
    finally:
        store.close()
    capsys.readouterr()
    assert main(["fuzz", "--resume", "--out", str(out), "--tests", "2", "--seed", "9"]) == 2
    assert "--seed" in capsys.readouterr().err
    argv = ["fuzz", "--resume", "--out", str(out), "--backend", "tvm", "--tests", "1"]
    assert main(argv) == 2
    assert "--backend" in capsys.readouterr().err
    store = Store(out / "campaign.db")
    try:
        assert store.n_tests() == 7  # refused commands ran nothing
    finally:
        store.close()


def test_ort_beside_itself_unoptimized_is_tested_against_it(tmp_path, capsys) -> None:
    """`--backend ort --backend ort:opt=none`: the unoptimized one is the reference, stored
    with the campaign (a resume keeps it); `--reference` still chooses."""
    from onnxfuzz.store.db import Store

    for out, extra, want in [
        (tmp_path / "a", (), "ort:opt=none"),
        (tmp_path / "b", ("--reference", "ort"), "ort"),
    ]:
        assert _fuzz(out, "--tests", "1", *extra) in (0, 1)
        said = capsys.readouterr()
        assert f"{want} (reference)" in said.out
        assert ("reference: ort:opt=none, the same backend" in said.err) == (not extra)
        store = Store(out / "campaign.db")
        try:
            assert store.get_meta("options")["reference"] == want
        finally:
            store.close()


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--timeout", "nan"),
        ("--atol", "-1"),
        ("--rtol", "nan"),
        ("--seed", "-1"),
        ("--tests", "10000000000"),
    ],
)
def test_values_no_campaign_can_use_are_refused(tmp_path, capsys, flag, value) -> None:
    """--timeout nan passed FloatRange(min=0.1) (nan passes every bound) and filed a timeout
    bug against ONNX Runtime; a negative seed was a generator error; 10**10 tests ran none,
    past --time."""
    out = tmp_path / "c"
    assert _fuzz(out, flag, value) == 2
    assert f"Invalid value for '{flag}'" in capsys.readouterr().err
    assert not out.exists()


def test_a_refused_campaign_writes_nothing(tmp_path, capsys) -> None:
    out = tmp_path / "c"
    # Errors only known once the backends start, or once the generator sees the options.
    assert _fuzz(out, "--tests", "2", "--reference", "no-such-backend") == 2
    assert not out.exists()
    assert _fuzz(out, "--tests", "2", "--ops", "NoSuchOp") == 2
    assert not out.exists()
    assert "Traceback" not in capsys.readouterr().err
    assert _fuzz(out, "--tests", "2") == 0  # the corrected command is not refused


def test_a_corrupt_campaign_db_and_an_unwritable_out_are_one_line_errors(tmp_path, capsys) -> None:
    out = tmp_path / "c"
    out.mkdir()
    (out / "campaign.db").write_bytes(b"this is not sqlite" * 100)
    assert main(["fuzz", "--resume", "--out", str(out)]) == 2
    assert main(["triage", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("not a readable campaign database") == 2 and "Traceback" not in err
    # an empty file: SQLite read it as an empty campaign, and triage said "0 bugs" beside
    # the bundles in bugs/
    (out / "campaign.db").write_bytes(b"")
    for argv in (
        ["triage", str(out)],
        ["report", str(out)],
        ["fuzz", "--resume", "--out", str(out)],
    ):
        assert main(argv) == 2
        assert "an empty file (0 bytes), not a campaign database" in capsys.readouterr().err
    assert (out / "campaign.db").stat().st_size == 0  # not written into
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert _fuzz(a_file / "c", "--tests", "1") == 2  # no folder can be made under a file
    assert "cannot create or write" in capsys.readouterr().err


def test_exit_codes_are_documented_and_ctrl_c_says_how_to_resume(tmp_path, capsys) -> None:
    assert main(["--help"]) == 0
    assert "Exit codes: 0 clean" in capsys.readouterr().out
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "onnxfuzz", "fuzz", "--backend", "ort"]
    cmd += ["--backend", "ort:opt=none", "--time", "10m", "--probe", "off", "--out", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out / "campaign.db").exists():
        time.sleep(0.1)
    time.sleep(2)  # some tests run
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 3, err
    assert f"onnxfuzz fuzz --resume --out {out}" in err


def test_plain_progress_lines_show_the_budget_and_an_eta(tmp_path, capsys) -> None:
    assert _fuzz(tmp_path / "c", "--tests", "3") == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if " tests (" in ln)
    assert re.match(r"\d+/3 tests \(\d+\.\d/s, \d+s(, ETA \d+s)?\)", line), line


def test_a_second_process_on_a_running_campaign_is_refused(tmp_path, capsys) -> None:
    out = tmp_path / "c"
    cmd = [sys.executable, "-m", "onnxfuzz", "fuzz", "--backend", "ort", "--backend"]
    cmd += ["ort:opt=none", "--time", "5m", "--probe", "off", "--out", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out / "campaign.db").exists():
            time.sleep(0.1)
        assert main(["fuzz", "--resume", "--out", str(out), "--tests", "1"]) == 2
        assert "in use by another onnxfuzz fuzz" in capsys.readouterr().err
    finally:
        p.send_signal(signal.SIGINT)
        assert p.wait(60) == 3  # interrupted; the lock goes with the process
    assert main(["fuzz", "--resume", "--out", str(out), "--tests", "1"]) in (0, 1)


def test_bad_reduce_inputs_are_one_line_errors(tmp_path, capsys) -> None:
    from onnx import TensorProto, helper, numpy_helper

    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    argv = ["--backend", "ort", "--backend", "ort:opt=none"]
    assert main(["reduce", str(empty), *argv]) == 2
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = tmp_path / "m.onnx"
    model.write_bytes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    )
    data = tmp_path / "data"
    data.mkdir()
    foreign = numpy_helper.from_array(np.zeros(2, np.float32), "not_x")
    (data / "input_0.pb").write_bytes(foreign.SerializeToString())
    assert main(["reduce", str(model), *argv, "--inputs", str(data)]) == 2
    wrong = numpy_helper.from_array(np.zeros(3, np.int64), "x")
    (data / "input_0.pb").write_bytes(wrong.SerializeToString())
    assert main(["reduce", str(model), *argv, "--inputs", str(data)]) == 2
    assert main(["generate", "--count", "1", "--dtypes", "", "--out", str(tmp_path / "g")]) == 2
    err = capsys.readouterr().err
    assert "not a valid ONNX model" in err and "not inputs of the model: ['not_x']" in err
    assert "input x is int64[3], the model declares float32[2]" in err
    assert "give at least one dtype" in err and "Traceback" not in err


def _opset17(graph: onnx.GraphProto) -> bytes:
    """A model of ``graph`` that ORT 1.31 loads (opset 17, IR 8)."""
    from onnx import helper

    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8
    ).SerializeToString()


def test_reduce_refuses_what_it_cannot_feed_or_blame_in_one_line(tmp_path, capsys) -> None:
    """Found on models from elsewhere (ONNX's node tests, a custom op): a sequence or
    optional input, a .pb that is no tensor, and a failure the reference shares are
    one-line errors, exit 2 (each was a traceback, or a reduction of the reference's own
    failure as the backend's bug); a sequence output and a custom-domain op no longer
    crash the reducer or the report (check_static formatted a None shape; the reference
    evaluator's fault check asked ai.onnx for com.acme's op)."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    seq = helper.make_tensor_sequence_value_info("s", f, [2])
    y = helper.make_tensor_value_info("y", f, [None])
    graph = helper.make_graph([helper.make_node("SequenceAt", ["s", "i"], ["y"])], "g", [seq], [y])
    graph.initializer.append(helper.make_tensor("i", TensorProto.INT64, [], [0]))
    path = tmp_path / "seq.onnx"
    path.write_bytes(_opset17(graph))
    argv = ["--backend", "ort", "--backend", "ort:opt=none"]
    assert main(["reduce", str(path), *argv]) == 2
    err = capsys.readouterr().err
    assert "input s is a sequence, not a tensor" in err and "Traceback" not in err
    # a .pb that is not a tensor
    x = helper.make_tensor_value_info("x", f, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "relu.onnx"
    path.write_bytes(_opset17(graph))
    data = tmp_path / "data"
    data.mkdir()
    (data / "input_0.pb").write_bytes(b"\xff\xff not a tensor")
    assert main(["reduce", str(path), *argv, "--inputs", str(data)]) == 2
    assert "are not tensors onnxfuzz can read" in capsys.readouterr().err
    # a custom op both sides fail on: the reference's failure too
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("MyOp", ["r"], ["y"], domain="com.acme"),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("com.acme", 1)]
    path = tmp_path / "custom.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=ops, ir_version=8).SerializeToString())
    assert main(["reduce", str(path), *argv, "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "the reference ort fails the same way" in err and "Traceback" not in err
    # a sequence output, a crash of the backend on it: reduced, its bundle written
    split = helper.make_node("SplitToSequence", ["x"], ["s"], keepdims=0)
    graph = helper.make_graph([split], "g", [x], [seq])
    path = tmp_path / "split.onnx"
    path.write_bytes(_opset17(graph))
    crash = "tests/campaign/adapters.py:Raise:op=SplitToSequence"
    out = tmp_path / "s"
    argv = ["--backend", "ort", "--backend", crash, "--out", str(out)]
    assert main(["reduce", str(path), *argv]) == 0
    assert (out / "repro.py").exists() and "Traceback" not in capsys.readouterr().err


def test_reduce_takes_a_model_of_an_opset_onnxfuzz_does_not_generate(tmp_path, capsys) -> None:
    """A model from another tool at opset 11 (below onnxfuzz's 13..28) reduces: its nodes
    have no hand spec at that opset, so no value domain judges them, and nothing asks for
    an --opset the user never gave. An --out that exists is refused before the reduction."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["b"]),  # the planted adapter gets Sigmoid wrong
        helper.make_node("Log", ["b"], ["c"]),
        helper.make_node("Neg", ["c"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 6
    path = tmp_path / "foreign.onnx"
    path.write_bytes(model.SerializeToString())
    argv = ["--backend", "ort", "--backend", "tests/campaign/adapters.py:WrongOp:op=Sigmoid"]
    taken = tmp_path / "taken"
    taken.mkdir()
    assert main(["reduce", str(path), *argv, "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "reducing" not in err and "Traceback" not in err
    out = tmp_path / "reduced"
    assert main(["reduce", str(path), *argv, "--out", str(out), "--budget", "60s"]) == 0
    captured = capsys.readouterr()
    assert "--opset" not in captured.err, captured.err
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["Sigmoid"]
    assert reduced.opset_import[0].version == 11
    assert "did not fail" not in captured.out


def test_reduce_writes_a_bundle_that_reproduces_from_a_copy(tmp_path, capsys) -> None:
    """`reduce` of a model from elsewhere leaves a bundle, as a campaign files one: the
    reduced model, its inputs and the reference's outputs, repro.py, meta.json and
    issue.md (the evaluator's opinion in it). Copied elsewhere, repro.py run in a fresh
    process exits 1 (REPRODUCES) and `replay` says the same; before, --out held the model
    and its inputs alone and `replay` called it a damaged bundle."""
    import shutil

    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Sigmoid", ["a"], ["b"]),  # the planted adapter gets Sigmoid wrong
        helper.make_node("Neg", ["b"], ["y"]),
    ]
    path = tmp_path / "elsewhere.onnx"
    path.write_bytes(_opset17(helper.make_graph(nodes, "g", [x], [y])))
    wrong = str(Path("tests/campaign/adapters.py").resolve()) + ":WrongOp:op=Sigmoid"
    out = tmp_path / "reduced"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", wrong, "--out", str(out)]
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert f"its bundle: {out}/issue.md" in said, said
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ops"] == ["Sigmoid"] and meta["reduced_from"] == str(path)
    assert meta["second_opinion"]["agrees"] == ["ort"]
    issue = (out / "issue.md").read_text()
    assert f"reduced by onnxfuzz from `{path}`, 3 nodes, to 1 node" in issue
    assert "wrong-op:op=Sigmoid is the likely culprit" in issue
    copy = tmp_path / "copied"
    shutil.copytree(out, copy)
    r = subprocess.run(
        [sys.executable, "repro.py"], cwd=copy, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCES"), (r.stdout, r.stderr[-2000:])
    assert main(["replay", str(copy)]) == 1


def test_reduce_of_a_hang_tries_its_candidates_under_a_short_limit(tmp_path, capsys) -> None:
    """A hang's reduction, as a campaign's: each candidate under a few times the
    reference's time (floor 2 s), not --timeout; the Resize that hangs behind a
    SequenceConstruct -> SequenceLength is cut out alone (audit 16, D4: 3 -> 3 nodes in
    61 s, each candidate that hung costing the 30 s --timeout), and the bundle says which
    limit its message's "no result within 2 s" is, beside the --timeout repro.py waits."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Resize", ["x", "", "scales"], ["r"], mode="cubic", axes=[0]),
        helper.make_node("SequenceConstruct", ["r"], ["seq"]),
        helper.make_node("SequenceLength", ["seq"], ["n"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
    n = helper.make_tensor_value_info("n", TensorProto.INT64, [])
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [1], [2.0])
    path = tmp_path / "resize.onnx"
    graph = helper.make_graph(nodes, "g", [x], [n], [scales])
    path.write_bytes(
        helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10
        ).SerializeToString()
    )
    hang = str(Path("tests/campaign/adapters.py").resolve()) + ":Hang:op=Resize"
    out = tmp_path / "reduced"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", hang, "--out", str(out)]
    assert main([*argv, "--timeout", "4", "--neighbours", "0"]) == 0
    said = capsys.readouterr().out
    assert "each candidate runs under 2 s" in said and "3 -> 1 nodes (Resize)" in said, said
    meta = json.loads((out / "meta.json").read_text())
    assert meta["ops"] == ["Resize"] and meta["timeout"] == 4.0
    assert meta["reduction"]["fixed_point"], meta["reduction"]
    log = (out / "log.txt").read_text()
    assert "no result within 2 s" in log and "which repro.py uses, is 4 s" in log, log


def test_reduce_takes_a_wrong_value_out_of_an_if_branch(tmp_path, capsys) -> None:
    """A wrong Softmax inside an If's branch: localization stops at the If ("values in If
    output"), and inlining the branch names Softmax instead, which was not the same
    signature: the If and both branches were kept (6 -> 4 nodes). An op of the
    container's bodies now counts as the container's wrong value: Softmax alone."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    r = helper.make_tensor_value_info("r", f, [2, 3])
    b = helper.make_tensor_value_info("b", f, [2, 3])
    then = helper.make_graph([helper.make_node("Softmax", ["r"], ["b"])], "then", [], [b])
    other = helper.make_graph([helper.make_node("Neg", ["r"], ["b"])], "else", [], [b])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node(
            "Constant", [], ["c"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])
        ),
        helper.make_node("If", ["c"], ["i"], then_branch=then, else_branch=other),
        helper.make_node("Tanh", ["i"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", f, [2, 3])
    y = helper.make_tensor_value_info("y", f, [2, 3])
    graph = helper.make_graph(nodes, "g", [x], [y], value_info=[r])
    path = tmp_path / "if.onnx"
    path.write_bytes(_opset17(graph))
    wrong = "tests/campaign/adapters.py:WrongInBody:op=Softmax"
    out = tmp_path / "r"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", wrong, "--out", str(out)]
    assert main(argv) == 0
    assert "values in If output" in capsys.readouterr().out
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["Softmax"]


def test_reduce_types_run_time_shapes_by_the_reference_s_values(tmp_path) -> None:
    """An exporter's model computes shapes at run time (Shape -> Gather -> Concat ->
    Reshape): shape inference gives the tensors after the Reshape no static shape, so no
    pass could isolate, replace or bypass them (a 161-node encoder kept 17 nodes in 59 s,
    its static twin 1). The reference's values type them: the wrong Softmax alone."""
    from onnx import TensorProto, helper, numpy_helper

    f = TensorProto.FLOAT
    minus = numpy_helper.from_array(np.array([-1], np.int64), "minus")
    zero = numpy_helper.from_array(np.array(0, np.int64), "zero")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["b"]),
        helper.make_node("Unsqueeze", ["b", "axes"], ["bu"]),
        helper.make_node("Concat", ["bu", "minus"], ["shape"], axis=0),
        helper.make_node("Sigmoid", ["x"], ["g"]),
        helper.make_node("Reshape", ["g", "shape"], ["r"]),
        helper.make_node("Softmax", ["r"], ["sm"]),
        helper.make_node("Neg", ["sm"], ["y"]),
    ]
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", f, ["batch", 4, 2])],
        [helper.make_tensor_value_info("y", f, ["batch", None])],
        [minus, zero, axes],
    )
    path = tmp_path / "exported.onnx"
    path.write_bytes(_opset17(graph))
    wrong = "tests/campaign/adapters.py:WrongOp:op=Softmax"
    out = tmp_path / "r"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", wrong, "--out", str(out)]
    assert main(argv) == 0
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["Softmax"]


def test_a_wrong_op_inside_and_outside_an_if_is_one_bug(tmp_path) -> None:
    """The same wrong Softmax localized to an If holding it ("values in If output") and
    found alone ("values in Softmax output"): both reduce to Softmax and are one bundle,
    which `replay` finds still there (before, the If's hits kept the If and both
    branches, then, once the If was inlined, a second bundle of Softmax)."""
    out = tmp_path / "c"
    wrong = "tests/campaign/adapters.py:WrongInBody:op=Softmax"
    flags = ["--tests", "50", "--seed", "11", "--ops", "If,Softmax,Relu,Add"]
    flags += ["--dtypes", "float32", "--probe", "off"]
    assert main(["fuzz", "--backend", "ort", "--backend", wrong, "--out", str(out), *flags]) == 1
    metas = [json.loads(m.read_text()) for m in (out / "bugs").glob("*/meta.json")]
    signatures = {m["signature"].rpartition("|")[2] for m in metas}
    assert len(metas) == 1 and metas[0]["reduced_ops"] == ["Softmax"], signatures
    store = Store(out / "campaign.db")
    rows = store.db.execute("SELECT signature FROM results WHERE signature LIKE '%If output'")
    found_in_if = len(rows.fetchall())
    store.close()
    assert found_in_if, "no hit blamed the If: the test shows nothing"
    assert main(["replay", str(out)]) == 1  # still there


def test_reduce_unrolls_a_loop_around_a_wrong_slice(tmp_path, capsys) -> None:
    """A wrong Slice inside a Loop of constant trip count, in a model that declares no type
    for the Loop's output (ONNX's inference gives it an element type and no shape). That
    output was never exposed, so the wrong value was blamed on the Tanh reading it ("values
    in Tanh output"), and no unrolled candidate could keep that signature; and node-to-input
    made the trip count a graph input, after which the Loop could not be unrolled (11 -> 8
    nodes, Loop -> Tanh kept). Now the Loop is blamed, unrolled, and the Slice stays."""
    from onnx import TensorProto, helper

    f, i64 = TensorProto.FLOAT, TensorProto.INT64

    def const(name: str, dtype: int, dims: list[int], vals: list) -> onnx.NodeProto:
        return helper.make_node(
            "Constant", [], [name], value=helper.make_tensor(name, dtype, dims, vals)
        )

    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            const("st", i64, [1], [0]),
            const("en", i64, [1], [3]),
            const("ax", i64, [1], [1]),
            helper.make_node("Slice", ["v_in", "st", "en", "ax"], ["s"]),
            helper.make_node("Sigmoid", ["s"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", i64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", f, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", f, [2, 3]),
        ],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        const("n", i64, [], [2]),
        const("c", TensorProto.BOOL, [], [True]),
        helper.make_node("Loop", ["n", "c", "r"], ["l"], body=body),
        helper.make_node("Tanh", ["l"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", f, [2, 3])
    y = helper.make_tensor_value_info("y", f, [2, 3])
    path = tmp_path / "loop.onnx"
    path.write_bytes(_opset17(helper.make_graph(nodes, "g", [x], [y])))
    wrong = "tests/campaign/adapters.py:WrongInBody:op=Slice"
    out = tmp_path / "r"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", wrong, "--out", str(out)]
    assert main(argv) == 0
    assert "values in Loop output" in capsys.readouterr().out
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node if n.op_type != "Constant"] == ["Slice"]


def _nonzero_slice() -> bytes:
    """NonZero of [1, 1] -> Slice keeping [1, 1]: onnx2torch's untransposed NonZero is a
    wrong value here and a wrong shape alone (``NONZERO`` plants that bug on ONNX Runtime:
    the same findings without importing torch in each process)."""
    from onnx import TensorProto, helper, numpy_helper

    i64 = TensorProto.INT64
    inits = [
        numpy_helper.from_array(np.array([1.0, 1.0], np.float32), "x"),
        helper.make_tensor("starts", i64, [2], [0, 2]),
        helper.make_tensor("ends", i64, [2], [1, -3]),
        helper.make_tensor("steps", i64, [2], [1, -2]),
    ]
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Slice", ["nz", "starts", "ends", "", "steps"], ["y"]),
    ]
    y = helper.make_tensor_value_info("y", i64, [1, 1])
    return _opset17(helper.make_graph(nodes, "g", [], [y], inits))


# onnx2torch's NonZero bug (planted on ONNX Runtime; torch's own run of a bundle is
# test_repro.py's): [N, rank] for [rank, N]
NONZERO = f"{Path(__file__).resolve().parent / 'adapters.py'}:UntransposedNonZero"


def test_reduce_keeps_one_ops_wrong_output_whichever_kind_it_shows(tmp_path, capsys) -> None:
    """onnx2torch's NonZero is not transposed: [N, rank] for [rank, N]. After a Slice that
    keeps the shape it is a wrong value ("values in NonZero output"); alone, a wrong shape.
    The reduction kept the Slice to keep "values" (2 -> 2 nodes; a campaign filed this bug
    four times, through Slice, GatherElements and ReduceSumSquare). One op's wrong output
    is one fault whichever kind it shows: NonZero alone."""
    path = tmp_path / "nonzero.onnx"
    path.write_bytes(_nonzero_slice())
    out = tmp_path / "r"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", NONZERO, "--out", str(out)]
    assert main(argv) == 0
    assert "values in NonZero output" in capsys.readouterr().out
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["NonZero"]
    meta = json.loads((out / "meta.json").read_text())
    assert meta["signature"].endswith("in NonZero output"), meta["signature"]
    r = subprocess.run(
        [sys.executable, "repro.py"], cwd=out, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCES"), r.stdout + r.stderr[-2000:]


def test_a_campaign_bundle_reduced_to_another_kind_reproduces_from_reduced(tmp_path) -> None:
    """A campaign's finding "values in NonZero output" reduced to NonZero alone, which
    shows it as a wrong shape: reduced/repro.py expects the kind its own model shows (it
    expected the finding's, and would have said DIFFERENT), and `replay reduced/` accepts
    it; the bundle's own repro.py keeps the finding's kind."""
    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.judge.judge import Judge
    from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE
    from onnxfuzz.reduce.reducer import reduce_model
    from onnxfuzz.reduce.reproduce import Reproducer, Target
    from onnxfuzz.store.bundle import Finding, write_bundle

    model = onnx.load_from_string(_nonzero_slice())
    with BackendPool(["ort", NONZERO], timeout=60) as pool:
        outcomes = pool.run_all(model.SerializeToString(), {})
        a = Judge("ort", OracleConfig(), pool).assess(model, {}, outcomes)[NONZERO]
        assert a.signature == f"{NONZERO}|mismatch|run|values in NonZero output", a.signature
        rep = Reproducer(pool, Target(NONZERO, "ort", a.signature))
        reduced = reduce_model(model, {}, rep, 60)
    assert reduced.ops == ["NonZero"] and reduced.final is not None
    assert reduced.final.judgement.kind == "shape"
    f = Finding(
        signature=a.signature,
        bug_id="nonzero",
        judgement=a.judgement,
        backend=NONZERO,
        reference="ort",
        seed=0,
        opset=17,
        ops=["NonZero", "Slice"],
        model=model,
        inputs={},
        outcomes=outcomes,
        versions={},
        tolerance=dict(DEFAULT_TOLERANCE),
        timeout=60.0,
    )
    bundle = write_bundle(tmp_path, f, reduced)
    for folder in (bundle, bundle / "reduced"):
        r = subprocess.run(
            [sys.executable, "repro.py"], cwd=folder, capture_output=True, text=True, timeout=300
        )
        assert r.returncode == 1 and r.stdout.startswith("REPRODUCES"), r.stdout + r.stderr
    assert main(["replay", str(bundle / "reduced")]) == 1


def _batched_model(path: Path) -> None:
    """x[batch, 8] -> Sigmoid -> MatMul(W) -> Relu -> y, and x -> Tanh -> ReduceSum -> z, at
    opset 11 without value_info: as exporters write models, the batch dim symbolic."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4), "W")
    nodes = [
        helper.make_node("Sigmoid", ["x"], ["s"]),
        helper.make_node("MatMul", ["s", "W"], ["m"]),
        helper.make_node("Relu", ["m"], ["y"]),
        helper.make_node("Tanh", ["x"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["z"], keepdims=1),
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", f, ["batch", 8])],
        [
            helper.make_tensor_value_info("y", f, ["batch", 4]),
            helper.make_tensor_value_info("z", f, ["batch", 1]),
        ],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=6)
    path.write_bytes(model.SerializeToString())


def test_reduce_takes_a_model_with_a_symbolic_batch_dim(tmp_path, capsys) -> None:
    """A model whose inputs have a symbolic dim (``batch``), as exported models do, reduces
    on inputs drawn at batch 1 (--dim batch=N for another size), fixed in the model where
    it fails the same way so: a wrong Sigmoid before MatMul -> Relu reduces to Sigmoid
    alone. Before, reduce refused it ("dynamic shape [0, 8]"); with --inputs it kept the
    three nodes, as no intermediate had a static type to expose or replace."""
    path = tmp_path / "batched.onnx"
    _batched_model(path)
    wrong = "tests/campaign/adapters.py:WrongOp:op=Sigmoid"
    out = tmp_path / "r1"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", wrong]
    assert main([*argv, "--out", str(out), "--dim", "batch=3"]) == 0, capsys.readouterr().err
    said = capsys.readouterr()
    assert "inputs drawn with batch=3" in said.err, said.err
    assert "symbolic dims of x fixed" in said.out, said.out
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["Sigmoid"]
    from onnx import numpy_helper

    data = numpy_helper.to_array(onnx.load_tensor(out / "test_data_set_0" / "input_0.pb"))
    assert data.shape == (3, 8)
    # a --dim the model has not, or one that is no size: refused before anything runs
    for bad, said_ in (("seq=2", "no such symbolic dim (they have: batch)"), ("batch=0", "size")):
        assert main([*argv, "--out", str(tmp_path / "no"), "--dim", bad]) == 2
        err = capsys.readouterr().err
        assert said_ in err and "Traceback" not in err, err
    # a crash of the dynamic-shape path only: reduced with the dim kept symbolic
    dynamic = "tests/campaign/adapters.py:RaiseDynamic:op=MatMul"
    out = tmp_path / "r2"
    assert (
        main(["reduce", str(path), "--backend", "ort", "--backend", dynamic, "--out", str(out)])
        == 0
    )
    said = capsys.readouterr()
    assert "reducing with symbolic dims" in said.out, said.out
    reduced_ops = [n.op_type for n in onnx.load(out / "model.onnx").graph.node]
    if len(reduced_ops) > 1:  # it says a smaller model may show it
        assert "a smaller model may fail the same way" in said.out, said.out
    reduced = onnx.load(out / "model.onnx")
    assert "MatMul" in [n.op_type for n in reduced.graph.node]
    assert reduced.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_reduce_sets_aside_outputs_the_reference_gives_nan_in(tmp_path, capsys) -> None:
    """y = Sqrt(x) is NaN where x < 0 on every backend; z = Relu(x) is wrong on the planted
    backend. The reference's NaN in y says nothing of z: reduce judges z (it refused the
    model: "the reference gives NaN or Inf on these inputs")."""
    from onnx import TensorProto, helper

    f = TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Sqrt", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["z"])],
        "g",
        [helper.make_tensor_value_info("x", f, [6])],
        [helper.make_tensor_value_info("y", f, [6]), helper.make_tensor_value_info("z", f, [6])],
    )
    path = tmp_path / "m.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path.write_bytes(model.SerializeToString())
    out = tmp_path / "r"
    wrong = "tests/campaign/adapters.py:WrongOp:op=Relu"
    argv = ["reduce", str(path), "--backend", "ort", "--backend", wrong, "--out", str(out)]
    assert main(argv) == 0
    said = capsys.readouterr()
    assert "outputs y set aside: the reference ort gives NaN or Inf there" in said.err, said.err
    assert [n.op_type for n in onnx.load(out / "model.onnx").graph.node] == ["Relu"]


def test_reduce_says_why_when_the_reference_or_the_backend_cannot_load_the_model(
    tmp_path, capsys
) -> None:
    """A model at IR 14 (onnx 1.23's default), which ONNX Runtime 1.31 does not load: as
    the reference, reduce says the reference fails on it and to give another; as the
    backend, that it is unsupported there, with ORT's reason. Neither is reduced."""
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 14
    path = tmp_path / "ir14.onnx"
    path.write_bytes(model.SerializeToString())
    assert main(["reduce", str(path), "--backend", "ort", "--backend", "onnx-reference"]) == 2
    err = capsys.readouterr().err
    # ORT's reason, with the fix, not the C++ loader's signature around it
    assert "the reference ort fails on it" in err and "IR version 14 is above the 13" in err
    assert "set model.ir_version = 13" in err and "give another reference" in err
    assert main(["reduce", str(path), "--backend", "onnx-reference", "--backend", "ort"]) == 2
    err = capsys.readouterr().err
    assert "ort cannot run it, a missing feature rather than a bug" in err
    assert "set model.ir_version = 13" in err and "PathString" not in err
    assert not (tmp_path / "ir14-reduced").exists() and "Traceback" not in err
    # A reference that runs and gives NaN (Sqrt of the negative values drawn for x) says
    # nothing either: other inputs may, and the backend named as the reference is not
    # suggested to itself.
    sqrt = helper.make_graph([helper.make_node("Sqrt", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "sqrt.onnx"
    model = helper.make_model(sqrt, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    path.write_bytes(model.SerializeToString())
    argv = ["--backend", "onnx-reference", "--backend", "ort", "--seed", "3"]
    assert main(["reduce", str(path), *argv]) == 2
    err = capsys.readouterr().err
    assert "the reference onnx-reference gives NaN or Inf on these inputs" in err
    assert "try other inputs (--seed N" in err and "--backend onnx-reference" not in err


def test_reduce_refuses_a_mismatch_against_the_evaluators_documented_fault(
    tmp_path, capsys
) -> None:
    """ORT departs from the ONNX reference evaluator on an LRN of batch 1 and 5 channels,
    where the evaluator sums the window over the batch (onnx #7805): a campaign files no
    such finding, and reduce says why instead of reducing it; at batch 5 the two agree."""
    from onnx import TensorProto, helper

    for n, code in ((1, 2), (5, 2)):
        shape = [n, 5, 2, 3]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
        lrn = helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.5, beta=0.75, bias=1.0)
        graph = helper.make_graph([lrn], "g", [x], [y])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        path = tmp_path / f"lrn{n}.onnx"
        path.write_bytes(model.SerializeToString())
        argv = ["--backend", "onnx-reference", "--backend", "ort"]
        assert main(["reduce", str(path), *argv]) == code
        err = capsys.readouterr().err
        if n == 1:
            assert "ort departs from onnx-reference" in err, err
            assert "the ONNX reference evaluator is itself wrong (LRN: " in err
            assert "--backend ort" in err and "Traceback" not in err
        else:
            assert "does not fail on ort: verdict ok" in err, err
        assert not (tmp_path / f"lrn{n}-reduced").exists()


def test_reduce_draws_string_inputs_and_asks_for_the_ones_it_cannot_draw(tmp_path, capsys) -> None:
    """A model from elsewhere with a string input and no test data reduces on drawn short
    strings (and writes them as test data); a sequence input or a float8 one, which
    onnxfuzz draws no values of, is asked for as --inputs, in one line."""
    from onnx import TensorProto, helper

    s_ = TensorProto.STRING
    strings = helper.make_graph(
        [
            helper.make_node("StringConcat", ["x", "x"], ["c"]),
            helper.make_node("Identity", ["c"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", s_, [3])],
        [helper.make_tensor_value_info("y", s_, [3])],
    )
    path = tmp_path / "strings.onnx"
    model = helper.make_model(strings, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
    path.write_bytes(model.SerializeToString())
    planted = "tests/campaign/adapters.py:Raise:op=StringConcat"
    out = tmp_path / "reduced"
    argv = ["reduce", str(path), "--backend", "onnx-reference", "--backend", planted]
    assert main([*argv, "--out", str(out)]) == 0
    reduced = onnx.load(out / "model.onnx")
    assert [n.op_type for n in reduced.graph.node] == ["StringConcat"]
    from onnx import numpy_helper

    data = numpy_helper.to_array(onnx.load_tensor(out / "test_data_set_0" / "input_0.pb"))
    assert data.dtype == object and set(data.tolist()) <= {"", "a", "ab", "ba"}
    capsys.readouterr()
    seq = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    length = helper.make_graph(
        [helper.make_node("SequenceLength", ["s"], ["n"])],
        "g",
        [seq],
        [helper.make_tensor_value_info("n", TensorProto.INT64, [])],
    )
    f8 = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    # a float8 input can come from --inputs; a sequence cannot be fed at all (it said
    # "give --inputs", which then failed with a traceback)
    for graph, said, fix in (
        (length, "input s is a sequence, not a tensor", "build the sequence inside it"),
        (f8, "FLOAT8E4M3FN", "give --inputs"),
    ):
        p = tmp_path / f"{graph.node[0].op_type}.onnx"
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)
        p.write_bytes(m.SerializeToString())
        assert main(["reduce", str(p), "--backend", "onnx-reference", "--backend", "tvm"]) != 0
        err = capsys.readouterr().err
        assert said in err and fix in err and "Traceback" not in err


def test_reduce_says_which_wrong_result_a_crash_follows(tmp_path, capsys) -> None:
    """A crash of Neg on Abs's float64 result (planted): reduce keeps Abs -> Neg, and says
    the crash follows Abs's wrong element type, which the model cut after Abs shows."""
    from models import chain

    path = tmp_path / "m.onnx"
    path.write_bytes(chain(["Relu", "Abs", "Neg", "Relu"]).SerializeToString())
    widens = f"{Path(__file__).parent / 'adapters.py'}:WidensThenFails:op=Abs"
    assert main(["reduce", str(path), "--backend", "ort", "--backend", widens]) == 0
    out = capsys.readouterr().out
    assert "(Abs Neg)" in out, out
    assert (
        "the crash follows a wrong result of Abs: output t1: dtype float64, the model "
        "declares float32" in out
    ), out
    assert "fix Abs first" in out


def test_a_reduction_that_spent_its_budget_says_so_and_how_to_go_on(tmp_path, capsys) -> None:
    """torch.compile takes 1-2 s a model: a 30 s reduction left a 7-node Reshape crash
    with nothing to tell it was not the end. A bundle whose reduction spent its budget with
    two nodes or more left says so (issue.md, the bug tables: "may reduce further"), and
    triage gives the `onnxfuzz reduce` command that goes on from it, which does."""
    slow = f"{Path(__file__).parent / 'adapters.py'}:SlowRaise:op=Neg,delay=0.5"
    out = tmp_path / "c"
    argv = ["fuzz", "--backend", "ort", "--backend", slow, "--tests", "6", "--seed", "3"]
    argv += ["--nodes", "8", "--ops", "Neg,Abs,Relu,Sigmoid,Tanh,Exp", "--probe", "off"]
    argv += ["--reduce-budget", "1s", "--confirm", "1", "--out", str(out)]
    assert main(argv) == 1
    capsys.readouterr()
    stopped = []
    for bundle in sorted((out / "bugs").iterdir()):
        meta = json.loads((bundle / "meta.json").read_text())
        issue = (bundle / "issue.md").read_text()
        cut = meta["reduced_nodes"] >= 2 and not meta["reduction"]["fixed_point"]
        assert cut == ("The reduction spent its time budget" in issue), issue
        stopped += [bundle] if cut else []
    assert stopped, "no reduction spent its budget: the test shows nothing"
    assert main(["triage", str(out)]) == 0
    said = capsys.readouterr().out
    assert "may reduce further" in said, said
    command = re.search(r"`onnxfuzz (reduce [^`]+)`", said)
    assert command is not None, said
    assert (out / "triage.md").read_text().count("`onnxfuzz reduce ") == 1
    args = shlex.split(command.group(1))
    assert args[1] in [str(b / "reduced" / "model.onnx") for b in stopped], args
    assert main([*args[:-2], "--budget", "60s", "--out", str(tmp_path / "more")]) == 0
    assert "-> 1 nodes (Neg)" in capsys.readouterr().out


def test_infer_leaves_out_an_op_whose_draws_fail_and_refuses_an_empty_domain(
    tmp_path, capsys
) -> None:
    """Constant's draws raised ValueError (negative dimensions) and ended an `infer` run of
    ai.onnx, whose verified rules were never written; `--domain ""` ran ONNX's default
    domain as ".Abs", ".Acos", ..."""
    out, cache = tmp_path / "rules.json", tmp_path / "cache.jsonl"
    argv = ["infer", "--out", str(out), "--cache", str(cache), "--budget", "20s"]
    assert main([*argv, "--domain", ""]) == 2
    assert "--domain: name a domain" in capsys.readouterr().err
    assert main([*argv, "--domain", "ai.onnx", "--ops", "Constant,Abs"]) == 0
    said = capsys.readouterr().out
    assert "left out ai.onnx.Constant: draws failed: ValueError" in said, said
    written = json.loads(out.read_text())
    assert "Constant" in written["left_out"] and "Abs" not in written["left_out"], written
