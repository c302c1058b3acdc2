"""The backend adapter protocol, and finding adapters.

An adapter is a class with::

    name: str
    def version(self) -> str
    def supported_opsets(self) -> tuple[int, int]
    def compile(self, model: onnx.ModelProto) -> Any                 # an executable
    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]

and optionally the hooks in ``OPTIONAL`` (resolved once, when the adapter is loaded, into
an ``Adapter``; a hook that is present but not callable is refused at load time). Options
given as ``name:key=value,key=value`` arrive as keyword arguments (strings) of the
constructor.

Adapters are found through the ``onnxfuzz.backends`` entry-point group (the built-in ones
are registered there like any third-party one) or named ad hoc as
``path/to/file.py:ClassName`` or ``package.module:ClassName``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import onnx

from onnxfuzz.errors import BackendError

GROUP = "onnxfuzz.backends"
REQUIRED = {
    "version": "version(self) -> str",
    "supported_opsets": "supported_opsets(self) -> tuple[int, int]",
    "compile": "compile(self, model) -> executable",
    "run": "run(self, executable, inputs) -> dict[str, np.ndarray]",
}


# Optional hooks: name -> signature. Declared here, resolved once by ``load_adapter``.
OPTIONAL = {
    "supports": "supports(self, model) -> str | None  (a reason it cannot take the model)",
    "available": "available(self) -> str | None  (why it cannot run on this machine)",
    "preferred_opset": "preferred_opset(self) -> int  (where it covers the most ops)",
    "is_unsupported": "is_unsupported(self, error) -> bool  (missing support, not a bug?)",
    "compile_bytes": "compile_bytes(self, data: bytes) -> executable  (skips a parse)",
    "optimizations": "optimizations(self, executable) -> dict[str, list[str]] | None  "
    "(what the optimizer did to this model: kind -> names)",
    "want_feedback": "want_feedback(self, on: bool) -> None  (is the next compile's "
    "optimizations feedback wanted? an adapter whose feedback costs compile time)",
    "frontend": "frontend(self, model) -> None  (import the model as compile does, without "
    "building it; raises what the import raises: a reduction checks its candidates of an "
    "importer's failure with it)",
}

# Optimization feedback: kind -> the names of what fired on one compiled model, e.g.
# {"transformer": ["ConstantFolding"], "rule": ["FuseReluClip"], "fused": ["fused_add_relu"]};
# a kind "known:K" names what of kind K ran or could have fired without firing (so that a
# campaign can list what never fired).
Feedback = dict[str, tuple[str, ...]]
KNOWN = "known:"


def split_known(feedback: Feedback) -> tuple[Feedback, Feedback]:
    """(kind -> names fired, kind -> names known) of one answer."""
    fired = {k: v for k, v in feedback.items() if not k.startswith(KNOWN)}
    known = {k[len(KNOWN) :]: v for k, v in feedback.items() if k.startswith(KNOWN)}
    return fired, known


def feedback_of(raw: Any) -> Feedback:
    """An ``optimizations`` hook's answer as ``Feedback`` (None: nothing fired, or nothing
    observable); a ``TypeError`` naming what is wrong with another shape of answer."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TypeError(f"must return a dict of kind -> names, got {type(raw).__name__}")
    out: Feedback = {}
    for kind, names in raw.items():
        if (
            not isinstance(kind, str)
            or isinstance(names, str)
            or not all(isinstance(n, str) for n in names)
        ):
            raise TypeError(f"kind {kind!r}: names must be a list of str, got {names!r}")
        out[kind] = tuple(sorted(set(names)))
    return out


class Unsupported(Exception):  # noqa: N818 - a verdict name, not an error of ours
    """Raised by an adapter for an op, dtype or opset it does not implement."""


@runtime_checkable
class Backend(Protocol):
    name: str

    def version(self) -> str: ...
    def supported_opsets(self) -> tuple[int, int]: ...
    def compile(self, model: onnx.ModelProto) -> Any: ...
    def run(self, executable: Any, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


# Messages that mean "not implemented" in the libraries we know; adapters add their own.
UNSUPPORTED_PATTERNS = re.compile(
    r"not ?implemented|NOT_IMPLEMENTED|not supported|unsupported|Could not find an "
    r"implementation|No converter|no registered converter|is not supported",
    re.IGNORECASE,
)


def is_unsupported(backend: Any, error: BaseException) -> bool:
    """Does ``error`` (raised by ``backend``, an adapter or an ``Adapter``) mean missing
    support for an op, dtype or opset rather than a bug?"""
    if isinstance(error, Unsupported | NotImplementedError):
        return True
    hook = (
        backend.is_unsupported if isinstance(backend, Adapter) else _hook(backend, "is_unsupported")
    )
    if hook is not None:
        return bool(hook(error))
    return bool(UNSUPPORTED_PATTERNS.search(f"{type(error).__name__}: {error}"))


def _hook(backend: Any, name: str) -> Any:
    hook = getattr(backend, name, None)
    return hook if callable(hook) else None


@dataclass(frozen=True)
class Adapter:
    """A loaded adapter and its optional hooks (``OPTIONAL``), each None where absent."""

    backend: Any
    supports: Callable[[onnx.ModelProto], str | None] | None
    available: Callable[[], str | None] | None
    preferred_opset: Callable[[], int] | None
    is_unsupported: Callable[[BaseException], bool] | None
    compile_bytes: Callable[[bytes], Any] | None
    optimizations: Callable[[Any], dict[str, list[str]] | None] | None
    want_feedback: Callable[[bool], None] | None
    frontend: Callable[[onnx.ModelProto], None] | None

    @classmethod
    def of(cls, backend: Any) -> Adapter:
        return cls(backend, **{name: _hook(backend, name) for name in OPTIONAL})


@dataclass(frozen=True)
class BackendRef:
    """A parsed ``--backend`` value."""

    text: str
    target: str  # entry-point name, "pkg.mod:Class" or "path/file.py:Class"
    options: dict[str, str] = field(default_factory=dict)
    name: str | None = None  # the user's name for it: ``NAME=SPEC``

    @property
    def label(self) -> str:
        return self.text


NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


# The option that turns a shipped backend's optimizations off: such a backend beside the
# same backend with them on is the natural reference (``default_reference``).
UNOPTIMIZED: dict[str, tuple[str, str]] = {
    "ort": ("opt", "none"),
    "ort-cuda": ("opt", "none"),
    "tvm": ("opt_level", "0"),
}


def default_reference(labels: list[str]) -> str:
    """The reference of a campaign given no --reference: the first backend, except where
    one is another's same backend with its optimizations off (``ort:opt=none`` beside
    ``ort``): that one, so the optimizers are what is tested. With ``ort`` first, its
    optimizers' crashes were the reference's own failures, set aside unreduced."""
    try:
        refs = [parse_backend(label) for label in labels]
    except BackendError:
        return labels[0]  # a malformed spec: said where the backends are loaded

    def plain(r: BackendRef) -> tuple[str, dict[str, str]]:
        key = UNOPTIMIZED.get(r.target, ("", ""))[0]
        return r.target, {k: v for k, v in r.options.items() if k != key}

    twins = [
        a.label
        for a in refs
        if a.target in UNOPTIMIZED
        and a.options.get(UNOPTIMIZED[a.target][0]) == UNOPTIMIZED[a.target][1]
        and any(b is not a and plain(b) == plain(a) for b in refs)
    ]
    return twins[0] if len(twins) == 1 else labels[0]


def display_names(labels: list[str], adapter_names: dict[str, str]) -> dict[str, str]:
    """What tables, bug ids and summaries call each backend: the name the user gave
    (``--backend NAME=SPEC``), else an installed backend's label as typed (``ort``,
    ``ort:opt=none``), else an ad hoc adapter's ``name`` attribute with its options
    (``npu:opt=2``, not ``/path/to/npu.py:NpuBackend:opt=2``). Names that would clash
    fall back to the label."""
    out: dict[str, str] = {}
    for label in labels:
        ref = parse_backend(label)
        if ref.name:
            out[label] = ref.name
        elif ":" in ref.target and adapter_names.get(label):
            opts = ",".join(f"{k}={v}" for k, v in ref.options.items())
            out[label] = adapter_names[label] + (f":{opts}" if opts else "")
        else:
            out[label] = label
    seen: dict[str, int] = {}
    for name in out.values():
        seen[name] = seen.get(name, 0) + 1
    return {k: (v if seen[v] == 1 else k) for k, v in out.items()}


def parse_backend(text: str) -> BackendRef:
    """``ort``, ``ort:opt=none``, ``my_npu.py:NpuBackend``, ``pkg.mod:Cls:device=1``,
    any of them named: ``npu=my_npu.py:NpuBackend``."""
    name = None
    head = text.split(":", 1)[0]
    if "=" in head:  # NAME=SPEC (an option's "=" comes after a ":")
        name, _, spec = text.partition("=")
        if not NAME_RE.fullmatch(name):
            raise BackendError(
                f"--backend {text}: a backend's name is letters, digits and ._+- "
                f"(e.g. npu=./npu.py:NpuBackend), got {name!r}"
            )
        ref = parse_backend(spec)
        return BackendRef(text, ref.target, ref.options, name)
    parts = text.split(":")
    options: dict[str, str] = {}
    # "name:opts" for an installed backend; "module:Class[:opts]" or "file.py:Class[:opts]"
    named = parts[0] in installed_names() and not parts[0].endswith(".py")
    if len(parts) > 1 and "=" not in parts[1] and parts[1] and not named:
        target, rest = f"{parts[0]}:{parts[1]}", parts[2:]
    else:
        target, rest = parts[0], parts[1:]
    for chunk in rest:
        for kv in filter(None, chunk.split(",")):
            key, eq, value = kv.partition("=")
            if not eq or not key:
                raise BackendError(
                    f"--backend {text}: options are key=value, e.g. ort:opt=none (got {kv!r})"
                )
            options[key] = value
    if not target:
        raise BackendError(f"--backend {text!r}: give a backend name, e.g. --backend ort")
    return BackendRef(text, target, options)


def entry_points() -> dict[str, metadata.EntryPoint]:
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


@functools.cache
def installed_names() -> frozenset[str]:
    """The installed backends' names, read once per process: ``parse_backend`` is called
    per test and backend by the judge, and each read of the entry points parses every
    installed distribution's metadata (it was 77 % of an ORT campaign's time)."""
    return frozenset(entry_points())


def _load_class(target: str, text: str) -> type:
    eps = entry_points()
    if ":" not in target:
        if target not in eps:
            known = ", ".join(sorted(eps)) or "none"
            raise BackendError(
                f"--backend {text}: no backend named {target!r} (installed: {known}); "
                "name a class as path/to/file.py:ClassName or package.module:ClassName"
            )
        try:
            return eps[target].load()
        except Exception as e:  # noqa: BLE001 - any import failure is reported the same way
            raise BackendError(
                f"backend {target!r} ({eps[target].value}) failed to import: "
                f"{type(e).__name__}: {e}"
            ) from e
    where, _, cls_name = target.rpartition(":")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise BackendError(f"--backend {text}: no such file {where}")
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
        mod_name = f"{USER_MODULE}{path.stem}_{digest}"
        if mod_name in sys.modules:
            module = sys.modules[mod_name]
            return _class_of(module, cls_name, where, text)
        spec = importlib.util.spec_from_file_location(mod_name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module  # bundles embed the source of the adapter's module
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # noqa: BLE001
            del sys.modules[mod_name]
            raise BackendError(
                f"--backend {text}: {where} failed to import: {type(e).__name__}: {e}"
            ) from e
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:  # noqa: BLE001
            raise BackendError(
                f"--backend {text}: cannot import {where}: {type(e).__name__}: {e}"
            ) from e
    return _class_of(module, cls_name, where, text)


USER_MODULE = "onnxfuzz_user_"  # the module name of an adapter loaded from a file path


def _class_of(module: Any, cls_name: str, where: str, text: str) -> type:
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise BackendError(f"--backend {text}: {where} has no class {cls_name!r}")
    return cls


def check_protocol(cls: type, origin: str) -> None:
    """Refuse a class that does not follow the adapter protocol, saying what is missing."""
    if not inspect.isclass(cls):
        raise BackendError(f"adapter {origin}: {cls!r} is not a class")
    # a class loaded from a file lives in a module named for onnxfuzz (USER_MODULE...):
    # the file's path in ``origin`` says where it is
    module = "" if cls.__module__.startswith(USER_MODULE) else f"{cls.__module__}."
    where = f"adapter {module}{cls.__qualname__} ({origin})"
    missing = [sig for attr, sig in REQUIRED.items() if not callable(getattr(cls, attr, None))]
    if not isinstance(getattr(cls, "name", None), str) and "name" not in getattr(
        cls, "__annotations__", {}
    ):
        missing.insert(0, "name: str (a class attribute)")
    if missing:
        raise BackendError(
            f"{where} does not follow the backend protocol: missing " + "; ".join(missing)
        )
    bad = [sig for attr, sig in OPTIONAL.items() if _not_callable(cls, attr)]
    if bad:
        raise BackendError(
            f"{where}: optional hooks must be methods: " + "; ".join(bad) + " (or leave them out)"
        )
    for attr in ("compile", "run"):
        params = list(inspect.signature(getattr(cls, attr)).parameters)
        want = 2 if attr == "compile" else 3
        if len(params) < want:
            raise BackendError(
                f"{where}: {attr} takes {len(params)} parameters, "
                f"the protocol's {REQUIRED[attr]} needs {want}"
            )


def _not_callable(cls: type, attr: str) -> bool:
    return attr in dir(cls) and not callable(getattr(cls, attr))


def load_adapter(ref: BackendRef | str) -> Adapter:
    """Import, check and instantiate an adapter, its optional hooks resolved."""
    return Adapter.of(load_backend(ref))


def load_backend(ref: BackendRef | str) -> Any:
    """Import, check and instantiate an adapter."""
    if isinstance(ref, str):
        ref = parse_backend(ref)
    cls = _load_class(ref.target, ref.text)
    check_protocol(cls, ref.text)
    try:
        backend = cls(**ref.options)
    except (TypeError, ValueError) as e:
        signature = inspect.signature(cls).parameters
        params = [p for p in signature if p not in ("self",)]
        takes_any = any(p.kind == p.VAR_KEYWORD for p in signature.values())
        unknown = sorted(k for k in ref.options if k not in params and not takes_any)
        if unknown:
            raise BackendError(
                f"--backend {ref.text}: {cls.__qualname__} has no option "
                f"{', '.join(unknown)} (it takes: {', '.join(params) or 'none'})"
            ) from e
        # every option is one it takes: a value it refused, in its own words
        raise BackendError(f"--backend {ref.text}: {cls.__qualname__} refused it: {e}") from e
    except Exception as e:  # noqa: BLE001 - the adapter's own start-up failing
        raise BackendError(
            f"adapter {ref.text}: {cls.__qualname__}() raised {type(e).__name__}: {e}"
        ) from e
    if not isinstance(getattr(backend, "name", None), str):
        raise BackendError(f"adapter {ref.text}: instance has no str attribute 'name'")
    lo_hi = backend.supported_opsets()
    if not (isinstance(lo_hi, tuple) and len(lo_hi) == 2 and lo_hi[0] <= lo_hi[1]):
        raise BackendError(
            f"adapter {ref.text}: supported_opsets() must return (min, max), got {lo_hi!r}"
        )
    return backend
