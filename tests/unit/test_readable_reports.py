"""What a maintainer reads: short tensor names, float16/bfloat16 values as numbers, one
precise sentence per kind of finding, value errors with ulps, and known upstream issues
matched by family."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.store.readable import (
    doc_sentence,
    model_text,
    numpy_expected,
    value_errors,
    what_went_wrong,
)
from onnxfuzz.store.upstream import load_rows, matches


def _half_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.array([0.5, 1.25], np.float16), "glue_w")
    c = numpy_helper.from_array(np.array([-2.5], np.float16))
    nodes = [
        helper.make_node("Add", ["glue_sigmoid0_out", "glue_w"], ["add0_out"]),
        helper.make_node("Constant", [], ["const0_out"], value=c),
        helper.make_node("Mul", ["add0_out", "const0_out"], ["mul0_out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("glue_sigmoid0_out", TensorProto.FLOAT16, [2])],
        [helper.make_tensor_value_info("mul0_out", TensorProto.FLOAT16, [2])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_model_text_has_short_names_and_decoded_halves() -> None:
    text, names = model_text(_half_model())
    assert names == {"glue_sigmoid0_out": "x", "mul0_out": "y", "glue_w": "w1"} | {
        "add0_out": "t1",
        "const0_out": "t2",
    }
    assert "t1 = Add (x, w1)" in text and "y = Mul (t1, t2)" in text, text
    assert "{0.5, 1.25}" in text and "{-2.5}" in text, text  # not {14336,15616}
    assert "glue_" not in text and "14336" not in text


def test_bfloat16_values_are_decoded() -> None:
    bits = (np.array([1.5, -3.0], np.float32).view(np.uint32) >> 16).astype(np.uint16)
    t = helper.make_tensor("b", TensorProto.BFLOAT16, [2], bits.tobytes(), raw=True)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["b"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2])],
        [t],
    )
    text, _ = model_text(helper.make_model(graph))
    assert "{1.5, -3}" in text, text


def test_each_kind_of_finding_has_its_own_words() -> None:
    ort = {"backend": "ort", "stage": "compile", "signature": "ort|crash|compile|Fail: x"}
    assert what_went_wrong({**ort, "verdict": "crash"}) == (
        "raises an exception at session creation (InferenceSession)"
    )
    signal = {**ort, "verdict": "crash", "signature": "ort|crash|run|killed by signal SIGSEGV"}
    assert what_went_wrong({**signal, "stage": "run"}) == "crashes the process while running"
    mismatch = {"backend": "torch", "stage": "run", "verdict": "mismatch"}
    assert what_went_wrong({**mismatch, "kind": "dtype"}) == "returns an output of the wrong type"
    assert what_went_wrong({**mismatch, "kind": "shape"}) == "returns an output of the wrong shape"
    tvm = {"backend": "tvm", "stage": "compile", "verdict": "crash", "signature": ""}
    assert "LLVM code generation" in what_went_wrong({**tvm, "culprit": {"stage": "codegen"}})
    assert "from_onnx" in what_went_wrong({**tvm, "culprit": {"stage": "import"}})
    # a second run's wrong value: a second-run bug where every fresh run showed it, else
    # a wrong value now and then (a flaky kernel wrong on any run read as the former)
    rerun = {**mismatch, "stage": "rerun", "kind": "values"}
    assert what_went_wrong({**rerun, "reproducibility": "deterministic"}) == (
        "returns wrong results when the same compiled model runs a second time"
    )
    assert what_went_wrong({**rerun, "reproducibility": "intermittent"}) == (
        "returns wrong results now and then (seen on a second run of the same compiled model)"
    )


def test_value_errors_count_ulps() -> None:
    e = np.array([1.0, 2.0, 4.0], np.float32)
    a = e.copy()
    a[1] = np.nextafter(np.nextafter(a[1], np.float32(9)), np.float32(9))  # 2 ulps up
    said = value_errors(a, e)
    assert "1 of 3 elements differ" in said and "up to 2 ulps" in said, said
    assert value_errors(e, e) == "0 of 3 elements differ"


def test_value_errors_give_no_relative_size_to_a_difference_from_zero() -> None:
    """An Add off by 1 where 0 was expected read "max rel error 4.49423e+307, up to
    7.14e+44 ulps" (float32 has fewer than 2**32 values): a difference from 0 has no
    relative size, and is counted apart."""
    said = value_errors(np.array([1.0, 3.0], np.float32), np.array([0.0, 2.0], np.float32))
    assert said.startswith("max abs error 1, max rel error 0.5, 2 of 2 elements differ"), said
    assert "(1 where the expected value is 0: no relative error there)" in said, said
    assert "up to 4.19e+06 ulps" in said, said  # the 2 -> 3 element: 1 / 2**-22
    only = value_errors(np.array([1.0], np.float32), np.array([0.0], np.float32))
    assert "max rel error" not in only and "ulps" not in only, only


def test_value_errors_count_a_nan_against_a_number() -> None:
    """A backend giving NaN where the reference gives 0 read "max abs error 0, max rel
    error 0, 0 of 4800 elements differ" in issue.md, beside a log of 3600 outside the
    tolerance; and the oracle's message "max abs err nan ... minimum atol to pass: nan"."""
    from onnxfuzz.judge.oracle import _values

    e = np.array([0.0, 0.0, 1.0, np.nan, np.inf], np.float32)
    a = np.array([np.nan, 0.0, 1.5, np.nan, 3.0], np.float32)
    said = value_errors(a, e)
    assert said.startswith("max abs error 0.5, max rel error 0.5, 3 of 5 elements differ"), said
    assert "1 NaN where the reference is not" in said, said
    assert "1 finite where the reference is infinite" in said, said
    v = _values("y", e, a, (1e-5, 1e-5))
    assert v is not None and "nan" not in v.message.split("worst at")[0], v.message
    assert "3/5 elements outside" in v.message and "no tolerance passes it" in v.message
    only_nan = _values("y", e[:2], a[:2], (1e-5, 1e-5))
    assert only_nan is not None and "max abs err" not in only_nan.message, only_nan.message


def _one_op_bundle(tmp_path: Path, op: str, meta: dict) -> Path:
    """A bundle folder of a float32 ``op`` model (x [-1, 4] -> y), a TVM mismatch against
    ort, with ``meta`` added to its meta.json."""
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    bundle = tmp_path / "b"
    (bundle / "test_data_set_0").mkdir(parents=True)
    onnx.save(helper.make_model(graph), str(bundle / "model.onnx"))
    x = numpy_helper.from_array(np.array([-1.0, 4.0], np.float32), "x")
    (bundle / "test_data_set_0" / "input_0.pb").write_bytes(x.SerializeToString())
    base = {"id": "tvm-mismatch-run-1", "verdict": "mismatch", "stage": "run", "ops": [op]}
    base |= {"backend": "tvm", "reference": "ort", "suspect": "tvm"}
    (bundle / "meta.json").write_text(json.dumps(base | meta))
    return bundle


def test_writing_an_issue_prints_no_numpy_warning(tmp_path: Path) -> None:
    """A campaign's screen showed numpy's RuntimeWarnings from issue.md's expected values
    (the reference evaluator's Pad casting NaN) and from a relative error against a
    subnormal; the values are reported, the warnings are not."""
    import warnings

    from onnxfuzz.store.issue import issue_markdown

    bundle = _one_op_bundle(tmp_path, "Sqrt", {"versions": {}})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        text = issue_markdown(bundle)
        said = value_errors(np.array([1e300, 1.0]), np.array([1e-310, 0.0]))
    # the evaluator's values and numpy's, NaN and all
    assert "| y | float32[2] [nan, 2] | float32[2] [nan, 2] |" in text, text
    assert said.startswith("max abs error 1e+300, max rel error inf"), said
    assert [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)] == []


def test_the_issue_names_the_version_it_was_compared_with(tmp_path: Path) -> None:
    """The versions listed the culprit's only: a mismatch against ort said nothing of which
    ort it was compared with."""
    from onnxfuzz.store.issue import issue_markdown

    versions = {"tvm": "0.27.0", "ort": "1.31.1"}
    text = issue_markdown(_one_op_bundle(tmp_path, "Relu", {"versions": versions}))
    assert "- tvm: 0.27.0" in text and "- compared with ort: 1.31.1" in text, text


def _ort_clip_model(dtype: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Clip", ["x", "lo"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", dtype, [2])],
        [helper.make_tensor_value_info("y", dtype, [2])],
        [helper.make_tensor("lo", dtype, [], [0])],
    )
    return helper.make_model(graph)


def test_upstream_rows_match_by_family_ops_and_types(tmp_path: Path) -> None:
    rows = load_rows()
    fusion = "ort|crash|compile|Fail: ... FuseReluClip::Apply ... Unexpected data type"
    meta = {"backend": "ort", "verdict": "crash", "signature": fusion}
    found = matches(meta, _ort_clip_model(TensorProto.INT32), rows)
    assert [r["links"][0]["url"] for r in found] == [
        "https://github.com/microsoft/onnxruntime/issues/10936"
    ]
    assert not matches({**meta, "backend": "tvm"}, _ort_clip_model(TensorProto.INT32), rows)
    values = {"backend": "ort", "verdict": "mismatch", "signature": "ort|mismatch|run|values"}
    assert matches(values, _ort_clip_model(TensorProto.INT64), rows)
    assert not matches(values, _ort_clip_model(TensorProto.INT32), rows)  # int64 only
    # the reference evaluator's own LRN fault, whatever it raised, on a model with an LRN
    lrn = {"backend": "onnx-reference", "verdict": "crash", "signature": "onnx-reference|crash|"}
    lrn["signature"] += "run|IndexError: index N is out of bounds for axis N with size N"
    found = matches(lrn, _one("LRN", TensorProto.FLOAT, size=3), rows)
    assert [r["links"][0]["url"] for r in found] == ["https://github.com/onnx/onnx/issues/7805"]
    assert not matches(lrn, _one("Relu", TensorProto.FLOAT), rows)
    assert not matches({**lrn, "backend": "ort"}, _one("LRN", TensorProto.FLOAT, size=3), rows)
    # a user's own row, beside the campaign's bugs/
    mine = {"backend": "ort", "verdict": "mismatch", "match": "", "title": "ours", "links": []}
    (tmp_path / "upstream.json").write_text(json.dumps({"rows": [mine]}))
    found = matches(values, _ort_clip_model(TensorProto.INT32), load_rows(tmp_path))
    assert [r["title"] for r in found] == ["ours"]


def test_a_reduce_the_spec_changed_is_linked_only_with_noop_with_empty_axes() -> None:
    """TVM returned ReduceL2's input unchanged (-2.26 for 2.26) with noop_with_empty_axes=1
    and no axes: the earlier text of the spec, changed in 2025. The row names the change;
    the same op without the attribute, or another op with it, matches nothing."""
    rows = load_rows()
    meta = {"backend": "tvm", "verdict": "mismatch", "signature": "tvm|mismatch|run|values"}
    meta["signature"] += " in ReduceL2 output"
    found = matches(meta, _one("ReduceL2", TensorProto.FLOAT, noop_with_empty_axes=1), rows)
    assert [r["links"][0]["url"] for r in found] == ["https://github.com/onnx/onnx/pull/7394"]
    assert not matches(meta, _one("ReduceL2", TensorProto.FLOAT), rows)
    assert not matches(meta, _one("ReduceL2", TensorProto.FLOAT, noop_with_empty_axes=0), rows)
    # ReduceSum's input unchanged is right under either text
    assert not matches(meta, _one("ReduceSum", TensorProto.FLOAT, noop_with_empty_axes=1), rows)
    assert not matches(
        {**meta, "verdict": "crash"},
        _one("ReduceL2", TensorProto.FLOAT, noop_with_empty_axes=1),
        rows,
    )


def _one(op: str, dtype: int, bounds: tuple[int, int] | None = None, **attrs) -> onnx.ModelProto:
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    inits = [] if bounds is None else [
        helper.make_tensor("lo", dtype, [], np.array([bounds[0]], np_type)),
        helper.make_tensor("hi", dtype, [], np.array([bounds[1]], np_type)),
    ]
    ins = ["x", "lo", "hi"] if bounds else ["x"]
    out_type = attrs.get("to", dtype)
    graph = helper.make_graph(
        [helper.make_node(op, ins, ["y"], **attrs)],
        "g",
        [helper.make_tensor_value_info("x", dtype, [7])],
        [helper.make_tensor_value_info("y", out_type, [7])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_numpy_expected_agrees_with_the_reference_evaluator_on_simple_ops() -> None:
    """numpy's values beside the evaluator's: same dtype and values for Clip (uint8, and
    min > max), Relu, Neg, Cast; None where the op is not simple or there are two nodes."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(0)
    cases = [
        (_one("Clip", TensorProto.UINT8, (3, 200)), np.uint8),
        (_one("Clip", TensorProto.FLOAT, (2, -1)), np.float32),  # min > max: all max
        (_one("Relu", TensorProto.INT8), np.int8),
        (_one("Neg", TensorProto.DOUBLE), np.float64),
        (_one("Cast", TensorProto.FLOAT, to=TensorProto.INT32), np.float32),
    ]
    for model, np_type in cases:
        x = (rng.uniform(-100, 250, 7) if np_type == np.uint8 else rng.uniform(-5, 5, 7))
        x = x.astype(np_type)
        want = ReferenceEvaluator(model).run(None, {"x": x})
        got = numpy_expected(model, {"x": x})
        assert got is not None, model.graph.node[0].op_type
        assert got[0].dtype == want[0].dtype, (model.graph.node[0].op_type, got, want)
        np.testing.assert_array_equal(got[0], want[0])
    assert numpy_expected(_one("CumSum", TensorProto.FLOAT), {"x": np.ones(7, np.float32)}) is None
    two = _half_model()
    assert numpy_expected(two, {"glue_sigmoid0_out": np.ones(2, np.float16)}) is None


def test_doc_sentence_quotes_the_schema() -> None:
    """The sentence is the schema's own text: the type constraint Clip's output shares with
    its input, the doc's first sentence for values; nothing for Cast's dtype (T1 -> T2)."""
    schema = onnx.defs.get_schema("Clip", 17)
    said = doc_sentence("Clip", 17, "dtype")
    t = next(c for c in schema.type_constraints if c.type_param_str == schema.outputs[0].type_str)
    assert f'"{t.description.strip()}"' in said and "(Clip-13)" in said, said
    values = doc_sentence("Acos", 17, "values")
    assert '"Calculates the arccosine' in values and values.endswith('element-wise."'), values
    assert doc_sentence("Cast", 17, "dtype") == ""
    assert doc_sentence("NoSuchOp", 17, "values") == ""


def test_the_inputs_table_says_a_range_as_a_range(tmp_path) -> None:
    """Twelve ones were shown as "[1, 1]", read as two values; eight values or fewer are
    listed, more are "all 1" or "from a to b"."""
    import numpy as np
    from onnx import numpy_helper

    from onnxfuzz.store.issue import _inputs_table

    data = tmp_path / "test_data_set_0"
    data.mkdir()
    arrays = [np.ones((1, 2, 6), np.uint32), np.arange(12, dtype=np.float32), np.zeros(3)]
    for k, a in enumerate(arrays):
        t = numpy_helper.from_array(a, f"x{k}")
        (data / f"input_{k}.pb").write_bytes(t.SerializeToString())
    rows = _inputs_table(tmp_path).splitlines()[2:]
    assert rows[0] == "| x0 | uint32 | [1, 2, 6] | all 1 |", rows
    assert rows[1] == "| x1 | float32 | [12] | from 0 to 11 |", rows
    assert rows[2] == "| x2 | float64 | [3] | [0., 0., 0.] |", rows


def test_a_reduced_hang_says_which_time_limit_it_ran_under() -> None:
    """A hang's reduced model failed under the reduction's per-candidate limit: issue.md
    said "no result within 2 s" of a campaign run with --timeout 5, and repro.py waits 5."""
    from types import SimpleNamespace

    from onnxfuzz.judge.oracle import Verdict
    from onnxfuzz.store.bundle import _reduced_message

    hang = SimpleNamespace(judgement=SimpleNamespace(verdict=Verdict.TIMEOUT), timeout=5.0)
    said = "no result within 2 s (on the worker's clock: compile 0.0 s, run 2.0 s)"
    got = _reduced_message(hang, SimpleNamespace(message=said))
    assert got.startswith(said) and "the campaign's --timeout, which repro.py uses, is 5 s" in got
    same = "no result within 5 s (on the worker's clock: compile 0.0 s, run 5.0 s)"
    assert _reduced_message(hang, SimpleNamespace(message=same)) == same


def test_the_evaluator_s_values_are_not_shown_where_it_is_known_wrong(tmp_path: Path) -> None:
    """A Slice whose negative start lies before the beginning, stepping back: the ONNX
    reference evaluator's documented fault gives an empty tensor, and issue.md showed that
    as the expected value beside the backend's identical wrong one."""
    from onnxfuzz.store.issue import issue_markdown

    consts = [
        numpy_helper.from_array(np.array([-5], np.int64), "starts"),
        numpy_helper.from_array(np.array([-10], np.int64), "ends"),
        numpy_helper.from_array(np.array([0], np.int64), "axes"),
        numpy_helper.from_array(np.array([-1], np.int64), "steps"),
    ]
    graph = helper.make_graph(
        [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        consts,
    )
    bundle = _one_op_bundle(tmp_path, "Relu", {"versions": {}})
    onnx.save(helper.make_model(graph), str(bundle / "model.onnx"))
    text = issue_markdown(bundle)
    assert "| output | ONNX reference evaluator |" not in text, text
    assert "No values from the ONNX reference evaluator here: it is known to get this" in text


def test_an_output_within_the_tolerance_is_said_to_be_so() -> None:
    """issue.md listed a float16 HardSwish beside the wrong output as "101 of 240 elements
    differ, up to 255 ulps", rounding inside the tolerance that reads as a second bug."""
    from onnxfuzz.store.issue import _within

    tol = {"float32": [1e-3, 1e-2]}
    e = np.array([1.0, 2.0, 0.0], np.float32)
    assert _within(e + np.float32(1e-4), e, tol)
    assert not _within(e + np.float32(1.0), e, tol)  # past it: a wrong output
    assert not _within(e, e, tol)  # equal: nothing to say
    assert not _within(np.array([np.nan, 2.0, 0.0], np.float32), e, tol)


def test_the_actual_outputs_are_shown_beside_the_reference_s(tmp_path: Path) -> None:
    """issue.md's actual behaviour named the worst element alone: a tail-loop bug wrong at
    two positions of 20 read as one wrong value. The outputs are shown side by side, and
    the positions outside the tolerance (not those within it) are named."""
    from onnxfuzz.store.issue import issue_markdown

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])],
    )
    bundle = tmp_path / "b"
    data = bundle / "test_data_set_0"
    for sub in ("tvm", "ort"):
        (data / sub).mkdir(parents=True)
    onnx.save(helper.make_model(graph), str(bundle / "model.onnx"))
    x = np.arange(20, dtype=np.float32).reshape(2, 10)
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    wrong = x.copy()
    wrong[1, 7] += 0.25
    wrong[1, 9] += 0.25
    wrong[0, 3] += 1e-6  # rounding, inside the tolerance
    for sub, y in (("ort", x), ("tvm", wrong)):
        t = numpy_helper.from_array(y, "y")
        (data / sub / "output_0.pb").write_bytes(t.SerializeToString())
    meta = {"id": "tvm-mismatch-run-1", "verdict": "mismatch", "stage": "run", "ops": ["Relu"]}
    meta |= {"backend": "tvm", "reference": "ort", "kind": "values", "versions": {}}
    meta |= {"tolerance": {"float32": [1e-3, 1e-2]}}
    (bundle / "meta.json").write_text(json.dumps(meta))
    text = issue_markdown(bundle)
    actual = text[text.index("### Actual behavior") :]
    assert "| output | tvm | ort |" in actual, actual
    assert "| y | float32[2, 10] [0, 1, 2, 3, 4, 5, 6, 7] ... |" in actual, actual
    assert "2 of 20 elements outside the tolerance at [1, 7]: 17.25 vs 17; [1, 9]: 19.25 vs 19" in (
        actual
    ), actual
    assert "[0, 3]" not in actual
