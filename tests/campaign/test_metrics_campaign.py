"""``onnxfuzz metrics RUN_DIR`` on a real campaign folder (issue 24): per backend, the
optimizations that fired (with their test counts), those that never fired, and the distinct
fused patterns, as a table and as JSON, read back against campaign.db itself; bad paths are
one line and exit 2."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from onnxfuzz.cli.main import main
from onnxfuzz.store.db import Store

TVM = "tvm:pipeline=fuse"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    """8 tests of ORT against TVM's fusing pipeline, over ops that both fuse."""
    out = tmp_path_factory.mktemp("metrics") / "camp"
    argv = ["fuzz", "--backend", "ort", "--backend", TVM, "--tests", "8", "--seed", "5"]
    argv += ["--nodes", "2:5", "--ops", "MatMul,Add,Relu,Sigmoid,Mul,Tanh", "--probe", "off"]
    assert main([*argv, "--no-reduce", "--confirm", "0", "--out", str(out)]) in (0, 1)
    return out


def _stored(out: Path) -> dict[tuple[str, str], tuple[dict[str, int], list[str]]]:
    """(backend, kind) -> (fired name -> tests, never-fired names), read with sqlite3."""
    db = sqlite3.connect(out / "campaign.db")
    got: dict[tuple[str, str], tuple[dict[str, int], list[str]]] = {}
    try:
        for b, k, n, tests in db.execute("SELECT backend, kind, name, tests FROM optimizations"):
            fired, never = got.setdefault((b, k), ({}, []))
            if tests:
                fired[n] = tests
            else:
                never.append(n)
    finally:
        db.close()
    return got


def test_metrics_of_a_campaign_as_json_matches_campaign_db(campaign: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["metrics", "--json", str(campaign)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert list(got) == ["campaigns"]  # no model paths given: no diversity of models
    rec = got["campaigns"][str(campaign)]
    assert rec["tests"] == 8
    stored = _stored(campaign)
    assert stored, "the campaign stored optimization feedback"
    for (backend, kind), (fired, never) in stored.items():
        k = rec["backends"][backend]["kinds"][kind]
        assert k["fired"] == fired and k["never_fired"] == sorted(never)
        assert not set(k["fired"]) & set(k["never_fired"])  # nothing both fired and not
    tvm = rec["backends"][TVM]
    assert tvm["fused_patterns"] == len(stored[(TVM, "fused")][0]) >= 1
    assert all(n.startswith("fused_") for n in tvm["kinds"]["fused"]["fired"])
    assert tvm["fused_per_1000_tests"] == round(1000 * tvm["fused_patterns"] / 8, 1)
    ort = rec["backends"]["ort"]
    assert ort["fused_patterns"] == 0 and ort["kinds"]["transformer"]["fired"]
    assert ort["kinds"]["transformer"]["never_fired"]  # ORT has 50-odd: most never fire


def test_metrics_of_a_campaign_as_a_table(campaign: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["metrics", str(campaign)]) == 0
    out = capsys.readouterr().out
    fused = _stored(campaign)[(TVM, "fused")][0]
    assert f"distinct fused patterns ({len(fused)}):" in out
    name, tests = next(iter(fused.items()))
    assert f"{name} {tests}" in out
    assert "ort transformers never fired (" in out and "ort transformers fired (" in out
    # the campaign.db file names the campaign too
    assert main(["metrics", str(campaign / "campaign.db")]) == 0
    assert f"distinct fused patterns ({len(fused)}):" in capsys.readouterr().out


def test_models_and_a_campaign_together(campaign: Path, tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    argv = ["generate", "--count", "3", "--seed", "1", "--no-reference", "--out", str(corpus)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["metrics", "--json", str(corpus), str(campaign)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["total"]["models"] == 3 and list(got["paths"]) == [str(corpus)]
    assert got["campaigns"][str(campaign)]["tests"] == 8


def test_a_campaign_without_feedback_says_so(tmp_path: Path, capsys) -> None:
    out = tmp_path / "quiet"
    argv = ["fuzz", "--backend", "ort:feedback=0", "--backend", "onnx-reference"]
    argv += ["--tests", "3", "--nodes", "2:3", "--ops", "Add,Relu", "--probe", "off"]
    assert main([*argv, "--no-reduce", "--out", str(out)]) in (0, 1)
    capsys.readouterr()
    assert main(["metrics", str(out)]) == 0
    assert "no backend gave optimization feedback" in capsys.readouterr().out
    assert main(["metrics", "--json", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["campaigns"][str(out)]["backends"] == {}


def test_bad_campaign_paths_are_one_line_exit_2(tmp_path: Path) -> None:
    def run(path: Path) -> tuple[int, str]:
        r = subprocess.run(
            [sys.executable, "-m", "onnxfuzz", "metrics", str(path)],
            capture_output=True,
            text=True,
        )
        return r.returncode, r.stderr

    rc, err = run(tmp_path / "nope")
    assert rc == 2 and str(tmp_path / "nope") in err and err.count("\n") == 1
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "campaign.db").write_bytes(b"not sqlite at all " * 64)
    rc, err = run(garbage)
    assert rc == 2 and "campaign.db" in err and err.count("\n") == 1
    assert "Traceback" not in err
    empty = tmp_path / "optionless"
    empty.mkdir()
    Store.create(empty / "campaign.db", {}).close()  # a database, not a campaign's
    rc, err = run(empty)
    assert rc == 2 and "no campaign options" in err and err.count("\n") == 1


def test_the_html_report_gives_distinct_fused_patterns_per_1000_tests(
    campaign: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(campaign), "--out", str(page)]) == 0
    n = len(_stored(campaign)[(TVM, "fused")][0])
    assert f"<td>{n} ({1000 * n / 8:.0f} per 1,000 tests)</td>" in page.read_text()
