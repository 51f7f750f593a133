"""The conformance suite against a real FalkorDB and a real Neo4j (started here, or ``$MEMKIT_NEO4J_URI``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.testing import FalkorDBServer, ProviderConformance


class TestFalkorDBAdapter(ProviderConformance):
    persistent = True

    @pytest.fixture
    def make_provider(self, falkordb_server: FalkorDBServer) -> Callable[[], FalkorDBAdapter]:
        graph = f"conformance-{uuid.uuid4().hex[:8]}"
        return lambda: FalkorDBAdapter.from_url(falkordb_server.url(graph))


class TestNeo4jAdapter(ProviderConformance):
    persistent = True

    @pytest.fixture
    def make_provider(self, neo4j_uri: str) -> Callable[[], Neo4jAdapter]:
        return lambda: Neo4jAdapter(neo4j_uri)
