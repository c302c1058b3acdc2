"""Op features below the element type (onnxfuzz.generate.lang.features): the probe pins one on
a single-op model, a steered campaign avoids the ones a backend lacks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import onnxruntime as ort
import pytest

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.single_op import feature_variants, merged, single_op_generators
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.features import model_features

FLOAT = frozenset({1})


def _ort_runs(model, inputs) -> None:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, inputs)
    assert all(np.isfinite(o).all() for o in outs if o.dtype.kind == "f")


@pytest.mark.parametrize(
    ("op", "feature"),
    [
        ("Conv", "attr:auto_pad=SAME_UPPER"),
        ("Gemm", "attr:transA=1"),
        ("Clip", "dynamic:min"),
    ],
)
def test_a_pinned_feature_is_in_every_model_and_the_rest_take_their_simplest_form(
    op, feature
) -> None:
    cfg = Config(min_nodes=1, max_nodes=1, ops=frozenset([op]), dtypes=FLOAT)
    (single,) = single_op_generators(cfg)
    weights = {v.feature for v in feature_variants(single) if v.feature.startswith("dynamic:")}
    assert weights  # each of these ops has a weight-like input
    gen = Generator(replace(cfg, pin=frozenset({(op, feature)})))
    for seed in range(20):
        case = gen.generate(seed)
        have = {f for o, f in model_features(case.model) if o == op}
        assert feature in have, (seed, have)
        # no other weight is computed: the model differs from the simplest by the feature
        assert have & weights <= {feature}, (seed, have)
        _ort_runs(case.model, case.make_inputs(0))


@pytest.mark.parametrize(
    ("op", "feature"),
    [
        ("Conv", "attr:auto_pad=SAME_UPPER"),
        ("Reshape", "attr:allowzero=1"),
        ("Clip", "dynamic:min"),
        ("Clip", "omitted:min"),  # glue's Clip nodes too: they then give both bounds
    ],
)
def test_an_avoided_feature_is_never_generated_and_the_op_still_is(op, feature) -> None:
    cfg = Config(min_nodes=2, max_nodes=8, ops=frozenset([op, "Relu", "Add", "Mul"]), dtypes=FLOAT)
    plain, steered = (
        Generator(cfg),
        Generator(replace(cfg, avoid_features=frozenset({(op, feature)}))),
    )
    ops_seen = 0
    # (600 seeds: a computed Clip bound comes in about 1 model of 80)
    seen = sum((op, feature) in model_features(plain.generate(s).model) for s in range(600))
    for seed in range(150):
        case = steered.generate(seed)
        assert (op, feature) not in model_features(case.model), seed
        ops_seen += op in case.ops
        assert case.model.SerializeToString() == steered.generate(seed).model.SerializeToString()
    assert seen >= 3  # without steering the form is generated
    assert ops_seen >= 30


def test_variants_of_an_op_cover_its_forms_and_merged_they_run_side_by_side() -> None:
    cfg = Config(ops=frozenset(["Conv", "Clip"]), dtypes=FLOAT)
    for single in single_op_generators(cfg):
        variants = feature_variants(single)
        names = {v.feature for v in variants}
        if single.op == "Conv":
            assert {"attr:auto_pad=SAME_UPPER", "attr:auto_pad=VALID", "dynamic:W"} <= names
        else:
            assert {"dynamic:min", "dynamic:max"} <= names
        for v in variants:
            for draw in v.draws:
                assert (v.op, v.feature) in model_features(draw.model)
        model, inputs = merged([v.draws[0] for v in variants])
        assert len(model.graph.node) == len(variants)
        _ort_runs(model, inputs)


def test_the_features_survive_the_config_record() -> None:
    cfg = Config(avoid_features=frozenset({("Conv", "attr:auto_pad=SAME_LOWER")}))
    assert Config.from_record(cfg.to_record()) == cfg
    assert "avoid_features" not in Config().to_record()  # older records stay as they were
