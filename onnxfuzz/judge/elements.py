"""The oracle's element test, apart: the oracle and the float16 rounding checks
(``judge.precision``, which the oracle imports) both hold elements to it."""

from __future__ import annotations

import numpy as np


def outside(want: np.ndarray, got: np.ndarray, tol: tuple[float, float] | None) -> np.ndarray:
    """Where ``got`` is outside ``tol`` (atol, rtol) of ``want``, element by element, as the
    oracle judges one output (None: exact types, any difference). Same shapes."""
    if tol is None:
        return np.asarray(want != got)
    atol, rtol = tol
    w = want.astype(np.float64)
    g = got.astype(np.float64)
    both_nan = np.isnan(w) & np.isnan(g)
    same_inf = np.isinf(w) & (w == g)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, judged below
        err = np.abs(g - w)
        # an infinite reference is met by that infinity alone (rtol * inf let any value pass)
        ok = np.where(np.isinf(w), same_inf, err <= atol + rtol * np.abs(w)) | both_nan
    return ~ok
