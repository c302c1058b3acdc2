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


def test_a_backend_with_its_optimizations_off_beside_itself_is_the_reference() -> None:
    """`--backend ort --backend ort:opt=none` meant ORT's optimizers tested against ORT
    without them, and made optimized ORT the reference: its optimizers' crashes were the
    reference's own failures, set aside unreduced (an audit's 13 ORT optimizer bundles,
    all in reference-bugs/). Otherwise the first backend stays the reference."""
    from onnxfuzz.backend import default_reference

    assert default_reference(["ort", "ort:opt=none"]) == "ort:opt=none"
    assert default_reference(["ort:opt=none", "ort"]) == "ort:opt=none"
    assert default_reference(["tvm", "torch", "tvm:opt_level=0"]) == "tvm:opt_level=0"
    assert default_reference(["a=ort", "b=ort:opt=none"]) == "b=ort:opt=none"
    # not the same backend otherwise, or no optimizations-off twin: the first
    assert default_reference(["ort:isolate=1", "ort:opt=none"]) == "ort:isolate=1"
    assert default_reference(["ort", "ort:opt=basic"]) == "ort"
    assert default_reference(["tvm", "ort:opt=none"]) == "tvm"
    # two twins: nothing singles one out
    assert default_reference(["ort:opt=none", "tvm:opt_level=0", "ort", "tvm"]) == "ort:opt=none"
    assert default_reference(["tvm:opt_level=0", "ort:opt=none", "ort", "tvm"]) == "tvm:opt_level=0"
