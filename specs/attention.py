"""Ops of transformer blocks and friends: RMSNormalization, Attention, RotaryEmbedding,
Swish, Dropout (inference), Shrink, and the opset-27/28 ops of linear-attention and gated
models: LinearAttention, CausalConvWithState, SwiGLU.

Value bounds: RMSNormalization's X / sqrt(mean(X^2) + eps) over N elements has magnitude
<= sqrt(N) (eps only shrinks it), so |scale| <= bound / (2 sqrt(N)) keeps Y inside the
bound. Swish y = x * sigmoid(alpha * x) and Shrink (with 0 <= bias <= lambd) keep |y| <= |x|
with x's sign; Dropout in inference mode is the identity.
"""

from __future__ import annotations

import math

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Floats, Ints, OneOf
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import WEIGHT, SpecBuilder
from onnxfuzz.generate.lang.spec_domains import Multiples, divisors

_TRAINING = "training mode (random dropout and its mask) is not generated: inference only"
_PAST = "past_key/past_value (a KV cache) and the present outputs are not generated"
_NONPAD = "nonpad_kv_seqlen (padded KV cache, Attention-24) is not generated"
_BOOL = "boolean masks are not generated: a fully masked row makes softmax NaN"
_WINDOW = "sliding windows (Attention-25) and softmax_precision are not generated"
NOT_GENERATED = {
    **{
        f"test_attention_4d_with_qk_matmul_{k}": "qk_matmul_output_mode (a second output of "
        "intermediate scores) is not generated"
        for k in ("bias", "softcap", "softmax")
    },
    "test_training_dropout_default": _TRAINING,
    "test_training_dropout_default_mask": _TRAINING,
    "test_training_dropout": _TRAINING,
    "test_training_dropout_mask": _TRAINING,
    "test_training_dropout_zero_ratio": _TRAINING,
    "test_training_dropout_zero_ratio_mask": _TRAINING,
    "test_attention_4d_with_past_and_present": _PAST,
    "test_attention_4d_gqa_with_past_and_present": _PAST,
    "test_attention_4d_gqa_with_past_and_present_fp16": _PAST,
    "test_attention_4d_diff_heads_with_past_and_present": _PAST,
    "test_attention_4d_diff_heads_with_past_and_present_mask3d": _PAST,
    "test_attention_4d_diff_heads_with_past_and_present_mask4d": _PAST,
    "test_attention_4d_with_past_and_present_qk_matmul_bias": _PAST,
    "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask": _PAST,
    "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask": _PAST,
    "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal": _PAST,
    "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal": _PAST,
    "test_attention_4d_with_past_and_present_qk_matmul": _PAST,
    "test_attention_3d_with_past_and_present": _PAST,
    "test_attention_3d_gqa_with_past_and_present": _PAST,
    "test_attention_3d_diff_heads_with_past_and_present": _PAST,
    "test_attention_3d_with_past_and_present_qk_matmul": _PAST,
    "test_attention_3d_with_past_and_present_qk_matmul_bias": _PAST,
    "test_attention_3d_with_past_and_present_qk_matmul_softcap": _PAST,
    "test_attention_3d_with_past_and_present_qk_matmul_softmax": _PAST,
    "test_attention_4d_causal_with_past_and_present": _PAST,
    "test_attention_local_window_with_past": _PAST,
    "test_attention_4d_diff_heads_mask4d_padded_kv": _NONPAD,
    "test_attention_4d_padded_kv_bf16": _NONPAD,
    "test_attention_4d_causal_padded_kv_bf16": _NONPAD,
    "test_attention_4d_gqa_causal_nonpad_decode": _NONPAD,
    "test_attention_4d_gqa_causal_nonpad_decode_fp16": _NONPAD,
    "test_attention_4d_causal_nonpad_continued_prefill": _NONPAD,
    "test_attention_4d_causal_nonpad_negative_offset_structural_empty": _NONPAD,
    "test_attention_4d_causal_nonpad_attn_mask_composition": _NONPAD,
    "test_attention_4d_causal_nonpad_batch_prefill": _NONPAD,
    "test_attention_local_window_ext_cache_rank3_head_mask": _NONPAD,
    "test_attention_local_window_ext_cache_rank4_batch_mask": _NONPAD,
    "test_attention_local_window_ext_cache_rank2_mask": _NONPAD,
    "test_attention_local_window_ext_cache_float16_mask": _NONPAD,
    "test_attention_4d_attn_mask_bool": _BOOL,
    "test_attention_4d_attn_mask_bool_4d": _BOOL,
    "test_attention_causal_boolmask_nan_robustness": _BOOL,
    "test_attention_23_boolmask_fullymasked_row_nan_robustness": _BOOL,
    "test_attention_23_fullymasked_qk_matmul_output_mode3_zero": _BOOL,
    "test_attention_24_fullymasked_qk_matmul_output_mode3_zero": _BOOL,
    "test_attention_24_qk_matmul_output_mode3_softmax_precision": _BOOL,
    "test_attention_local_window_rank1_boolean_mask": _BOOL,
    "test_attention_local_window_gqa_rank4_mask": _BOOL,
    "test_attention_local_window": _WINDOW,
    "test_attention_bidirectional_window": _WINDOW,
    "test_attention_local_window_default": _WINDOW,
    "test_attention_3d_local_window": _WINDOW,
}


def _sign_kept(iv: Interval) -> Interval:
    """|y| <= |x| with x's sign."""
    return Interval(min(iv.lo, 0.0), max(iv.hi, 0.0))


# --- RMSNormalization ---------------------------------------------------------------------
@op("RMSNormalization", since=23)
def rms_norm(b: SpecBuilder, p: None) -> None:
    # Y = X / sqrt(mean(X^2 over axes axis..rank-1) + epsilon) * scale.
    x = b.input("X", rank=Ints(1, 5))
    axis = b.attr("axis", Ints(-x.rank, x.rank - 1), -1)
    b.attr("epsilon", Floats(1e-5, 0.1), 1e-5)
    b.attr("stash_type", OneOf([1]), 1)  # float statistics: the one ONNX Runtime runs
    norm_shape = list(x.shape[axis % x.rank :])
    root_n = math.sqrt(math.prod(norm_shape))

    def scale_values(d: int) -> Values:
        s = min(2.0, dt.value_range(d)[1] / 2 / root_n)
        return Values(-s, s)

    scale = b.input("scale", dims=norm_shape, values=scale_values, kind=WEIGHT)
    b.output(x.shape, interval=Interval(-root_n, root_n) * scale.interval)


# --- Swish ----------------------------------------------------------------------------------
# ONNX Runtime 1.31 has no Swish kernel; it runs the function body at model opset 24 only
# (opsets 25 and 26: "Could not find an implementation for Swish(24)").
@op("Swish", since=24, until=24)
def swish(b: SpecBuilder, p: None) -> None:
    # y = x * sigmoid(alpha * x); alpha > 0: y lies between x and 0, and
    # y >= min over x of x * sigmoid(alpha * x) = -0.2785 / alpha.
    x = b.input("X")
    alpha = b.attr("alpha", Floats(0.25, 4.0, 15), 1.0)
    iv = _sign_kept(x.interval)
    b.output(x.shape, interval=Interval(max(iv.lo, -0.28 / alpha), iv.hi))


# --- Dropout --------------------------------------------------------------------------------
@op("Dropout")
def dropout(b: SpecBuilder, p: None) -> None:
    # Inference (training_mode absent or false): output = data; the optional mask output
    # is not produced.
    has_ratio = b.optional("ratio")
    has_training = has_ratio and b.optional("training_mode")
    x = b.input("data")
    b.attr("seed", Ints(0, 1 << 16), None)
    if has_ratio:
        b.input("ratio", rank=0, values=Values(0.0, 0.9), kind=WEIGHT)
    if has_training:
        b.const("training_mode", np.asarray(False))
    b.output(x.shape, interval=x.interval)


# --- Shrink ---------------------------------------------------------------------------------
LAMBDS = [0.5, 0.0, 1.0, 1.5, 2.0, 2.5, 3.0]
EXACT_F32 = 2**24  # the integers float32 holds exactly: |x| <= 2**24


@op("Shrink")
def shrink(b: SpecBuilder, p: None) -> None:
    # y = x - bias if x > lambd, x + bias if x < -lambd, else 0. A float x within float
    # error of +-lambd flips between 0 and +-(lambd - bias): float x is fresh and kept away
    # from whole numbers and halves (avoid="half"), lambd is a multiple of 0.5. Integer x
    # compares exactly. 0 <= bias <= lambd keeps |y| <= |x| (no unsigned wrap-around); an
    # integer x takes a whole bias (x - 1.5 would round or truncate differently). The
    # attributes are floats, and runtimes compute x - bias in float32 (ONNX Runtime gave
    # -59421478130548736 for an int64 -59421476945056466 TVM kept exact): integer x stays
    # within float32's exact integers, +-2**24.
    x = b.input(
        "input",
        values=lambda d: Values(avoid="half") if d in dt.FLOATS else Values(-EXACT_F32, EXACT_F32),
    )
    lambd = b.attr("lambd", OneOf(LAMBDS), 0.5)
    if x.dtype in dt.FLOATS:
        biases = [k / 2 for k in range(int(2 * lambd) + 1)]
    else:
        biases = [float(k) for k in range(int(lambd) + 1)]
    b.attr("bias", OneOf(biases), 0.0)
    b.output(x.shape, interval=_sign_kept(x.interval))


# --- Attention ------------------------------------------------------------------------------
@op("Attention", since=23)
def attention(b: SpecBuilder, p: None) -> None:
    # Y = softmax(Q K^T * scale + mask) V per head, 4-D (batch, heads, seq, head size) or
    # 3-D (batch, seq, heads * head size) with q_num_heads / kv_num_heads; K and V have
    # kv_heads dividing Q's heads (grouped-query attention). Only Y is produced.
    # Q and K stay in [-2, 2] so the scores stay small: at large scores softmax turns
    # near one-hot and rounding differences pick different winners (false alarms).
    # Y is a convex combination of V's rows: Y lies in V's interval.
    has_mask = b.optional("attn_mask")
    # float64: ONNX Runtime expands Attention's function body with float32 constants and then
    # fails to bind Add (double vs float), so double is left out.
    q = b.input("Q", rank=Ints(3, 4), dtype=(dt.FLOAT, dt.FLOAT16), values=Values(-2.0, 2.0))
    batch = q.shape[0]
    b.attr("is_causal", OneOf([0, 1]), 0)
    if q.rank == 3:
        length = q.shape[1]
        heads = b.attr("q_num_heads", OneOf(divisors(q.shape[2])))
        kv_heads = b.attr("kv_num_heads", OneOf(divisors(heads)))
        size = q.shape[2] // heads
        k = b.input(
            "K",
            dims=[batch, None, kv_heads * size],
            values=Values(-2.0, 2.0),
        )
        seq = k.shape[1]
        v = b.input("V", dims=[batch, seq, Multiples(kv_heads, b.max_dim)])
        v_size = v.shape[2] // kv_heads
        y_shape = [batch, length, heads * v_size]
    else:
        heads, length, size = q.shape[1:]
        k = b.input("K", dims=[batch, OneOf(divisors(heads)), None, size], values=Values(-2.0, 2.0))
        kv_heads, seq = k.shape[1], k.shape[2]
        v = b.input("V", dims=[batch, kv_heads, seq, None])
        y_shape = [batch, heads, length, v.shape[3]]
    b.attr("scale", Floats(0.01, 1.0, 33), None)
    # softcap > 0: scores = softcap * tanh(scores / softcap) (0: off).
    b.attr("softcap", Floats(0.0, 8.0, 16), None)
    if has_mask:
        # An additive float mask (a boolean one can mask whole rows: NaN), broadcast to
        # (batch, heads, length, seq) from its last two dims (length, seq).
        lead = [OneOf((batch, 1)), OneOf((heads, 1))]
        b.input(
            "attn_mask",
            dtype=q.dtype,
            rank=Ints(2, 4),
            dims=lambda r: lead[4 - r :] + [length, seq],
            values=Values(-4.0, 4.0),
            kind=WEIGHT,
        )
    b.output(y_shape, interval=v.interval)


# --- RotaryEmbedding ------------------------------------------------------------------------
@op("RotaryEmbedding", since=23)
def rotary_embedding(b: SpecBuilder, p: None) -> None:
    # X is (batch, heads, seq, head_size) or (batch, seq, heads * head_size) with num_heads.
    # The first rotary_embedding_dim (0: all) features of each head are rotated in pairs
    # (the two halves, or even/odd features when interleaved) by angles whose cos and sin
    # the caches hold: per position (max_pos, rot / 2) picked by position_ids (batch, seq),
    # or per token (batch, seq, rot / 2) without them. The rest of the head passes through.
    # Rotated values are x1 cos - x2 sin and x1 sin + x2 cos: |y| <= |x| (|cos| + |sin|),
    # so X stays within half the bound and the caches within [-1, 1].
    has_pos = b.optional("position_ids")

    def half_range(d: int) -> Values:
        m = dt.value_range(d)[1] / 2
        return Values(-m, m)

    x = b.input(
        "X",
        rank=Ints(3, 4),
        dtype=(dt.FLOAT, dt.FLOAT16),
        dims=lambda r: [None] * (r - 1) + [Multiples(2, b.max_dim)],
        values=half_range,
    )
    if x.rank == 4:
        batch, heads, seq, head = x.shape
        b.attr("num_heads", OneOf([heads]), None)
    else:
        batch, seq, hidden = x.shape
        # Each head's size must be even (its features rotate in pairs).
        heads = b.attr("num_heads", OneOf([h for h in divisors(hidden) if hidden // h % 2 == 0]))
        head = hidden // heads
    rot = b.attr("rotary_embedding_dim", OneOf(list(range(2, head + 1, 2))), 0) or head
    b.attr("interleaved", OneOf([0, 1]), 0)
    cache = Values(-1.0, 1.0)
    if has_pos:
        # ONNX Runtime refuses a cache with fewer positions than the sequence ("Updating
        # cos_cache and sin_cache in RotaryEmbedding is not currently supported").
        pos_dim = Ints(seq, max(seq, b.max_dim))
        cos = b.input("cos_cache", dims=[pos_dim, rot // 2], values=cache, kind=WEIGHT)
        max_pos = cos.shape[0]
        sin = b.input("sin_cache", dims=[max_pos, rot // 2], values=cache, kind=WEIGHT)
        ids = [
            [b.draw(f"position_ids[{i}][{j}]", Ints(0, max_pos - 1)) for j in range(seq)]
            for i in range(batch)
        ]
        b.const("position_ids", np.asarray(ids, dtype=np.int64))
    else:
        cos = b.input("cos_cache", dims=[batch, seq, rot // 2], values=cache, kind=WEIGHT)
        sin = b.input("sin_cache", dims=[batch, seq, rot // 2], values=cache, kind=WEIGHT)
    gain = cos.interval.mag + sin.interval.mag
    b.output(x.shape, interval=x.interval.symmetric(gain).union(x.interval))


# --- SwiGLU -------------------------------------------------------------------------------
@op("SwiGLU", since=28)
def swiglu(b: SpecBuilder, p: None) -> None:
    # Y = Swish_alpha(A) * B, Swish_alpha(a) = a * sigmoid(alpha * a); A and B of one shape
    # (no broadcasting). Swish_alpha(A) lies in [max(min(A, 0), -0.28 / alpha), max(A, 0)]
    # (as Swish's), so |B| <= bound / (2 max|Swish_alpha(A)|) keeps Y inside the bound.
    a = b.input("A")
    alpha = b.attr("alpha", Floats(0.25, 4.0, 15), 1.0)
    iv = _sign_kept(a.interval)
    gate = Interval(max(iv.lo, -0.28 / alpha), iv.hi)
    m = dt.value_range(a.dtype)[1] / 2 / max(gate.mag, 1.0)
    v = b.input("B", dims=list(a.shape), values=Values(-m, m))
    b.output(a.shape, interval=gate * v.interval)


# --- CausalConvWithState ------------------------------------------------------------------
@op("CausalConvWithState", since=27)
def causal_conv_with_state(b: SpecBuilder, p: None) -> None:
    # A depthwise causal 1-D convolution over (batch, channels, length): weight (channels,
    # 1, k), optional bias (channels,) and past_state (batch, channels, k - 1), the k - 1
    # positions before the input (zeros without it). Y has the input's shape; present_state
    # is the last k - 1 positions of past_state ++ input. |conv| <= k |W| |X| + |bias|:
    # the weight stays within bound / (4 k |X|). k >= 2 keeps the state non-empty.
    has_bias = b.optional("bias")
    has_past = b.optional("past_state")
    x = b.input("input", rank=3)
    batch, channels, _ = x.shape
    act = b.attr("activation", OneOf(["none", "silu", "swish"]), "none")
    xm = max(x.interval.mag, 1.0)
    k_dim = Ints(2, max(2, min(5, b.max_dim)))
    w_mag = min(1.0, dt.value_range(x.dtype)[1] / (4 * 5 * xm))
    w = b.input("weight", dims=[channels, 1, k_dim], values=Values(-w_mag, w_mag), kind=WEIGHT)
    k = w.shape[2]
    conv = Interval(-1.0, 1.0).scale(k * w.interval.mag * xm)
    if has_bias:
        bias = b.input("bias", dims=[channels], values=Values(-1.0, 1.0), kind=WEIGHT)
        conv = conv + bias.interval
    state = x.interval.union(Interval(0.0, 0.0))
    if has_past:
        past = b.input("past_state", dims=[batch, channels, k - 1], values=Values(-xm, xm))
        state = state.union(past.interval)
    if act != "none":  # silu and swish: y = x * sigmoid(x)
        iv = _sign_kept(conv)
        conv = Interval(max(iv.lo, -0.28), iv.hi)
    b.output(x.shape, interval=conv)
    b.output((batch, channels, k - 1), interval=state)


# --- LinearAttention ----------------------------------------------------------------------
_RULES = ["gated_delta", "linear", "gated", "delta"]  # the default first


@op("LinearAttention", since=27)
def linear_attention(b: SpecBuilder, p: None) -> None:
    # Per KV head a (d_k, d_v) state S runs over the T tokens of packed (B, T, H * D) inputs:
    # linear S += k v^T; gated S = exp(g) S + k v^T; delta S += beta k (v - S^T k)^T;
    # gated_delta the same over exp(g) S. Each query head h reads head h // (H_q / H_kv):
    # o = scale q^T S. Decay g <= 0 (log-space) and 0 <= beta <= 1 keep exp(g), beta <= 1, so
    # with |k| <= K, |v| <= V, |S| <= M: M' <= M (1 + d_k K^2 [delta]) + K V, and
    # |o| <= scale d_k |q| M_T. Delta rules take K = 1 / sqrt(d_k T): (1 + 1 / T)^T <= e, so
    # M_T <= e (M_0 + T K V); V and M_0 are chosen so |o| and M_T stay within bound / 4.
    has_past = b.optional("past_state")  # decay and beta: present exactly as the rule needs
    rule = b.attr("update_rule", OneOf(_RULES), "gated_delta")
    gated = rule in ("gated", "gated_delta")
    delta = rule in ("delta", "gated_delta")
    q = b.input("query", rank=3, values=Values(-1.0, 1.0))
    batch, seq, q_hidden = q.shape
    heads = b.attr("q_num_heads", OneOf(divisors(q_hidden)))
    kv_heads = b.attr("kv_num_heads", OneOf(divisors(heads)))
    d_k = q_hidden // heads
    scale = b.attr("scale", Floats(0.05, 1.0, 20), 0.0) or 1.0 / math.sqrt(d_k)
    b.attr("chunk_size", OneOf([64, 1, 2, 16]), 64)
    k_mag = 1.0 / math.sqrt(d_k * seq) if delta else 1.0
    key = b.input("key", dims=[batch, seq, kv_heads * d_k], values=Values(-k_mag, k_mag))
    bound = dt.value_range(q.dtype)[1] / 4
    v_mag = bound / (d_k * math.e * (1 + seq * k_mag))
    value = b.input(
        "value", dims=[batch, seq, Multiples(kv_heads, b.max_dim)], values=Values(-v_mag, v_mag)
    )
    d_v = value.shape[2] // kv_heads
    m = 0.0
    if has_past:
        past = b.input(
            "past_state",
            dtype=q.dtype,
            dims=[batch, kv_heads, d_k, d_v],
            values=Values(-v_mag, v_mag),
        )
        m = past.interval.mag
    if gated:
        per = OneOf(sorted({kv_heads, kv_heads * d_k}))  # per head or per key dimension
        b.input("decay", dims=[batch, seq, per], values=Values(-2.0, 0.0))
    if delta:
        b.input("beta", dims=[batch, seq, OneOf(sorted({kv_heads, 1}))], values=Values(0.0, 1.0))
    kk, vv = key.interval.mag, value.interval.mag
    for _ in range(seq):
        m = m * (1 + (d_k * kk * kk if delta else 0.0)) + kk * vv
    o = scale * d_k * q.interval.mag * m
    b.output([batch, seq, heads * d_v], interval=Interval(-o, o))
    b.output([batch, kv_heads, d_k, d_v], dtype=q.dtype, interval=Interval(-m, m))
