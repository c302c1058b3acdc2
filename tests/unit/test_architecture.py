"""The package's dependency direction: stages import only the stages before them.

onnxfuzz.errors, onnxfuzz.dtypes and onnxfuzz.backend (the adapter protocol) are the
base; then generate (with the specs), execute, judge, reduce, store, run, and the command
line on top. A module may import its own stage and any stage below it, never one above:
the check reads every ``import`` in the package (function-level ones included) and names
the offending line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. A module of layer i may import modules of layers <= i.
LAYERS: list[tuple[str, ...]] = [
    ("onnxfuzz.errors", "onnxfuzz.dtypes", "onnxfuzz.backend", "onnxfuzz.data"),
    ("onnxfuzz.generate", "onnxfuzz.specs"),
    ("onnxfuzz.execute", "onnxfuzz.backends"),
    ("onnxfuzz.judge",),
    ("onnxfuzz.reduce",),
    ("onnxfuzz.store",),
    ("onnxfuzz.run",),
    ("onnxfuzz.cli", "onnxfuzz.__main__"),
]
# Adapters are plugins: they may use only the base (what a third-party adapter can use).
PLUGIN_BASE = LAYERS[0]
SOURCES = {
    "onnxfuzz": ROOT / "onnxfuzz",
    "onnxfuzz.specs": ROOT / "specs",
    "onnxfuzz.backends": ROOT / "backends",
}


def _module_name(path: Path) -> str:
    for prefix, folder in sorted(SOURCES.items(), key=lambda kv: -len(kv[0])):
        if path.is_relative_to(folder):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            return ".".join([prefix, *parts])
    raise AssertionError(path)


def _layer(module: str) -> int | None:
    if module == "onnxfuzz":  # the package's own __init__: its version
        return 0
    for i, group in enumerate(LAYERS):
        if any(module == g or module.startswith(g + ".") for g in group):
            return i
    return None


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "onnxfuzz":  # from onnxfuzz import dtypes, __version__
                out += [
                    (node.lineno, f"onnxfuzz.{a.name}")
                    for a in node.names
                    if a.name != "__version__"
                ]
            else:
                out.append((node.lineno, target))
    return [(n, m) for n, m in out if m == "onnxfuzz" or m.startswith("onnxfuzz.")]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _sources() -> list[Path]:
    return sorted(p for folder in SOURCES.values() for p in folder.rglob("*.py"))


def violations() -> list[str]:
    bad = []
    for path in _sources():
        module = _module_name(path)
        mine = _layer(module)
        if mine is None:
            bad.append(f"{_shown(path)}: module {module} belongs to no layer")
            continue
        plugin = module.startswith("onnxfuzz.backends")
        for line, target in _imports(path, module):
            theirs = _layer(target)
            if theirs is None:
                bad.append(f"{_shown(path)}:{line}: imports {target}, in no layer")
            elif plugin and not any(target == g or target.startswith(g + ".") for g in PLUGIN_BASE):
                bad.append(
                    f"{_shown(path)}:{line}: adapter {module} imports "
                    f"{target}; adapters may use only {', '.join(PLUGIN_BASE)}"
                )
            elif theirs > mine:
                bad.append(
                    f"{_shown(path)}:{line}: {module} ({LAYERS[mine][0]}) imports "
                    f"{target} ({LAYERS[theirs][0]}), a later stage"
                )
    return bad


def test_imports_point_down_the_data_path() -> None:
    bad = violations()
    assert not bad, "imports against the stage order:\n" + "\n".join(bad)


def test_the_check_catches_an_upward_import(tmp_path: Path, monkeypatch) -> None:
    # A judge module importing the campaign is reported, with its line.
    fake = tmp_path / "onnxfuzz"
    (fake / "judge").mkdir(parents=True)
    (fake / "judge" / "oops.py").write_text("x = 1\nfrom onnxfuzz.run.campaign import Campaign\n")
    monkeypatch.setitem(SOURCES, "onnxfuzz", fake)
    monkeypatch.setitem(SOURCES, "onnxfuzz.specs", tmp_path / "none")
    monkeypatch.setitem(SOURCES, "onnxfuzz.backends", tmp_path / "none")
    bad = violations()
    assert len(bad) == 1 and "oops.py:2" in bad[0] and "onnxfuzz.run.campaign" in bad[0], bad


@pytest.mark.parametrize("stage", ["generate", "execute", "judge", "reduce", "store", "run", "cli"])
def test_each_stage_says_what_it_owns(stage: str) -> None:
    init = ROOT / "onnxfuzz" / stage / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and "May import" in doc, f"{init}: needs a docstring saying what it may import"
