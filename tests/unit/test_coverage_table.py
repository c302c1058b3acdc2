"""docs/coverage.md is what `onnxfuzz specs --table` generates from the registry now."""

from pathlib import Path

from onnxfuzz.coverage import markdown


def test_coverage_table_is_current() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "coverage.md"
    assert doc.read_text() == markdown(), (
        "docs/coverage.md is stale: run `onnxfuzz specs --table > docs/coverage.md`"
    )
