"""The oracle: one backend's outcome against the reference's, as a verdict.

Verdicts: ``ok``; ``crash`` and ``timeout`` (with their stage); ``mismatch`` (values, shape
or dtype); ``unsupported`` (the backend lacks an op, dtype or opset: never a bug);
``invalid-reference`` (the reference failed or gave non-finite values: the test says
nothing); ``known`` (matches a known-issue pattern from the config file).

Values are compared with ``|got - want| <= atol + rtol * |want|`` per element (always
both: rtol alone flags near-zero outputs, ORT #25198), tolerances per dtype with per-pair
overrides, and NaN equal to NaN. Each mismatch reports the minimum tolerance that would
have passed, as Polygraphy does.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnxfuzz.errors import UsageError
from onnxfuzz.execute.sandbox import Outcome, Stage, Status
from onnxfuzz.judge.elements import outside

# the message of an invalid-reference verdict whose reference ran and gave NaN or Inf
NON_FINITE = "non-finite reference output"


class Verdict(StrEnum):
    """The one vocabulary of verdicts (stored in campaign.db and meta.json as its value)."""

    OK = "ok"
    CRASH = "crash"
    TIMEOUT = "timeout"
    MISMATCH = "mismatch"
    UNSUPPORTED = "unsupported"
    INVALID_REFERENCE = "invalid-reference"
    KNOWN = "known"
    UNSTABLE = "unstable"  # a mismatch that is no bug (rounding, excess precision)
    GENERATOR_ERROR = "generator-error"  # onnxfuzz failed to build the test's model
    TOO_COSTLY = "too-costly"  # past the time limit or memory cap in the reference too


BUGS = frozenset({Verdict.CRASH, Verdict.TIMEOUT, Verdict.MISMATCH})

# (atol, rtol) per element type; integers and bool compare exactly. For float16 and
# bfloat16, atol scales with the largest magnitude in the tensor (see _values).
DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "float32": (1e-3, 1e-2),
    "float64": (1e-5, 1e-5),
    "float16": (1e-2, 2e-2),
    "bfloat16": (5e-2, 5e-2),
}


@dataclass
class Judgement:
    """One backend's verdict on one test, with what supports it."""

    verdict: Verdict
    stage: Stage | None = None
    # for mismatches: values | shape | dtype | missing | precision (judge.budget) | input
    # (run() wrote into the caller's input arrays)
    kind: str = ""
    output: str = ""  # the first output at fault
    message: str = ""  # error text or mismatch statistics
    min_atol: float = 0.0  # minimum atol that would have passed (values mismatches)

    @property
    def is_bug(self) -> bool:
        return self.verdict in BUGS


@dataclass
class KnownIssue:
    regex: re.Pattern[str]
    backend: str | None = None
    note: str = ""


@dataclass
class OracleConfig:
    tolerance: dict[str, tuple[float, float]] = field(
        default_factory=lambda: dict(DEFAULT_TOLERANCE)
    )
    pair_tolerance: dict[tuple[str, str], dict[str, tuple[float, float]]] = field(
        default_factory=dict
    )
    known: list[KnownIssue] = field(default_factory=list)

    def tol(self, reference: str, backend: str, dtype: str) -> tuple[float, float] | None:
        pair = self.pair_tolerance.get((reference, backend), {})
        return pair.get(dtype, self.tolerance.get(dtype))

    @classmethod
    def load(
        cls, path: Path | None, atol: float | None = None, rtol: float | None = None
    ) -> OracleConfig:
        """Read ``--config FILE`` (TOML)::

        [tolerance.float32]            # per dtype: atol, rtol
        atol = 1e-3
        rtol = 1e-2
        [pair."ort:tvm".float16]       # per reference:backend pair
        atol = 5e-2
        rtol = 5e-2
        [[known]]                      # known issues: matching failures go to "known"
        backend = "tvm"
        regex = "Only constant axes"
        note = "Relax importer limitation"
        """
        cfg = cls()
        if path is not None:
            try:
                data = tomllib.loads(path.read_text())
            except (OSError, tomllib.TOMLDecodeError) as e:
                raise UsageError(f"--config: cannot read {path}: {e}") from None
            for dtype, t in data.get("tolerance", {}).items():
                cfg.tolerance[dtype] = _tol(t, f"[tolerance.{dtype}]")
            for pair, by_dtype in data.get("pair", {}).items():
                ref, sep, be = pair.rpartition(":") if pair.count(":") == 1 else ("", "", "")
                if not sep:
                    raise UsageError(f'--config: [pair."{pair}"] must be "REF:BACKEND"')
                cfg.pair_tolerance[(ref, be)] = {
                    d: _tol(t, f'[pair."{pair}".{d}]') for d, t in by_dtype.items()
                }
            for k, item in enumerate(data.get("known", [])):
                try:
                    cfg.known.append(
                        KnownIssue(
                            re.compile(item["regex"]), item.get("backend"), item.get("note", "")
                        )
                    )
                except (KeyError, re.error) as e:
                    raise UsageError(f"--config: [[known]] #{k + 1}: {e}") from None
        for dtype in list(cfg.tolerance):
            a, r = cfg.tolerance[dtype]
            cfg.tolerance[dtype] = (
                atol if atol is not None else a,
                rtol if rtol is not None else r,
            )
        return cfg


def _tol(t: Any, where: str) -> tuple[float, float]:
    try:
        return float(t["atol"]), float(t["rtol"])
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"--config: {where} needs numbers atol and rtol") from None


def _non_finite(outputs: dict[str, np.ndarray]) -> bool:
    from onnxfuzz.generate.corpus.validate import all_finite

    return not all_finite(outputs)


def judge(
    reference: str,
    ref: Outcome,
    backend: str,
    got: Outcome,
    outputs_order: list[str],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None = None,
) -> Judgement:
    """The verdict for ``backend`` on one test, against ``reference``."""
    if got.too_costly and ref.too_costly:
        return too_costly(reference, ref, got)
    v = own_verdict(got)
    if v.verdict == Verdict.UNSUPPORTED:
        return v
    if v.verdict == Verdict.OK:
        if ref.status != Status.OK or ref.outputs is None or _non_finite(ref.outputs):
            return Judgement(Verdict.INVALID_REFERENCE, message=ref.message or NON_FINITE)
        v = compare(
            reference, ref.outputs, backend, got.outputs or {}, outputs_order, cfg, tol_dtypes
        )
    return with_known(backend, v, cfg)


def too_costly(reference: str, ref: Outcome, got: Outcome) -> Judgement:
    """A test past the time limit or memory cap in the reference too says nothing."""
    return Judgement(
        Verdict.TOO_COSTLY,
        got.stage,
        message=f"{got.message}; {reference} too: {ref.message}",
    )


def own_verdict(got: Outcome) -> Judgement:
    """What a backend's outcome says by itself: crash, timeout, unsupported or ok."""
    if got.status in (Status.CRASH, Status.TIMEOUT, Status.ERROR):
        return Judgement(
            Verdict.TIMEOUT if got.status == Status.TIMEOUT else Verdict.CRASH,
            got.stage,
            message=got.message,
        )
    if got.status == Status.UNSUPPORTED:
        return Judgement(Verdict.UNSUPPORTED, got.stage, message=got.message)
    return Judgement(Verdict.OK)


def with_known(backend: str, v: Judgement, cfg: OracleConfig) -> Judgement:
    """Failures matching a known-issue pattern go to the ``known`` bucket."""
    if v.verdict in (Verdict.OK, Verdict.UNSUPPORTED, Verdict.INVALID_REFERENCE):
        return v
    text = f"{v.verdict} {v.stage or ''} {v.kind} {v.message}"
    for k in cfg.known:
        if (k.backend is None or k.backend == backend) and k.regex.search(text):
            return Judgement(Verdict.KNOWN, v.stage, v.kind, v.output, f"{k.note}: {v.message}")
    return v


# Looseness of float types: a value computed in float16 anywhere upstream carries float16
# error, even after a Cast to float64.
_LOOSENESS = {"float64": 0, "float32": 1, "float16": 2, "bfloat16": 3}


def precision_dtypes(model: onnx.ModelProto) -> dict[str, str]:
    """tensor -> the least precise float type among the tensors it is computed from (itself
    included): whose tolerance its comparison uses."""
    from onnxfuzz import dtypes as dt

    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output)
    }
    types.update({i.name: i.data_type for i in model.graph.initializer})

    def loosest(names: list[str]) -> str | None:
        cands = [n for n in names if n in _LOOSENESS]
        return max(cands, key=_LOOSENESS.__getitem__) if cands else None

    out: dict[str, str] = {}
    for name, t in types.items():
        if dt.NAMES.get(t) in _LOOSENESS:
            out[name] = dt.NAMES[t]
    for node in model.graph.node:
        upstream = loosest([out[i] for i in node.input if i in out] + _inside(node, out))
        stash = _stash_type(node)
        if stash and upstream:  # the op computes its statistics in this type, whatever X is
            upstream = loosest([upstream, stash])
        for t in node.output:
            own = dt.NAMES.get(types.get(t, 0))
            best = loosest([x for x in (upstream, own) if x])
            if best:
                out[t] = best
    return out


def _inside(node: onnx.NodeProto, outer: dict[str, str]) -> list[str]:
    """The float types a node's subgraphs (If branches, Loop and Scan bodies) compute in,
    and those of the outer tensors they read (in ``outer``): its outputs carry their
    rounding (a Loop body that casts a float64 value to float16 and back)."""
    from onnxfuzz import dtypes as dt
    from onnxfuzz.judge.precision import graphs, subgraphs, tensor_types

    found: list[str] = []
    for g in (inner for sub in subgraphs(node) for inner in graphs(sub)):
        infos = list(g.input) + list(g.value_info) + list(g.output)
        kinds = [tt.elem_type for vi in infos for tt in tensor_types(vi.type)]
        kinds += [i.data_type for i in g.initializer]
        kinds += [a.i for n in g.node for a in n.attribute if a.name == "to" and a.type == a.INT]
        found += [dt.NAMES[k] for k in kinds if dt.NAMES.get(k) in _LOOSENESS]
        found += [outer[t] for n in g.node for t in n.input if t in outer]
    return found


# Ops whose "stage one" (mean, variance) the standard computes in ``stash_type``
# (default 1, float32) whatever the input's type: a float64 model's output carries float32
# rounding there, and two correct backends may differ by it.
_STASHING = {"LayerNormalization", "GroupNormalization", "RMSNormalization"}


def _stash_type(node: onnx.NodeProto) -> str | None:
    from onnxfuzz import dtypes as dt

    if node.op_type not in _STASHING:
        return None
    stash = next((a.i for a in node.attribute if a.name == "stash_type"), 1)
    return dt.NAMES.get(stash)


def compare(
    reference: str,
    want: dict[str, np.ndarray],
    backend: str,
    got: dict[str, np.ndarray],
    order: list[str],
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None = None,
) -> Judgement:
    for name in order:
        w = want.get(name)
        g = got.get(name)
        if w is None:
            continue
        if g is None:
            return Judgement(Verdict.MISMATCH, "run", "missing", name, f"output {name} missing")
        if g.dtype != w.dtype:
            return Judgement(
                Verdict.MISMATCH,
                "run",
                "dtype",
                name,
                f"output {name}: dtype {g.dtype} vs reference {w.dtype}",
            )
        if g.shape != w.shape:
            return Judgement(
                Verdict.MISMATCH,
                "run",
                "shape",
                name,
                f"output {name}: shape {list(g.shape)} vs reference {list(w.shape)}",
            )
        bad = _values(name, w, g, tolerance(reference, backend, name, w, cfg, tol_dtypes))
        if bad is not None:
            return bad
    return Judgement(Verdict.OK)


def tolerance(
    reference: str,
    backend: str,
    name: str,
    want: np.ndarray,
    cfg: OracleConfig,
    tol_dtypes: dict[str, str] | None = None,
    scaled: bool = True,
) -> tuple[float, float] | None:
    """(atol, rtol) for output ``name`` (None: exact): its dtype's, loosened to the least
    precise float type upstream; for float16 and bfloat16, atol scales with the tensor's
    largest magnitude (one backend accumulates in float16, another in float32, and the
    difference scales with the magnitudes summed, not with each result: a sum that cancels
    to ~0 keeps the error of its terms). ``scaled`` False: without that scaling, the
    tolerance each element has on its own (``precision.beyond_rounding``: an error an
    element's own size and rounding cannot explain is not excused by another element's
    size)."""
    tol = cfg.tol(reference, backend, _dtype_name(want))
    loose = (tol_dtypes or {}).get(name)
    if tol is not None and loose is not None:
        up = cfg.tol(reference, backend, loose)
        if up is not None:
            tol = (max(tol[0], up[0]), max(tol[1], up[1]))
    if scaled and tol is not None and want.dtype.name in ("float16", "bfloat16") and want.size:
        w = want.astype(np.float64)
        finite = np.abs(w[np.isfinite(w)])
        tol = (tol[0] * (max(1.0, float(finite.max())) if finite.size else 1.0), tol[1])
    return tol


def _dtype_name(a: np.ndarray) -> str:
    return "bfloat16" if a.dtype.name == "bfloat16" else a.dtype.name


def _values(
    name: str, want: np.ndarray, got: np.ndarray, tol: tuple[float, float] | None
) -> Judgement | None:
    if tol is None:  # exact types
        neq = want != got
        if not neq.any():
            return None
        n = int(neq.sum())
        idx = tuple(int(i) for i in np.argwhere(neq)[0])
        return Judgement(
            Verdict.MISMATCH,
            "run",
            "values",
            name,
            f"output {name}: {n}/{want.size} elements differ (exact dtype); first at "
            f"{list(idx)}: {_plain(got[idx])} vs reference {_plain(want[idx])}",
        )
    if np.array_equal(want, got):  # the common case, and cheap (NaNs take the long way)
        return None
    atol, rtol = tol
    w = want.astype(np.float64)
    g = got.astype(np.float64)
    bad = outside(w, g, tol)
    if not bad.any():
        return None
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: NaN, judged below
        err = np.abs(g - w)
    n = int(bad.sum())
    err_bad = np.where(bad, np.nan_to_num(err, nan=np.inf), 0.0)
    idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(err_bad)), w.shape))
    # A NaN or an infinity against anything else has no size of error: counted apart, and
    # no atol would pass it (a NaN-for-0 bug read "max abs err nan ... minimum atol: nan")
    numeric = bad & np.isfinite(err)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        rel = err / np.abs(w)
        min_atol = float(np.max(np.where(numeric, err - rtol * np.abs(w), 0.0)))
    said = [f"output {name}: {n}/{want.size} elements outside atol={atol:g} rtol={rtol:g}"]
    if numeric.any():
        # no relative error against a reference of 0 (it read "max rel err 1e+30")
        scaled = rel[numeric & (w != 0)]
        worst_rel = f"{scaled.max():.4g}" if scaled.size else "- (the reference is 0 there)"
        said.append(f"max abs err {err[numeric].max():.4g}, max rel err {worst_rel}")
    said += non_finite_words(w, g, bad)
    said.append(f"worst at {list(idx)}: {g[idx]:.6g} vs reference {w[idx]:.6g}")
    if (bad & ~numeric).any():
        min_atol = float("inf")
        said.append("no tolerance passes it (NaN or infinity against another value)")
    else:
        said.append(f"minimum atol to pass at rtol={rtol:g}: {min_atol:.4g}")
    return Judgement(Verdict.MISMATCH, "run", "values", name, "; ".join(said), min_atol)


def _plain(x: Any) -> str:
    """A numpy scalar as its value reads ("1", "True", "'ab'"), not "np.int64(1)"."""
    v = x.item() if isinstance(x, np.generic) else x
    return repr(v) if isinstance(v, (str, bytes)) else str(v)


def non_finite_words(want: np.ndarray, got: np.ndarray, bad: np.ndarray) -> list[str]:
    """The wrong elements (``bad``) that are a NaN or an infinity on one side, counted in
    words ("3600 NaN where the reference is finite"); none: []."""
    w_nan, g_nan = np.isnan(want), np.isnan(got)
    w_inf, g_inf = np.isinf(want), np.isinf(got)
    counts = (
        (bad & g_nan & ~w_nan, "NaN where the reference is not"),
        (bad & w_nan & ~g_nan, "not NaN where the reference is NaN"),
        (bad & g_inf & ~w_inf & ~w_nan, "infinite where the reference is finite"),
        (bad & w_inf & ~g_inf & ~g_nan, "finite where the reference is infinite"),
        (bad & w_inf & g_inf & (want != got), "an infinity of the other sign"),
    )
    return [f"{int(m.sum())} {words}" for m, words in counts if m.any()]
