"""A campaign over `--opset 16,21` on the real ONNX Runtime: each backend probed at each
opset, every test recorded at its model's opset (its seed's), the level-2 GELU fusion
only ONNX Runtime's contrib op can take (below opset 20) seen beside the level-1 one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from runs import finished

from onnxfuzz.cli.main import main
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.run.campaign import CampaignOptions


def test_a_mixed_opset_campaign_runs_each_test_at_its_seeds_opset(tmp_path: Path) -> None:
    opts = CampaignOptions(
        backends=["ort:feedback=all", "ort:opt=none"],
        tests=120,
        seed=21,
        timeout=20.0,
        generator={
            "opset": 16,
            "opset_mix": [16, 21],
            "min_nodes": 5,
            "max_nodes": 8,
            "op_mix": "layers",
            "block_rate": 1.0,
            # the GELU erf form and what glue may need: a fast probe
            "ops": ["Div", "Erf", "Add", "Mul", "Gelu", "Relu"],
        },
        guide="optcov",
    )
    c = finished(tmp_path / "camp", opts)
    cfg = Config.from_record(opts.generator)
    with sqlite3.connect(tmp_path / "camp" / "campaign.db") as db:
        rows = db.execute("SELECT seed, opset FROM tests").fetchall()
        fired = {
            name
            for (name,) in db.execute(
                "SELECT name FROM optimizations WHERE backend = 'ort:feedback=all' "
                "AND kind = 'transformer' AND tests > 0"
            )
        }
    assert len(rows) == 120
    assert all(opset == cfg.opset_of(seed) for seed, opset in rows), rows
    assert {opset for _, opset in rows} == {16, 21}
    # each opset probed: Gelu exists at 21 only, and was probed there (not refused as
    # unknown at 16): the campaign generated it
    assert "Gelu" not in c.excluded
    assert {"GeluFusionL1", "GeluFusionL2"} <= fired, sorted(fired)
    # the report's setup line names both
    assert main(["report", str(tmp_path / "camp")]) == 0
    assert "opsets 16,21" in (tmp_path / "camp" / "report.html").read_text()
