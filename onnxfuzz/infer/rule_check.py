"""Held-out quality of inferred rules: do they agree with a hand spec of the same op?

``agreement`` draws instances from an inferred rule (as the generator would: a
``GenBuilder`` on an empty graph) and replays each through the op's hand spec with a
``CheckBuilder``: the draw agrees when every variable lies in the hand spec's domain and
the hand spec computes the same output shapes and element types. A draw outside only
because of the configured rank/dim bounds is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from onnxfuzz.errors import ConfigError, SpecError
from onnxfuzz.generate.build.builder import CheckBuilder, GenBuilder, OutOfDomain
from onnxfuzz.generate.lang.choices import ChoiceStream
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.lang.graph import Graph
from onnxfuzz.generate.lang.spec import OpSpec, op_info
from onnxfuzz.generate.lang.values import inputs_for
from onnxfuzz.infer.rules import Rule, op_info_of, rule_spec


@dataclass
class Agreement:
    op: str
    agree: int = 0
    total: int = 0
    disagreements: list[str] = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.agree / self.total if self.total else 0.0


def agreement(rule: Rule, hand: OpSpec, cfg: Config, draws: int, seed: int = 0) -> Agreement:
    """``draws`` instances of ``rule`` checked against the hand spec ``hand``."""
    spec = rule_spec(rule)
    info = op_info_of(rule)
    hand_info = op_info(hand.op_type, cfg.opset)
    if hand_info is None:
        raise ConfigError(f"{hand.op_type}: no schema at opset {cfg.opset}")
    out = Agreement(rule.name)
    for k in range(draws):
        g = Graph()
        b = GenBuilder(spec, info, cfg, g, ChoiceStream(seed + k))
        spec.build(b, spec.params)
        node = b.commit()
        # the values the generated model runs on: the hand spec judges value-dependent
        # variables (how many elements a reduction may sum) from them
        data = inputs_for(
            np.random.default_rng(seed + k),
            [(t.name, t.dtype, t.shape) for t in g.inputs],
            dict(g.input_values),
        )
        data.update({t.name: a for t, a in g.initializers})
        types = {t.name: t.dtype for t in g.inputs} | {t.name: t.dtype for t, _ in g.initializers}
        inputs = [(types[n], data[n].shape, data[n]) if n else None for n in node.inputs]
        outputs = [(t.dtype, t.shape) for t in node.outputs]
        check = CheckBuilder(hand, hand_info, cfg, dict(node.attrs), inputs, outputs)
        try:
            hand.build(check, hand.params)
            check.check_consumed()
        except OutOfDomain as e:
            if e.bounds:
                continue
            out.disagreements.append(f"draw {k}: hand spec rejects it: {e}")
            out.total += 1
            continue
        except SpecError as e:
            out.disagreements.append(f"draw {k}: {e}")
            out.total += 1
            continue
        if len(check.outs) != len(outputs):
            out.disagreements.append(
                f"draw {k}: hand spec has {len(check.outs)} outputs, rule {len(outputs)}"
            )
            out.total += 1
            continue
        out.agree += 1
        out.total += 1
    return out
