"""Optimization coverage of generated models (issue 24), per ``--op-mix``.

For N models per mix (seeds SEED.., ``--nodes``), each generated as ``onnxfuzz generate``
would:
- the share of models holding an elementwise group of >= 3 ops that mixes arithmetic
  (Add, Mul, Div, ...) and activations (Relu, Sigmoid, Tanh, Erf, ...): elementwise nodes
  (those and Cast) joined producer -> consumer, one connected group; the share holding
  the chain arithmetic -> activation -> arithmetic (x * sigmoid(x) + b, GELU's
  decomposition); and the share of nodes that are arithmetic ops or activations (about 40 %
  in real models: onnxfuzz/data/op_mix_layers.json);
- their diversity (op types, shape-attribute instances, op-type triples), so that a mix
  that gains coverage is seen not to lose variety; and for every mix after the first, the
  same figures "at matched nodes": over its models from SEED on until their nodes add up
  to the first mix's (a mix that makes smaller models is not judged on fewer nodes);
- with ``--ort``: ONNX Runtime's transformers and rewrite rules that modified at least one
  model (the ``optimizations`` feedback, in a worker process as in a campaign), and what
  the feedback costs, asked on every test (``ort:feedback=all``) and as a campaign's
  default policy asks (``ort``, ``feedback=new``: the models in order as its tests), each
  against ``ort:feedback=0`` on the same models: compile time (session creation; its run
  is not affected) and the share of backend time in CPU seconds (compile + run, the
  worker's own clock: load elsewhere on the machine does not count; each model's best of
  ``--passes`` passes, the sides interleaved model by model), and what the policy's tests found less
  than every test's;
- with ``--tvm``: distinct fused-kernel patterns of ``tvm:pipeline=fuse`` per 1,000
  models.

    .venv/bin/python tools/bench_optcov.py --models 300 --mix uniform,layers --ort --tvm
    .venv/bin/python tools/bench_optcov.py --models 2000 --mix layers --ort  # a campaign's length
    .venv/bin/python tools/bench_optcov.py --models 2000 --mix uniform,chains,layers
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
import onnx

from onnxfuzz.backend import parse_backend, split_known
from onnxfuzz.execute.sandbox import Status, Worker, pack
from onnxfuzz.generate.build.generator import Generator
from onnxfuzz.generate.lang.config import Config
from onnxfuzz.generate.measure.metrics import Diversity
from onnxfuzz.run.feedback_policy import CampaignFeedback

ARITHMETIC = {
    "Add", "Sub", "Mul", "Div", "Pow", "Neg", "Reciprocal", "Sqrt", "Exp", "Log", "Abs",
    "Max", "Min", "Sum", "Mean",
}  # fmt: skip
ACTIVATIONS = {
    "Relu", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Elu",
    "Selu", "Celu", "Softplus", "Softsign", "ThresholdedRelu", "Mish", "Gelu", "Clip", "Erf",
}  # fmt: skip
# Cast is elementwise too (TVM's FuseOps and ORT's elementwise fusions take it in a group);
# glue often puts one between an integer Add and a Sigmoid.
ELEMENTWISE = ARITHMETIC | ACTIVATIONS | {"Cast"}


def elementwise_shapes(model: onnx.ModelProto) -> tuple[bool, bool]:
    """(has a connected elementwise group of >= 3 ops with both arithmetic and an
    activation, has an arithmetic -> activation -> arithmetic chain)."""
    nodes = [n for n in model.graph.node if n.op_type in ELEMENTWISE]
    made = {out: k for k, n in enumerate(nodes) for out in n.output}
    parent = list(range(len(nodes)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    preds: dict[int, set[int]] = defaultdict(set)
    for k, n in enumerate(nodes):
        for i in n.input:
            if i in made:
                preds[k].add(made[i])
                parent[root(k)] = root(made[i])
    groups: dict[int, list[str]] = defaultdict(list)
    for k, n in enumerate(nodes):
        groups[root(k)].append(n.op_type)
    group = any(
        len(ops) >= 3 and ARITHMETIC & set(ops) and ACTIVATIONS & set(ops)
        for ops in groups.values()
    )
    chain = any(
        nodes[k].op_type in ARITHMETIC
        and any(
            nodes[a].op_type in ACTIVATIONS
            and any(nodes[b].op_type in ARITHMETIC for b in preds[a])
            for a in preds[k]
        )
        for k in range(len(nodes))
    )
    return bool(group), chain


def run_all(label: str, cases: list, timeout: float = 30.0) -> tuple[list, float]:
    """Each case's outcome on ``label`` (in a worker), and the compile seconds summed."""
    worker = Worker(parse_backend(label), timeout=timeout)
    worker.start()
    outs, compile_s = [], 0.0
    try:
        for case in cases:
            o = worker.execute(case.model.SerializeToString(), case.make_inputs(case.seed))
            outs.append(o)
            compile_s += o.compile_s
    finally:
        worker.close()
    return outs, compile_s


def run_sides(sides: dict[str, tuple[str, bool]], cases: list) -> dict[str, tuple[list, float]]:
    """``run_all`` of each side (key -> (label, policy)), model by model: each model runs
    on every side's worker one after the other (their order turning with the model), so
    that load elsewhere on the machine falls on the sides alike."""
    workers = {key: Worker(parse_backend(label), timeout=30.0) for key, (label, _) in sides.items()}
    deciders = {
        key: CampaignFeedback([label], seed=0) for key, (label, policy) in sides.items() if policy
    }
    got: dict[str, tuple[list, float]] = {key: ([], 0.0) for key in sides}
    keys = list(sides)
    for w in workers.values():
        w.start()
    try:
        for i, case in enumerate(cases):
            data = case.model.SerializeToString()
            inputs = case.make_inputs(case.seed)
            for key in keys[i % len(keys) :] + keys[: i % len(keys)]:
                label = sides[key][0]
                d = deciders.get(key)
                asked = d.decide(i, data) if d else {label}
                failed = workers[key].submit_packed(pack(data, inputs, label in asked))
                o = failed if failed is not None else workers[key].collect()
                if d:
                    fired, _ = split_known(o.optimizations or {})
                    d.report(i, asked, {label: [n for v in fired.values() for n in v]})
                outs, compile_s = got[key]
                outs.append(o)
                got[key] = (outs, compile_s + o.compile_s)
    finally:
        for w in workers.values():
            w.close()
    return got


def matched(gen: Generator, seed: int, nodes: int) -> dict:
    """The diversity of ``gen``'s models from ``seed`` on until their nodes add up to
    ``nodes`` or more."""
    div = Diversity()
    i = 0
    while div.nodes < nodes:
        div.add(gen.generate(seed + i).model)
        i += 1
    return div.summary()


def bench(mix: str, args: argparse.Namespace, first_nodes: int | None) -> int:
    """Prints the figures of ``mix``; returns its models' nodes in all. ``first_nodes``:
    the first mix's (None: this is the first)."""
    lo, hi = (int(x) for x in args.nodes.split(":"))
    gen = Generator(Config(min_nodes=lo, max_nodes=hi, op_mix=mix))
    t0 = time.perf_counter()
    cases = [gen.generate(args.seed + i) for i in range(args.models)]
    rate = args.models / (time.perf_counter() - t0)
    div = Diversity()
    group = chain = nodes = arith_act = 0
    for case in cases:
        div.add(case.model)
        g, c = elementwise_shapes(case.model)
        group += g
        chain += c
        nodes += len(case.model.graph.node)
        arith_act += sum(n.op_type in ARITHMETIC | ACTIVATIONS for n in case.model.graph.node)
    s = div.summary()
    n = args.models
    print(
        f"[{mix}] {n} models, {s['nodes']:.1f} mean nodes, {rate:.0f} models/s: elementwise "
        f"group >= 3 mixing arithmetic and activations in {group / n:.1%}, "
        f"arithmetic -> activation -> arithmetic in {chain / n:.1%}, arithmetic ops and "
        f"activations {arith_act / max(nodes, 1):.1%} of the nodes; "
        f"{s['ops']} op types, {s['instances']} instances, {s['triples']} triples"
    )
    if first_nodes is not None:
        m = matched(gen, args.seed, first_nodes)
        print(
            f"[{mix}] at matched nodes ({m['models']} models, {m['nodes'] * m['models']:.0f} "
            f"nodes): {m['ops']} op types, {m['instances']} instances, {m['triples']} triples"
        )
    if args.ort:
        bench_ort(mix, cases, args.passes)
    if args.tvm:
        outs, _ = run_all("tvm:pipeline=fuse", cases, timeout=60.0)
        patterns: set[str] = set()
        compiled = 0
        for o in outs:
            if o.optimizations is not None:
                compiled += 1
                patterns.update(o.optimizations.get("fused", ()))
        print(
            f"[{mix}] tvm:pipeline=fuse: {compiled}/{n} compiled; {len(patterns)} distinct "
            f"fused patterns ({1000 * len(patterns) / n:.0f} per 1,000 models)"
        )
    return div.nodes


def fired_of(outs: list) -> tuple[dict[str, set[str]], set[str], int]:
    """(kind -> names that fired, transformers that ran, tests that gave feedback)."""
    fired: dict[str, set[str]] = defaultdict(set)
    known: set[str] = set()
    asked = 0
    for o in outs:
        if o.status != Status.OK or o.optimizations is None:
            continue
        asked += 1
        for kind in ("transformer", "rule"):
            fired[kind].update(o.optimizations.get(kind, ()))
        known.update(o.optimizations.get("known:transformer", ()))
    return fired, known, asked


def bench_ort(mix: str, cases: list, passes: int = 3) -> None:
    """ORT's transformers and rules and what the feedback costs, in the same run: every
    test asking (``ort:feedback=all``), the campaign's policy (``ort``, ``feedback=new``)
    and no feedback (``ort:feedback=0``); compile + run CPU seconds of the worker (other
    load on the machine does not count), on the models all three compiled and ran, each
    model's best of ``passes`` passes (the sides interleaved model by model: load elsewhere
    falls on them alike, and a spike of it inflates one pass of one model, not a side)."""
    sides = {
        "all": ("ort:feedback=all", False),
        "new": ("ort", True),
        "0": ("ort:feedback=0", False),
    }
    runs: dict[str, list[tuple[list, float]]] = {k: [] for k in sides}
    for _ in range(passes):
        for key, got in run_sides(sides, cases).items():
            runs[key].append(got)
    first = {k: v[0][0] for k, v in runs.items()}
    both = [
        k
        for k in range(len(cases))
        if first["all"][k].status == first["new"][k].status == first["0"][k].status == Status.OK
    ]
    cpu = {k: sum(min(r[j].cpu_s for r, _ in v) for j in both) for k, v in runs.items()}
    comp = {k: min(c for _, c in v) for k, v in runs.items()}
    off = max(cpu["0"], 1e-9)
    for key in ("all", "new"):
        fired, known, asked = fired_of(first[key])
        hook_s = sum(o.feedback_s for o in first[key])
        print(
            f"[{mix}] ort feedback={key}: asked on {asked}/{len(cases)} tests; transformers "
            f"that modified a graph: {len(fired['transformer'])} of {len(known)} that ran "
            f"({', '.join(sorted(fired['transformer']))}); rewrite rules: "
            f"{len(fired['rule'])} ({', '.join(sorted(fired['rule']))}); compile "
            f"{comp[key]:.2f} s vs {comp['0']:.2f} s without "
            f"({(comp[key] - comp['0']) / max(comp['0'], 1e-9):+.1%}; the hook itself "
            f"{hook_s:.3f} s); CPU time of compile + run {cpu[key]:.2f} s vs {cpu['0']:.2f} s "
            f"without on {len(both)} models: feedback costs "
            f"{(cpu[key] - cpu['0']) / off:+.1%} of backend time"
        )
    lost = {
        kind: sorted(fired_of(first["all"])[0][kind] - fired_of(first["new"])[0][kind])
        for kind in ("transformer", "rule")
    }
    print(
        f"[{mix}] ort feedback=new vs all: cost ratio {(cpu['new'] - cpu['0']) / off:.1%} / "
        f"{(cpu['all'] - cpu['0']) / off:.1%} of backend time; seen with all and not with "
        f"new: {lost['transformer'] or 'no transformer'}, {lost['rule'] or 'no rule'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--nodes", default="1:10")
    parser.add_argument("--mix", default="uniform,layers", help="op mixes, comma-separated")
    parser.add_argument("--ort", action="store_true", help="ORT's transformers and cost")
    parser.add_argument("--tvm", action="store_true", help="TVM's fused patterns")
    parser.add_argument("--passes", type=int, default=3, help="--ort: passes per side")
    args = parser.parse_args()
    np.seterr(all="ignore")
    first_nodes = None
    for mix in args.mix.split(","):
        nodes = bench(mix, args, first_nodes)
        first_nodes = nodes if first_nodes is None else first_nodes


if __name__ == "__main__":
    main()
