"""Findings ready to file: issue.md per bundle, triage as markdown, JSON and SARIF."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from onnxfuzz.cli.main import main
from onnxfuzz.store.issue import tracker

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
FLAGS = ["--tests", "25", "--seed", "3", "--nodes", "2:5", "--ops", "Mul,Add,Relu,Neg"]
FLAGS += ["--dtypes", "float32", "--probe", "off"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("triage") / "c"
    backend = f"{ADAPTERS}:Raise:op=Mul"
    assert main(["fuzz", "--backend", "ort", "--backend", backend, "--out", str(out), *FLAGS]) == 1
    return out


def test_every_bundle_has_an_issue_to_file(campaign: Path) -> None:
    bundles = [p for p in (campaign / "bugs").iterdir() if p.is_dir()]
    assert bundles
    for b in bundles:
        text = (b / "issue.md").read_text()
        title = text.splitlines()[0]
        # a Python exception, not a process crash: said so (a crash names its signal)
        title_start = "# raise:op=Mul raises an exception while compiling on a 1-node model: Mul"
        assert title.startswith(title_start)
        assert "cd reduced && python repro.py" in text  # the one-line repro
        assert "Mul (" in text and "=> (" in text  # the reduced model as ONNX text
        assert "| input | type | shape | values |" in text
        assert "### Expected behavior" in text and "as it does in ort" in text
        assert "InternalError: lowering of Mul failed" in text  # what happened
        # and where, in the adapter's own code (it was in log.txt alone), by file name
        actual = text.split("### Actual behavior")[1].split("###")[0]
        assert 'File "adapters.py", line ' in actual and "in compile" in actual, actual
        assert "sandbox.py" not in actual, actual
        assert "onnxfuzz.inputs" not in text  # no onnxfuzz-internal metadata
        assert str(ADAPTERS) not in text.split("### Versions")[0]


def test_triage_writes_markdown_json_and_sarif(campaign: Path, capsys) -> None:
    assert main(["triage", str(campaign)]) == 0
    assert "issue.md" in (campaign / "triage.md").read_text()
    # a family is a grouping: for wrong values, not a shared cause (it said "Bundles of one
    # root cause" over CumSum, NonZero and NonMaxSuppression bundles)
    text = (campaign / "triage.md").read_text()
    assert "one root cause" not in text and "each a bug to read on its own" in text
    capsys.readouterr()
    assert main(["triage", str(campaign), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tests"] == 25 and doc["bugs"]
    assert all(Path(b["repro"].split()[1]).exists() for b in doc["bugs"])
    assert main(["triage", str(campaign), "--format", "sarif"]) == 0
    sarif = json.loads(capsys.readouterr().out)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "onnxfuzz"
    rule_ids = {r["id"] for r in run["tool"]["driver"]["rules"]}
    for res in run["results"]:
        assert res["ruleId"] in rule_ids and res["level"] == "error"
        uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert Path(uri).name == "model.onnx" and Path(uri).exists()
    assert json.loads((campaign / "triage.sarif").read_text()) == sarif
    assert main(["triage", str(campaign), "--format", "xml"]) == 2  # a one-line usage error


def test_each_backend_files_to_its_own_tracker() -> None:
    assert tracker("ort:opt=none") == "onnxruntime"
    assert tracker("tvm") == "tvm"
    assert tracker("torch-compile") == "onnx2torch"
    assert tracker("onnx-reference") == "onnx"
    assert tracker("npu=./npu.py:Npu") == "generic"
    assert tracker("ort_wrapper.py:Mine") == "generic"
    assert tracker("myort=ort:opt=none") == "onnxruntime"


def test_a_mismatch_without_a_majority_accuses_no_one(tmp_path: Path) -> None:
    """Two backends that disagree: either may be wrong, and issue.md says so."""
    import onnx
    from onnx import TensorProto, helper

    from onnxfuzz.store.issue import issue_markdown

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    bundle = tmp_path / "b"
    (bundle / "test_data_set_0").mkdir(parents=True)
    onnx.save(helper.make_model(g), str(bundle / "model.onnx"))
    meta = {"id": "tvm-mismatch-run-1", "verdict": "mismatch", "stage": "run", "ops": ["Relu"]}
    meta |= {"backend": "tvm", "reference": "ort", "suspect": None, "versions": {}}
    (bundle / "meta.json").write_text(json.dumps(meta))
    (bundle / "log.txt").write_text("mismatch in tvm at run stage\n\noutput y: 2/2 differ\n")
    text = issue_markdown(bundle)
    assert text.startswith("# tvm and ort disagree on a 1-node model: Relu")
    assert "returns wrong results" not in text and "either" not in text.split("\n")[0]
    # TVM's form has no summary field: the caution is there all the same, and so is the
    # reference evaluator's opinion once the campaign asked for one
    assert "No other backend in the comparison decided which of tvm and ort" in text
    meta["second_opinion"] = {"by": "onnx-reference", "agrees": ["ort"], "said": "ran"}
    (bundle / "meta.json").write_text(json.dumps(meta))
    assert "agrees with ort and not with tvm: tvm is the likely culprit" in issue_markdown(bundle)
    del meta["second_opinion"]
    meta["suspect"] = "tvm"  # a third backend sided with ort
    (bundle / "meta.json").write_text(json.dumps(meta))
    assert issue_markdown(bundle).startswith("# tvm returns wrong results")


def test_a_crash_of_the_reference_points_to_no_backend_that_ran_it(tmp_path: Path) -> None:
    """ORT crashing as the comparison's reference (a campaign found Relu -> Clip(int8) in
    ORT's Relu-Clip fusion): issue.md must not say the model runs "as it does in ort"."""
    import onnx
    from onnx import TensorProto, helper

    from onnxfuzz.store.issue import issue_markdown

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [])],
    )
    bundle = tmp_path / "b"
    (bundle / "test_data_set_0").mkdir(parents=True)
    onnx.save(helper.make_model(g), str(bundle / "model.onnx"))
    meta = {"id": "ort-crash-compile-1", "verdict": "crash", "stage": "compile", "ops": ["Relu"]}
    meta |= {"backend": "ort", "reference": "ort", "suspect": "ort", "versions": {}}
    (bundle / "meta.json").write_text(json.dumps(meta))
    (bundle / "log.txt").write_text("crash in ort at compile stage\n\nFail: fusion\n")
    text = issue_markdown(bundle)
    assert "# ort raises an exception at session creation (InferenceSession)" in text
    assert "as it does in" not in text
    assert "valid ONNX" in text
    meta |= {"backend": "tvm", "id": "tvm-crash-compile-1", "suspect": "tvm"}
    (bundle / "meta.json").write_text(json.dumps(meta))
    assert "compiles and runs, as it does in ort." in issue_markdown(bundle)


def test_a_bug_reduced_to_no_nodes_is_not_titled_with_the_original_ops(tmp_path: Path) -> None:
    """A fault whatever the model (a planted every-7th-run mismatch) reduces to a graph of
    no nodes, its output its input: issue.md said "on a 9-node model: Ceil -> ..." (an
    empty reduced_ops fell back to the original's)."""
    import onnx
    from onnx import TensorProto, helper

    from onnxfuzz.store.issue import issue_markdown

    bundle = tmp_path / "b"
    (bundle / "reduced" / "test_data_set_0").mkdir(parents=True)
    (bundle / "test_data_set_0").mkdir()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [])
    empty = helper.make_model(helper.make_graph([], "g", [x], [x]))
    onnx.save(empty, str(bundle / "reduced" / "model.onnx"))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [])
    nine = helper.make_graph([helper.make_node("Ceil", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(nine), str(bundle / "model.onnx"))
    meta = {"id": "p-mismatch-run-1", "verdict": "mismatch", "stage": "run", "kind": "values"}
    meta |= {"backend": "p", "reference": "ort", "suspect": "p", "versions": {}}
    meta |= {"ops": ["Ceil"], "reduced_ops": [], "reduced_nodes": 0}
    (bundle / "meta.json").write_text(json.dumps(meta))
    title = issue_markdown(bundle).splitlines()[0]
    assert "Ceil" not in title and "a model of no nodes (its outputs are its inputs)" in title


def _fuzz_bundles(out: Path, backends: list[str], flags: list[str]) -> list[Path]:
    """A campaign through the CLI that finds bugs (exit 1), and its bundles (at least one)."""
    args = [x for b in backends for x in ("--backend", b)]
    assert main(["fuzz", *args, "--out", str(out), *flags]) == 1
    bundles = [p for p in (out / "bugs").iterdir() if p.is_dir()]
    assert bundles
    return bundles


def test_issue_md_says_what_the_reduced_model_does(tmp_path: Path) -> None:
    """Beside the reduced model, issue.md shows the reduced model's own failure message:
    the original's names its own shapes, counts and values (a reduced model declaring
    [2] was once shown with "the model declares [3]")."""
    import onnx

    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.generate.corpus.testdata import DATA_SET, read_inputs
    from onnxfuzz.reduce.reproduce import Reproducer, Target

    out = tmp_path / "c"
    wrong = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    flags = ["--tests", "12", "--seed", "5", "--nodes", "6:9", "--ops", "Sigmoid,Add,Mul,Tanh"]
    flags += ["--dtypes", "float32", "--probe", "off"]
    for b in _fuzz_bundles(out, ["ort", wrong], flags):
        meta = json.loads((b / "meta.json").read_text())
        said = meta["reduced_message"]
        assert meta["reduced_nodes"] < meta["nodes"]
        actual = (b / "issue.md").read_text().split("### Actual behavior")[1]
        assert said.splitlines()[0] in actual
        # the run's words keep model.onnx's names: which the model text renamed is said
        from onnxfuzz.store.readable import model_text

        _, names = model_text(onnx.load(str(b / "reduced" / "model.onnx")))
        shown = [t for t in names if re.search(rf"(?<![\w.]){re.escape(t)}(?![\w.])", said)]
        assert shown, (said, names)
        assert all(f"{t} is `{names[t]}`" in actual for t in shown), actual
        original = (b / "log.txt").read_text().splitlines()[2]
        if original != said.splitlines()[0]:
            assert original not in actual
        # and it is what the reduced model does, run again
        model = onnx.load(str(b / "reduced" / "model.onnx"))
        inputs = read_inputs(b / "reduced" / DATA_SET)
        with BackendPool(["ort", wrong], timeout=10.0) as pool:
            a = Reproducer(pool, Target(wrong, "ort")).assess(model, inputs)
        assert a.judgement.message == said


@pytest.mark.parametrize("wrong_is_reference", [False, True])
def test_a_disagreement_of_two_gets_the_reference_evaluator_s_opinion(
    tmp_path: Path, wrong_is_reference: bool
) -> None:
    """Two backends that disagree, no majority: the ONNX reference evaluator runs the
    reduced model and issue.md names the side it agrees with, whichever of the two is
    the comparison's reference (the planted Sigmoid + 0.5 is wrong either way)."""
    out = tmp_path / "c"
    wrong = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    order = [wrong, "ort"] if wrong_is_reference else ["ort", wrong]
    flags = ["--tests", "6", "--seed", "5", "--nodes", "3:5", "--ops", "Sigmoid,Add,Tanh"]
    flags += ["--dtypes", "float32", "--probe", "off"]
    for b in _fuzz_bundles(out, order, flags):
        meta = json.loads((b / "meta.json").read_text())
        assert meta["suspect"] is None  # two backends: the campaign decides nothing
        opinion = meta["second_opinion"]
        assert opinion == {"by": "onnx-reference", "agrees": ["ort"], "said": "ran", "converted": 0}
        text = (b / "issue.md").read_text()
        title = text.splitlines()[0]
        assert "disagree" in title
        # both named by their display names (the planted one's, not its file's path)
        shown = "wrong-op:op=Sigmoid"
        assert f"agrees with ort and not with {shown}: {shown} is the likely" in text
        if not wrong_is_reference:
            assert title.startswith(f"# {shown} and ort disagree"), title
            continue
        # The evaluator sides with the backend, ORT: the report is the reference's. It
        # was filed in ORT's tracker ("File with ONNX Runtime", a culprit search that
        # found ORT's "kernel" at fault), with a repro_plain.py that ran ORT against the
        # planted adapter's values; the comparison itself is kept as it ran.
        assert meta["backend"] == "ort" and meta["reference"] == wrong
        assert title.startswith(f"# {shown} and ort disagree"), title
        assert title.endswith("; the ONNX reference evaluator sides with ort"), title
        assert "onnxruntime" not in text and "culprit" not in meta
        assert not list(b.rglob("repro_plain.py"))  # an ad hoc adapter has none
        assert "The outputs of ort, which the ONNX reference evaluator agrees with" in text
    # the tables' suspect column (campaign summary, triage, report): the side the
    # evaluator does not agree with, said to be its opinion (it read "-")
    from onnxfuzz.store.db import Store
    from onnxfuzz.store.report import summary_rows

    store = Store(out / "campaign.db")
    suspects = {r["suspect"] for r in summary_rows(store)}
    store.close()
    assert suspects == {"wrong-op:op=Sigmoid (by the evaluator)"}, suspects


def test_a_quantized_model_below_opset_19_gets_the_opinion_at_opset_21(tmp_path: Path) -> None:
    """The evaluator has no DequantizeLinear-13, so every quantized model of opsets 13..18
    got no opinion: ORT's QDQ propagation returning 0 for DequantizeLinear(-6) at opset
    16 was filed "either may be wrong". It is asked about the model converted to opset 21
    by ONNX's version converter, and issue.md says so."""
    out = tmp_path / "c"
    wrong = f"{ADAPTERS}:WrongOp:op=DequantizeLinear"
    flags = ["--tests", "30", "--seed", "1", "--nodes", "1:3", "--opset", "16"]
    flags += ["--ops", "DequantizeLinear,Abs,Neg", "--probe", "off"]
    for b in _fuzz_bundles(out, ["ort", wrong], flags):
        meta = json.loads((b / "meta.json").read_text())
        assert "DequantizeLinear" in meta["reduced_ops"] and meta["opset"] == 16
        assert meta["second_opinion"]["converted"] == 21, meta["second_opinion"]
        assert meta["second_opinion"]["agrees"] == ["ort"], meta["second_opinion"]
        text = (b / "issue.md").read_text()
        assert "converted to opset 21 by onnx.version_converter" in text
        assert "agrees with ort and not with wrong-op:op=DequantizeLinear" in text


def test_no_opinion_where_the_evaluator_voted_or_has_a_known_fault() -> None:
    from onnx import TensorProto, helper

    from onnxfuzz.judge.second_opinion import needed

    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(g)
    assert needed(["ort", "tvm"], model)
    assert not needed(["ort", "onnx-reference"], model)


def test_an_if_with_nodes_in_its_branches_is_no_one_node_model(tmp_path: Path) -> None:
    """A reduced If whose branches hold three nodes (a TVM converter failing on a body
    node) was titled "on a 1-node model: If"; the nodes in subgraphs count."""
    import onnx
    from onnx import TensorProto, helper

    from onnxfuzz.store.issue import issue_markdown

    def branch(op: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node(op, ["x"], [f"{op}_y"])],
            op,
            [],
            [helper.make_tensor_value_info(f"{op}_y", TensorProto.FLOAT, [2])],
        )

    node = helper.make_node(
        "If", ["c"], ["y"], then_branch=branch("Relu"), else_branch=branch("Abs")
    )
    g = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info(n, t, s)
            for n, t, s in [("c", TensorProto.BOOL, []), ("x", TensorProto.FLOAT, [2])]
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    bundle = tmp_path / "b"
    (bundle / "reduced" / "test_data_set_0").mkdir(parents=True)
    onnx.save(helper.make_model(g), str(bundle / "reduced" / "model.onnx"))
    meta = {"id": "tvm-crash-compile-1", "verdict": "crash", "stage": "compile", "ops": ["If"]}
    meta |= {"backend": "tvm", "reference": "ort", "suspect": "tvm", "versions": {}}
    meta |= {"reduced_ops": ["If"], "reduction": {"after": {"nodes": 3}, "fixed_point": True}}
    (bundle / "meta.json").write_text(json.dumps(meta))
    (bundle / "log.txt").write_text("crash in tvm at compile stage\n\nAttributeError: x\n")
    text = issue_markdown(bundle)
    assert text.startswith("# tvm raises an exception") and "1-node" not in text
    assert "on a 3-node model: If (2 of them in subgraphs)" in text.split("\n")[0]
    assert "reduced to 3 nodes, 2 of them in subgraphs)." in text


@pytest.mark.parametrize(
    ("backends", "flags", "where", "why"),
    [
        (["ort", "RAISE"], ["--no-reduce"], "bugs", "reduction was off, `--no-reduce`"),
        (["RAISE", "ort"], [], "reference-bugs", "a failure of the reference alone is set"),
    ],
)
def test_an_unreduced_bundle_says_it_is_not_reduced_and_why(
    tmp_path: Path, backends: list[str], flags: list[str], where: str, why: str
) -> None:
    """An issue said "reduced to 3 nodes" of the model as generated, wherever nothing
    reduced it (--no-reduce, a failure of the reference alone set aside): its reader
    would trust a size nothing minimized."""
    args = ["fuzz", "--out", str(tmp_path / "c"), *FLAGS, *flags]
    for b in backends:
        args += ["--backend", f"{ADAPTERS}:Raise:op=Mul" if b == "RAISE" else b]
    main(args)
    bundles = [p for p in (tmp_path / "c" / where).iterdir() if p.is_dir()]
    assert bundles
    for b in bundles:
        assert not (b / "reduced").exists()
        text = (b / "issue.md").read_text()
        assert "reduced to" not in text and "the reduced model" not in text, text[:800]
        assert "not reduced, the model as generated, " in text, text[:800]
        assert f"node{'s' if len(meta_ops(b)) != 1 else ''}: {why}" in text, text[:800]


def test_triage_and_the_report_list_the_failures_of_the_reference_alone(
    tmp_path: Path, capsys
) -> None:
    """triage said "0 bugs" of a campaign whose reference crashed where the target ran
    (ONNX Runtime's optimizer crashes, with `ort` as the reference): the set-aside
    bundles were in no table, JSON, SARIF or page, nor given an issue.md to file, and
    replay of the campaign folder found "no bug bundles here"."""
    out = tmp_path / "c"
    raising = f"{ADAPTERS}:Raise:op=Mul"
    # the reference's failures alone are no bugs of the target: fuzz exits 0 (clean)
    assert main(["fuzz", "--backend", raising, "--backend", "ort", "--out", str(out), *FLAGS]) == 0
    ids = sorted(p.name for p in (out / "reference-bugs").iterdir() if p.is_dir())
    assert ids
    assert not (out / "bugs").exists() or not any((out / "bugs").iterdir())
    for b in ids:
        (out / "reference-bugs" / b / "issue.md").unlink()
    assert main(["triage", str(out)]) == 0
    text = (out / "triage.md").read_text()
    assert "failures of the reference (the last table)" in text
    assert "## Failures of the reference (" in text and "failed the same way too" not in text
    for b in ids:
        assert f"](reference-bugs/{b}/issue.md)" in text
        assert (out / "reference-bugs" / b / "issue.md").exists()  # written again
    capsys.readouterr()
    assert main(["triage", str(out), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert not doc["bugs"] and sorted(r["id"] for r in doc["reference_bugs"]) == ids
    assert all(Path(r["repro"].split()[1]).exists() for r in doc["reference_bugs"])
    assert main(["triage", str(out), "--format", "sarif"]) == 0
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert sorted(r["partialFingerprints"]["onnxfuzzBug"] for r in results) == ids
    assert all(r["properties"]["reference_alone"] for r in results)
    (tmp_path / "page").mkdir()
    assert main(["report", str(out), "--out", str(tmp_path / "page" / "r.html")]) == 0
    page = (tmp_path / "page" / "r.html").read_text()
    for b in ids:
        assert f'href="../c/reference-bugs/{b}/issue.md"' in page
    capsys.readouterr()  # replay finds them in the campaign folder: "still" there
    assert main(["replay", str(out), "--format", "json"]) == 1
    replayed = json.loads(capsys.readouterr().out)
    assert sorted(Path(r["bundle"]).name for r in replayed["bundles"]) == ids, replayed


def test_a_failure_the_target_shares_with_the_reference_is_not_called_the_references_alone(
    tmp_path: Path, capsys
) -> None:
    """A target wrapping the reference's runtime crashes where it does; the campaign sets
    the crash aside as the reference's, and triage titled it "failures of the reference
    alone", "where the target ran": the target failed the same way, a bug of both."""
    out = tmp_path / "c"
    raising = f"{ADAPTERS}:Raise:op=Mul"
    backends = ["--backend", f"ref={raising}", "--backend", f"tgt={raising}"]
    assert main(["fuzz", *backends, "--out", str(out), *FLAGS]) == 0
    ids = sorted(p.name for p in (out / "reference-bugs").iterdir() if p.is_dir())
    assert ids
    capsys.readouterr()
    assert main(["triage", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "alone" not in shown, shown
    assert f"in {len(ids)} of {len(ids)} the target failed the same way too" in shown, shown
    text = (out / "triage.md").read_text()
    assert f"In {len(ids)} of {len(ids)} the target failed the same way too" in text, text
    assert "| also failed |" in text and "| tgt |" in text, text
    (tmp_path / "page").mkdir()
    assert main(["report", str(out), "--out", str(tmp_path / "page" / "r.html")]) == 0
    page = (tmp_path / "page" / "r.html").read_text()
    assert "the target failed the same way too" in page


def meta_ops(bundle: Path) -> list[str]:
    return json.loads((bundle / "meta.json").read_text())["ops"]
