"""What each backend supports, op by op and element type by element type: a cached probe.

Before a campaign, every (op, element type) onnxfuzz would generate is tried alone on each
backend (a single-op model). Pairs the backend reports unsupported are recorded with its
reason, per backend, version and opset (cached under ``~/.cache/onnxfuzz``).

By default the result *steers* generation (``--probe steer``): the pairs some backend lacks
are not generated (``Config.avoid``; ops lacked in every type are left out), so that tests
compare every backend. It always *classifies* too: when a backend fails on a model
containing a pair it is known to lack, that failure is an ``unsupported`` verdict — its
missing kernel does not count as a bug. ``--probe classify`` generates everything (the
other backends are still tested on the pairs one lacks); ``--probe exclude`` leaves out
only the ops some backend lacks in every type.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import onnx

from onnxfuzz import __version__
from onnxfuzz import dtypes as dt
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import BackendInfo, Status
from onnxfuzz.generate.config import Config
from onnxfuzz.generate.single_op import single_op_generators
from onnxfuzz.generate.spec import op_info

Support = dict[str, dict[str, str]]  # op -> dtype name -> why unsupported


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


def unsupported_pairs(
    pools: BackendPool | Sequence[BackendPool],
    label: str,
    cfg: Config,
    on_progress: Callable[[int, int], None] | None = None,
) -> Support:
    """op -> {dtype: reason} for the (op, element type) pairs backend ``label`` of started
    pools reports unsupported on a single-op model. The pairs are shared out over the pools
    (a campaign's lanes): a slow compiler probes ~850 pairs (TVM's cuda target took ten
    minutes on one lane). ``on_progress(done, total)`` is called as pairs finish."""
    pools = [pools] if isinstance(pools, BackendPool) else list(pools)
    path = _cache_file(pools[0].infos[label], cfg)
    if path.exists():
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            pass
    singles = list(single_op_generators(cfg))
    reasons: list[str | None] = [None] * len(singles)
    claims = itertools.count()  # next() on a count is atomic under the GIL
    lock = threading.Lock()
    done = [0]
    errors: list[BaseException] = []

    def probe_on(pool: BackendPool) -> None:
        try:
            while (k := next(claims)) < len(singles):
                case = singles[k].generator.generate(0)
                o = pool.run_one(label, case.model.SerializeToString(), case.make_inputs(0))
                if o.status == Status.UNSUPPORTED:
                    reasons[k] = o.message.splitlines()[0][:200] if o.message else "unsupported"
                with lock:
                    done[0] += 1
                    if on_progress is not None:
                        on_progress(done[0], len(singles))
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=probe_on, args=(pool,), daemon=True) for pool in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    out: Support = {}  # in the pairs' order, whichever pool probed them
    for single, why in zip(singles, reasons, strict=True):
        if why is not None:
            out.setdefault(single.op, {})[single.dtype] = why
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only home: probe again next time
    return out


def lacking(model: onnx.ModelProto, support: Support) -> str | None:
    """The reason the backend cannot take ``model``, if it contains a pair it lacks."""
    if not support:
        return None
    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output)
    }
    types.update({i.name: i.data_type for i in model.graph.initializer})
    for node in model.graph.node:
        missing = support.get(node.op_type)
        if not missing:
            continue
        if "*" in missing:
            return f"{node.op_type}: {missing['*']}"
        for t in list(node.input) + list(node.output):
            name = dt.NAMES.get(types.get(t, 0))
            if name in missing:
                return f"{node.op_type}({name}): {missing[name]}"
    return None


def fully_unsupported(support: Support, cfg: Config) -> dict[str, str]:
    """Ops the backend lacks in every element type onnxfuzz generates for them."""
    out = {}
    for op, missing in support.items():
        info = op_info(op, cfg.opset)
        tv = info.main_type_var if info is not None else None
        generated = (
            {dt.NAMES[t] for t in info.type_sets.get(tv, frozenset()) & cfg.dtypes}
            if tv and info is not None
            else set()
        )
        if "*" in missing or (generated and generated <= set(missing)):
            out[op] = next(iter(missing.values()))
    return out
