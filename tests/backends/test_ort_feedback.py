"""The ort adapter's rule attribution (backends/ort.py): halving finds the same rules as
asking each candidate alone (in fewer sessions where one rule fires), and a model compiled
again costs none."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.backends.ort import (
    NOOP_OPERAND,
    RULES,
    OrtBackend,
    _native_stderr,
    _op_types,
    _transformers,
)


class Counting(OrtBackend):
    """The real adapter, counting the sessions it makes."""

    def __init__(self, **kw: str) -> None:
        super().__init__(**kw)
        self.sessions = 0

    def _session(self, data, disabled, opts=None):  # noqa: ANN001, ANN202 - as the base's
        self.sessions += 1
        return super()._session(data, disabled, opts)


def _model(identity: bool, relu_clip: bool) -> bytes:
    """Op types for EliminateIdentity, FuseReluClip, DivMulFusion and NoopElimination;
    which of the first two fire is chosen; the last two never do (Div's dividend is not
    1, Mul's and Div's other inputs are not 0 or 1)."""
    nodes = [
        helper.make_node("Div", ["x", "two"], ["d"]),
        helper.make_node("Mul", ["d", "three"], ["m"]),
    ]
    last = "m"
    if identity:
        nodes.append(helper.make_node("Identity", [last], ["i"]))
        last = "i"
    else:
        nodes.append(helper.make_node("Neg", [last], ["i"]))
        last = "i"
    if relu_clip:
        nodes += [
            helper.make_node("Relu", [last], ["r"]),
            helper.make_node("Clip", ["r", "lo", "hi"], ["y"]),
        ]
    else:
        nodes += [helper.make_node("Clip", [last, "lo", "hi"], ["y"])]
    inits = [
        numpy_helper.from_array(np.float32(v), n)
        for n, v in (("two", 2.0), ("three", 3.0), ("lo", -1.0), ("hi", 6.0))
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _one_by_one(ort: OrtBackend, data: bytes, candidates: list[str]) -> list[str]:
    """Each candidate alone enabled: does the rule-based transformer modify the graph?"""
    ort.compile_bytes(data)  # its session options (the INFO log) made
    fired = []
    for rule in candidates:
        with _native_stderr() as log:
            ort._session(data, tuple(c for c in candidates if c != rule))
        if any("RuleBased" in t for t in _transformers(log[0])[0]):
            fired.append(rule)
    return fired


def test_halving_finds_what_asking_each_rule_alone_finds() -> None:
    candidates = ["EliminateIdentity", "FuseReluClip", "DivMulFusion", "NoopElimination"]
    assert all(c in RULES for c in candidates)
    for identity, relu_clip in ((True, True), (True, False), (False, True)):
        data = _model(identity, relu_clip)
        ort = Counting()
        got = ort.optimizations(ort.compile_bytes(data))["rule"]
        want = _one_by_one(OrtBackend(), data, candidates)
        assert got == want, (identity, relu_clip)
        assert sorted(got) == ["EliminateIdentity"] * identity + ["FuseReluClip"] * relu_clip
        # NoopElimination and DivMulFusion are no candidates (no constant 0 or 1, no
        # Div(1, x)): one candidate left costs no session, two cost 2 (one by one: 4).
        extra = ort.sessions - 1  # the compile's own session
        assert extra == (2 if identity and relu_clip else 0), (identity, relu_clip, extra)


def test_a_model_compiled_again_costs_no_attribution_session() -> None:
    data = _model(True, True)
    ort = Counting()
    first = ort.optimizations(ort.compile_bytes(data))["rule"]
    before = ort.sessions
    again = ort.optimizations(ort.compile_bytes(data))["rule"]
    assert again == first and ort.sessions == before + 1  # the compile's session only


def test_no_attribution_where_no_rule_based_transformer_modified_the_graph() -> None:
    ort = Counting()
    data = _model(False, False)
    fired = ort.optimizations(ort.compile_bytes(data))
    assert fired["rule"] == [] and ort.sessions == 1
    assert not any("RuleBased" in t for t in fired["transformer"])


def test_noop_elimination_is_a_candidate_only_with_a_constant_zero_or_one() -> None:
    def model(value: float) -> bytes:
        graph = helper.make_graph(
            [
                helper.make_node("Add", ["x", "c"], ["a"]),
                helper.make_node("Identity", ["a"], ["y"]),
            ],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(np.float32(value), "c")],
        )
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString()

    assert NOOP_OPERAND in _op_types(model(0.0)) and NOOP_OPERAND in _op_types(model(1.0))
    assert NOOP_OPERAND not in _op_types(model(0.5))
    for value in (0.0, 0.5):  # with and without it among the candidates: as one by one
        ort = OrtBackend()
        got = ort.optimizations(ort.compile_bytes(model(value)))["rule"]
        assert got == _one_by_one(
            OrtBackend(), model(value), ["EliminateIdentity", "NoopElimination"]
        )
        assert got == ["EliminateIdentity"]  # (ORT 1.31 keeps x + 0 of a graph input x)


def test_feedback_on_request_makes_the_log_only_when_asked() -> None:
    """``feedback=new``: ``want_feedback(False)`` makes the session with ORT's log off (no
    feedback on that model: None), ``True`` gives it; ``feedback=0`` has no hook at all."""
    from onnxfuzz.backend import load_adapter

    class Levels(OrtBackend):
        """The real adapter, noting the log level of each session it makes."""

        levels: list[int] = []

        def _session(self, data, disabled, opts=None):  # noqa: ANN001, ANN202 - as the base's
            self.levels.append((opts or self._opts).log_severity_level)
            return super()._session(data, disabled, opts)

    ort = Levels()
    model = _model(identity=True, relu_clip=True)
    ort.want_feedback(False)
    exe = ort.compile_bytes(model)
    assert ort.optimizations(exe) is None
    assert ort.levels == [4]  # fatal only: ORT formats no INFO lines
    ort.want_feedback(True)
    exe = ort.compile_bytes(model)
    assert ort.levels[1] == 1  # INFO: the transformers' lines
    assert ort.optimizations(exe)["rule"] == ["EliminateIdentity", "FuseReluClip"]
    assert load_adapter("ort:feedback=0").optimizations is None
    assert load_adapter("ort:feedback=all").want_feedback is not None  # asked: ignored
    every = load_adapter("ort:feedback=all")
    every.want_feedback(False)
    assert every.optimizations(every.backend.compile_bytes(model))["rule"]


def test_a_worker_test_that_does_not_ask_has_no_feedback() -> None:
    from onnxfuzz.backend import parse_backend
    from onnxfuzz.execute.sandbox import Status, Worker, pack

    worker = Worker(parse_backend("ort"))
    worker.start()
    try:
        model = _model(identity=True, relu_clip=True)
        x = {"x": np.linspace(-2, 9, 6, dtype=np.float32).reshape(2, 3)}
        got = {}
        for asked in (False, True):
            failed = worker.submit_packed(pack(model, x, asked))
            got[asked] = failed if failed is not None else worker.collect()
            assert got[asked].status == Status.OK, got[asked].message
        assert got[False].optimizations is None and got[False].feedback_s == 0.0
        assert "FuseReluClip" in got[True].optimizations["rule"]
    finally:
        worker.close()


def test_feedback_new_skips_attribution_where_every_candidate_fired_before() -> None:
    """``feedback=new``: a second model whose candidate rules all fired on an earlier one
    costs no attribution session (nothing new to name); ``feedback=all`` names them again."""
    import onnx

    first = _model(True, True)
    renamed = onnx.load_from_string(first)
    renamed.graph.name = "another"  # other bytes (no cached answer), the same candidates
    second = renamed.SerializeToString()
    for mode, attributes_again in (("new", False), ("all", True)):
        ort = Counting(feedback=mode)
        assert ort.optimizations(ort.compile_bytes(first))["rule"] == [
            "EliminateIdentity",
            "FuseReluClip",
        ]
        before = ort.sessions
        got = ort.optimizations(ort.compile_bytes(second))["rule"]
        if attributes_again:
            assert got == ["EliminateIdentity", "FuseReluClip"] and ort.sessions == before + 3
        else:
            assert got == [] and ort.sessions == before + 1  # the compile's session only
