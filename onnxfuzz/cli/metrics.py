"""``onnxfuzz metrics PATH...``: the diversity of a set of models (a corpus, any folder).

Each PATH is a ``.onnx`` file or a folder searched for ``*.onnx`` at any depth (a corpus
from ``onnxfuzz generate`` holds ``DIR/test_*/model.onnx``; hidden entries, such as the
``.tmp_test_*`` folders of a corpus being written, are skipped). A file that cannot be read
as an ONNX model stops the command with exit 2 naming it: metrics that silently left out
part of a corpus would misstate it. ``--skip-bad`` skips such files with a warning instead.

A PATH that is a campaign folder (one holding ``campaign.db``, as ``onnxfuzz fuzz --out``
makes it; or that ``campaign.db`` itself) is read as a campaign instead, not searched for
models (its ``bugs/`` hold reduced models, not the tests): per backend, the optimizations
its optimizer made fire (ONNX Runtime transformers and rewrite rules, TVM passes and fused
patterns: the adapters' ``optimizations`` feedback stored in campaign.db), in how many
tests each, those that ran and never fired, the distinct fused patterns (also per 1,000
tests), and the campaign's stored model diversity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from onnxfuzz.errors import UsageError

COLUMNS = (  # summary key -> column
    ("models", "models"),
    ("nodes", "nodes"),
    ("ops", "ops"),
    ("instances", "instances"),
    ("in_degree", "in-deg"),
    ("out_degree", "out-deg"),
    ("edges", "edges"),
    ("triples", "triples"),
    ("connectivity", "connectivity"),
    ("longest", "chain"),
)


def model_files(path: Path) -> list[Path]:
    """The models ``path`` names: itself, or the ``*.onnx`` under it (sorted)."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    if path.is_file():
        return [path]
    found = sorted(
        p
        for p in path.rglob("*.onnx")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )
    if not found:
        raise UsageError(f"{path}: no .onnx files in this folder")
    return found


def load_model(path: Path) -> Any:
    """``path`` as an ``onnx.ModelProto`` (external data not loaded: not needed); a
    ``UsageError`` naming the file for one that is not a readable ONNX model."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # noqa: BLE001 - protobuf and OS errors alike: one line
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"{path}: not a readable ONNX model ({why})") from None
    # Some bytes (an empty file, one cut at a field boundary) parse as a partial message:
    # a model has all three of these.
    for has, what in (
        (model.ir_version, "IR version"),
        (model.HasField("graph"), "graph"),
        (len(model.opset_import), "opset_import"),
    ):
        if not has:
            raise UsageError(f"{path}: not an ONNX model, or a truncated one (no {what})")
    return model


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--skip-bad",
    is_flag=True,
    help="Skip files that are not readable ONNX models, with a warning (default: exit 2).",
)
def metrics(paths: tuple[Path, ...], as_json: bool, skip_bad: bool) -> None:
    """Diversity of the models in PATHS (files, or folders searched for *.onnx): op types,
    op instances (type + input shapes + attributes), in/out degrees, op-type edges and
    triples, connectivity and the longest chain. One row per PATH, and a total.

    A campaign folder (holding campaign.db) gives its optimization coverage instead: per
    backend, the transformers, rules, passes and fused patterns that fired (in how many
    tests), those that never fired, and the distinct fused patterns."""
    campaigns = [db for db in map(campaign_db, paths) if db is not None]
    model_paths = [p for p in paths if campaign_db(p) is None]
    # every path checked before any work
    files = {path: model_files(path) for path in model_paths}
    coverage = {str(db.parent): campaign_coverage(db) for db in campaigns}
    if not files:
        if as_json:
            click.echo(json.dumps({"campaigns": coverage}, indent=2))
        else:
            for folder, record in coverage.items():
                _print_coverage(folder, record)
        return
    _model_metrics(files, as_json, skip_bad, coverage)


def campaign_db(path: Path) -> Path | None:
    """The campaign.db that ``path`` names (a campaign folder, or the file), else None."""
    if path.is_dir() and (path / "campaign.db").is_file():
        return path / "campaign.db"
    if path.name == "campaign.db" and path.is_file():
        return path
    return None


def campaign_coverage(db: Path) -> dict[str, Any]:
    """A campaign's optimization coverage, per backend (its label): the display name, and
    per kind the names fired with their test counts (most first) and the names that ran and
    never fired; the distinct fused patterns; the feedback hook's share of the backend's
    time. Also the test count and the stored diversity over all tests."""
    from onnxfuzz.generate.measure.metrics import Diversity
    from onnxfuzz.store.db import Store
    from onnxfuzz.store.report import optimization_coverage

    store = Store.open_existing(db)
    try:
        if store.get_meta("options") is None:
            raise UsageError(f"{db}: holds no campaign options (not a campaign made by fuzz)")
        tests = store.n_tests()
        coverage = optimization_coverage(store)
        costs = store.feedback_costs()
        names = store.names
        diversity = store.get_meta("diversity")
    finally:
        store.close()
    backends: dict[str, Any] = {}
    for label in sorted(coverage):  # a hook that ran and named nothing says nothing either
        kinds = coverage.get(label, {})
        _, backend_s, feedback_s, errors, _ = costs.get(label, (0, 0.0, 0.0, 0, ""))
        fused = len(kinds.get("fused", ([], []))[0])
        backends[label] = {
            "name": names.get(label, label),
            "kinds": {
                kind: {"fired": dict(fired), "never_fired": sorted(never)}
                for kind, (fired, never) in sorted(kinds.items())
            },
            "fused_patterns": fused,
            "fused_per_1000_tests": round(1000 * fused / tests, 1) if tests else 0.0,
            "hook_share": round(feedback_s / backend_s, 4) if backend_s > 0 else None,
            "hook_errors": errors,
        }
    summary = None
    if diversity and "all" in diversity:
        try:
            summary = Diversity.from_record(diversity["all"]).summary()
        except (KeyError, TypeError, ValueError):  # a record of another version
            summary = None
    return {"tests": tests, "backends": backends, "diversity": summary}


def _print_coverage(folder: str, record: dict[str, Any]) -> None:
    """A campaign's optimization coverage: a table per backend and kind, then each list
    whole (the names fired, with their tests; the names never fired)."""
    from rich.table import Table

    from onnxfuzz.store.report import console

    tests, backends = record["tests"], record["backends"]
    if not backends:
        click.echo(f"{folder}: {tests} tests; no backend gave optimization feedback")
        return
    click.echo(f"{folder}: {tests} tests")
    table = Table(title="optimization coverage (distinct names; per 1,000 tests: fused only)")
    for col in ("backend", "kind", "fired", "never fired", "per 1,000 tests", "hook time"):
        table.add_column(col, justify="left" if col in ("backend", "kind") else "right")
    lines: list[str] = []
    for b in backends.values():
        hook = "-" if b["hook_share"] is None else f"{b['hook_share']:.1%}"
        if b["hook_errors"]:
            hook += f" ({b['hook_errors']} hook errors)"
        for kind, k in b["kinds"].items():
            fired, never = k["fired"], k["never_fired"]
            rate = f"{1000 * len(fired) / tests:.0f}" if tests and kind == "fused" else "-"
            unfired = "-" if kind == "fused" else str(len(never))  # no list of possible ones
            table.add_row(b["name"], kind, str(len(fired)), unfired, rate, hook)
            kinds = kind + ("es" if kind.endswith("s") else "s")  # passes, rules
            what = "distinct fused patterns" if kind == "fused" else f"{kinds} fired"
            lines.append(
                f"{b['name']} {what} ({len(fired)}): "
                + (", ".join(f"{n} {t}" for n, t in fired.items()) or "none")
            )
            if never:
                lines.append(f"{b['name']} {kinds} never fired ({len(never)}): {', '.join(never)}")
    out = console()
    out.print(table)
    for line in lines:
        click.echo(line)
    if record["diversity"] is not None:
        s = record["diversity"]
        click.echo(
            f"model diversity over all tests: {s['ops']} op types, {s['instances']} "
            f"instances, {s['triples']} op-type triples"
        )


def _model_metrics(
    files: dict[Path, list[Path]],
    as_json: bool,
    skip_bad: bool,
    coverage: dict[str, Any],
) -> None:
    """The diversity of the models found (and the campaigns' coverage, if any were given)."""
    from onnxfuzz.generate.measure.metrics import Diversity

    paths = list(files)
    per_path: dict[str, Diversity] = {}
    skipped: list[str] = []
    total = Diversity()
    for path, found in files.items():
        d = Diversity()
        for f in found:
            try:
                model = load_model(f)
            except UsageError as e:
                if not skip_bad:
                    raise
                click.echo(f"onnxfuzz: warning: skipped {e}", err=True)
                skipped.append(str(f))
                continue
            d.add(model)
        per_path[str(path)] = d
        total.merge(d)
    if not total.models:
        raise UsageError(f"{', '.join(map(str, paths))}: no readable ONNX model")
    if as_json:
        record: dict[str, Any] = {
            "paths": {k: _summary(d) for k, d in per_path.items()},
            "total": _summary(total),
            "skipped": skipped,
        }
        if coverage:
            record["campaigns"] = coverage
        click.echo(json.dumps(record, indent=2))
        return
    _print_table(per_path, total if len(per_path) > 1 else None)
    for folder, rec in coverage.items():
        _print_coverage(folder, rec)


def _summary(d: Any) -> dict[str, Any]:
    return {**d.summary(), "estimated": d.estimated()}


def _print_table(per_path: dict[str, Any], total: Any | None) -> None:
    import shutil

    from rich.console import Console
    from rich.table import Table

    table = Table(title="model diversity (nodes, connectivity, longest chain: means per model)")
    table.add_column("path", overflow="fold", min_width=24)
    for _, title in COLUMNS:
        table.add_column(title, justify="right")
    rows = list(per_path.items()) + ([("total", total)] if total is not None else [])
    for name, d in rows:
        s, approx = d.summary(), set(d.estimated())
        cells = []
        for key, _ in COLUMNS:
            v = s[key]
            if key == "connectivity":
                cells.append(f"{v:.1%}")
            elif isinstance(v, float):
                cells.append(f"{v:.1f}")
            else:
                cells.append(("~" if key in approx else "") + str(v))
        table.add_row(name, *cells)
    Console(width=max(120, shutil.get_terminal_size((120, 40)).columns)).print(table)
