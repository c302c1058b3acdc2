"""A crash that follows another node's wrong result is shown to (the model cut after that
node is wrong, the rest runs on the right values) and is of that result's family, joined
to its bug once that is filed (filed before, its bundle joins it then); the same crash in
other words joins the crash filed first: one root cause, one bundle, however many
consumers it crashed and however it was worded, on real ONNX Runtime workers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from models import chain
from runs import finished

from onnxfuzz.cli.main import main
from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Stage
from onnxfuzz.reduce.precursor import find_precursor
from onnxfuzz.reduce.reproduce import Reproducer, Target
from onnxfuzz.run.campaign import MAX_REDUCED, Campaign, CampaignOptions, Resumed
from onnxfuzz.store.db import Store
from onnxfuzz.store.known import KnownFile
from onnxfuzz.store.report import families_title, family_rows, summary_rows

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"
WIDENS = f"{ADAPTERS}:WidensThenFails:op=Abs"
X = {"x": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)}


def _campaign(
    tmp_path: Path,
    target: str,
    tests: int,
    nodes: tuple[int, int],
    ops: list[str],
    dtypes: list[str],
) -> Campaign:
    """A finished campaign of ``target`` against ORT, probe off, on models of ``nodes``
    nodes of ``ops`` in ``dtypes``."""
    generator = {"min_nodes": nodes[0], "max_nodes": nodes[1], "ops": ops, "dtypes": dtypes}
    opts = CampaignOptions(
        backends=["ort", target], tests=tests, probe="off", reduce_budget=20, generator=generator
    )
    return finished(tmp_path / "camp", opts)


def _resumed(out: Path, more: int) -> None:
    c = Campaign(out, None, resume=True, changes=Resumed(more_tests=more))
    c.start()
    try:
        c.run()
    finally:
        c.close()


def _rows(out: Path) -> list[dict]:
    store = Store(out / "campaign.db")
    try:
        return summary_rows(store)
    finally:
        store.close()


def test_crashes_that_follow_one_wrong_result_are_one_bundle(tmp_path) -> None:
    # Abs comes back float64: alone, a dtype mismatch; read by Add, Mul or Relu, a compile
    # failure naming that consumer (Add, Mul, Relu or Abs: a signature each). A crash found
    # before the mismatch is filed is the only report of the cause: a bundle, of the
    # mismatch's family. Once the mismatch is filed, those bundles join its bug, and later
    # crashes join it at once: one root cause, one bundle.
    c = _campaign(tmp_path, WIDENS, 1, (2, 5), ["Abs", "Add", "Mul", "Relu"], ["float32"])
    for _ in range(20):  # test by test, until a crash is filed
        if any(r["verdict"] == "crash" for r in _rows(c.out)):
            break
        _resumed(c.out, 1)
    rows = _rows(c.out)
    crashes = [r for r in rows if r["verdict"] == "crash"]
    assert crashes and not [r for r in rows if r["verdict"] == "mismatch"], rows
    early = {}
    for r in crashes:  # filed before the cause: worded as following it
        bundle = c.out / "bugs" / r["id"]
        meta = json.loads((bundle / "meta.json").read_text())
        assert meta["reduced_ops"][0] == "Abs" and len(meta["reduced_ops"]) == 2, meta
        follows = meta["follows"]
        assert (follows["op"], follows["kind"]) == ("Abs", "dtype"), follows
        assert follows["signature"].endswith("|mismatch|run|dtype in Abs output"), follows
        issue = (bundle / "issue.md").read_text()
        assert "The crash follows a wrong result of Abs (node `abs0`)" in issue, issue
        # the title says it too: a title naming the crashing pass alone misled
        assert issue.splitlines()[0].endswith(", after Abs's wrong element type"), issue
        assert "dtype float64, the model declares float32" in issue
        early[meta["signature"]] = r["id"]
    _resumed(c.out, 40)
    store = Store(c.out / "campaign.db")
    try:
        rows = summary_rows(store)
        keys = {b["id"]: b["key"] for b in store.bugs()}
        results = store.db.execute(
            "SELECT test_id, verdict, signature, bug FROM results WHERE bug IS NOT NULL"
        ).fetchall()
    finally:
        store.close()
    # the mismatch alone is the bug; the crash bundles filed before it are gone, joined
    (root,) = rows
    assert (root["verdict"], root["pattern"]) == ("mismatch", "Abs"), root
    for bundle_id in early.values():
        assert not (c.out / "bugs" / bundle_id).exists(), bundle_id
    found = min(t for t, v, _, bug in results if bug == keys[root["id"]] and v == "mismatch")
    # every crash stored as tests of the Abs bug, each signature named once
    joined = [(t, sig) for t, v, sig, bug in results if bug == keys[root["id"]] and v == "crash"]
    assert [t for t, _ in joined if t < found] and [t for t, _ in joined if t > found], joined
    meta = json.loads((c.out / "bugs" / root["id"] / "meta.json").read_text())
    follow_ups = {u["signature"]: u for u in meta["follow_ups"]}
    assert set(follow_ups) == {sig for _, sig in joined}, (follow_ups, joined)
    assert set(early) <= set(follow_ups), (early, follow_ups)
    for sig, u in follow_ups.items():
        assert u["hits"] == sum(1 for _, s in joined if s == sig), (u, joined)
        assert u["ops"][0] == "Abs" and len(u["ops"]) == 2, u
    # hits past the reduced ones join too (not filed unreduced)
    assert max(u["hits"] for u in follow_ups.values()) > MAX_REDUCED, follow_ups
    issue = (c.out / "bugs" / root["id"] / "issue.md").read_text()
    said = "This wrong result also made widens-then-fails:op=Abs crash in the ops that read it"
    assert said in issue, issue
    assert f": {len(follow_ups)} crash signatures in {len(joined)} test" in issue, issue
    families = family_rows(rows)
    assert len(families) == 1 and len(families[0]["bundles"]) == 1, families
    n = len(follow_ups)
    assert families_title(rows) == (
        f"1 family, 1 bundle (and {n} crash signatures joined to a bundle of their cause, "
        "not filed)"
    )
    # triage's known file holds the joined crashes in the Abs family: known, not filed again
    known = tmp_path / "known.json"
    assert main(["triage", str(c.out), "--format", "json", "--export-known", str(known)]) == 0
    entries = KnownFile.load(known)
    root_signature = keys[root["id"]].rsplit("|", 1)[0]  # a key: signature|pattern
    abs_family = entries.match(WIDENS, root_signature)
    assert abs_family is not None, root_signature
    assert set(follow_ups) <= set(abs_family.signatures), abs_family
    for sig in follow_ups:  # (the Mul crash's family, of the same words, may match first)
        assert entries.match(WIDENS, sig) is not None, sig
    doc = json.loads((c.out / "triage.json").read_text())
    assert len(doc["families"]) == 1
    (bug,) = doc["bugs"]
    assert bug["follows"] is None and bug["verdict"] == "mismatch", bug
    assert "This wrong result also made" in (c.out / "bugs" / bug["id"] / "issue.md").read_text()


def test_a_crash_of_its_own_follows_nothing_and_a_compile_reads_no_values() -> None:
    """A consumer that fails on right operands (Raise on Relu after a right Abs) follows
    nothing; after Abs's wrong values (the right type), a crash at compile follows nothing
    (a compile reads no values), one at run time follows them."""
    raise_relu = f"{ADAPTERS}:Raise:op=Relu"
    wrong_abs = f"{ADAPTERS}:WrongOp:op=Abs"  # Abs + 0.5: wrong values, the right type
    model = chain(["Abs", "Relu"])
    with BackendPool(["ort", raise_relu, wrong_abs], timeout=30) as pool:
        rep = Reproducer(pool, Target(raise_relu, "ort"))
        assert find_precursor(model, X, rep, Stage.RUN) is None
        rep = Reproducer(pool, Target(wrong_abs, "ort"))
        assert find_precursor(model, X, rep, Stage.COMPILE) is None
        found = find_precursor(model, X, rep, Stage.RUN)
    assert found is not None and (found.op, found.kind) == ("Abs", "values"), found


def test_one_crash_in_other_words_is_one_bundle(tmp_path) -> None:
    """A crash of one family reduced to the same ops joins the bug filed first, whatever
    its words (torch's "expected scalar type Half/Double but found Float", one signature
    per element type): one bundle, its issue.md naming the other forms."""
    raise_typed = f"{ADAPTERS}:RaiseTyped:op=Sigmoid"
    dtypes = ["float16", "float32", "float64"]
    c = _campaign(tmp_path, raise_typed, 24, (1, 3), ["Sigmoid", "Abs", "Neg"], dtypes)
    store = Store(c.out / "campaign.db")
    try:
        rows = summary_rows(store)
        signatures = {
            s for (s,) in store.db.execute("SELECT signature FROM results WHERE verdict='crash'")
        }
    finally:
        store.close()
    assert len(signatures) >= 2, signatures  # the same crash in two words or more
    (bug,) = rows
    assert bug["pattern"] == "Sigmoid" and bug["follow_ups"] == len(signatures) - 1, bug
    meta = json.loads((c.out / "bugs" / bug["id"] / "meta.json").read_text())
    joined = meta["follow_ups"]
    assert {u["why"] for u in joined} == {"same crash"}, joined
    assert {u["signature"] for u in joined} | {meta["signature"]} == signatures, joined
    issue = (c.out / "bugs" / bug["id"] / "issue.md").read_text()
    assert "The same crash in other words: " in issue, issue
    for u in joined:
        assert u["signature"].split("|", 3)[-1] in issue, (u, issue)


def test_one_crash_kept_beside_other_ops_is_one_bundle(tmp_path) -> None:
    """A crash whose words depend on another node (the first graph input's rank, named in
    the message) reduces to Relu alone where Relu reads the graph input, and to X -> Relu
    where X changed that input's rank: one bug, filed once (before, a bundle per X: a
    planted Gather crash was 7 "distinct bugs", Gather, Reshape -> Gather, LSTM -> Gather,
    ...). A hit that is not reduced counts for a bundle whose ops its test holds."""
    target = f"{ADAPTERS}:RaiseNamingInput:op=Relu"
    ops = ["Relu", "Reshape", "Unsqueeze", "Flatten", "Abs"]
    c = _campaign(tmp_path, target, 30, (2, 5), ops, ["float32"])
    store = Store(c.out / "campaign.db")
    try:
        bugs = store.db.execute("SELECT key, signature, pattern FROM bugs").fetchall()
        kept = store.db.execute(
            "SELECT t.ops, r.bug FROM results r JOIN tests t ON t.id = r.test_id "
            "WHERE r.bug IS NOT NULL"
        ).fetchall()
        signatures = {
            s for (s,) in store.db.execute("SELECT signature FROM results WHERE verdict='crash'")
        }
    finally:
        store.close()
    assert len(kept) >= 5 and len(signatures) >= 2, (kept, signatures)  # it shows, in 2 words
    patterns = [p for _, _, p in bugs]
    assert len(bugs) == 1 and patterns == ["Relu"], [(s[-40:], p) for _, s, p in bugs]
    for ops_json, _ in kept:  # every hit counted for the bundle is of a test holding Relu
        assert "Relu" in json.loads(ops_json), ops_json
    (folder,) = (c.out / "bugs").iterdir()  # one bundle on disk: none left of a merged bug
    meta = json.loads((folder / "meta.json").read_text())
    others = {u["signature"] for u in meta.get("follow_ups", [])}
    assert others | {meta["signature"]} == signatures, (others, signatures)
    assert "The same crash in other words" in (folder / "issue.md").read_text()
