"""The package's shape, checked from its source: packages that only look down onto a ground floor
that imports nothing, no import cycle, one sync boundary, and files a reader can take in at once.

Everything is read with :mod:`ast` (nothing is imported, no third-party tool), so a contract
that breaks names the modules that break it. The contracts are on *packages* (``memkit._core``,
``memkit.store``, ``memkit.adapters``, ...): a package is one room a newcomer enters, and an
arrow between two rooms is every import, type-checking ones included.

Layers, lowest first (a package may import its own layer's packages and those below, never one
above, and no two packages import each other):

* ``ground``: ``memkit._core``, the models, errors, limits, records, filters, recalls, marks, runs
  and the port's protocols; it imports nothing of memkit outside itself;
* ``logic``: ranking (``memkit._retrieval``), embedders (``memkit.embeddings``) and recall
  recording (``memkit._recall``);
* ``store``: ``memkit.store``, the public backend base, its operations and the registry;
* ``stores``: the backends (``memkit.adapters``);
* ``sync``: ``memkit._sync``, the one place that blocks on the event loop, and traces (an
  execution history writes through it);
* ``explore``: frames, graph, charts, widgets and the helpers behind them;
* ``serve``: the command line, the agent tools, the MCP server, LangGraph and OTel.

``memkit`` itself (the lazy public face) and ``memkit.testing`` sit beside the layers and may
import any of them.

A contract that today's tree breaks for a known reason carries a strict ``xfail`` listing the
modules concerned. It fails for real when another module breaks it, and again (XPASS, or a
"no longer" message) once a listed module is fixed: then delete that entry.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "memkit"
MAX_LINES = 600

# The layer of each package (the first name under ``memkit``), lowest first.
LAYERS = ("ground", "logic", "store", "stores", "sync", "explore", "serve")
_LAYER_OF: dict[str, str] = {
    "_core": "ground",
    **dict.fromkeys(("_retrieval", "embeddings", "_recall"), "logic"),
    "store": "store",
    "adapters": "stores",
    **dict.fromkeys(("_sync", "traces"), "sync"),
    **dict.fromkeys(("frames", "graph", "charts", "widgets", "_io", "_demo", "_evaluate", "_display", "_static"),
                    "explore"),
    **dict.fromkeys(("_serve", "cli", "tools", "__main__", "langgraph", "otel"), "serve"),
}
GROUND = "memkit._core"
# Each backend is a folder of its own and imports no other backend; what two share sits beside them
# (``_graph``: the Cypher store FalkorDB and Neo4j both extend; ``_sqlbase``: the SQL dialects).
BACKENDS = ("_memory", "_sqlite", "_postgres", "_falkordb", "_neo4j", "_mem0")
# Composition, not a shared part: Mem0 keeps the recalls and marks mem0 has no place for in a SQLite file.
USES_ANOTHER_BACKEND = {("_mem0", "_sqlite")}
_BESIDE = ("testing",)  # may import every layer, like the package's face


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    lines: int
    #: memkit modules it imports when it runs (module level or in a function; not for type checking only).
    runtime: dict[str, int] = field(default_factory=dict)
    #: Every memkit module it names in an import anywhere (type-checking blocks too).
    anywhere: dict[str, int] = field(default_factory=dict)


def _name_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _walk_imports(node: ast.AST, runs: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import below ``node`` and whether it ever runs (``False``: under ``if TYPE_CHECKING``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, runs
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.body:
                yield from _walk_imports(ast.Module(body=[stmt], type_ignores=[]), False)
            for stmt in child.orelse:
                yield from _walk_imports(ast.Module(body=[stmt], type_ignores=[]), runs)
        else:
            yield from _walk_imports(child, runs)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _load() -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        modules[_name_of(path)] = Module(_name_of(path), path, ast.parse(text, str(path)), len(text.splitlines()))

    def existing(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for module in modules.values():
        is_package = module.path.name == "__init__.py"
        for node, runs in _walk_imports(module.tree, True):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = module.name if is_package else module.name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                # ``from memkit import _marks`` imports the module memkit._recall._marks; ``from memkit import open``
                # only the package.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target.split(".")[0] != "memkit":
                    continue
                found = existing(target)
                if found is None or found == module.name:
                    continue
                module.anywhere.setdefault(found, node.lineno)
                if runs:
                    module.runtime.setdefault(found, node.lineno)
    return modules


MODULES = _load()


def _where(module: Module, line: int) -> str:
    return f"{module.path.relative_to(ROOT)}:{line}"


def package_of(name: str) -> str:
    """The package a module belongs to: ``memkit`` and the first name under it."""
    return ".".join(name.split(".")[:2])


def layer_of(name: str) -> str | None:
    """The layer of a memkit module's package (``None``: the package face or ``memkit.testing``)."""
    parts = name.split(".")
    if len(parts) == 1 or parts[1] in _BESIDE:
        return None
    assert parts[1] in _LAYER_OF, (
        f"{name} is in no layer: add {parts[1]!r} to _LAYER_OF in tests/test_architecture.py (where does it sit?)"
    )
    return _LAYER_OF[parts[1]]


# -- the contracts: each returns {offending module (or cycle): what it does} ------------------


def import_cycles() -> dict[str, str]:
    """Strongly connected groups of the import graph (Tarjan's algorithm).

    An import inside a function counts: deferring it hides a cycle from the interpreter, not
    from a reader, who still cannot understand one module without the other. An import for
    type checking only does not."""
    graph = {name: sorted(m.runtime) for name, m in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a long import chain cannot hit the recursion limit.
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))

    for name in graph:
        if name not in index:
            visit(name)
    found: dict[str, str] = {}
    for group in groups:
        members = set(group)
        edges = [f"{a} imports {b} ({_where(MODULES[a], MODULES[a].runtime[b])})"
                 for a in group for b in sorted(MODULES[a].runtime) if b in members]
        found[" <-> ".join(group)] = "import cycle: " + "; ".join(edges)
    return found


def package_cycles() -> dict[str, str]:
    """Pairs of packages that import each other (anywhere, type-checking imports too)."""
    arrows: dict[tuple[str, str], str] = {}
    for name, module in MODULES.items():
        for target, line in sorted(module.anywhere.items()):
            a, b = package_of(name), package_of(target)
            if a != b and "memkit" not in (a, b):
                arrows.setdefault((a, b), f"{name} imports {target} ({_where(module, line)})")
    return {f"{a} <-> {b}": f"package cycle: {why}; {arrows[(b, a)]}"
            for (a, b), why in sorted(arrows.items()) if a < b and (b, a) in arrows}


def ground_floor_imports() -> dict[str, str]:
    """Modules of the ground floor that import anything of memkit outside it."""
    found: dict[str, str] = {}
    for name, module in MODULES.items():
        if package_of(name) != GROUND:
            continue
        out = [f"{target} ({_where(module, line)})" for target, line in sorted(module.anywhere.items())
               if package_of(target) != GROUND]
        if out:
            found[name] = f"{name} (the ground floor) imports " + ", ".join(out)
    return found


def backends_importing_backends() -> dict[str, str]:
    """Modules of one backend's folder that import another backend's."""
    def backend(name: str) -> str | None:
        parts = name.split(".")
        return parts[2] if len(parts) > 2 and parts[1] == "adapters" and parts[2] in BACKENDS else None

    found: dict[str, str] = {}
    for name, module in MODULES.items():
        mine = backend(name)
        if mine is None:
            continue
        other = [f"{target} ({_where(module, line)})" for target, line in sorted(module.anywhere.items())
                 if backend(target) not in (None, mine) and (mine, backend(target)) not in USES_ANOTHER_BACKEND]
        if other:
            found[name] = f"{name} (backend {mine}) imports " + ", ".join(other)
    return found


def test_every_backend_is_a_folder() -> None:
    adapters = PACKAGE / "adapters"
    assert {p.name for p in adapters.iterdir() if p.is_dir() and (p / "__init__.py").exists()} >= set(BACKENDS)


def looks_up(layer: str) -> dict[str, str]:
    """Modules of ``layer`` that import a module of a higher layer (anywhere in the file)."""
    rank = LAYERS.index(layer)
    found: dict[str, str] = {}
    for name, module in MODULES.items():
        if layer_of(name) != layer:
            continue
        above = [
            f"{target} ({layer_of(target)}, {_where(module, line)})"
            for target, line in sorted(module.anywhere.items())
            if (other := layer_of(target)) is not None and LAYERS.index(other) > rank
        ]
        if above:
            found[name] = f"{name} ({layer}) imports " + ", ".join(above)
    return found


def run_sync_outside_the_boundary() -> dict[str, str]:
    """Modules other than memkit._sync that name ``run_sync`` (import it, call it, pass it on)."""
    found: dict[str, str] = {}
    for name, module in MODULES.items():
        if name == "memkit._sync":
            continue
        lines = sorted({
            node.lineno for node in ast.walk(module.tree)
            if (isinstance(node, ast.Name) and node.id == "run_sync")
            or (isinstance(node, ast.Attribute) and node.attr == "run_sync")
            or (isinstance(node, ast.ImportFrom) and any(a.name == "run_sync" for a in node.names))
        })
        if lines:
            found[name] = f"{name} uses run_sync at line(s) {', '.join(map(str, lines))}; go through memkit._sync"
    return found


def long_modules() -> dict[str, str]:
    """Python modules and the JavaScript shipped beside them over the limit."""
    found = {name: f"{module.path.relative_to(ROOT)} has {module.lines} lines (at most {MAX_LINES})"
             for name, module in MODULES.items() if module.lines > MAX_LINES}
    for path in sorted(PACKAGE.rglob("*.js")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES:
            found[str(path.relative_to(ROOT))] = f"{path.relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})"
    return found


# -- what today's tree still breaks, and why (delete an entry when its module is fixed) -------

CONTRACTS = {
    "no import cycle": import_cycles,
    "no two packages import each other": package_cycles,
    "the ground floor imports nothing of memkit": ground_floor_imports,
    "no backend imports another": backends_importing_backends,
    **{f"{layer} imports nothing above it": (lambda layer=layer: looks_up(layer)) for layer in LAYERS[:-1]},
    "only memkit._sync calls run_sync": run_sync_outside_the_boundary,
    f"no module over {MAX_LINES} lines": long_modules,
}

KNOWN: dict[str, tuple[set[str], str]] = {}


class KnownViolations(AssertionError):
    """Only the violations listed in KNOWN: the strict xfail of that contract expects this one."""


def _param(name: str) -> object:
    known = KNOWN.get(name)
    if known is None:
        return name
    modules, reason = known
    return pytest.param(name, marks=pytest.mark.xfail(
        strict=True, raises=KnownViolations, reason=f"known: {', '.join(sorted(modules))}: {reason}"))


@pytest.mark.parametrize("contract", [_param(name) for name in CONTRACTS])
def test_contract(contract: str) -> None:
    found = CONTRACTS[contract]()
    known = KNOWN.get(contract, (set(), ""))[0]
    new = sorted(set(found) - known)
    assert not new, f"{contract}:\n" + "\n".join(found[key] for key in new)
    fixed = sorted(known - set(found))
    assert not fixed, (
        f"{contract}: {', '.join(fixed)} no longer break(s) it: remove from KNOWN in tests/test_architecture.py"
    )
    if found:
        raise KnownViolations(f"{contract}:\n" + "\n".join(found[key] for key in sorted(found)))


def test_every_module_has_a_layer_and_a_docstring() -> None:
    """A newcomer finds each module's place (its layer) and what it owns (its docstring)."""
    for name in MODULES:
        layer_of(name)  # asserts with the fix in its message
    undocumented = sorted(name for name, m in MODULES.items() if ast.get_docstring(m.tree) is None)
    assert not undocumented, f"modules without a docstring saying what they own: {undocumented}"


# -- the checker itself, on small trees with a known answer -----------------------------------


def test_the_cycle_finder_names_every_member(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "memkit"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_a.py").write_text("from memkit import _b\n")
    (pkg / "_b.py").write_text("import memkit.sub._c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "_c.py").write_text("from memkit._a import x\n")
    (pkg / "_d.py").write_text("def f():\n    from memkit import _e\n")  # deferred: still a cycle
    (pkg / "_e.py").write_text("from memkit import _d\n")
    (pkg / "_f.py").write_text("import memkit._g\n")
    (pkg / "_g.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memkit import _f\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    monkeypatch.setattr(__import__(__name__), "MODULES", _load())
    cycles = import_cycles()
    assert sorted(cycles) == ["memkit._a <-> memkit._b <-> memkit.sub._c", "memkit._d <-> memkit._e"]
    assert "memkit.sub._c imports memkit._a (memkit/sub/_c.py:1)" in cycles["memkit._a <-> memkit._b <-> memkit.sub._c"]
    assert "memkit._d imports memkit._e (memkit/_d.py:2)" in cycles["memkit._d <-> memkit._e"]
    # a type-checking import is no cycle, but it is an import for the layers
    assert "memkit._f" not in MODULES["memkit._g"].runtime and "memkit._f" in MODULES["memkit._g"].anywhere


def test_the_layer_check_names_the_upward_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "memkit"
    (pkg / "adapters").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "frames.py").write_text("from memkit._sync import run_sync\n")
    (pkg / "_sync.py").write_text("def run_sync(c): ...\n")
    (pkg / "adapters" / "__init__.py").write_text("def f():\n    import memkit.frames\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    monkeypatch.setattr(__import__(__name__), "MODULES", _load())
    assert looks_up("stores") == {
        "memkit.adapters": "memkit.adapters (stores) imports memkit.frames (explore, memkit/adapters/__init__.py:2)"
    }
    assert looks_up("explore") == {}
    assert list(run_sync_outside_the_boundary()) == ["memkit.frames"]


def test_the_package_checks_name_the_arrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = tmp_path / "memkit"
    for sub in ("_core", "store"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "_core" / "_models.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memkit.store._base import Store\n")
    (pkg / "store" / "_base.py").write_text("from memkit._core._models import x\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    monkeypatch.setattr(__import__(__name__), "MODULES", _load())
    # a type-checking import alone: no module cycle at run time, but two rooms tied both ways
    assert import_cycles() == {}
    assert list(package_cycles()) == ["memkit._core <-> memkit.store"]
    assert ground_floor_imports() == {
        "memkit._core._models":
            "memkit._core._models (the ground floor) imports memkit.store._base (memkit/_core/_models.py:3)"
    }
    assert list(looks_up("ground")) == ["memkit._core._models"]
