"""Signatures keep one bug in one bundle whatever the incidental text around it; a crash's
signature names where it died (the innermost frames of the crashing thread), normalized."""

from onnxfuzz.execute.crashdump import FRAMES_HEAD, SHOWN, TAIL_HEAD, dump_of, evidence, read_dump
from onnxfuzz.execute.sandbox import Stage
from onnxfuzz.judge.oracle import Judgement, Verdict
from onnxfuzz.judge.signature import (
    earlier_forms,
    family,
    family_id,
    normalize,
    root_signature,
    signature,
)


def test_colors_timestamps_addresses_and_paths_do_not_split_a_bug() -> None:
    a = "\x1b[1;31m2026-11-22 23:14:13.123 [E:npu] /opt/npu/src/fuse.cc:120 null at 0x7f3a\x1b[0m"
    b = "2026-11-23 01:02:03.9 [E:npu] /home/u/npu/src/fuse.cc:98 null at 0x55aa12"
    assert normalize(a) == normalize(b)
    assert normalize(a) != normalize("2026-11-22 23:14:13 [E:npu] /x/fuse.cc:1 overflow at 0x1")


def _crash_sig(trace: str, message: str = "killed by signal SIGSEGV") -> str:
    v = Judgement(Verdict.CRASH, Stage.RUN, message=message)
    return signature("npu", v, trace=evidence(trace))


# faulthandler with all_threads=True: another thread's stack first, then the crashing one.
FAULTHANDLER = """\
[I:npu] compiling {n} nodes
free(): invalid pointer
Fatal Python error: Aborted

Thread 0x{tid:016x} (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "{root}/npu/pool.py", line {n} in _worker_loop

Current thread 0x00007f4bcb5c4b80 (most recent call first):
  File "{root}/npu/kernels.py", line {n} in {func}
  File "{root}/backends/npu.py", line 88 in run
  File "{root}/onnxfuzz/execute/sandbox.py", line 156 in serve
  File "{root}/onnxfuzz/execute/worker.py", line 11 in <module>
  File "<frozen runpy>", line 88 in _run_code

Extension modules: numpy._core._multiarray_umath, npu._C (total: {n})
"""


def _fh(func: str = "_pack_weights", n: int = 3, root: str = "/home/a", tid: int = 1) -> str:
    return FAULTHANDLER.format(func=func, n=n, root=root, tid=tid)


def test_faulthandler_gives_the_crashing_threads_frames_and_the_last_words() -> None:
    d = read_dump(_fh())
    assert d.python == ("_pack_weights (kernels.py)", "run (npu.py)")  # up to the worker loop
    assert d.native == () and d.frames == d.python
    # the log line before it and glibc's message are the library's last words; the dump's
    # own lines (the signal's name, the extension modules) are not
    assert d.note == ("[I:npu] compiling 3 nodes", "free(): invalid pointer")


def test_one_crash_site_is_one_signature_whatever_the_test_paths_lines_or_threads() -> None:
    a = _crash_sig(_fh(n=3, root="/home/a", tid=1), "killed by signal SIGABRT")
    b = _crash_sig(_fh(n=17, root="/srv/ci/b", tid=99), "killed by signal SIGABRT")
    assert a == b
    assert "at _pack_weights (kernels.py) < run (npu.py)" in a
    assert "free(): invalid pointer" in a
    assert "line" not in a and "0x" not in a and "/home" not in a
    other = _crash_sig(_fh(func="_fuse_kernels"), "killed by signal SIGABRT")
    assert other != a and "_fuse_kernels (kernels.py)" in other


# TVM FFI's own SIGSEGV handler (as printed by apache-tvm-ffi), innermost first, after
# faulthandler (which re-raised the signal: the handler's raise frames come first).
TVM_FFI = """\
Fatal Python error: Segmentation fault

Current thread 0x00007f34453bbb80 (most recent call first):
  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
  File "/tmp/npu.py", line {n} in _fuse_kernels
  File "/tmp/npu.py", line 10 in run

!!!!!!! Segfault encountered !!!!!!!
  File "./signal/../sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c", line 0, in 0x{a:x}
  File "./nptl/pthread_kill.c", line 44, in __pthread_kill_implementation
  File "../sysdeps/posix/raise.c", line 26, in __GI_raise
  File "./signal/../sysdeps/unix/sysv/linux/x86_64/libc_sigaction.c", line 0, in 0x{a:x}
  File "{build}/src/relax/fuse.cc", line {n}, in {visit}
  File "{build}/src/relax/fuse.cc", line {n}, in {visit}
  File "{build}/include/tvm/ffi/function.h", line 88, in {typed}
  File "<unknown>", line 0, in 0x{a:x}
  File "{build}/src/ir/transform.cc", line 300, in {call}
"""


def _tvm_ffi(n: int, a: int, build: str) -> str:
    return TVM_FFI.format(
        n=n,
        a=a,
        build=build,
        visit="tvm::relax::FuseMutator::VisitExpr_(tvm::relax::CallNode const*)",
        typed="tvm::ffi::Function::FromTyped<tvm::IRModule (tvm::IRModule)>::"
        "{lambda(int)#1}::operator()(int) const",
        call="tvm::transform::Pass::operator()(tvm::IRModule) const",
    )


def test_a_librarys_native_trace_is_the_crash_site_and_python_says_how_it_got_there() -> None:
    text = _tvm_ffi(12, 0x7F34453F904F, "/ws/tvm")
    d = read_dump(text)
    assert d.native == (
        "tvm::relax::FuseMutator::VisitExpr_ (fuse.cc)",  # repeats (inlining) folded
        "tvm::ffi::Function::FromTyped::{lambda#1}::operator() (function.h)",
        "tvm::transform::Pass::operator() (transform.cc)",  # no name, no frame: addresses
    )
    assert d.python == ("string_at (__init__.py)", "_fuse_kernels (npu.py)", "run (npu.py)")
    sig = _crash_sig(text)
    assert sig == _crash_sig(_tvm_ffi(40, 0x55AA12, "/home/ci/tvm-build"))
    assert "at tvm::relax::FuseMutator::VisitExpr_ (fuse.cc) <" in sig
    assert "via string_at (__init__.py) < _fuse_kernels (npu.py)" in sig


def test_tvms_classic_stack_trace_and_glibcs_backtrace_symbols() -> None:
    tvm = """\
[12:00:01] /ws/src/relax/fuse.cc:120: InternalError: Check failed: (lhs == rhs) is false
Stack trace:
  0: tvm::relax::FuseMutator::VisitExpr_(tvm::relax::CallNode const*)
        at /ws/src/relax/fuse.cc:120
  1: tvm::relax::ExprMutator::VisitExpr(tvm::RelaxExpr const&)
        at /ws/src/relax/expr_mutator.cc:88
  2: 0x00007f3a5c0012ab
  3: TVMFuncCall
"""
    d = read_dump(tvm)
    assert d.native == (
        "tvm::relax::FuseMutator::VisitExpr_ (fuse.cc)",
        "tvm::relax::ExprMutator::VisitExpr (expr_mutator.cc)",
        "TVMFuncCall",
    )
    assert d.note == (
        "[12:00:01] /ws/src/relax/fuse.cc:120: InternalError: Check failed: (lhs == rhs) is false",
    )
    glibc = """\
double free or corruption (out)
/lib/x86_64-linux-gnu/libc.so.6(gsignal+0x10b)[0x7f1c2e4a]
/lib/x86_64-linux-gnu/libc.so.6(abort+0x121)[0x7f1c2e4b]
/lib/x86_64-linux-gnu/libc.so.6(+0x89a11)[0x7f1c2e4c]
/opt/npu/lib/libnpu.so(_ZN3npu6Buffer7releaseEv+0x2a)[0x7f1c3000]
/opt/npu/lib/libnpu.so(_ZN3npu7Session3runEv+0x91) [0x7f1c3001]
"""
    d = read_dump(glibc)
    assert d.native == ("_ZN3npu6Buffer7releaseEv (libnpu.so)", "_ZN3npu7Session3runEv (libnpu.so)")
    assert d.note == ("double free or corruption (out)",)
    gdb = """\
#0  0x00007ffff7a42428 in __GI_raise (sig=sig@entry=6) at ../sysdeps/unix/sysv/linux/raise.c:54
#1  0x00007ffff7a4402a in __GI_abort () at abort.c:89
#2  0x0000555555554a3d in npu::pack(int*, int) (w=0x0, n=3) at /src/npu/pack.cc:17
#3  0x0000555555554b10 in main () at /src/npu/main.cc:9
"""
    assert read_dump(gdb).native == ("npu::pack (pack.cc)", "main (main.cc)")


def test_a_numbered_log_or_a_printed_python_exception_is_not_a_crash_site() -> None:
    text = """\
  0: input x
  1: input y
Traceback (most recent call last):
  File "/a/npu.py", line 3, in compile
    fuse(model)
ValueError: odd shape
"""
    d = read_dump(text)
    assert d.frames == ()
    assert d.note == ("0: input x", "1: input y", "ValueError: odd shape")


def test_without_a_dump_the_signature_is_what_it_was() -> None:
    v = Judgement(Verdict.CRASH, Stage.RUN, message="killed by signal SIGABRT")
    trace = "[I:npu] 12 nodes\nfree(): invalid pointer"
    assert evidence(trace) == trace  # only the tail, as before
    assert signature("npu", v, trace=trace) == (
        "npu|crash|run|killed by signal SIGABRT | [I:npu] N nodes | free(): invalid pointer"
    )
    assert signature("npu", v) == "npu|crash|run|killed by signal SIGABRT"


def test_the_evidence_shows_the_frames_then_the_tail_and_reads_back() -> None:
    text = _tvm_ffi(12, 0x7F34453F904F, "/ws/tvm") + "Extension modules: a, b\n"
    shown = evidence(text)
    lines = shown.splitlines()
    assert lines[0] == FRAMES_HEAD.format(kind="native")
    assert lines[1] == "  tvm::relax::FuseMutator::VisitExpr_ (fuse.cc)"
    assert any(ln.startswith("Python stack: string_at (__init__.py)") for ln in lines)
    assert TAIL_HEAD in lines and "Segfault encountered" in shown
    assert "Extension modules" not in shown  # which modules were loaded names no cause
    d = read_dump(text)
    back = dump_of(shown)
    assert back.native == d.native[:SHOWN] and back.python == d.python[:SHOWN]
    long = evidence("x" * 5000 + "\n" + _fh(), limit=300)
    assert len(long) < 1000 and long.splitlines()[1] == "  _pack_weights (kernels.py)"


def test_shapes_in_a_message_do_not_split_a_bug() -> None:
    """TVM prints the operands' shapes: the same type error at rank 2 and rank 4 is one bug."""
    msg = (
        "TypeError: Binary operators must have the same datatype for both operands. However, "
        'R.subtract(R.const(1.0, "float32"), lv) uses datatype T.float32 on the LHS (Type of '
        'R.Tensor((), dtype="float32")), and datatype T.float16 on the RHS (Type of '
        'R.Tensor({}, dtype="float16")).'
    )
    assert normalize(msg.format("(8, 4)")) == normalize(msg.format("(7, 5, 1, 2)"))
    assert normalize("expected rank 3") != normalize("expected rank-3 tensor")  # words count


def test_tvm_variable_names_are_names_numbered_or_not() -> None:
    """Relax names its first binding ``lv`` and the next ``lv1``: a float16 Elu fed by a
    graph input and one fed by a Mul are one bug. A word that only starts alike stays."""
    msg = 'R.subtract(R.const(1.0, "float32"), {}) uses datatype T.float16'
    assert normalize(msg.format("lv")) == normalize(msg.format("lv1"))
    assert normalize(msg.format("gv")) == normalize(msg.format("lv12"))
    assert normalize("lvalue expected") != normalize("T expected")


def test_a_scalars_empty_shape_is_a_shape_too() -> None:
    """``make run`` filed one Cast->Elu crash twice: TVM printed the operand's shape as ``()``
    in one model and ``(1,)`` in another. A call's ``()`` is not a shape."""
    msg = 'R.add(lv, R.const(1.0)) uses R.Tensor({}, dtype="float16")'
    assert normalize(msg.format("()")) == normalize(msg.format("(1,)"))
    assert normalize(msg.format("( )")) == normalize(msg.format("(3, 4)"))
    assert "x.defined()" in normalize("Check failed: x.defined() is false")


def _tvm_type_error(op: str, lhs: str, rhs: str, shape: str) -> str:
    msg = (
        "TypeError: Binary operators must have the same datatype for both operands. However, "
        f'{op}(R.const(1.0, "{lhs}"), lv) uses datatype T.{lhs} on the LHS (Type of '
        f'R.Tensor((), dtype="{lhs}")), and datatype T.{rhs} on the RHS (Type of '
        f'R.Tensor({shape}, dtype="{rhs}")).'
    )
    return signature("tvm", Judgement(Verdict.CRASH, Stage.COMPILE, message=msg))


def test_a_family_leaves_out_op_names_element_types_and_shapes() -> None:
    """One TVM converter bug (float32 constants in float16 graphs) through Sub, Mul and Elu,
    in either operand order and at any rank, is one family of several signatures."""
    sigs = {
        _tvm_type_error("R.subtract", "float32", "float16", "(8, 4)"),
        _tvm_type_error("R.multiply", "float16", "float32", "()"),
        _tvm_type_error("R.nn.elu", "float32", "float16", "(1, 2, 3)"),
    }
    # the constant on one side, or a computed tensor
    sigs.add(_tvm_type_error("R.add", "float16", "float32", "(2,)").replace("R.const(N, S)", "T"))
    # or a nested call
    nested = _tvm_type_error("R.add", "float16", "float32", "(2,)")
    sigs.add(nested.replace("R.const(N, S)", "R.nn.relu(R.const(N, S))"))
    assert len(sigs) >= 4  # the signatures tell the ops apart ...
    assert len({family(s) for s in sigs}) == 1  # ... the family does not
    other = signature("tvm", Judgement(Verdict.CRASH, Stage.COMPILE, message="Only constant axes"))
    assert family(other) != family(next(iter(sigs)))
    assert family(next(iter(sigs))).startswith("tvm|crash|compile|")


def test_onnx_op_types_in_error_text_are_left_out_of_a_family() -> None:
    def ort(op: str, dtype: str) -> str:
        msg = f"Non-zero status code returned while running {op} node. Name:'{op.lower()}3' "
        msg += f"Status Message: tensor({dtype}) is not supported"
        return signature("ort", Judgement(Verdict.CRASH, Stage.RUN, message=msg))

    assert ort("Relu", "double") != ort("Elu", "float")
    assert family(ort("Relu", "double")) == family(ort("Elu", "float"))
    assert family(ort("Relu", "double")) != family(ort("Relu", "double").replace("ort|", "tvm|"))


def _openvino(op: str, check: str, said: str, header: bool = True) -> str:
    """An OpenVINO frontend conversion failure, in its words (OpenVINO 2026.4)."""
    text = (
        "Exception from src/inference/src/cpp/core.cpp:105:\nCheck 'false' failed at src/"
        "frontends/common_translators/src/unconverted_ops_report.cpp:151:\nFrontEnd API failed "
        "with OpConversionFailure:\nModel wasn't fully converted. Failed operations detailed "
        f"log:\n-- {op}-21 with a message:\nWhile validating ONNX node '<Node({op}): "
        f"{op.lower()}0>': Check '{check}' failed at src/core/shape_inference/include/x.hpp:56:"
        f"\n{said}\n\nSummary:\n-- Conversion is failed for: {op}-21"
    )
    message = f"RuntimeError: {text}" if header else text
    return signature("openvino", Judgement(Verdict.CRASH, Stage.COMPILE, message=message))


def test_openvinos_conversion_failures_are_told_apart_by_their_words() -> None:
    """OpenVINO wraps every error in lines that say only where it passed ("Exception from
    ...:", "Check 'false' failed at ...:", "FrontEnd API failed with ...:"): as the first
    two lines, every conversion failure was one signature. Now the op and its words tell
    them apart, and one failure at other shapes is one signature."""
    gather = _openvino(
        "GatherElements",
        "output_shape.merge_into(output_shape, indices_pshape)",
        "Shapes [5,8,5,2] and [3,5,4,1] are not consistent, `data` and `indices` must have "
        "equal or intersecting dimensions, except for the dimension at axis index.3",
    )
    again = _openvino(
        "GatherElements",
        "output_shape.merge_into(output_shape, indices_pshape)",
        "Shapes [2,7,1,9] and [1,6,1,3] are not consistent, `data` and `indices` must have "
        "equal or intersecting dimensions, except for the dimension at axis index.2",
    )
    resize = _openvino("Resize", "all_of(...)", "All axes values should less than input rank: 4")
    assert gather == again
    assert gather != resize and family(gather) != family(resize)
    assert gather.startswith("openvino|crash|compile|RuntimeError: -- GatherElementsN with a ")
    assert "are not consistent" in gather
    # the form bundles and known files written before hold, and replay and --known read
    message = "RuntimeError: Exception from src/x.cpp:1:\nCheck 'false' failed at src/y.cpp:2:"
    message += "\nCan not create StaticMemory object. The memory desc is undefined"
    sig = signature("openvino", Judgement(Verdict.CRASH, Stage.COMPILE, message=message))
    assert sig.endswith(
        "|RuntimeError: Can not create StaticMemory object. The memory desc is undefined"
    )
    forms = earlier_forms(sig, message)
    assert forms[0] == sig
    before = "RuntimeError: Exception from srcFILE: | Check S failed at srcFILE:"
    assert f"openvino|crash|compile|{before}" in forms
    # an error of such lines alone keeps them: there is nothing else to tell it by
    alone = "RuntimeError: Exception from src/x.cpp:1:"
    assert normalize(alone) == normalize(alone, skip_where=False)
    assert normalize(alone) == "RuntimeError: Exception from srcFILE:"


def test_torchs_scalar_type_names_are_left_out_of_a_family() -> None:
    """onnx2torch's ReduceL1 on integers: torch names the type it got (Int, Long), one bug;
    a type in lower case ("int") is a word of the message, as before."""

    def torch(message: str) -> str:
        return signature("torch", Judgement(Verdict.CRASH, Stage.RUN, message=message))

    norm = "RuntimeError: linalg.vector_norm: Expected a floating point or complex tensor as "
    int_, long_ = torch(norm + "input. Got Int"), torch(norm + "input. Got Long")
    assert int_ != long_ and family(int_) == family(long_)
    put = "RuntimeError: Index put requires the source and destination dtypes match, got {} "
    put += "for the destination and {} for the source."
    assert family(torch(put.format("Float", "Int"))) == family(torch(put.format("Half", "Long")))
    assert family(int_) != family(torch(put.format("Float", "Int")))


def test_a_crash_family_is_its_signal_and_frames_whatever_its_last_words() -> None:
    a = _crash_sig(FAULTHANDLER.format(n=3, tid=1, root="/a", func="fused_relu"))
    b = _crash_sig(
        FAULTHANDLER.format(n=9, tid=2, root="/b", func="fused_relu").replace(
            "free(): invalid pointer", "double free or corruption (Relu)"
        )
    )
    elsewhere = _crash_sig(FAULTHANDLER.format(n=3, tid=1, root="/a", func="pack_weights"))
    assert a != b and family(a) == family(b)
    assert family(a) != family(elsewhere)


def test_a_wrong_value_family_is_its_kind_whatever_the_op() -> None:
    relu = signature("tvm", Judgement(Verdict.MISMATCH, Stage.RUN, kind="values"), "Relu")
    exp = signature("tvm", Judgement(Verdict.MISMATCH, Stage.RUN, kind="values"), "Exp")
    shape = signature("tvm", Judgement(Verdict.MISMATCH, Stage.RUN, kind="shape"), "Exp")
    assert relu != exp and family(relu) == family(exp) == "tvm|mismatch|run|values"
    assert family(shape) != family(exp)
    assert family_id(family(relu)) != family_id(family(shape))
    assert family_id(family(relu), {"tvm": "TVM 0.27"}).startswith("TVM-0-27-mismatch-F")


def test_a_precision_finding_is_in_the_family_of_its_ops_wrong_values() -> None:
    """One flaky kernel's error lands above the end-to-end tolerance in one run ("values")
    and only beyond its op's budget in another ("precision"): one root cause, one family
    (an intermittent finding gets one bundle per family)."""
    values = signature("tvm", Judgement(Verdict.MISMATCH, Stage.RUN, kind="values"), "Exp")
    precise = signature("tvm", Judgement(Verdict.MISMATCH, Stage.RUN, kind="precision"), "Exp")
    assert values != precise  # the bundle still says which
    assert family(values) == family(precise) == "tvm|mismatch|run|values"
    assert root_signature(precise) == values and root_signature(values) == values
    # two root causes stay two: a wrong shape, another backend's wrong value, a crash
    shape = signature("tvm", Judgement(Verdict.MISMATCH, Stage.RUN, kind="shape"), "Exp")
    ort = signature("ort", Judgement(Verdict.MISMATCH, Stage.RUN, kind="precision"), "Exp")
    crash = signature("tvm", Judgement(Verdict.CRASH, Stage.RUN, message="precision in Exp"))
    assert len({family(s) for s in (values, shape, ort, crash)}) == 4
    assert root_signature(crash) == crash


def test_a_symbolic_dim_in_a_relax_shape_does_not_split_a_family() -> None:
    """TVM names a data-dependent dim (NonZero's count) in the shape it prints: one
    float16-constant bug, one family, whatever the shape."""
    shaped = _tvm_type_error("R.multiply", "float32", "float16", "(4, 2)")
    symbolic = shaped.replace("R.Tensor((SHAPE)", "R.Tensor((N, nonzero_numbers, N)")
    assert symbolic != shaped and family(symbolic) == family(shaped)
    other = signature("tvm", Judgement(Verdict.CRASH, Stage.COMPILE, message="Only constant axes"))
    assert family(other) != family(symbolic)


def test_pythons_quoted_class_and_attribute_names_tell_bugs_apart() -> None:
    """Python's AttributeError and TypeError quote the class, attribute, module or keyword
    at fault: two converter bugs of one backend (onnx2torch's Split returning a tuple and a
    ReduceSum converter's missing method, seen in one campaign) are two bugs and two
    families, while the tensor names a message quotes still do not split one."""

    def torch_sig(message: str) -> str:
        return signature("torch", Judgement(Verdict.CRASH, Stage.RUN, message=message))

    split = torch_sig("AttributeError: 'tuple' object has no attribute 'to'")
    reduce = torch_sig(
        "AttributeError: 'OnnxReduceSumStaticAxes' object has no attribute 'math_op_function'"
    )
    assert split != reduce
    assert family(split) != family(reduce)
    assert "tuple object has no attribute to" in split
    for a, b in [
        ("unsupported operand type(s) for +: 'NoneType' and 'int'", ("NoneType", "Tensor")),
        ("object of type 'NoneType' has no len()", ("NoneType", "Tensor")),
        ("module 'torch' has no attribute 'erfinv_'", ("torch", "numpy")),
        ("f() got an unexpected keyword argument 'axes'", ("axes", "axis")),
    ]:
        assert torch_sig(f"TypeError: {a}") != torch_sig(f"TypeError: {a.replace(*b)}")
    # a node's name is a name, quoted or not: one bug whichever node it hit
    assert torch_sig("AttributeError: 'GraphModule' object has no attribute 'relu3'") == (
        torch_sig("AttributeError: 'GraphModule' object has no attribute 'add12_out0'")
    )
    assert torch_sig("KeyError: 'in3'") == torch_sig("KeyError: 'weird name'")


def test_one_check_at_each_rank_is_one_family() -> None:
    """Lists of numbers are shapes, axes or sizes as tuples are: OpenVINO's GatherElements
    check at ranks 2 to 5 (4 families before), and torch.compile's ReduceL1 on integers
    with dim=[0] and dim=[], whose signatures were also cut at different words (the list
    is a character longer)."""

    def sig(backend: str, message: str) -> str:
        return signature(backend, Judgement(Verdict.CRASH, Stage.COMPILE, message=message))

    check = (
        "RuntimeError: Exception from src/inference/src/cpp/core.cpp:105:\n"
        "Check 'false' failed at src/frontends/common_translators/src/unconverted_ops_report"
        ".cpp:151:\nFrontEnd API failed with OpConversionFailure:\nModel wasn't fully "
        "converted. Failed operations detailed log:\n-- GatherElements-21 with a message:\n"
        "While validating ONNX node '<Node(GatherElements): gatherelements0>': Check "
        "'output_shape.merge_into(output_shape, indices_pshape)' failed at src/core/"
        "shape_inference/include/gather_elements_shape_inference.hpp:56:\nShapes {} and {} "
        "are not consistent, `data` and `indices` must have equal or intersecting dimensions,"
        " except for the dimension at axis index.3\n"
    )
    ranks = [
        sig("openvino", check.format(a, b))
        for a, b in [("[5,8]", "[3,5]"), ("[5,8,5]", "[3,5,4]"), ("[5,8,5,2]", "[3,5,4,1]")]
    ]
    assert len(set(ranks)) == 3 and len({family(s) for s in ranks}) == 1
    norm = (
        "TorchRuntimeError: RuntimeError when making fake tensor call\n  Explanation: Dynamo "
        "failed to run FX node with fake tensors: call_function <function norm at "
        "0x7f22ba0fa020>(*(FakeTensor(..., size={}, dtype=torch.int32),), **{{'p': 1, 'dim':"
        " {}, 'keepdim': True}}): got RuntimeError('linalg.vector_norm: Expected a floating "
        "point or complex tensor as input. Got torch.int32')\n"
    )
    scalar, vector = (
        sig("torch-compile", norm.format("()", "[]")),
        sig("torch-compile", norm.format("(5,)", "[0]")),
    )
    assert scalar != vector and family(scalar) == family(vector)
    # a list that is not all numbers is words of the message
    assert family(sig("openvino", "Error: axes [a,b] bad")) != family(
        sig("openvino", "Error: axes [1,2] bad")
    )


def test_one_ops_wrong_output_of_another_kind_is_its_twin() -> None:
    """values / precision (either side of the tolerance) and shape (where the values decide
    it: onnx2torch's untransposed NonZero was four bundles, "values" where N is the rank
    and "shape" otherwise) of one op's output are one fault; dtype and crashes are not."""
    from onnxfuzz.judge.signature import kind_twins, same_fault

    sig = "tvm|mismatch|run|{} in Add output".format
    assert kind_twins(sig("precision")) == [sig("values"), sig("shape")]
    assert kind_twins(sig("values")) == [sig("precision"), sig("shape")]
    assert kind_twins(sig("shape")) == [sig("values"), sig("precision")]
    assert kind_twins(sig("dtype")) == []
    assert kind_twins("tvm|crash|run|values in Add output") == []
    assert same_fault(sig("values"), sig("shape")) and same_fault(sig("values"), sig("values"))
    assert not same_fault(sig("values"), "tvm|mismatch|run|values in Mul output")
    assert not same_fault(sig("values"), sig("dtype"))
    assert not same_fault(sig("values"), "ort|mismatch|run|values in Add output")


def test_a_crash_joins_a_filed_bug_of_its_family_reduced_to_some_of_its_ops() -> None:
    """The join and its take-over: same family, and the filed ops a sub-multiset of the
    new ones (joins) or a strict super-multiset (taken over); another family, or a bundle
    that names no reduced model (unreduced), neither."""
    from onnxfuzz.run.campaign import same_crash, wider_crashes

    filed = [
        ("gather", "x|crash|compile|E [N]", "Gather"),
        ("reshape", "x|crash|compile|E [N, N]", "Gather+Reshape"),
        ("other", "x|crash|compile|Another error", "Gather"),
        ("raw", "x|crash|compile|E [N]", "unreduced"),
    ]
    assert same_crash(filed, "x|crash|compile|E [N, N, N]", "Gather+LSTM") == ["gather"]
    assert same_crash(filed, "x|crash|compile|E [N]", "Gather+Reshape") == [
        "reshape",  # the same ops first
        "gather",
    ]
    assert same_crash(filed, "x|crash|compile|E [N]", "Conv") == []
    assert wider_crashes(filed, "x|crash|compile|E [N]", "Gather") == ["reshape"]
    assert wider_crashes(filed, "x|crash|compile|Another error", "Gather") == []
