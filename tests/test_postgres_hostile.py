"""SQL injection and many writers on the PostgreSQL store: hostile keys, ids, values and queries are
inert data or rejected; several processes writing one database lose nothing and see each other at once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import pytest

from memkit import InvalidInputError
from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.testing import PostgresServer

HOSTILE = [
    "'); DROP TABLE memories; --",
    "x' OR '1'='1",
    "\"; TRUNCATE namespace_stats; --",
    "$1) OR true --",
    "%s%s%(x)s",
    "E'\\x00' || chr(0)",
    "trailing backslash \\",
    "line\nbreak and tab\t",
    "' || (SELECT current_user) || '",
    "{\"$ne\": 1}",
]
TABLES = {"memories", "namespace_stats", "recalls", "marks", "memkit_meta"}


@pytest.fixture(params=["keyword", "hybrid"])
async def mem(request: pytest.FixtureRequest, postgres_server: PostgresServer) -> AsyncIterator[PostgresAdapter]:
    url = postgres_server.url(f"hostile_{uuid.uuid4().hex[:10]}")
    adapter = PostgresAdapter(url, embedder=None if request.param == "keyword" else "default")
    await adapter.add("sentinel TP53", "keep", "keep", {"gene": "TP53"})
    yield adapter
    # The sentinel in another namespace, and every table, survived everything the test did.
    [item] = await adapter.get_all("keep", "keep")
    assert item.content == "sentinel TP53"
    rows = await adapter._call(adapter._fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
    assert {r[0] for r in rows} >= TABLES
    await adapter.aclose()


@pytest.mark.parametrize("text", HOSTILE)
async def test_hostile_metadata_keys_and_values_round_trip(mem: PostgresAdapter, text: str) -> None:
    meta = {text: text, "gene": text, "nested": {text: [text]}}
    mem_id = await mem.add(text, "u", "a", meta)
    [item] = await mem.get_all("u", "a")
    assert (item.id, item.content, item.metadata) == (mem_id, text, meta)
    assert [h.id for h in await mem.search(text, "u", "a", filters={"gene": text})] in ([mem_id], [])


@pytest.mark.parametrize("text", HOSTILE)
async def test_hostile_ids_are_data(mem: PostgresAdapter, text: str) -> None:
    clean = text.replace("\n", " ").replace("\t", " ")
    user, agent, workflow = f"u{clean}", f"a{clean}", f"w{clean}"
    trace_id = await mem.add_trace(agent, workflow, {"tool": text, "step_name": text, "run_id": clean,
                                                     "step_index": 0}, user_id=user)
    [item] = await mem.get_all(user, agent)
    assert item.id == trace_id and item.metadata["workflow_id"] == workflow
    columns = await mem.trace_columns(workflow_id=workflow, user_id=user)
    assert list(columns["tool"]) == [text] and list(columns["workflow_id"]) == [workflow]
    [own] = await mem.add_many([{"content": "x", "user_id": user, "agent_id": agent, "id": f"id{clean}"}])
    assert (await mem.get(own)) is not None
    assert await mem.delete(trace_id, user_id=user, agent_id=agent) is True
    assert await mem.delete(own, user_id=user, agent_id=agent) is True
    assert await mem.get_all(user, agent) == []


@pytest.mark.parametrize("key", [*HOSTILE, "gene'", "gene\"", "a;b", "$x", "gene->0"])
async def test_hostile_filter_keys_are_rejected(mem: PostgresAdapter, key: str) -> None:
    await mem.add("something", "u", "a", {"gene": "TP53"})
    with pytest.raises(InvalidInputError):
        await mem.get_all("u", "a", filters={key: 1})
    with pytest.raises(InvalidInputError):
        await mem.search("something", "u", "a", filters={key: {"$ne": 1}})


async def test_hostile_filter_values_match_exactly(mem: PostgresAdapter) -> None:
    ids = {text: await mem.add(f"row {i}", "u", "a", {"v": text}) for i, text in enumerate(HOSTILE)}
    for text, mem_id in ids.items():
        assert [i.id for i in await mem.get_all("u", "a", filters={"v": text})] == [mem_id]
        assert [i.id for i in await mem.search("row", "u", "a", limit=50, filters={"v": {"$in": [text]}})] == [mem_id]
        assert [i.id for i in await mem.get_all("u", "a", limit=50, filters={"v": {"$gte": text, "$lte": text}})] \
            == [mem_id]


@pytest.mark.parametrize("query", ["TP53 & !knockdown", "TP53:*", "!TP53", "TP53 <-> knockdown", "'TP53'",
                                   "TP53 | *", "(TP53", "\"TP53", "TP53\\", "TP53'); DROP TABLE memories; --"])
async def test_full_text_syntax_in_queries_is_plain_words(mem: PostgresAdapter, query: str) -> None:
    target = await mem.add("TP53 knockdown", "u", "a")
    await mem.add("unrelated lunch", "u", "a")
    assert [h.id for h in await mem.search(query, "u", "a", mode="keyword")] == [target]


async def test_whitespace_and_case_variants_never_share_a_namespace_or_an_id(mem: PostgresAdapter) -> None:
    users = ["ab", "ab ", " ab", "AB", "ａｂ"]
    ids = {u: await mem.add(f"note of {u!r}", u, "a", {"gene": "TP53"}) for u in users}
    for user, mem_id in ids.items():
        assert [i.id for i in await mem.get_all(user, "a")] == [mem_id]
        assert [i.id for i in await mem.search("note", user, "a")] == [mem_id]
    spaced = await mem.add_many([{"content": "spaced id", "user_id": "u", "agent_id": "a", "id": " x "},
                                 {"content": "plain id", "user_id": "u", "agent_id": "a", "id": "x"}])
    assert spaced == [" x ", "x"]
    assert await mem.delete("x") is True
    got = await mem.get(" x ")
    assert got is not None and got.content == "spaced id"


async def test_racing_writers_cannot_duplicate_an_id(mem: PostgresAdapter) -> None:
    row = {"content": "same id", "user_id": "u", "agent_id": "a", "id": "fixed-id"}
    results = await asyncio.gather(*(mem.add_many([row]) for _ in range(8)), return_exceptions=True)
    assert sum(r == ["fixed-id"] for r in results) == 1
    assert all(isinstance(r, InvalidInputError) for r in results if r != ["fixed-id"])
    assert [i.id for i in await mem.get_all("u", "a")] == ["fixed-id"]


async def test_a_write_is_searchable_at_once_from_another_handle(postgres_server: PostgresServer) -> None:
    """No process keeps an index another one's write could leave stale: every leg reads the database."""
    url = postgres_server.url(f"fresh_{uuid.uuid4().hex[:10]}")
    one, two = PostgresAdapter(url), PostgresAdapter(url)
    try:
        await one.add_many([{"content": f"background note {i}", "user_id": "u", "agent_id": "a"} for i in range(50)])
        for mode in two.search_modes:  # searched before the write
            assert all("zebrafish" not in h.content for h in await two.search("zebrafish", "u", "a", mode=mode))
        assert await two.search("zebrafish", "u", "a", mode="keyword") == []
        new = await one.add("zebrafish fin regeneration assay", "u", "a")
        for mode in ("keyword", "hybrid", "semantic"):
            assert (await two.search("zebrafish fin", "u", "a", mode=mode))[0].id == new
        assert await one.delete(new) is True
        assert new not in {h.id for h in await two.search("zebrafish fin", "u", "a", limit=50)}
    finally:
        await one.aclose()
        await two.aclose()


_WRITER = """
import sys, memkit
url, me, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mem = memkit.open(url)
ids = []
for start in range(0, count, 25):
    if start % 50:
        ids += [mem.add(f"writer {me} note {i} shared", "lab", "bio", {"w": me, "i": i})
                for i in range(start, start + 25)]
    else:
        ids += mem.add_many([{"content": f"writer {me} note {i} shared", "user_id": "lab", "agent_id": "bio",
                              "metadata": {"w": me, "i": i}} for i in range(start, start + 25)])
    mem.search(f"writer {(me + 1) % 4} shared", "lab", "bio", limit=5)
print("\\n".join(ids))
"""


@pytest.mark.slow
def test_four_writer_processes_lose_nothing_and_duplicate_nothing(postgres_server: PostgresServer) -> None:
    url = postgres_server.url(f"writers_{uuid.uuid4().hex[:10]}")
    PostgresAdapter(url).close()  # the schema exists before the race
    count = 100
    children = [subprocess.Popen([sys.executable, "-c", _WRITER, url, str(me), str(count)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in range(4)]
    acknowledged: list[str] = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err[-2000:]
        acknowledged += out.split()
    assert len(acknowledged) == len(set(acknowledged)) == 4 * count

    async def check() -> None:
        mem = PostgresAdapter(url)
        try:
            stored = [i.id async for i in mem.export(user_id="lab", agent_id="bio")]
            assert sorted(stored) == sorted(acknowledged)
            [info] = [n for n in await mem.namespaces() if (n.user_id, n.agent_id) == ("lab", "bio")]
            stats = await mem.stats()
            assert info.count == stats.memories == 4 * count  # the per-namespace counts lost no update
            for me in range(4):
                hits = await mem.search(f"writer {me} note 7", "lab", "bio", limit=3, mode="keyword")
                assert hits[0].metadata == {"w": me, "i": 7}
        finally:
            await mem.aclose()

    asyncio.run(check())


async def test_a_refused_batch_writes_nothing(mem: PostgresAdapter) -> None:
    """A batch travels as one COPY: a duplicate id or a value PostgreSQL cannot store, anywhere in
    it, fails the whole batch with a memkit error, and the namespace's counts stay as they were."""
    [kept] = await mem.add_many([{"content": "first note TP53", "user_id": "u", "agent_id": "a", "id": "taken"}])
    before = await mem.stats()
    good = [{"content": f"note {i} about BRCA1", "user_id": "u", "agent_id": "a"} for i in range(5)]
    bad_rows = [
        {"content": "duplicate", "user_id": "u", "agent_id": "a", "id": "taken"},
        {"content": "a lone surrogate in metadata", "user_id": "u", "agent_id": "a", "metadata": {"k": "x\udc00y"}},
        {"content": "content with a NUL \x00 byte", "user_id": "u", "agent_id": "a"},
        {"content": "a lone surrogate \ud800 here", "user_id": "u", "agent_id": "a"},
    ]
    for bad in bad_rows:
        with pytest.raises(InvalidInputError):
            await mem.add_many([*good[:3], bad, *good[3:]])
        assert [i.id for i in await mem.get_all("u", "a")] == [kept]
        assert await mem.search("BRCA1", "u", "a", mode="keyword") == []
        after = await mem.stats()
        assert (after.memories, after.namespaces) == (before.memories, before.namespaces)
    rows = await mem._call(mem._fetch("SELECT count, terms FROM namespace_stats WHERE user_id = 'u'"))
    [(count, terms)] = rows
    assert count == 1 and terms == len("first note TP53".split())
