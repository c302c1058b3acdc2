"""One error tree for everything onnxfuzz raises on purpose.

Every message names the thing that is wrong and, where there is one, the fix.
"""

from __future__ import annotations


class OnnxFuzzError(Exception):
    """Base of every deliberate onnxfuzz error."""


class SpecError(OnnxFuzzError):
    """A bug in an operator spec (an empty domain, an unknown input name, ...).

    Never a reason to retry: the spec must be fixed.
    """

    def __init__(self, op: str, variable: str, message: str) -> None:
        self.op = op
        self.variable = variable
        super().__init__(f"spec {op}: variable {variable!r}: {message}")


class ConfigError(OnnxFuzzError):
    """Generator options that contradict each other or the spec registry."""


class UsageError(OnnxFuzzError):
    """Bad command-line input; the message names the flag."""


class ModelError(OnnxFuzzError):
    """A model file that cannot be read or is not valid ONNX."""


class BackendError(OnnxFuzzError):
    """An adapter that cannot be found, loaded, or does not follow the protocol."""


class BundleDamaged(ModelError):
    """A bug bundle with a file missing or unreadable: ``bundle damaged: <file> (why)``.

    ``path`` is the damaged file or folder. A set-up error (exit 2), never a verdict: a
    bundle that cannot be read says nothing about the backend."""

    def __init__(self, path: object, why: str) -> None:
        self.path = path
        self.why = why
        super().__init__(f"bundle damaged: {path} ({why})")


class AdapterProtocolError(BackendError):
    """An adapter whose ``run()`` answers in a form the protocol does not allow (``None``, a
    list, a dict not keyed by output name, values that are no arrays): a defect of the
    adapter, reported once, never filed as a compiler bug per test."""
