"""Campaigns against real ONNX Runtime and adapters that crash, hang, leak, raise or
compute wrong answers: every failure becomes the right verdict and the campaign goes on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runs import finished

from onnxfuzz.backend import load_backend
from onnxfuzz.errors import BackendError
from onnxfuzz.reduce.neighbours import MAX_VARIANTS
from onnxfuzz.run.campaign import Campaign, CampaignOptions
from onnxfuzz.store.db import Store

HERE = Path(__file__).resolve().parent
ADAPTERS = HERE / "adapters.py"
OPS = ["Add", "Relu", "Mul", "Sigmoid", "Tanh"]


def _campaign(tmp: Path, backend: str, tests: int = 12, **kw) -> Campaign:
    """``neighbours`` is off unless a test asks (the variants after each new bug's
    reduction: up to 20 s more per bug, a hang's variants each a timeout); those that read
    a bundle's issue.md and reproducers keep the product's default."""
    kw.setdefault("neighbours", 0)
    opts = CampaignOptions(
        backends=["ort", backend],
        tests=tests,
        seed=kw.pop("seed", 0),
        timeout=kw.pop("timeout", 10.0),
        memory_mb=kw.pop("memory_mb", 8192.0),
        generator={"min_nodes": 2, "max_nodes": 5, "ops": OPS, **kw.pop("generator", {})},
        **kw,
    )
    return finished(tmp / "camp", opts)


def _verdicts(c: Campaign, label: str) -> dict[str, int]:
    store = Store(c.out / "campaign.db")
    try:
        return {v: n for (b, v), n in store.counts_by_backend().items() if b == label}
    finally:
        store.close()


def _bugs(c: Campaign) -> list[dict]:
    store = Store(c.out / "campaign.db")
    try:
        return store.bugs()
    finally:
        store.close()


@pytest.mark.parametrize(
    ("cls", "verdict", "stage", "text", "kw"),
    [
        ("Segfault", "crash", "run", "SIGSEGV", {}),
        ("Abort", "crash", "compile", "SIGABRT", {}),
        ("Hang", "timeout", "compile", "no result within", {"timeout": 2.0}),
        # (a timeout well past the time to fill the cap: under load, with other tests
        # filling memory too, 10 s ran out first and a second bug, a timeout, was filed)
        ("Leak", "crash", "run", "out of memory", {"memory_mb": 1000.0, "timeout": 60.0}),
        ("Raise", "crash", "compile", "InternalError", {}),
    ],
)
def test_failures_become_verdicts_and_the_campaign_goes_on(
    tmp_path, cls, verdict, stage, text, kw
) -> None:
    label = f"{ADAPTERS}:{cls}:op=Add"
    c = _campaign(tmp_path, label, tests=10, **kw)
    counts = _verdicts(c, label)
    assert sum(counts.values()) == 10  # every test judged, none lost
    assert counts.get(verdict, 0) >= 1 and counts.get("ok", 0) >= 1, counts
    bugs = _bugs(c)
    assert len(bugs) == 1, bugs  # one bug, one bundle, however many hits
    bug = bugs[0]
    assert (bug["verdict"], bug["stage"]) == (verdict, stage)
    assert bug["hits"] == counts[verdict]
    meta = json.loads((c.out / "bugs" / bug["id"] / "meta.json").read_text())
    assert meta["verdict"] == verdict and meta["stage"] == stage
    assert text in (c.out / "bugs" / bug["id"] / "log.txt").read_text()
    for key in ("signature", "backend", "reference", "seed", "opset", "ops", "versions"):
        assert key in meta


def test_not_implemented_is_unsupported_not_a_bug(tmp_path) -> None:
    label = f"{ADAPTERS}:Unsupported:op=Add"
    c = _campaign(tmp_path, label, tests=10, probe="off")
    counts = _verdicts(c, label)
    assert counts.get("unsupported", 0) >= 1
    assert not _bugs(c)


def test_probe_classifies_a_missing_kernel_as_unsupported(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "cache"))
    label = f"{ADAPTERS}:Unsupported:op=Add"
    c = _campaign(tmp_path, label, tests=10, probe="classify")
    store = Store(c.out / "campaign.db")
    try:
        support = store.get_meta("probe_unsupported")
    finally:
        store.close()
    assert list(support[label]) == ["Add"] and support["ort"] == {}
    assert "Add is not implemented" in next(iter(support[label]["Add"].values()))
    counts = _verdicts(c, label)
    assert counts.get("unsupported", 0) >= 1 and not _bugs(c)  # Add still generated
    assert list((tmp_path / "cache").glob("probe-*.jsonl"))


def test_probe_steers_generation_away_from_pairs_a_backend_lacks(tmp_path, monkeypatch) -> None:
    # The default: the adapter lacks Add in float32 only. No test gives it that pair, so
    # every test compares both backends, and Add is still tested in float16.
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "cache"))
    label = f"{ADAPTERS}:UnsupportedType:op=Add,dtype=float32"
    gen = {"dtypes": ["float32", "float16"]}
    c = _campaign(tmp_path, label, tests=20, generator=gen)
    assert ("Add", 1) in c.cfg.avoid and "Add" not in c.excluded
    assert _verdicts(c, label) == {"ok": 20}
    assert any("Add" in row for row in _ops(c))
    classify = _campaign(tmp_path / "classify", label, tests=20, generator=gen, probe="classify")
    assert _verdicts(classify, label).get("unsupported", 0) >= 1  # the pair is generated


@pytest.mark.parametrize(
    ("form", "feature", "ops"),
    [
        ("op=Clip,dynamic=1", ("Clip", "dynamic:min"), ["Clip", "Relu", "Add", "Mul"]),
        ("op=Reshape,attr=allowzero,value=1", ("Reshape", "attr:allowzero=1"), ["Reshape", "Add"]),
    ],
)
def test_probe_steers_away_from_a_form_of_an_op_a_backend_lacks(
    tmp_path, monkeypatch, form, feature, ops
) -> None:
    # onnx2torch runs Clip but not with computed bounds, Reshape but not with allowzero=1:
    # an (op, type) probe cannot see that. The probe pins one form at a time on a single-op
    # model; the campaign then does not generate the forms the backend lacks (every test
    # compares both backends, the op is still tested), and with --probe classify, where
    # they are generated, the backend's failure on them is unsupported, not a bug.
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "cache"))
    label = f"{ADAPTERS}:UnsupportedForm:{form}"
    gen = {"dtypes": ["float32"], "ops": ops, "min_nodes": 3, "max_nodes": 6}
    c = _campaign(tmp_path, label, tests=30, generator=gen)
    assert feature in c.cfg.avoid_features
    assert feature[0] not in c.excluded
    assert _verdicts(c, label) == {"ok": 30}
    assert sum(feature[0] in row for row in _ops(c)) >= 5
    classify = _campaign(tmp_path / "classify", label, tests=30, generator=gen, probe="classify")
    assert _verdicts(classify, label).get("unsupported", 0) >= 1
    assert not _bugs(classify)


def _ops(c: Campaign) -> list[str]:
    store = Store(c.out / "campaign.db")
    try:
        return [r[0] for r in store.db.execute("SELECT ops FROM tests")]
    finally:
        store.close()


def test_probe_exclude_leaves_out_ops_a_backend_lacks(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "cache"))
    label = f"{ADAPTERS}:Unsupported:op=Add"
    c = _campaign(tmp_path, label, tests=10, probe="exclude")
    assert list(c.excluded) == ["Add"]
    assert _verdicts(c, label) == {"ok": 10}
    # said at the start (it showed in the HTML report only)
    assert any(n.startswith("probe: left out 1 op in every type (Add)") for n in c.probe_notes)


def test_planted_wrong_op_is_caught_with_a_reproducer(tmp_path) -> None:
    label = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    c = _campaign(
        tmp_path, label, tests=15, generator={"dtypes": ["float32"]}, neighbours=MAX_VARIANTS
    )
    counts = _verdicts(c, label)
    assert counts.get("mismatch", 0) >= 1, counts
    bugs = _bugs(c)
    assert len(bugs) == 1
    bundle = c.out / "bugs" / bugs[0]["id"]
    assert "Sigmoid" in bugs[0]["signature"]
    for f in ("model.onnx", "meta.json", "log.txt", "repro.py", "test_data_set_0/input_0.pb"):
        assert (bundle / f).exists(), f
    assert list((bundle / "test_data_set_0").glob("*/output_0.pb"))
    # The standalone reproducer and `onnxfuzz replay` both say it reproduces.
    r = subprocess.run(
        [sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REPRODUCES" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "replay", str(bundle)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "REPRODUCES" in r.stdout, r.stdout + r.stderr
    # issue.md says to run reduced/repro.py: replay takes that folder too (it read "bundle
    # damaged: reduced/meta.json (missing)")
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "replay", str(bundle / "reduced")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "REPRODUCES" in r.stdout, r.stdout + r.stderr
    # A copy that cut model.onnx short is a damaged bundle, not the backend failing on it
    # (repro.py said "DIFFERENT: ... crash at compile stage: DecodeError", exit 4)
    copy = tmp_path / "copy"
    shutil.copytree(bundle, copy)
    data = (copy / "model.onnx").read_bytes()
    (copy / "model.onnx").write_bytes(data[: len(data) // 2])
    r = subprocess.run(
        [sys.executable, "repro.py"], cwd=copy, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 2 and "the bundle is damaged: model.onnx" in r.stdout, r.stdout


def test_a_nan_result_is_said_as_nan_everywhere(tmp_path) -> None:
    """A backend giving NaN where the reference gives numbers: the oracle, issue.md and
    repro.py count NaNs in words (repro.py said "max abs err inf", the oracle "max abs err
    nan", issue.md "0 of 4800 elements differ")."""
    label = f"{ADAPTERS}:NanOp:op=Sigmoid"
    c = _campaign(
        tmp_path, label, tests=15, generator={"dtypes": ["float32"]}, neighbours=MAX_VARIANTS
    )
    (bug,) = _bugs(c)
    bundle = c.out / "bugs" / bug["id"]
    issue = (bundle / "issue.md").read_text()
    assert "NaN where the reference is not" in issue, issue
    r = subprocess.run(
        [sys.executable, "repro.py"], cwd=bundle, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 1 and "NaN where the reference is not" in r.stdout, r.stdout
    assert "max abs err inf" not in r.stdout and "nan" not in r.stdout.split(";")[1], r.stdout


def test_healthy_pair_finds_nothing(tmp_path) -> None:
    c = _campaign(tmp_path, "ort:opt=none", tests=40, generator={"ops": None})
    counts = _verdicts(c, "ort:opt=none")
    assert counts.get("ok", 0) == 40, counts
    assert not _bugs(c)


def test_adapter_without_run_is_refused_naming_what_is_missing() -> None:
    with pytest.raises(BackendError, match=r"NoRun.*missing run\(self, executable, inputs\)") as e:
        load_backend(f"{ADAPTERS}:NoRun")
    # the class by its name and file, not by the module name onnxfuzz loaded the file as
    assert str(e.value).startswith(f"adapter NoRun ({ADAPTERS}:NoRun) does not follow"), e.value


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nosuchbackend", "no backend named 'nosuchbackend'"),
        ("missing_file.py:Cls", "no such file missing_file.py"),
        (f"{ADAPTERS}:Nope", "has no class 'Nope'"),
        ("ort:opt=sideways", "refused it: opt must be one of"),
        ("ort:sideways=1", r"has no option sideways \(it takes: opt, "),
        ("ort:opt", "options are key=value"),
    ],
)
def test_bad_backend_specs_say_what_is_wrong(spec, message) -> None:
    with pytest.raises(BackendError, match=message):
        load_backend(spec)


def _fuzz(out: Path, *extra: str) -> subprocess.Popen:
    cmd = [
        sys.executable,
        "-m",
        "onnxfuzz",
        "fuzz",
        "--backend",
        "ort",
        "--backend",
        f"{ADAPTERS}:Raise:op=Mul",
        "--tests",
        "300",
        "--seed",
        "5",
        "--nodes",
        "2:5",
        "--ops",
        ",".join(OPS),
        "--out",
        str(out),
        *extra,
    ]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _state(out: Path) -> tuple[dict, dict]:
    """Verdict counts per backend and hits per signature. (Bug keys add the reduced op
    pattern, which a reduction's time budget can make depend on the machine's load.)"""
    store = Store(out / "campaign.db")
    try:
        hits: dict[str, int] = {}
        for b in store.bugs():
            hits[b["signature"]] = hits.get(b["signature"], 0) + b["hits"]
        return store.counts_by_backend(), hits
    finally:
        store.close()


@pytest.fixture(scope="module")
def unkilled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The campaign the killed ones are compared with, run to its end once for both
    (read only)."""
    whole = tmp_path_factory.mktemp("unkilled") / "whole"
    p = _fuzz(whole, "--pregen", "off")
    assert p.wait(300) == 1, p.stdout.read()  # 1: it found the planted bug
    return whole


@pytest.mark.parametrize("pregen", ["off", "on"])
def test_sigkill_then_resume_gives_the_counts_of_an_unkilled_run(
    tmp_path, pregen, unkilled
) -> None:
    # The unkilled run makes its tests in the campaign process; the killed one in a
    # generator process too when pregen is on (onnxfuzz.run.pregen): same tests, same counts.
    whole = unkilled
    killed = tmp_path / "killed"
    p = _fuzz(killed, "--pregen", pregen)
    db = killed / "campaign.db"
    deadline = time.time() + 120
    while time.time() < deadline:  # kill -9 once some tests are stored
        if db.exists():
            try:
                store = Store(db)
                n = store.n_tests()
                store.close()
            except Exception:  # noqa: BLE001 - the db may be mid-creation
                n = 0
            if n >= 5:
                break
        time.sleep(0.01)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    n_before = _n(killed)
    assert 0 < n_before < 300
    r = subprocess.run(
        [sys.executable, "-m", "onnxfuzz", "fuzz", "--resume", "--out", str(killed)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr  # 1: findings
    assert _state(killed) == _state(whole)
    assert _n(killed) == 300


def _n(out: Path) -> int:
    store = Store(out / "campaign.db")
    try:
        return store.n_tests()
    finally:
        store.close()


def _campaign3(tmp: Path, backends: list[str], tests: int = 12, **gen) -> Campaign:
    opts = CampaignOptions(
        backends=backends,
        tests=tests,
        probe="off",
        reduce_budget=20,
        generator={"min_nodes": 3, "max_nodes": 8, "ops": OPS, "dtypes": ["float32"], **gen},
    )
    return finished(tmp / "camp", opts)


def test_three_backends_name_the_one_that_departs(tmp_path) -> None:
    wrong = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    c = _campaign3(tmp_path, ["ort", "ort:opt=none", wrong])
    bugs = _bugs(c)
    assert len(bugs) == 1 and bugs[0]["backend"] == wrong and bugs[0]["suspect"] == wrong
    meta = json.loads((c.out / "bugs" / bugs[0]["id"] / "meta.json").read_text())
    assert meta["suspect"] == wrong and meta["reduced_ops"] == ["Sigmoid"]
    assert meta["hits"] == bugs[0]["hits"] and len(meta["seeds"]) == bugs[0]["hits"]
    assert (c.out / "bugs" / bugs[0]["id"] / "reduced" / "repro.py").exists()


def test_a_reference_that_departs_is_labelled_not_the_others(tmp_path) -> None:
    wrong = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    c = _campaign3(tmp_path, [wrong, "ort", "ort:opt=none"])
    counts = _verdicts(c, "ort")
    assert counts.get("mismatch", 0) == 0 and counts.get("ok", 0) == 12
    bugs = _bugs(c)
    assert len(bugs) == 1 and bugs[0]["backend"] == wrong and bugs[0]["suspect"] == wrong
    meta = json.loads((c.out / "bugs" / bugs[0]["id"] / "meta.json").read_text())
    assert meta["odd_one_out"] is True and meta["reference"] in ("ort", "ort:opt=none")


def test_a_reference_departing_from_the_declared_type_is_blamed_and_reduced(tmp_path) -> None:
    # Two backends only: the model's declared output type says which one is wrong.
    wrong = f"{ADAPTERS}:PromoteInt32:op=Add"
    # The bug shows only where an Add's output is a graph output: a third of these models
    # (none of seeds 0-12), so 24 tests.
    c = _campaign3(tmp_path, [wrong, "ort"], tests=24, ops=["Add", "Mul", "Abs"], dtypes=["int32"])
    counts = _verdicts(c, "ort")
    assert counts == {"ok": 24}, counts
    bugs = _bugs(c)
    assert len(bugs) == 1 and bugs[0]["backend"] == wrong and bugs[0]["suspect"] == wrong
    meta = json.loads((c.out / "bugs" / bugs[0]["id"] / "meta.json").read_text())
    assert meta["kind"] == "dtype" and meta["reference"] == "ort"
    assert "the model declares int32" in (c.out / "bugs" / bugs[0]["id"] / "log.txt").read_text()
    assert meta["reduced_ops"] == ["Add"]


def test_triage_table_in_terminal_and_markdown(tmp_path, capsys) -> None:
    from onnxfuzz.cli.main import main

    wrong = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    c = _campaign3(tmp_path, ["ort", wrong], tests=8)
    assert main(["triage", str(c.out)]) == 0
    out = capsys.readouterr().out
    md = (c.out / "triage.md").read_text()
    bug = _bugs(c)[0]
    assert bug["id"] in md and "Sigmoid" in md and "Sigmoid" in out
    # the adapter's `name` with its options, not its file and class
    assert bug["id"].startswith("wrong-op-op-Sigmoid-mismatch-run-")
    # families lead (one here), then the bundles, each naming its family
    assert md.index("## Families") < md.index("## Bundles") and "1 family, 1 bundle" in md
    header = (
        "| id | family | verdict | stage | backend | suspect | reduced ops | hits | first seen |"
    )
    assert header in md and "| wrong-op:op=Sigmoid |" in md


def test_a_two_op_hang_is_one_bundle_reduced_to_its_pair(tmp_path) -> None:
    # Each hang costs the campaign's --timeout once per hit; the reduction tries candidates
    # with a short limit (a few times the reference's time, floor 2 s), so it reaches the
    # trigger within its budget. Every hit is one bug: same signature, same pattern. The
    # --timeout is that floor too (as the Hang case above): a 6-node ORT model compiles
    # and runs in milliseconds on a loaded worker (its start-up is not timed).
    hang = f"{ADAPTERS}:PairHang:first=Mul,then=Add"
    c = _campaign(
        tmp_path,
        hang,
        tests=30,
        seed=3,
        timeout=2.0,
        probe="off",
        reduce_budget=60,
        generator={"min_nodes": 3, "max_nodes": 6, "ops": ["Add", "Mul", "Relu"]},
    )
    timeouts = _verdicts(c, hang).get("timeout", 0)
    assert timeouts >= 2, _verdicts(c, hang)
    bugs = _bugs(c)
    assert len(bugs) == 1, bugs
    assert bugs[0]["verdict"] == "timeout" and bugs[0]["hits"] == timeouts
    meta = json.loads((c.out / "bugs" / bugs[0]["id"] / "meta.json").read_text())
    assert sorted(meta["reduced_ops"]) == ["Add", "Mul"], meta["reduced_ops"]


def test_the_probe_is_shared_out_over_the_lanes_and_gives_what_one_lane_gives(
    tmp_path, monkeypatch
) -> None:
    """Each lane probes part of the (op, type) pairs (a slow compiler's probe took ten
    minutes on one lane); the result, in the pairs' order, is the same as one lane's, and
    progress is reported up to the total."""
    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.generate.lang.config import Config
    from onnxfuzz.run.probe import unsupported_pairs

    label = f"{ADAPTERS}:UnsupportedType:op=Add,dtype=float64"
    cfg = Config(ops=frozenset(OPS + ["Sub", "Abs", "Neg"]), dtypes=frozenset({1, 11, 6}))
    seen: list[tuple[int, int]] = []
    with BackendPool(["ort", label], 30.0) as a, BackendPool(["ort", label], 30.0) as b:
        monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "one"))
        one = unsupported_pairs(a, label, cfg)
        monkeypatch.setenv("ONNXFUZZ_CACHE", str(tmp_path / "two"))
        two = unsupported_pairs([a, b], label, cfg, lambda done, total: seen.append((done, total)))
    assert list(one) == ["Add"] and list(one["Add"]) == ["float64"]
    assert json.dumps(two) == json.dumps(one)
    total = seen[-1][1]
    assert [d for d, _ in seen] == list(range(0, total + 1)) and total >= 8


def test_a_reducer_failure_keeps_the_finding_and_the_campaign_goes_on(
    tmp_path, monkeypatch
) -> None:
    # A bug in onnxfuzz's reducer (a candidate model it cannot handle) once ended a whole
    # campaign: now the finding is stored unreduced and the traceback logged with its seed.
    import onnxfuzz.run.campaign as campaign_module

    def broken(*args, **kwargs):
        raise RuntimeError("reducer bug for this test")

    monkeypatch.setattr(campaign_module, "reduce_case", broken)
    label = f"{ADAPTERS}:WrongOp:op=Sigmoid"
    c = _campaign(tmp_path, label, tests=15, generator={"dtypes": ["float32"]})
    counts = _verdicts(c, label)
    assert sum(counts.values()) == 15 and counts.get("mismatch", 0) >= 1, counts
    bugs = _bugs(c)
    assert len(bugs) == 1
    assert (c.out / "bugs" / bugs[0]["id"] / "model.onnx").exists()
    log = (c.out / "reducer-errors.log").read_text()
    assert "reducer bug for this test" in log and "seed " in log


def test_a_bundle_that_fails_to_write_keeps_the_test_and_the_campaign_goes_on(
    tmp_path, monkeypatch
) -> None:
    # A bundle writer that raised (on a model whose reference-evaluator outputs it could not
    # compare) ended the campaign before the test was stored, so --resume re-ran the same
    # test into the same error: now it is said and logged, and a later hit files the bug.
    import onnxfuzz.run.campaign as campaign_module

    real, calls = campaign_module.write_bundle, []

    def fails_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("bundle writer bug for this finding")
        return real(*args, **kwargs)

    monkeypatch.setattr(campaign_module, "write_bundle", fails_once)
    label = f"{ADAPTERS}:Raise:op=Add"
    c = _campaign(tmp_path, label, tests=12)
    counts = _verdicts(c, label)
    assert sum(counts.values()) == 12 and counts.get("crash", 0) >= 2, counts
    bugs = _bugs(c)
    assert len(bugs) == 1 and len(calls) == 2, (bugs, calls)
    assert (c.out / "bugs" / bugs[0]["id"] / "model.onnx").exists()
    log = (c.out / "bundle-errors.log").read_text()
    assert "bundle writer bug for this finding" in log and "Traceback" in log


def test_a_reduction_cut_short_joins_its_signatures_bug_instead_of_a_new_bundle(
    tmp_path: Path,
) -> None:
    """Each later hit of a filed signature is reduced, and a new op pattern opened a new
    bundle: a reduction stopped by its budget ends at a pattern no smaller than need be,
    so one bug was filed again and again (a hang reduced to Tanh, then as Tanh -> Pow).
    With reductions of 2 ms, one Sigmoid bug was 3 bundles of 16-17 nodes; it is one."""
    opts = CampaignOptions(
        backends=["ort", f"{ADAPTERS}:WrongOp:op=Sigmoid"],
        tests=60,
        seed=11,
        timeout=10.0,
        reduce_budget=0.002,
        probe="off",
        generator={
            "min_nodes": 15,
            "max_nodes": 20,
            "ops": ["Add", "Relu", "Mul", "Sigmoid", "Tanh", "Neg"],
            "dtypes": ["float32"],
        },
    )
    c = finished(tmp_path / "c", opts)
    metas = [json.loads(m.read_text()) for m in (c.out / "bugs").glob("*/meta.json")]
    signatures = [m["signature"] for m in metas]
    assert signatures and len(signatures) == len(set(signatures)), signatures
    assert all(not m["reduction"]["fixed_point"] for m in metas)  # the premise: cut short


def test_one_ops_wrong_value_on_either_side_of_the_tolerance_is_one_bundle(
    tmp_path: Path,
) -> None:
    """Add off by 0.5 is past the tolerance where Add's output is the model's, inside it
    under a Sigmoid (a precision finding): both reduce to Add, and were filed as two bugs,
    "values in Add output" and "precision in Add output". The second joins the first.
    Since audit 16 the lone Add past the tolerance is a wrong value under the Sigmoid too,
    "a wrong value that the model's later ops hid": one signature, one bundle."""
    opts = CampaignOptions(
        backends=["ort", f"{ADAPTERS}:WrongOp:op=Add"],
        tests=80,
        seed=5,
        timeout=10.0,
        probe="off",
        generator={
            "min_nodes": 2,
            "max_nodes": 5,
            "ops": ["Add", "Sigmoid", "Tanh", "Mul"],
            "dtypes": ["float32"],
        },
    )
    c = finished(tmp_path / "c", opts)
    metas = [json.loads(m.read_text()) for m in (c.out / "bugs").glob("*/meta.json")]
    assert [m["signature"].rsplit("|", 1)[1] for m in metas] == ["values in Add output"]
    store = Store.open_existing(c.out / "campaign.db")
    try:
        rows = store.db.execute("SELECT signature, detail FROM results WHERE bug IS NOT NULL")
        hits = [(sig.rsplit("|", 1)[1], detail) for sig, detail in rows]
    finally:
        store.close()
    assert {kind for kind, _ in hits} == {"values in Add output"}, hits
    # the premise: hit inside the tolerance at the model's outputs too, the Add alone past it
    assert any("later ops hid" in detail for _, detail in hits), hits
