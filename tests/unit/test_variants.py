"""One-change variants (``reduce.variants``) and their trial (``reduce.neighbours``), without
a backend: which variants are made, that they are valid and the same every time, and that
a finding that does not fail on every run gets none."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.cli.options import NEIGHBOURS
from onnxfuzz.generate.corpus.validate import check_static
from onnxfuzz.reduce.neighbours import MAX_VARIANTS, try_neighbours
from onnxfuzz.reduce.variants import variants


def _model(node: onnx.NodeProto, x: list[int], y: list[int], inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
        list(inits),
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


def _group_conv() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    w = numpy_helper.from_array(np.ones([4, 2, 1], np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=2)
    return _model(node, [1, 4, 3], [1, 4, 3], [w]), {"x": np.ones([1, 4, 3], np.float32)}


def test_an_attribute_takes_the_values_its_spec_allows_with_its_inputs_refit() -> None:
    model, inputs = _group_conv()
    made = list(variants(model, inputs, 0))
    groups = {v.value: v for v in made if v.subject == "group"}
    assert set(groups) == {1, 4}  # divisors of C=4 near 2 (3 is none)
    assert groups[1].refit == (("w", (4, 4, 1)),) and groups[4].refit == (("w", (4, 1, 1)),)
    for v in made:
        assert not check_static(v.model), v.change
    # same model, same variants, in the same order
    again = [(v.change, v.model.SerializeToString()) for v in variants(model, inputs, 0)]
    assert again == [(v.change, v.model.SerializeToString()) for v in made]


def test_an_input_shrinks_one_axis_at_a_time() -> None:
    node = helper.make_node("ReduceSum", ["x"], ["y"])
    model = _model(node, [2, 5, 7], [1, 1, 1])
    made = [v for v in variants(model, {"x": np.ones([2, 5, 7], np.float32)}, 0)]
    shapes = [v.value for v in made if v.kind == "shape"]
    assert shapes[:3] == [[1, 5, 7], [2, 4, 7], [2, 5, 6]]  # one less on each axis first
    assert [2, 2, 7] in shapes and [2, 5, 3] in shapes  # then halved


@dataclass
class _Flaky:
    """A finding that does not fail on every run: its variants would say nothing."""

    deterministic: bool = False

    def run(self, model, inputs):  # pragma: no cover - must not be called
        raise AssertionError("a variant of a flaky finding was run")

    def matches(self, a) -> bool:  # pragma: no cover
        return False


def test_a_flaky_finding_gets_no_variants_and_the_default_bound_is_one() -> None:
    model, inputs = _group_conv()
    n = try_neighbours(model, inputs, _Flaky())
    assert n.tried == [] and "every run" in n.skipped
    assert NEIGHBOURS == MAX_VARIANTS


def test_a_pass_whose_outputs_change_shape_or_type_is_still_a_trigger() -> None:
    """float32 for a float16 Sigmoid, strides=1 for a MaxPool: the variant's outputs change
    type or shape, and the op still computes; its pass names the trigger (an audit found a
    dtype trigger never named, "no trigger" said beside a passing/ folder holding it). Two
    such triggers: the failure needs both values at once."""
    from onnxfuzz.store.trigger import neighbours_text

    def tried(kind, subject, was, value, result, **extra):
        return {
            "kind": kind,
            "subject": subject,
            "was": was,
            "value": value,
            "change": f"{subject}={value}",
            "result": result,
            **extra,
        }

    meta = {
        "neighbours": {
            "node": "pool0 (MaxPool)",
            "tried": [
                tried("attribute", "ceil_mode", 1, 0, "passes", outputs_change=True),
                tried("attribute", "strides", [2], [1], "passes", outputs_change=True),
                tried("dtype", "dtype", "float16", "float32", "fails", outputs_change=True),
                tried("shape", "x", [1, 1, 1], [1, 1, 1], "other", said="no verdict"),
            ],
        }
    }
    text = neighbours_text(meta, {}, "ort and planted")
    assert "Trigger, `ceil_mode`" in text and "Trigger, `strides`" in text, text
    assert "needs all of ceil_mode=1, strides=[2] at once" in text, text
    assert "No variant tried passes" not in text
    assert "(1 element)" in text and "(1 elements)" not in text
    meta["neighbours"]["tried"][2]["result"] = "passes"
    text = neighbours_text(meta, {}, "ort and planted")
    assert "Trigger, element type: fails with float16" in text, text


def test_no_pass_says_what_was_not_varied() -> None:
    """A Transpose wrong at rank >= 4: no variant passes, and rank is not among the changes
    tried; the text said the failure "does not hinge on any one of these changes"."""
    from onnxfuzz.store.trigger import neighbours_text

    meta = {
        "neighbours": {
            "node": "t0 (Transpose)",
            "tried": [
                {
                    "kind": "shape",
                    "subject": "x",
                    "was": [1, 2, 1, 3],
                    "value": [1, 1, 1, 3],
                    "change": "x [1, 1, 1, 3]",
                    "result": "fails",
                },
            ],
        }
    }
    text = neighbours_text(meta, {}, "ort and planted")
    assert "changes tried" in text and "Not varied: the input's rank" in text, text


def test_a_variant_that_copies_its_input_through_is_no_pass() -> None:
    """ReduceSum without axes, noop_with_empty_axes=1: its output is its input, run on real
    ONNX Runtime; it passes a sum bug by not summing (an audit read it as a trigger). It
    is set apart; keepdims=0, which still sums, is not."""
    import onnxruntime as ort

    from onnxfuzz.execute.sandbox import Outcome, Status
    from onnxfuzz.reduce.neighbours import _copies_an_input

    node = helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1)
    model = _model(node, [2, 3], [1, 1])
    inputs = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    made = {v.change: v for v in variants(model, inputs, 0)}
    noop, keep = made["noop_with_empty_axes=1"], made["keepdims=0"]

    def ran(v) -> dict[str, Outcome]:
        sess = ort.InferenceSession(v.model.SerializeToString(), providers=["CPUExecutionProvider"])
        return {"ort": Outcome(Status.OK, outputs={"y": sess.run(None, v.inputs)[0]})}

    assert not noop.same_outputs and _copies_an_input(noop, ran(noop))
    assert not _copies_an_input(keep, ran(keep))


SPLIT_VARIANTS = """
import numpy as np
from onnx import TensorProto, helper
from onnxfuzz.reduce.variants import variants

node = helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=2)
graph = helper.make_graph(
    [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 2])],
    [helper.make_tensor_value_info(t, TensorProto.FLOAT, [3, 2]) for t in "ab"],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
made = list(variants(model, {"x": np.ones([6, 2], np.float32)}, 0))
print(sorted({(v.subject, str(v.value)) for v in made}))
"""


def test_a_variant_that_contradicts_the_node_s_outputs_is_not_made() -> None:
    """A Split of 2 outputs given num_outputs=1 aborted the campaign's process: ONNX's
    shape inference (C++, in-process) hits an assertion on it (audit 16: every Split
    finding killed its campaign, and its resume). Run in a child: an abort is a failure
    here, not the end of the test run."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", SPLIT_VARIANTS], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    assert "('num_outputs'" not in r.stdout, r.stdout  # 2 outputs: no other count
    assert "('x', '[5, 2]')" in r.stdout and "('axis', '1')" in r.stdout, r.stdout  # the others
