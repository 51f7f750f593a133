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
