"""The conformance suite against a real FalkorDB (always) and a real Neo4j (when configured)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable

import pytest

from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.testing import FalkorDBServer, ProviderConformance

NEO4J_URI = os.environ.get("MEMKIT_NEO4J_URI")


class TestFalkorDBAdapter(ProviderConformance):
    persistent = True

    @pytest.fixture
    def make_provider(self, falkordb_server: FalkorDBServer) -> Callable[[], FalkorDBAdapter]:
        graph = f"conformance-{uuid.uuid4().hex[:8]}"
        return lambda: FalkorDBAdapter.from_url(falkordb_server.url(graph))


@pytest.mark.skipif(not NEO4J_URI, reason="MEMKIT_NEO4J_URI is not set: no Neo4j server to test against")
class TestNeo4jAdapter(ProviderConformance):
    persistent = True

    @pytest.fixture
    def make_provider(self) -> Callable[[], Neo4jAdapter]:
        assert NEO4J_URI
        return lambda: Neo4jAdapter(NEO4J_URI)
