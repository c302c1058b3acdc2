"""``onnxfuzz reduce`` (any model) and ``onnxfuzz triage`` (a campaign's bugs)."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import click
import numpy as np

from onnxfuzz.cli import cli


def _model_inputs(model, folder: Path | None, seed: int) -> dict[str, np.ndarray]:
    """Inputs from a test_data_set folder, else drawn from the model's recorded value
    domains (onnxfuzz models), else small values."""
    from onnxfuzz import dtypes as dt
    from onnxfuzz.export import INPUTS_KEY
    from onnxfuzz.intervals import Values
    from onnxfuzz.replay import load_inputs
    from onnxfuzz.values import inputs_for

    if folder is not None:
        return load_inputs(folder)
    meta = {p.key: p.value for p in model.metadata_props}
    domains = json.loads(meta.get(INPUTS_KEY, "{}"))
    inits = {i.name for i in model.graph.initializer}
    specs, doms = [], {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        shape = tuple(d.dim_value for d in tt.shape.dim)
        if any(d <= 0 for d in shape):
            raise click.ClickException(
                f"input {vi.name} has a dynamic shape {list(shape)}: "
                "give --inputs with a test_data_set folder"
            )
        specs.append((vi.name, tt.elem_type, shape))
        d = domains.get(vi.name)
        lo, hi = (
            (0, 1) if tt.elem_type == dt.BOOL else (-1, 1) if tt.elem_type in dt.FLOATS else (0, 3)
        )
        doms[vi.name] = Values(**d) if d is not None else Values(lo, hi)
    return inputs_for(np.random.default_rng(seed), specs, doms)


@cli.command()
@click.argument("model_path", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--backend",
    "backends",
    multiple=True,
    required=True,
    metavar="SPEC",
    help="Twice: the reference, then the backend that fails.",
)
@click.option(
    "--match",
    default=None,
    metavar="REGEX",
    help="Keep any failure of the backend matching REGEX (default: the exact "
    "signature of the first run's failure).",
)
@click.option(
    "--inputs",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="A test_data_set folder with input_<k>.pb.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output folder (default: <model>-reduced/).",
)
@click.option(
    "--budget",
    type=click.FloatRange(min=1),
    default=120.0,
    show_default=True,
    help="Seconds of reduction.",
)
@click.option("--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True)
@click.option("--seed", type=int, default=0, help="Seed of generated input values.")
def reduce(
    model_path: Path,
    backends: tuple[str, ...],
    match: str | None,
    inputs: Path | None,
    out: Path | None,
    budget: float,
    timeout: float,
    seed: int,
) -> None:
    """Reduce a model that fails on a backend to a small model that fails the same way."""
    import onnx

    from onnxfuzz.backend import parse_backend
    from onnxfuzz.errors import ModelError, UsageError
    from onnxfuzz.reduction.reduce import reduce_model
    from onnxfuzz.reduction.reproduce import Reproducer, Target
    from onnxfuzz.sandbox import Worker

    if len(backends) != 2:
        raise UsageError("--backend: give exactly two, the reference then the failing backend")
    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001 - protobuf raises several types
        raise ModelError(f"{model_path}: not an ONNX model ({type(e).__name__}: {e})") from None
    pattern = None
    if match is not None:
        try:
            pattern = re.compile(match)
        except re.error as e:
            raise UsageError(f"--match: not a regular expression: {e}") from None
    sibling = model_path.parent / "test_data_set_0"
    feeds = _model_inputs(model, inputs or (sibling if sibling.is_dir() else None), seed)
    reference, backend = backends
    workers = {
        label: Worker(parse_backend(label), timeout=timeout) for label in dict.fromkeys(backends)
    }
    try:
        for w in workers.values():
            w.start()
        rep = Reproducer(workers, Target(backend, reference, match=pattern))
        first = rep.assess(model, feeds)
        if first.signature is None or (pattern and not rep(model, feeds)):
            raise click.ClickException(
                f"{model_path} does not fail on {backend}"
                + (f" matching {match!r}" if match else "")
                + f": verdict {first.verdict.verdict}; nothing to reduce"
            )
        rep.target.signature = first.signature
        click.echo(f"reducing: {first.signature}")
        r = reduce_model(model, feeds, rep, budget)
    finally:
        for w in workers.values():
            w.close()
    from onnxfuzz.bundle import _write_inputs

    dest = out or model_path.with_name(model_path.stem + "-reduced")
    if dest.exists():
        raise UsageError(f"--out: {dest} exists; remove it or choose another --out")
    _write_inputs(dest, r.model, r.inputs)
    click.echo(
        f"{r.before.nodes} -> {r.after.nodes} nodes ({' '.join(r.ops)}) in "
        f"{r.seconds:.1f} s, {r.runs} backend runs"
        + ("" if r.complete else " (budget spent before the fixed point)")
    )
    for name, st in r.stats().items():
        click.echo(
            f"  {name:<18} tried {st['tried']:>4}  kept {st['kept']:>3}  {st['seconds']:.2f} s"
        )
    click.echo(f"written to {dest}/model.onnx")


@cli.command()
@click.argument("campaign_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
def triage(campaign_dir: Path) -> None:
    """One table over a campaign's bugs, in the terminal and as DIR/triage.md."""
    from rich.console import Console

    from onnxfuzz.campaign import summary_rows
    from onnxfuzz.cli_fuzz import bug_table
    from onnxfuzz.errors import UsageError
    from onnxfuzz.store import Store

    db = campaign_dir / "campaign.db"
    if not db.exists():
        raise UsageError(f"{campaign_dir}: no campaign.db; give a folder made by onnxfuzz fuzz")
    store = Store(db)
    try:
        rows = summary_rows(store)
        n = store.n_tests()
    finally:
        store.close()
    Console().print(bug_table(rows, f"bugs in {campaign_dir} ({n} tests)"))
    lines = [
        f"# Bugs in {campaign_dir.name}",
        "",
        f"{n} tests, {len(rows)} distinct bugs.",
        "",
        "| id | verdict | stage | suspect | reduced ops | hits | first seen |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        when = datetime.datetime.fromtimestamp(r["first_seen"]).strftime("%Y-%m-%d %H:%M")
        pattern = r["pattern"].replace("+", " ") if r["pattern"] != "unreduced" else "-"
        lines.append(
            f"| [{r['id']}](bugs/{r['id']}/) | {r['verdict']} | {r['stage'] or '-'} | "
            f"{r['suspect'] or '-'} | {pattern} | {r['hits']} | "
            f"test {r['first_test']}, {when} |"
        )
    (campaign_dir / "triage.md").write_text("\n".join(lines) + "\n")
    click.echo(f"written to {campaign_dir / 'triage.md'}")
