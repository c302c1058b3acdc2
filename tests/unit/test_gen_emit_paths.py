"""Per-node and per-model shortcuts of generation and export give what the slow calls they
replace give (byte for byte), and each comparison fails on a different input."""

from __future__ import annotations

import copy
import random

import numpy as np
import onnx
import pytest
from onnx import helper

from onnxfuzz import dtypes as dt
from onnxfuzz.generate.build import export
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.choices import ChoiceStream, OpReplay
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.graph import Node, Tensor
from onnxfuzz.generate.lang.intervals import Interval

SHAPES = [(), (1,), (3, 4), (2, 1, 5), (1, 2, 3, 4)]


def _vi_bytes(t: Tensor) -> bytes:
    vi = onnx.ValueInfoProto()
    export._fill_vi(vi, t)
    return vi.SerializeToString()


@pytest.mark.parametrize("dtype", [dt.FLOAT, dt.INT64, dt.BOOL, dt.FLOAT16])
def test_cached_tensor_types_are_make_tensor_value_info(dtype: int) -> None:
    for _ in range(2):  # the second round copies the cached types
        for shape in SHAPES:
            t = Tensor(f"t{len(shape)}", dtype, shape, Interval(0, 1), "node")
            want = helper.make_tensor_value_info(t.name, dtype, shape).SerializeToString()
            assert _vi_bytes(t) == want
    t = Tensor("t", dtype, (3, 4), Interval(0, 1), "node")
    assert _vi_bytes(t) != helper.make_tensor_value_info("t", dtype, (4, 3)).SerializeToString()


def test_tensor_type_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "MAX_TENSOR_TYPES", 3)
    monkeypatch.setattr(export, "_TENSOR_TYPES", {})
    for k in range(1, 10):
        t = Tensor("x", dt.FLOAT, (k,), Interval(0, 1), "node")
        want = helper.make_tensor_value_info("x", dt.FLOAT, (k,)).SerializeToString()
        assert _vi_bytes(t) == want
        assert len(export._TENSOR_TYPES) <= 3


def _draws(s: ChoiceStream) -> list[int]:
    """A fixed mix of the stream's draws (the shapes a builder makes)."""
    out = []
    for k in range(60):
        if k % 3 == 0:
            out.append(s.integer(2, 2 + k % 7))
        elif k % 3 == 1:
            out.append(s.index(k % 5))
        else:
            out.append(int(s.chance(0.3)))
    return out


def _expected(seed: int) -> list[int]:
    """What the draws of ``_draws`` are by the stream's definition: ``random.Random(seed)``,
    a choice in [0, n] being int(random() * (n + 1)), one drawn only where n > 0."""
    r = random.Random(seed)
    out = []
    for k in range(60):
        if k % 3 == 0:
            n = k % 7
            out.append(2 + (int(r.random() * (n + 1)) if n > 0 else 0))
        elif k % 3 == 1:
            n = k % 5
            out.append(int(r.random() * n) if n > 1 else 0)
        else:
            out.append(0 if r.random() < 0.3 else 1)
    return out


def test_draws_are_the_streams_definition() -> None:
    for seed in (0, 1, 12345):
        s = ChoiceStream(seed)
        got = _draws(s)
        want = _expected(seed)
        # chance() returns True for a recorded 0
        assert got == [w if k % 3 != 2 else 1 - w for k, w in enumerate(want)]
        assert got != _draws(ChoiceStream(seed + 1))
        # replaying the record gives the same draws, through the prefix path
        assert _draws(ChoiceStream(99, prefix=s.record)) == got
    zero = ChoiceStream(5, prefix=[1], zero_tail=True)
    assert zero.integer(0, 9) == 1 and zero.integer(0, 9) == 0 and zero.index(4) == 0


def test_op_replay_still_replays_integer_and_index() -> None:
    s = OpReplay(3, head=[4, 2], ops=[], op_label="op")
    assert s.integer(10, 20) == 14
    assert s.index(5) == 2
    assert s.record == [4, 2]
    fresh = OpReplay(3, head=[], ops=[], op_label="op")
    assert fresh.integer(10, 20) == 10 + int(random.Random(3).random() * 11)


ATTRS = {
    "i": 3,
    "neg": -(2**40),
    "f": 0.1,
    "s": "reflect",
    "ints": [1, -2, 3],
    "floats": [0.5, -1.25],
    "flag": True,
    "np_int": np.int64(7),
    "np_float": np.float32(0.25),
    "tuple": (4, 5),
    "mixed": [1, np.int64(2)],
}


def test_node_attributes_are_make_node_bytes() -> None:
    node = Node(
        "Pad", "pad0", ["x", "", "p"], [Tensor("y", dt.FLOAT, (2,), Interval(0, 1), "node")], ATTRS
    )
    want = helper.make_node(
        "Pad",
        ["x", "", "p"],
        ["y"],
        name="pad0",
        **{k: export._attr_value(v) for k, v in ATTRS.items()},
    )
    assert export._node(node).SerializeToString() == want.SerializeToString()
    other = dict(ATTRS, ints=[1, -2, 4])
    node.attrs = other
    assert export._node(node).SerializeToString() != want.SerializeToString()


def test_top_nest_is_kept_per_generator_and_redone_for_a_copy() -> None:
    gen = Generator(Config(min_nodes=3, max_nodes=3))
    nest = gen._nest0
    assert gen._nest0 is nest  # one per generator, not one per op
    ext = copy.copy(gen)  # as guide.Guided extends a generator
    assert ext._nest0 is not nest and ext._nest0.fill == ext._fill_body
    assert nest.fill != ext._fill_body
    a, b = gen.generate(4), ext.generate(4)
    assert a.model.SerializeToString() == b.model.SerializeToString()
