"""The value domains a reduction must not leave.

A generated model feeds every node values inside its spec's value domain (Dropout's
``ratio`` in [0, 0.9], a divisor away from 0, a Log's input positive). Graph passes can
break that while the failure still shows: bypassing the Sigmoid that made a Dropout
``ratio`` wires the Sigmoid's own input in its place, and a negative ratio is a model ONNX
Runtime rejects unoptimized. A reproducer built on such a model is dismissed by the people
it is sent to, however real the bug it once showed. So a reduced candidate is kept only if
it adds no *value fault*: a node input whose values (the reference's, on the candidate's
inputs) lie outside what the node's hand spec declares for it, where the model the
reduction started from had none there.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from onnxfuzz.generate.build.builder import CheckBuilder, OutOfDomain
from onnxfuzz.generate.corpus.validate import model_opset
from onnxfuzz.generate.lang.config import MAX_DIM, MAX_OPSET, MAX_RANK, MIN_OPSET, Config
from onnxfuzz.generate.lang.spec import load_specs, op_info

Fault = tuple[str, str]  # (the node, by op type and first output; the input variable)


def value_faults(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> frozenset[Fault]:
    """The top-level nodes' inputs whose values (``values``: tensor name -> array, the
    graph's inputs and the nodes' outputs; initializers are read from the model) lie
    outside their hand spec's value domain. A node without a hand spec, or that its spec
    does not describe (an attribute it never draws, a body), contributes nothing."""
    specs = load_specs()
    opset = model_opset(model)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        # no hand spec covers an opset onnxfuzz does not generate (a model from elsewhere,
        # like an opset-11 one: its nodes are not judged, and the reduction goes on)
        return frozenset()
    known = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    known.update(values)
    # Some domains scale with --max-dim (a sum's terms are bounded by the bound over the
    # most elements a reduction may take): the model's largest dim, which the generator's
    # --max-dim was at least, gives domains no tighter than the generator's.
    dims = [d for a in known.values() if isinstance(a, np.ndarray) for d in a.shape]
    # (at least 1: an empty tensor's 0 is no --max-dim, and Config refuses it)
    cfg = Config(opset=opset, max_rank=MAX_RANK, max_dim=min(MAX_DIM, max([1, *dims])))
    faults: set[Fault] = set()
    for node in model.graph.node:
        spec = specs.get(node.op_type)
        if node.domain not in ("", "ai.onnx") or spec is None or not spec.covers(opset):
            continue
        info = op_info(node.op_type, opset)
        if info is None:
            continue
        if not all(isinstance(known.get(n), np.ndarray | np.generic) for n in node.input if n):
            continue  # a value not known, or not a tensor (a sequence, an optional)
        inputs = [_observed(np.asarray(known[n])) if n else None for n in node.input]
        if any(n and x is None for n, x in zip(node.input, inputs, strict=True)):
            continue  # an element type ONNX has no tensor type for
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        b = CheckBuilder(spec, info, cfg, attrs, inputs)
        where = f"{node.op_type}:{next((o for o in node.output if o), '')}"
        try:
            spec.build(b, spec.params)
        except OutOfDomain as e:
            if e.variable.endswith(".values"):  # integer values out of domain
                faults.add((where, e.variable))
        except Exception:  # noqa: BLE001 - a node its spec cannot describe: not judged
            pass
        faults.update((where, v) for v in b.value_faults)
    return frozenset(faults)


def _observed(a: np.ndarray) -> tuple[int, tuple[int, ...], np.ndarray] | None:
    """A value as ``CheckBuilder`` observes an input: (element type, shape, values)."""
    try:
        return onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape, a
    except (KeyError, TypeError, ValueError):  # object arrays, strings
        return None
