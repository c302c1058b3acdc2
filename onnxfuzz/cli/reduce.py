"""``onnxfuzz reduce`` (any model) and ``onnxfuzz triage`` (a campaign's bugs)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
import numpy as np

from onnxfuzz.cli import exits
from onnxfuzz.cli.options import Finite, duration, neighbours_option


def _belonging(
    model, feeds: dict[str, np.ndarray], folder: Path, given: bool = True
) -> dict[str, np.ndarray]:
    """``feeds`` if they are exactly the model's inputs, in type and static shape
    (``given``: the folder is --inputs, else the test_data_set_0 found beside the model)."""
    from onnx import helper

    from onnxfuzz.errors import UsageError

    # a folder the user did not name is named as found, with the way to give another
    where = "--inputs" if given else "test_data_set_0 beside the model (give --inputs)"
    inits = {i.name for i in model.graph.initializer}
    wanted = {vi.name: vi for vi in model.graph.input if vi.name not in inits}
    extra, missing = sorted(set(feeds) - set(wanted)), sorted(set(wanted) - set(feeds))
    if extra or missing:
        raise UsageError(
            f"{where}: {folder} does not hold this model's inputs "
            f"(missing {missing or 'none'}, not inputs of the model: {extra or 'none'})"
        )
    for name, vi in wanted.items():
        tt, value = vi.type.tensor_type, feeds[name]
        want = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        fits = len(dims) == value.ndim and all(
            d in (None, v) for d, v in zip(dims, value.shape, strict=False)
        )
        if value.dtype != want or not fits:
            raise UsageError(
                f"{where}: input {name} is {value.dtype}{list(value.shape)}, the model "
                f"declares {want}{dims}"
            )
    return feeds


_IR_TOO_NEW = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")
# how a model builds what a non-tensor input held, from tensor inputs
_BUILT_BY = {
    "sequence_type": "SequenceConstruct",
    "optional_type": "Optional",
    "map_type": "onnx-ml's maps have no builder op: not reducible here",
}
FREE_DIM = 1  # a symbolic dim's size where --dim does not give one (a batch of one)


def _dims(texts: tuple[str, ...]) -> dict[str, int]:
    """``--dim NAME=N`` values: a symbolic dim's name (``batch``, ``seq_len``) -> its size."""
    from onnxfuzz.errors import UsageError

    sizes: dict[str, int] = {}
    for text in texts:
        name, eq, size = text.partition("=")
        if not eq or not name or not size.isdigit() or int(size) < 1:
            raise UsageError(
                f"--dim {text}: give a symbolic dim's name and a size >= 1, e.g. --dim batch=2"
            )
        sizes[name] = int(size)
    return sizes


def _static_shape(vi: Any, sizes: dict[str, int], chosen: dict[str, int]) -> tuple[int, ...]:
    """``vi``'s shape with each symbolic or unknown dim given a size: ``sizes``' (--dim),
    else ``FREE_DIM``; ``chosen`` records each symbolic dim's size, by name."""
    shape = []
    for k, d in enumerate(vi.type.tensor_type.shape.dim):
        if d.HasField("dim_value"):  # 0 too: an empty tensor's dim is a fixed size
            shape.append(d.dim_value)
            continue
        name = d.dim_param or f"{vi.name}[{k}]"  # an unnamed dim is named by its place
        shape.append(chosen.setdefault(name, sizes.get(name, FREE_DIM)))
    return tuple(shape)


def _model_inputs(
    model,
    folder: Path | None,
    seed: int,
    given: bool = True,
    sizes: dict[str, int] | None = None,
    chosen: dict[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """Inputs from a test_data_set folder, else drawn from the model's recorded value
    domains (onnxfuzz models), else small values. A symbolic dim (``batch``) takes its
    ``sizes`` entry (--dim), else ``FREE_DIM``; ``chosen`` gets the size each one took."""
    import onnx

    from onnxfuzz import dtypes as dt
    from onnxfuzz.errors import UsageError
    from onnxfuzz.generate.build.export import INPUTS_KEY
    from onnxfuzz.generate.corpus.testdata import read_inputs
    from onnxfuzz.generate.lang.intervals import Values
    from onnxfuzz.generate.lang.values import inputs_for

    inits = {i.name for i in model.graph.initializer}
    for vi in model.graph.input:
        kind = vi.type.WhichOneof("value")
        if vi.name not in inits and kind in ("sequence_type", "optional_type", "map_type"):
            # backends are fed numpy arrays: a SequenceProto input cannot be passed
            raise UsageError(
                f"input {vi.name} is a{'n' if kind == 'optional_type' else ''} "
                f"{kind.replace('_type', '')}, not a tensor: onnxfuzz reduce feeds tensors "
                f"only; to reduce this model, feed tensors and build the {kind[:-5]} inside "
                f"it ({_BUILT_BY[kind]})"
            )
    if folder is not None:
        try:
            feeds = read_inputs(folder)
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError, onnx's ValueError
            raise UsageError(
                f"{folder}: its input_<k>.pb are not tensors onnxfuzz can read ({e})"
            ) from None
        return _belonging(model, feeds, folder, given)
    meta = {p.key: p.value for p in model.metadata_props}
    domains = json.loads(meta.get(INPUTS_KEY, "{}"))
    specs, doms = [], {}
    strings: dict[str, tuple[int, ...]] = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        kind = vi.type.WhichOneof("value")
        if kind != "tensor_type":
            what = (kind or "value of no type").replace("_type", "").replace("_", " ")
            raise click.ClickException(
                f"input {vi.name} is a {what}, not a tensor: "
                "give --inputs with a test_data_set folder"
            )
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            raise click.ClickException(
                f"input {vi.name} declares no shape (not even its rank): "
                "give --inputs with a test_data_set folder"
            )
        shape = _static_shape(vi, sizes or {}, chosen if chosen is not None else {})
        if tt.elem_type == onnx.TensorProto.STRING:
            strings[vi.name] = shape
            continue
        if tt.elem_type not in dt.NAMES:
            name = onnx.TensorProto.DataType.Name(tt.elem_type) if tt.elem_type else "untyped"
            raise click.ClickException(
                f"input {vi.name} is {name}, a type onnxfuzz draws no values of: "
                "give --inputs with a test_data_set folder"
            )
        specs.append((vi.name, tt.elem_type, shape))
        d = domains.get(vi.name)
        lo, hi = (
            (0, 1) if tt.elem_type == dt.BOOL else (-1, 1) if tt.elem_type in dt.FLOATS else (0, 3)
        )
        doms[vi.name] = Values(**d) if d is not None else Values(lo, hi)
    feeds = inputs_for(np.random.default_rng(seed), specs, doms)
    # a string input (a model from elsewhere: onnxfuzz generates none): short strings,
    # from a stream of their own so the other inputs' values do not depend on them
    words = np.random.default_rng([seed, 1])
    for name, shape in strings.items():
        feeds[name] = np.array(words.choice(["", "a", "ab", "ba"], size=shape), dtype=object)
    return feeds


def _finite_outputs(
    model: Any, outputs: dict[str, np.ndarray] | None
) -> tuple[Any, list[str]] | None:
    """``model`` with only the outputs ``outputs`` (the reference's) holds no NaN or Inf in,
    and the names of those it left out; None where all or none are so."""
    from onnx import ModelProto

    from onnxfuzz.generate.corpus.validate import all_finite

    if not outputs:
        return None
    names = [o.name for o in model.graph.output]
    fine = [n for n in names if n in outputs and all_finite({n: outputs[n]})]
    if not fine or len(fine) == len(names):
        return None
    m = ModelProto()
    m.CopyFrom(model)
    kept = [o for o in m.graph.output if o.name in fine]
    del m.graph.output[:]
    m.graph.output.extend(kept)
    return m, [n for n in names if n not in fine]


def _faulted_reference(model: Any, reference: str) -> str:
    """The documented fault of the ONNX reference evaluator (``reference``) that applies to
    ``model``, as "Op: what it gets wrong"; "" where none does or the reference is another."""
    from onnxfuzz.judge.attribution import is_reference_evaluator, reference_fault

    fault = reference_fault(model) if is_reference_evaluator(reference) else None
    return f"{fault.op}: {fault.reason}" if fault is not None else ""


def _no_reference(
    model_path: Path, reference: str, backend: str, why: str, feeds: dict[str, np.ndarray]
) -> str:
    """Why the reference gives nothing to compare with, and what to try instead."""
    from onnxfuzz.judge.oracle import NON_FINITE

    if why == NON_FINITE:  # it ran, and its outputs hold NaN or Inf: other inputs may not
        said = f"the reference {reference} gives NaN or Inf" + (" on these inputs" if feeds else "")
        fix = (
            "try other inputs (--seed N, or --inputs DIR)"
            if feeds
            else "the model has no inputs to change; it cannot be judged by values"
        )
    else:
        said = f"the reference {reference} fails on it" + (f" ({why})" if why else "")
        fix = "give another reference first" + (
            " (--backend onnx-reference, the operator definitions' executable form)"
            if reference != "onnx-reference"
            else ""
        )
    return f"{model_path}: {said}, so nothing tells what {backend} should give: {fix}"


def _bundle(
    model_path: Path,
    original: Any,
    r: Any,
    pair: tuple[str, str],
    pool: Any,
    rep: Any,
    timeout: float,
) -> Any:
    """The reduced model as a campaign's bundle holds a finding (``store.bundle``): the
    reduced model is the bundle's model, the reduction's last run (``Reduced.final``) the
    finding."""
    from onnxfuzz.backend import display_names
    from onnxfuzz.generate.corpus.validate import model_opset
    from onnxfuzz.judge.signature import bug_id
    from onnxfuzz.store.bundle import Finding

    reference, backend = pair
    signature = r.signature or ""
    names = display_names(list(pair), {k: i.name for k, i in pool.infos.items()})
    judgement = r.final.judgement
    within = re.match(r"no result within ([0-9.e+-]+) s", judgement.message)
    if within and float(within[1]) != timeout:
        # the hang's reduction ran under a shorter limit (``_hang_limit``): said, as a
        # campaign's bundle says it, beside the --timeout repro.py waits
        judgement = replace(
            judgement,
            message=f"{judgement.message} (the reduction's per-candidate limit; --timeout, "
            f"which repro.py uses, is {timeout:g} s)",
        )
    return Finding(
        signature=signature,
        bug_id=bug_id(signature, names),
        judgement=judgement,
        backend=backend,
        reference=reference,
        seed=-1,
        opset=model_opset(r.model),
        ops=r.ops,
        model=r.model,
        inputs=r.inputs,
        outcomes={k: r.outcomes[k] for k in dict.fromkeys(pair) if k in r.outcomes},
        versions={label: info.version for label, info in pool.infos.items()},
        tolerance=dict(rep.cfg.tolerance),
        timeout=timeout,
        names=names,
        extra={
            "suspect": None,
            "backends": list(pair),
            "reduced_from": str(model_path),
            "reduced_from_nodes": len(original.graph.node),
            "reduction": r.record(),
        },
    )


def _hang_limit(outcomes: dict[str, Any], pair: tuple[str, str], timeout: float) -> float | None:
    """The per-candidate limit reducing a hang (or a memory blow-up) of the backend, as a
    campaign's (``reduce.reproduce.hang_try_limit``: a few times what the reference took,
    never past ``timeout``); None for any other failure (each candidate keeps
    ``timeout``)."""
    from onnxfuzz.execute.sandbox import Status
    from onnxfuzz.reduce.reproduce import hang_try_limit

    reference, backend = pair
    got, ref = outcomes.get(backend), outcomes.get(reference)
    if got is None or not got.too_costly:
        return None
    took = ref.backend_s if ref is not None and ref.status == Status.OK else 0.0
    return hang_try_limit(took, timeout)


def write_bundle_to(dest: Path, f: Any, follows: Any) -> None:
    """``dest/``: the bundle of ``f`` (model.onnx, test_data_set_0/ with the reference's
    outputs, repro.py, repro_plain.py, meta.json, issue.md), as a campaign writes one
    under ``bugs/``; ``onnxfuzz replay dest`` replays it."""
    import shutil
    import tempfile

    from onnxfuzz.store.bundle import write_bundle

    if follows is not None:
        f.extra["follows"] = follows.as_meta()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".reducing-") as tmp:
        folder = write_bundle(Path(tmp), f)
        shutil.move(str(folder), str(dest))


def _neighbours(r: Any, rep: Any, bound: int) -> Any:
    """The reduced model's one-change variants, each run once (``reduce.neighbours``);
    None where none is wanted, or where trying them failed: the bundle stands without."""
    import traceback

    from onnxfuzz.reduce.neighbours import try_neighbours

    if bound <= 0 or r.final is None:
        return None
    try:
        return try_neighbours(r.model, r.inputs, rep, r.final.culprit, r.message, bound)
    except Exception:  # noqa: BLE001 - an onnxfuzz bug: said, and the bundle is written
        click.echo(f"onnxfuzz: trying neighbours failed:\n{traceback.format_exc()}", err=True)
        return None


PROGRESS_AFTER_S = 5.0  # a reduction that ends sooner says nothing while it runs
PROGRESS_EVERY_S = 10.0  # at most one progress line this often


@dataclass
class _Smallest:
    """The smallest model that has shown the failure so far and its inputs, and where it
    goes if the reduction is interrupted: a Ctrl-C (or SIGTERM) after minutes of
    reduction keeps what they found (before, it wrote nothing)."""

    dest: Path | None = None  # --out, once it is known to be free
    nodes: int = 0  # of the model the reduction starts from
    again: str = ""  # the command that goes on from the kept model
    model: Any = None  # None: nothing smaller has failed yet
    inputs: dict[str, np.ndarray] = field(default_factory=dict)
    started: float | None = None  # time.monotonic() when the passes began
    said: float = float("-inf")  # when progress was last said

    def kept(self, model: Any, inputs: dict[str, np.ndarray]) -> None:
        """A smaller model that still fails: remembered, and said now and then (a long
        reduction is not silent, and the user sees a Ctrl-C would keep something)."""
        self.model, self.inputs = model, inputs
        now = time.monotonic()
        begun = self.started if self.started is not None else now
        if now - begun >= PROGRESS_AFTER_S and now - self.said >= PROGRESS_EVERY_S:
            self.said = now
            click.echo(
                f"reduced so far: {self.nodes} -> {len(model.graph.node)} nodes "
                "(Ctrl-C keeps the smallest)",
                err=True,
            )

    def keep(self) -> bool:
        """On an interrupt: the smallest model into --out (as a reduction that did not
        fail again at its end writes one: model.onnx and test_data_set_0/), and one line
        saying where, or that nothing smaller has failed yet; False where there was
        nothing to say (not begun, or its result written already)."""
        if self.dest is None or self.dest.exists():
            return False
        if self.model is None:
            click.echo(
                f"interrupted: no smaller model has failed yet ({self.nodes} nodes): "
                "nothing written",
                err=True,
            )
            return True
        from onnxfuzz.generate.corpus.testdata import write_test

        self.dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.dest.parent, prefix=".reducing-") as tmp:
            write_test(Path(tmp) / "model", self.model, self.inputs)
            shutil.move(str(Path(tmp) / "model"), str(self.dest))  # whole, or not at all
        click.echo(
            f"interrupted: the smallest failing model so far ({len(self.model.graph.node)} "
            f"of {self.nodes} nodes, reduction not finished) is at {self.dest}/model.onnx, "
            f"its inputs in {self.dest}/test_data_set_0; `{self.again}` goes on from it",
            err=True,
        )
        return True


@click.command()
@click.argument("model_path", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--backend",
    "backends",
    multiple=True,
    required=True,
    metavar="SPEC",
    help="Twice: the reference, then the backend that fails.",
)
@click.option(
    "--match",
    default=None,
    metavar="REGEX",
    help="Keep any failure of the backend matching REGEX (default: the exact "
    "signature of the first run's failure).",
)
@click.option(
    "--inputs",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    default=None,
    help="A test_data_set folder with input_<k>.pb.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Output folder (default: <model>-reduced/).",
)
@click.option(
    "--budget",
    callback=duration,
    default="2m",
    metavar="DURATION",
    show_default=True,
    help="Time budget of the reduction, e.g. 90s, 2m.",
)
@click.option(
    "--timeout",
    type=Finite(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds per backend run (compile + run) of each candidate model.",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, help="Seed of generated input values."
)
@click.option(
    "--dim",
    "dims",
    multiple=True,
    metavar="NAME=N",
    help=f"The size of a symbolic input dim (batch=4) in generated inputs; "
    f"default {FREE_DIM}. Repeat it.",
)
@neighbours_option("the reduced model")
def reduce(**options: Any) -> None:
    """Reduce a model that fails on a backend to a small model that fails the same way.

    --out gets the reduced model as a bundle: model.onnx and its inputs, the reference's
    outputs, repro.py, repro_plain.py (for a shipped backend), meta.json and issue.md
    (`onnxfuzz replay OUT` checks it again). Exit 0 once it is written (its repro.py
    exits 1 while the backend fails so); 2 when the model does not fail on the backend,
    the reference cannot judge it, or a flag or file is wrong; 3 when interrupted (Ctrl-C),
    after writing to --out the smallest model that has failed so far, with its inputs."""
    smallest = _Smallest()
    try:
        _reduce(smallest, **options)  # the options, typed there
    except KeyboardInterrupt:
        if not smallest.keep():
            raise
        raise click.exceptions.Exit(exits.INTERRUPTED) from None


def _reduce(
    smallest: _Smallest,
    model_path: Path,
    backends: tuple[str, ...],
    match: str | None,
    inputs: Path | None,
    out: Path | None,
    budget: float,
    timeout: float,
    seed: int,
    dims: tuple[str, ...],
    neighbours: int,
) -> None:
    """``reduce``'s work; ``smallest`` follows the reduction (kept on an interrupt)."""
    import onnx

    from onnxfuzz.errors import ModelError, UsageError
    from onnxfuzz.execute.pool import BackendPool
    from onnxfuzz.execute.sandbox import Status
    from onnxfuzz.judge.oracle import Verdict
    from onnxfuzz.judge.second_opinion import needed, second_opinion
    from onnxfuzz.judge.signature import normalize
    from onnxfuzz.reduce.precursor import find_precursor
    from onnxfuzz.reduce.reducer import reduce_model
    from onnxfuzz.reduce.reproduce import Reproducer, Target
    from onnxfuzz.reduce.static_dims import symbolic_inputs, with_static_inputs

    if len(backends) != 2:
        raise UsageError("--backend: give exactly two, the reference then the failing backend")
    try:
        model = onnx.load(model_path)
        onnx.checker.check_model(model)
    except Exception as e:  # noqa: BLE001 - protobuf raises several types
        raise ModelError(
            f"{model_path}: not a valid ONNX model ({type(e).__name__}: {e})"
        ) from None
    if not model.graph.node:
        raise ModelError(f"{model_path}: the model has no nodes; nothing to reduce")
    pattern = None
    if match is not None:
        try:
            pattern = re.compile(match)
        except re.error as e:
            raise UsageError(f"--match: not a regular expression: {e}") from None
    # checked before the reduction, not after it: its minutes are not lost to a name
    dest = out or model_path.with_name(model_path.stem + "-reduced")
    if dest.exists():
        raise UsageError(f"--out: {dest} exists; remove it or choose another --out")
    sibling = model_path.parent / "test_data_set_0"
    found = sibling if inputs is None and sibling.is_dir() else None
    sizes = _dims(dims)
    if sizes and (inputs or found):
        raise UsageError(
            f"--dim sizes generated inputs, and these come from {inputs or found}: leave --dim out"
        )
    chosen: dict[str, int] = {}
    feeds = _model_inputs(model, inputs or found, seed, found is None, sizes, chosen)
    if unknown := sorted(set(sizes) - set(chosen)):
        raise UsageError(
            f"--dim {unknown[0]}: the model's inputs have no such symbolic dim "
            f"(they have: {', '.join(sorted(chosen)) or 'none'})"
        )
    if chosen:
        said = ", ".join(f"{k}={v}" for k, v in chosen.items())
        click.echo(f"inputs drawn with {said} (choose with --dim NAME=N)", err=True)
    reference, backend = backends
    again = ["onnxfuzz", "reduce", str(dest / "model.onnx"), "--backend", reference]
    again += ["--inputs", str(dest / "test_data_set_0")]  # the values it failed on
    again += ["--backend", backend] + (["--match", match] if match is not None else [])
    smallest.dest, smallest.nodes, smallest.again = dest, len(model.graph.node), shlex.join(again)
    with BackendPool(backends, timeout=timeout) as pool, ExitStack() as limited:
        rep = Reproducer(pool, Target(backend, reference, match=pattern))
        first, outcomes = rep.run(model, feeds)
        if first.judgement.verdict == Verdict.INVALID_REFERENCE:
            # outputs the reference gives NaN or Inf in judge nothing, the others still do
            kept = _finite_outputs(model, outcomes[reference].outputs)
            if kept is not None and (again := rep.assess(kept[0], feeds)).signature is not None:
                model, first = kept[0], again
                click.echo(
                    f"outputs {', '.join(kept[1])} set aside: the reference {reference} gives "
                    "NaN or Inf there",
                    err=True,
                )
        said = first.judgement.message.strip().splitlines()
        why = said[-1] if said else ""
        why = why if len(why) <= 200 else "..." + why[-200:]  # ORT says why last
        if ir := _IR_TOO_NEW.search(first.judgement.message):
            # ONNX Runtime names the C++ loader's signature before it: the numbers say it
            why = (
                f"the model's IR version {ir[1]} is above the {ir[2]} this ONNX Runtime "
                f"loads: set model.ir_version = {ir[2]} and save it again (onnx 1.23 "
                "writes IR 14 by default)"
            )
        if first.judgement.verdict == Verdict.INVALID_REFERENCE:
            raise click.ClickException(_no_reference(model_path, reference, backend, why, feeds))
        if first.judgement.verdict == Verdict.MISMATCH and (
            fault := _faulted_reference(model, reference)
        ):
            # the campaign files no such finding (judge.attribution): nor is it reduced
            raise click.ClickException(
                f"{backend} departs from {reference} on {model_path}, where the ONNX "
                f"reference evaluator is itself wrong ({fault}): no values to reduce "
                "against; give another reference first (--backend ort, say)"
            )
        ref_out = outcomes.get(reference)
        if (
            first.judgement.verdict in (Verdict.CRASH, Verdict.TIMEOUT)
            and ref_out is not None
            and ref_out.status != Status.OK
            and ref_out.stage == first.judgement.stage
            and normalize(ref_out.message or "") == normalize(first.judgement.message)
        ):
            # a campaign files such a failure once, as the reference's (attribution._shared)
            raise click.ClickException(
                f"{model_path}: the reference {reference} fails the same way ({why}): the "
                f"failure is not {backend}'s alone; give a reference that runs the model "
                "first (--backend onnx-reference, say), or reduce it as the reference's "
                f"with --backend onnx-reference --backend {reference}"
            )
        if first.judgement.verdict == Verdict.UNSUPPORTED:
            raise click.ClickException(
                f"{model_path}: {backend} cannot run it, a missing feature rather than a "
                f"bug ({why}); nothing to reduce"
            )
        if first.signature is None or (pattern and not rep(model, feeds)):
            raise click.ClickException(
                f"{model_path} does not fail on {backend}"
                + (f" matching {match!r}" if match else "")
                + f": verdict {first.judgement.verdict}"
                + (f" ({why})" if why and first.judgement.verdict == Verdict.UNSUPPORTED else "")
                + "; nothing to reduce"
            )
        rep.target.signature = first.signature
        rep.last_message = first.judgement.message  # the node it names is tried alone first
        pair = (reference, backend)
        limit = _hang_limit(outcomes, pair, timeout)
        if limit is not None:
            # a hang's candidates, as a campaign's: each that still hangs costs seconds
            limited.enter_context(pool.time_limit(limit))
            click.echo(
                f"each candidate runs under {limit:g} s (a few times the reference's time): "
                f"one that still hangs costs that, not --timeout {timeout:g} s"
            )
        dynamic = False  # reduced with symbolic dims kept
        if symbolic := symbolic_inputs(model):
            static = with_static_inputs(model, feeds)
            if static is not None and rep(static, feeds):
                model = static
                click.echo(
                    f"reducing with the symbolic dims of {', '.join(symbolic)} fixed at the "
                    "inputs' sizes: the model fails the same way with them fixed"
                )
            else:
                dynamic = True
                click.echo(
                    "reducing with symbolic dims (the model with them fixed at the inputs' "
                    "sizes does not fail the same way)"
                )
        click.echo(f"reducing: {first.signature}")
        smallest.started = time.monotonic()
        r = reduce_model(model, feeds, rep, budget, smallest.kept)
        follows = None
        if first.judgement.verdict == Verdict.CRASH and len(r.model.graph.node) > 1:
            follows = find_precursor(r.model, r.inputs, rep, first.judgement.stage)
        # the reduction's last run showed the failure: its bundle (pool.infos: versions)
        bundle = None
        if r.final is not None:
            bundle = _bundle(model_path, model, r, pair, pool, rep, timeout)
            bundle.neighbours = _neighbours(r, rep, neighbours)
    if bundle is not None:
        if bundle.judgement.verdict == Verdict.MISMATCH and needed(list(backends), r.model):
            # two backends disagree: the ONNX reference evaluator's opinion, as a campaign
            # asks it (``judge.second_opinion``); the report turns to the reference where
            # the evaluator sides with the backend
            opinion = second_opinion(r.model, r.inputs, r.outcomes, rep.cfg, timeout)
            bundle.extra["second_opinion"] = opinion.as_dict()
        write_bundle_to(dest, bundle, follows)
    else:  # it did not fail again: a model to look at, not a reproducer that says FIXED
        from onnxfuzz.generate.corpus.testdata import write_test

        write_test(dest, r.model, r.inputs)
    click.echo(
        f"{r.before.nodes} -> {r.after.nodes} nodes ({' '.join(r.ops)}) in "
        f"{r.seconds:.1f} s, {r.runs} backend runs"
        + ("" if r.complete else " (budget spent before the fixed point)")
    )
    for name, st in r.stats().items():
        click.echo(
            f"  {name:<18} tried {st['tried']:>4}  kept {st['kept']:>3}  {st['seconds']:.2f} s"
        )
    click.echo(f"written to {dest}/model.onnx")
    if (dest / "repro.py").exists():
        plain = dest / "repro_plain.py"
        click.echo(
            f"its bundle: {dest}/issue.md to file, `python {dest}/repro.py` (exit 1 while "
            "it fails the same way)"
            + (f", `python {plain}` (the backend's own API)" if plain.exists() else "")
        )
    if bundle is not None and bundle.neighbours is not None and bundle.neighbours.tried:
        n = bundle.neighbours
        best = n.passing()
        click.echo(
            f"neighbours: {len(n.tried)} one-change variants run, "
            f"{sum(t.result == 'passes' for t in n.tried)} pass"
            + (f" (nearest: {best.variant.change}, in {dest}/passing)" if best else "")
            + f"; what the failure depends on: {dest}/issue.md"
        )
    if follows is not None:
        node = f" (node {follows.node})" if follows.node else ""
        click.echo(
            f"the crash follows a wrong result of {follows.op}{node}: {follows.message}; the "
            f"rest of the model runs on {reference}'s values there: fix {follows.op} first"
        )
    if dynamic and len(r.model.graph.node) > 1:
        # the passes that replace a node by an input or a constant need its static shape:
        # a bug that needs symbolic dims kept Relu -> Add where Add alone failed
        click.echo(
            "note: reduced with symbolic dims, so no node whose output has one was replaced "
            "by an input: a smaller model may fail the same way (try the ops alone)"
        )
    if r.final is None:
        click.echo(
            f"note: the reduced model did not fail on {backend} in its final run (the "
            "failure comes and goes, or depends on what ran before): check it before filing; "
            "no reproducer was written"
        )
