"""The PostgreSQL store on a real server (pgvector included): the conformance suite, keyword-only
and hybrid, and what only a server store has to show."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from memkit.adapters._postgres import PostgresAdapter
from memkit.testing import PostgresServer, ProviderConformance


def _database(server: PostgresServer) -> str:
    return server.url(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def keyword_db(postgres_server: PostgresServer) -> str:
    return _database(postgres_server)


@pytest.fixture(scope="module")
def hybrid_db(postgres_server: PostgresServer) -> str:
    return _database(postgres_server)


class TestPostgresAdapter(ProviderConformance):
    """Keyword-only: memkit's BM25 in SQL."""

    persistent = True

    @pytest.fixture
    def make_provider(self, keyword_db: str) -> Callable[[], PostgresAdapter]:
        return lambda: PostgresAdapter(keyword_db, embedder=None)


class TestPostgresAdapterWithEmbeddings(ProviderConformance):
    """Hybrid: the default static embedder's vectors in pgvector."""

    persistent = True

    @pytest.fixture
    def make_provider(self, hybrid_db: str) -> Callable[[], PostgresAdapter]:
        return lambda: PostgresAdapter(hybrid_db, embedder="default")
