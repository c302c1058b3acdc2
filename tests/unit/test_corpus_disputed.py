"""A corpus stores no expected outputs for a draw whose semantics ONNX leaves in dispute
(RoiAlign mode='max', onnx/onnx#4764): its model and inputs stay, index.json says why. An
audit found TVM, which takes the other reading, failing two such cases it did not get
wrong."""

from __future__ import annotations

from pathlib import Path

import onnx

from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.disputed import disputed
from onnxfuzz.generate.corpus.testdata import DATA_SET
from onnxfuzz.generate.corpus.write import write_case
from onnxfuzz.generate.lang.config import Config


def _mode(model: onnx.ModelProto) -> str:
    node = next(n for n in model.graph.node if n.op_type == "RoiAlign")
    mode = next((a.s.decode() for a in node.attribute if a.name == "mode"), "avg")
    return mode


def test_roialign_max_keeps_its_model_and_inputs_but_gets_no_expected_outputs(
    tmp_path: Path,
) -> None:
    gen = Generator(Config(ops=frozenset({"RoiAlign"}), opset=17, min_nodes=1, max_nodes=1))
    seen: dict[str, int] = {}
    for seed in range(16):
        case = gen.generate(seed)
        mode = _mode(case.model)
        if mode in seen:
            continue
        seen[mode] = seed
        folder = tmp_path / f"case_{seed}"
        entry = write_case(folder, case, reference=True)
        outputs = sorted((folder / DATA_SET).glob("output_*.pb"))
        inputs = sorted((folder / DATA_SET).glob("input_*.pb"))
        assert (folder / "model.onnx").exists() and inputs
        if mode == "max":
            assert [d.op for d in disputed(case.model)] == ["RoiAlign"]
            assert "onnx/onnx#4764" in entry["reference_error"], entry
            assert outputs == []
        else:  # the undisputed mode keeps its outputs
            assert not disputed(case.model)
            assert "reference_error" not in entry, entry
            assert len(outputs) == len(case.model.graph.output)
    assert set(seen) == {"avg", "max"}, seen  # both modes were drawn and checked


def test_a_disputed_node_inside_a_subgraph_is_found() -> None:
    h = onnx.helper
    roi = h.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], mode="max")
    body = h.make_graph(
        [roi], "then", [], [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)]
    )
    other = h.make_graph(
        [h.make_node("Identity", ["x"], ["z"])],
        "else",
        [],
        [h.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)],
    )
    node = h.make_node("If", ["c"], ["out"], then_branch=body, else_branch=other)
    graph = h.make_graph(
        [node],
        "g",
        [
            h.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
            h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 4, 4]),
            h.make_tensor_value_info("rois", onnx.TensorProto.FLOAT, [1, 4]),
            h.make_tensor_value_info("idx", onnx.TensorProto.INT64, [1]),
        ],
        [h.make_tensor_value_info("out", onnx.TensorProto.FLOAT, None)],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    assert [d.op for d in disputed(model)] == ["RoiAlign"]
