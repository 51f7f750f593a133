"""Cypher injection: hostile keys, ids, values and queries are inert data on FalkorDB and Neo4j, or rejected."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from memkit import InvalidInputError
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.adapters._graph._store import GraphAdapter
from memkit.graph import amemory_graph
from memkit.testing import FalkorDBServer

HOSTILE = [
    "'}) MATCH (n) DETACH DELETE n //",
    '"}) MATCH (n) DETACH DELETE n //',
    "`) DETACH DELETE n //",
    "x` WITH 1 AS y MATCH (n) DETACH DELETE n //",
    "$memories",
    "trailing backslash \\",
    "\\' OR 1=1 //",
    "line\nbreak and tab\t",
    "CYPHER a=1 MATCH (n) DETACH DELETE n",
    "{relink}",
]


@pytest.fixture(params=["falkordb", "neo4j"])
async def mem(request: pytest.FixtureRequest) -> AsyncIterator[GraphAdapter]:
    adapter: GraphAdapter
    if request.param == "neo4j":
        adapter = Neo4jAdapter(request.getfixturevalue("neo4j_uri"))
        await adapter.reset()  # one database per Neo4j server: start each test from nothing
    else:
        server: FalkorDBServer = request.getfixturevalue("falkordb_server")
        adapter = FalkorDBAdapter.from_url(server.url(f"inject-{uuid.uuid4().hex[:8]}"))
    await adapter.add("sentinel TP53", "keep", "keep", {"gene": "TP53"})
    yield adapter
    # The sentinel in another namespace survived everything the test did.
    [item] = await adapter.get_all("keep", "keep")
    assert item.content == "sentinel TP53"
    await adapter.aclose()


@pytest.mark.parametrize("text", HOSTILE)
async def test_hostile_metadata_keys_and_values_round_trip(mem: GraphAdapter, text: str) -> None:
    meta = {text: text, "gene": text, "tool": text, "nested": {text: [text]}}
    mem_id = await mem.add(text, "u", "a", meta)
    [item] = await mem.get_all("u", "a")
    assert (item.id, item.content, item.metadata) == (mem_id, text, meta)
    graph = await amemory_graph(mem, user_id="u", agent_id="a")
    assert {n.properties["name"] for n in graph.nodes if n.type == "Entity"} == {text}


@pytest.mark.parametrize("text", HOSTILE)
async def test_hostile_ids_are_data(mem: GraphAdapter, text: str) -> None:
    user, agent, workflow = f"u{text}", f"a{text}".replace("\n", " ").replace("\t", " "), f"w{text}"
    user = user.replace("\n", " ").replace("\t", " ")
    workflow = workflow.replace("\n", " ").replace("\t", " ")
    trace_id = await mem.add_trace(agent, workflow, {"tool": text, "step_name": text, "run_id": text,
                                                     "step_index": 0}, user_id=user)
    [item] = await mem.get_all(user, agent)
    assert item.id == trace_id and item.metadata["workflow_id"] == workflow
    graph = await amemory_graph(mem, workflow_id=workflow)
    assert graph.node_types() == {"Namespace": 1, "Memory": 1, "Workflow": 1, "Trace": 1, "Step": 1,
                                  "Tool": 1}
    assert await mem.delete(trace_id, user_id=user, agent_id=agent) is True
    assert await amemory_graph(mem, user_id=user) == type(graph)()


@pytest.mark.parametrize("key", [*HOSTILE, "a`b", "gene}) DETACH DELETE n //", "$x"])
async def test_hostile_filter_keys_are_rejected(mem: GraphAdapter, key: str) -> None:
    await mem.add("something", "u", "a", {"gene": "TP53"})
    with pytest.raises(InvalidInputError):
        await mem.get_all("u", "a", filters={key: 1})
    with pytest.raises(InvalidInputError):
        await mem.search("something", "u", "a", filters={key: {"$ne": 1}})


async def test_hostile_filter_values_match_exactly(mem: GraphAdapter) -> None:
    ids = {text: await mem.add(f"row {i}", "u", "a", {"v": text}) for i, text in enumerate(HOSTILE)}
    for text, mem_id in ids.items():
        assert [i.id for i in await mem.get_all("u", "a", filters={"v": text})] == [mem_id]
        assert [i.id for i in await mem.search("row", "u", "a", limit=50, filters={"v": {"$in": [text]}})] == [mem_id]


@pytest.mark.parametrize("query", ["@content:TP53", "TP53*", "-TP53", "%TP53%", "~TP53", "TP53 | *",
                                   "(TP53", "\"TP53", "TP53') YIELD node MATCH (n) DETACH DELETE n //"])
async def test_full_text_syntax_in_queries_is_plain_words(mem: GraphAdapter, query: str) -> None:
    target = await mem.add("TP53 knockdown", "u", "a")
    await mem.add("unrelated lunch", "u", "a")
    assert [h.id for h in await mem.search(query, "u", "a")] == [target]


async def test_whitespace_variants_never_share_a_namespace_or_an_id(mem: GraphAdapter) -> None:
    # FalkorDB 4.16's range index trims stored strings: an indexed lookup of "ab" also finds "ab ".
    # Neo4j's does not, and the same test holds it to the same promise.
    users = ["ab", "ab ", " ab", "  ab  "]
    ids = {u: await mem.add(f"note of {u!r}", u, "a", {"gene": "TP53"}) for u in users}
    for user, mem_id in ids.items():
        assert [i.id for i in await mem.get_all(user, "a")] == [mem_id]
        assert [i.id for i in await mem.search("note", user, "a")] == [mem_id]
        graph = await amemory_graph(mem, user_id=user)
        assert {n.properties["user_id"] for n in graph.nodes} == {user}
    spaced = await mem.add_many([{"content": "spaced id", "user_id": "u", "agent_id": "a", "id": " x "},
                                 {"content": "plain id", "user_id": "u", "agent_id": "a", "id": "x"}])
    assert spaced == [" x ", "x"]
    got = await mem.get("x")
    assert got is not None and got.content == "plain id"
    assert await mem.delete("x") is True
    got = await mem.get(" x ")
    assert got is not None and got.content == "spaced id"


async def test_racing_writers_cannot_duplicate_an_id(mem: GraphAdapter) -> None:
    import asyncio

    row = {"content": "same id", "user_id": "u", "agent_id": "a", "id": "fixed-id"}
    results = await asyncio.gather(*(mem.add_many([row]) for _ in range(8)), return_exceptions=True)
    assert sum(r == ["fixed-id"] for r in results) == 1
    assert all(isinstance(r, InvalidInputError) for r in results if r != ["fixed-id"])
    assert [i.id for i in await mem.get_all("u", "a")] == ["fixed-id"]
