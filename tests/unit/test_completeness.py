"""Spec completeness against ONNX's node tests: each single-node case for a covered op
lies inside the spec's domains, unless an exclusion with a reason applies."""

from __future__ import annotations

import pytest

from onnxfuzz.generate.lang.spec import load_specs
from onnxfuzz.generate.measure.completeness import check_case, node_cases

CASES = [c for c in node_cases() if c.op in load_specs()]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case_inside_spec(case) -> None:
    outcome = check_case(case)
    if outcome.status == "excluded":  # deliberately not generated: nothing was checked
        pytest.skip(f"excluded: {outcome.reason}")
    assert outcome.status == "inside", f"{outcome.status}: {outcome.reason}"


def test_completeness_report_is_current() -> None:
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parents[2] / "tools" / "spec_completeness.py"
    r = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
