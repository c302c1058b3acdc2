"""Recurrent layers: RNN, GRU, LSTM with their default activations.

Shapes (layout 0: ONNX Runtime rejects layout 1, the batch-first one):
X (seq, batch, input); W (dirs, G * hidden, input); R (dirs, G * hidden, hidden);
B (dirs, 2 * G * hidden); sequence_lens (batch); initial_h / initial_c (dirs, batch, hidden);
P (dirs, 3 * hidden); Y (seq, dirs, batch, hidden); Y_h / Y_c (dirs, batch, hidden), with
G = 1 (RNN), 3 (GRU), 4 (LSTM) gates and dirs = 2 for bidirectional, else 1.

sequence_lens, when present, is seq for every batch entry (a constant): shorter sequences
zero-pad Y, which keeps shapes static but is a separate feature left out here.

Value bounds, default activations (sigmoid gates, tanh): an RNN's state is a tanh, |h| <= 1;
a GRU's is a convex mix of a tanh and the previous state, |h| <= max(1, |initial_h|); an
LSTM's h = o * tanh(c) has |h| <= 1 and its cell grows by at most 1 per step,
|c| <= |initial_c| + seq. ``clip`` only bounds the activations' inputs.

The recurrent weights R are kept small (|R| <= 1 / hidden, so the state map is a
contraction): an expansive recurrence amplifies rounding differences over the sequence into
false alarms. W is kept to |W| <= 1 / input for the same reason.
"""

from __future__ import annotations

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.lang.domains import Floats, Ints, OneOf
from onnxfuzz.generate.lang.intervals import Interval, Values, hull
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, WEIGHT, SpecBuilder

_NO_Y = (
    "the node leaves out output Y and keeps Y_h (or Y_c): onnxfuzz always produces the "
    "outputs in schema order from Y"
)
_BATCHWISE = "layout 1: ONNX Runtime's CPU kernels reject batchwise recurrent operations"
NOT_GENERATED = {
    "test_simple_rnn_defaults": _NO_Y,
    "test_simple_rnn_with_initial_bias": _NO_Y,
    "test_rnn_seq_length": _NO_Y,
    "test_simple_rnn_reverse": _NO_Y,
    "test_simple_rnn_bidirectional": _NO_Y,
    "test_gru_defaults": _NO_Y,
    "test_gru_with_initial_bias": _NO_Y,
    "test_gru_seq_length": _NO_Y,
    "test_lstm_defaults": _NO_Y,
    "test_lstm_with_initial_bias": _NO_Y,
    "test_lstm_with_peepholes": _NO_Y,
    "test_lstm_reverse": _NO_Y,
    "test_lstm_bidirectional": _NO_Y,
    "test_simple_rnn_batchwise": _BATCHWISE,
    "test_gru_batchwise": _BATCHWISE,
    "test_lstm_batchwise": _BATCHWISE,
}

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DIRECTIONS = ("forward", "reverse", "bidirectional")
STATE = 1e3  # |initial_h|, |initial_c|: room for the LSTM cell's growth inside the bound


@op("RNN", "GRU", "LSTM")
def recurrent(b: SpecBuilder, p: None) -> None:
    g = GATES[b.op]
    has_b = b.optional("B")
    has_lens = b.optional("sequence_lens")
    has_h0 = b.optional("initial_h")
    has_c0 = b.op == "LSTM" and b.optional("initial_c")
    has_p = b.op == "LSTM" and b.optional("P")
    # ONNX Runtime registers GRU and LSTM for double but fails at run time ("does not
    # support double yet"): float32 only for those.
    x = b.input("X", rank=3, dtype=dt.FLOAT if b.op != "RNN" else None)
    # ONNX Runtime rejects layout 1 ("Batchwise recurrent operations are not supported").
    if b.version >= 14:
        b.attr("layout", OneOf([0]), 0)
    seq, batch, size = x.shape
    direction = b.attr("direction", OneOf(DIRECTIONS), "forward")
    dirs = 2 if direction == "bidirectional" else 1
    hidden = b.attr("hidden_size", Ints(1, b.max_dim), MISSING)
    b.attr("clip", Floats(0.5, 8.0, 15), None)
    if b.op == "GRU":
        b.attr("linear_before_reset", OneOf([0, 1]), 0)
    if b.op == "LSTM":
        b.attr("input_forget", OneOf([0, 1]), 0)
    w_max, r_max = 1.0 / size, 1.0 / hidden
    b.input("W", dims=[dirs, g * hidden, size], values=Values(-w_max, w_max), kind=WEIGHT)
    b.input("R", dims=[dirs, g * hidden, hidden], values=Values(-r_max, r_max), kind=WEIGHT)
    if has_b:
        b.input("B", dims=[dirs, 2 * g * hidden], values=Values(-2.0, 2.0), kind=WEIGHT)
    if has_lens:
        b.const("sequence_lens", [seq] * batch)
    state = [dirs, batch, hidden]
    h = Interval(-1.0, 1.0)
    if has_h0:
        h0 = b.input("initial_h", dims=state, values=Values(-STATE, STATE))
        if b.op == "GRU":
            h = hull([h, h0.interval])
    c = Interval(-float(seq), float(seq))
    if has_c0:
        c0 = b.input("initial_c", dims=state, values=Values(-STATE, STATE))
        # The forget gate scales the state toward 0: a positive initial_c can end near 0
        # or below it, so the bound spans 0 whatever initial_c's sign.
        c = c + hull([c0.interval, Interval(0.0, 0.0)])
    if has_p:
        b.input("P", dims=[dirs, 3 * hidden], values=Values(-1.0, 1.0), kind=WEIGHT)
    b.output([seq, dirs, batch, hidden], interval=h)
    b.output(state, interval=h)
    if b.op == "LSTM":
        b.output(state, interval=c)
