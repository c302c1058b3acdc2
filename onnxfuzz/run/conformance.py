"""``onnxfuzz backend check NAME``: the conformance kit for an adapter.

Runs ONNX's node tests (``onnx.backend.test.loader.load_node_model_tests()``, ~1,900 cases)
through the adapter in the sandbox and counts pass / fail / unsupported / crash per op
(``node_tests``), then a short smoke fuzz against ONNX Runtime (``smoke_fuzz``). The
command line prints them.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import onnx

from onnxfuzz.errors import UsageError
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
    # node tests stamped outside the adapter's opsets, run at the nearest opset inside them
    # where each of their ops has the same definition: (from, to) -> count
    restamped: Counter[tuple[int, int]] = field(default_factory=Counter)
    # ... and those ONNX's version converter took there (checked on the reference evaluator)
    converted: Counter[tuple[int, int]] = field(default_factory=Counter)

    def totals(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for counts in self.table.values():
            out.update(counts)
        return out


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``graph``, those of its subgraphs (If, Loop, Scan bodies) included."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                yield from _nodes(sub)


def restamp(model: onnx.ModelProto, lo: int, hi: int) -> onnx.ModelProto | None:
    """``model`` (a node test stamped with an opset outside ``lo..hi``) stamped with the
    nearest opset inside, if every op it uses has the same definition there (the same
    schema version: e.g. Softmax-13 is Softmax at every opset 13..26); None if one changed
    in between, or the model imports other domains (their versions cannot be judged)."""
    imports = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if len(imports) != 1 or len(model.opset_import) != 1:
        return None
    opset = imports[0].version
    target = hi if opset > hi else lo
    for node in _nodes(model.graph):
        try:
            here = onnx.defs.get_schema(node.op_type, opset, node.domain).since_version
            there = onnx.defs.get_schema(node.op_type, target, node.domain).since_version
        except onnx.defs.SchemaError:  # no such op at the target opset
            return None
        if here != there:
            return None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    out.opset_import[0].version = target
    return out


def converted(
    model: onnx.ModelProto, target: int, ins: list, outs: list, rtol: float, atol: float
) -> onnx.ModelProto | str:
    """``model`` taken to opset ``target`` by ONNX's version converter, if the result passes
    the full checker and still gives the test's expected outputs on the ONNX reference
    evaluator (so that a converter's mistake is never blamed on the adapter); else why not."""
    from onnx import version_converter
    from onnx.reference import ReferenceEvaluator

    try:
        out = version_converter.convert_version(model, target)
        onnx.checker.check_model(out, full_check=True)
    except Exception as e:  # noqa: BLE001 - the converter raises RuntimeError, checker others
        return f"ONNX's version converter cannot take it there ({type(e).__name__})"
    feeds = dict(zip([i.name for i in out.graph.input], ins, strict=False))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            got = ReferenceEvaluator(out).run(None, feeds)
    except Exception as e:  # noqa: BLE001 - any evaluator failure: the check is not possible
        return f"the reference evaluator cannot check the converted model ({type(e).__name__})"
    if not all(isinstance(g, np.ndarray) for g in got):
        return "outputs that are not tensors"
    names = [o.name for o in out.graph.output]
    if _matches(outs, dict(zip(names, got, strict=False)), names, rtol, atol) is not None:
        return "the converted model no longer gives the test's outputs (reference evaluator)"
    return out


def load_node_tests() -> list:
    """ONNX's node test cases; building them runs numpy on edge values (overflowing casts,
    log of 0) whose RuntimeWarnings are the test data's, not the user's business."""
    from onnx.backend.test.loader import load_node_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return [tc for tc in load_node_model_tests() if tc.data_sets]


def node_tests(
    name: str,
    ops: str | None = None,
    limit: int | None = None,
    timeout: float = 30.0,
    progress: Callable[[int, int], None] | None = None,
) -> Conformance:
    """ONNX's node tests through backend ``name`` in the sandbox; ``progress(done, total)``
    after each test considered (run or skipped)."""
    wanted = {o.strip() for o in ops.split(",") if o.strip()} if ops else None
    report = Conformance()
    cases = load_node_tests()
    if wanted is not None:
        tested = {tc.model.graph.node[0].op_type for tc in cases if tc.model.graph.node}
        unknown = sorted(wanted - tested)
        if unknown:  # it ran nothing and passed (exit 0)
            raise UsageError(
                f"--ops: no ONNX node test is of {', '.join(unknown)} (op types are "
                "case-sensitive, e.g. Relu,MatMul)"
            )
    with BackendPool([name], timeout=timeout) as pool:
        lo, hi = pool.infos[name].opsets
        done = 0
        for i, tc in enumerate(cases):
            if progress is not None:
                progress(i, len(cases))
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
            model = tc.model
            if not all(isinstance(x, np.ndarray) for x in ins):
                why = "inputs that are not tensors (sequences, optionals, maps)"
            elif not lo <= opset <= hi:
                target = hi if opset > hi else lo
                model = restamp(tc.model, lo, hi)
                if model is not None:
                    report.restamped[(opset, target)] += 1
                else:
                    model = converted(tc.model, target, ins, outs, tc.rtol, tc.atol)
                    if isinstance(model, str):
                        why = f"opset outside the adapter's {lo}..{hi}: {model}"
                    else:
                        report.converted[(opset, target)] += 1
            if why is not None:
                report.table[op]["skipped"] += 1
                report.skipped[why] += 1
                continue
            done += 1
            feeds = dict(zip([i.name for i in model.graph.input], ins, strict=False))
            o = pool.run_one(name, model.SerializeToString(), feeds)
            if o.status == Status.OK:
                names = [x.name for x in model.graph.output]
                bad = _matches(outs, o.outputs or {}, names, tc.rtol, tc.atol)
                if bad is None and o.inputs_changed:
                    bad = f"run() wrote into the caller's input(s) {', '.join(o.inputs_changed)}"
                elif bad is None and o.second is not None:
                    again = _matches(outs, o.second, names, tc.rtol, tc.atol)
                    bad = again and f"the second run of the same compiled model: {again}"
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
        if progress is not None:
            progress(len(cases), len(cases))
    return report


def smoke_reference(name: str) -> str:
    """The reference a smoke fuzz of ``name`` compares against."""
    return "ort" if name != "ort" else "ort:opt=none"


def smoke_fuzz(
    name: str,
    tests: int,
    timeout: float,
    report: Callable[[Campaign], None],
    probe_cache: bool = True,
) -> int:
    """A short campaign of ``smoke_reference(name)`` vs ``name`` in a temporary folder,
    which is kept when it found bugs (the summary ``report`` prints names their bundles, so
    they must still be there: ``onnxfuzz triage`` and ``replay`` work on it) and removed
    otherwise. Returns the number of distinct bugs it found. Its probe reads and extends
    the probe's cache (``probe_cache``), as a campaign's does: the same adapter, version
    and options are probed once."""
    from onnxfuzz.run.campaign import Campaign, CampaignOptions

    tmp = tempfile.mkdtemp(prefix=f"onnxfuzz-check-{smoke_folder_name(name)}-")
    bugs = 0
    try:
        opts = CampaignOptions(
            backends=[smoke_reference(name), name],
            tests=tests,
            timeout=timeout,
            generator={"min_nodes": 1, "max_nodes": 8},
            probe_cache=probe_cache,
        )
        camp = Campaign(Path(tmp) / "smoke", opts, resume=False)
        try:
            camp.start()
            camp.run()
            report(camp)
            bugs = len(camp.store.bugs()) if camp.store is not None else 0
            return bugs
        finally:
            camp.close()
    finally:
        if not bugs:
            shutil.rmtree(tmp, ignore_errors=True)


def smoke_folder_name(name: str) -> str:
    """A backend spec as a folder-name part: ``mycc.py:Cc:x=1`` -> ``mycc.py-Cc-x-1``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.rsplit("/", 1)[-1])[:40]
