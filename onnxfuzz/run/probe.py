"""What each backend supports, op by op and element type by element type: a cached probe.

Before a campaign, every (op, element type) onnxfuzz would generate is tried on each
backend in a single-op model, eight such models side by side in one (group testing: a
group that fails is halved down to the pair alone). Pairs the backend reports unsupported
alone are recorded with its reason, per backend, version and opset. Every answer is cached
as it comes, in a journal per (adapter with its options, version, opset, generator
options, specs) under the user's cache folder (``$ONNXFUZZ_CACHE``, else
``$XDG_CACHE_HOME/onnxfuzz``, else ``~/.cache/onnxfuzz``): a later campaign or ``backend
check`` asks the backend only what the journal lacks, a new backend version starts a
journal of its own, and a probe cut short (``--time``, an interrupt) goes on where it
stopped. ``--no-probe-cache`` probes afresh.

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
import importlib.util
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import onnx

from onnxfuzz import __version__
from onnxfuzz import dtypes as dt
from onnxfuzz.backend import entry_points, parse_backend
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import BackendInfo, Outcome, Status
from onnxfuzz.generate.build.generator import Case
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

# Pairs probed side by side in one model: most pairs are supported, and a compiling
# backend pays per model more than per node.
PAIR_GROUP = 8


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


def adapter_source(label: str) -> Path | None:
    """The file of the module that defines ``label``'s adapter class, found without
    importing it (a backend's import takes seconds): the installed entry point's module,
    ``pkg.mod``, or ``file.py``; None where it cannot be found."""
    try:
        target = parse_backend(label).target
        if ":" not in target:
            target = entry_points()[target].value
        where = target.rpartition(":")[0]
        if where.endswith(".py"):
            return Path(where).resolve()
        spec = importlib.util.find_spec(where)
        return Path(spec.origin) if spec is not None and spec.origin else None
    except Exception:  # noqa: BLE001 - an adapter that cannot be found loads with its own error
        return None


def _adapter_digest(label: str) -> str:
    """A digest of the adapter's module source: an adapter whose code changes (what it
    calls unsupported, a fixed converter) probes afresh, whatever version it reports."""
    path = adapter_source(label)
    if path is None:
        return ""
    with contextlib.suppress(OSError):
        return hashlib.sha1(path.read_bytes()).hexdigest()[:16]
    return ""


def _cache_file(info: BackendInfo, cfg: Config) -> Path:
    """The probe's journal for one adapter (its label holds its options), its version and
    source, the opset and the options that decide what is probed: a new version, or an
    edited adapter, probes afresh."""
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
            _adapter_digest(info.label),
        ]
    )
    return cache_dir() / f"probe-{hashlib.sha1(key.encode()).hexdigest()[:16]}.jsonl"


@dataclass
class Probed:
    """What a probe of one backend found, and how much of it it could try."""

    support: Support
    done: int  # (op, type) pairs and ops' forms probed, this time or before (the cache)
    total: int
    cached: int  # of ``done``, taken from the cache

    @property
    def complete(self) -> bool:
        return self.done >= self.total


class _Journal:
    """The probe's cache: one JSON line per answer, appended as it comes, so a probe cut
    short (--time, Ctrl-C, SIGTERM, a hung adapter) goes on from there next time."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.pairs: dict[tuple[str, str], str | None] = {}  # (op, dtype) -> why, or None
        self.forms: dict[str, dict[str, str]] = {}  # op -> feature -> why
        self._lock = threading.Lock()
        if path is None:
            return
        try:
            lines = path.read_text().splitlines()
        except OSError:
            return
        for line in lines:
            try:
                rec = json.loads(line)
                if "pair" in rec:
                    op, dtype = rec["pair"]
                    self.pairs[(op, dtype)] = rec["why"]
                else:
                    self.forms[rec["forms"]] = dict(rec["lacked"])
            except (ValueError, KeyError, TypeError):
                continue  # a line cut off by a kill: that answer is probed again

    def add(self, rec: dict[str, Any]) -> None:
        if self.path is None:
            return
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    f.write(json.dumps(rec, sort_keys=True) + "\n")
            except OSError:
                self.path = None  # a read-only cache: probe again next time


def unsupported_pairs(
    pools: BackendPool | Sequence[BackendPool],
    label: str,
    cfg: Config,
    on_progress: Callable[[int, int], None] | None = None,
    *,
    deadline: float | None = None,
    use_cache: bool = True,
) -> Support:
    """op -> {dtype: reason}: ``probe_backend(...).support``."""
    return probe_backend(
        pools, label, cfg, on_progress, deadline=deadline, use_cache=use_cache
    ).support


def probe_backend(
    pools: BackendPool | Sequence[BackendPool],
    label: str,
    cfg: Config,
    on_progress: Callable[[int, int], None] | None = None,
    *,
    deadline: float | None = None,
    use_cache: bool = True,
    group: int = PAIR_GROUP,
) -> Probed:
    """The (op, element type) pairs backend ``label`` of started pools reports
    unsupported on a single-op model (op -> {dtype: reason}), then the forms of each op it
    lacks. The pairs are shared out over the pools (a campaign's lanes): a slow compiler
    probes ~1,000 pairs (TVM's cuda target took ten minutes on one lane).

    Every answer is cached as it comes (``use_cache``: read and written; see ``_Journal``):
    a later probe of the same adapter, version and options asks the backend only what is
    not there. No pair is started after ``deadline`` (``time.monotonic()``), and one under
    way then is cut at it; what is not probed counts as supported and is probed by the
    next run. ``on_progress(done, total)`` is called as answers come, first with the
    count the cache answered (0 without one). ``group``: pairs tried side by side in one
    model (1: each alone)."""
    pools = [pools] if isinstance(pools, BackendPool) else list(pools)
    journal = _Journal(_cache_file(pools[0].infos[label], cfg) if use_cache else None)
    singles = list(single_op_generators(cfg))
    reasons: list[str | None] = [None] * len(singles)
    answered = [False] * len(singles)
    for k, single in enumerate(singles):
        key = (single.op, single.dtype)
        if key in journal.pairs:
            reasons[k], answered[k] = journal.pairs[key], True
    n_ops = len({single.op for single in singles})
    total = [len(singles) + n_ops]  # the forms' count is known once the pairs are
    cached = sum(answered)
    done = [cached]
    lock = threading.Lock()
    told = [0]  # the last count on_progress was given

    def tell(count: int, of: int) -> None:
        told[0] = count
        if on_progress is not None:
            on_progress(count, of)

    tell(cached, total[0])  # the probe starts (a hung adapter answers nothing more)

    def tick() -> None:
        with lock:
            done[0] += 1
            tell(done[0], total[0])

    def answer(k: int, why: str | None) -> None:
        reasons[k], answered[k] = why, True
        journal.add({"pair": [singles[k].op, singles[k].dtype], "why": why})
        tick()

    cases: dict[int, Case] = {}

    def case_of(k: int) -> Case:
        """Pair ``k``'s single-op model, made once however often its group is halved."""
        if k not in cases:
            cases[k] = singles[k].generator.generate(0)
        return cases[k]

    def probe_pairs(pool: BackendPool, ks: list[int]) -> None:
        """Group testing: ``ks``' single-op models side by side in one model; a backend
        that runs it has every pair (one compile instead of len(ks): torch.compile takes
        ~1.5 s a model, TVM ~0.3 s, whatever its size), a failure is halved down to the
        pair alone, whose own outcome is its answer."""
        if len(ks) == 1:
            case = case_of(ks[0])
            model_bytes, inputs = case.model.SerializeToString(), case.make_inputs(0)
        else:
            model, inputs = merged([case_of(k) for k in ks])
            model_bytes = model.SerializeToString()
        o = _run_before(pool, label, deadline, model_bytes, inputs)
        if o is None:
            return  # cut at the deadline: probed next time
        if len(ks) == 1:
            answer(ks[0], _reason(o) if o.status == Status.UNSUPPORTED else None)
        elif o.status == Status.OK:
            for k in ks:
                answer(k, None)
        elif o.status == Status.TIMEOUT:  # a hang: halving would wait for it twice as often
            for k in ks:
                probe_pairs(pool, [k])
        else:
            half = len(ks) // 2
            probe_pairs(pool, ks[:half])
            probe_pairs(pool, ks[half:])

    todo = [k for k in range(len(singles)) if not answered[k]]
    groups = [todo[i : i + group] for i in range(0, len(todo), group)]
    _share_out(pools, len(groups), lambda pool, g: probe_pairs(pool, groups[g]), deadline)
    # Then the features of each op (attribute values, computed weights) in one type the
    # backend has: a later pass, as it needs the first's answers.
    by_op: dict[str, SingleOp] = {}
    for single, why, known in zip(singles, reasons, answered, strict=True):
        if known and why is None and (single.op not in by_op or single.dtype == "float32"):
            by_op[single.op] = single
    ops = list(by_op.values())
    lacked: dict[str, dict[str, str]] = {}
    with lock:
        total[0] = len(singles) + len(ops)
        done[0] = sum(answered)
    for single in ops:
        if single.op in journal.forms:
            lacked[single.op] = journal.forms[single.op]
            cached += 1
            done[0] += 1

    def probe_forms(pool: BackendPool, k: int) -> None:
        op = ops[k].op
        if op in lacked:
            return
        found = lacked_features(pool, label, _variants(ops[k]), deadline)
        if found is None:
            return  # cut at the deadline
        lacked[op] = found
        journal.add({"forms": op, "lacked": found})
        tick()

    _share_out(pools, len(ops), probe_forms, deadline)
    out: Support = {}  # in the pairs' order, whichever pool probed them
    for single, why in zip(singles, reasons, strict=True):
        if why is not None:
            out.setdefault(single.op, {})[single.dtype] = why
    for single in ops:
        if lacked.get(single.op):
            out.setdefault(single.op, {}).update(lacked[single.op])
    # Which ops have forms to probe is known once every pair is answered; before, the
    # total counts every op.
    total_now = len(singles) + (len(ops) if all(answered) else n_ops)
    answers = sum(answered) + len(lacked)
    if answers != told[0]:  # answers from the cache at the end, or a probe cut short
        tell(answers, total_now)
    return Probed(out, answers, total_now, cached)


def _run_before(
    pool: BackendPool, label: str, deadline: float | None, model_bytes: bytes, inputs: Any
) -> Outcome | None:
    """``pool.run_one``, its timeout cut to what is left before ``deadline``; None when
    it was cut (a timeout then says nothing about the backend) or nothing is left."""
    if deadline is None:
        return pool.run_one(label, model_bytes, inputs)
    full = pool.workers[label].timeout
    left = deadline - time.monotonic()
    if left <= 0:
        return None
    with pool.time_limit(min(full, left) if left < full else None):
        o = pool.run_one(label, model_bytes, inputs)
    return None if o.status == Status.TIMEOUT and left < full else o


_VARIANTS: dict[tuple[str, str, str], list[Variant]] = {}


def _variants(single: SingleOp) -> list[Variant]:
    """``feature_variants``, made once per op, type and options for all backends probed."""
    key = (single.op, single.dtype, json.dumps(single.generator.cfg.to_record()))
    if key not in _VARIANTS:
        _VARIANTS[key] = feature_variants(single)
    return _VARIANTS[key]


def _reason(o: Outcome) -> str:
    return o.message.splitlines()[0][:200] if o.message else "unsupported"


def _share_out(
    pools: list[BackendPool],
    n: int,
    job: Callable[[BackendPool, int], None],
    deadline: float | None = None,
) -> None:
    """``job(pool, k)`` for k in 0..n-1, each pool (a lane) claiming the next k, none
    claimed after ``deadline`` (``time.monotonic()``)."""
    claims = itertools.count()  # next() on a count is atomic under the GIL
    errors: list[BaseException] = []
    stop = threading.Event()  # the caller was interrupted: claim nothing more

    def run_on(pool: BackendPool) -> None:
        try:
            while not stop.is_set() and (k := next(claims)) < n:
                if deadline is not None and time.monotonic() >= deadline:
                    return
                job(pool, k)
        except BaseException as e:  # noqa: BLE001 - re-raised by the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run_on, args=(pool,), daemon=True) for pool in pools]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():  # a timed join: Ctrl-C and SIGTERM are seen at once
                t.join(0.25)
    except BaseException:
        stop.set()
        raise
    if errors:
        raise errors[0]


def lacked_features(
    pool: BackendPool, label: str, variants: list[Variant], deadline: float | None = None
) -> dict[str, str] | None:
    """feature -> why, for the features of one op the backend lacks. Group testing: the
    variants run side by side in one model (a compile costs TVM ~0.3 s whatever its
    size), halved where it fails; a lone variant's failure counts when it is
    ``unsupported`` in both its draws. None: ``deadline`` came first."""
    if not variants:
        return {}
    model, inputs = merged([v.draws[0] for v in variants])
    o = _run_before(pool, label, deadline, model.SerializeToString(), inputs)
    if o is None:
        return None
    if o.status == Status.OK:
        return {}
    if len(variants) > 1:
        half = len(variants) // 2
        first = lacked_features(pool, label, variants[:half], deadline)
        second = lacked_features(pool, label, variants[half:], deadline)
        return None if first is None or second is None else {**first, **second}
    if o.status != Status.UNSUPPORTED:
        return {}  # a crash of one form is a bug to find, not a form to avoid
    (v,) = variants
    again = v.draws[1]
    o2 = _run_before(pool, label, deadline, again.model.SerializeToString(), again.make_inputs(0))
    if o2 is None:
        return None
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
