"""``onnxfuzz replay BUNDLE``: does a bug bundle still reproduce?"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path

import numpy as np
import onnx

from onnxfuzz.errors import BundleDamaged
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.generate.corpus.testdata import DATA_SET, read_inputs
from onnxfuzz.judge.attribution import is_reference_evaluator, reference_fault
from onnxfuzz.judge.judge import Judge
from onnxfuzz.judge.oracle import DEFAULT_TOLERANCE, OracleConfig, Verdict
from onnxfuzz.judge.signature import earlier_forms, family, same_fault


class Replayed(StrEnum):
    REPRODUCES = "reproduces"  # the same signature recurs
    FIXED = "fixed"  # the backend no longer fails
    DIFFERENT = "different"  # it fails, with another signature


REDUCED = "reduced"  # a bundle's folder of the reduced model (its own repro.py, no meta)


def meta_path(bundle: Path) -> Path:
    """Where ``bundle``'s meta.json is: its own, or for its ``reduced/`` folder (which
    issue.md says to run), the bundle's."""
    own = bundle / "meta.json"
    if not own.exists() and bundle.name == REDUCED and (bundle.parent / "meta.json").exists():
        return bundle.parent / "meta.json"
    return own


def load_bundle(bundle: Path) -> tuple[dict, onnx.ModelProto, dict[str, np.ndarray]]:
    """A bundle's meta.json, model and inputs (of its ``reduced/`` folder too), or
    ``BundleDamaged`` naming the first file that is missing or cannot be read."""
    meta_file = meta_path(bundle)
    for path in (meta_file, bundle / "model.onnx", bundle / DATA_SET):
        if not path.exists():
            raise BundleDamaged(path, "missing")
    try:
        meta = json.loads(meta_file.read_text())
        for key in ("backend", "reference", "signature"):
            if not isinstance(meta.get(key), str):
                raise ValueError(f"no {key!r}")
    except (OSError, ValueError, AttributeError) as e:  # JSONDecodeError is a ValueError
        raise BundleDamaged(meta_file, f"{type(e).__name__}: {e}") from None
    try:
        model = onnx.load(bundle / "model.onnx")
    except Exception as e:  # noqa: BLE001 - protobuf's decode errors share no public base
        raise BundleDamaged(bundle / "model.onnx", f"{type(e).__name__}: {e}") from None
    data = bundle / DATA_SET
    takes = [i.name for i in model.graph.input if i.name not in model_initializers(model)]
    for k in range(len(takes)):
        path = data / f"input_{k}.pb"
        if not path.exists():
            raise BundleDamaged(path, f"missing: the model takes {len(takes)} inputs")
        try:
            onnx.numpy_helper.to_array(onnx.load_tensor(path))
        except Exception as e:  # noqa: BLE001 - as above
            raise BundleDamaged(path, f"not a tensor: {type(e).__name__}: {e}") from None
    inputs = read_inputs(data)
    missing = sorted(set(takes) - set(inputs))
    if missing:
        raise BundleDamaged(data, f"no input named {missing[0]!r}, which the model takes")
    return meta, model, inputs


def model_initializers(model: onnx.ModelProto) -> set[str]:
    return {t.name for t in model.graph.initializer}


def replay_bundle(bundle: Path, timeout: float | None = None) -> tuple[Replayed, str]:
    """Judge ``bundle`` again on its backends; ``BundleDamaged`` (exit 2) if it cannot be
    read, before any backend starts."""
    meta, model, inputs = load_bundle(bundle)
    limit = timeout if timeout is not None else float(meta.get("timeout", 30.0))
    backend, reference = meta["backend"], meta["reference"]
    earlier = earlier_models(bundle, meta)
    with BackendPool([reference, backend], timeout=limit) as pool:
        return _judge(meta, model, inputs, pool, earlier, bundle.name == REDUCED)


def earlier_models(bundle: Path, meta: dict) -> list[tuple[bytes, dict]]:
    """A bug that depends on an earlier model: the models to run first (``earlier/<k>/``),
    serialized, with their inputs; ``BundleDamaged`` for one that cannot be read."""
    earlier = []
    for folder in meta.get("earlier", []):
        try:
            m = onnx.load(bundle / folder / "model.onnx")
            earlier.append((m.SerializeToString(), read_inputs(bundle / folder / DATA_SET)))
        except Exception as e:  # noqa: BLE001 - as in load_bundle
            raise BundleDamaged(bundle / folder, f"{type(e).__name__}: {e}") from None
    return earlier


def _judge(
    meta: dict,
    model: onnx.ModelProto,
    inputs: dict,
    pool: BackendPool,
    earlier: list[tuple[bytes, dict]] | None = None,
    bundle_is_reduced: bool = False,
) -> tuple[Replayed, str]:
    """Judge the bundle's model again: after its ``earlier`` models (a state-dependent bug)
    in the backend's process; an intermittent bug up to its ``repro_runs`` times, until it
    shows (its signature's family: where a flaky value is localized varies)."""
    backend, reference = meta["backend"], meta["reference"]

    tolerance = {k: tuple(v) for k, v in meta.get("tolerance", {}).items()}
    if meta.get("kind") == "precision":
        # The stored float32 tolerance is the blamed op's budget (repro.py compares by it);
        # the campaign found the finding inside the end-to-end tolerance and localized it,
        # so the judge does that again (a tolerance as tight as the budget would call it a
        # plain wrong value, and an ill-conditioned op's rounding a bug).
        tolerance["float32"] = DEFAULT_TOLERANCE["float32"]
    cfg = OracleConfig(tolerance=tolerance)
    for data, feeds in earlier or []:
        pool.run_one(backend, data, feeds)
    flaky = meta.get("reproducibility") == "intermittent"
    found = meta.get("confirmed", {})
    runs = int(found.get("repro_runs", found.get("attempts", 1))) if flaky else 1
    # the ONNX reference evaluator's documented fault on this model: the campaign files no
    # mismatch against it now, and a bundle filed before it was documented (an NLL loss at
    # ignore_index=-1, against ORT) replays as "cannot tell", not as the backend's bug
    fault = reference_fault(model) if is_reference_evaluator(reference) else None
    seen = []
    for _ in range(max(1, runs)):
        outcomes = pool.run_all(model.SerializeToString(), inputs)
        a = Judge(reference, cfg, pool).assess(model, inputs, outcomes)[backend]
        seen.append(a)
        # (a bundle written before a normalization rule changed holds the earlier form)
        sig = a.signature
        forms = set(earlier_forms(sig, a.judgement.message)) if sig is not None else set()
        # a reduced/ folder may show the op's wrong output as another kind (its repro.py
        # expects that one: bundle._write_repro); the bundle's own model as it was filed
        twins = bundle_is_reduced and any(same_fault(meta["signature"], s) for s in forms)
        same = meta["signature"] in forms or twins or (
            flaky and family(meta["signature"]) in {family(s) for s in forms}
        )
        if same and fault is not None and a.judgement.verdict == Verdict.MISMATCH:
            return Replayed.DIFFERENT, (
                f"cannot tell: the reference {reference} is known wrong on this model "
                f"({fault.op}: {fault.reason}); it is no bug of {backend} until another "
                "reference says so"
            )
        if same:
            v = a.judgement
            rate = f" (intermittent: in run {len(seen)} of up to {runs})" if flaky else ""
            line = f"REPRODUCES: {v.verdict} at {v.stage}{rate}: {v.message[:300]}"
            return Replayed.REPRODUCES, line
    a = next((x for x in seen if x.judgement.is_bug), seen[-1])
    v = a.judgement
    said = " | ".join(ln.strip() for ln in v.message.splitlines() if ln.strip())[:300]
    # Neither is a fix: a backend that now refuses the model (or an adapter that now reads
    # its error as a form it does not take), and a reference that fails on it, as the
    # bundle's own repro.py says (a team checking a release must not close such a bug).
    if v.verdict == Verdict.UNSUPPORTED:
        return Replayed.DIFFERENT, (
            f"fails differently: {backend} now rejects the model as unsupported at "
            f"{v.stage or 'compile'} stage: {said}"
        )
    if v.verdict == Verdict.INVALID_REFERENCE:
        return Replayed.DIFFERENT, (
            f"cannot tell: the reference {reference} fails on the model now: {said}"
        )
    if not v.is_bug:
        runs_note = f" in {len(seen)} runs (intermittent: fixed or not seen)" if flaky else ""
        return Replayed.FIXED, f"does not reproduce{runs_note}: {backend} gives {v.verdict}"
    return Replayed.DIFFERENT, f"fails differently: {a.signature}\n(bundle: {meta['signature']})"
