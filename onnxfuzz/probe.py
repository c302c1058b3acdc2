"""Which ops can a backend take at all? A cached probe before a campaign.

A model with one op the backend lacks is "unsupported" as a whole, so a backend missing a
handful of ops (onnx2torch lacks converters for many op versions) would leave most tests
saying nothing. Before a campaign, each op is tried alone on each backend (a few small
models); ops that every try reports unsupported are left out of generation, and the
campaign records which and why. Results are cached per backend, version and opset.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from pathlib import Path

from onnxfuzz import __version__
from onnxfuzz.config import Config
from onnxfuzz.errors import ConfigError
from onnxfuzz.generator import Generator
from onnxfuzz.sandbox import UNSUPPORTED, BackendInfo, Worker
from onnxfuzz.spec import specs_for

SAMPLES = 3


def cache_dir() -> Path:
    base = os.environ.get("ONNXFUZZ_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "onnxfuzz"
    )
    return Path(base)


def _cache_file(info: BackendInfo, cfg: Config) -> Path:
    key = json.dumps(
        [
            info.label,
            info.version,
            cfg.opset,
            __version__,
            cfg.max_rank,
            cfg.max_dim,
            sorted(cfg.dtypes),
            sorted(cfg.ops or ()),
            sorted(cfg.exclude_ops),
        ]
    )
    return cache_dir() / f"probe-{hashlib.sha1(key.encode()).hexdigest()[:16]}.json"


def unsupported_ops(worker: Worker, cfg: Config) -> dict[str, str]:
    """op -> why, for ops every sample of which the backend reports unsupported."""
    assert worker.info is not None
    path = _cache_file(worker.info, cfg)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            pass
    out: dict[str, str] = {}
    ops = set(cfg.ops) if cfg.ops is not None else None
    for spec in specs_for(cfg.opset, ops, set(cfg.exclude_ops)):
        try:
            gen = Generator(
                replace(
                    cfg,
                    min_nodes=1,
                    max_nodes=1,
                    ops=frozenset([spec.op_type]),
                    exclude_ops=frozenset(),
                )
            )
        except ConfigError:
            continue
        reasons = []
        for seed in range(SAMPLES):
            case = gen.generate(seed)
            o = worker.execute(case.model.SerializeToString(), case.make_inputs(seed))
            if o.status != UNSUPPORTED:
                break
            reasons.append(o.message.splitlines()[0][:200] if o.message else "unsupported")
        else:
            out[spec.op_type] = reasons[0]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only home: probe again next time
    return out
