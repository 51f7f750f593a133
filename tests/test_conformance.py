"""Run the shipped conformance suite against the built-in adapters."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memkit.adapters import InMemoryAdapter, SQLiteAdapter
from memkit.testing import ProviderConformance


class TestInMemoryAdapter(ProviderConformance):
    @pytest.fixture
    def make_provider(self) -> Callable[[], InMemoryAdapter]:
        return InMemoryAdapter


class TestSQLiteAdapter(ProviderConformance):
    persistent = True

    @pytest.fixture
    def make_provider(self, tmp_path: Path) -> Callable[[], SQLiteAdapter]:
        return lambda: SQLiteAdapter(tmp_path / "memory.db")


class TestSQLiteAdapterWithEmbeddings(ProviderConformance):
    """The same contract with the default static embedder on (searches run in hybrid mode)."""

    persistent = True

    @pytest.fixture
    def make_provider(self, tmp_path: Path) -> Callable[[], SQLiteAdapter]:
        return lambda: SQLiteAdapter(tmp_path / "memory.db", embedder="default")


class TestInMemoryAdapterWithEmbeddings(ProviderConformance):
    """The in-memory adapter with the default embedder: hybrid search through the same fusion code."""

    @pytest.fixture
    def make_provider(self) -> Callable[[], InMemoryAdapter]:
        return lambda: InMemoryAdapter(embedder="default")


def test_the_readme_says_which_capabilities_each_adapter_lacks(tmp_path: Path) -> None:
    import re

    from memkit._core import _port as _protocols
    from memkit.adapters import FalkorDBAdapter, Mem0Adapter, Neo4jAdapter
    from memkit.store._base import Store
    from memkit.testing._optional import OPTIONAL, _members

    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("| adapter | lacks |", 1)[1].split("\n\n", 1)[0]
    said = {
        name.strip(): set(re.findall(r"`(\w+)`", lacks))
        for row in table.splitlines()[2:]
        for names, lacks in [row.strip("|").split("|")]
        for name in names.split(",")
    }
    def offers(adapter: object, capability: type) -> bool:
        # A store on the base offers what it declares (a class: its class-level declaration); any
        # other provider what it has every member of.
        if isinstance(adapter, type) and issubclass(adapter, Store):
            return _protocols._CAPABILITY[capability] in adapter.capabilities
        if isinstance(adapter, Store):
            return isinstance(adapter, capability)
        return all(m in dir(adapter) for m in _members(capability))

    sqlite, mem0 = SQLiteAdapter(":memory:", embedder=None), Mem0Adapter(tmp_path / "mem0")
    # The graph adapters by class, so no server has to run (the suite checks their instances).
    adapters: dict[str, object] = {"SQLite": sqlite, "in-memory": InMemoryAdapter(), "Mem0": mem0,
                                   "FalkorDB": FalkorDBAdapter, "Neo4j": Neo4jAdapter}
    try:
        lacking = {label: {c.__name__ for c in OPTIONAL if not offers(adapter, c)}
                   for label, adapter in adapters.items()}
    finally:
        sqlite.close()
        mem0.close()
    assert said == lacking
    assert all(hasattr(_protocols, name) for names in said.values() for name in names)
