"""Memory across campaigns: ``triage --export-known`` writes the families a campaign found,
``fuzz --known`` counts matching findings as known (neither reduced nor filed, listed with
their hits) and avoids the triggers of families hit often; a file that cannot be used is a
one-line error (exit 2) before the campaign writes anything."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from onnxfuzz import dtypes as dt
from onnxfuzz.cli.main import main
from onnxfuzz.errors import UsageError
from onnxfuzz.execute.sandbox import Stage
from onnxfuzz.judge.oracle import Judgement, Verdict
from onnxfuzz.judge.signature import family, signature
from onnxfuzz.store.known import FORMAT, KnownFamily, KnownFile, Trigger, named_triggers, trigger_of

SEGFAULT_RELU = "tests/campaign/adapters.py:Segfault:op=Relu"
CRASH = "tvm|crash|compile|TypeError: R.add(lv, S) uses datatype T | R.Tensor((SHAPE))"
SAME_FAMILY = "tvm|crash|compile|TypeError: R.multiply(lv, S) uses datatype T | R.Tensor((SHAPE))"
WRONG_RELU = "tvm|mismatch|run|values in Relu output"


def _file(**over) -> KnownFile:
    fams = [
        KnownFamily(
            family(CRASH),
            "tvm-crash-Fabc",
            "tvm",
            "crash",
            9,
            [CRASH],
            trigger=Trigger("Elu", "float16", []),
        ),
        KnownFamily(
            "tvm|mismatch|run|values",
            "tvm-mismatch-Fdef",
            "tvm",
            "mismatch",
            2,
            [WRONG_RELU],
            trigger=Trigger("Pad", "float32", ["attr:mode=reflect"]),
        ),
    ]
    return KnownFile(over.get("versions", {"tvm": "0.27.0"}), fams, "known.json")


def test_a_finding_is_known_by_signature_or_crash_family_never_by_a_values_kind() -> None:
    k = _file()
    assert k.match("tvm", CRASH).id == "tvm-crash-Fabc"
    assert k.match("tvm", SAME_FAMILY).id == "tvm-crash-Fabc"  # another op, one root cause
    assert k.match("ort", CRASH) is None  # another backend's
    assert k.match("tvm", WRONG_RELU).id == "tvm-mismatch-Fdef"
    # a wrong value of another op is a new bug: a values family says nothing of the cause
    assert k.match("tvm", "tvm|mismatch|run|values in Exp output") is None


def test_an_entry_written_before_pythons_names_were_kept_still_matches() -> None:
    """An entry exported before 2026-11-27 reads every quoted word as S: with the error's
    text, a finding of that bug still matches it, and another AttributeError does not
    match an entry of today's form."""
    old = "torch|crash|run|AttributeError: S object has no attribute S"
    k = KnownFile({}, [KnownFamily(family(old), "torch-crash-Fold", "torch", "crash", 3, [old])])
    message = "AttributeError: 'tuple' object has no attribute 'to'"
    sig = signature("torch", Judgement(Verdict.CRASH, Stage.RUN, message=message))
    assert sig != old
    assert k.match("torch", sig) is None  # the signature alone is today's form
    assert k.match("torch", sig, message).id == "torch-crash-Fold"
    new = KnownFile({}, [KnownFamily(family(sig), "torch-crash-Fnew", "torch", "crash", 3, [sig])])
    other = "AttributeError: 'OnnxReduceSumStaticAxes' object has no attribute 'math_op_function'"
    other_sig = signature("torch", Judgement(Verdict.CRASH, Stage.RUN, message=other))
    assert new.match("torch", other_sig, other) is None
    assert new.match("torch", sig, message).id == "torch-crash-Fnew"


def test_an_entry_written_before_a_family_rule_changed_still_matches_its_family() -> None:
    """An entry exported before torch's type names left families (2026-11-27) stores the
    family with "Got Int" in it: the same bug saying "Got Long" matches it through the
    entry's signatures, as one family today."""
    norm = "RuntimeError: linalg.vector_norm: Expected a floating point or complex tensor as "

    def sig(t: str) -> str:
        said = Judgement(Verdict.CRASH, Stage.RUN, message=norm + f"input. Got {t}")
        return signature("torch", said)

    stored = family(sig("Int")).replace("Got DT", "Got Int")  # as exported then
    assert stored != family(sig("Int"))
    k = KnownFile({}, [KnownFamily(stored, "torch-crash-Fold", "torch", "crash", 2, [sig("Int")])])
    assert k.match("torch", sig("Long")).id == "torch-crash-Fold"
    other = signature("torch", Judgement(Verdict.CRASH, Stage.RUN, message="IndexError: oops"))
    assert k.match("torch", other) is None


def test_families_hit_often_enough_have_their_triggers_avoided() -> None:
    k = _file()
    pairs, forms = k.avoided(5)  # the crash (9 hits) yes, the mismatch (2 hits) no
    assert pairs == {("Elu", dt.BY_NAME["float16"])} and not forms
    pairs, forms = k.avoided(2)  # an attribute value avoids that form, not the whole op
    assert forms == {("Pad", "attr:mode=reflect")}
    assert k.avoided(0) == (frozenset(), frozenset())


def test_the_file_round_trips_and_names_version_mismatches() -> None:
    k = _file()
    again = KnownFile.from_record(json.loads(json.dumps(k.to_record())), "again.json")
    assert again.families == k.families and again.versions == k.versions
    notes = k.version_notes({"tvm": "0.28.0", "ort": "1.31.1"})
    assert len(notes) == 1 and "tvm 0.27.0" in notes[0] and "tvm 0.28.0" in notes[0]
    assert k.version_notes({"tvm": "0.27.0"}) == []


@pytest.mark.parametrize(
    "content, said",
    [
        (None, "cannot read"),
        ("{not json", "is not JSON"),
        ('{"format": "onnxfuzz-known/0", "versions": {}, "families": []}', "format"),
        ('["a list"]', "not an onnxfuzz known-findings file"),
        (f'{{"format": "{FORMAT}", "versions": {{}}, "families": [{{"id": 1}}]}}', "family"),
    ],
)
def test_a_file_that_cannot_be_used_is_a_one_line_error(tmp_path: Path, content, said) -> None:
    path = tmp_path / "known.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError) as e:
        KnownFile.load(path)
    text = str(e.value)
    assert "\n" not in text and str(path) in text and said in text


def test_a_file_of_other_backends_is_refused() -> None:
    with pytest.raises(UsageError, match="holds findings of tvm; this campaign runs ort, x"):
        _file().check_backends(["ort", "x"])
    _file().check_backends(["ort", "tvm"])


def test_families_of_a_backend_the_campaign_does_not_run_are_said_to_match_nothing() -> None:
    """The audit's second campaign ran the planted adapter under another class: the file's
    families of the first one matched nothing, and nothing said so (one was filed again
    as new). Each such backend gets a note; a campaign running it gets none."""
    notes = _file().absent_notes(["ort", "planted.py:Other"])
    assert len(notes) == 1 and "match nothing here" in notes[0]
    assert "no backend labelled tvm" in notes[0] and "2 families of tvm" in notes[0]
    assert _file().absent_notes(["tvm", "ort"]) == []


def test_the_trigger_is_the_failing_node_with_its_type_and_attribute_values() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])
    nodes = [
        helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT16),
        helper.make_node("Elu", ["c"], ["y"], alpha=0.5),
    ]
    m = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 21)]
    )
    assert trigger_of(m, CRASH) == Trigger("Elu", "float16", [])
    t = trigger_of(m, "tvm|mismatch|run|values in Cast output")
    assert t is not None and t.op == "Cast" and t.dtype == "float16"
    assert "attr:to=10" in t.features


def test_bad_known_files_stop_fuzz_before_it_writes_anything(tmp_path: Path, capsys) -> None:
    out = tmp_path / "campaign"
    base = ["fuzz", "--backend", "ort", "--backend", "ort:opt=none", "--tests", "3"]
    assert main([*base, "--out", str(out), "--known", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert "missing.json" in err and "--known" in err and len(err.splitlines()) == 1
    other = tmp_path / "other.json"
    _file().write(other)
    assert main([*base, "--out", str(out), "--known", str(other)]) == 2
    assert "none of them" in capsys.readouterr().err
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"format": "onnxfuzz-known/1", "versions": {}, "fam')  # cut short
    assert main([*base, "--out", str(out), "--known", str(corrupt)]) == 2
    err = capsys.readouterr().err.strip()
    assert "corrupt.json is not JSON" in err and len(err.splitlines()) == 1
    foreign = tmp_path / "foreign.json"
    foreign.write_text('{"format": "sanitizer-suppressions/2", "versions": {}, "families": []}')
    assert main([*base, "--out", str(out), "--known", str(foreign)]) == 2
    err = capsys.readouterr().err.strip()
    assert "sanitizer-suppressions/2" in err and FORMAT in err and len(err.splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())  # nothing written


@pytest.mark.slow
def test_a_second_campaign_counts_known_findings_and_files_none(tmp_path: Path, capsys) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    known = tmp_path / "known.json"
    fuzz = ["fuzz", "--backend", "ort", "--backend", SEGFAULT_RELU, "--probe", "off"]
    assert main([*fuzz, "--tests", "60", "--out", str(first)]) == 1
    capsys.readouterr()
    assert main(["triage", str(first), "--export-known", str(known)]) == 0
    said = capsys.readouterr().out
    assert "1 family, 1 bundle" in said  # families first
    assert (first / "triage.md").read_text().index("## Families") < (
        first / "triage.md"
    ).read_text().index("## Bundles")
    record = json.loads(known.read_text())
    (fam,) = record["families"]
    assert fam["trigger"]["op"] == "Relu" and fam["hits"] >= 1
    # another version of the adapter's library: a warning naming it, the entries still apply
    label = fam["backend"]
    record["versions"][label] = "0.0.1"
    known.write_text(json.dumps(record))
    args = [*fuzz, "--tests", "60", "--seed", "500", "--out", str(second)]
    assert main([*args, "--known", str(known), "--avoid-after", "0"]) == 0  # nothing filed
    out, err = capsys.readouterr()
    assert "0.0.1" in err and "--known" in err
    assert "known family" in out
    db = sqlite3.connect(second / "campaign.db")
    hits = db.execute("SELECT COUNT(*) FROM results WHERE verdict='known'").fetchone()[0]
    bugs = db.execute("SELECT COUNT(*) FROM bugs").fetchone()[0]
    db.close()
    assert hits >= 1 and bugs == 0 and not (second / "bugs").exists()
    assert main(["report", str(second)]) == 0
    page = (second / "report.html").read_text()
    assert f"Known ({hits} hits of 1 family)" in page and fam["id"] in page
    # the next export carries the known family on, its hits added up
    again = tmp_path / "again.json"
    assert main(["triage", str(second), "--export-known", str(again)]) == 0
    (carried,) = json.loads(again.read_text())["families"]
    assert carried["id"] == fam["id"] and carried["hits"] == fam["hits"] + hits


def test_an_unreadable_model_has_no_trigger(tmp_path: Path) -> None:
    from onnxfuzz.store.known import bundle_trigger

    bundle = tmp_path / "b"
    (bundle / "reduced").mkdir(parents=True)
    (bundle / "reduced" / "model.onnx").write_bytes(b"not a model")
    assert bundle_trigger(bundle, CRASH) is None
    onnx.save(onnx.ModelProto(), str(bundle / "reduced" / "model.onnx"))
    assert bundle_trigger(bundle, CRASH) is None


def test_a_precision_finding_of_a_known_wrong_value_is_known() -> None:
    k = _file()
    assert k.match("tvm", "tvm|mismatch|run|precision in Relu output").id == "tvm-mismatch-Fdef"
    assert k.match("tvm", "tvm|mismatch|run|precision in Exp output") is None


def _model(nodes: list, dtype: int = TensorProto.FLOAT16) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", dtype, [2, 3])
    y = helper.make_tensor_value_info("y", dtype, [2, 3])
    inner = [helper.make_tensor_value_info(t, dtype, [2, 3]) for t in ("r", "t")]
    return helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], value_info=inner),
        opset_imports=[helper.make_opsetid("", 21)],
    )


def test_a_crash_points_at_the_node_its_error_names() -> None:
    m = _model(
        [
            helper.make_node("Relu", ["x"], ["r"], name="relu0"),
            helper.make_node("ThresholdedRelu", ["r"], ["t"], name="thresholdedrelu0"),
            helper.make_node("Relu", ["t"], ["y"], name="relu1"),
        ]
    )
    tvm = "TypeError: Binary operators ...\nError converting operator ThresholdedRelu, with inputs"
    assert named_triggers(m, tvm) == [Trigger("ThresholdedRelu", "float16", [])]
    ort = "Non-zero status code returned while running Relu node. Name:'relu1' Status Message"
    assert named_triggers(m, ort) == [Trigger("Relu", "float16", [])]
    # an error that names nothing of the model points at nothing (a prefix is not a name)
    assert named_triggers(m, "Segmentation fault in relu10 at 0x0") == []
    # a node an optimizer made, named after one it fused: not the cause (a fusion of
    # DequantizeLinear -> MatMul had every float MatMul avoided for the rest of a campaign)
    fused = "Type 'tensor(int32)' of input parameter (t) of operator (FusedRelu) in node (relu1)"
    assert named_triggers(m, fused) == []
    own = "Type 'tensor(int32)' of input parameter (t) of operator (Relu) in node (relu1)"
    assert named_triggers(m, own) == [Trigger("Relu", "float16", [])]


def test_the_trigger_type_is_the_main_type_variables_not_a_condition() -> None:
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [2, 3])
    m = _model([helper.make_node("Where", ["c", "x", "x"], ["y"], name="where0")])
    m.graph.input.insert(0, cond)
    (t,) = named_triggers(m, "Error converting operator Where")
    assert t == Trigger("Where", "float16", [])  # X's type: what generation avoids
