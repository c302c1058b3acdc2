"""Generator options as one record: the CLI, campaigns and corpora convert them one way."""

from __future__ import annotations

import json

import pytest

from onnxfuzz import dtypes as dt
from onnxfuzz.cli.main import main
from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.config import Config


def test_a_config_survives_its_record() -> None:
    cfg = Config(
        min_nodes=2,
        max_nodes=7,
        opset=18,
        dtypes=frozenset({dt.FLOAT, dt.INT64}),
        ops=frozenset({"Add", "Relu"}),
        exclude_ops=frozenset({"Mul"}),
        picking_rate=0.5,
        max_rank=3,
        max_dim=4,
        weights_as_initializers=False,
        avoid=frozenset({("Relu", dt.FLOAT16)}),
    )
    record = cfg.to_record()
    assert json.loads(json.dumps(record)) == record  # plain data
    assert Config.from_record(record) == cfg
    # (a record without op_mix was written with the uniform mix, the default before issue 24,
    # and one without wide_values without wide values, as before the option)
    assert Config.from_record({"opset": None, "dtypes": None}, opset=20) == Config(
        opset=20, op_mix="uniform", wide_values=0.0
    )
    with pytest.raises(ConfigError, match="unknown generator options"):
        Config.from_record({"max_nodez": 3})


def test_a_corpus_written_before_records_still_continues(tmp_path, capsys) -> None:
    out = tmp_path / "c"
    argv = ["generate", "--count", "2", "--nodes", "2:4", "--no-reference", "--out", str(out)]
    assert main(argv) == 0
    index = json.loads((out / "index.json").read_text())
    opts = index["options"]
    opts["nodes"] = f"{opts.pop('min_nodes')}:{opts.pop('max_nodes')}"  # the old layout
    (out / "index.json").write_text(json.dumps(index))
    other = [*argv[:4], "2:5", *argv[5:]]
    assert main(other) == 2  # another --nodes than the old index's: refused, named
    assert "--nodes" in capsys.readouterr().err
    assert main([*argv[:2], "3", *argv[3:]]) == 0  # the same options: continued


def test_avoided_op_type_pairs_are_not_generated() -> None:
    from onnxfuzz.generate.build.generator import Generator

    avoid = frozenset({("Relu", dt.FLOAT), ("Add", dt.INT64)})
    gen = Generator(Config(min_nodes=2, max_nodes=6, ops=frozenset({"Add", "Relu"}), avoid=avoid))
    seen = set()
    for seed in range(60):
        model = gen.generate(seed).model
        types = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.value_info}
        types.update({vi.name: vi.type.tensor_type.elem_type for vi in model.graph.output})
        for node in model.graph.node:
            pair = (node.op_type, types[node.output[0]])
            assert pair not in avoid, (seed, pair)
            seen.add(pair)
    assert ("Relu", dt.FLOAT16) in seen and ("Add", dt.FLOAT) in seen  # the rest still are
