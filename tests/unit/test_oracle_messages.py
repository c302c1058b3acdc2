"""The oracle's mismatch message: readable, and no numpy warning on the user's terminal."""

from __future__ import annotations

import warnings

import numpy as np

from onnxfuzz.judge.oracle import Verdict, _values


def test_every_wrong_element_a_nan_gives_a_message_and_no_warning() -> None:
    want = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    got = np.array([np.nan, np.nan, 3.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # np.nanmax's "All-NaN slice" warned here
        j = _values("y", want, got, (1e-3, 1e-2))
    assert j is not None and j.verdict == Verdict.MISMATCH
    assert "2/3 elements" in j.message and "max abs err nan" in j.message


def test_the_largest_finite_error_is_reported_beside_nans() -> None:
    want = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    got = np.array([np.nan, 2.5, 3.0], dtype=np.float32)
    j = _values("y", want, got, (1e-3, 1e-2))
    assert j is not None and "max abs err 0.5," in j.message
