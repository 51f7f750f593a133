"""Recalls stored in the graph databases, and one search pipeline on every adapter."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from test_recalls import FACTS, NS

import memkit
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.adapters._memory._adapter import InMemoryAdapter
from memkit.adapters._sqlite import SQLiteAdapter
from memkit.testing import FalkorDBServer
from memkit.traces import ExecutionHistory


@pytest.fixture(params=["falkordb", "neo4j"])
async def graph_store(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    adapter: Any
    if request.param == "falkordb":
        server = request.getfixturevalue("falkordb_server")
        adapter = FalkorDBAdapter.from_url(server.url(f"grecalls-{uuid.uuid4().hex[:8]}"))
    else:
        adapter = Neo4jAdapter(request.getfixturevalue("neo4j_uri"))
        await adapter.reset()
    yield adapter
    await adapter.reset()
    await adapter.aclose()


def _edges(graph: Any, kind: str) -> list[Any]:
    return [e for e in graph.edges if e.type == kind]


async def test_a_recall_is_a_node_linked_to_its_step_and_the_memories_it_returned(graph_store: Any) -> None:
    ids = [await graph_store.add(text, *NS) for text in FACTS]
    history = ExecutionHistory(memory_provider=graph_store, workflow_id="wf", agent_id="bio", user_id="u1",
                               run_id="r1")
    async with history.step("plan", tool="llm"):
        hits = await graph_store.search("TP53", *NS, limit=2)
    (recall,) = await graph_store.recalls(workflow_id="wf")
    assert [h.id for h in recall.hits] == [h.id for h in hits] and {h.id for h in hits} == {ids[0], ids[3]}

    view = await graph_store.graph(*NS, workflow_id="wf")
    recall_nodes = [n for n in view.nodes if n.type == "Recall"]
    assert [(n.id, n.properties["query"], n.properties["step_name"]) for n in recall_nodes] == [
        (recall.id, "TP53", "plan")]
    step = next(n for n in view.nodes if n.type == "Step")
    assert [(e.source, e.target) for e in _edges(view, "HAS_RECALL")] == [(step.id, recall.id)]
    recalled = sorted((e.properties["rank"], e.target, e.properties["score"]) for e in _edges(view, "RECALLED"))
    # FalkorDB hands doubles back with 15 significant digits: the edge's score is the hit's, rounded.
    assert recalled == [(1, hits[0].id, pytest.approx(hits[0].score, rel=1e-12)),
                        (2, hits[1].id, pytest.approx(hits[1].score, rel=1e-12))]
    # the recalled memories are in the workflow's view (that is what the step knew)
    assert {hits[0].id, hits[1].id} <= {n.id for n in view.nodes if n.type == "Memory"}

    around = await graph_store.neighbourhood(recall.id)
    assert {n.type for n in around.nodes} == {"Recall", "Step", "Memory"}

    # another namespace sees none of it
    other = await graph_store.graph("u2", "bio")
    assert not [n for n in other.nodes if n.type == "Recall"]
    assert await graph_store.recalls(user_id="u2") == []
    assert await graph_store.get_recall(recall.id, user_id="u2") is None


async def test_deleting_a_memory_drops_its_edge_and_keeps_the_snapshot(graph_store: Any) -> None:
    ids = [await graph_store.add(text, *NS) for text in FACTS]
    with memkit.recall_scope("wf", step="s", step_index=0):
        await graph_store.search("TP53", *NS, limit=2)
    (recall,) = await graph_store.recalls()
    assert await graph_store.delete(ids[0])
    around = await graph_store.neighbourhood(recall.id)
    assert {e.target for e in _edges(around, "RECALLED")} == {ids[3]}
    again = await graph_store.get_recall(recall.id, user_id="u1", agent_id="bio")
    assert again is not None and [(h.id, h.content) for h in again.hits] == [(h.id, h.content) for h in recall.hits]
    assert ids[0] in {h.id for h in again.hits}


async def test_a_step_in_another_namespace_is_not_linked(graph_store: Any) -> None:
    for text in FACTS:
        await graph_store.add(text, *NS)
    # the history writes its steps as ("system", "bio"); the search reads ("u1", "bio")
    history = ExecutionHistory(memory_provider=graph_store, workflow_id="wf", agent_id="bio", run_id="r1")
    async with history.step("plan", tool="llm"):
        await graph_store.search("TP53", *NS)
    (recall,) = await graph_store.recalls()
    assert recall.step_name == "plan"
    around = await graph_store.neighbourhood(recall.id)
    assert not _edges(around, "HAS_RECALL")
    assert not [n for n in (await graph_store.graph("system", "bio")).nodes if n.type == "Recall"]


async def test_a_step_stored_before_the_recall_is_linked_too(graph_store: Any) -> None:
    for text in FACTS:
        await graph_store.add(text, *NS)
    await graph_store.add_trace("bio", "wf", {"step_index": 0, "step_name": "plan", "status": "success",
                                             "run_id": "r1"}, user_id="u1")
    with memkit.recall_scope("wf", step="plan", step_index=0, run_id="r1"):
        await graph_store.search("KRAS", *NS)
    (recall,) = await graph_store.recalls()
    around = await graph_store.neighbourhood(recall.id)
    assert [n.properties["name"] for n in around.nodes if n.type == "Step"] == ["plan"]


async def test_reset_clears_recalls(graph_store: Any) -> None:
    memory_id = await graph_store.add(FACTS[0], *NS)
    graph_store.record_recalls = True
    await graph_store.search("TP53", *NS)
    (recall,) = await graph_store.recalls()
    # a search outside any step: no Recall in the namespace's view, but the memory knows who recalled it
    assert not [n for n in (await graph_store.graph(*NS)).nodes if n.type == "Recall"]
    around = await graph_store.neighbourhood(memory_id)
    assert [n.id for n in around.nodes if n.type == "Recall"] == [recall.id]
    await graph_store.reset()
    assert await graph_store.recalls() == []


def _shape(details: Any) -> Any:
    """The keys of score_details, nested (values differ by engine; the shape must not)."""
    if isinstance(details, dict):
        return {k: _shape(v) for k, v in details.items()}
    return type(details).__name__ if details is not None else None


MIXED = (
    "Caroline adopted a golden retriever puppy last spring",
    "Melanie paints landscapes at the lake every weekend",
    "the kinase assay failed twice because the buffer expired",
    "Caroline's dog loves chasing tennis balls",
    "Jon is training for a marathon in October",
    "the sequencer run finished overnight with good quality",
)


async def test_the_same_query_ranks_the_same_on_every_adapter(
    tmp_path: Path, falkordb_server: FalkorDBServer
) -> None:
    stores: dict[str, Any] = {
        "memory": InMemoryAdapter(embedder="default"),
        "sqlite": SQLiteAdapter(tmp_path / "same.db", embedder="default"),
        "falkordb": FalkorDBAdapter.from_url(falkordb_server.url(f"same-{uuid.uuid4().hex[:8]}"),
                                             embedder="default"),
    }
    try:
        for store in stores.values():
            for text in MIXED:
                await store.add(text, *NS)
        for query, mode in (("puppy", "hybrid"), ("dog", "hybrid"), ("marathon training", "hybrid"),
                            ("assay buffer", "hybrid"), ("a pet", "semantic"), ("Caroline", "keyword")):
            answers = {name: await store.search(query, *NS, limit=4, mode=mode) for name, store in stores.items()}
            orders = {name: [h.content for h in hits] for name, hits in answers.items()}
            assert orders["sqlite"], (query, mode)
            assert orders["memory"] == orders["sqlite"] == orders["falkordb"], (query, mode, orders)
            shapes = {name: [_shape(h.score_details) for h in hits] for name, hits in answers.items()}
            assert shapes["memory"] == shapes["sqlite"] == shapes["falkordb"], (query, mode)
            assert all(h.score_details is not None and h.score_details["found_by"]
                       for hits in answers.values() for h in hits)
            if mode != "keyword":  # cosines come from the same vectors: equal to float32 precision
                cosines = {name: [h.score_details[mode if mode == "semantic" else "semantic"]["score"]
                                  for h in hits] for name, hits in answers.items()}
                assert cosines["falkordb"] == pytest.approx(cosines["sqlite"], abs=1e-5)
    finally:
        for store in stores.values():
            await store.reset()
            await store.aclose()


async def test_hybrid_options_mean_the_same_on_a_graph(falkordb_server: FalkorDBServer) -> None:
    store = FalkorDBAdapter.from_url(falkordb_server.url(f"opts-{uuid.uuid4().hex[:8]}"), embedder="default")
    try:
        for text in MIXED:
            await store.add(text, *NS)
        # keyword only: the semantic leg contributes nothing, only keyword hits come back
        only_keyword = await store.search("puppy", *NS, hybrid=memkit.HybridConfig(alpha=0.0, min_similarity=1.0))
        assert [h.content for h in only_keyword] == [MIXED[0]]
        # a semantic-only memory must reach min_similarity
        loose = await store.search("puppy", *NS, hybrid=memkit.HybridConfig(min_similarity=-1.0), limit=6)
        assert len(loose) == len(MIXED)
        assert {tuple(h.score_details["found_by"]) for h in loose} >= {("keyword", "semantic"), ("semantic",)}
    finally:
        await store.reset()
        await store.aclose()


async def test_a_failing_recall_write_on_a_graph_warns_and_the_search_answers(graph_store: Any) -> None:
    await graph_store.add(FACTS[0], *NS)
    plain = await graph_store.search("TP53", *NS)

    async def broken(bodies: list[dict[str, Any]]) -> int:
        raise ConnectionError("the database went away")

    graph_store._write_recalls = broken
    with memkit.recall_scope("wf", step="s"), pytest.warns(RuntimeWarning, match="went away"):
        answered = await graph_store.search("TP53", *NS)
    assert [(h.id, h.score) for h in answered] == [(h.id, h.score) for h in plain]
    del graph_store._write_recalls
    assert await graph_store.recalls() == []


# Three conversations sharing one graph, as in a real deployment: the keyword leg must rank each
# namespace by its own statistics (the database's full-text scores flattened exactly here).
CONVERSATIONS = {
    ("u1", "chat-a"): [
        "Caroline: I went to the LGBTQ support group yesterday and it was powerful",
        "Melanie: that sounds wonderful, I painted a lake sunrise last weekend",
        "Caroline: I am researching adoption agencies for next year",
        "Melanie: my kids loved the camping trip to the beach",
        "Caroline: the support group helped me feel accepted",
        "Melanie: I signed up for a pottery class on Tuesdays",
        "Caroline: counseling as a career keeps coming up when I think about the future",
    ],
    ("u1", "chat-b"): [
        "Jon: I lost my job at the bank and want to open a dance studio",
        "Gina: I started an online clothing store after losing my job",
        "Jon: the dance studio needs a lease and a loan",
        "Gina: my store had its first big sale last weekend",
        "Jon: a dance competition in Paris inspired me",
    ],
    ("u2", "chat-a"): [
        "Caroline: support group meeting notes for another user entirely",
        "adoption paperwork for a different tenant",
    ],
}


async def _drop_neo4j_vector_index(uri: str) -> None:
    """The test Neo4j is one database for the session and its vector index has one dimension:
    other tests use small test embedders, this one the shipped 384-dimensional one."""
    plain = Neo4jAdapter(uri)  # no embedder: touches no vector index
    try:
        await plain.dialect.write([("DROP INDEX memkit_memory_embedding IF EXISTS", {})])
    finally:
        await plain.aclose()


async def test_keyword_and_hybrid_rank_the_same_on_every_adapter_with_shared_graphs(
    tmp_path: Path, falkordb_server: FalkorDBServer, neo4j_uri: str
) -> None:
    await _drop_neo4j_vector_index(neo4j_uri)
    stores: dict[str, Any] = {
        "memory": InMemoryAdapter(embedder="default"),
        "sqlite": SQLiteAdapter(tmp_path / "conv.db", embedder="default"),
        "falkordb": FalkorDBAdapter.from_url(falkordb_server.url(f"conv-{uuid.uuid4().hex[:8]}"),
                                             embedder="default"),
        "neo4j": Neo4jAdapter(neo4j_uri, embedder="default"),
    }
    try:
        await stores["neo4j"].reset()
        for store in stores.values():
            for (user, agent), lines in CONVERSATIONS.items():
                for i, line in enumerate(lines):
                    await store.add(line, user, agent, {"turn": i, "speaker": line.split(":")[0]})
        queries = ("What did Caroline research?", "support group", "Melanie last weekend",
                   "Jon dance studio loan", "lost job", "adoption")
        for (user, agent) in (("u1", "chat-a"), ("u1", "chat-b")):
            for query in queries:
                for mode, filters in (("keyword", None), ("hybrid", None), ("keyword", {"turn": {"$gte": 2}})):
                    answers = {name: await store.search(query, user, agent, limit=5, mode=mode, filters=filters)
                               for name, store in stores.items()}
                    orders = {name: [h.content for h in hits] for name, hits in answers.items()}
                    assert orders["memory"] == orders["sqlite"] == orders["falkordb"], (query, mode, orders)
                    # never another namespace's memory, whatever the shared graph holds
                    assert {(h.user_id, h.agent_id) for hits in answers.values() for h in hits} <= {(user, agent)}
                    if filters:
                        assert all(h.metadata["turn"] >= 2 for hits in answers.values() for h in hits)
                    if mode == "keyword":  # the same BM25: the same scores, not only the same order
                        scores = {name: [h.score for h in hits] for name, hits in answers.items()}
                        assert scores["falkordb"] == pytest.approx(scores["sqlite"], rel=1e-9)
                        # Neo4j's keyword leg is the same BM25 (its vector scores come back on a
                        # (1 + cos) / 2 scale, so near-equal cosines may swap in hybrid: keyword only)
                        assert orders["neo4j"] == orders["sqlite"], (query, mode, orders)
                        assert scores["neo4j"] == pytest.approx(scores["sqlite"], rel=1e-9)
    finally:
        for store in stores.values():
            await store.reset()
            await store.aclose()
        await _drop_neo4j_vector_index(neo4j_uri)


async def test_a_graph_search_sees_another_processes_writes_and_deletes(falkordb_server: FalkorDBServer) -> None:
    """Two adapters on one graph stand for two processes: each keeps its own keyword cache."""
    url = falkordb_server.url(f"procs-{uuid.uuid4().hex[:8]}")
    first, second = (FalkorDBAdapter.from_url(url, embedder="default") for _ in range(2))
    try:
        kept = await first.add("the kinase assay failed", *NS)
        assert [h.id for h in await first.search("kinase", *NS, mode="keyword")] == [kept]  # builds first's cache
        written = await second.add("kinase inhibitor arrived", *NS)
        for mode in ("keyword", "hybrid"):  # read in as an addition
            assert {h.id for h in await first.search("kinase", *NS, mode=mode)} == {kept, written}
        # as_of applies to the cached index: only what existed when `kept` was written
        then = (await first.get(kept)).created_at
        assert [h.id for h in await first.search("kinase", *NS, mode="keyword", as_of=then)] == [kept]
        assert await second.delete(kept)
        assert [h.id for h in await first.search("kinase", *NS, mode="keyword")] == [written]
        # a delete and a write elsewhere leave the count alone; then first writes too
        swapped = await second.add("kinase buffer expired", *NS)
        assert await second.delete(written)
        own = await first.add("kinase gel imaged", *NS)
        assert {h.id for h in await first.search("kinase", *NS, mode="keyword")} == {swapped, own}
        assert await first.search("kinase", *NS, mode="keyword", as_of=datetime.fromtimestamp(0, tz=UTC)) == []
        # another namespace's memories never come back, even after it is cached
        await second.add("kinase in another namespace", "u9", "other")
        assert {h.user_id for h in await first.search("kinase", *NS, mode="keyword")} == {NS[0]}
        await second.reset()
        assert await first.search("kinase", *NS, mode="keyword") == []
    finally:
        await first.reset()
        await first.aclose()
        await second.aclose()
