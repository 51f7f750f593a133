"""Recalls stored in the graph databases, and one search pipeline on every adapter."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from test_recalls import FACTS, NS

import memkit
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.adapters._memory import InMemoryAdapter
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
    assert recalled == [(1, hits[0].id, hits[0].score), (2, hits[1].id, hits[1].score)]
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
