"""A backend is called by its name everywhere a user reads: tables, bug ids, bundles."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxfuzz.backend import BackendError, display_names, parse_backend
from onnxfuzz.cli.main import main
from onnxfuzz.store.db import Store

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
FLAGS = ["--tests", "25", "--seed", "3", "--nodes", "2:5", "--ops", "Mul,Add,Relu,Neg"]
FLAGS += ["--dtypes", "float32", "--probe", "off", "--no-reduce"]


def _fuzz(out: Path, backend: str, capsys) -> str:
    capsys.readouterr()
    rc = main(["fuzz", "--backend", "ort", "--backend", backend, "--out", str(out), *FLAGS])
    assert rc == 1  # the planted bug was found
    return capsys.readouterr().out


def test_an_ad_hoc_adapter_is_called_by_its_name(tmp_path, capsys) -> None:
    out = tmp_path / "c"
    shown = _fuzz(out, f"{ADAPTERS}:Raise:op=Mul", capsys)
    assert "raise:op=Mul" in shown  # the adapter's `name`, with its options
    assert str(ADAPTERS) not in shown and "adapters.py" not in shown
    bundles = sorted(p.name for p in (out / "bugs").iterdir())
    assert bundles and all(b.startswith("raise-op-Mul-") for b in bundles), bundles
    assert main(["triage", str(out)]) == 0
    table = (out / "triage.md").read_text()
    assert "raise:op=Mul" in table and "adapters.py" not in table
    log = next((out / "bugs").iterdir()) / "log.txt"
    assert log.read_text().startswith("crash in raise:op=Mul at compile")


def test_name_equals_spec_names_a_backend(tmp_path, capsys) -> None:
    out = tmp_path / "c"
    shown = _fuzz(out, f"npu-v2={ADAPTERS}:Raise:op=Mul", capsys)
    assert "npu-v2" in shown and "raise:op=Mul" not in shown
    assert all(p.name.startswith("npu-v2-") for p in (out / "bugs").iterdir())
    store = Store(out / "campaign.db")
    try:  # stored by its full spec: --resume and replay load the adapter from it
        assert f"npu-v2={ADAPTERS}:Raise:op=Mul" in {b["backend"] for b in store.bugs()}
    finally:
        store.close()
    rc = main(["replay", str(next((out / "bugs").iterdir()))])
    assert rc == 1  # still reproduces, loaded from the stored spec


def test_names_parse_and_never_clash() -> None:
    ref = parse_backend("npu=x.py:Cls:opt=2")
    assert (ref.name, ref.target, ref.options) == ("npu", "x.py:Cls", {"opt": "2"})
    assert parse_backend("ort:opt=none").name is None  # an option's '=' is no name
    with pytest.raises(BackendError, match="letters, digits"):
        parse_backend("my npu=x.py:Cls")
    labels = ["ort", "a/x.py:Cls", "b/y.py:Cls2"]
    names = display_names(labels, {"ort": "ort", "a/x.py:Cls": "npu", "b/y.py:Cls2": "npu"})
    assert names == {"ort": "ort", "a/x.py:Cls": "a/x.py:Cls", "b/y.py:Cls2": "b/y.py:Cls2"}


def test_a_bad_name_is_a_one_line_error(tmp_path, capsys) -> None:
    out = str(tmp_path / "c")
    rc = main(["fuzz", "--backend", "ort", "--backend", "my npu=ort", "--out", out, *FLAGS])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "letters, digits" in err
