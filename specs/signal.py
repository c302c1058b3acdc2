"""Signal processing: DFT, STFT, the window generators and MelWeightMatrix.

A complex tensor is a real one with a trailing dim of 2 (real, imaginary); a real signal
has a trailing dim of 1. The lengths (dft_length, frame_step, frame_length, window sizes,
the mel matrix's parameters) are constant inputs the spec draws, so output shapes are exact.

Value bounds: one DFT output is a sum of at most ``terms`` products of an input element
and a unit complex number, so each component is <= terms * |x| * sqrt(2) (sqrt(2): the
real and imaginary parts of a complex input both contribute); an inverse DFT divides by
the transform length. Signal lengths never exceed the largest dim a tensor may have (fresh:
max_dim, reused: max_reuse_dim), so the signals' value domain keeps that sum in the bound.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from onnxfuzz import dtypes as dt
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.domains import Ints, OneOf
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.spec import op
from onnxfuzz.generate.lang.spec_api import MISSING, SpecBuilder

_ONESIDED_DEFAULT = (
    "onesided left at its default: ONNX's shape inference (1.23) reads it as 0, the "
    "operator doc and ONNX Runtime as 1; generated STFT nodes write onesided out"
)
NOT_GENERATED = {
    "test_stft": _ONESIDED_DEFAULT,
    "test_stft_with_window": _ONESIDED_DEFAULT,
}

SQRT2 = math.sqrt(2.0)


def _signal_values(b: SpecBuilder) -> Any:
    """|x| <= bound / (sqrt 2 * longest axis): a DFT over any axis stays in the bound."""
    cap = b.cfg.max_reuse_dim

    def at(dtype: int) -> Values:
        m = dt.value_range(dtype)[1] / (SQRT2 * cap)
        return Values(-m, m)

    return at


# --- DFT ----------------------------------------------------------------------------------
@op("DFT", since=17)
def dft(b: SpecBuilder, p: None) -> None:
    has_length = b.optional("dft_length")
    x = b.input(
        "input",
        rank=Ints(2, 8),
        dims=lambda r: [None] * (r - 1) + [OneOf([1, 2])],
        values=_signal_values(b),
    )
    r = x.rank
    complex_in = x.shape[-1] == 2
    # Any axis but the last (the complex one): [-r, -2] or [0, r - 2].
    axes = list(range(r - 1)) + list(range(-r, -1))
    if b.version >= 20:
        # axis became an optional input (default -2) at DFT-20.
        axis = -2
        if b.optional("axis"):
            axis = b.draw("axis", OneOf(axes))
    else:
        axis = b.attr("axis", OneOf(axes), 1 if r >= 3 else MISSING)
    ax = axis % r
    n = x.shape[ax]
    inverse = b.attr("inverse", OneOf([0, 1]), 0)
    # onesided: forward, real input -> half spectrum (RFFT); inverse, complex input -> real
    # signal from a half spectrum (IRFFT), whose default length 2 * (n - 1) needs n >= 2.
    rfft = not inverse and not complex_in
    irfft = inverse and complex_in and (has_length or n >= 2)
    onesided = b.attr("onesided", OneOf([0, 1] if rfft or irfft else [0]), 0)
    if onesided and inverse:
        # IRFFT reads bins 0 .. L // 2 from the n given: L // 2 + 1 = n, as numpy's irfft.
        length = 2 * (n - 1)
        if has_length:
            length = b.draw("dft_length", Ints(max(1, 2 * n - 2), 2 * n - 1))
    else:
        length = n
        if has_length:
            length = b.draw("dft_length", Ints(1, max(n, b.max_dim)))
    if has_length:
        b.const("dft_length", length)
    if b.version >= 20 and axis != -2:
        b.const("axis", axis)
    shape = list(x.shape)
    if onesided and inverse:
        shape[ax], shape[-1] = length, 1
    elif onesided:
        shape[ax], shape[-1] = length // 2 + 1, 2
    else:
        shape[ax], shape[-1] = length, 2
    # Forward: a sum over min(n, L) input elements; inverse: the same divided by L (IRFFT:
    # L full-spectrum bins, each one of the n given or its conjugate, divided by L).
    c = SQRT2 if complex_in else 1.0
    gain = c if onesided and inverse else min(n, length) * c / (length if inverse else 1)
    b.output(shape, interval=x.interval.symmetric(gain))


# --- STFT ---------------------------------------------------------------------------------
@op("STFT", since=17)
def stft(b: SpecBuilder, p: None) -> None:
    has_window = b.optional("window")
    # Without a window the frame length is given (ONNX Runtime 1.31 requires one of them).
    has_frame_length = b.optional("frame_length") if has_window else True
    x = b.input("signal", dims=[None, None, OneOf([1, 2])], values=_signal_values(b))
    batch, s = x.shape[0], x.shape[1]
    complex_in = x.shape[2] == 2
    # onesided keeps half the spectrum of a real signal only. It is always written out: ONNX's
    # shape inference (1.23) reads a missing onesided as 0, the doc and ONNX Runtime as 1.
    onesided = b.attr("onesided", OneOf([0] if complex_in else [1, 0]))
    step = b.draw("frame_step", Ints(1, s))
    b.const("frame_step", step)
    c = SQRT2 if complex_in else 1.0
    if has_window:
        # |window| keeps a frame's sum of frame_length products inside the bound.
        wmax = dt.value_range(x.dtype)[1] / (s * c * max(x.interval.mag, 1.0))
        # onnx 1.23's STFT inference reads the window's rank even where no shape is known
        # ("window input must have rank = 1" after a Loop), and ONNX Runtime refuses the
        # model where value_info does not state it.
        w = b.input("window", dims=[Ints(1, s)], values=Values(-wmax, wmax), inferable_shape=True)
        frame = w.shape[0]
        wmag = w.interval.mag
        if has_frame_length:
            b.const("frame_length", b.draw("frame_length", OneOf([frame])))
    else:
        frame = b.draw("frame_length", Ints(1, s))
        b.const("frame_length", frame)
        wmag = 1.0
    frames = (s - frame) // step + 1
    bins = frame // 2 + 1 if onesided else frame
    b.output([batch, frames, bins, 2], interval=x.interval.symmetric(frame * c * wmag))


# --- window functions -----------------------------------------------------------------------
WINDOW_MAX = 64  # longest window


@op("HannWindow", "HammingWindow", "BlackmanWindow", since=17)
def window(b: SpecBuilder, p: None) -> None:
    # Generalized cosine windows a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size
    # (periodic) or size - 1 (symmetric), with values in [0, 1]. The output type is an
    # attribute: any T2 type.
    out_types = b.types("T2")
    if not out_types:
        raise ConfigError(f"{b.op}: no output element type under --dtypes")
    out = b.attr(
        "output_datatype", OneOf(out_types), dt.FLOAT if dt.FLOAT in out_types else MISSING
    )
    periodic = b.attr("periodic", OneOf([1, 0]), 1)
    # Symmetric windows divide by size - 1. An integer output truncates the values in [0, 1]:
    # only the window's peak (cos = -1, at n = N / 2) is exactly 1, and computed in float it
    # may land a hair below (ONNX Runtime even uses pi = 3.14159265): so integer outputs
    # take only sizes where n = N / 2 is not a sample (periodic: odd size; symmetric: even).
    lo = 1 if periodic else 2
    if out in dt.INTS:
        sizes = OneOf([k for k in range(lo, WINDOW_MAX + 1) if k % 2 == periodic])
    else:
        sizes = Ints(lo, WINDOW_MAX)
    size = b.draw("size", sizes)
    b.const("size", size)
    if out in dt.INTS:
        iv = Interval(0.0, 1.0)
    else:
        # Blackman's ends are 0.42 - 0.5 + 0.08 = 0, which float rounds to about -1e-17.
        iv = Interval(-1e-6 if b.op == "BlackmanWindow" else 0.0, 1.0)
    b.output([size], dtype=out, interval=iv)


# --- MelWeightMatrix ------------------------------------------------------------------------
SAMPLE_RATES = (8000, 8192, 16000, 16384, 22050, 44100, 48000)
MEL_BINS = 8
MEL_DFT = 64
TIE = 1e-3  # keep the filters' bin edges this far from whole numbers


def _mel(hz: float) -> float:
    return 2595.0 * math.log10(1.0 + hz / 700.0)


def _hz(mel: float) -> float:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


LOWER_EDGES = (125.0, 300.0)


def _off_edge(e: float) -> bool:
    return abs(e - round(e)) > TIE * max(1.0, e)


def _edges(bins: int, dft_length: int, rate: int, lo: float, hi: float) -> list[float]:
    """The filters' edges in DFT-bin units before flooring, as ONNX defines them:
    num_mel_bins + 2 points spaced by (mel(hi) - mel(lo)) / (num_mel_bins + 2)."""
    m_lo, m_hi = _mel(lo), _mel(hi)
    step = (m_hi - m_lo) / (bins + 2)
    return [(dft_length + 1) * _hz(m_lo + i * step) / rate for i in range(bins + 2)]


def _clean(bins: int, dft_length: int, rate: int, lo: float, hi: float) -> bool:
    """Every edge but an exact 0 lies TIE away from a whole number (floor is where
    float32 and float64 kernels part ways) and inside the spectrum's dft_length // 2 + 1
    bins."""
    edges = _edges(bins, dft_length, rate, lo, hi)
    # ONNX Runtime also requires floor((dft_length + 1) * upper_edge / rate), computed from
    # the upper edge itself (not through the mel scale), to be a bin: Nyquist with an odd
    # dft_length is one past the last.
    top = math.floor((dft_length + 1) * hi / rate)
    return top < dft_length // 2 + 1 and all(
        (e == 0.0 or _off_edge(e)) and e < dft_length // 2 + 1 - TIE for e in edges
    )


@functools.cache
def _upper_edges(bins: int, dft_length: int, rate: int, lo: float) -> list[float]:
    """``_clean`` over the whole grid of upper edges at once (numpy: this runs per node)."""
    grid = np.array([rate * k / 256 for k in range(1, 129)])
    grid = grid[grid > lo]
    m_lo = _mel(lo)
    m_hi = 2595.0 * np.log10(1.0 + grid / 700.0)
    steps = (m_hi - m_lo) / (bins + 2)
    mels = m_lo + np.arange(bins + 2)[None, :] * steps[:, None]
    edges = (dft_length + 1) * 700.0 * (10.0 ** (mels / 2595.0) - 1.0) / rate
    n_bins = dft_length // 2 + 1
    off = np.abs(edges - np.round(edges)) > TIE * np.maximum(1.0, edges)
    ok = ((edges == 0.0) | off) & (edges < n_bins - TIE)
    top_ok = np.floor((dft_length + 1) * grid / rate) < n_bins
    return [float(h) for h, good in zip(grid, ok.all(axis=1) & top_ok, strict=True) if good]


class UpperEdge:
    """upper_edge_hertz values above ``lo`` and below Nyquist on a grid of rate / 256 whose
    filter edges are all clean (``_clean``)."""

    def __init__(self, bins: int, dft_length: int, rate: int, lo: float) -> None:
        self.args = (bins, dft_length, rate, lo)
        self.options = _upper_edges(bins, dft_length, rate, lo)

    def __repr__(self) -> str:
        return f"UpperEdge{self.args}"

    def empty(self) -> bool:
        return not self.options

    def draw(self, s: ChoiceStream) -> float:
        return self.options[s.index(len(self.options))]

    def contains(self, value: Any) -> bool:
        bins, dft_length, rate, lo = self.args
        return (
            isinstance(value, float | int)
            and lo < value <= rate / 2
            and _clean(bins, dft_length, rate, lo, float(value))
        )


@op("MelWeightMatrix", since=17)
def mel_weight_matrix(b: SpecBuilder, p: None) -> None:
    # Triangular filters over the linear spectrum's dft_length // 2 + 1 bins, peaks 1:
    # values in [0, 1]. The constants come first, all drawn; the output type is T3.
    bins = b.draw("num_mel_bins", Ints(1, MEL_BINS))
    dft_length = b.draw("dft_length", Ints(8, MEL_DFT))
    rate = b.draw("sample_rate", OneOf(SAMPLE_RATES))
    # lower_edge_hertz: 0 (an exact 0 bin) or a few hundred hertz off a bin edge.
    lo = b.draw(
        "lower_edge_hertz",
        OneOf([0.0] + [h for h in LOWER_EDGES if _off_edge((dft_length + 1) * h / rate)]),
    )
    hi = b.draw("upper_edge_hertz", UpperEdge(bins, dft_length, rate, lo))
    b.const("num_mel_bins", bins)
    b.const("dft_length", dft_length)
    b.const("sample_rate", rate)
    t2 = b.types("T2")
    if not t2:
        raise ConfigError("MelWeightMatrix: no element type for the edges under --dtypes")
    f = dt.FLOAT if dt.FLOAT in t2 else t2[0]
    b.const("lower_edge_hertz", np.asarray(lo, dtype=dt.np_dtype(f)), dtype=f)
    b.const("upper_edge_hertz", np.asarray(hi, dtype=dt.np_dtype(f)), dtype=f)
    # ONNX Runtime computes the filter bank's bin indices in the output type: an integer
    # output_datatype overflows (int8: "highest_index ... out of range") for longer dft.
    out_types = tuple(t for t in b.types("T3") if t in dt.FLOATS)
    if not out_types:
        raise ConfigError("MelWeightMatrix: no float output element type under --dtypes")
    out = b.attr(
        "output_datatype", OneOf(out_types), dt.FLOAT if dt.FLOAT in out_types else MISSING
    )
    b.output([dft_length // 2 + 1, bins], dtype=out, interval=Interval(0.0, 1.0))
