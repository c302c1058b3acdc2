"""ONNX's backend-test layout, written and read in one place.

    FOLDER/model.onnx
    FOLDER/test_data_set_0/input_<k>.pb     graph input k (a TensorProto with its name)
    FOLDER/test_data_set_0/output_<k>.pb    graph output k, where there is one

Corpora, bug bundles, reduced models and ``onnxfuzz reduce`` use it; ONNX's and ONNX
Runtime's test runners read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

DATA_SET = "test_data_set_0"


def _tensor_bytes(value: np.ndarray, name: str) -> bytes:
    return numpy_helper.from_array(np.asarray(value), name).SerializeToString()


def write_test(
    folder: Path,
    model: onnx.ModelProto,
    inputs: dict[str, np.ndarray],
    names: Sequence[str] | None = None,
) -> Path:
    """``model.onnx`` and the inputs (in graph-input order, or ``names``' order) into
    ``folder``, which is created; returns the data-set folder."""
    data = folder / DATA_SET
    data.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(model.SerializeToString())
    order = names if names is not None else [i.name for i in model.graph.input]
    for k, name in enumerate(order):
        (data / f"input_{k}.pb").write_bytes(_tensor_bytes(inputs[name], name))
    return data


def write_outputs(data: Path, model: onnx.ModelProto, outputs: dict[str, np.ndarray]) -> None:
    """``output_<k>.pb`` for each graph output present in ``outputs`` (into ``data``)."""
    for k, o in enumerate(model.graph.output):
        if o.name in outputs:
            (data / f"output_{k}.pb").write_bytes(_tensor_bytes(outputs[o.name], o.name))


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
