"""Count the op types of real models, for ``--op-mix layers``.

The source of the frequencies: seven of torchvision's classification models (ResNet,
MobileNetV3, SqueezeNet, EfficientNet, ConvNeXt, ViT, Swin: convolutional and transformer
layers), exported to ONNX by ``torch.onnx.export`` (the TorchScript exporter, its default
constant folding on, opset 17: what users of these models get), counted node by node
(subgraphs included). ``Identity`` and ``Constant`` nodes are left out: the exporter emits
one per shared weight and per shape or scalar operand, not a layer's computation. An op's
frequency is its share of a model's nodes, averaged over the models (each model counts
alike: Swin's 6,000 nodes, mostly shape plumbing, would otherwise outweigh the rest).
Writes ``onnxfuzz/data/op_mix_layers.json``::

    python tools/op_mix_frequencies.py            # print the counts
    python tools/op_mix_frequencies.py --write    # and write them
"""

from __future__ import annotations

import argparse
import io
import json
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "onnxfuzz" / "data" / "op_mix_layers.json"


_MODELS = (
    "resnet18",
    "mobilenet_v3_small",
    "squeezenet1_0",
    "efficientnet_b0",
    "convnext_tiny",
    "vit_b_16",
    "swin_t",
)


def _models() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    import torch
    import torchvision

    v = torchvision.models
    image = (torch.randn(1, 3, 224, 224),)
    return {name: (getattr(v, name)(), image) for name in _MODELS}


# What the exporter emits besides a layer's computation: an Identity per shared weight, a
# Constant per shape or scalar operand (onnxfuzz draws those as initializers).
_ARTEFACTS = {"Identity", "Constant"}


def _count(model: Any) -> Counter[str]:
    counts: Counter[str] = Counter()
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            if node.op_type not in _ARTEFACTS and node.domain in ("", "ai.onnx"):
                counts[node.op_type] += 1
            for attr in node.attribute:
                graphs.extend([attr.g] if attr.HasField("g") else list(attr.graphs))
    return counts


def main() -> None:
    import onnx
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {OUT}")
    args = parser.parse_args()
    share: Counter[str] = Counter()
    per_model: dict[str, int] = {}
    for name, (module, example) in _models().items():
        buf = io.BytesIO()
        # (no torch.no_grad(): under it, attention takes a fused fast path with no ONNX form)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module.eval(), example, buf, opset_version=17, dynamo=False)
        counts = _count(onnx.load_from_string(buf.getvalue()))
        per_model[name] = sum(counts.values())
        for op, n in counts.items():
            share[op] += n / per_model[name] / len(_MODELS)
        print(f"{name}: {per_model[name]} nodes, {len(counts)} op types")
    for op, f in share.most_common():
        print(f"{op:24} {f:.4f}")
    if args.write:
        record = {
            "source": "torch.onnx.export (TorchScript exporter, opset 17, constant folding on) "
            f"of torch {torch.__version__}'s torchvision models, Identity and Constant left out; "
            "frequency: share of a model's nodes, averaged over the models",
            "models": per_model,
            "frequencies": {op: round(f, 5) for op, f in share.most_common()},
        }
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
