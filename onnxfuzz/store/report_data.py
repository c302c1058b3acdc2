"""What the campaign report shows, read from campaign.db and the bug bundles.

Every figure over tests is aggregated in SQLite (GROUP BY per second of the clock, then
bucketed here), so a campaign of hundreds of thousands of tests costs a few scans and
a few thousand rows, and every time series is cut to at most ``MAX_POINTS`` points.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from onnxfuzz.errors import OnnxFuzzError
from onnxfuzz.generate.build.single_op import single_op_pairs
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.store.db import Store
from onnxfuzz.store.report import known_rows, optimization_coverage, summary_rows
from onnxfuzz.store.triage import repro_command

MAX_POINTS = 300  # per time series
SLICES = 3000  # the finest the wall clock is cut in SQL (then bucketed to MAX_POINTS)
PAUSE_S = 300.0  # a stretch this long without a finished test: stopped and resumed later
MAX_BUGS_DRAWN = 400  # bugs shown in full (graph, repro, versions); the rest in the table
LOG_LINES = 12
DIVERSITY_FIGURES = ("ops", "instances", "edges", "triples")


@dataclass
class Clock:
    """The campaign's active time: wall time with pauses longer than ``PAUSE_S`` cut out
    (a campaign stopped on Friday and resumed on Monday is not two days of 0 tests/s)."""

    starts: list[float] = field(default_factory=list)  # wall start of each active stretch
    offsets: list[float] = field(default_factory=list)  # active time at each stretch's start
    resolution: float = 1.0  # seconds of one slice of the wall clock

    def active(self, wall: float) -> float:
        i = max(0, bisect.bisect_right(self.starts, wall) - 1)
        if not self.starts:
            return 0.0
        return self.offsets[i] + max(0.0, wall - self.starts[i])

    def breaks(self) -> list[float]:
        return self.offsets[1:]


@dataclass
class Timeline:
    clock: Clock
    span: float  # active seconds from the first test to the last
    bucket_ends: list[float]  # active time at the end of each bucket
    rates: list[float]  # tests/s in each bucket
    tests: list[int]  # tests finished up to each bucket's end
    first_wall: float | None
    last_wall: float | None


@dataclass
class BugView:
    row: dict[str, Any]  # summary_rows' record
    bundle: Path
    repro: str
    versions: dict[str, str]
    log: list[str]
    model: onnx.ModelProto | None
    reduced: bool
    reference: str | None


@dataclass
class Support:
    """The probe's verdicts: per backend, op -> dtype -> why unsupported; ``pairs``: every
    (op, dtype) it tried (None when the campaign's options no longer rebuild the list)."""

    unsupported: dict[str, dict[str, dict[str, str]]]
    pairs: dict[str, list[str]] | None


@dataclass
class ReportData:
    name: str
    n_tests: int
    labels: list[str]
    reference: str | None
    names: dict[str, str]
    versions: dict[str, str]
    options: dict[str, Any]
    opset: int | None
    verdicts: dict[str, dict[str, int]]  # label -> verdict -> results
    timeline: Timeline
    findings: dict[str, list[int]]  # verdict -> distinct bugs found up to each bucket's end
    diversity: list[tuple[int, dict[str, Any]]]  # (tests, {"all": {...}, "backends": {...}})
    latest_diversity: dict[str, Any] | None  # meta's record (for a campaign without history)
    support: Support | None  # None: no probe data at all
    probe_mode: str | None
    bug_rows: list[dict[str, Any]]  # every bug (summary_rows), in the order found
    bugs: list[BugView]  # the first MAX_BUGS_DRAWN in full
    known: list[dict[str, Any]] = field(default_factory=list)  # report.known_rows (--known)
    # failures of the reference alone, set aside unreduced in reference-bugs/
    reference_rows: list[dict[str, Any]] = field(default_factory=list)
    bundles_href: str = "bugs"  # the bundles' folder, as a link from the page
    # label -> kind -> ([(name, tests it fired in)], [never fired]): the optimizers' feedback
    optimizations: dict[str, Any] = field(default_factory=dict)
    feedback_costs: dict[str, tuple[int, float, float, int, str]] = field(default_factory=dict)

    def name_of(self, label: str) -> str:
        return self.names.get(label, label)


def _clock(store: Store) -> tuple[Clock, list[tuple[float, int]]]:
    """Tests finished per slice of the wall clock (GROUP BY in SQLite: at most
    ``SLICES`` slices over the campaign's wall span, never finer than 10 ms nor coarser
    than a second) and the active clock."""
    first, last = store.db.execute("SELECT MIN(finished), MAX(finished) FROM tests").fetchone()
    if first is None:
        return Clock(), []
    res = min(1.0, max(0.01, (last - first) / SLICES))
    rows = store.db.execute(
        "SELECT CAST((finished - ?) / ? AS INTEGER) AS k, COUNT(*) FROM tests "
        "GROUP BY k ORDER BY k",
        (first, res),
    ).fetchall()
    per_slice = [(first + k * res, n) for k, n in rows]
    clock = Clock()
    prev: float | None = None
    for s, _ in per_slice:
        if prev is None or s - prev > PAUSE_S:
            clock.offsets.append(clock.active(prev + res) if prev is not None else 0.0)
            clock.starts.append(s)
        prev = s
    clock.resolution = res
    return clock, per_slice


def _timeline(store: Store) -> Timeline:
    clock, per_slice = _clock(store)
    if not per_slice:
        return Timeline(clock, 0.0, [], [], [], None, None)
    span = clock.active(per_slice[-1][0] + clock.resolution)
    width = max(clock.resolution, span / MAX_POINTS)
    n_buckets = max(1, math.ceil(span / width - 1e-9))
    counts = [0] * n_buckets
    for s, n in per_slice:
        counts[min(n_buckets - 1, int(clock.active(s) / width + 1e-9))] += n
    ends, rates, cumulative, total = [], [], [], 0
    for i, n in enumerate(counts):
        end = min(span, (i + 1) * width)
        total += n
        ends.append(end)
        rates.append(n / (end - i * width))
        cumulative.append(total)
    first, last = store.db.execute("SELECT MIN(finished), MAX(finished) FROM tests").fetchone()
    return Timeline(clock, span, ends, rates, cumulative, first, last)


def _findings(store: Store, timeline: Timeline) -> dict[str, list[int]]:
    """Distinct bugs found by the end of each bucket, per verdict (bugs are few: one row
    each)."""
    seen: dict[str, list[float]] = {}
    for verdict, first_seen in store.db.execute("SELECT verdict, first_seen FROM bugs"):
        seen.setdefault(verdict, []).append(timeline.clock.active(first_seen))
    out = {}
    for verdict in sorted(seen):
        times = sorted(seen[verdict])
        out[verdict] = [bisect.bisect_right(times, end + 1e-9) for end in timeline.bucket_ends]
    return out


def _diversity(store: Store) -> list[tuple[int, dict[str, Any]]]:
    rows = store.db.execute("SELECT tests, summary FROM diversity_history ORDER BY tests")
    rows = rows.fetchall()
    if len(rows) > MAX_POINTS:  # evenly spaced, the last one kept
        step = len(rows) / MAX_POINTS
        rows = [rows[int(i * step)] for i in range(MAX_POINTS - 1)] + [rows[-1]]
    out = []
    for tests, summary in rows:
        try:
            out.append((int(tests), json.loads(summary)))
        except (TypeError, ValueError):
            continue  # a row of another version
    return out


def _support(store: Store, options: dict[str, Any], opset: int | None) -> Support | None:
    unsupported = store.get_meta("probe_unsupported")
    if not isinstance(unsupported, dict) or not unsupported:
        return None
    pairs: dict[str, list[str]] | None = store.get_meta("probe_pairs")
    if not isinstance(pairs, dict):  # a campaign from before probe_pairs: rebuild the list
        try:
            cfg = Config.from_record(options["generator"], **({"opset": opset} if opset else {}))
            pairs = single_op_pairs(cfg)
        except (OnnxFuzzError, KeyError, TypeError, ValueError):
            pairs = None  # options of another version: only the unsupported pairs are known
    return Support(unsupported, pairs)


def _bug_view(campaign_dir: Path, row: dict[str, Any]) -> BugView:
    bundle = campaign_dir / "bugs" / row["id"]
    meta: Any = {}
    with contextlib.suppress(OSError, ValueError):  # no meta.json: the store's row alone
        meta = json.loads((bundle / "meta.json").read_text())
    if not isinstance(meta, dict):
        meta = {}
    model = None
    reduced = (bundle / "reduced" / "model.onnx").exists()
    try:
        model = onnx.load(str(bundle / ("reduced" if reduced else "") / "model.onnx"))
    except Exception:  # noqa: BLE001 - a missing or unreadable model: the bug without a picture
        model = None
    try:
        log = (bundle / "log.txt").read_text(errors="replace").splitlines()[:LOG_LINES]
    except OSError:
        log = []
    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    if meta.get("onnxfuzz"):
        versions = {**versions, "onnxfuzz": str(meta["onnxfuzz"])}
    return BugView(
        row,
        bundle,
        repro_command(campaign_dir, row),
        {str(k): str(v) for k, v in sorted(versions.items())},
        log,
        model,
        reduced,
        meta.get("reference"),
    )


def gather(campaign_dir: Path, store: Store) -> ReportData:
    options = store.get_meta("options") or {}
    names = store.names
    counts = store.counts_by_backend()
    labels = [str(x) for x in options.get("backends", [])]
    reference = options.get("reference") or (labels[0] if labels else None)
    order = list(dict.fromkeys(([reference] if reference else []) + labels))
    order += sorted({b for b, _ in counts} - set(order))
    verdicts: dict[str, dict[str, int]] = {label: {} for label in order}
    for (b, v), n in sorted(counts.items()):
        verdicts.setdefault(b, {})[v] = n
    timeline = _timeline(store)
    opset = store.get_meta("opset")
    rows = summary_rows(store)
    return ReportData(
        name=campaign_dir.resolve().name,
        n_tests=store.n_tests(),
        labels=order,
        reference=reference,
        names=names,
        versions=store.get_meta("versions") or {},
        options=options,
        opset=opset,
        verdicts=verdicts,
        timeline=timeline,
        findings=_findings(store, timeline),
        diversity=_diversity(store),
        latest_diversity=store.get_meta("diversity"),
        support=_support(store, options, opset),
        probe_mode=options.get("probe"),
        bug_rows=rows,
        reference_rows=summary_rows(store, reference_alone=True),
        bugs=[_bug_view(campaign_dir, r) for r in rows[:MAX_BUGS_DRAWN]],
        known=known_rows(store),
        optimizations=optimization_coverage(store),
        feedback_costs=store.feedback_costs(),
    )
