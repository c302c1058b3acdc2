"""``onnxfuzz triage DIR``: a campaign's bugs, families first, as a table, as
DIR/triage.{md,json,sarif}, and each bundle's issue.md written (again) for filing, with
the culprit inside the backend (TVM stage and pass, onnx2torch node) looked for once;
``--export-known FILE`` writes the known-findings file a next ``fuzz --known`` skips."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from onnxfuzz.store.known import KnownFile


@click.command()
@click.argument("campaign_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "json", "sarif"]),
    default="md",
    show_default=True,
    help="DIR/triage.md (a table), triage.json (every bug's record) or triage.sarif "
    "(SARIF 2.1.0, for code-scanning dashboards); json and sarif also go to stdout.",
)
@click.option(
    "--export-known",
    "export_known",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Also write the campaign's bug families (and those of the --known file it ran with) "
    "as a known-findings file for `onnxfuzz fuzz --known FILE`.",
)
def triage(campaign_dir: Path, fmt: str, export_known: Path | None) -> None:
    """One table over a campaign's bugs, and a ready-to-file issue.md per bundle."""
    from onnxfuzz.errors import BundleDamaged, UsageError
    from onnxfuzz.run.culprit import annotate
    from onnxfuzz.run.replay import load_bundle
    from onnxfuzz.store import triage as report
    from onnxfuzz.store.db import REFERENCE_BUGS, Store
    from onnxfuzz.store.issue import write_issue
    from onnxfuzz.store.known import export
    from onnxfuzz.store.report import (
        bug_table,
        console,
        diversity_table,
        family_table,
        known_rows,
        known_table,
        reduction_lines,
        reference_title,
        summary_rows,
    )

    if export_known is not None and export_known.suffix.lower() not in ("", ".json"):
        # the file is JSON whatever it is called: a known.toml held JSON, said nowhere
        raise UsageError(
            f"--export-known: {export_known} would hold JSON (onnxfuzz-known/1), not "
            f"{export_known.suffix[1:].upper()}: name it {export_known.with_suffix('.json').name}"
        )
    db = campaign_dir / "campaign.db"
    if not db.exists():
        raise UsageError(f"{campaign_dir}: no campaign.db; give a folder made by onnxfuzz fuzz")
    store = Store.open_existing(db)
    try:
        rows = summary_rows(store)
        alone = summary_rows(store, reference_alone=True)
        known = known_rows(store)
        n = store.n_tests()
        known_file = None
        if export_known is not None:
            stored = store.get_meta("known")
            known_file = export(
                campaign_dir,
                store.bugs(),
                store.get_meta("versions") or {},
                {(r["label"], r["family"]): r["hits"] for r in known},
                _stored_known(stored),
                store.names,
                store.follow_ups(),
            )
        diversity = diversity_table(store.get_meta("diversity"), names=store.names)
        versions = store.get_meta("versions") or {}
    finally:
        store.close()
    issues = 0
    damaged: list[str] = []  # bundles that cannot be read: said, the rest triaged
    for r, where in [*((r, "bugs") for r in rows), *((r, REFERENCE_BUGS) for r in alone)]:
        bundle = campaign_dir / where / r["id"]
        if not bundle.is_dir():
            continue  # its bundle failed to write (the campaign said so)
        try:
            load_bundle(bundle)
            if (bundle / "reduced").is_dir():
                load_bundle(bundle / "reduced")
            # the culprit inside the backend, once per bundle (run.culprit); it writes
            # issue.md when it finds one
            if annotate(bundle) is None:
                write_issue(bundle)
        except BundleDamaged as e:
            damaged.append(str(e))
            continue
        except (ValueError, AttributeError, KeyError, TypeError, OSError) as e:
            # meta.json edited by hand into another shape: read, but not as a bundle's
            damaged.append(f"bundle damaged: {bundle} ({type(e).__name__}: {e})")
            continue
        issues += 1
    if fmt == "md":
        if rows:
            console().print(family_table(rows, f"in {campaign_dir} ({n} tests)"))
        if known:
            console().print(known_table(known))
        console().print(bug_table(rows, f"bugs in {campaign_dir} ({n} tests)"))
        for line in reduction_lines(rows, campaign_dir):
            click.echo(line)
        if alone:
            where = campaign_dir / REFERENCE_BUGS
            console().print(bug_table(alone, reference_title("", alone, where)))
        if diversity is not None:
            console().print(diversity)
        text = report.markdown(campaign_dir, rows, n, alone)
    elif fmt == "json":
        text = report.as_json(campaign_dir, rows, n, versions, alone)
        click.echo(text)
    else:
        text = report.as_sarif(campaign_dir, rows, versions, alone)
        click.echo(text)
    path = campaign_dir / f"triage.{fmt}"
    path.write_text(text)
    click.echo(f"written to {path}; {issues} bundles' issue.md ready to file", err=fmt != "md")
    for line in damaged:
        click.echo(f"{line}: its issue.md is not written; copy the bundle again", err=True)
    if export_known is not None and known_file is not None:
        try:
            known_file.write(export_known)
        except OSError as e:
            raise UsageError(
                f"--export-known: cannot write {export_known} ({e.strerror or e})"
            ) from None
        click.echo(
            f"known findings ({len(known_file.families)} families) written to {export_known}: "
            f"onnxfuzz fuzz --known {export_known} skips them",
            err=fmt != "md",
        )


def _stored_known(record: object) -> KnownFile | None:
    """The known file the campaign ran with (None: none, or a record this version cannot
    read: the export then holds this campaign's families alone)."""
    from onnxfuzz.store.known import KnownFile

    if record is None:
        return None
    try:
        return KnownFile.from_record(record)
    except (KeyError, TypeError, ValueError):
        return None
