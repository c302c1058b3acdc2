"""What a new user trips on (issue 25), met the way they meet it: the `onnxfuzz` command in
a subprocess, its exit code, its one line on stderr, and the files it leaves."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ADAPTERS = Path(__file__).resolve().parent / "adapters.py"


def onnxfuzz(
    *argv: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The command line in a subprocess (``env``: variables set for it)."""
    return subprocess.run(
        [sys.executable, "-m", "onnxfuzz", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    """stderr's last line, checked to be onnxfuzz's own one-line error (no traceback)."""
    assert "Traceback" not in r.stderr, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("onnxfuzz: error: "), r.stderr
    return line


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A campaign with one bug, made with a relative adapter path (``./mycc.py``) from the
    folder the adapter is in, as a user with their own adapter would."""
    home = tmp_path_factory.mktemp("home")
    shutil.copy(ADAPTERS, home / "mycc.py")
    r = onnxfuzz(
        "fuzz",
        "--backend",
        "ort",
        "--backend",
        "./mycc.py:WrongOp:op=Relu",
        "--tests",
        "10",
        "--ops",
        "Relu,Add",
        "--probe",
        "off",
        "--reduce-budget",
        "3",
        "--out",
        "camp",
        cwd=home,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    return home / "camp"


def bundle_copy(campaign: Path, dest: Path) -> Path:
    bundle = next((campaign / "bugs").iterdir())
    return Path(shutil.copytree(bundle, dest / bundle.name))


def test_relative_adapter_paths_work_from_another_folder(campaign: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    bundle = next((campaign / "bugs").iterdir())
    r = onnxfuzz("replay", str(bundle), cwd=elsewhere)
    assert r.returncode == 1 and r.stdout.startswith("REPRODUCES"), r.stdout + r.stderr
    r = onnxfuzz("fuzz", "--resume", "--tests", "3", "--out", str(campaign), cwd=elsewhere)
    assert r.returncode in (0, 1), r.stderr


@pytest.mark.parametrize(
    ("damage", "names"),
    [
        ("rm -r test_data_set_0", "test_data_set_0"),
        ("corrupt test_data_set_0/input_0.pb", "input_0.pb"),
        ("rm test_data_set_0/input_0.pb", "input_0.pb"),
        ("rm meta.json", "meta.json"),
        ("truncate meta.json", "meta.json"),
        ("corrupt model.onnx", "model.onnx"),
    ],
)
def test_a_damaged_bundle_is_exit_2_naming_the_file(
    campaign: Path, tmp_path: Path, damage: str, names: str
) -> None:
    bundle = bundle_copy(campaign, tmp_path)
    verb, _, what = damage.partition(" ")
    target = bundle / what.removeprefix("-r ")
    if verb == "rm":
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    elif verb == "truncate":
        target.write_text(target.read_text()[:20])
    else:
        target.write_bytes(b"\xff\xfe garbage \x00\x01" * 3)
    r = onnxfuzz("replay", str(bundle))
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert line.startswith(f"onnxfuzz: error: bundle damaged: {bundle}"), line
    assert names in line


@pytest.mark.parametrize(
    ("damage", "names"),
    [
        ("truncate meta.json", "meta.json (JSONDecodeError"),
        ("list meta.json", "meta.json (AttributeError"),
        ("corrupt reduced/model.onnx", "reduced/model.onnx (DecodeError"),
        ("rm meta.json", "meta.json (missing)"),
    ],
)
def test_triage_says_which_bundle_is_damaged_and_triages_the_rest(
    campaign: Path, tmp_path: Path, damage: str, names: str
) -> None:
    """triage raised JSONDecodeError, AttributeError or DecodeError on one bundle edited or
    copied badly (replay said "bundle damaged"), and skipped one without meta.json unsaid."""
    copy = Path(shutil.copytree(campaign, tmp_path / "camp"))
    bundle = next((copy / "bugs").iterdir())
    verb, _, what = damage.partition(" ")
    target = bundle / what
    if verb == "rm":
        target.unlink()
    elif verb == "truncate":
        target.write_text(target.read_text()[:20])
    elif verb == "list":
        target.write_text("[1, 2]")
    else:
        target.write_bytes(b"\xff\xfe garbage \x00\x01" * 3)
    r = onnxfuzz("triage", str(copy))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert f"bundle damaged: {bundle}/{names}" in r.stderr, r.stderr
    assert "issue.md is not written" in r.stderr, r.stderr


def test_replay_refuses_a_negative_timeout(campaign: Path) -> None:
    bundle = next((campaign / "bugs").iterdir())
    r = onnxfuzz("replay", str(bundle), "--timeout", "-5")
    assert r.returncode == 2 and "--timeout" in one_error_line(r)


@pytest.mark.parametrize(
    ("adapter", "says"),
    [
        ("ReturnsNone", "run() returned"),
        ("ReturnsList", "run() returned"),
        # python numbers were read as float64: each test filed as a wrong element type
        ("ReturnsPythonNumbers", "not a numpy array: its element type is lost"),
        # 42 crashed the probe; a raise was filed as a compile crash, each test a bug
        ("SupportsAnswers42", "supports() returned int (42), not None"),
        ("SupportsRaises", "supports() raised ValueError: supports blew up"),
        # it killed the worker: "worker exited with status 1" was filed as the backend's
        ("IsUnsupportedRaises", "is_unsupported() raised TypeError: hook broken"),
    ],
)
def test_an_adapter_breaking_the_protocol_is_one_error_not_bugs(
    adapter: str, says: str, tmp_path: Path
) -> None:
    spec = f"{ADAPTERS}:{adapter}"
    out = tmp_path / "c"
    r = onnxfuzz("fuzz", "--backend", "ort", "--backend", spec, "--tests", "30", "--out", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert f"adapter {spec}: " in line and says in line and "docs/adapters.md" in line, line
    assert not (out / "bugs").exists() or not list((out / "bugs").iterdir())


@pytest.mark.parametrize(
    ("adapter", "says"),
    [
        ("InitRaises", "InitRaises() raised RuntimeError: license server unreachable"),
        ("AvailableRaises", "available() raised RuntimeError: device probe exploded"),
    ],
)
def test_an_adapter_failing_to_start_is_named_with_its_hook(
    adapter: str, says: str, tmp_path: Path
) -> None:
    """It said "onnxfuzz: error: RuntimeError: license server unreachable", naming
    neither the adapter nor where it failed."""
    spec = f"{ADAPTERS}:{adapter}"
    r = onnxfuzz(
        "fuzz", "--backend", "ort", "--backend", spec, "--tests", "2", "--out", str(tmp_path / "c")
    )
    assert r.returncode == 2, r.stdout + r.stderr
    assert one_error_line(r) == f"onnxfuzz: error: adapter {spec}: {says}"


def test_an_adapter_whose_start_up_hangs_is_said_then_one_error_naming_where(
    tmp_path: Path,
) -> None:
    """An adapter whose __init__ never returns held `fuzz` silent for the worker's 300 s
    start-up limit. Its start is said on stderr while it lasts, and at the limit
    ($ONNXFUZZ_START_TIMEOUT, small here) it is one error naming the adapter and where it
    hung, exit 2, nothing written."""
    spec = f"{ADAPTERS}:InitHangs"
    out = tmp_path / "c"
    argv = ["fuzz", "--backend", "ort", "--backend", spec, "--tests", "2", "--out", str(out)]
    r = onnxfuzz(*argv, env={"ONNXFUZZ_START_TIMEOUT": "4"})
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"starting backend {spec} has taken 2 s (its adapter's import, __init__" in r.stderr
    line = one_error_line(r)
    assert line.startswith(f"onnxfuzz: error: backend {spec}: its start-up "), line
    assert "hung: no answer within 4 s, stuck in __init__ (adapters.py)" in line, line
    assert "ONNXFUZZ_START_TIMEOUT=SECONDS" in line, line
    assert not out.exists()
    r = onnxfuzz(*argv, env={"ONNXFUZZ_START_TIMEOUT": "soon"})
    assert r.returncode == 2
    assert one_error_line(r).startswith("onnxfuzz: error: ONNXFUZZ_START_TIMEOUT=soon: give ")


def test_outputs_under_names_of_the_adapters_own_are_one_error_and_the_out_is_reusable(
    tmp_path: Path,
) -> None:
    """Outputs keyed by names none of which is the model's were each a missing output:
    45 bugs in 48 tests, each blaming another op. They are the adapter's defect, one
    error; the --out it stopped in before storing a test starts afresh (it was refused as
    "already holds a campaign")."""
    spec = f"{ADAPTERS}:RenamesOutputs"
    out = tmp_path / "c"
    r = onnxfuzz("fuzz", "--backend", "ort", "--backend", spec, "--tests", "30", "--out", str(out))
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert f"adapter {spec}: run() returned outputs named " in line, line
    assert "none of the model's" in line and "docs/adapters.md" in line, line
    assert not (out / "bugs").exists() or not list((out / "bugs").iterdir())
    r = onnxfuzz(
        "fuzz", "--backend", "ort", "--backend", "ort:opt=none", "--tests", "3", "--out", str(out)
    )
    assert r.returncode in (0, 1), r.stdout + r.stderr
    r = onnxfuzz(
        "fuzz", "--backend", "ort", "--backend", "ort:opt=none", "--tests", "3", "--out", str(out)
    )
    assert r.returncode == 2 and "already holds a campaign" in one_error_line(r)


def test_export_known_to_a_toml_name_is_refused_not_written_as_json(
    campaign: Path, tmp_path: Path
) -> None:
    """known.toml was written with JSON in it, and the message said nothing of it."""
    target = tmp_path / "known.toml"
    r = onnxfuzz("triage", str(campaign), "--export-known", str(target))
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert "would hold JSON" in line and "name it known.json" in line, line
    assert not target.exists()


def test_the_same_backend_twice_is_named(tmp_path: Path) -> None:
    r = onnxfuzz("fuzz", "--backend", "ort", "--backend", "ort", "--tests", "3", "--out", "x")
    assert r.returncode == 2
    assert "ort is given twice" in one_error_line(r)


def test_a_refused_option_value_is_not_called_an_unknown_option(tmp_path: Path) -> None:
    out = str(tmp_path / "c")
    r = onnxfuzz(
        "fuzz", "--backend", "ort", "--backend", "ort:opt=bogus", "--tests", "3", "--out", out
    )
    line = one_error_line(r)
    assert r.returncode == 2 and "refused it: opt must be one of" in line, line
    assert "does not take" not in line and "has no option" not in line
    r = onnxfuzz(
        "fuzz", "--backend", "ort", "--backend", "ort:bogus=1", "--tests", "3", "--out", out
    )
    assert r.returncode == 2 and "has no option bogus" in one_error_line(r)


@pytest.mark.parametrize("where", ["/proc/onnxfuzz-x", "{tmp}/a-file/sub"])
def test_fuzz_and_report_into_an_unwritable_out_is_exit_2(
    where: str, tmp_path: Path, campaign: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    out = where.format(tmp=tmp_path)
    r = onnxfuzz(
        "fuzz", "--backend", "ort", "--backend", "ort:opt=none", "--tests", "2", "--out", out
    )
    assert r.returncode == 2, r.stderr
    assert one_error_line(r).startswith(f"onnxfuzz: error: --out: cannot create or write {out}")
    assert not Path(out).exists()
    r = onnxfuzz("report", str(campaign), "--out", f"{out}/report.html")
    assert r.returncode == 2, r.stderr
    assert "--out" in one_error_line(r)
    r = onnxfuzz("report", str(campaign), "--out", "/proc/report.html")
    assert r.returncode == 2, r.stderr
    assert one_error_line(r).startswith("onnxfuzz: error: --out: cannot create or write /proc")


def test_triage_into_a_pipe_keeps_bug_ids_whole(campaign: Path) -> None:
    r = onnxfuzz("triage", str(campaign))
    assert r.returncode == 0, r.stderr
    bundles = [b.name for b in (campaign / "bugs").iterdir()]
    lines = r.stdout.splitlines()
    header = next(i for i, x in enumerate(lines) if x.startswith("┃ id "))  # the bug table
    body = lines[next(i for i, x in enumerate(lines) if i > header and x.startswith("┡")) + 1 :]
    rows = body[: next(i for i, x in enumerate(body) if x.startswith("└"))]
    assert len(rows) == len(bundles), r.stdout  # a wrapped cell would add lines
    for name in bundles:
        assert name in r.stdout, r.stdout


def _make_read_only(folder: Path) -> Callable[[], None]:
    """Make ``folder`` read-only for this user (root: immutable, since root ignores modes);
    returns the undo."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda: folder.chmod(0o755)
    r = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot make a folder read-only as root here: {r.stderr.strip()}")
    return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_a_read_only_campaign_folder_is_called_read_only(campaign: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(campaign, tmp_path / "camp"))
    for side in ("campaign.db-wal", "campaign.db-shm"):
        (copy / side).unlink(missing_ok=True)
    undo = _make_read_only(copy)
    try:
        r = onnxfuzz("fuzz", "--resume", "--tests", "2", "--out", str(copy))
    finally:
        undo()
    assert r.returncode == 2, r.stderr
    line = one_error_line(r)
    assert f"{copy}: read-only" in line and "not a readable campaign" not in line, line


def test_a_reduction_that_fails_is_said_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reducer that raises (planted: the ConfigError a 0-sized dim once caused) keeps the
    finding unreduced; the bundle, the summary, triage and the report say so and why."""
    import json

    from onnxfuzz.errors import ConfigError
    from onnxfuzz.run import campaign as campaign_module
    from onnxfuzz.run.campaign import Campaign, CampaignOptions

    def broken_reducer(*args: object, **kwargs: object) -> None:
        raise ConfigError("--max-dim: need 1..65536, got 0")

    monkeypatch.setattr(campaign_module, "reduce_case", broken_reducer)
    opts = CampaignOptions(
        backends=["ort", f"{ADAPTERS}:WrongOp:op=Relu"],
        tests=6,
        probe="off",
        generator={"min_nodes": 2, "max_nodes": 4, "ops": ["Relu", "Add"]},
    )
    c = Campaign(tmp_path / "camp", opts, resume=False)
    try:
        c.start()
        c.run()
        c.print_summary()
    finally:
        c.close()
    printed = capsys.readouterr().out
    why = "ConfigError: --max-dim: need 1..65536, got 0"
    assert "reduction failed for 1 of 1 bugs" in printed and why in printed, printed
    bundle = next((tmp_path / "camp" / "bugs").iterdir())
    assert why in json.loads((bundle / "meta.json").read_text())["reduction_failed"]
    r = onnxfuzz("triage", str(tmp_path / "camp"))
    assert r.returncode == 0 and why in r.stdout and "- (reduction failed)" in r.stdout
    assert why in (tmp_path / "camp" / "triage.md").read_text()
    r = onnxfuzz("report", str(tmp_path / "camp"))
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "camp" / "report.html").read_text()
    assert "reduction failed for 1 of 1 bugs" in page and why in page


def test_backend_check_runs_node_tests_stamped_outside_the_adapters_opsets() -> None:
    """An adapter of opsets 15..21 with a planted Softmax bug: ONNX's Softmax tests are
    stamped 13 (Softmax-13 is the same op at 15), so they run there and catch it, and the
    test data's numpy RuntimeWarnings are not shown."""
    r = onnxfuzz(
        "backend",
        "check",
        f"{ADAPTERS}:Narrow:op=Softmax",
        "--ops",
        "Softmax,Gather",
        "--smoke",
        "0",
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "test_softmax_axis_0: output y: values differ" in r.stdout, r.stdout
    assert "run at opset 15, stamped outside the adapter's opsets: 11 tests as they are" in r.stdout
    assert "RuntimeWarning" not in r.stderr, r.stderr
    assert "node tests: 1884/1884" in r.stderr  # progress, on stderr


@pytest.mark.slow  # a smoke campaign with confirmation runs: ~25 s on 2 busy cores
def test_backend_check_keeps_the_smoke_bundles_it_names() -> None:
    r = onnxfuzz("backend", "check", f"{ADAPTERS}:OffByOne", "--ops", "Relu", "--smoke", "3")
    assert r.returncode == 1, r.stdout + r.stderr
    kept = next(line for line in r.stdout.splitlines() if line.startswith("smoke campaign kept"))
    folder = Path(kept.split()[4].rstrip(":"))
    try:
        assert f"bundles in {folder / 'bugs'}" in r.stdout
        assert list((folder / "bugs").iterdir())  # the bundles the summary named are there
    finally:
        shutil.rmtree(folder.parent)


def test_backend_check_converts_node_tests_whose_op_changed_after_its_opsets() -> None:
    """Acos's node tests are stamped 22 (Acos-22 added bfloat16): for an adapter of 15..21
    ONNX's version converter takes them to 21; a correct adapter passes them, one with a
    planted Acos bug fails them."""
    r = onnxfuzz("backend", "check", f"{ADAPTERS}:Narrow:op=Acos", "--ops", "Acos", "--smoke", "0")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "test_acos_example: output y: values differ" in r.stdout
    assert "run at opset 21, stamped outside the adapter's opsets: 0 tests as" in r.stdout
    assert "same there), 2 converted by ONNX's version converter" in r.stdout, r.stdout
    r = onnxfuzz("backend", "check", f"{ADAPTERS}:Narrow:op=Relu", "--ops", "Acos", "--smoke", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    acos = next(line for line in r.stdout.splitlines() if line.startswith("Acos "))
    assert acos.split()[1:3] == ["2", "0"]  # 2 pass, 0 fail


def test_a_sequence_output_is_no_protocol_error() -> None:
    """ONNX Runtime returns a list of arrays for a sequence output (SplitToSequence's node
    tests): allowed by the protocol, so the check goes on (the ragged one is an error of that
    test, as before) instead of stopping as a broken adapter."""
    r = onnxfuzz("backend", "check", "ort", "--ops", "SplitToSequence", "--smoke", "0")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "adapter" not in r.stderr and "SplitToSequence" in r.stdout
    # the ragged one's error in words, not numpy's "inhomogeneous shape after N dimensions"
    assert "'seq' is a list of 2 arrays of different shapes ([1, 6], [2, 6])" in r.stdout
