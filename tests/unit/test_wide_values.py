"""``--wide-values``: a share of fresh tensors take values across their input's whole value
domain, at a magnitude drawn among powers of two, so numeric-range bugs (a narrowed int
accumulator, integers computed in float32, int64 narrowed to int32) can show; the others
stay near zero as before. Records written before the option make the same models."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from onnx import numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.build.builder import FRESH_FLOAT, FRESH_INT
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import DEFAULT_WIDE_VALUES, Config

INT_ADD = frozenset({"Add", "Neg", "Abs"})


def _magnitudes(cfg: Config, seeds: range) -> list[tuple[int, float]]:
    """(element type, largest |bound|) of every fresh non-bool graph input."""
    gen = Generator(cfg)
    out = []
    for seed in seeds:
        case = gen.generate(seed)
        for name, dtype, _ in case.inputs:
            if dtype != dt.BOOL:
                v = case.input_domains[name]
                out.append((dtype, max(abs(v.lo), abs(v.hi))))
    return out


def test_a_share_out_of_range_is_refused_naming_the_flag() -> None:
    with pytest.raises(ConfigError, match=r"--wide-values: need 0 <= p <= 1, got 1.5"):
        Config(wide_values=1.5)


def test_records_before_the_option_make_the_models_they_made() -> None:
    assert Config().wide_values == DEFAULT_WIDE_VALUES > 0
    assert Config.from_record({}).wide_values == 0.0  # a record without the key
    assert "wide_values" not in Config(wide_values=0.0).to_record()
    cfg = Config(wide_values=0.5)
    assert Config.from_record(cfg.to_record()) == cfg
    old = Generator(Config.from_record(Config(wide_values=0.0, op_mix="uniform").to_record()))
    none = Generator(Config(wide_values=0.0, op_mix="uniform"))
    for seed in range(20):
        assert old.generate(seed).model == none.generate(seed).model


def test_without_wide_values_every_fresh_input_stays_near_zero() -> None:
    for dtype, mag in _magnitudes(Config(min_nodes=3, max_nodes=8, wide_values=0.0), range(80)):
        assert mag <= (FRESH_FLOAT if dtype in dt.FLOATS else FRESH_INT)


def test_wide_values_spread_over_every_scale_up_to_the_types_bound() -> None:
    cfg = Config(min_nodes=2, max_nodes=4, ops=INT_ADD, dtypes=frozenset({dt.INT32, dt.INT64}))
    mags = _magnitudes(cfg, range(300))
    wide = [(d, m) for d, m in mags if m > FRESH_INT]
    share = len(wide) / len(mags)
    assert 0.1 <= share <= 0.35, share  # the default 0.2 of fresh tensors
    # powers of two up to the bound: past int16, past float32's whole numbers, past int32
    scales = Counter(math.ceil(math.log2(m)) for _, m in wide)
    assert any(s <= 15 for s in scales) and any(24 < s <= 31 for s in scales), scales
    assert any(s > 32 for s in scales), scales  # int64 beyond int32
    for d, m in wide:
        assert m <= dt.value_range(d)[1]


def test_the_same_seed_gives_the_same_wide_model() -> None:
    cfg = Config(min_nodes=3, max_nodes=10, wide_values=1.0)
    a, b = Generator(cfg), Generator(cfg)
    for seed in range(30):
        x, y = a.generate(seed), b.generate(seed)
        assert x.model.SerializeToString() == y.model.SerializeToString()
        for k, v in x.make_inputs(seed).items():
            assert (v == y.make_inputs(seed)[k]).all()


def test_a_probe_draws_small_values() -> None:
    # A probe asks whether an op is supported; a value-range failure is a bug to find.
    from onnxfuzz.generate.build.single_op import single_op_generators

    singles = list(single_op_generators(Config(wide_values=1.0, ops=INT_ADD)))
    assert singles and all(s.generator.cfg.wide_values == 0.0 for s in singles)


def test_a_dequantized_wide_int32_keeps_a_normal_float16_scale() -> None:
    # An int32 x near 2**31 once asked DequantizeLinear for a float16 scale near 1e-8: a
    # subnormal that does not hold its drawn value (outputs left their interval) and that
    # a backend flushing subnormals to zero would turn into a wrong-looking 0.
    cfg = Config(
        min_nodes=1,
        max_nodes=1,
        ops=frozenset({"DequantizeLinear"}),
        dtypes=frozenset({dt.INT32, dt.FLOAT16}),
        connectivity=0.0,
        wide_values=1.0,
    )
    gen = Generator(cfg)
    scales = 0
    for seed in range(60):
        model = gen.generate(seed).model
        for init in model.graph.initializer:
            if init.name.endswith("x_scale") and init.data_type == dt.FLOAT16:
                arr = np.abs(numpy_helper.to_array(init).astype(np.float64))
                assert arr.min() >= np.finfo(np.float16).tiny, (seed, arr.min())
                scales += 1
    assert scales >= 20


def test_half_precision_stays_near_zero() -> None:
    # float16's bound leaves no room for the sums of squares kernels compute in the type: a
    # wide float16 InstanceNormalization input overflowed TVM's and the reference
    # evaluator's statistics alike, and ONNX Runtime, right in float32, was blamed.
    cfg = Config(min_nodes=2, max_nodes=6, dtypes=frozenset({dt.FLOAT16}), wide_values=1.0)
    mags = _magnitudes(cfg, range(60))
    assert mags and all(m <= FRESH_FLOAT for d, m in mags if d == dt.FLOAT16)


def test_normalized_slices_stay_within_their_bound_however_wide_the_values() -> None:
    """InstanceNormalization read a constant slice of 10000s (glue's Clip saturating a cast
    int64): implementations folding the statistics into one affine lose |mean| / sqrt(eps)
    ulps there, and ORT and torch gave 1.125 and 1.140 for the spec's exact 1.0957 (filed
    as torch's bug). A float32/float64 normalized input lies within +-NORM_MAG."""
    from onnxfuzz.dtypes import BY_NAME
    from onnxfuzz.generate.build.generator import Generator
    from onnxfuzz.generate.lang.config import Config
    from onnxfuzz.generate.lang.spec import load_specs

    NORM_MAG = load_specs()["InstanceNormalization"].build.__globals__.get("NORM_MAG", 16.0)  # noqa: N806

    norms = {"InstanceNormalization", "LayerNormalization", "GroupNormalization"}
    ops = norms | {"Cast", "Mul", "Add", "Einsum", "Exp", "Clip", "Relu"}
    wide = {BY_NAME[n] for n in ("float32", "float64", "int64", "int32")}
    gen = Generator(
        Config(
            min_nodes=4, max_nodes=8, ops=frozenset(ops), dtypes=frozenset(wide), wide_values=1.0
        )
    )
    seen = 0
    for seed in range(150):
        g, _, _ = gen.graph(seed)
        known = {t.name: t for t in g.inputs} | {t.name: t for t, _ in g.initializers}
        for node in g.nodes:
            if node.op_type in norms:
                iv = known[node.inputs[0]].interval
                assert iv.lo >= -NORM_MAG and iv.hi <= NORM_MAG, (seed, node.name, iv)
                seen += 1
            known.update({v.name: v for v in node.outputs if hasattr(v, "interval")})
    assert seen >= 30, seen


def test_an_lp_pools_sum_of_powers_stays_within_float16() -> None:
    """GlobalLpPool of float16 242.25s with p=3: TVM summed |x|**3 in float16 (inf), ORT in
    float32 (330.2); ONNX leaves the sum's type open, so it must fit the input's."""
    import math

    from onnxfuzz.dtypes import BY_NAME
    from onnxfuzz.generate.build.generator import Generator
    from onnxfuzz.generate.lang.config import Config

    ops = {"LpPool", "GlobalLpPool", "Mul", "Add", "Exp", "Relu", "Cast"}
    half = BY_NAME["float16"]
    gen = Generator(
        Config(
            min_nodes=3, max_nodes=6, ops=frozenset(ops), dtypes=frozenset({half}), wide_values=1.0
        )
    )
    seen = 0
    for seed in range(200):
        g, _, _ = gen.graph(seed)
        known = {t.name: t for t in g.inputs} | {t.name: t for t, _ in g.initializers}
        for node in g.nodes:
            if node.op_type in ("LpPool", "GlobalLpPool"):
                x = known[node.inputs[0]]
                p = node.attrs.get("p", 2)
                window = node.attrs.get("kernel_shape") or x.shape[2:]
                total = math.prod(window) * x.interval.mag**p
                assert total <= 65504, (seed, node.name, x.interval, p, window)
                seen += 1
            known.update({v.name: v for v in node.outputs if hasattr(v, "interval")})
    assert seen >= 30, seen
