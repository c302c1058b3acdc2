"""`--opset 16,21`: models spread over several opsets, each model a function of its seed
alone (the same bytes as a single-opset run at the opset its seed picks), guided and
mutated at that opset, replayed by the reducer's generator; bad lists get one line."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import onnx
import pytest

from onnxfuzz.cli.main import main
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.build.guide import OP_ACTION, Guided
from onnxfuzz.generate.lang.config import Config

MIX = (16, 21)
BASE = {"op_mix": "layers", "min_nodes": 2, "max_nodes": 8}


def _mixed() -> Generator:
    return Generator(Config(opset=MIX[0], opset_mix=MIX, **BASE))


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def test_each_model_is_its_seeds_model_at_the_opset_the_seed_picks() -> None:
    gen = _mixed()
    alone = {o: Generator(Config(opset=o, **BASE)) for o in MIX}
    seen: Counter[int] = Counter()
    for seed in range(120):
        case = gen.generate(seed)
        opset = _opset(case.model)
        assert opset == gen.cfg.opset_of(seed)
        seen[opset] += 1
        want = alone[opset].generate(seed).model.SerializeToString()
        assert case.model.SerializeToString() == want, seed
        onnx.checker.check_model(case.model, full_check=True)
    assert min(seen[o] for o in MIX) > 40, seen  # both, in about equal shares
    # and a single opset is no mix: every model at it, no hash drawn
    assert {Config(opset=16).opset_of(s) for s in range(50)} == {16}


def test_the_record_round_trips_and_bad_mixes_are_refused() -> None:
    cfg = Config(opset=16, opset_mix=MIX)
    assert Config.from_record(cfg.to_record()) == cfg
    assert "opset_mix" not in Config(opset=16).to_record()  # old records stay as they were
    with pytest.raises(ConfigError, match="--opset: each opset once, got 16,16"):
        Config(opset=16, opset_mix=(16, 16))
    with pytest.raises(ConfigError, match=r"--opset: opsets in 13\.\.28 .*got 16,40"):
        Config(opset=16, opset_mix=(16, 40))
    with pytest.raises(ConfigError, match="must start with opset 21"):
        Config(opset=21, opset_mix=MIX)


def test_guided_tests_are_made_at_their_opset_and_replay_with_generator_for() -> None:
    """The guide may name an op only one opset defines (Gelu: opset 20 on): a test at the
    other is made without it, never refused; a mutant's whole lineage is at its opset."""
    guided = Guided(_mixed())
    assert OP_ACTION + "Gelu" in guided.actions  # opset 21's, though the first is 16
    made: Counter[tuple[int, bool]] = Counter()
    for seed in range(60):
        decision = {"path": [OP_ACTION + "Gelu", "block:ort-gelu-erf"]}
        case = guided.case(seed, decision)
        opset = _opset(case.model)
        assert opset == guided.gen.cfg.opset_of(seed)
        made[opset, "Gelu" in case.ops] += 1
        gen = guided.generator_for(decision, seed)
        assert gen.generate(seed, prefix=case.choices).model == case.model
        mutant = guided.case(seed + 1000, {"of": [seed, decision]})
        assert _opset(mutant.model) == guided.gen.cfg.opset_of(seed + 1000)
        onnx.checker.check_model(mutant.model, full_check=True)
    assert made[21, True] > 20 and made[16, False] > 20 and not made[16, True], made


def test_a_guided_test_is_the_single_opset_runs_test_mutants_included() -> None:
    """Test ``seed`` of a mixed run is test ``seed`` of the run at its opset alone, a
    mutant's parent made at the mutant's opset (not at the parent seed's own)."""
    mixed = Guided(_mixed())
    alone = {o: Guided(Generator(Config(opset=o, **BASE))) for o in MIX}
    decision = {"path": ["block:ort-gelu-erf"]}
    crossed = 0
    for seed in range(40):
        mutant_seed = seed + 1001
        opset = mixed.gen.cfg.opset_of(mutant_seed)
        crossed += opset != mixed.gen.cfg.opset_of(seed)
        for s, d in ((seed, decision), (mutant_seed, {"of": [seed, decision]})):
            want = alone[mixed.gen.cfg.opset_of(s)].case(s, d).model.SerializeToString()
            assert mixed.case(s, d).model.SerializeToString() == want, (s, d)
    assert crossed > 10  # parents of the other opset were among them


def test_generate_writes_the_mix_and_each_case_is_its_single_opset_run(tmp_path: Path) -> None:
    out = tmp_path / "mix"
    argv = ["generate", "--count", "10", "--seed", "5", "--nodes", "2:6", "--no-reference"]
    assert main([*argv, "--opset", "16,21", "--out", str(out)]) == 0
    index = json.loads((out / "index.json").read_text())
    opsets = Counter()
    for name, entry in sorted(index["cases"].items()):
        model = onnx.load(out / name / "model.onnx")
        opset = _opset(model)
        opsets[opset] += 1
        one = tmp_path / f"one-{entry['seed']}"
        single = [*argv[:2], "1", "--seed", str(entry["seed"]), *argv[5:]]
        assert main([*single, "--opset", str(opset), "--out", str(one)]) == 0
        again = onnx.load(one / "test_000000" / "model.onnx")
        assert again.graph == model.graph, name
    assert set(opsets) == {16, 21}, opsets


@pytest.mark.parametrize(
    ("value", "says"),
    [("16,x", "like 21 or 16,21"), ("16,99", "13..28"), ("16,16", "each opset once")],
)
def test_a_bad_opset_list_is_one_line_and_exit_2(value: str, says: str, capsys) -> None:
    assert main(["generate", "--count", "1", "--opset", value, "--out", "/tmp/x"]) == 2
    err = capsys.readouterr().err
    assert "--opset" in err and says in err and "Traceback" not in err, err
