"""``onnxfuzz backend check NAME``: the conformance kit for an adapter.

Runs ONNX's node tests (``onnx.backend.test.loader.load_node_model_tests()``, ~1,900 cases)
through the adapter in the sandbox and counts pass / fail / unsupported / crash per op
(``node_tests``), then a short smoke fuzz against ONNX Runtime (``smoke_fuzz``). The
command line prints them.
"""

from __future__ import annotations

import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from onnxfuzz.execute.pool import BackendPool
from onnxfuzz.execute.sandbox import Status

if TYPE_CHECKING:
    from onnxfuzz.run.campaign import Campaign


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


@dataclass
class Conformance:
    """Node-test results of one adapter: counts per op and status, and failure lines."""

    table: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    failures: list[str] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # why node tests were not run

    def totals(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for counts in self.table.values():
            out.update(counts)
        return out


def node_tests(
    name: str, ops: str | None = None, limit: int | None = None, timeout: float = 30.0
) -> Conformance:
    """ONNX's node tests through backend ``name`` in the sandbox."""
    from onnx.backend.test.loader import load_node_model_tests

    wanted = {o.strip() for o in ops.split(",")} if ops else None
    report = Conformance()
    with BackendPool([name], timeout=timeout) as pool:
        lo, hi = pool.infos[name].opsets
        done = 0
        for tc in load_node_model_tests():
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
            why = None
            if not all(isinstance(x, np.ndarray) for x in ins):
                why = "inputs that are not tensors (sequences, optionals, maps)"
            elif not lo <= opset <= hi:
                why = f"opset outside the adapter's {lo}..{hi}"
            if why is not None:
                report.table[op]["skipped"] += 1
                report.skipped[why] += 1
                continue
            done += 1
            feeds = dict(zip([i.name for i in tc.model.graph.input], ins, strict=False))
            o = pool.run_one(name, tc.model.SerializeToString(), feeds)
            if o.status == Status.OK:
                names = [x.name for x in tc.model.graph.output]
                bad = _matches(outs, o.outputs or {}, names, tc.rtol, tc.atol)
                status = "pass" if bad is None else "fail"
                if bad:
                    report.failures.append(f"{tc.name}: {bad}")
            elif o.status == Status.UNSUPPORTED:
                status = "unsupported"
            elif o.status in (Status.CRASH, Status.TIMEOUT):
                status = o.status
                report.failures.append(f"{tc.name}: {o.status} at {o.stage}: {o.message[:150]}")
            else:
                status = "error"
                report.failures.append(f"{tc.name}: error at {o.stage}: {o.message[:150]}")
            report.table[op][status] += 1
    return report


def smoke_reference(name: str) -> str:
    """The reference a smoke fuzz of ``name`` compares against."""
    return "ort" if name != "ort" else "ort:opt=none"


def smoke_fuzz(name: str, tests: int, timeout: float, report: Callable[[Campaign], None]) -> int:
    """A short campaign of ``smoke_reference(name)`` vs ``name`` in a temporary folder;
    ``report`` sees the finished campaign before the folder goes. Returns the number of
    distinct bugs it found."""
    from onnxfuzz.run.campaign import Campaign, CampaignOptions

    with tempfile.TemporaryDirectory() as tmp:
        opts = CampaignOptions(
            backends=[smoke_reference(name), name],
            tests=tests,
            timeout=timeout,
            generator={"min_nodes": 1, "max_nodes": 8},
        )
        camp = Campaign(Path(tmp) / "smoke", opts, resume=False)
        try:
            camp.start()
            camp.run()
            report(camp)
            return len(camp.store.bugs()) if camp.store is not None else 0
        finally:
            camp.close()
