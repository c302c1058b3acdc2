"""docs/coverage.md is what `onnxfuzz specs --table` generates from the registry now."""

from pathlib import Path

from onnxfuzz.generate.measure.coverage import markdown


def test_coverage_table_is_current() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"
    assert doc.read_text() == markdown(), (
        "docs/coverage.md is stale: run `onnxfuzz specs --table > docs/coverage.md`"
    )


def test_every_operator_is_covered_or_listed_with_a_plan() -> None:
    import onnx.defs

    from onnxfuzz.generate.lang.spec import load_specs

    doc = (Path(__file__).resolve().parents[2] / "docs" / "uncovered.md").read_text()
    listed = {
        name.strip()
        for line in doc.splitlines()
        if line.startswith("| ")
        for name in line.split("|")[1].split(",")
    }
    ops = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")}
    missing = sorted(ops - set(load_specs()) - listed)
    assert not missing, f"neither a spec nor a plan in docs/uncovered.md: {missing}"
