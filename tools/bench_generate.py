"""Generation throughput against a bare-proto floor, plus validity of what is generated.

For 5-, 20- and 100-node models this prints:
- models/s of onnxfuzz generation + serialization (no reference runs), one process;
- models/s of building the *same* graphs with bare onnx.helper calls from a prepared
  recipe (the floor: what serializing these graphs costs at minimum), measured in the
  same run, and the ratio of the two;
- validity on a sample (checker full + strict shape inference agreeing with the spec's
  shapes + an ONNX Runtime run matching them), the share of non-finite reference
  outputs, and the number of distinct op types.

    .venv/bin/python tools/bench_generate.py [--seconds 3] [--sample 200] [--opset 21]
"""

from __future__ import annotations

import argparse
import time

from onnx import helper, numpy_helper

from onnxfuzz.generate.build.export import _attr_value
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.corpus.validate import validate
from onnxfuzz.generate.lang.config import DEFAULT_OPSET, Config
from onnxfuzz.generate.lang.graph import Tensor, type_proto


def recipe(g) -> tuple:
    """Plain data for the floor: no onnxfuzz object is touched while timing it."""
    nodes = [
        (
            n.op_type,
            list(n.inputs),
            [t.name for t in n.outputs],
            n.name,
            {k: _attr_value(v) for k, v in n.attrs.items()},
        )
        for n in g.nodes
    ]
    # tensors as plain data; a sequence or optional as its TypeProto, made here
    vi = lambda ts: [  # noqa: E731
        (t.name, t.dtype, list(t.shape)) if isinstance(t, Tensor) else (t.name, type_proto(t))
        for t in ts
    ]
    inits = [(t.name, a) for t, a in g.initializers]
    return nodes, vi(g.inputs), vi(g.outputs()), vi(g.intermediates()), inits


def _vi(x: tuple):
    return helper.make_tensor_value_info(*x) if len(x) == 3 else helper.make_value_info(*x)


def build_floor(r: tuple, opset: int, ir: int) -> bytes:
    nodes, ins, outs, mids, inits = r
    graph = helper.make_graph(
        [helper.make_node(op, i, o, name=n, **a) for op, i, o, n, a in nodes],
        "g",
        [_vi(x) for x in ins],
        [_vi(x) for x in outs],
        initializer=[numpy_helper.from_array(a, name) for name, a in inits],
        value_info=[_vi(x) for x in mids],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir)
    return model.SerializeToString()


def rate(fn, seconds: float) -> float:
    n, start = 0, time.perf_counter()
    while True:
        fn(n)
        n += 1
        el = time.perf_counter() - start
        if el >= seconds:
            return n / el


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--opset", type=int, default=DEFAULT_OPSET)
    args = ap.parse_args()
    print(
        f"{'nodes':>5} {'models/s':>9} {'floor/s':>9} {'ratio':>6} {'valid':>8} "
        f"{'non-finite':>10} {'op types':>8}"
    )
    for n in (5, 20, 100):
        cfg = Config(min_nodes=n, max_nodes=n, opset=args.opset)
        gen = Generator(cfg)
        ours = rate(lambda s, gen=gen: gen.generate(s).model.SerializeToString(), args.seconds)
        recipes = [recipe(gen.graph(s)[0]) for s in range(500)]
        floor = rate(
            lambda s, r=recipes, c=cfg: build_floor(r[s % 500], c.opset, c.ir), args.seconds
        )
        valid = finite = 0
        ops: set[str] = set()
        sample = args.sample if n < 100 else max(args.sample // 4, 20)
        problems: list[str] = []
        for s in range(sample):
            case = gen.generate(10_000 + s)
            ops.update(case.ops)
            v = validate(case.model, case.make_inputs(s))
            valid += v.ok
            finite += v.ok and v.finite
            if not v.ok and len(problems) < 3:
                problems.append(f"seed {10_000 + s}: {v.problems[0][:200]}")
        print(
            f"{n:>5} {ours:>9.0f} {floor:>9.0f} {ours / floor:>6.2f} "
            f"{valid}/{sample:<4} {(valid - finite) / max(valid, 1):>9.1%} {len(ops):>8}"
        )
        for p in problems:
            print("      invalid:", p)
    print(
        "ratio = onnxfuzz models/s / bare onnx.helper models/s for the same graphs "
        "(1.0 = no overhead; target >= 0.25)"
    )


if __name__ == "__main__":
    main()
