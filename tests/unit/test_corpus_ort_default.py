"""A valid corpus case that makes ONNX Runtime's default session (ORT_ENABLE_ALL) crash is
marked: index.json's ``ort_default_fault`` and the corpus README name it, so a user whose
runner dies there knows the fault is ORT's. The expected outputs (an unoptimized session)
are still written, and the crash, in a child process, costs the corpus nothing.

The model is an audit's (``--nodes 20:30``, seed 160): ONNX Runtime 1.31 segfaults running
it at ORT_ENABLE_ALL and runs it with optimizations off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from onnxfuzz.generate.build.generator import Case, Generator
from onnxfuzz.generate.corpus.ort_child import OrtChild
from onnxfuzz.generate.corpus.readme import corpus_readme
from onnxfuzz.generate.corpus.testdata import DATA_SET, read_inputs
from onnxfuzz.generate.corpus.validate import run_reference
from onnxfuzz.generate.corpus.write import write_case
from onnxfuzz.generate.lang.config import Config

CRASHER = Path(__file__).parent / "data" / "ort_default_segfault"


def _crasher() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    return onnx.load(CRASHER / "model.onnx"), read_inputs(CRASHER / DATA_SET)


class _Stored(Case):
    """A case whose inputs are the stored ones."""

    feeds: dict[str, np.ndarray] = {}

    def make_inputs(self, seed: int = 0) -> dict[str, np.ndarray]:
        return self.feeds


def test_a_default_session_crash_is_marked_and_the_child_goes_on() -> None:
    model, feeds = _crasher()
    with OrtChild() as ort:
        got = ort.run(model.SerializeToString(), feeds)
        # the fault this test needs is still in ORT: the default session died, by a signal
        assert got.default_fault is not None and "killed by signal" in got.default_fault, got
        assert got.error is None and got.outputs is not None
        want = run_reference(model, feeds)  # this process's unoptimized run: the same
        assert got.outputs.keys() == want.keys()
        for name, value in want.items():
            assert np.array_equal(got.outputs[name], value, equal_nan=True), name
        # the next case runs in a fresh child, and a model ORT runs at both levels is clean
        plain = Generator(Config(min_nodes=2, max_nodes=3)).generate(0)
        again = ort.run(plain.model.SerializeToString(), plain.make_inputs(plain.seed))
        assert again.outputs is not None and again.default_fault is None, again
        assert ort.starts == 2


def test_write_case_records_the_fault_keeps_the_outputs_and_the_readme_names_it(
    tmp_path: Path,
) -> None:
    model, feeds = _crasher()
    names = [i.name for i in model.graph.input if i.name in feeds]
    case = _Stored(model, 160, [n.op_type for n in model.graph.node], [], [], {})
    case.feeds = feeds
    case.inputs = [(n, 0, ()) for n in names]
    with OrtChild() as ort:
        entry = write_case(tmp_path / "test_000000", case, reference=True, ort=ort)
    assert "killed by signal" in entry["ort_default_fault"], entry
    assert "reference_error" not in entry
    outs = sorted((tmp_path / "test_000000" / DATA_SET).glob("output_*.pb"))
    assert len(outs) == len(model.graph.output)
    text = corpus_readme({"seed": 0}, {"test_000000": entry, "test_000001": {"opset": 21}}, 0)
    said = next(p for p in text.split("\n\n") if "ORT_ENABLE_ALL" in p)
    assert said.startswith("1 valid case makes ONNX Runtime's default session"), said
    assert "(test_000000)" in said and "test_000001" not in said
