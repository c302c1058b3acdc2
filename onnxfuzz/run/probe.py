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

import contextlib
import hashlib
import itertools
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

import onnx

from onnxfuzz import __version__
from onnxfuzz import dtypes as dt
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import BackendInfo, Outcome, Status
from onnxfuzz.generate.build.single_op import (
    SingleOp,
    Variant,
    feature_variants,
    merged,
    single_op_generators,
)
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.features import is_feature, model_features
from onnxfuzz.generate.lang.spec import load_specs, op_info
from onnxfuzz.infer.rules import rules_dir

Support = dict[str, dict[str, str]]  # op -> dtype name -> why unsupported


def cache_dir() -> Path:
    base = os.environ.get("ONNXFUZZ_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "onnxfuzz"
    )
    return Path(base)


@cache
def _specs_digest() -> str:
    """A digest of the spec modules' sources: what the probe tries follows from them."""
    h = hashlib.sha1()
    modules = {sys.modules[spec.build.__module__] for spec in load_specs().values()}
    files = [m.__file__ or "" for m in modules]
    files += [str(p) for p in rules_dir().glob("*.json")]  # the inferred rules
    for f in sorted(files):
        h.update(Path(f).name.encode())
        with contextlib.suppress(OSError):
            h.update(Path(f).read_bytes())
    return h.hexdigest()[:16]


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
            sorted(cfg.domains),
            "features-2",  # results hold the ops' features (attribute values, computed weights)
            # the specs themselves (a version's specs change between releases, and so does
            # what the probe tries: a stale cache would pass ops it never tried)
            _specs_digest(),
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
    # Then the features of each op (attribute values, computed weights) in one type the
    # backend has: a later pass, as it needs the first's answers.
    by_op: dict[str, SingleOp] = {}
    n_ops = len({single.op for single in singles})
    done = [0]
    lock = threading.Lock()

    def tick(total: int) -> None:
        with lock:
            done[0] += 1
            if on_progress is not None:
                on_progress(done[0], total)

    def probe_pair(pool: BackendPool, k: int) -> None:
        case = singles[k].generator.generate(0)
        o = pool.run_one(label, case.model.SerializeToString(), case.make_inputs(0))
        if o.status == Status.UNSUPPORTED:
            reasons[k] = _reason(o)
        tick(len(singles) + n_ops)

    _share_out(pools, len(singles), probe_pair)
    for single, why in zip(singles, reasons, strict=True):
        if why is None and (single.op not in by_op or single.dtype == "float32"):
            by_op[single.op] = single
    done[0] = len(singles)
    lacked: dict[str, dict[str, str]] = {}
    ops = list(by_op.values())

    def probe_features(pool: BackendPool, k: int) -> None:
        found = lacked_features(pool, label, _variants(ops[k]))
        if found:
            lacked[ops[k].op] = found
        tick(len(singles) + len(ops))

    _share_out(pools, len(ops), probe_features)
    out: Support = {}  # in the pairs' order, whichever pool probed them
    for single, why in zip(singles, reasons, strict=True):
        if why is not None:
            out.setdefault(single.op, {})[single.dtype] = why
    for single in ops:
        if single.op in lacked:
            out.setdefault(single.op, {}).update(lacked[single.op])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1, sort_keys=True))
    except OSError:
        pass  # a read-only home: probe again next time
    return out


_VARIANTS: dict[tuple[str, str, str], list[Variant]] = {}


def _variants(single: SingleOp) -> list[Variant]:
    """``feature_variants``, made once per op, type and options for all backends probed."""
    key = (single.op, single.dtype, json.dumps(single.generator.cfg.to_record()))
    if key not in _VARIANTS:
        _VARIANTS[key] = feature_variants(single)
    return _VARIANTS[key]


def _reason(o: Outcome) -> str:
    return o.message.splitlines()[0][:200] if o.message else "unsupported"


def _share_out(pools: list[BackendPool], n: int, job: Callable[[BackendPool, int], None]) -> None:
    """``job(pool, k)`` for k in 0..n-1, each pool (a lane) claiming the next k."""
    claims = itertools.count()  # next() on a count is atomic under the GIL
    errors: list[BaseException] = []

    def run_on(pool: BackendPool) -> None:
        try:
            while (k := next(claims)) < n:
                job(pool, k)
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run_on, args=(pool,), daemon=True) for pool in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def lacked_features(pool: BackendPool, label: str, variants: list[Variant]) -> dict[str, str]:
    """feature -> why, for the features of one op the backend lacks. Group testing: the
    variants run side by side in one model (a compile costs TVM ~0.3 s whatever its
    size), halved where it fails; a lone variant's failure counts when it is
    ``unsupported`` in both its draws."""
    if not variants:
        return {}
    model, inputs = merged([v.draws[0] for v in variants])
    o = pool.run_one(label, model.SerializeToString(), inputs)
    if o.status == Status.OK:
        return {}
    if len(variants) > 1:
        half = len(variants) // 2
        return {
            **lacked_features(pool, label, variants[:half]),
            **lacked_features(pool, label, variants[half:]),
        }
    if o.status != Status.UNSUPPORTED:
        return {}  # a crash of one form is a bug to find, not a form to avoid
    (v,) = variants
    again = v.draws[1]
    o2 = pool.run_one(label, again.model.SerializeToString(), again.make_inputs(0))
    return {v.feature: _reason(o)} if o2.status == Status.UNSUPPORTED else {}


def lacking(model: onnx.ModelProto, support: Support) -> str | None:
    """The reason the backend cannot take ``model``, if it contains a pair it lacks."""
    if not support:
        return None
    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output)
    }
    types.update({i.name: i.data_type for i in model.graph.initializer})
    has: set[tuple[str, str]] | None = None  # the model's features, when asked for
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
        for key, why in missing.items():
            if is_feature(key):
                has = model_features(model) if has is None else has
                if (node.op_type, key) in has:
                    return f"{node.op_type}[{key}]: {why}"
    return None


def lacked_features_of(support: Support) -> set[tuple[str, str]]:
    """(op, feature) pairs the backend lacks (steering avoids them)."""
    return {(op, key) for op, missing in support.items() for key in missing if is_feature(key)}


def fully_unsupported(
    support: Support, cfg: Config, probed: dict[str, list[str]] | None = None
) -> dict[str, str]:
    """Ops the backend lacks in every element type onnxfuzz generates for them, or in
    every type the probe could try them in alone (``probed``: ``single_op_pairs``):
    ONNX Runtime registers OneHot's kernels for few type combinations, so the probe tries
    two, and a backend without OneHot lacks the others too."""
    out = {}
    for op, missing in support.items():
        tried = (probed or {}).get(op)
        if tried and set(tried) <= set(missing):
            out[op] = next(iter(missing.values()))
            continue
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
