"""ONNX's backend-test layout, written and read in one place.

    FOLDER/model.onnx
    FOLDER/test_data_set_0/input_<k>.pb     graph input k (a TensorProto with its name)
    FOLDER/test_data_set_0/output_<k>.pb    graph output k, where there is one

Corpora, bug bundles, reduced models and ``onnxfuzz reduce`` use it; ONNX's and ONNX
Runtime's test runners read it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

DATA_SET = "test_data_set_0"

# Element types numpy_helper.from_array packs (several values per byte) or spells out
# element by element: those tensors are still made by it.
_PACKED = {
    onnx.TensorProto.INT4,
    onnx.TensorProto.UINT4,
    onnx.TensorProto.FLOAT4E2M1,
    onnx.TensorProto.INT2,
    onnx.TensorProto.UINT2,
    onnx.TensorProto.FLOAT6E2M3,
    onnx.TensorProto.FLOAT6E3M2,
    onnx.TensorProto.STRING,
}


@functools.cache
def _raw_data_type(dtype: np.dtype) -> int | None:
    """The TensorProto element type of ``dtype`` where numpy_helper.from_array stores an
    array of it as its little-endian bytes unchanged (raw_data), else None."""
    if dtype.kind in "OSU" or dtype.byteorder == ">":
        return None
    try:
        code = int(helper.np_dtype_to_tensor_dtype(dtype))
    except ValueError:
        return None  # from_array raises its own error
    return None if code in _PACKED else code


def tensor_bytes(value: np.ndarray, name: str) -> bytes:
    """``numpy_helper.from_array(value, name).SerializeToString()``, byte for byte, without
    its per-call dtype dispatch for the plain element types (a corpus writes several
    tensors a case)."""
    array = np.asarray(value)
    data_type = _raw_data_type(array.dtype)
    if data_type is None:
        return numpy_helper.from_array(array, name).SerializeToString()
    tensor = onnx.TensorProto()
    tensor.dims.extend(array.shape)
    if name:
        tensor.name = name
    tensor.raw_data = array.tobytes()
    tensor.data_type = data_type
    return tensor.SerializeToString()


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def write_test(
    folder: Path,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    names: Sequence[str] | None = None,
) -> Path:
    """``model.onnx`` and the inputs (in graph-input order, or ``names``' order) into
    ``folder``, which is created; returns the data-set folder."""
    data = folder / DATA_SET
    try:  # what data.mkdir(parents=True) does, less its first, failing call where
        os.mkdir(data)  # the caller has just made ``folder`` (the corpus does)
    except FileNotFoundError:
        data.mkdir(parents=True)
    _write_file(os.path.join(folder, "model.onnx"), model.SerializeToString())
    order = names if names is not None else [i.name for i in model.graph.input]
    data_dir = os.fspath(data)
    for k, name in enumerate(order):
        _write_file(os.path.join(data_dir, f"input_{k}.pb"), tensor_bytes(inputs[name], name))
    return data


def write_outputs(data: Path, model: onnx.ModelProto, outputs: dict[str, np.ndarray]) -> None:
    """``output_<k>.pb`` for each graph output present in ``outputs`` (into ``data``)."""
    data_dir = os.fspath(data)
    for k, o in enumerate(model.graph.output):
        if o.name in outputs:
            path = os.path.join(data_dir, f"output_{k}.pb")
            _write_file(path, tensor_bytes(outputs[o.name], o.name))


def read_inputs(data: Path) -> dict[str, np.ndarray]:
    """``input_<k>.pb`` of a data-set folder, by tensor name."""
    out = {}
    k = 0
    while (data / f"input_{k}.pb").exists():
        t = onnx.TensorProto()
        t.ParseFromString((data / f"input_{k}.pb").read_bytes())
        out[t.name] = numpy_helper.to_array(t)
        k += 1
    return out
