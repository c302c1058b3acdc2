"""Both builders implement the whole SpecBuilder Protocol, the only API specs may use."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from onnxfuzz.generate.build.builder import CheckBuilder, GenBuilder
from onnxfuzz.generate.lang.spec_api import SpecBuilder

ROOT = Path(__file__).resolve().parents[2]


def _members() -> set[str]:
    own = {n for n in vars(SpecBuilder) if not n.startswith("_")}
    return own | set(SpecBuilder.__annotations__)


def _owner(cls: type, name: str) -> type | None:
    """The class in ``cls``'s MRO that defines ``name`` (None: none does)."""
    return next((k for k in cls.__mro__ if name in vars(k)), None)


@pytest.mark.parametrize("cls", [GenBuilder, CheckBuilder])
def test_each_builder_implements_the_protocol(cls: type) -> None:
    # Declared (a type checker then checks it too), and implemented here, not left to the
    # Protocol's stubs, which an explicit subclass inherits.
    assert SpecBuilder in cls.__mro__, f"{cls.__name__} does not name SpecBuilder as a base"
    methods = {n for n, v in vars(SpecBuilder).items() if callable(v) and not n.startswith("_")}
    for name in methods:
        owner = _owner(cls, name)
        assert owner not in (None, SpecBuilder), f"{cls.__name__} lacks {name}()"
        want = list(inspect.signature(getattr(SpecBuilder, name)).parameters)
        got = list(inspect.signature(getattr(cls, name)).parameters)
        assert got == want, f"{cls.__name__}.{name}{got} differs from the Protocol's {want}"
    # attributes are set in __init__; properties on the class
    init = inspect.getsource(cls.__mro__[1].__init__) + inspect.getsource(cls.__init__)
    for name in _members() - methods:
        assigned = re.search(rf"self\.{name}\b\s*(:[^=\n]*)?=", init)
        prop = _owner(cls, name) not in (None, SpecBuilder) and isinstance(
            getattr(cls, name), property
        )
        assert assigned or prop, f"{cls.__name__} has no {name}"


def test_specs_use_nothing_of_a_builder_beyond_the_protocol() -> None:
    allowed = _members()
    used: dict[str, str] = {}
    for path in sorted((ROOT / "specs").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "b"
            ):
                used.setdefault(node.attr, f"{path.name}:{node.lineno}")
    extra = {k: v for k, v in used.items() if k not in allowed}
    assert not extra, f"specs use builder members outside SpecBuilder: {extra}"
