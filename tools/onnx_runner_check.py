"""Run a corpus from ``onnxfuzz generate`` through ONNX's own test runner.

    python tools/onnx_runner_check.py CORPUS [--backend onnxruntime.backend] [--ignore-data-json]

``onnx.backend.test.runner.Runner`` with ONNX Runtime's backend (its default graph
optimizations), every ``test_*`` case of CORPUS, each at its ``data.json`` tolerance or the
runner's default (rtol 1e-3, atol 1e-7). Prints pass/fail/error/skip counts and each
failure's last line. A case that fails is run again through ONNX Runtime with its graph
optimizations off (how the corpus's reference outputs were made, so the layout, input order
and tolerance are checked again): one that passes then is a difference of ORT's optimizer
(a fusion crash, an invalid rewritten graph, a fused kernel's rounding), listed as such; a
case that fails both ways is a corpus defect. Exits 1 if there is any. ``--ignore-data-json``
compares every case at the runner's defaults (to see what the per-case tolerances change).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import unittest
import warnings
from pathlib import Path

from onnx.backend.test.loader import load_model_tests
from onnx.backend.test.runner import Runner


def corpus_suite(corpus: Path, backend: object, ignore_data_json: bool = False):
    """A unittest suite of the corpus's cases, as ONNX's runner builds it."""
    runner = Runner(backend, __name__)
    runner._test_items.clear()  # only the corpus: not ONNX's own node and model tests
    for case in load_model_tests(data_dir=str(corpus.resolve().parent), kind=corpus.name):
        if ignore_data_json:
            case = dataclasses.replace(case, rtol=1e-3, atol=1e-7)
        runner._add_model_test(case, "Corpus")
    return runner.test_suite


def passes_unoptimized(case_dir: Path, rtol: float, atol: float) -> bool:
    """The case through ONNX Runtime with graph optimizations off, judged by the runner's own
    comparison at the case's tolerance."""
    import onnx
    import onnxruntime as ort

    from onnxfuzz.generate.corpus.testdata import DATA_SET, read_inputs

    model = onnx.load(case_dir / "model.onnx")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), so, providers=["CPUExecutionProvider"]
    )
    got = session.run(None, read_inputs(case_dir / DATA_SET))
    want = []
    for k in range(len(model.graph.output)):
        t = onnx.TensorProto()
        t.ParseFromString((case_dir / DATA_SET / f"output_{k}.pb").read_bytes())
        want.append(onnx.numpy_helper.to_array(t))
    try:
        Runner.assert_similar_outputs(want, got, rtol=rtol, atol=atol)
    except AssertionError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--backend", default="onnxruntime.backend")
    ap.add_argument("--ignore-data-json", action="store_true")
    args = ap.parse_args(argv)
    backend = importlib.import_module(args.backend)
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)  # its optimizer's warnings are not results
    warnings.simplefilter("ignore")
    suite = corpus_suite(args.corpus, backend, args.ignore_data_json)
    result = unittest.TestResult()
    suite.run(result)
    tolerance = {
        case.name: (case.rtol, case.atol)
        for case in load_model_tests(
            data_dir=str(args.corpus.resolve().parent), kind=args.corpus.name
        )
    }
    defects = 0
    for test, trace in result.failures + result.errors:
        name = test.id().rsplit(".", 1)[-1].removesuffix("_cpu")
        rtol, atol = (1e-3, 1e-7) if args.ignore_data_json else tolerance[name]
        last = [line for line in trace.strip().splitlines() if line.strip()][-1]
        if passes_unoptimized(args.corpus / name, rtol, atol):
            print(f"{name}: ORT optimizer only (passes with optimizations off): {last[:160]}")
        else:
            defects += 1
            print(f"{name}: CORPUS DEFECT (fails with optimizations off too): {last[:160]}")
    bad = len(result.failures) + len(result.errors)
    print(
        f"{result.testsRun} run: {result.testsRun - bad - len(result.skipped)} passed, "
        f"{len(result.failures)} failed, {len(result.errors)} errors "
        f"({bad - defects} of them ORT optimizer only, {defects} corpus defects), "
        f"{len(result.skipped)} skipped (no such device)"
    )
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
