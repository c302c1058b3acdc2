"""A campaign's bugs as files to share: markdown, JSON, and SARIF 2.1.0 (the format code
scanning dashboards read; each bug is a result whose location is its bundle's model)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

from onnxfuzz import __version__
from onnxfuzz.store.db import REFERENCE_BUGS
from onnxfuzz.store.report import (
    FAMILIES_NOTE,
    families_title,
    family_rows,
    reduced_ops,
    reduction_lines,
)

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"crash": "error", "timeout": "error", "mismatch": "error"}


# Failures of the reference alone (``store.report.summary_rows(reference_alone=True)``):
# set aside by the campaign, unreduced, in their own folder; listed apart from the bugs.
ALONE_WORDS = (
    "The reference failed on these tests, so they said nothing of the target's results: "
    "set aside unreduced (`onnxfuzz fuzz --reduce-reference` reduces and files them as bugs). "
    "Each is a failure of the reference backend itself, to triage like a bug."
)


def alone_words(alone: list[dict[str, Any]]) -> str:
    """``ALONE_WORDS``, and where another backend failed the same way on some of the tests,
    how many and that those are its bugs too ("the target ran" is not so there)."""
    shared = sum(1 for r in alone if r.get("shared_with"))
    if not shared:
        return ALONE_WORDS
    return (
        f"{ALONE_WORDS} In {shared} of {len(alone)} the target failed the same way too "
        "(column `also failed`): a bug of a component they share, the target's as well."
    )


def markdown(
    campaign_dir: Path, rows: list[dict[str, Any]], n: int, alone: list[dict[str, Any]] = ()
) -> str:
    lines = [
        f"# Bugs in {campaign_dir.name}",
        "",
        f"{n} tests, {families_title(rows)}"
        + (f"; {len(alone)} failures of the reference (the last table)" if alone else "")
        + ". Each bundle's `issue.md` is ready to file.",
        "",
    ]
    if rows:
        lines += [
            "## Families",
            "",
            FAMILIES_NOTE,
            "",
            "| family | backend | verdict | stage | bundles | hits | first test |",
            "|---|---|---|---|---|---|---|",
        ]
        for f in family_rows(rows):
            links = " ".join(f"[{b}](bugs/{b}/issue.md)" for b in f["bundles"])
            lines.append(
                f"| {f['family']} | {f['backend']} | {f['verdict']} | {f['stage'] or '-'} | "
                f"{len(f['bundles'])}: {links} | {f['hits']} | {f['first_test']} |"
            )
        lines.append("")
    lines += [
        "## Bundles",
        "",
        "| id | family | verdict | stage | backend | suspect | reduced ops | hits | first seen |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        when = datetime.datetime.fromtimestamp(r["first_seen"]).strftime("%Y-%m-%d %H:%M")
        pattern = reduced_ops(r)
        lines.append(
            f"| [{r['id']}](bugs/{r['id']}/issue.md) | {r.get('family', '-')} | {r['verdict']} | "
            f"{r['stage'] or '-'} | "
            f"{r['backend']} | {r['suspect'] or '-'} | {pattern} | {r['hits']} | "
            f"test {r['first_test']}, {when} |"
        )
    for line in reduction_lines(rows, campaign_dir):
        lines += ["", line]
    if alone:
        lines += ["", f"## Failures of the reference ({len(alone)})", "", alone_words(alone), ""]
        lines += [
            "| id | verdict | stage | backend | also failed | hits | first test |",
            "|---" * 7 + "|",
        ]
        for r in alone:
            lines.append(
                f"| [{r['id']}]({REFERENCE_BUGS}/{r['id']}/issue.md) | {r['verdict']} | "
                f"{r['stage'] or '-'} | {r['backend']} | {', '.join(r['shared_with']) or '-'} | "
                f"{r['hits']} | {r['first_test']} |"
            )
    return "\n".join(lines) + "\n"


def as_json(
    campaign_dir: Path,
    rows: list[dict[str, Any]],
    n: int,
    versions: dict[str, str],
    alone: list[dict[str, Any]] = (),
) -> str:
    def records(rows: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
        return [
            {
                **r,
                "bundle": str(campaign_dir / where / r["id"]),
                "repro": repro_command(campaign_dir, r, where),
            }
            for r in rows
        ]

    doc = {
        "campaign": str(campaign_dir),
        "tests": n,
        "versions": versions,
        "families": family_rows(rows),
        "bugs": records(rows, "bugs"),
        "reference_bugs": records(list(alone), REFERENCE_BUGS),
    }
    return json.dumps(doc, indent=1, default=str)


def as_sarif(
    campaign_dir: Path,
    rows: list[dict[str, Any]],
    versions: dict[str, str],
    alone: list[dict[str, Any]] = (),
) -> str:
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for r, where in [*((r, "bugs") for r in rows), *((r, REFERENCE_BUGS) for r in alone)]:
        rule = f"{r['verdict']}/{r['stage'] or 'run'}"
        rules.setdefault(
            rule,
            {
                "id": rule,
                "name": f"{r['verdict']}-at-{r['stage'] or 'run'}",
                "shortDescription": {"text": f"a backend {r['verdict']} at {r['stage']}"},
            },
        )
        bundle = campaign_dir / where / r["id"]
        model = bundle / "reduced" / "model.onnx"
        if not model.exists():
            model = bundle / "model.onnx"
        results.append(
            {
                "ruleId": rule,
                "level": _LEVEL.get(r["verdict"], "warning"),
                "message": {
                    "text": f"{r['backend']}: {r['verdict']} at {r['stage'] or 'run'} on "
                    f"{r['pattern'].replace('+', ' ')} ({r['hits']} hits); "
                    f"repro: {repro_command(campaign_dir, r, where)}"
                },
                "locations": [{"physicalLocation": {"artifactLocation": {"uri": str(model)}}}],
                "partialFingerprints": {"onnxfuzzBug": r["id"]},
                "properties": {
                    "backend": r["backend"],
                    "family": r.get("family"),
                    "suspect": r["suspect"],
                    "hits": r["hits"],
                    "seeds": r["seeds"][:20],
                    "issue": str(bundle / "issue.md"),
                    # the reference's failure, set aside unreduced (``ALONE_WORDS``)
                    "reference_alone": where == REFERENCE_BUGS,
                },
            }
        )
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "onnxfuzz",
                        "version": __version__,
                        "informationUri": "https://github.com/onnxfuzz/onnxfuzz",
                        "rules": list(rules.values()),
                    }
                },
                "properties": {"versions": versions},
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=1, default=str)


def repro_command(campaign_dir: Path, r: dict[str, Any], where: str = "bugs") -> str:
    """The one command that replays bug ``r``: its reduced bundle's repro.py if any."""
    bundle = campaign_dir / where / r["id"]
    folder = bundle / "reduced" if (bundle / "reduced" / "repro.py").exists() else bundle
    return f"python {folder / 'repro.py'}"
