#!/usr/bin/env python3
"""Reproducer for onnxfuzz bug {bug_id}: {verdict} in {backend} at {stage} stage.

Needs only onnx, numpy and the backends involved ({libraries}); the adapters are copied
below so this file stands alone. Exits 1 while the bug reproduces, 0 once it does not.

    python repro.py
"""

import multiprocessing as mp
import os
import sys
import types

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECT = {expect!r}
ADAPTERS = {adapters!r}


def _shim_onnxfuzz():
    # Adapters may raise onnxfuzz.backend.Unsupported; stand in for it if onnxfuzz is absent.
    try:
        import onnxfuzz.backend  # noqa: F401
    except ImportError:
        pkg = types.ModuleType("onnxfuzz")
        mod = types.ModuleType("onnxfuzz.backend")
        mod.Unsupported = type("Unsupported", (Exception,), {{}})
        pkg.backend = mod
        sys.modules["onnxfuzz"], sys.modules["onnxfuzz.backend"] = pkg, mod


def load(label):
    _shim_onnxfuzz()
    source, cls_name, options = ADAPTERS[label]
    namespace = {{"__name__": "repro_adapter"}}
    exec(compile(source, f"<adapter {{label}}>", "exec"), namespace)
    return namespace[cls_name](**options)


def feeds():
    data = os.path.join(HERE, "test_data_set_0")
    out, k = {{}}, 0
    while os.path.exists(os.path.join(data, f"input_{{k}}.pb")):
        t = onnx.TensorProto()
        with open(os.path.join(data, f"input_{{k}}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        out[t.name] = numpy_helper.to_array(t)
        k += 1
    return out


def _child(label, queue):
    backend = load(label)
    model = onnx.load(os.path.join(HERE, "model.onnx"))
    stage = "compile"
    try:
        exe = backend.compile(model)
        stage = "run"
        outs = backend.run(exe, feeds())
        queue.put(("ok", None, {{k: np.asarray(v) for k, v in outs.items()}}))
    except Exception as e:
        queue.put(("error", stage, f"{{type(e).__name__}}: {{e}}"))


def run(label, timeout=EXPECT["timeout"]):
    """(status, stage, payload) with status ok | error | crash | timeout."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(label, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        return "timeout", None, f"no result within {{timeout}} s"
    if not queue.empty():
        return queue.get()
    return "crash", None, f"exit code {{proc.exitcode}}"


def mismatch(want, got):
    for name in EXPECT["outputs"]:
        w, g = want.get(name), got.get(name)
        if w is None:
            continue
        if g is None or g.dtype != w.dtype or g.shape != w.shape:
            return f"{{name}}: {{None if g is None else (g.dtype, g.shape)}} vs {{(w.dtype, w.shape)}}"
        tol = EXPECT["tolerance"].get(w.dtype.name)
        if tol is None:
            if (w != g).any():
                return f"{{name}}: {{int((w != g).sum())}} elements differ"
            continue
        wf, gf = w.astype(np.float64), g.astype(np.float64)
        ok = (np.abs(gf - wf) <= tol[0] + tol[1] * np.abs(wf)) | (np.isnan(wf) & np.isnan(gf))
        ok |= np.isinf(wf) & (wf == gf)
        if not ok.all():
            err = float(np.nanmax(np.abs(gf - wf)[~ok]))
            return f"{{name}}: {{int((~ok).sum())}}/{{w.size}} elements off, max abs err {{err:.4g}}"
    return None


def main():
    backend, reference = EXPECT["backend"], EXPECT["reference"]
    if EXPECT["verdict"] == "mismatch":
        ref = run(reference)
        if ref[0] != "ok":
            print(f"reference {{reference}} failed: {{ref}}")
            return 0
        got = run(backend)
        if got[0] != "ok":
            print(f"{{backend}} now fails differently: {{got[0]}} at {{got[1]}}: {{got[2]}}")
            return 1
        diff = mismatch(ref[2], got[2])
        print(f"REPRODUCES: {{backend}} differs from {{reference}}: {{diff}}" if diff
              else f"does not reproduce: {{backend}} agrees with {{reference}}")
        return 1 if diff else 0
    status, stage, text = run(backend)
    if status == "ok":
        print(f"does not reproduce: {{backend}} ran to completion")
        return 0
    same = status in ("crash", "timeout") or stage == EXPECT["stage"]
    print(("REPRODUCES" if same else "fails differently") + f": {{status}} at {{stage}}: {{text}}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
