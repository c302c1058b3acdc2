"""Which tests ask for optimization feedback (onnxfuzz.run.feedback_policy): a model that
could show something new does, one that could not does not (but for the sample), the
decisions depend on the seed and earlier results only, and ORT's table is read from ORT's
own terms (real models through ``feedback_tokens``)."""

from __future__ import annotations

import random

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz.backends.ort import (
    CONTRIB_GELU,
    CONTRIB_LAYERNORM,
    ONNX_GELU,
    ONNX_LAYERNORM,
    RULES,
    TRANSFORMER_NEEDS,
    feedback_needs,
    feedback_tokens,
)
from onnxfuzz.run.feedback_policy import SAMPLE, CampaignFeedback, FeedbackPolicy

NEEDS = {"FuseReluClip": [("Relu", "Clip")], "GeluFusionL1": ["Erf"]}


def test_a_model_with_an_unfired_pattern_asks_and_after_it_fired_does_not() -> None:
    p = FeedbackPolicy(1, NEEDS, lag=2, sample=10**9, warmup=0)  # no sample: the patterns alone
    relu_clip = {"Relu", "Clip", ("Relu", "Clip")}
    assert p.wants(0, relu_clip)  # nothing fired yet: a Relu -> Clip could fire it
    assert not p.wants(0, {"Relu", "Clip"})  # both ops, not the edge: nothing to seek
    assert not p.wants(0, {"Add"})
    p.report(0, True, relu_clip, ["FuseReluClip"])
    # lagged: tests 1 and 2 are decided from the results below 1 - 2 and 2 - 2: none yet
    assert p.wants(1, relu_clip) and p.wants(2, relu_clip)
    p.report(1, True, relu_clip, ["FuseReluClip"])
    p.report(2, True, relu_clip, ["FuseReluClip"])
    assert not p.wants(3, relu_clip)  # it fired on test 0 < 3 - 2: nothing new to see
    assert p.wants(3, {"Erf"})  # another pattern is still unfired
    # a result that was not asked for says nothing fired
    p.report(3, False, {"Erf"}, ["GeluFusionL1"])
    assert p.wants(9, {"Erf"})


def test_an_unfired_pattern_is_sought_ever_less_often_but_never_given_up() -> None:
    p = FeedbackPolicy(5, NEEDS, lag=0, sample=10**9, warmup=0, first=4)
    asked = []
    for i in range(4000):
        want = p.wants(i, {"Erf"})
        asked.append(want)
        p.report(i, want, {"Erf"}, [])
    assert all(asked[:4])  # the first FIRST models holding it ask
    early, late = sum(asked[:400]), sum(asked[3600:])
    assert late >= 1, "a pattern that has not fired is still sought"
    assert early > 3 * late
    # about FIRST * (1 + ln(m / FIRST)) in all: 4 * (1 + ln 1000) = 31.6
    assert 15 <= sum(asked) <= 60, sum(asked)


def test_the_sample_is_a_function_of_the_seed_and_the_test() -> None:
    a, b, c = (FeedbackPolicy(s, NEEDS) for s in (7, 7, 8))
    picks = [i for i in range(20_000) if a.sampled(i)]
    assert picks == [i for i in range(20_000) if b.sampled(i)]
    assert picks != [i for i in range(20_000) if c.sampled(i)]
    assert 0.8 / SAMPLE < len(picks) / 20_000 < 1.2 / SAMPLE
    assert all(a.wants(i, set()) for i in picks)  # a model holding nothing asks there


def _decisions(order: list[int], seed: int = 3) -> dict[int, bool]:
    """Test i holds Erf when i % 3 == 0; GeluFusion fires on every asked test from 30 on.
    Each test is decided once every test below i - LAG is reported, the reports arriving
    in ``order``."""
    p = FeedbackPolicy(seed, NEEDS, lag=8, sample=10)
    tokens = {i: ({"Erf"} if i % 3 == 0 else set()) for i in range(200)}
    decided: dict[int, bool] = {}
    pending = list(order)
    while pending:
        i = next(j for j in pending if p.ready(j))
        pending.remove(i)
        decided[i] = p.wants(i, tokens[i])
        p.report(i, decided[i], tokens[i], ["GeluFusionL1"] if decided[i] and i >= 30 else [])
    return decided


def test_decisions_do_not_depend_on_the_order_results_arrive_in() -> None:
    straight = _decisions(list(range(200)))
    shuffled = list(range(200))
    rng = random.Random(4)
    for k in range(0, 200, 6):  # two lanes' worth of interleaving: local swaps
        window = shuffled[k : k + 6]
        rng.shuffle(window)
        shuffled[k : k + 6] = window
    assert _decisions(shuffled) == straight
    assert _decisions(list(range(200)), seed=4) != straight  # false direction: the seed counts


def test_resume_reads_what_fired_back() -> None:
    p = FeedbackPolicy(1, NEEDS, lag=2, sample=10**9, warmup=0)
    p.resume({"FuseReluClip": 5, "NotInTable": 1}, range(100))
    assert p.ready(102)
    assert not p.wants(100, {("Relu", "Clip")}) and p.wants(100, {"Erf"})


def _model(nodes: list, inits: list, opset: int = 21) -> bytes:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model.SerializeToString()


def test_ort_models_ask_by_what_they_hold() -> None:
    """Through the campaign's object for ``ort``: a Relu -> Clip model asks (FuseReluClip
    has not fired), a Neg model does not; ``ort:opt=none`` seeks nothing (nothing in the
    table runs there), ``feedback=all`` and other adapters have no policy."""
    lo_hi = [numpy_helper.from_array(np.float32(v), n) for n, v in (("lo", 0.0), ("hi", 6.0))]
    relu_clip = _model(
        [
            helper.make_node("Relu", ["x"], ["r"]),
            helper.make_node("Clip", ["r", "lo", "hi"], ["y"]),
        ],
        lo_hi,
    )
    neg = _model([helper.make_node("Neg", ["x"], ["y"])], [])
    assert ("Relu", "Clip") in feedback_tokens(relu_clip)
    assert {ONNX_GELU, ONNX_LAYERNORM} <= feedback_tokens(relu_clip)  # opset 21
    tokens = feedback_tokens(_model([helper.make_node("Relu", ["x"], ["y"])], [], opset=16))
    assert {CONTRIB_GELU, CONTRIB_LAYERNORM} <= tokens and ONNX_GELU not in tokens
    labels = ["ort", "ort:opt=none", "ort:feedback=all", "tvm", "ort:disable=FuseReluClip"]
    c = CampaignFeedback(labels, seed=2)
    assert set(c.policies) == {"ort", "ort:opt=none", "ort:disable=FuseReluClip"}
    unsampled, later = [i for i in range(100) if not c.policies["ort"].sampled(i)][:2]
    assert c.policies["ort:opt=none"].needs == {}
    assert "FuseReluClip" not in c.policies["ort:disable=FuseReluClip"].needs
    # the backends without a policy are always asked (their adapters decide)
    always = {"ort:feedback=all", "tvm"}
    for j in range(unsampled):  # the tests before ended (past the warm-up, nothing asked)
        c.report(j, (), {})
    assert c.decide(unsampled, relu_clip) == {"ort"} | always
    c.report(unsampled, {"ort"} | always, {"ort": ["FuseReluClip"]})
    for j in range(unsampled + 1, later):
        c.report(j, (), {})
    assert c.decide(later, neg) == always
    assert set(TRANSFORMER_NEEDS) | set(RULES) == set(feedback_needs())


def test_a_pattern_of_several_edges_needs_them_all() -> None:
    layernorm = frozenset({("ReduceMean", "Sub"), ("Sub", "Pow"), ("Pow", "ReduceMean")})
    p = FeedbackPolicy(1, {"LayerNormFusionL1": [layernorm]}, sample=10**9, warmup=0)
    assert p.wants(0, set(layernorm) | {"Add"})
    assert not p.wants(0, {("ReduceMean", "Sub"), ("Sub", "Pow")})  # one edge short
    # ORT's own table: a LayerNorm block's edges are sought, its first edge alone is not
    ort = FeedbackPolicy(1, feedback_needs(), sample=10**9, warmup=0)
    full = {
        ("ReduceMean", "Sub"), ("Sub", "Pow"), ("Pow", "ReduceMean"), ("ReduceMean", "Add"),
        ("Add", "Sqrt"), ("Sqrt", "Div"),
    }  # fmt: skip
    # the model's opset picks the twin: ONNX's LayerNormalization from opset 17, the
    # contrib op below (feedback_tokens names the side)
    at_17 = set(ort.sought(0, full | {ONNX_LAYERNORM}))
    below = set(ort.sought(0, full | {CONTRIB_LAYERNORM}))
    assert {"LayerNormFusionL1", "SimplifiedLayerNormFusion"} <= at_17
    assert "LayerNormFusionL2" not in at_17
    assert {"LayerNormFusionL2", "SimplifiedLayerNormFusion"} <= below
    assert "LayerNormFusionL1" not in below
    assert "LayerNormFusionL1" not in ort.sought(0, {("ReduceMean", "Sub"), ONNX_LAYERNORM})


def test_the_first_tests_ask_whatever_their_models_hold_and_later_ones_do_not() -> None:
    # Before any result is in, nothing says which optimizers fired: a short campaign (the
    # first WARMUP tests) asks on every model, pattern or not; after that, a model holding
    # no unfired pattern asks only where the sample picks it.
    p = FeedbackPolicy(1, NEEDS, lag=2, sample=10**9, warmup=4)
    assert all(p.wants(i, {"Add"}) for i in range(4))
    for i in range(4):
        p.report(i, True, {"Add"}, [])
    assert not any(p.wants(i, {"Add"}) for i in range(4, 40))


def test_a_lane_waits_for_earlier_results_only_where_the_campaign_says_so() -> None:
    # Unguided, a lane holding started tests must not wait on the other lanes' results (they
    # may wait on its own: a many-worker campaign would stall); under --guide optcov it waits.
    import time

    neg = _model([helper.make_node("Neg", ["x"], ["y"])], [])
    for wait_s, waits in ((0.0, False), (0.5, True)):
        c = CampaignFeedback(["ort"], seed=2, wait_s=wait_s)
        t0 = time.monotonic()
        c.decide(100, neg)  # tests 0-83 never reported: not ready
        assert (time.monotonic() - t0 >= 0.5) is waits
