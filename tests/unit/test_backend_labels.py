"""Backend labels are parsed per test and backend (the judge, the attribution): what that
costs must not grow with the installed distributions."""

from __future__ import annotations

from importlib import metadata

from onnxfuzz.backend import parse_backend


def test_parsing_a_label_reads_the_installed_entry_points_once(monkeypatch) -> None:
    """Each read of the entry points parses every installed distribution's metadata; the
    judge parsed labels per test and backend, and that was 77 % of an ORT-vs-ORT
    campaign's time (py-spy; 800 tests took 20.7 s, 9.4 s once read once)."""
    assert parse_backend("ort").target == "ort"  # the first read
    reads: list[dict] = []
    real = metadata.entry_points

    def counting(**kw):
        reads.append(kw)
        return real(**kw)

    monkeypatch.setattr(metadata, "entry_points", counting)
    labels = ["ort", "ort:opt=none", "onnx-reference", "tvm:opt_level=0", "npu=ort:opt=none"]
    parsed = [parse_backend(label) for label in labels * 40]
    assert not reads
    assert [p.target for p in parsed[:5]] == ["ort", "ort", "onnx-reference", "tvm", "ort"]
    assert parsed[1].options == {"opt": "none"} and parsed[4].name == "npu"
