"""The campaign summary lists what each backend did not support, by reason: a crash worded
like missing support (RuntimeError "kernel: unsupported broadcast") counted as unsupported
was a bare count before, and nothing said it (audit 15)."""

from __future__ import annotations

from pathlib import Path

from runs import finished

from onnxfuzz.run.campaign import CampaignOptions
from onnxfuzz.store.db import Store
from onnxfuzz.store.report import print_summary

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"


def _summary(tmp_path: Path, adapter: str, capsys) -> str:
    opts = CampaignOptions(
        backends=["ort", f"{ADAPTERS}:{adapter}:op=MatMul"],
        tests=6,
        timeout=10.0,
        probe="off",
        generator={"min_nodes": 1, "max_nodes": 2, "ops": ["MatMul", "Relu"]},
    )
    c = finished(tmp_path / adapter, opts)
    capsys.readouterr()
    store = Store(c.out / "campaign.db")
    try:
        print_summary(store, c.out, c.labels, c.opts.reference_label)
    finally:
        store.close()
    return capsys.readouterr().out


def test_a_crash_worded_as_unsupported_is_listed_by_reason_and_pointed_out(
    tmp_path, capsys
) -> None:
    shown = _summary(tmp_path, "UnsupportedInWords", capsys)
    line = next(ln for ln in shown.splitlines() if ln.startswith("unsupported on "))
    assert "unsupported-in-words" in line and "1 reason" in line, line
    assert "'RuntimeError: kernel: unsupported broadcast'" in line, line
    assert "generic Python error (RuntimeError)" in shown and "is_unsupported" in shown, shown


def test_missing_support_raised_as_such_is_listed_without_a_warning(tmp_path, capsys) -> None:
    shown = _summary(tmp_path, "Unsupported", capsys)
    line = next(ln for ln in shown.splitlines() if ln.startswith("unsupported on "))
    assert "NotImplementedError: MatMul is not implemented" in line, line
    assert "generic Python error" not in shown
