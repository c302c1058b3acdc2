"""The generation hot path's shortcuts give what the slow calls they replace give."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.build.export import _fill_initializers
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.glue import _count_value_steps, _value_steps
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.graph import Tensor
from onnxfuzz.generate.lang.intervals import Interval, Values
from onnxfuzz.generate.lang.values import interval_of


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    out = []
    for code in sorted(dt.NAMES):
        npd = dt.np_dtype(code)
        for shape in [(), (3,), (2, 0), (2, 3, 4)]:
            out.append(np.asarray(rng.integers(-3, 4, size=shape)).astype(npd))
    out.append(np.asarray(["a", "bc"], dtype=object))  # strings: from_array's own path
    return out


def test_initializers_are_from_array_bytes() -> None:
    arrays = _arrays()
    inits = [(Tensor(f"c{k}", 1, a.shape, Interval(0, 0), "init"), a) for k, a in enumerate(arrays)]
    fast = onnx.GraphProto()
    _fill_initializers(fast.initializer, inits)
    slow = onnx.GraphProto()
    slow.initializer.extend([numpy_helper.from_array(a, t.name) for t, a in inits])
    assert fast.SerializeToString() == slow.SerializeToString()
    # and the comparison can fail: another array gives other bytes
    other = onnx.GraphProto()
    _fill_initializers(other.initializer, [(inits[0][0], inits[0][1] + 1)] + inits[1:])
    assert other.SerializeToString() != slow.SerializeToString()


def test_interval_of_is_min_and_max() -> None:
    for a in _arrays()[:-1]:
        iv = interval_of(a)
        want = Interval(float(a.min()), float(a.max())) if a.size else Interval(0, 0)
        assert (iv.lo, iv.hi, iv.min_abs) == (want.lo, want.hi, want.min_abs), a
    assert interval_of(np.asarray([2**62 + 1, -5], dtype=np.int64)).hi == float(2**62 + 1)
    assert interval_of(np.asarray([3, 7], dtype=np.int32)) != Interval(3, 8)


def test_value_steps_memo_answers_as_the_computation() -> None:
    gen = Generator(Config(min_nodes=5, max_nodes=5))
    glue = gen.glue
    assert glue is not None
    cases = [
        (Interval(-10, 10), dt.FLOAT, dt.FLOAT, Values(-1, 1)),
        (Interval(-10, 10), dt.FLOAT, dt.FLOAT16, Values(min_abs=0.5)),
        (Interval(0, 300), dt.INT32, dt.UINT8, Values()),
        (Interval(-1e6, 1e6), dt.DOUBLE, dt.FLOAT16, Values()),
        (Interval(-3, 3), dt.INT64, dt.INT64, Values(lo=1)),
    ]
    for _ in range(2):  # the second round reads the memo
        for iv, src, dst, v in cases:
            assert _value_steps(glue, iv, src, dst, v) == _count_value_steps(glue, iv, src, dst, v)
    assert _value_steps(glue, Interval(-10, 10), dt.FLOAT, dt.FLOAT, Values(-1, 1)) == 1
    assert _value_steps(glue, Interval(-1, 1), dt.FLOAT, dt.FLOAT, Values(-1, 1)) == 0
