"""A corpus folder says how to run it: its README.md names the reference that made the
expected outputs, the tolerances, the cases without outputs, and a runner snippet that
runs as written (here with ONNX Runtime's backend, in a fresh process)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from onnxfuzz.cli.main import main


def test_the_corpus_readme_says_how_to_run_it_and_its_snippet_runs(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    assert main(["generate", "--count", "12", "--out", str(out), "--nodes", "1:4"]) == 0
    text = (out / "README.md").read_text()
    import onnxruntime

    assert f"ONNX Runtime {onnxruntime.__version__} CPU, graph optimizations off" in text
    assert "rtol 1e-3, atol 1e-7" in text and "12 cases" in text
    snippet = re.search(r"```python\n(.*?)```", text, re.S)
    assert snippet is not None, text
    code = (
        snippet.group(1)
        .replace("YourBackend", "onnxruntime.backend")
        .replace("PARENT_OF_THIS_FOLDER", str(tmp_path))
        .replace("THIS_FOLDER", "corpus")
    )
    code = "import sys, onnxruntime.backend\n" + code.replace(
        "unittest.TextTestRunner().run(runner.test_suite)",
        "r = unittest.TextTestRunner().run(runner.test_suite)\n"
        "print('RAN', r.testsRun, 'FAILED', len(r.failures) + len(r.errors))",
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    said = re.search(r"RAN (\d+) FAILED (\d+)", ran.stdout)
    assert said is not None, (ran.stdout, ran.stderr[-2000:])
    # every case, once per device the runner knows (CPU here), none failing
    assert int(said.group(1)) >= 12 and said.group(2) == "0", (ran.stdout, ran.stderr[-3000:])
