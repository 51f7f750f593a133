"""Vector search on FalkorDB (vecf32) and Neo4j (lists): vectors stored with each memory, scored in
the process over the namespace's own vectors as cosine similarity on both.

The embedder here is a deterministic bag-of-words hash: these tests check the
vector plumbing (storage, index, score direction, namespaces, filters), not
retrieval quality, so no model is needed.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import AsyncIterator, Sequence

import numpy as np
import pytest

import memkit
from memkit import ConfigError, InvalidInputError
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.adapters._graph._store import GraphAdapter
from memkit.testing import FalkorDBServer


class HashEmbedder:
    name = "hash-bow-64"
    dim = 64

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.sha1(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)


@pytest.fixture(params=["falkordb", "neo4j"])
async def mem(request: pytest.FixtureRequest) -> AsyncIterator[GraphAdapter]:
    adapter: GraphAdapter
    if request.param == "neo4j":
        adapter = Neo4jAdapter(request.getfixturevalue("neo4j_uri"), embedder=HashEmbedder())
        await adapter.reset()
    else:
        server: FalkorDBServer = request.getfixturevalue("falkordb_server")
        adapter = FalkorDBAdapter.from_url(server.url(f"vec-{uuid.uuid4().hex[:8]}"), embedder=HashEmbedder())
    yield adapter
    await adapter.aclose()


async def test_semantic_search_scores_cosine_and_stays_in_its_namespace(mem: GraphAdapter) -> None:
    # many near-identical memories elsewhere, so the global top-k must be widened
    await mem.add_many([{"content": "tumour suppressor TP53 knockdown", "user_id": f"other{i}", "agent_id": "a"}
                        for i in range(300)])
    target = await mem.add("tumour suppressor TP53 knockdown", "u", "a", {"k": 1})
    await mem.add("lunch options near the lab", "u", "a", {"k": 2})
    hits = await mem.search("TP53 knockdown tumour suppressor", "u", "a", mode="semantic")
    assert hits[0].id == target and len(hits) == 2
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].score > hits[1].score  # type: ignore[operator]
    assert hits[0].score_details == {
        "mode": "semantic", "found_by": ["semantic"], "semantic": {"rank": 1, "score": hits[0].score},
        "dense_path": "exact"}
    assert all(h.user_id == "u" for h in hits)
    filtered = await mem.search("TP53 knockdown", "u", "a", mode="semantic", filters={"k": 2})
    assert [h.metadata["k"] for h in filtered] == [2]


async def test_hybrid_is_the_default_with_an_embedder(mem: GraphAdapter) -> None:
    target = await mem.add("BLAST found homologs of TP53", "u", "a")
    await mem.add("the executor restarted a container", "u", "a")
    hits = await mem.search("TP53 homologs", "u", "a")
    assert hits[0].id == target
    assert hits[0].score_details is not None and hits[0].score_details["mode"] == "hybrid"
    assert {"keyword", "semantic", "fused"} <= set(hits[0].score_details)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


async def test_semantic_needs_an_embedder(falkordb_server: FalkorDBServer) -> None:
    plain = FalkorDBAdapter.from_url(falkordb_server.url(f"novec-{uuid.uuid4().hex[:8]}"))
    assert plain.search_modes == ("keyword",)
    with pytest.raises(InvalidInputError, match="embedder='default'"):
        await plain.search("x", "u", "a", mode="semantic")
    await plain.aclose()
    with pytest.raises(ConfigError):
        FalkorDBAdapter.from_url(falkordb_server.url("x"), embedder="not an embedder")


async def test_embedder_url_option_means_what_it_means_for_sqlite(falkordb_server: FalkorDBServer) -> None:
    graph = f"urlvec-{uuid.uuid4().hex[:8]}"
    with_vectors = memkit.get_memory_provider(falkordb_server.url(graph) + "?embedder=default")
    assert with_vectors.search_modes == ("hybrid", "keyword", "semantic")
    await with_vectors.add("Caroline adopted a golden retriever puppy", "u", "a")
    [hit] = await with_vectors.search("dog", "u", "a", mode="semantic")
    assert hit.score_details["mode"] == "semantic"
    await with_vectors.aclose()
    plain = memkit.get_memory_provider(falkordb_server.url(f"{graph}-kw") + "?embedder=none")
    assert plain.search_modes == ("keyword",)
    await plain.aclose()


async def test_namespace_caches_stay_within_their_budget_and_answer_the_same(mem: GraphAdapter) -> None:
    texts = ["TP53 knockdown in sample {}", "KRAS amplification in sample {}", "lunch near the lab, day {}"]
    users = ("alice", "bob", "carol")
    for user in users:
        await mem.add_many([{"content": t.format(i), "user_id": user, "agent_id": "bio"}
                            for i in range(4) for t in texts])
    expected = {u: [h.id for h in await mem.search("TP53 knockdown", u, "bio", limit=4)] for u in users}
    # The same database through a store whose caches may index 20 memories together: one namespace
    # of 12 at a time, so every search below reads its namespace in again and must answer the same.
    opener = Neo4jAdapter if isinstance(mem, Neo4jAdapter) else FalkorDBAdapter
    small = opener.from_url(mem.dialect.describe(), embedder=HashEmbedder(), max_indexed=20)
    try:
        for _ in range(2):
            for user in users:
                hits = await small.search("TP53 knockdown", user, "bio", limit=4)
                assert [h.id for h in hits] == expected[user] and {h.user_id for h in hits} == {user}
                assert len(small._search._caches) == 1
        with pytest.raises(ConfigError, match="max_indexed"):
            opener.from_url(mem.dialect.describe(), max_indexed=0)
    finally:
        await small.aclose()
