"""``onnxfuzz metrics PATH...``: the diversity of a set of models (a corpus, any folder).

Each PATH is a ``.onnx`` file or a folder searched for ``*.onnx`` at any depth (a corpus
from ``onnxfuzz generate`` holds ``DIR/test_*/model.onnx``; hidden entries, such as the
``.tmp_test_*`` folders of a corpus being written, are skipped). A file that cannot be read
as an ONNX model stops the command with exit 2 naming it: metrics that silently left out
part of a corpus would misstate it. ``--skip-bad`` skips such files with a warning instead.
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
    triples, connectivity and the longest chain. One row per PATH, and a total."""
    from onnxfuzz.generate.measure.metrics import Diversity

    files = {path: model_files(path) for path in paths}  # every path checked before work
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
        click.echo(
            json.dumps(
                {
                    "paths": {k: _summary(d) for k, d in per_path.items()},
                    "total": _summary(total),
                    "skipped": skipped,
                },
                indent=2,
            )
        )
        return
    _print_table(per_path, total if len(per_path) > 1 else None)


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
