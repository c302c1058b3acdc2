"""The package's dependency direction: stages import only the stages before them.

onnxfuzz.errors, onnxfuzz.dtypes and onnxfuzz.backend (the adapter protocol) are the
base; then generate's subpackages in their order (the spec language, graph building with
the specs, corpus export and measurement), execute, rule inference, judge, reduce, store,
run, and the command line on top. A module may import its own stage and any stage below
it, never one above: the check reads every ``import`` in the package (function-level ones
included) and names the offending line. No two modules may import each other, through any
path (package ``__init__`` files included): the import graph has no circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. A module of layer i may import modules of layers <= i.
LAYERS: list[tuple[str, ...]] = [
    ("onnxfuzz.errors", "onnxfuzz.dtypes", "onnxfuzz.backend", "onnxfuzz.data"),
    # the spec language with the specs written in it (lang.spec loads them)
    ("onnxfuzz.generate", "onnxfuzz.generate.lang", "onnxfuzz.specs"),
    ("onnxfuzz.generate.build",),
    ("onnxfuzz.generate.corpus", "onnxfuzz.generate.measure"),
    ("onnxfuzz.execute", "onnxfuzz.backends"),
    ("onnxfuzz.infer",),
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
    """The layer of the longest group that names ``module`` or a package above it."""
    if module == "onnxfuzz":  # the package's own __init__: its version
        return 0
    best: tuple[int, int] | None = None  # (length of the group's name, layer)
    for i, group in enumerate(LAYERS):
        for g in group:
            if (module == g or module.startswith(g + ".")) and (best is None or len(g) > best[0]):
                best = (len(g), i)
    return best[1] if best else None


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


STAGES = [
    "generate",
    "generate/lang",
    "generate/build",
    "generate/corpus",
    "generate/measure",
    "execute",
    "infer",
    "judge",
    "reduce",
    "store",
    "run",
    "cli",
]


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_says_what_it_owns(stage: str) -> None:
    init = ROOT / "onnxfuzz" / stage / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text()))
    assert doc and "May import" in doc, f"{init}: needs a docstring saying what it may import"


def test_every_package_is_a_stage_in_the_layers() -> None:
    packages = {
        str(p.parent.relative_to(ROOT / "onnxfuzz"))
        for p in (ROOT / "onnxfuzz").rglob("__init__.py")
        if p.parent != ROOT / "onnxfuzz" and p.parent.name != "data"
    }
    assert packages == set(STAGES), packages ^ set(STAGES)


def test_no_subpackage_of_generate_is_a_flat_room() -> None:
    # generate/ is split by job; a subpackage past ~12 modules mixes jobs again.
    for sub in (ROOT / "onnxfuzz" / "generate").iterdir():
        if sub.is_dir() and (sub / "__init__.py").exists():
            modules = [p for p in sub.glob("*.py") if p.name != "__init__.py"]
            assert len(modules) <= 12, f"{sub.name}: {len(modules)} modules"
    top = [p.name for p in (ROOT / "onnxfuzz" / "generate").glob("*.py")]
    assert top == ["__init__.py"], f"modules outside generate's subpackages: {top}"


# --- import circles ---------------------------------------------------------------------------
def _all_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in _sources()}


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules importing it runs: the target, or the module a ``from X import
    name`` names, and every package ``__init__`` above it. ``TYPE_CHECKING`` blocks are left
    out (they never run)."""

    def resolve(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    out: dict[str, set[str]] = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
                targets.add(base)
                targets |= {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules}
        deps: set[str] = set()
        for t in targets:
            r = resolve(t) if t.startswith("onnxfuzz") else None
            while r:
                deps.add(r)
                r = r.rpartition(".")[0] if "." in r else None
                r = r if r in modules else None
        out[module] = deps - {module}
    return out


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    found = circles(_edges(_all_modules()))
    shown = "\n".join(" <-> ".join(c) for c in found)
    assert not found, f"modules that import each other:\n{shown}"


def test_the_circle_check_sees_a_function_level_and_an_init_circle(tmp_path: Path) -> None:
    # a.x imports b inside a function; b imports the package a, whose __init__ imports a.x.
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "__init__.py").write_text("from onnxfuzz.a.x import f\n")
    (tmp_path / "a" / "x.py").write_text("def f():\n    from onnxfuzz.b import g\n")
    (tmp_path / "b.py").write_text("from onnxfuzz.a import f\ndef g(): pass\n")
    (tmp_path / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from onnxfuzz.b import g\n"
    )
    mods = {
        "onnxfuzz.a": tmp_path / "a" / "__init__.py",
        "onnxfuzz.a.x": tmp_path / "a" / "x.py",
        "onnxfuzz.b": tmp_path / "b.py",
        "onnxfuzz.c": tmp_path / "c.py",
    }
    edges = _edges(mods)
    assert circles(edges) == [["onnxfuzz.a", "onnxfuzz.a.x", "onnxfuzz.b"]]
    assert edges["onnxfuzz.c"] == set()  # TYPE_CHECKING imports never run
