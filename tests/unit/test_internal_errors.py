"""onnxfuzz's own bugs: a generator crash found by an audit (TopK's distinct values over a
whole uint64 range overflowed a C long), and the exit code of any such error: 70 with the
traceback and a line asking for a report, not 1, which a script reads as findings."""

from __future__ import annotations

import numpy as np
import pytest

from onnxfuzz import dtypes as dt
from onnxfuzz.cli import exits
from onnxfuzz.cli.main import main
from onnxfuzz.generate.lang.intervals import Interval
from onnxfuzz.generate.lang.values import _distinct


@pytest.mark.parametrize("n", [1, 2, 5])
@pytest.mark.parametrize("dtype", [dt.UINT64, dt.INT64, dt.INT8])
def test_distinct_values_over_a_whole_integer_range_are_distinct_and_in_it(dtype, n) -> None:
    info = np.iinfo(dt.np_dtype(dtype))
    shape = (3, n)
    got = np.asarray(
        _distinct(np.random.default_rng(0), dtype, shape, Interval(info.min, info.max), 1)
    ).astype(dt.np_dtype(dtype))
    assert all(len(set(row.tolist())) == shape[1] for row in got)
    assert got.min() >= info.min and got.max() <= info.max


def test_the_audit_s_topk_draw_is_generated(tmp_path) -> None:
    argv = ["generate", "--ops", "TopK", "--seed", "3780", "--count", "1", "--no-reference"]
    assert main([*argv, "--out", str(tmp_path / "c")]) == exits.CLEAN


def test_an_internal_error_exits_70_and_asks_for_a_report(tmp_path, monkeypatch, capsys) -> None:
    import onnxfuzz.generate.lang.values as values

    def broken(*args, **kw):
        raise OverflowError("Python int too large to convert to C long")

    monkeypatch.setattr(values, "_distinct", broken)
    argv = ["generate", "--ops", "TopK", "--seed", "3780", "--count", "1", "--no-reference"]
    assert main([*argv, "--out", str(tmp_path / "c")]) == exits.INTERNAL == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and err.rstrip().endswith("the traceback above and the command")
    assert "internal error (OverflowError)" in err
