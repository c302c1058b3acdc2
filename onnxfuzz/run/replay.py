"""``onnxfuzz replay BUNDLE``: does a bug bundle still reproduce?"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import onnx

from onnxfuzz.errors import ModelError
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.corpus.testdata import DATA_SET, read_inputs
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import OracleConfig


class Replayed(StrEnum):
    REPRODUCES = "reproduces"  # the same signature recurs
    FIXED = "fixed"  # the backend no longer fails
    DIFFERENT = "different"  # it fails, with another signature


def replay_bundle(bundle: Path, timeout: float | None = None) -> tuple[Replayed, str]:
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
    inputs = read_inputs(bundle / DATA_SET)
    limit = timeout if timeout is not None else float(meta.get("timeout", 30.0))
    backend, reference = meta["backend"], meta["reference"]
    with BackendPool([reference, backend], timeout=limit) as pool:
        return _judge(meta, model, inputs, pool)


def _judge(
    meta: dict, model: onnx.ModelProto, inputs: dict, pool: BackendPool
) -> tuple[Replayed, str]:
    backend, reference = meta["backend"], meta["reference"]

    cfg = OracleConfig(tolerance={k: tuple(v) for k, v in meta.get("tolerance", {}).items()})
    outcomes = pool.run_all(model.SerializeToString(), inputs)
    a = Judge(reference, cfg, pool).assess(model, inputs, outcomes)[backend]
    v = a.judgement
    if not v.is_bug:
        return Replayed.FIXED, f"does not reproduce: {backend} gives {v.verdict}"
    if a.signature == meta["signature"]:
        return Replayed.REPRODUCES, f"REPRODUCES: {v.verdict} at {v.stage}: {v.message[:300]}"
    return Replayed.DIFFERENT, f"fails differently: {a.signature}\n(bundle: {meta['signature']})"
