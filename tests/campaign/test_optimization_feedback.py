"""Optimization feedback (issue 24): what ONNX Runtime's transformers and rewrite rules and
TVM's passes and fusions did to a model, read from the real libraries through the adapters'
``optimizations`` hook, carried from the worker, counted by the campaign; the
per-transformer oracle of ``ort:isolate=1``; bad feedback hooks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from runs import finished

from onnxfuzz.backend import load_adapter, parse_backend
from onnxfuzz.execute.sandbox import Status, Worker
from onnxfuzz.run.campaign import Campaign, CampaignOptions
from onnxfuzz.store.db import Store

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "optcov_adapters.py"


def _model(nodes: list, inputs: list, inits: list, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _conv_relu_clip() -> onnx.ModelProto:
    """Conv -> Relu -> Clip: ORT fuses Relu into Clip (rule FuseReluClip) and the Clip
    into the Conv (transformer ConvActivationFusion)."""
    return _model(
        [
            helper.make_node("Conv", ["x", "w"], ["c"]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Clip", ["r", "lo", "hi"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 5])],
        [
            helper.make_tensor("w", TensorProto.FLOAT, [3, 2, 1, 1], [0.5] * 6),
            helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0]),
        ],
    )


def _swish() -> onnx.ModelProto:
    """MatMul + bias, x * sigmoid(x): one fused kernel in TVM's fusing pipeline."""
    return _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["a"]),
            helper.make_node("Sigmoid", ["a"], ["s"]),
            helper.make_node("Mul", ["a", "s"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [
            helper.make_tensor("w", TensorProto.FLOAT, [4, 3], [0.25] * 12),
            helper.make_tensor("b", TensorProto.FLOAT, [3], [0.1, 0.2, 0.3]),
        ],
    )


def test_ort_reports_transformers_and_rules_from_a_worker() -> None:
    worker = Worker(parse_backend("ort"))
    worker.start()
    try:
        x = {"x": np.linspace(-2, 9, 50, dtype=np.float32).reshape(1, 2, 5, 5)}
        got = worker.execute(_conv_relu_clip().SerializeToString(), x)
        assert got.status == Status.OK, got.message
        assert got.optimizations is not None
        assert "ConvActivationFusion" in got.optimizations["transformer"]
        assert got.optimizations["rule"] == ("FuseReluClip",)
        # what could have fired: the never-fired list is made of these
        assert "LayerNormFusion" in {
            n.removesuffix("L1").removesuffix("L2")
            for n in got.optimizations["known:transformer"]
        }
        assert got.feedback_error == ""
        # the session's INFO log was taken off the worker's stderr (a crash's evidence)
        assert "onnxruntime:" not in worker.stderr_tail(100_000)
    finally:
        worker.close()


def test_ort_without_optimizations_reports_none_fired() -> None:
    adapter = load_adapter("ort:opt=none")
    exe = adapter.backend.compile(_conv_relu_clip())
    fired = adapter.optimizations(exe)
    assert "ConvActivationFusion" not in fired["transformer"] and fired["rule"] == []


def test_tvm_fusing_pipeline_reports_fused_patterns() -> None:
    fusing = load_adapter("tvm:pipeline=fuse")
    fused = fusing.optimizations(fusing.backend.compile(_swish()))
    assert fused["fused"] == ["fused_matmul_add_tir_sigmoid_multiply"]
    assert {"FuseOps", "FuseTIR", "LegalizeOps"} <= set(fused["pass"])
    plain = load_adapter("tvm")  # tvm.compile's CPU pipeline fuses nothing
    exe = plain.backend.compile(_swish())
    got = plain.optimizations(exe)
    assert got["fused"] == [] and "FuseOps" not in got["known:pass"]
    x = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    exe_fused = fusing.backend.compile(_swish())
    np.testing.assert_allclose(
        fusing.backend.run(exe_fused, x)["y"], plain.backend.run(exe, x)["y"], rtol=1e-5
    )


def test_one_op_sequence_at_two_shapes_is_one_fused_pattern() -> None:
    """LegalizeOps names Cast's PrimFuncs at two shapes cast and cast1, and FuseTIR names
    the kernels after them: both are the pattern Cast -> Exp."""
    branches = [
        node
        for i in (1, 2)
        for node in (
            helper.make_node("Cast", [f"x{i}"], [f"c{i}"], to=TensorProto.DOUBLE),
            helper.make_node("Exp", [f"c{i}"], [f"y{i}"]),
        )
    ]
    graph = helper.make_graph(
        branches,
        "g",
        [
            helper.make_tensor_value_info("x1", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("x2", TensorProto.FLOAT, [3, 5]),
        ],
        [helper.make_tensor_value_info(y, TensorProto.DOUBLE, None) for y in ("y1", "y2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    fusing = load_adapter("tvm:pipeline=fuse")
    assert fusing.optimizations(fusing.backend.compile(model))["fused"] == ["fused_cast_tir_exp"]


def test_isolate_names_the_optimizer_that_changed_the_result() -> None:
    broken = load_adapter(f"{ADAPTERS}:BrokenFusion:victim=FuseReluClip")
    exe = broken.backend.compile(_conv_relu_clip())
    x = {"x": np.linspace(-2, 9, 50, dtype=np.float32).reshape(1, 2, 5, 5)}
    with pytest.raises(Exception, match=r"ORT optimizer FuseReluClip changes output y") as e:
        broken.backend.run(exe, x)
    assert type(e.value).__name__ == "OptimizerChangedResult"
    # the real ORT: every optimizer that fired agrees with ORT without it
    healthy = load_adapter("ort:isolate=1")
    healthy.backend.run(healthy.backend.compile(_conv_relu_clip()), x)


def test_isolate_asks_only_about_what_fired() -> None:
    """The planted bug shifts every output, but on a model where FuseReluClip did not
    fire, the oracle has nothing to disable and says nothing."""
    broken = load_adapter(f"{ADAPTERS}:BrokenFusion:victim=FuseReluClip")
    exe = broken.backend.compile(_swish())
    x = {"x": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)}
    broken.backend.run(exe, x)


def test_bad_option_values_are_refused() -> None:
    from onnxfuzz.errors import BackendError

    for spec in ("ort:feedback=2", "ort:isolate=1,feedback=0", "tvm:pipeline=fast"):
        with pytest.raises(BackendError):
            load_adapter(spec)


def _campaign(tmp: Path, second: str, tests: int = 8) -> Campaign:
    opts = CampaignOptions(
        backends=["ort", second],
        tests=tests,
        seed=3,
        timeout=20.0,
        generator={"min_nodes": 2, "max_nodes": 5, "ops": ["Add", "Relu", "Mul", "Clip"]},
        probe="off",
    )
    return finished(tmp / "camp", opts)


def test_campaign_counts_feedback_and_warns_once_for_a_raising_hook(tmp_path: Path) -> None:
    c = _campaign(tmp_path, f"{ADAPTERS}:RaisingFeedback")
    log = (c.out / "feedback.log").read_text().splitlines()
    assert "ort: " in c.optcov.summary() and " transformer" in c.optcov.summary()  # live line
    raising = [ln for ln in log if "raising-feedback" in ln]
    assert len(raising) == 1 and "hook raised (RuntimeError: feedback exploded)" in raising[0]
    store = Store(c.out / "campaign.db")
    try:
        counts = store.counts_by_backend()
        raising_label = f"{ADAPTERS}:RaisingFeedback"
        # the tests went on: the same verdicts as ORT itself (the same library inside)
        assert {v: n for (b, v), n in counts.items() if b == raising_label} == {
            v: n for (b, v), n in counts.items() if b == "ort"
        }
        assert counts[(raising_label, "ok")] >= 5
        fired = {(k, n) for b, k, n, tests, _ in store.optimizations() if b == "ort" and tests}
        assert fired, "ORT's transformers fired on some test"
        costs = store.feedback_costs()
        ok = counts[(raising_label, "ok")]
        assert costs["ort"][0] == ok and costs["ort"][3] == 0
        assert costs[raising_label][3] == ok  # every compiled test's hook raised
    finally:
        store.close()


def test_campaign_says_once_that_a_backend_gives_no_feedback(tmp_path: Path) -> None:
    c = _campaign(tmp_path, f"{ADAPTERS}:NoFeedback", tests=5)
    log = (c.out / "feedback.log").read_text().splitlines()
    assert log == [
        "backend no-feedback gives no optimization feedback: it runs unguided by "
        "optimization coverage"
    ]


def test_ort_session_log_is_never_a_crash_signatures_last_words() -> None:
    """A crash while a session is made leaves the feedback's log lines on stderr: they are
    timestamped, and as a crash's "last words" would make every signature differ."""
    from onnxfuzz.execute.crashdump import read_dump

    text = (
        "free(): invalid pointer\n"
        "2026-11-24 10:02:11.291355029 [I:onnxruntime:, graph_transformer.cc:15 Apply] "
        "GraphTransformer ConstantFolding modified: 0 with status: OK\n"
        "Fatal Python error: Segmentation fault\n\n"
        "Current thread 0x00007f (most recent call first):\n"
        '  File "/x/ort.py", line 5 in compile_bytes\n'
    )
    assert read_dump(text).note == ("free(): invalid pointer",)


def test_reported_rule_names_are_what_disabled_optimizers_takes() -> None:
    """MatMul -> BatchNormalization: the rule's name is MatMul_BatchNormalization_Fusion
    (its class, MatmulBNFusion, is a name ORT ignores); disabling the name reported
    stops the rule-based transformer from modifying the graph."""
    from onnxfuzz.backends.ort import OrtBackend, _native_stderr, _transformers

    ones = [
        helper.make_tensor(n, TensorProto.FLOAT, s, [1.0] * (s[0] * (s[1] if s[1:] else 1)))
        for n, s in (("w", [4, 3]), ("s", [3]), ("b", [3]), ("mu", [3]), ("v", [3]))
    ]
    model = _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"]),
            helper.make_node("BatchNormalization", ["m", "s", "b", "mu", "v"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        ones,
    ).SerializeToString()
    ort = OrtBackend()
    rules = ort.optimizations(ort.compile_bytes(model))["rule"]
    assert rules == ["MatMul_BatchNormalization_Fusion"]
    with _native_stderr() as log:
        ort._session(model, tuple(rules))
    assert not any("RuleBased" in t for t in _transformers(log[0])[0])


def test_optcov_guide_is_rewarded_by_what_fired(tmp_path: Path) -> None:
    """A campaign under --guide optcov stores, with each test, its decision and the keys of
    what the optimizers did (the reward), and starts models with the optimizers' blocks.
    Every test asks for feedback here (``feedback=all``; the default policy asks on some)."""
    from array import array

    from onnxfuzz.run.steer import OPT_REWRITE, SIGNATURE, optimization_keys

    opts = CampaignOptions(
        backends=["ort:feedback=all", "ort:opt=none"],
        tests=24,
        seed=11,
        timeout=20.0,
        generator={"min_nodes": 3, "max_nodes": 8, "op_mix": "layers"},
        probe="off",
        guide="optcov",
    )
    c = Campaign(tmp_path / "camp", opts, resume=False)
    c.start()
    try:
        c.run()
    finally:
        c.close()
    store = Store(c.out / "campaign.db")
    try:
        rows = store.guide_rows()
        assert len(rows) == 24
        # a path of ops, blocks or a chain; or a mutant of an earlier test's decision
        for i, (d, _) in rows.items():
            assert d and (d.get("path") or d["of"][1] == rows[d["of"][0] - 11][0]), (i, d)
        keys = [array("I", k) for _, k in rows.values()]
        assert sum(len(k) > 0 for k in keys) >= 12  # something fired on most tests
        # ORT's transformers and rules (the rewrites' slot) and failure signatures only: no
        # fused patterns, passes, nor the triples and instances --guide mcts rewards
        slots = {key >> 30 for k in keys for key in k}
        assert OPT_REWRITE in slots and slots <= {OPT_REWRITE, SIGNATURE}
        assert optimization_keys([], []) == b""
    finally:
        store.close()


def test_ort_feedback_0_gives_no_feedback_rows_at_all(tmp_path: Path) -> None:
    """``ort:feedback=0`` has no hook: the campaign says once that it gives no feedback,
    and campaign.db holds neither optimization rows nor a cost row for it (it had a cost
    row of "nothing fired" tests before)."""
    c = _campaign(tmp_path, "ort:feedback=0", tests=6)
    log = (c.out / "feedback.log").read_text().splitlines()
    assert any(ln.startswith("backend ort:feedback=0 gives no optimization feedback") for ln in log)
    store = Store(c.out / "campaign.db")
    try:
        assert "ort:feedback=0" not in store.feedback_costs()
        assert "ort" in store.feedback_costs()  # false direction: the other backend has one
        assert not [r for r in store.optimizations() if r[0] == "ort:feedback=0"]
    finally:
        store.close()


def _policy_campaign(tmp: Path, name: str, first: str, tests: int) -> Campaign:
    opts = CampaignOptions(
        backends=[first, "ort:opt=none"],
        tests=tests,
        seed=21,
        timeout=20.0,
        generator={"min_nodes": 2, "max_nodes": 6, "op_mix": "layers"},
        probe="off",
    )
    return finished(tmp / name, opts)


def test_the_default_policy_asks_on_some_tests_and_sees_what_every_test_sees(
    tmp_path: Path,
) -> None:
    """``ort`` (feedback=new) against ``ort:feedback=all`` on the same 60 tests (no guide:
    the same models): fewer tests ask, every test's backend time still counts in the
    cost, and what fired on the asked tests is what every test's feedback saw first."""
    new = _policy_campaign(tmp_path, "new", "ort", 60)
    every = _policy_campaign(tmp_path, "all", "ort:feedback=all", 60)
    s_new, s_all = Store(new.out / "campaign.db"), Store(every.out / "campaign.db")
    try:
        asked = s_new.get_meta("feedback_asked")
        assert asked["tests"] == 60 and 0 < asked["ort"] < 60, asked
        assert asked["ort:opt=none"] < asked["ort"]  # nothing to seek there: the sample
        ok = s_new.counts_by_backend()[("ort", "ok")]
        assert s_new.feedback_costs()["ort"][0] == ok  # asked or not, its time counts

        def fired(store: Store, label: str) -> set[str]:
            return {n for b, _, n, tests, _ in store.optimizations() if b == label and tests}

        got, want = fired(s_new, "ort"), fired(s_all, "ort:feedback=all")
        assert got and got <= want
        assert len(got) >= 0.8 * len(want), (sorted(want - got), len(want))
    finally:
        s_new.close()
        s_all.close()
