"""``onnxfuzz backend check NAME``: the conformance kit for an adapter.

Runs ONNX's node tests (``onnx.backend.test.loader.load_node_model_tests()``, ~1,900 cases)
through the adapter in the sandbox and reports pass / fail / unsupported / crash per op,
then a short smoke fuzz against ONNX Runtime.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

import click
import numpy as np

from onnxfuzz.backend import parse_backend
from onnxfuzz.sandbox import CRASH, OK, TIMEOUT, UNSUPPORTED, Worker


def _matches(want: list, got: dict, names: list[str], rtol: float, atol: float) -> str | None:
    for name, w in zip(names, want, strict=False):
        g = got.get(name)
        w = np.asarray(w)
        if g is None:
            return f"output {name} missing"
        if g.shape != w.shape:
            return f"output {name}: shape {list(g.shape)} vs {list(w.shape)}"
        if w.dtype.kind in "fc":
            if not np.allclose(
                g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True
            ):
                return f"output {name}: values differ"
        elif not np.array_equal(g, w):
            return f"output {name}: values differ"
    return None


def check_backend(
    name: str,
    ops: str | None = None,
    limit: int | None = None,
    smoke: int = 50,
    timeout: float = 30.0,
) -> dict[str, dict[str, int]]:
    from onnx.backend.test.loader import load_node_model_tests

    wanted = {o.strip() for o in ops.split(",")} if ops else None
    worker = Worker(parse_backend(name), timeout=timeout)
    info = worker.start()
    if info.available:
        worker.close()
        raise click.ClickException(f"backend {name} is not available here: {info.available}")
    lo, hi = info.opsets
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    failures: list[str] = []
    cases = load_node_model_tests()
    done = 0
    try:
        for tc in cases:
            if not tc.data_sets:
                continue
            op = tc.model.graph.node[0].op_type if tc.model.graph.node else "?"
            if wanted is not None and op not in wanted:
                continue
            if limit is not None and done >= limit:
                break
            opset = next(
                (o.version for o in tc.model.opset_import if o.domain in ("", "ai.onnx")), 0
            )
            ins, outs = tc.data_sets[0]
            if not all(isinstance(x, np.ndarray) for x in ins):
                table[op]["skipped"] += 1
                continue
            if not lo <= opset <= hi:
                table[op]["skipped"] += 1
                continue
            done += 1
            feeds = dict(zip([i.name for i in tc.model.graph.input], ins, strict=False))
            o = worker.execute(tc.model.SerializeToString(), feeds)
            if o.status == OK:
                names = [x.name for x in tc.model.graph.output]
                bad = _matches(outs, o.outputs or {}, names, tc.rtol, tc.atol)
                status = "pass" if bad is None else "fail"
                if bad:
                    failures.append(f"{tc.name}: {bad}")
            elif o.status == UNSUPPORTED:
                status = "unsupported"
            elif o.status in (CRASH, TIMEOUT):
                status = o.status
                failures.append(f"{tc.name}: {o.status} at {o.stage}: {o.message[:150]}")
            else:
                status = "error"
                failures.append(f"{tc.name}: error at {o.stage}: {o.message[:150]}")
            table[op][status] += 1
    finally:
        worker.close()
    cols = ["pass", "fail", "error", "crash", "timeout", "unsupported", "skipped"]
    click.echo(f"{'op':<28}" + "".join(f"{c:>12}" for c in cols))
    totals = defaultdict(int)
    for op in sorted(table):
        click.echo(f"{op:<28}" + "".join(f"{table[op][c]:>12}" for c in cols))
        for c in cols:
            totals[c] += table[op][c]
    click.echo(f"{'TOTAL':<28}" + "".join(f"{totals[c]:>12}" for c in cols))
    for line in failures[:40]:
        click.echo(f"  {line}")
    if len(failures) > 40:
        click.echo(f"  ... {len(failures) - 40} more")
    if smoke:
        from onnxfuzz.campaign import Campaign, CampaignOptions
        from onnxfuzz.cli_fuzz import print_summary

        ref = "ort" if name != "ort" else "ort:opt=none"
        click.echo(f"\nsmoke fuzz: {smoke} tests, {ref} (reference) vs {name}")
        with tempfile.TemporaryDirectory() as tmp:
            opts = CampaignOptions(
                backends=[ref, name],
                tests=smoke,
                timeout=timeout,
                generator={"min_nodes": 1, "max_nodes": 8},
            )
            camp = Campaign(Path(tmp) / "smoke", opts, resume=False)
            try:
                camp.start()
                camp.run()
                print_summary(camp)
            finally:
                camp.close()
    return {k: dict(v) for k, v in table.items()}
