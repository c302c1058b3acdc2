"""``onnxfuzz report``: one self-contained HTML page per campaign, checked on a real small
campaign (planted bugs, a backend lacking one (op, dtype) pair), on hand-made campaign.db
files (hostile strings, pauses, an older schema) and in a real headless browser."""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
from pathlib import Path

import onnx
import pytest
from headless import INSTALL, Chromium, find_chromium
from models import chain

from onnxfuzz.cli.main import main
from onnxfuzz.store.db import Result, Store
from onnxfuzz.store.model_graph import model_svg
from onnxfuzz.store.report_data import PAUSE_S, _timeline

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
CRASHES = f"{ADAPTERS}:Raise:op=Mul"  # a compile crash on every model with Mul
LACKS = f"{ADAPTERS}:UnsupportedType:op=Add,dtype=float64"  # no float64 Add kernel
FLAGS = ["--tests", "30", "--seed", "5", "--nodes", "2:5", "--ops", "Mul,Add,Relu,Neg,Abs"]
FLAGS += ["--dtypes", "float32,float64", "--probe", "classify"]
WIDTH, HEIGHT = 1280, 1600


@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report") / "c"
    argv = ["fuzz", "--backend", "ort", "--backend", CRASHES, "--backend", LACKS]
    assert main([*argv, "--out", str(out), *FLAGS]) == 1  # it found bugs
    return out


@pytest.fixture(scope="module")
def page(campaign: Path) -> str:
    assert main(["report", str(campaign)]) == 0
    return (campaign / "report.html").read_text()


def _db(campaign: Path) -> sqlite3.Connection:
    return sqlite3.connect(campaign / "campaign.db")


def test_the_campaign_keeps_its_diversity_over_time(campaign: Path) -> None:
    rows = _db(campaign).execute("SELECT tests, summary FROM diversity_history ORDER BY tests")
    rows = rows.fetchall()
    assert len(rows) >= 2 and rows[0][0] == 0 and rows[-1][0] == 30
    last = json.loads(rows[-1][1])
    assert last["all"]["models"] == 30 and last["all"]["ops"] >= 2
    # and every (op, dtype) the probe tried: the heatmap's cells
    pairs = json.loads(
        _db(campaign).execute("SELECT value FROM meta WHERE key='probe_pairs'").fetchone()[0]
    )
    assert set(pairs) == {"Mul", "Add", "Relu", "Neg", "Abs"}
    assert all(set(types) == {"float32", "float64"} for types in pairs.values())


def test_the_page_shows_verdicts_timeline_coverage_support_and_bugs(
    campaign: Path, page: str
) -> None:
    db = _db(campaign)
    for section in ("verdicts", "throughput", "findings", "coverage", "support", "bugs"):
        assert f'<section id="{section}">' in page
    # every backend's count of every verdict, as campaign.db has them
    names = json.loads(db.execute("SELECT value FROM meta WHERE key='names'").fetchone()[0])
    for backend, verdict, n in db.execute(
        "SELECT backend, verdict, COUNT(*) FROM results GROUP BY backend, verdict"
    ):
        assert f"{names[backend]}: {verdict} {n} (" in page  # the bar's tooltip
    # tests/s, findings and the four coverage curves are drawn
    assert page.count('<svg class="chart"') == 2 + 4
    # the probe: the float64 Add kernel the adapter lacks is a red cell, with its reason
    assert re.search(r'<td class="n[^"]*" title="Add float64: [^"]*not implemented', page)
    assert '<td class="y' in page  # and supported pairs are green
    # each bug: its reduced model's ops drawn, its repro command, its versions
    bugs = db.execute("SELECT id FROM bugs").fetchall()
    assert bugs
    for (bug,) in bugs:
        article = page.split(f'<article id="bug-{bug}"')[1].split("</article>")[0]
        model = onnx.load(str(campaign / "bugs" / bug / "reduced" / "model.onnx"))
        for node in model.graph.node:
            assert f">{node.op_type}</text>" in article
        assert f"python {campaign}/bugs/{bug}/reduced/repro.py" in article
        meta = json.loads((campaign / "bugs" / bug / "meta.json").read_text())
        for version in meta["versions"].values():
            assert f"<td class=l>{version}</td>" in article


def test_the_page_stands_alone(page: str) -> None:
    assert "<link" not in page and " src=" not in page
    assert not re.search(r"(href|src)=\"(https?:)?//", page)
    assert "@import" not in page and "url(http" not in page


def test_same_campaign_same_bytes(campaign: Path, page: str, tmp_path: Path) -> None:
    assert main(["report", str(campaign)]) == 0
    assert (campaign / "report.html").read_text() == page
    # elsewhere, only the links to the bundles' issue.md change
    assert main(["report", str(campaign), "--out", str(tmp_path / "again.html")]) == 0
    again = (tmp_path / "again.html").read_text()
    href = Path(os.path.relpath(campaign / "bugs", tmp_path)).as_posix()
    assert again.replace(f'href="{href}/', 'href="bugs/') == page


def test_not_a_campaign_is_a_one_line_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no campaign.db" in err
    (tmp_path / "campaign.db").write_bytes(b"not a database" * 100)
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "not a readable campaign database" in err
    assert main(["report", str(tmp_path / "missing")]) == 2


def _hand_made(folder: Path, backend: str, op: str) -> Path:
    """A campaign.db written through the Store API: 20 tests, one bug on ``op``."""
    folder.mkdir()
    options = {"backends": ["ort", backend], "seed": 0, "generator": {}, "probe": "classify"}
    store = Store.create(folder / "campaign.db", {"options": options})
    store.names = {"ort": "ort", backend: backend}
    store.set_meta("names", store.names)
    store.set_meta("probe_unsupported", {"ort": {}, backend: {op: {"float32": f"no {op}"}}})
    sig = f"{backend}|crash|compile|lowering failed"
    for i in range(20):
        bad = i % 4 == 0
        results = [
            Result("ort", "ok"),
            Result(
                backend,
                "crash" if bad else "ok",
                "compile" if bad else None,
                sig if bad else None,
                f"{sig}|{op}" if bad else None,
                suspect=backend,
                pattern=op,
            ),
        ]
        store.record(i, i, [op], 17, 0.01, 0.01, results)
    store.close()
    return folder


def test_every_string_from_the_campaign_is_escaped(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    op = '"><img src=x onerror=alert(2)>'
    campaign = _hand_made(tmp_path / "evil", evil, op)
    assert main(["report", str(campaign)]) == 0
    page = (campaign / "report.html").read_text()
    assert page.count("<script>") == 1  # the page's own
    assert "<img" not in page and "alert(2)>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in page


def test_a_campaign_from_before_the_history_still_renders(tmp_path: Path) -> None:
    campaign = _hand_made(tmp_path / "old", "tvm", "Add")
    db = sqlite3.connect(campaign / "campaign.db")
    db.execute("DROP TABLE diversity_history")
    db.execute("DELETE FROM meta WHERE key='probe_unsupported'")
    db.commit()
    db.close()
    assert main(["report", str(campaign)]) == 0
    page = (campaign / "report.html").read_text()
    assert "no diversity history" in page
    assert "No op x dtype support data" in page


def test_pauses_are_cut_out_of_the_time_axis(tmp_path: Path) -> None:
    campaign = _hand_made(tmp_path / "paused", "tvm", "Add")
    store = Store.open_existing(campaign / "campaign.db")
    # tests 0-9 one per second, then a resume two hours later, tests 10-19 likewise
    store.db.execute("UPDATE tests SET finished = 1000.0 + id WHERE id < 10")
    store.db.execute("UPDATE tests SET finished = 1000.0 + 7200 + id WHERE id >= 10")
    t = _timeline(store)
    store.close()
    assert len(t.clock.breaks()) == 1
    assert PAUSE_S < 7200 and t.span < 30  # 20 active seconds or so, not two hours
    assert t.tests[-1] == 20
    assert max(t.rates) <= 2.0  # about one test a second throughout


def test_a_model_is_drawn_layer_by_layer() -> None:
    svg = model_svg(chain(["Relu", "Neg", "Abs"]))
    ys = [float(y) for y in re.findall(r'<rect x="[^"]+" y="([^"]+)"', svg)]
    assert len(ys) == 5  # x, three ops, y
    assert ys == sorted(ys) and len(set(ys)) == 5  # one layer each, top to bottom
    for op in ("Relu", "Neg", "Abs"):
        assert f">{op}</text>" in svg
    assert svg.count('class="edge"') == 4


def test_the_page_in_a_headless_browser(campaign: Path, page: str) -> None:
    chromium = find_chromium()
    if chromium is None:
        pytest.skip(f"no headless Chromium: install it with {INSTALL}")
    image = pytest.importorskip("PIL.Image", reason="Pillow (torchvision's dependency)")
    url = (campaign / "report.html").resolve().as_uri()
    checks = [
        "Array.from(document.querySelectorAll('section[id]')).map(s => s.id).join(',')",
        "document.querySelectorAll('svg.graph').length",
        "document.querySelectorAll('article').length",
        # the bug filter: a query no bug matches hides every bug
        "(() => { const f = document.getElementById('bug-filter'); f.value = 'zzz-none';"
        " f.dispatchEvent(new Event('input'));"
        " return Array.from(document.querySelectorAll('article'))"
        ".filter(a => a.style.display !== 'none').length; })()",
        # the table sorts by a clicked header without an error
        "(() => { document.querySelector('table.sortable th').click(); return 1; })()",
        "document.documentElement.scrollWidth",
    ]
    with Chromium(chromium, WIDTH, HEIGHT) as browser:
        shown = browser.load(url, checks)
    assert shown.errors == []
    assert shown.requests == [url]  # the page fetched nothing besides itself
    v = [shown.values[c] for c in checks]
    assert v[0] == "verdicts,throughput,findings,coverage,support,optimizations,bugs"
    assert v[1] == v[2] == page.count("<article")
    assert v[3] == 0 and v[4] == 1
    assert v[5] <= WIDTH  # nothing wider than the window
    picture = image.open(io.BytesIO(shown.png)).convert("RGB")
    assert picture.size == (WIDTH, HEIGHT)
    colours = picture.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, bars and charts, not blank
    assert max(n for n, _ in colours) < 0.97 * WIDTH * HEIGHT


def test_the_page_leads_with_families(campaign: Path, page: str) -> None:
    """"N families, M bundles" in the header and over the bugs, each family with its ids."""
    from onnxfuzz.judge.signature import family

    sigs = [s for (s,) in _db(campaign).execute("SELECT signature FROM bugs")]
    n, m = len({family(s) for s in sigs}), len(sigs)
    title = f"{n} {'family' if n == 1 else 'families'}, {m} {'bundle' if m == 1 else 'bundles'}"
    assert f"<b>{title}</b>" in page.split("</header>")[0]
    bugs = page.split('<section id="bugs">')[1]
    assert f"Bugs: {title}" in bugs and bugs.index("<h3>Families</h3>") < bugs.index("<article")
