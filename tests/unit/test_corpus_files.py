"""The corpus writer's shortcuts write what the plain routes write: tensors as
numpy_helper.from_array serializes them, index.json as json.dumps(indent=1) writes it, the
float16 check without an inference pass where the model declares every type."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxfuzz import __version__
from onnxfuzz import dtypes as dt
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus import write
from onnxfuzz.generate.corpus.testdata import tensor_bytes
from onnxfuzz.generate.corpus.write import _types_settled, computes_in_float16, index_text
from onnxfuzz.generate.lang.config import Config


def _arrays() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    out = []
    for code, name in sorted(dt.NAMES.items()):
        np_type = dt.np_dtype(code)
        base = (rng.standard_normal((2, 3)) * 50).astype(np_type)
        out += [
            (f"{name} 2x3", base),
            (f"{name} scalar", base[0, 0].reshape(())),
            (f"{name} empty", np.zeros((0, 3), np_type)),
            (f"{name} transposed", base.T),  # not C-contiguous: bytes in C order
        ]
    return out + [
        ("big-endian float32", np.arange(6, dtype=">f4").reshape(2, 3)),
        ("big-endian int64", np.arange(4, dtype=">i8")),
        ("strings", np.array(["a", "bc"], dtype=object)),
        ("int4 (packed)", np.array([1, -2, 3], dtype=ml_dtypes.int4)),
        ("float8e4m3fn", np.array([0.5, -2.0], dtype=ml_dtypes.float8_e4m3fn)),
    ]


@pytest.mark.parametrize(("what", "array"), _arrays(), ids=[w for w, _ in _arrays()])
@pytest.mark.parametrize("name", ["x", ""])
def test_tensor_bytes_are_from_arrays_bytes(what: str, array: np.ndarray, name: str) -> None:
    def outcome(make) -> bytes | str:  # the bytes, or the error (from_array rejects some)
        try:
            return make()
        except Exception as e:  # noqa: BLE001
            return f"{type(e).__name__}: {e}"

    want = outcome(lambda: numpy_helper.from_array(array, name).SerializeToString())
    assert outcome(lambda: tensor_bytes(array, name)) == want


def test_tensor_bytes_differ_where_the_tensors_do() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert tensor_bytes(a, "x") != tensor_bytes(a, "y")
    assert tensor_bytes(a, "x") != tensor_bytes(a.reshape(3, 2), "x")
    assert tensor_bytes(a, "x") != tensor_bytes(a.astype(np.float64), "x")


def _plain_index(options: dict, cases: dict) -> str:
    doc = {"onnxfuzz": __version__, "options": options, "cases": dict(sorted(cases.items()))}
    return json.dumps(doc, indent=1)


def test_index_text_is_json_dumps_text() -> None:
    options = {"seed": 3, "ops": None, "dtypes": ["float", "int64"], "picking_rate": 0.97}
    cases = {
        "test_000002": {"seed": 5, "ops": ["Add", "Relu"], "dtypes": [], "finite": True},
        "test_000000": {"seed": 3, "ops": [], "reference_error": 'é\nline "two"\ttab'},
        "test_000001": {"seed": 4, "nested": {"a": [1, 2.5, None], "b": {}}, "x": -1e-300},
    }
    encoded: dict = {}
    assert index_text(options, {}, encoded) == _plain_index(options, {})
    assert index_text(options, cases, encoded) == _plain_index(options, cases)
    assert index_text(options, cases, encoded) == _plain_index(options, cases)  # from cache
    # an entry replaced (a case written again) is encoded again, not taken from the cache
    cases["test_000002"] = {"seed": 5, "ops": ["Mul"], "finite": False}
    assert index_text(options, cases, encoded) == _plain_index(options, cases)
    assert '"Mul"' in index_text(options, cases, encoded)


def _model(nodes: list[onnx.NodeProto], inputs, outputs, value_info=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def test_float16_intermediates_are_found_with_and_without_declarations() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = [
        helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT),
    ]
    h = helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2])
    declared = _model(nodes, [x], [y], [h])
    assert _types_settled(declared.graph) and computes_in_float16(declared)
    undeclared = _model(nodes, [x], [y])
    assert not _types_settled(undeclared.graph) and computes_in_float16(undeclared)
    # the false direction: float32 all through, declared or only inferred
    plain = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["r"], ["y"])]
    r = helper.make_tensor_value_info("r", TensorProto.FLOAT, [2])
    assert not computes_in_float16(_model(plain, [x], [y], [r]))
    assert not computes_in_float16(_model(plain, [x], [y]))


def test_float16_check_agrees_with_an_inference_pass_on_generated_models(monkeypatch) -> None:
    half = frozenset({TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.INT64})
    gen = Generator(Config(min_nodes=3, max_nodes=12, dtypes=half, max_depth=2))
    models = [gen.generate(seed).model for seed in range(40)]
    fast = [computes_in_float16(m) for m in models]
    settled = sum(_types_settled(m.graph) for m in models)
    # the same check, made to run shape inference on every model (as it did before)
    monkeypatch.setattr(write, "_types_settled", lambda g: False)
    assert fast == [computes_in_float16(m) for m in models]
    assert any(fast) and not all(fast)  # both verdicts occur
    assert settled >= 30  # the shortcut is taken for most generated models
