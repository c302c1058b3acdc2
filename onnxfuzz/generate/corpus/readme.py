"""``DIR/README.md`` of an exported corpus: what a compiler engineer needs to run it
without reading onnxfuzz's own README (an audit found the folder documented nothing: no
tolerance, no reference producer, no word on the cases without expected outputs)."""

from __future__ import annotations

from typing import Any

import onnx

from onnxfuzz import __version__
from onnxfuzz.generate.lang.config import ORT_MAX_OPSET

NAME = "README.md"


def _ort_version() -> str:
    try:
        import onnxruntime

        return str(onnxruntime.__version__)
    except ImportError:  # --no-reference on a machine without it
        return "not installed"


def _cancellation(cases: dict[str, dict[str, Any]]) -> list[str]:
    """The README's paragraph on float32 outputs that cancel (``corpus.tolerance``)."""
    named = sorted(name for name, e in cases.items() if "cancellation_atol" in e)
    more = f" and {len(named) - 10} more" if len(named) > 10 else ""
    which = f" ({', '.join(named[:10])}{more})" if named else ""
    return [
        "A float32 output that is the difference of much larger terms (it cancels to near "
        "zero) is rounding error in any float32 runtime, and atol 1e-7 can fail a right "
        "answer there. Each float32 case was also run in float64 (the ONNX reference "
        "evaluator with every float32 tensor, weight and cast made float64: the exact "
        "answer) and in float32 by that evaluator. Where either fails the defaults against "
        "the expected outputs, and both differ from the exact answer by no more than float32 "
        "rounding can (2^12 ulps of the largest magnitude feeding the output), the case's "
        "`data.json` sets atol to 4 times the largest difference measured (two right "
        "runtimes, each that far from the exact answer, may differ by twice it) and rtol "
        f"1e-3: {len(named)} case{'' if len(named) == 1 else 's'}{which}, `cancellation_atol` "
        "in `index.json`. A wrong value of the size of the values involved still fails. A "
        "cancellation neither run shows "
        "(above opset 26, where the evaluator made the expected outputs, it is the only "
        "float32 run) can still fail at atol 1e-7: judge such a failure by its size.",
    ]


def corpus_readme(options: dict[str, Any], cases: dict[str, dict[str, Any]], float16: int) -> str:
    """The README's text for a corpus of ``cases`` (index entries) made with ``options``;
    ``float16``: how many cases have a float16 ``data.json`` (the others with one have
    ``cancellation_atol`` in their entry)."""
    missing = sorted(name for name, e in cases.items() if "reference_error" in e)
    with_outputs = options.get("reference", True)
    opsets = sorted({int(e.get("opset", 0)) for e in cases.values()})
    beyond = [o for o in opsets if o > ORT_MAX_OPSET]
    lines = [
        "# ONNX test corpus (onnxfuzz generate)",
        "",
        f"{len(cases)} cases in ONNX's backend-test layout: `test_<i>/model.onnx` and "
        "`test_<i>/test_data_set_0/input_<k>.pb`"
        + (", `output_<k>.pb`" if with_outputs else "")
        + f". Case i is seed {options.get('seed', 0)} + i; `index.json` gives each case's "
        "seed, ops, element types and opset, and the options the corpus was made with "
        "(rerun the same `onnxfuzz generate` command to continue it, byte for byte).",
        "",
        f"Made with onnxfuzz {__version__}, onnx {onnx.__version__}.",
    ]
    if with_outputs:
        producer = (
            f"ONNX Runtime {_ort_version()} CPU, graph optimizations off, one thread"
            + (
                f"; at opset {', '.join(map(str, beyond))} (past what ONNX Runtime runs) "
                "the ONNX reference evaluator"
                if beyond
                else ""
            )
        )
        lines += [
            "",
            "## Expected outputs",
            "",
            f"From {producer}. Compare with ONNX's own runner, which loads folders named "
            "`test_*` (your backend: an `onnx.backend.base.Backend`):",
            "",
            "```python",
            "import unittest",
            "from onnx.backend.test.loader import load_model_tests",
            "from onnx.backend.test.runner import Runner",
            "",
            "runner = Runner(YourBackend, __name__)",
            "runner._test_items.clear()  # this corpus only, not ONNX's own tests",
            'for case in load_model_tests(data_dir="PARENT_OF_THIS_FOLDER", kind="THIS_FOLDER"):',
            '    runner._add_model_test(case, "Corpus")',
            "unittest.TextTestRunner().run(runner.test_suite)",
            "```",
            "",
            "Tolerance: the runner's defaults (rtol 1e-3, atol 1e-7), except in the "
            f"{float16} cases with a float16 `data.json`: their model computes in float16 or "
            "bfloat16, and two right runtimes differ there by more (atol 1e-2, rtol 2e-2). "
            "The runner applies one tolerance to every output of a case, integer ones too.",
            "",
            *_cancellation(cases),
        ]
        if missing:
            more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
            shown = ", ".join(missing[:10]) + more
            lines += [
                "",
                f"{len(missing)} cases have no expected outputs ({shown}): `index.json` says "
                "why in their `reference_error` (a documented fault of the reference "
                "evaluator, a float16 comparison ONNX Runtime computes on values it kept in "
                "float32, an op whose meaning the spec leaves disputed, such as RoiAlign "
                "mode='max' (onnx/onnx#4764), an error of the reference). ONNX's runner fails "
                "them "
                "(\"ACTUAL: n DESIRED: 0\"): skip them, or use them to check that your "
                "backend compiles and runs the model.",
            ]
        faults = sorted(name for name, e in cases.items() if "ort_default_fault" in e)
        if faults:
            more = f" and {len(faults) - 10} more" if len(faults) > 10 else ""
            lines += [
                "",
                f"{len(faults)} valid {'case makes' if len(faults) == 1 else 'cases make'} "
                "ONNX Runtime's default session (graph "
                "optimizations ORT_ENABLE_ALL) fail or crash the process "
                f"({', '.join(faults[:10])}{more}): `index.json` says how in their "
                "`ort_default_fault`. Their expected outputs are right (the unoptimized "
                "session made them); a runner built on ORT's default session that errors or "
                "dies there meets an ONNX Runtime bug, not its own. Run such a runner in a "
                "process of its own, or skip these cases.",
            ]
        elif any(int(e.get("opset", 0)) <= ORT_MAX_OPSET for e in cases.values()):
            lines += [
                "",
                "Each case whose expected outputs ONNX Runtime made was also run through its "
                "default session (graph optimizations ORT_ENABLE_ALL), in a process of its "
                "own: none fails there.",
            ]
    else:
        lines += ["", "No expected outputs (`--no-reference`): the models and their inputs only."]
    lines += [
        "",
        "Every model passes `onnx.checker.check_model(full_check=True)` and strict shape "
        "inference. A converter that builds a training-mode module (onnx2torch: call "
        "`.eval()`) makes Dropout and BatchNormalization differ.",
        "",
    ]
    return "\n".join(lines)
