"""A campaign as one self-contained HTML page (``onnxfuzz report``): inline CSS, SVG and a
few lines of JavaScript, nothing fetched. Verdicts per backend, tests/s and findings over
time, coverage curves, the probe's op x dtype support per backend, and every bug with its
reduced model drawn, its repro command and versions.

Every string from the campaign (op types, backend messages, names) is escaped. The same
campaign gives the same bytes: no generation time, every order fixed.
"""

from __future__ import annotations

import datetime
import os
from html import escape
from pathlib import Path, PurePosixPath

from onnxfuzz import __version__
from onnxfuzz import dtypes as dt
from onnxfuzz.generate.build.single_op import ANY_TYPE
from onnxfuzz.generate.lang.features import is_feature
from onnxfuzz.generate.measure.metrics import Diversity
from onnxfuzz.store.db import REFERENCE_BUGS, Store
from onnxfuzz.store.model_graph import ARROW_DEFS, model_svg
from onnxfuzz.store.report import (
    COMPARED,
    FAMILIES_NOTE,
    families_title,
    family_rows,
    reduced_ops,
    reduction_lines,
)
from onnxfuzz.store.report_data import (
    DIVERSITY_FIGURES,
    MAX_BUGS_DRAWN,
    BugView,
    ReportData,
    Support,
    gather,
)
from onnxfuzz.store.svg import Series, colour, line_chart, number, stacked_bars, verdict_colour
from onnxfuzz.store.triage import alone_words

# Verdicts in the order tables and bars show them: the good, the bugs, then the rest.
VERDICT_ORDER = (
    "ok",
    "mismatch",
    "crash",
    "timeout",
    "not-reproducible",
    "unstable",
    "known",
    "unsupported",
    "too-costly",
    "invalid-reference",
    "generator-error",
)
MAX_TABLE_BUGS = 2000  # rows of the bug table (the page stays small for any campaign)

CSS = """
body{font:13px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d1d1f;
background:#fafafa}
header,section{max-width:1100px;margin:0 auto;padding:8px 24px}
header{border-bottom:1px solid #ddd;background:#fff;max-width:none}
h1{font-size:20px;margin:8px 0 4px}h2{font-size:16px;margin:18px 0 6px;
border-bottom:1px solid #e3e3e3}h3{font-size:14px;margin:10px 0 4px}
nav a{margin-right:12px}.muted{color:#666}
table{border-collapse:collapse;margin:6px 0}td,th{padding:2px 8px;text-align:right;
border-bottom:1px solid #eee}th{background:#f0f0f0;cursor:pointer}
td:first-child,th:first-child,td.l,th.l{text-align:left}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;
width:10px;height:10px;margin-right:4px;vertical-align:-1px}
svg text{font:11px system-ui,sans-serif;fill:#333}.grid{stroke:#eee}.axis{stroke:#999}
.break{stroke:#999;stroke-dasharray:3 3}.label{fill:#555}
.charts{display:flex;flex-wrap:wrap;gap:8px 24px}
.heat td{width:13px;height:13px;padding:0;border:1px solid #fff}.heat th{font-weight:normal;
font-size:10px;padding:0 1px;cursor:default}.heat td.op{width:auto;padding-right:6px;
text-align:left;font-family:monospace}.heat .y{background:#7bc47f}.heat .n{background:#d55e00}
.heat .v{writing-mode:vertical-rl;transform:rotate(180deg);height:64px}
.heat .g{border-left:2px solid #999;text-align:left}
article{background:#fff;border:1px solid #e3e3e3;border-radius:4px;margin:10px 0;
padding:4px 12px 10px}article .cols{display:flex;gap:24px;flex-wrap:wrap}
pre{background:#f4f4f4;padding:6px 8px;overflow-x:auto;margin:4px 0;font-size:12px}
.graph rect{fill:#fff;stroke:#0072B2}.graph .io rect{fill:#eef5fb;stroke:#9bbbd6}
.graph .edge{fill:none;stroke:#777}.tag{display:inline-block;padding:0 6px;border-radius:3px;
color:#fff;font-size:12px}
"""

# Sortable tables (click a header) and a filter over the bugs; nothing else runs.
JS = """
document.querySelectorAll('table.sortable th').forEach(function (th, col) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.dataset.order !== 'asc';
    th.dataset.order = asc ? 'asc' : 'desc';
    rows.sort(function (a, b) {
      var x = a.cells[col].dataset.v || a.cells[col].textContent;
      var y = b.cells[col].dataset.v || b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
var filter = document.getElementById('bug-filter');
if (filter) {
  filter.addEventListener('input', function () {
    var q = filter.value.toLowerCase();
    document.querySelectorAll('[data-bug]').forEach(function (el) {
      el.style.display = el.dataset.bug.indexOf(q) >= 0 ? '' : 'none';
    });
  });
}
"""


def _utc(t: float | None) -> str:
    if t is None:
        return "-"
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}h {m:02d}m" if h else f"{m}m {s % 60:02d}s"


def _legend(items: list[tuple[str, str]]) -> str:
    spans = "".join(f'<span><i style="background:{c}"></i>{escape(t)}</span>' for t, c in items)
    return f'<div class="legend">{spans}</div>'


def _verdict_order(verdicts: set[str]) -> list[str]:
    return [v for v in VERDICT_ORDER if v in verdicts] + sorted(verdicts - set(VERDICT_ORDER))


# --- sections ------------------------------------------------------------------------------
def _header(d: ReportData) -> str:
    t = d.timeline
    backends = ", ".join(
        f"{escape(d.name_of(b))}{' (reference)' if b == d.reference else ''}"
        + (f" {escape(str(d.versions[b]))}" if b in d.versions else "")
        for b in d.labels
    )
    o = d.options
    facts = [
        f"<b>{d.n_tests:,}</b> tests",
        f"<b>{escape(families_title(d.bug_rows))}</b>",
        f"{_duration(t.span)} active",
        f"{_utc(t.first_wall)} to {_utc(t.last_wall)}",
    ]
    setup = [f"backends: {backends}"]
    mix = (o.get("generator") or {}).get("opset_mix")  # --opset 16,21
    if mix:
        setup.append(f"opsets {escape(','.join(map(str, mix)))}")
    elif d.opset is not None:
        setup.append(f"opset {escape(str(d.opset))}")
    if "seed" in o:
        setup.append(f"seed {escape(str(o['seed']))}")
    if d.probe_mode:
        setup.append(f"probe: {escape(str(d.probe_mode))}")
    return (
        f"<header><h1>onnxfuzz campaign: {escape(d.name)}</h1>"
        f"<p>{' &middot; '.join(facts)}</p><p class=muted>{' &middot; '.join(setup)}</p>"
        '<nav><a href="#verdicts">verdicts</a><a href="#throughput">tests/s</a>'
        '<a href="#findings">findings</a><a href="#coverage">coverage</a>'
        '<a href="#support">support</a><a href="#bugs">bugs</a></nav></header>'
    )


def _verdicts(d: ReportData) -> str:
    seen = _verdict_order({v for per in d.verdicts.values() for v in per})
    head = "".join(f"<th>{escape(v)}</th>" for v in seen)
    rows, bars = [], []
    for b in d.labels:
        per = d.verdicts.get(b, {})
        total = sum(per.values())
        compared = sum(per.get(v, 0) for v in COMPARED)
        share = f"{compared / total:.0%}" if total else "-"
        cells = "".join(f"<td>{per.get(v, 0):,}</td>" for v in seen)
        role = " (reference)" if b == d.reference else ""
        rows.append(f"<tr><td>{escape(d.name_of(b))}{role}</td>{cells}<td>{share}</td></tr>")
        bars.append((d.name_of(b), [(v, per.get(v, 0)) for v in seen]))
    legend = _legend([(v, verdict_colour(v)) for v in seen])
    return (
        '<section id="verdicts"><h2>Verdicts per backend</h2>'
        f'<table class="sortable"><thead><tr><th>backend</th>{head}<th>compared</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>{legend}{stacked_bars(bars)}"
        "<p class=muted>compared: the share of its tests a backend compiled, ran and was "
        "compared on (ok, mismatch, unstable).</p></section>"
    )


def _time_axis(d: ReportData) -> tuple[float, str]:
    """Seconds per x unit and the axis label: minutes or hours for long campaigns."""
    if d.timeline.span > 3 * 3600:
        return 3600.0, "active time (h)"
    if d.timeline.span > 1200:
        return 60.0, "active time (min)"
    return 1.0, "active time (s)"


def _throughput(d: ReportData) -> str:
    t = d.timeline
    if not t.bucket_ends:
        return '<section id="throughput"><h2>Tests per second</h2><p>No tests yet.</p></section>'
    unit, label = _time_axis(d)
    xs = [e / unit for e in t.bucket_ends]
    rate = Series("tests/s", list(zip(xs, t.rates, strict=True)), colour(0))
    breaks = [b / unit for b in t.clock.breaks()]
    note = (
        f"<p class=muted>Dashed lines: the campaign was stopped and resumed ({len(breaks)} "
        f"pause{'s' if len(breaks) != 1 else ''} over 5 minutes cut out of the time axis).</p>"
        if breaks
        else ""
    )
    mean = d.n_tests / t.span if t.span else 0.0
    return (
        '<section id="throughput"><h2>Tests per second</h2>'
        f"<p>{number(mean)} tests/s on average over {_duration(t.span)} of activity.</p>"
        f"{line_chart([rate], label, 'tests/s', breaks=breaks)}{note}</section>"
    )


def _findings(d: ReportData) -> str:
    t = d.timeline
    if not t.bucket_ends or not d.findings:
        return '<section id="findings"><h2>Findings over time</h2><p>No bugs found.</p></section>'
    unit, label = _time_axis(d)
    xs = [0.0] + [e / unit for e in t.bucket_ends]
    series = []
    totals = [0] * len(t.bucket_ends)
    for verdict, counts in d.findings.items():
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
        pts = list(zip(xs, [0, *counts], strict=True))
        series.append(Series(f"{verdict}", pts, verdict_colour(verdict)))
    if len(series) > 1:
        series.append(Series("all", list(zip(xs, [0, *totals], strict=True)), "#000000"))
    breaks = [b / unit for b in t.clock.breaks()]
    return (
        '<section id="findings"><h2>Findings over time</h2>'
        "<p>Distinct bugs (after reduction and deduplication) found so far, by verdict.</p>"
        f"{_legend([(s.name, s.colour) for s in series])}"
        f"{line_chart(series, label, 'distinct bugs', breaks=breaks, step=True)}</section>"
    )


def _coverage(d: ReportData) -> str:
    head = '<section id="coverage"><h2>Coverage (model diversity)</h2>'
    if not d.diversity:
        return head + _latest_diversity(d) + "</section>"
    lines = [("all tests", "all")] + [(d.name_of(b), b) for b in d.labels]
    items = [(name, colour(i)) for i, (name, _) in enumerate(lines)]
    charts = []
    for figure in DIVERSITY_FIGURES:
        series = []
        for i, (name, key) in enumerate(lines):
            pts = []
            for tests, snap in d.diversity:
                per = snap.get("all") if key == "all" else snap.get("backends", {}).get(key)
                if isinstance(per, dict) and isinstance(per.get(figure), int | float):
                    pts.append((float(tests), float(per[figure])))
            if pts:
                series.append(Series(name, pts, colour(i)))
        if series:
            charts.append(
                f"<div><h3>distinct {escape(figure)}</h3>"
                f"{line_chart(series, 'tests', figure, width=520, height=190)}</div>"
            )
    return (
        head + "<p>Distinct op types, op instances (type, input types and shapes, "
        "attributes), op-type edges a&rarr;b and triples a&rarr;b&rarr;c over the tests so far: "
        "over all tests, and per backend over the tests it compiled and ran. Past 16,384 "
        "distinct keys the counts are estimates (~1 %).</p>"
        f"{_legend(items)}<div class=charts>{''.join(charts)}</div></section>"
    )


def _optimizations(d: ReportData) -> str:
    """What each backend's optimizer did (its adapter's ``optimizations`` feedback): per
    kind, what fired in how many tests, and what never fired."""
    head = '<section id="optimizations"><h2>Optimization coverage</h2>'
    if not d.optimizations:
        return head + "<p>No backend gave optimization feedback.</p></section>"
    rows = []
    for label in d.labels:
        tests, backend_s, feedback_s, errors, _ = d.feedback_costs.get(
            label, (0, 0.0, 0.0, 0, "")
        )
        hook = f"{feedback_s / backend_s:.1%}" if backend_s > 0 else "-"
        for kind, (fired, never) in sorted(d.optimizations.get(label, {}).items()):
            shown = ", ".join(f"{escape(n)}&nbsp;({k})" for n, k in fired)
            count = f"{len(fired)}/{len(fired) + len(never)}"
            if kind == "fused" and d.n_tests:  # distinct patterns: no list of all possible
                count = f"{len(fired)} ({1000 * len(fired) / d.n_tests:.0f} per 1,000 tests)"
            rows.append(
                f"<tr><td>{escape(d.name_of(label))}</td><td>{escape(kind)}</td>"
                f"<td>{count}</td><td>{shown}</td>"
                f"<td>{escape(', '.join(sorted(never)))}</td><td>{hook}"
                f"{f' ({errors} hook errors)' if errors else ''}</td></tr>"
            )
    return (
        head + "<table><thead><tr><th>backend</th><th>kind</th><th>fired</th>"
        "<th>fired (tests)</th><th>never fired</th><th>hook time / backend time</th></tr>"
        "</thead><tbody>" + "".join(rows) + "</tbody></table></section>"
    )


def _latest_diversity(d: ReportData) -> str:
    """A campaign from before the diversity history: its last figures, if any."""
    note = "<p>This campaign.db has no diversity history (it predates it)"
    rec = d.latest_diversity
    try:
        summary = Diversity.from_record(rec["all"]).summary() if rec else None
    except (KeyError, TypeError, ValueError):
        summary = None
    if summary is None:
        return note + " and no diversity record.</p>"
    cells = "".join(f"<td>{number(summary[f])}</td>" for f in DIVERSITY_FIGURES)
    head = "".join(f"<th>{f}</th>" for f in DIVERSITY_FIGURES)
    return (
        f"{note}; its latest figures over all tests:</p><table><thead><tr>{head}</tr></thead>"
        f"<tbody><tr>{cells}</tr></tbody></table>"
    )


def _support(d: ReportData) -> str:
    head = '<section id="support"><h2>Support per backend (probe)</h2>'
    s = d.support
    if s is None:
        why = (
            "the campaign ran with --probe off"
            if d.probe_mode == "off"
            else "no probe results in campaign.db"
        )
        return head + f"<p>No op x dtype support data: {escape(why)}.</p></section>"
    return head + _heatmap(d, s) + "</section>"


def _dtype_key(name: str) -> tuple[int, str]:
    code = dt.BY_NAME.get(name)
    return (code if code is not None else 10_000, name)


def _forms(d: ReportData, s: Support, labels: list[str]) -> str:
    """The forms of ops (attribute values, computed weights) each backend lacks."""
    items = [
        f"<li>{escape(d.name_of(b))}: <code>{escape(op)}[{escape(key)}]</code>: {escape(why)}</li>"
        for b in labels
        for op, missing in sorted(s.unsupported[b].items())
        for key, why in missing.items()
        if is_feature(key)
    ]
    if not items:
        return ""
    return (
        f"<p>{len(items)} forms of ops some backend lacks in a type it has (an attribute "
        "value, an input computed instead of constant), found with one-node models of one "
        "form each; campaigns steered by the probe do not generate them:</p>"
        f"<ul>{''.join(items)}</ul>"
    )


def _heatmap(d: ReportData, s: Support) -> str:
    labels = [b for b in d.labels if b in s.unsupported] + sorted(
        set(s.unsupported) - set(d.labels)
    )
    pairs = s.pairs
    if pairs is None:  # only what some backend lacks is known
        pairs = {}
        for per in s.unsupported.values():
            for op, missing in per.items():
                pairs.setdefault(op, [])
                pairs[op] += [t for t in missing if t not in pairs[op] and not is_feature(t)]
    types = sorted({t for ts in pairs.values() for t in ts}, key=_dtype_key)
    lacking = {
        op
        for per in s.unsupported.values()
        for op, missing in per.items()
        if op in pairs and any(not is_feature(t) for t in missing)
    }
    total = sum(len(ts) for ts in pairs.values())
    summary = []
    for b in labels:
        per = s.unsupported[b]
        missing = sum(
            len(ts) if ANY_TYPE in per.get(op, {}) else sum(t in per.get(op, {}) for t in ts)
            for op, ts in pairs.items()
        )
        summary.append(
            f"<li>{escape(d.name_of(b))}: {total - missing:,} of {total:,} (op, dtype) pairs "
            f"supported ({(total - missing) / total if total else 0:.0%})</li>"
        )
    groups = "".join(
        f'<th class="g" colspan="{len(types)}">{escape(d.name_of(b))}</th>' for b in labels
    )
    tcols = "".join(
        f'<th class="{"g " if i == 0 else ""}"><div class="v">{escape(t)}</div></th>'
        for _ in labels
        for i, t in enumerate(types)
    )
    rows = []
    for op in sorted(lacking):
        cells = []
        for b in labels:
            missing = s.unsupported[b].get(op, {})
            for i, t in enumerate(types):
                g = " g" if i == 0 else ""
                if t not in pairs[op]:
                    cells.append(f'<td class="{g.strip()}"></td>')
                    continue
                why = missing.get(t) or missing.get(ANY_TYPE)
                if why is None:
                    cells.append(f'<td class="y{g}" title="{escape(op)} {escape(t)}"></td>')
                else:
                    tip = escape(f"{op} {t}: {why}")
                    cells.append(f'<td class="n{g}" title="{tip}"></td>')
        rows.append(f'<tr><td class="op">{escape(op)}</td>{"".join(cells)}</tr>')
    full = sorted(set(pairs) - lacking)
    forms = _forms(d, s, labels)
    if not lacking:
        return forms + (
            f"<p>Each backend was tried on one-node models of every (op, element type) the "
            f"campaign generates ({len(pairs):,} ops, {total:,} pairs): every backend supports "
            f"every pair.</p><p class=muted>{escape(', '.join(full))}</p>"
        )
    known = (
        ""
        if s.pairs is not None
        else "<p class=muted>The campaign's options no longer rebuild the probed pair list "
        "(another version): only ops some backend lacks are shown.</p>"
    )
    return (
        f"<p>Each backend was tried on one-node models of every (op, element type) the "
        f"campaign generates: {len(pairs):,} ops, {total:,} pairs.</p><ul>{''.join(summary)}</ul>"
        f"{known}<p>{len(lacking)} ops some backend lacks in some type "
        "(green: supported, red: unsupported, hover for the reason; blank: not generated):</p>"
        f'<table class="heat"><thead><tr><th></th>{groups}</tr><tr><th></th>{tcols}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
        f"<p class=muted>Supported in every type by every backend ({len(full)}): "
        f"{escape(', '.join(full))}</p>{forms}"
    )


def _bug_table(d: ReportData) -> str:
    rows = []
    drawn = {v.row["id"] for v in d.bugs}
    for r in d.bug_rows[:MAX_TABLE_BUGS]:
        pattern = reduced_ops(r)
        key = " ".join(
        str(r.get(k) or "") for k in ("id", "family", "verdict", "stage", "backend", "pattern")
    )
        anchor = (
            f'<a href="#bug-{escape(r["id"])}">{escape(r["id"])}</a>'
            if r["id"] in drawn
            else escape(r["id"])
        )
        rows.append(
            f'<tr data-bug="{escape(key.lower())}"><td>{anchor}</td>'
            f"<td class=l>{escape(r['verdict'])}</td><td class=l>{escape(r['stage'] or '-')}</td>"
            f"<td class=l>{escape(r['backend'] or '-')}</td>"
            f"<td class=l>{escape(r['suspect'] or '-')}</td><td class=l>{escape(pattern)}</td>"
            f"<td>{r['hits']}</td><td>{r['first_test']}</td></tr>"
        )
    more = len(d.bug_rows) - len(rows)
    tail = f"<p class=muted>{more} more bugs: onnxfuzz triage lists them all.</p>" if more else ""
    for line in reduction_lines(d.bug_rows, Path(d.name)):
        tail += f"<p>{escape(line)}</p>"
    return (
        '<table class="sortable"><thead><tr><th>id</th><th class=l>verdict</th>'
        "<th class=l>stage</th><th class=l>backend</th><th class=l>suspect</th>"
        "<th class=l>reduced ops</th><th>hits</th><th>first test</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{tail}"
    )


def _bug(d: ReportData, v: BugView) -> str:
    r = v.row
    key = " ".join(
        str(r.get(k) or "") for k in ("id", "family", "verdict", "stage", "backend", "pattern")
    )
    graph = model_svg(v.model) if v.model is not None else "<p>(no readable model)</p>"
    which = "reduced model" if v.reduced else "model (not reduced)"
    versions = "".join(
        f"<tr><td>{escape(d.name_of(k))}</td><td class=l>{escape(val)}</td></tr>"
        for k, val in v.versions.items()
    )
    who = escape(r["backend"] or "-")
    if r["suspect"] and r["suspect"] != r["backend"]:
        who += f", suspect {escape(r['suspect'])}"
    if v.reference:
        who += f"; reference {escape(d.name_of(v.reference))}"
    return (
        f'<article id="bug-{escape(r["id"])}" data-bug="{escape(key.lower())}">'
        f'<h3><span class="tag" style="background:{verdict_colour(r["verdict"])}">'
        f"{escape(r['verdict'])}</span> {escape(r['id'])}</h3>"
        f"<p>{who} &middot; stage {escape(r['stage'] or '-')} &middot; {r['hits']} hits, "
        f"first in test {r['first_test']} &middot; "
        f'<a href="{escape(d.bundles_href + "/" + v.bundle.name)}/issue.md">issue.md</a></p>'
        f'<div class=cols><div><b>{which}</b><br>{graph}</div><div style="flex:1;min-width:300px">'
        f"<b>repro</b><pre>{escape(v.repro)}</pre><b>log</b><pre>{escape(chr(10).join(v.log))}"
        f"</pre><b>versions</b><table>{versions}</table></div></div></article>"
    )


def _families(d: ReportData) -> str:
    """The bugs' root-cause families (``judge.signature.family``), each with its bundles."""
    rows = []
    drawn = {v.row["id"] for v in d.bugs}
    for f in family_rows(d.bug_rows):
        links = " ".join(
            f'<a href="#bug-{escape(b)}">{escape(b)}</a>' if b in drawn else escape(b)
            for b in f["bundles"]
        )
        rows.append(
            f"<tr><td class=l>{escape(f['family'])}</td><td class=l>{escape(f['backend'] or '-')}"
            f"</td><td class=l>{escape(f['verdict'])}</td><td class=l>"
            f"{escape(f['stage'] or '-')}</td><td>{len(f['bundles'])}</td><td class=l>{links}"
            f"</td><td>{f['hits']}</td><td>{f['first_test']}</td></tr>"
        )
    return (
        f"<h3>Families</h3><p class=muted>{escape(FAMILIES_NOTE)}</p>"
        '<table class="sortable"><thead><tr><th class=l>family</th><th class=l>backend</th>'
        "<th class=l>verdict</th><th class=l>stage</th><th>bundles</th><th class=l>ids</th>"
        f"<th>hits</th><th>first test</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        "<h3>Bundles</h3>"
    )


def _known(d: ReportData) -> str:
    """The known findings (``fuzz --known``) this campaign met: counted, not filed."""
    if not d.known:
        return ""
    rows = "".join(
        f"<tr><td class=l>{escape(r['family'])}</td><td class=l>{escape(r['backend'])}</td>"
        f"<td class=l>{escape(r['verdict'])}</td><td>{r['hits']}</td><td>{r['known_hits']}</td>"
        "</tr>"
        for r in d.known
    )
    hits = sum(r["hits"] for r in d.known)
    return (
        f"<h3>Known ({hits} hits of {len(d.known)} "
        f"{'family' if len(d.known) == 1 else 'families'})</h3><p class=muted>Findings "
        "that match the campaign's --known file: counted, neither reduced nor filed.</p>"
        '<table class="sortable"><thead><tr><th class=l>family</th><th class=l>backend</th>'
        "<th class=l>verdict</th><th>hits</th><th>hits before</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _reference_alone(d: ReportData) -> str:
    """The reference's own failures, set aside unreduced (``store.triage.REFERENCE_BUGS``)."""
    if not d.reference_rows:
        return ""
    href = (PurePosixPath(d.bundles_href).parent / REFERENCE_BUGS).as_posix()  # beside bugs/
    rows = "".join(
        f'<tr><td class=l><a href="{escape(href)}/{escape(r["id"])}/issue.md">'
        f"{escape(r['id'])}</a></td><td class=l>{escape(r['verdict'])}</td>"
        f"<td class=l>{escape(r['stage'] or '-')}</td><td class=l>{escape(r['backend'])}</td>"
        f"<td>{r['hits']}</td><td>{r['first_test']}</td></tr>"
        for r in d.reference_rows
    )
    return (
        f"<h3>Failures of the reference ({len(d.reference_rows)})</h3>"
        f"<p class=muted>{escape(alone_words(d.reference_rows))}</p>"
        '<table class="sortable"><thead><tr><th class=l>id</th><th class=l>verdict</th>'
        "<th class=l>stage</th><th class=l>backend</th><th>hits</th><th>first test</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
    )


def _bugs(d: ReportData) -> str:
    head = f'<section id="bugs"><h2>Bugs: {escape(families_title(d.bug_rows))}</h2>'
    if not d.bug_rows:
        return head + "<p>No bugs found.</p>" + _known(d) + _reference_alone(d) + "</section>"
    drawn = "".join(_bug(d, v) for v in d.bugs)
    more = len(d.bug_rows) - len(d.bugs)
    note = f"<p class=muted>The first {len(d.bugs)} are shown in full.</p>" if more else ""
    return (
        head
        + _families(d)
        + _known(d)
        + '<p><input id="bug-filter" type="search" placeholder="filter bugs: id, verdict, '
        'backend, op" size="40"></p>' + _bug_table(d) + note + drawn + _reference_alone(d)
        + "</section>"
    )


def render(d: ReportData) -> str:
    body = "".join(
        [
            _header(d),
            ARROW_DEFS,
            _verdicts(d),
            _throughput(d),
            _findings(d),
            _coverage(d),
            _support(d),
            _optimizations(d),
            _bugs(d),
        ]
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="onnxfuzz {escape(__version__)}">'
        f"<title>onnxfuzz report: {escape(d.name)}</title><style>{CSS}</style></head>"
        f"<body>{body}<footer><section class=muted>onnxfuzz {escape(__version__)} report; "
        f"{MAX_BUGS_DRAWN} bugs at most drawn in full.</section></footer>"
        f"<script>{JS}</script></body></html>\n"
    )


def write_report(campaign_dir: Path, store: Store, out: Path) -> Path:
    """Render campaign ``campaign_dir`` (its open ``store``) to ``out``; returns ``out``."""
    data = gather(campaign_dir, store)
    # issue.md links relative to the page, wherever it is written
    data.bundles_href = Path(os.path.relpath(campaign_dir / "bugs", out.parent)).as_posix()
    html = render(data)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    return out
