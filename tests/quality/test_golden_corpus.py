"""Byte-identical generation across refactors: the digests of tests/quality/data/golden_corpus.json
were recorded before the generate/ split (issue 21) and must not change unless a commit says
why the bytes of generated models changed (then `python tools/golden_corpus.py --write`)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "golden_corpus.py"


def _tool():
    spec = importlib.util.spec_from_file_location("golden_corpus", TOOL)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GOLDEN = _tool()


@pytest.mark.parametrize("row", sorted(GOLDEN.ROWS))
def test_generated_bytes_match_the_recorded_digest(row: str) -> None:
    recorded = json.loads(GOLDEN.GOLDEN.read_text())
    assert GOLDEN.digest(*GOLDEN.ROWS[row]) == recorded[row], (
        f"generation changed the bytes of row {row!r}: a refactor must not; if the change "
        "is meant, say why in the commit and run `python tools/golden_corpus.py --write`"
    )


def test_the_digest_sees_one_changed_seed() -> None:
    # The false direction: a row over other seeds has another digest.
    kwargs, first, count = GOLDEN.ROWS["default"]
    assert GOLDEN.digest(kwargs, first + 1, count) != GOLDEN.digest(kwargs, first, count)
