"""``onnxfuzz replay BUNDLE``: does a bug bundle still reproduce?"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from onnx import numpy_helper

from onnxfuzz.assess import assess
from onnxfuzz.backend import parse_backend
from onnxfuzz.errors import ModelError
from onnxfuzz.oracle import OracleConfig
from onnxfuzz.sandbox import Outcome, Worker

REPRODUCES, FIXED, DIFFERENT = 1, 0, 3


def load_inputs(folder: Path) -> dict:
    out = {}
    k = 0
    while (folder / f"input_{k}.pb").exists():
        t = onnx.TensorProto()
        t.ParseFromString((folder / f"input_{k}.pb").read_bytes())
        out[t.name] = numpy_helper.to_array(t)
        k += 1
    return out


def replay_bundle(bundle: Path, timeout: float | None = None) -> tuple[int, str]:
    try:
        meta = json.loads((bundle / "meta.json").read_text())
        model = onnx.load(bundle / "model.onnx")
    except (
        OSError,
        json.JSONDecodeError,
        onnx.onnx_cpp2py_export.checker.ValidationError,
        Exception,
    ) as e:  # noqa: BLE001 - any unreadable bundle gets the same message
        raise ModelError(
            f"{bundle}: not a bug bundle ({type(e).__name__}: {e}); it needs "
            "meta.json, model.onnx and test_data_set_0/"
        ) from None
    inputs = load_inputs(bundle / "test_data_set_0")
    limit = timeout if timeout is not None else float(meta.get("timeout", 30.0))
    backend, reference = meta["backend"], meta["reference"]
    labels = list(dict.fromkeys([reference, backend]))
    workers = {label: Worker(parse_backend(label), timeout=limit) for label in labels}
    try:
        for w in workers.values():
            w.start()
        return _judge(meta, model, inputs, workers)
    finally:
        for w in workers.values():
            w.close()


def _judge(
    meta: dict, model: onnx.ModelProto, inputs: dict, workers: dict[str, Worker]
) -> tuple[int, str]:
    backend, reference = meta["backend"], meta["reference"]

    def run_all(data: bytes) -> dict:
        return {label: w.execute(data, inputs) for label, w in workers.items()}

    def run_one(label: str, data: bytes, feeds: dict) -> Outcome:
        return workers[label].execute(data, feeds)

    cfg = OracleConfig(tolerance={k: tuple(v) for k, v in meta.get("tolerance", {}).items()})
    a = assess(model, inputs, run_all(model.SerializeToString()), reference, cfg, run_all, run_one)[
        backend
    ]
    v = a.verdict
    if not v.is_bug:
        return FIXED, f"does not reproduce: {backend} gives {v.verdict}"
    if a.signature == meta["signature"]:
        return REPRODUCES, f"REPRODUCES: {v.verdict} at {v.stage}: {v.message[:300]}"
    return DIFFERENT, f"fails differently: {a.signature}\n(bundle: {meta['signature']})"
