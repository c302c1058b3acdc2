"""The culprit inside the backend: which ONNX Runtime transformer or rewrite rule, which TVM
stage and pass, a bundle's bug comes from.

ONNX Runtime: where the bug vanishes with graph optimizations off, the lowest level that
shows it, then each transformer the verbose session log names (those that modified the
graph first), disabled alone (``disabled_optimizers``) until one makes the bug vanish; a
rule-based transformer is refined to its rewrite rule the same way. Only a name whose
disabling alone was seen to fix the bug is reported: that is the workaround line.

TVM: import (``from_onnx``), then ``tvm.compile`` under a pass instrument that records the
pass in flight, then the run: a compile failure is named by the pass it happened in (or
"codegen" when no pass was running: LLVM code generation after the pass pipeline); a wrong
result that opt level 0 does not show is bisected to the one pass whose disabling alone
fixes it.

torch (onnx2torch): conversion or run; in the run, the first converted node whose result
differs from the ONNX reference evaluator running that node alone on the same tensors (or
that raises). That op is then run in torch eager on the same tensors, called as the ONNX
operator defines it (``torch.clamp`` with bounds of the input's dtype for Clip, ...): right
there means onnx2torch's conversion is at fault (project "onnx2torch"); wrong or raising
the same way means torch's own op is (project "torch", filed with PyTorch). An op with no
eager form here is named by the module that failed, as before.

Everything runs in a child process (``sys.executable``), as a backend can crash or hang;
results go into ``meta.json`` as ``culprit`` and the bundle's report and plain reproducer
are written again with them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx

from onnxfuzz.backend import parse_backend
from onnxfuzz.backends.ort import RULES as ORT_REWRITE_RULES
from onnxfuzz.errors import BackendError
from onnxfuzz.generate.corpus.reference_limits import Limitation, reference_limits
from onnxfuzz.judge.second_opinion import as_reported
from onnxfuzz.store.issue import write_issue
from onnxfuzz.store.plain_repro import NAME, set_workaround

# ONNX Runtime's rewrite rules by the names disabled_optimizers takes (RewriteRule's name,
# not its class: "MatMul_BatchNormalization_Fusion", not MatmulBNFusion): the adapter's
# table, so the culprit search and the optimization feedback name the same rules.
ORT_RULES = tuple(ORT_REWRITE_RULES)


@dataclass
class Culprit:
    """Where inside the backend the bug is."""

    project: str  # the project to file with: "onnxruntime", "tvm"
    stage: str  # "optimizer", "kernel", "import", "lowering", "codegen", "run", ...
    component: str = ""  # the transformer, rewrite rule or pass; "" when none was named
    level: str = ""  # ORT: the lowest optimization level showing it; TVM: the opt level
    workaround: str = ""  # one line of the backend's API that avoids it
    disabled: list[str] = field(default_factory=list)  # ORT: the names the workaround disables
    tried: list[str] = field(default_factory=list)  # names disabled alone, in order
    note: str = ""  # why nothing narrower was named
    llvm: str = ""  # TVM: the LLVM it was built with
    # torch: the project is named without running the op in torch eager (no eager form of
    # it here): neither the conversion nor torch's op is shown at fault
    unchecked: bool = False
    # torch: what the converted module gave at the first wrong node ("a tuple of 1 where
    # the ONNX node has one output"): the headline's words for a shape that is a tuple
    gives: str = ""


# Every driver reads the bundle's inputs (the backend-test layout) the same way: this
# function is put before each driver's own code (``_child``).
_READ_INPUTS = r"""
def read_inputs(folder):
    import os, onnx
    from onnx import numpy_helper
    data, inputs, k = os.path.join(folder, "test_data_set_0"), {}, 0
    while os.path.exists(os.path.join(data, f"input_{k}.pb")):
        t = onnx.load_tensor(os.path.join(data, f"input_{k}.pb"))
        inputs[t.name] = numpy_helper.to_array(t)
        k += 1
    return inputs
"""

_ORT_DRIVER = r"""
import json, os, re, sys, zlib
import numpy as np, onnxruntime as ort

folder, provider = sys.argv[1], sys.argv[2]
tolerance, rules = json.loads(sys.argv[3]), json.loads(sys.argv[4])
# configurations that killed an earlier search's process, and where the session log goes
crashed, log_path = set(json.loads(sys.argv[5])), sys.argv[6]
model = open(os.path.join(folder, "model.onnx"), "rb").read()
inputs = read_inputs(folder)
L = ort.GraphOptimizationLevel

def session(level, disabled=(), verbose=False):
    o = ort.SessionOptions()
    o.graph_optimization_level = level
    o.intra_op_num_threads = 1
    o.log_severity_level = 0 if verbose else 4
    o.log_verbosity_level = 1 if verbose else 0
    return ort.InferenceSession(model, o, [provider], disabled_optimizers=list(disabled))

def say(key):
    # said before it is run: a configuration that kills this process is known to the
    # parent, which starts the search again with it counted as crashing
    print("RUN " + json.dumps(key), flush=True)

def run(level, disabled=()):
    key = f"{level}|{','.join(disabled)}"
    if key in crashed:
        return "the process died (a fresh one ran the rest of the search)"
    say(key)
    try:
        return session(level, disabled).run(None, inputs)
    except Exception as e:
        return f"{type(e).__name__}: {e}"

def session_log(disabled=()):
    # (transformers that modified the graph, transformers applied, the one in flight
    # where making the session failed or crashed: the last applied), in the session log's
    # order. Making the session is enough (a crash in the run would lose the log), and a
    # crash while making it leaves what was logged so far in the file.
    key = "log|" + ",".join(disabled)
    path = f"{log_path}.{zlib.crc32(key.encode())}"
    failed = key in crashed
    if not failed:
        say(key)
        fd = os.dup(2)
        with open(path, "wb") as f:
            os.dup2(f.fileno(), 2)
            try:
                session(L.ORT_ENABLE_ALL, disabled, verbose=True)
            except Exception:
                failed = True
            finally:
                os.dup2(fd, 2)
    log = open(path, "rb").read().decode(errors="replace") if os.path.exists(path) else ""
    applied = re.findall(r"Applying graph transformer (\S+)", log)
    return (re.findall(r"GraphTransformer (\S+) modified: 1", log), applied,
            applied[-1] if failed and applied else None)

def same(a, b):
    if isinstance(a, str) or isinstance(b, str) or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        atol, rtol = tolerance.get(str(y.dtype), (0, 0))
        ok = np.isclose(x, y, rtol, atol, equal_nan=True) if atol else (x == y) | (x != x)
        if not np.all(ok):
            return False
    return True

base = run(L.ORT_DISABLE_ALL)
def bug(level, disabled=()):
    return not same(run(level, disabled), base)

out = {"tried": []}
if isinstance(base, str):
    out["note"] = "it fails with optimizations off too: " + base[:200]
elif not bug(L.ORT_ENABLE_ALL):
    out["note"] = ("ORT_ENABLE_ALL and ORT_DISABLE_ALL give the same outputs: no "
                   "optimizer is involved")
else:
    out["level"] = next(n for n in ("ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED",
                                    "ORT_ENABLE_ALL") if bug(getattr(L, n)))
    modified, applied, in_flight = session_log()
    # Where making the session failed or killed the process, the transformer in flight
    # then goes first: each one tried before it that crashes too costs a fresh process,
    # and an abort in QDQFinalCleanupTransformer, near the log's end, was never reached.
    for name in dict.fromkeys([*([in_flight] if in_flight else []), *modified, *applied]):
        out["tried"].append(name)
        if not bug(L.ORT_ENABLE_ALL, [name]):
            out["transformer"] = name
            break
    else:
        # Several transformers may each make the bug (each inserts the same wrong node,
        # or the session fails in the next one): the log is read again with those found
        # disabled and the one in flight where the session failed, else the last one that
        # modified the graph, is added, until the bug vanishes; then each is dropped that
        # is not needed.
        together = []
        for _ in range(8):
            modified, _, in_flight = session_log(together)
            more = [n for n in [*modified, in_flight] if n and n not in together]
            if not more:
                break
            together.append(more[-1])
            if not bug(L.ORT_ENABLE_ALL, together):
                for name in list(together):
                    rest = [n for n in together if n != name]
                    if rest and not bug(L.ORT_ENABLE_ALL, rest):
                        together = rest
                if len(together) > 1:
                    out["together"] = together
                break
    if "RuleBasedTransformer" in out.get("transformer", ""):
        for name in rules:
            out["tried"].append(name)
            if not bug(L.ORT_ENABLE_ALL, [name]):
                out["rule"] = name
                break
print("CULPRIT " + json.dumps(out))
"""


_TVM_DRIVER = r"""
import contextlib, io, json, os, sys, time, warnings
os.environ.setdefault("TVM_NUM_THREADS", "1")
import numpy as np, onnx, tvm
from onnx import numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

folder, target, level = sys.argv[1], sys.argv[2], int(sys.argv[3])
tolerance, budget = json.loads(sys.argv[4]), float(sys.argv[5])
start = time.monotonic()
model = onnx.load(os.path.join(folder, "model.onnx"))
data = os.path.join(folder, "test_data_set_0")
inputs = read_inputs(folder)
args = [inputs[i.name] for i in model.graph.input if i.name in inputs]
try:
    llvm = f"{tvm.target.codegen.llvm_version_major()} (major)"
except Exception:
    llvm = ""
out = {"tried": [], "llvm": llvm}

def say(where):
    # where the search is, before it goes there: a crash that kills this process (a
    # segfault or an LLVM abort) is placed by the parent from the last of these
    print("RUN " + json.dumps(where), flush=True)

@tvm.instrument.pass_instrument
class InFlight:
    def __init__(self, saying):
        self.stack, self.saying = [], saying
    def run_before_pass(self, mod, info):
        self.stack.append(info.name)
        if self.saying:
            say("pass:" + info.name)
    def run_after_pass(self, mod, info):
        self.stack.pop()
        if self.saying:
            say("pass:" + self.stack[-1] if self.stack else "codegen")

def compile_(mod, opt_level, disabled=(), saying=False):
    rec = InFlight(saying)
    ctx = tvm.transform.PassContext(opt_level=opt_level, instruments=[rec],
                                    disabled_pass=list(disabled))
    try:
        with tvm.target.Target(target), ctx:
            return tvm.compile(mod, target=target), None
    except Exception as e:
        return None, (rec.stack[-1] if rec.stack else "", f"{type(e).__name__}: {e}")

def run(ex):
    dev = tvm.cpu() if target == "llvm" else tvm.cuda()
    result = relax.VirtualMachine(ex, dev)["main"](*[tvm.runtime.tensor(a, dev) for a in args])
    result = list(result) if len(model.graph.output) > 1 else [result]
    return [r.numpy() if hasattr(r, "numpy") else np.asarray(r) for r in result]

def expected():
    files = [os.path.join(data, f"output_{k}.pb") for k in range(len(model.graph.output))]
    if all(os.path.exists(f) for f in files):
        return [numpy_helper.to_array(onnx.load_tensor(f)) for f in files]
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model).run(None, inputs)

def same(a, b):
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        atol, rtol = tolerance.get(str(y.dtype), (0, 0))
        if not np.all(np.isclose(x, y, rtol, atol, equal_nan=True) if atol else x == y):
            return False
    return len(a) == len(b)

def passes(mod, opt_level):
    @tvm.instrument.pass_instrument
    class Seen:
        def __init__(self):
            self.names = []
        def run_before_pass(self, mod, info):
            self.names.append(info.name)
    seen = Seen()
    with tvm.target.Target(target), tvm.transform.PassContext(opt_level=opt_level,
                                                              instruments=[seen]):
        tvm.compile(mod, target=target)
    return list(dict.fromkeys(seen.names))

printed = io.StringIO()
say("import")
try:
    with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
        warnings.simplefilter("ignore")
        mod = from_onnx(model, keep_params_in_input=False)
except Exception as e:
    out["stage"] = "import"
    said = [ln for ln in printed.getvalue().splitlines() if "Error converting operator" in ln]
    if said:
        out["component"] = said[0].split("Error converting operator", 1)[1].split(",")[0].strip()
    out["note"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
else:
    say("codegen")  # until the first pass starts
    ex, failed = compile_(mod, level, saying=True)
    if failed:
        name, why = failed
        out["stage"] = ("lowering" if name.startswith(("tir", "tirx")) else "relax pass"
                        ) if name else "codegen"
        out["component"] = name
        out["note"] = why.splitlines()[0][:200]
    else:
        want = expected()
        say("run")
        if same(run(ex), want):
            out["stage"], out["note"] = "run", "it does not show in this process"
        else:
            ex0, failed0 = compile_(mod, 0)
            if failed0 or not same(run(ex0), want):
                out["stage"] = "import or operator lowering"
                out["note"] = "it shows at opt_level 0 too"
            else:
                out["stage"] = "optimization"
                for name in passes(mod, level):
                    if time.monotonic() - start > budget:
                        out["note"] = "the search ran out of time"
                        break
                    out["tried"].append(name)
                    exn, failedn = compile_(mod, level, [name])
                    if failedn is None and same(run(exn), want):
                        out["component"] = name
                        break
print("CULPRIT " + json.dumps(out))
"""


_TORCH_DRIVER = r"""
import functools, json, os, sys
import numpy as np, onnx, onnx2torch, torch
from onnx import numpy_helper

folder, tolerance = sys.argv[1], json.loads(sys.argv[2])
# ops the ONNX reference evaluator is documented to get wrong on this model: not checked
faulty = set(json.loads(sys.argv[3])) if len(sys.argv) > 3 else set()
model = onnx.load(os.path.join(folder, "model.onnx"))
inputs = read_inputs(folder)
args = [torch.from_numpy(inputs[i.name].copy()) for i in model.graph.input if i.name in inputs]
declared = {}
for vi in onnx.shape_inference.infer_shapes(model).graph.value_info:
    if vi.type.tensor_type.elem_type:
        declared[vi.name] = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
for vi in model.graph.output:
    declared[vi.name] = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
out = {"tried": []}
consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
torch_vals = {}  # ONNX tensor name -> the value the converted module computed for it
F = torch.nn.functional

def _tensor(a, like):
    return torch.tensor(a, dtype=like.dtype) if a is not None else None

def _div(a, b):
    return torch.div(a, b, rounding_mode="trunc") if not a.is_floating_point() else a / b

UNARY = {
    "Abs": "abs", "Neg": "neg", "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh",
    "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Reciprocal": "reciprocal",
    "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign", "Sin": "sin",
    "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan",
    "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh",
    "Atanh": "atanh", "Erf": "erf", "Not": "logical_not", "IsNaN": "isnan"}
# ONNX op -> torch eager call computing what the operator defines, on the
# node's own input tensors: the torch side of "conversion or runtime"
EAGER = {
    **{op: (lambda f: lambda a, at: f(a[0]))(getattr(torch, fn)) for op, fn in UNARY.items()},
    "Add": lambda a, at: a[0] + a[1], "Sub": lambda a, at: a[0] - a[1],
    "Mul": lambda a, at: a[0] * a[1], "Div": lambda a, at: _div(a[0], a[1]),
    "Pow": lambda a, at: torch.pow(a[0], a[1]).to(a[0].dtype),
    "Max": lambda a, at: functools.reduce(torch.maximum, a),
    "Min": lambda a, at: functools.reduce(torch.minimum, a),
    "Equal": lambda a, at: torch.eq(a[0], a[1]), "Less": lambda a, at: torch.lt(a[0], a[1]),
    "Greater": lambda a, at: torch.gt(a[0], a[1]),
    "LessOrEqual": lambda a, at: torch.le(a[0], a[1]),
    "GreaterOrEqual": lambda a, at: torch.ge(a[0], a[1]),
    "And": lambda a, at: torch.logical_and(a[0], a[1]),
    "Or": lambda a, at: torch.logical_or(a[0], a[1]),
    "Xor": lambda a, at: torch.logical_xor(a[0], a[1]),
    "Mod": lambda a, at: (torch.fmod if at.get("fmod") else torch.remainder)(a[0], a[1]),
    "Softplus": lambda a, at: F.softplus(a[0]), "Softsign": lambda a, at: F.softsign(a[0]),
    "LeakyRelu": lambda a, at: F.leaky_relu(a[0], at.get("alpha", 0.01)),
    "Elu": lambda a, at: F.elu(a[0], at.get("alpha", 1.0)),
    "Clip": lambda a, at: torch.clamp(a[0], *[_tensor(
        None if v is None else v.item(), a[0]) for v in (a + [None, None])[1:3]]),
    "Cast": lambda a, at: a[0].to(torch.from_numpy(np.empty(0, dtype=
        onnx.helper.tensor_dtype_to_np_dtype(at["to"]))).dtype),
    "Einsum": lambda a, at: torch.einsum(at["equation"].decode() if isinstance(
        at["equation"], bytes) else at["equation"], *a),
    "InstanceNormalization": lambda a, at: F.instance_norm(
        a[0], weight=a[1], bias=a[2], eps=at.get("epsilon", 1e-5)),
}
CALLS = {"Clip": "torch.clamp(x, min, max) with min and max as tensors of x's dtype",
         "Cast": "x.to(dtype)", "Div": "torch.div", "Pow": "torch.pow(x, y).to(x.dtype)",
         "Max": "torch.maximum", "Min": "torch.minimum", "Mod": "torch.fmod/torch.remainder",
         "Add": "x + y", "Sub": "x - y", "Mul": "x * y", "Equal": "torch.eq",
         "Less": "torch.lt", "Greater": "torch.gt", "LessOrEqual": "torch.le",
         "GreaterOrEqual": "torch.ge", "And": "torch.logical_and",
         "Or": "torch.logical_or", "Xor": "torch.logical_xor",
         "Softplus": "F.softplus", "Softsign": "F.softsign",
         "LeakyRelu": "F.leaky_relu", "Elu": "F.elu", "Einsum": "torch.einsum",
         "InstanceNormalization": "F.instance_norm(x, weight=scale, bias=B, eps=epsilon)",
         **{op: f"torch.{fn}" for op, fn in UNARY.items()}}

def numpys(v):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return [x.numpy() if x.dtype != torch.bfloat16 else None for x in v]

def agree(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is None or y is None:
            return False
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape:
            return False
        atol, rtol = tolerance.get(str(y.dtype), (0, 0))
        if x.dtype.kind in "fc":
            ok = np.isclose(x, y, rtol, atol, equal_nan=True)
        else:
            ok = x == y
        if not np.all(ok):
            return False
    return True

def show(v):
    if isinstance(v, str):
        return v
    parts = []
    for x in v:
        x = np.asarray(x)
        parts.append(str(x.dtype) + str(list(x.shape)) + " " + np.array2string(
            x.ravel()[:6], precision=6))
    return ", ".join(parts)

def unchecked(fx_node, onnx_node):
    # a node this check could not compare: "every node computes as the evaluator does"
    # would not hold (a NonMaxSuppression the evaluator raised on was called right); its
    # module is where a fault no checked node shows must be
    out.setdefault("unchecked_nodes", []).append(onnx_node.op_type)
    out.setdefault("unchecked_components", []).append(describe(w.module, fx_node))

def node_check(fx_node, onnx_node, result):
    # the ONNX op alone, on the tensors the converted module saw: the reference
    # evaluator (what ONNX defines), the converted module (result) and torch eager
    from onnx.reference import ReferenceEvaluator
    if onnx_node.op_type in faulty:
        # the evaluator is known wrong here: agreeing with it shows nothing (a Slice with a
        # negative step onnx2torch got wrong as it does was "no part of onnx2torch is wrong")
        return unchecked(fx_node, onnx_node)
    vals = []
    for name in onnx_node.input:
        if not name:
            vals.append(None)
        elif name in torch_vals:
            vals.append(torch_vals[name])
        elif name in consts:
            vals.append(consts[name])
        else:
            return unchecked(fx_node, onnx_node)  # a value this check cannot see
    feeds = {n: v for n, v in zip(onnx_node.input, vals) if n and v is not None}
    if any(v is None for n, v in zip(onnx_node.input, vals) if n) or \
            any(getattr(v, "dtype", None) is None for v in feeds.values()):
        return unchecked(fx_node, onnx_node)
    try:
        info = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(
            v.dtype), v.shape) for n, v in feeds.items()]
        outs = [onnx.helper.make_tensor_value_info(o, 0, None) for o in onnx_node.output]
        one = onnx.helper.make_model(onnx.helper.make_graph([onnx_node], "one", info, outs),
                                     opset_imports=model.opset_import)
        want = ReferenceEvaluator(one).run(None, feeds)
    except Exception:
        return unchecked(fx_node, onnx_node)  # the evaluator cannot run it: not shown right
    got = result if isinstance(result, str) else numpys(result)
    if isinstance(result, (tuple, list)) and len(onnx_node.output) == 1:
        got = f"a tuple of {len(result)} where the ONNX node has one output"  # wrong as such
    if not isinstance(got, str) and agree(got, want):
        return
    out["node"] = onnx_node.op_type
    out["component"] = out["node_component"] = describe(w.module, fx_node)
    out["module_gives"], out["reference_gives"] = show(got), show(want)
    eager = EAGER.get(onnx_node.op_type)
    if eager is None:
        out["eager"] = (f"{onnx_node.op_type} is not among the ops onnxfuzz runs in torch "
                        "eager to compare against")
        return
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in onnx_node.attribute}
    call = CALLS[onnx_node.op_type]
    try:
        with torch.no_grad():
            e = numpys(eager([torch.from_numpy(np.array(v)) if v is not None else None
                              for v in vals], attrs))
    except ValueError as ex:
        # torch's own argument check, there on purpose (InstanceNorm refuses one spatial
        # element: pytorch#19250 asked for it, pytorch#45687 was closed): torch's op takes
        # less than ONNX's, and mapping the ONNX op onto it is the conversion's fault
        out["eager_gives"] = f"ValueError: {str(ex).splitlines()[0][:160]}"
        out["verdict"], out["refused"] = "onnx2torch", True
    except Exception as ex:
        out["eager_gives"] = f"{type(ex).__name__}: {str(ex).splitlines()[0][:160]}"
        out["verdict"] = "torch"
    else:
        out["eager_gives"] = show(e)
        out["verdict"] = "onnx2torch" if agree(e, want) else "torch"
    out["eager"] = call

def describe(gm, node):
    target = getattr(gm, node.target, None) if node.op == "call_module" else node.target
    cls = type(target)
    where = f"{cls.__module__}.{cls.__qualname__}" if node.op == "call_module" else str(target)
    return where

try:
    gm = onnx2torch.convert(onnx.load(os.path.join(folder, "model.onnx")))
except Exception as e:
    out["stage"], out["project"] = "conversion", "onnx2torch"
    out["note"] = f"onnx2torch.convert raised {type(e).__name__}: {str(e).splitlines()[0][:200]}"
else:
    graph_inputs = [i.name for i in model.graph.input if i.name not in consts]

    class Watch(torch.fx.Interpreter):
        def run_node(self, node):
            self.current = node
            onnx_node = by_fx.get(node.name)
            try:
                result = super().run_node(node)
            except Exception as e:
                if onnx_node is not None and "node" not in out:
                    node_check(node, onnx_node, f"{type(e).__name__}: {str(e)[:160]}")
                raise
            if node.op == "placeholder" and len(torch_vals) < len(graph_inputs):
                torch_vals[graph_inputs[len(torch_vals)]] = result.numpy()
            if onnx_node is not None and "node" not in out and node.op in (
                    "call_module", "call_function"):
                node_check(node, onnx_node, result)
            if onnx_node is not None and isinstance(result, torch.Tensor) and \
                    result.dtype != torch.bfloat16:
                torch_vals[onnx_node.output[0]] = result.numpy()
            elif onnx_node is not None and isinstance(result, (tuple, list)) and \
                    len(result) == len(onnx_node.output) > 1:
                for name, r in zip(onnx_node.output, result):
                    if isinstance(r, torch.Tensor) and r.dtype != torch.bfloat16:
                        torch_vals[name] = r.numpy()
            if node.op in ("call_module", "call_function") and onnx_node is not None \
                    and isinstance(result, torch.Tensor) and "dtype" not in out:
                want = declared.get(onnx_node.output[0])
                got = np.dtype(str(result.dtype).removeprefix("torch.")) \
                    if result.dtype != torch.bfloat16 else None
                if want is not None and got is not None and got != np.dtype(want):
                    out["dtype"] = f"{onnx_node.op_type} node {onnx_node.name}: {got}, the ONNX " \
                                   f"graph says {np.dtype(want)}"
                    out["component"] = describe(self.module, node)
            return result
    # fx node -> ONNX node: one call per ONNX node in order (onnx2torch converts each node
    # to one module); else by name (a named node keeps its name, sanitized)
    calls = [n for n in gm.graph.nodes if n.op in ("call_module", "call_function")]
    if len(calls) == len(model.graph.node):
        by_fx = {c.name: n for c, n in zip(calls, model.graph.node)}
    else:
        by_fx = {n.name.replace("/", "_").replace(".", "_"): n for n in model.graph.node}
    w = Watch(gm)
    try:
        with torch.no_grad():
            w.run(*args)
        out["stage"] = "run"
    except Exception as e:
        node = w.current
        out["stage"] = "run"
        out["component"] = describe(gm, node)
        out["note"] = (f"node {node.name} ({out['component']}) raised {type(e).__name__}: "
                       f"{str(e).splitlines()[0][:160]}")
    if "dtype" in out:
        out["note"] = "first wrong element type: " + out["dtype"]
    if out.get("node"):  # the first node that went wrong, not a later one it made fail
        out["component"] = out["node_component"]
    comp = out.get("component", "")
    # Without the op run in torch eager, nothing shows whose fault it is: the converter is
    # asked first (it chose the torch call and its arguments: NonMaxSuppression's boxes in
    # the corner order ONNX allows and torchvision.ops.nms does not), said as unchecked.
    out["project"], out["unchecked"] = "onnx2torch", True
    if out.get("verdict"):  # the op run in torch eager on the same tensors decided
        out["unchecked"] = False
        out["project"] = out["verdict"]
        who = ("so the conversion is at fault" if out["verdict"] == "onnx2torch"
               else "so torch's own op is at fault")
        if out.get("refused"):
            who = ("an argument check torch makes on purpose: torch's op does not take what "
                   "ONNX's op does, so the conversion, which maps one onto the other, is at "
                   "fault")
        out["note"] = (f"{out['node']} on the same tensors: the converted module "
                       f"({comp}) gives {out['module_gives']}; the ONNX reference evaluator "
                       f"gives {out['reference_gives']}; torch eager {out['eager']} gives "
                       f"{out['eager_gives']}, {who}")
    elif out.get("eager") and out.get("node"):
        out["note"] = (out.get("note", "") + f" (first wrong node: {out['node']}, where the "
                       f"converted module gives {out['module_gives']} and the ONNX reference "
                       f"evaluator {out['reference_gives']}; {out['eager']}; project named by "
                       "the module that failed)").strip()
print("CULPRIT " + json.dumps(out))
"""


def reference_limits_of(path: Path) -> list[Limitation]:
    """The ONNX reference evaluator's documented faults that apply to the model at ``path``
    (``judge.attribution``); none where it cannot be read or told."""
    try:
        return list(reference_limits(onnx.load(str(path))))
    except Exception:  # noqa: BLE001 - a model the check cannot read: nothing known
        return []


def _child(args: list[str], timeout: float) -> dict:
    """Run a driver in a child process; its last ``CULPRIT {...}`` line, or a note."""
    try:
        r = subprocess.run(
            [sys.executable, "-c", _READ_INPUTS + args[0], *args[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"note": f"the culprit search ran past {timeout:.0f} s", "failed": True}
    for line in reversed(r.stdout.splitlines()):
        if line.startswith("CULPRIT "):
            return json.loads(line[len("CULPRIT ") :])
    tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
    note = f"the culprit search died (exit {r.returncode}): {tail[:200]}"
    found: dict = {"note": note, "failed": True}
    ran = [ln[len("RUN ") :] for ln in r.stdout.splitlines() if ln.startswith("RUN ")]
    if r.returncode != 0 and ran:  # the configuration in flight when it died
        found["died_in"] = json.loads(ran[-1])
    return found


# Fresh processes one ORT culprit search may start after configurations that crashed it
# (each is a model run that kills the process: one per level and transformer tried).
MAX_RESTARTS = 40


def _ort_search(
    folder: Path, provider: str, tolerance: dict[str, tuple[float, float]], timeout: float
) -> dict:
    """The ORT driver's findings. A bug that kills the process (a segfault in a fused
    kernel) would end the search at its first run with the bug on: the configuration it
    died in is counted as showing the bug and the search starts again in a fresh process,
    so a crash is attributed like any other bug."""
    crashed: list[str] = []
    deadline = time.monotonic() + timeout
    args = [_ORT_DRIVER, str(folder), provider, json.dumps(tolerance), json.dumps(ORT_RULES)]
    with tempfile.TemporaryDirectory() as tmp:
        log = str(Path(tmp) / "session.log")
        while True:
            left = deadline - time.monotonic()
            if left <= 1:
                return {"note": f"the culprit search ran past {timeout:.0f} s", "failed": True}
            found = _child([*args, json.dumps(crashed), log], left)
            died = found.get("died_in")
            if died is None or died in crashed or len(crashed) >= MAX_RESTARTS:
                return found
            crashed.append(died)


def ort_culprit(
    folder: Path, label: str, tolerance: dict[str, tuple[float, float]], timeout: float = 120.0
) -> Culprit:
    """The ORT transformer (or rewrite rule) behind the bug of the model in ``folder``."""
    provider = "CUDAExecutionProvider" if label == "ort-cuda" else "CPUExecutionProvider"
    found = _ort_search(folder, provider, tolerance, timeout)
    name = found.get("rule") or found.get("transformer") or ""
    if found.get("failed"):  # no configuration was told apart: no stage is known
        return Culprit("onnxruntime", "unknown", note=found.get("note", ""))
    if not found.get("level"):  # not an optimizer bug
        return Culprit("onnxruntime", "kernel", note=found.get("note", ""))
    c = Culprit("onnxruntime", "optimizer", name, found["level"], tried=found.get("tried", []))
    c.disabled = [name] if name else found.get("together", [])
    if len(c.disabled) > 1:
        c.component = " + ".join(c.disabled)
        c.note = "no one of them disabled alone makes it vanish; all of them disabled do"
    if c.disabled:
        c.workaround = f"ort.InferenceSession(path, options, disabled_optimizers={c.disabled!r})"
    else:
        c.note = "no single transformer or rewrite rule disabled alone makes it vanish"
    return c


def tvm_culprit(
    folder: Path,
    options: dict[str, str],
    tolerance: dict[str, tuple[float, float]],
    timeout: float = 120.0,
) -> Culprit:
    """The TVM stage (and pass, where one is named) behind the bug in ``folder``."""
    target, level = options.get("target", "llvm"), options.get("opt_level", "3")
    found = _child(
        [_TVM_DRIVER, str(folder), target, level, json.dumps(tolerance), str(timeout * 0.8)],
        timeout,
    )
    stage, component = found.get("stage", "unknown"), found.get("component", "")
    died = found.get("died_in")
    if died:  # the crash killed the search: where it was is where the bug is
        if died.startswith("pass:"):
            component = died[len("pass:") :]
            stage = "lowering" if component.startswith(("tir", "tirx")) else "relax pass"
        else:
            stage = died
        found["note"] = f"{found.get('note', '')}; it was in {died}"
    c = Culprit("tvm", stage, component, f"opt_level={level}")
    c.tried, c.note, c.llvm = found.get("tried", []), found.get("note", ""), found.get("llvm", "")
    if stage == "optimization" and c.component:
        c.workaround = (
            f"tvm.transform.PassContext(opt_level={level}, disabled_pass=[{c.component!r}])"
        )
    elif stage == "optimization":
        c.workaround = "tvm.transform.PassContext(opt_level=0)"
    return c


def find_culprit(bundle: Path, timeout: float = 120.0) -> Culprit | None:
    """The culprit of a bundle's bug (its reduced model where there is one), for the
    backends this module knows; None for the others, and for a bug no single run shows."""
    # where the evaluator sides with the backend, the comparison's reference is searched
    meta = as_reported(json.loads((bundle / "meta.json").read_text()))
    folder = bundle / "reduced" if (bundle / "reduced" / "model.onnx").exists() else bundle
    if meta.get("stage") == "rerun" or meta.get("kind") == "input":
        # The searches below compare one run per configuration: a second run's bug, or an
        # input written in place, never shows there, and "it does not show" would mislead.
        return None
    try:
        target = parse_backend(meta["backend"]).target
    except BackendError:
        return None
    tolerance = {k: tuple(v) for k, v in meta.get("tolerance", {}).items()}
    if target in ("ort", "ort-cuda"):
        return ort_culprit(folder, target, tolerance, timeout)
    if target == "tvm":
        options = dict(parse_backend(meta["backend"]).options)
        return tvm_culprit(folder, options, tolerance, timeout)
    if target in ("torch", "torch-compile"):
        faults = [f.op for f in reference_limits_of(folder / "model.onnx")]
        found = _child(
            [_TORCH_DRIVER, str(folder), json.dumps(tolerance), json.dumps(faults)], timeout
        )
        c = Culprit(found.get("project", "onnx2torch"), found.get("stage", "unknown"))
        c.component, c.note = found.get("component", ""), found.get("note", "")
        c.gives = found.get("module_gives", "") if found.get("node") else ""
        c.unchecked = bool(found.get("unchecked")) and c.stage != "conversion"
        clean = c.stage == "run" and not found.get("node") and not c.note
        if target == "torch" and clean and found.get("unchecked_nodes"):
            # Every node checked is right: a fault of onnx2torch's model is in a node that
            # was not, whose module is the converter's (a 1-node NonMaxSuppression, only
            # onnx2torch's nms module, said "Stage: unknown" and named no project)
            ops = ", ".join(dict.fromkeys(found["unchecked_nodes"]))
            modules = list(dict.fromkeys(found.get("unchecked_components", [])))
            c = Culprit("onnx2torch", "run", " or ".join(modules), unchecked=True)
            c.note = (
                "onnx2torch's model computes every node the ONNX reference evaluator could "
                f"check as it does; it could not check {ops}: a fault of the converted model "
                "is in one of those"
            )
            return c
        if clean and found.get("unchecked_nodes"):
            ops = ", ".join(dict.fromkeys(found["unchecked_nodes"]))
            return Culprit(
                "",
                "unknown",
                note="onnx2torch's model computes every node the ONNX reference evaluator "
                f"could check as it does; it could not check {ops}, so where the fault is "
                "was not found",
            )
        if target == "torch" and clean and not found.get("failed"):
            # every node as the ONNX reference evaluator computes it: nothing here blames
            # onnx2torch or torch (an int64 Mod that ORT, the reference, got wrong was filed
            # "File with onnx2torch first")
            return Culprit(
                "",
                "unknown",
                note="onnx2torch's model computes every node as the ONNX reference evaluator "
                "does on these inputs: no part of onnx2torch or torch is shown wrong",
            )
        if target == "torch-compile" and not found.get("failed"):
            # onnx2torch's eager model, node by node: where it is right, torch.compile is
            # at fault; where not, the bug is there without torch.compile too (a
            # GatherElements of negative indices was filed as a compiled kernel's assert)
            if clean:
                return Culprit(
                    "torch-compile",
                    "compile",
                    note="onnx2torch's eager model computes every node right: the fault "
                    "is torch.compile's (dynamo or inductor)",
                )
            c.note = (
                "it shows without torch.compile too, in onnx2torch's eager model: " + c.note
            ).strip()
        return c
    return None


# Backends whose culprit search takes well under a second (a child process that imports
# only onnxruntime): the campaign searches these as it files a bundle. TVM's and torch's
# import alone takes seconds per bundle: ``onnxfuzz triage`` searches those, once.
CHEAP = ("ort", "ort-cuda")


def annotate(bundle: Path, timeout: float = 120.0, cheap_only: bool = False) -> Culprit | None:
    """Find the culprit and record it: meta.json's ``culprit``, the plain reproducer's
    workaround comment, and issue.md written again. None (and nothing written) for a
    backend this module does not know, one already searched, or with ``cheap_only`` one
    not in ``CHEAP``."""
    path = bundle / "meta.json"
    meta = json.loads(path.read_text())
    if "culprit" in meta:
        return None
    try:
        target = parse_backend(as_reported(meta)["backend"]).target
    except BackendError:
        return None
    if cheap_only and target not in CHEAP:
        return None
    culprit = find_culprit(bundle, timeout)
    if culprit is None:
        return None
    meta = json.loads(path.read_text())
    meta["culprit"] = asdict(culprit)
    path.write_text(json.dumps(meta, indent=1))
    if culprit.workaround and culprit.project == "onnxruntime":
        for folder in (bundle, bundle / "reduced"):
            if (folder / NAME).exists():
                set_workaround(folder / NAME, culprit.disabled)
    write_issue(bundle)
    return culprit
