"""Op features below the element type: what a backend can lack besides an (op, type) pair.

A backend often runs an op in a type yet not in every form of it: onnx2torch converts
Conv but not with ``auto_pad="SAME_UPPER"``, Clip but not with computed bounds, Dropout
but not with a ``seed``. Each such form is a *feature* of one node, named as a string:

* ``attr:NAME``        - the attribute is set (one a spec may leave at its default);
* ``attr:NAME=VALUE``  - the attribute takes that value (an int or string one, from a
  finite domain);
* ``dynamic:INPUT``    - the (weight-like) input is not a constant: a graph input or
  another node's output, e.g. Clip's ``min``;
* ``omitted:INPUT``    - the optional input is left out (an empty name) while a later
  one is there, e.g. Clip with ``max`` and no ``min``.

The support probe pins one feature at a time on a single-op model (``Config.pin``) and
records the features a backend lacks; the campaign then steers generation away from them
(``Config.avoid_features``) and classifies a failure of a model that has one as
``unsupported``. The builder names what it draws with these functions and
``model_features`` reads the same names back from any model, so the two agree.
"""

from __future__ import annotations

from typing import Any

import onnx

from onnxfuzz.generate.lang.spec import op_info

Feature = tuple[str, str]  # (op type, feature name)


def present(attr: str) -> str:
    return f"attr:{attr}"


def valued(attr: str, value: Any) -> str | None:
    """The feature of ``attr`` taking ``value``; None for values that are not categorical
    (floats, lists, tensors)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return f"attr:{attr}={value}"


def dynamic(input_name: str) -> str:
    return f"dynamic:{input_name}"


def omitted(input_name: str) -> str:
    return f"omitted:{input_name}"


def is_feature(key: str) -> bool:
    """Feature names hold a colon; element type names (``float32``) and ``*`` do not."""
    return ":" in key


def node_features(node: onnx.NodeProto, constants: set[str], opset: int) -> set[str]:
    """The features of ``node``; ``constants``: the names of initializers and Constant
    outputs (an input not among them is dynamic)."""
    out: set[str] = set()
    for a in node.attribute:
        out.add(present(a.name))
        if a.type == onnx.AttributeProto.INT:
            out.add(f"attr:{a.name}={a.i}")
        elif a.type == onnx.AttributeProto.STRING:
            out.add(f"attr:{a.name}={a.s.decode(errors='replace')}")
    info = op_info(node.op_type, opset) if not node.domain else None
    if info is not None:
        formal = list(info.input_pos)
        for k, name in enumerate(node.input[: len(formal)]):
            if not name:
                out.add(omitted(formal[k]))
            elif name not in constants:
                out.add(dynamic(formal[k]))
    return out


def model_features(model: onnx.ModelProto) -> set[Feature]:
    """Every (op, feature) of the model's main graph."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    constants = {i.name for i in model.graph.initializer}
    constants |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    out: set[Feature] = set()
    for node in model.graph.node:
        out |= {(node.op_type, f) for f in node_features(node, constants, opset)}
    return out
