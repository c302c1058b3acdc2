"""Specs of other domains come from spec sources registered as entry points (the committed
inferred rules are one), checked at registration like backend adapters."""

from __future__ import annotations

import importlib.metadata as md

import pytest

from onnxfuzz.errors import ConfigError
from onnxfuzz.generate.lang.spec import SPEC_SOURCES, domain_specs, spec_sources


@pytest.fixture
def sources(monkeypatch: pytest.MonkeyPatch):
    def install(*eps: md.EntryPoint) -> None:
        monkeypatch.setattr(
            md, "entry_points", lambda group=None: list(eps) if group == SPEC_SOURCES else []
        )
        spec_sources.cache_clear()

    yield install
    spec_sources.cache_clear()


def test_the_committed_rules_are_a_spec_source() -> None:
    assert "com.microsoft" in spec_sources()["inferred"].domains()
    specs = domain_specs({"com.microsoft"})
    assert specs and all(name.startswith("com.microsoft.") for name in specs)


def test_a_source_without_the_protocol_is_named(sources) -> None:
    sources(md.EntryPoint(name="broken", value="builtins:object", group=SPEC_SOURCES))
    with pytest.raises(ConfigError, match=r"spec source broken \(builtins:object\) has no domains"):
        spec_sources()


def test_a_source_that_cannot_load_is_named(sources) -> None:
    sources(md.EntryPoint(name="gone", value="no_such_module_x:SOURCE", group=SPEC_SOURCES))
    with pytest.raises(ConfigError, match=r"spec source gone .*cannot load"):
        spec_sources()


def test_a_domain_no_source_knows_says_how_to_get_rules(sources) -> None:
    sources()
    with pytest.raises(ConfigError, match=r"--domains org\.x: no specs .*onnxfuzz infer --domain"):
        domain_specs({"ai.onnx", "org.x"})
