"""The PostgreSQL dense leg's cosine statistics: each process keeps a namespace's sample of vectors,
and every search still normalises by the statistics of the namespace as it is now, whoever wrote
to it (another process, another connection), after deletes and a reset, never another namespace's."""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import psycopg
import pytest

from memkit.adapters._postgres import _dense as _postgres_dense
from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.store import _search as _pipeline
from memkit.testing import PostgresServer

# What a search used to compute in SQL every time: the mean and spread of the query's cosine over
# the namespace's sample (its vectors of lowest ``sample`` key).
_REFERENCE = """
SELECT count(*), coalesce(avg(c), 0), coalesce(stddev_pop(c), 0) FROM (
    SELECT -(m.embedding <#> %s::vector) AS c FROM memories m
    WHERE m.user_id = %s AND m.agent_id = %s AND m.embedding IS NOT NULL
    ORDER BY m.sample LIMIT %s
) s
"""

_WRITER = """
import sys, memkit
with memkit.open(sys.argv[1]) as mem:
    mem.add_many([{"content": f"sourdough starter feeding schedule {i} rye flour", "user_id": "u",
                   "agent_id": "a"} for i in range(int(sys.argv[2]))])
"""

_QUERY = "golden retriever puppy at the vet"


async def test_cached_statistics_follow_every_write_from_anywhere(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_postgres_dense, "SAMPLE", 60)  # a sample smaller than the namespace
    monkeypatch.setattr(_postgres_dense, "REREAD_AFTER_S", 0.0)  # every change read at once
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    seen: list[tuple[float, float]] = []
    reads: list[tuple[str, str]] = []
    rank, read = _pipeline.rank, _postgres_dense.SampleCache._read

    def spy_rank(request: Any, hits: Any, dense: Any, *rest: Any) -> Any:
        seen.append((dense.mean, dense.std) if dense is not None else (0.0, 0.0))
        return rank(request, hits, dense, *rest)

    async def spy_read(self: Any, conn: Any, user: str, agent: str, dim: int) -> Any:
        reads.append((user, agent))
        return await read(self, conn, user, agent, dim)

    monkeypatch.setattr(_pipeline, "rank", spy_rank)
    monkeypatch.setattr(_postgres_dense.SampleCache, "_read", spy_read)
    searcher, other = PostgresAdapter(url), PostgresAdapter(url)
    vector = searcher._embed([_QUERY])[0]

    def reference(agent: str) -> tuple[int, float, float]:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(_REFERENCE, (str(vector.tolist()), "u", agent, 60)).fetchone()
        assert row is not None
        n, mean, std = row
        return int(n), float(mean), float(std)

    async def searched(agent: str) -> tuple[float, float]:
        seen.clear()
        await searcher.search(_QUERY, "u", agent, mode="semantic", limit=5)
        assert len(seen) == 1
        return seen[0]

    async def check(agent: str) -> tuple[float, float]:
        got, (n, mean, std) = await searched(agent), reference(agent)
        assert n > 0
        assert got == pytest.approx((mean, std), abs=1e-6), agent
        return got

    try:
        await searcher.add_many([{"content": f"golden retriever puppy note {i} vet visit", "user_id": "u",
                                  "agent_id": "a"} for i in range(80)]
                                + [{"content": f"kinase assay buffer {i}", "user_id": "u", "agent_id": "a"}
                                   for i in range(40)])
        await other.add_many([{"content": f"quarterly tax filing {i}", "user_id": "u", "agent_id": "b"}
                              for i in range(90)])
        first, in_b = await check("a"), await check("b")
        assert first != pytest.approx(in_b, abs=1e-3)  # two namespaces, two samples
        reads.clear()
        assert await check("a") == first and await check("b") == in_b
        assert reads == []  # nothing written: both samples came from this process's cache

        # another process writes 150 memories about something else into namespace a
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", _WRITER, url, "150")
        assert await asyncio.wait_for(child.wait(), 120) == 0
        after_insert = await check("a")
        assert after_insert != pytest.approx(first, abs=1e-3)
        assert reads == [("u", "a")]
        assert await check("b") == in_b

        # another connection deletes the sample's first memories, then one delete and one add
        # that leave the count as it was
        with psycopg.connect(url, autocommit=True) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM memories WHERE user_id = 'u' AND agent_id = 'a'"
                                              " AND content LIKE 'sourdough%' ORDER BY sample LIMIT 40").fetchall()]
        for memory_id in ids:
            assert await other.delete(memory_id)
        after_delete = await check("a")
        assert after_delete != pytest.approx(after_insert, abs=1e-4)
        with psycopg.connect(url, autocommit=True) as conn:
            low = conn.execute("SELECT id FROM memories WHERE user_id = 'u' AND agent_id = 'a'"
                               " ORDER BY sample LIMIT 1").fetchone()
        assert low is not None
        assert await other.delete(low[0])
        await other.add("a dachshund puppy at the vet clinic", "u", "a", metadata={"k": 1})
        before_late = await check("a")

        # a writer whose transaction took its seq early but committed late (below the largest seq),
        # then a delete: the count and the largest seq are back where they were, the sample is not
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute("CREATE TEMP TABLE late AS SELECT * FROM memories WHERE user_id = 'u' AND agent_id = 'a'"
                         " ORDER BY seq DESC LIMIT 1")
            conn.execute("UPDATE late SET seq = -1, id = 'late-writer', sample = -1, embedding ="
                         " (SELECT embedding FROM memories WHERE agent_id = 'b' ORDER BY seq LIMIT 1)")
            conn.execute("INSERT INTO memories SELECT * FROM late")
            conn.execute("UPDATE namespace_stats SET count = count + 1 WHERE user_id = 'u' AND agent_id = 'a'")
            gone = conn.execute("SELECT id FROM memories WHERE user_id = 'u' AND agent_id = 'a' AND seq > 0"
                                " ORDER BY sample DESC LIMIT 1").fetchone()
        assert gone is not None
        assert await other.delete(gone[0])
        assert await check("a") != pytest.approx(before_late, abs=1e-4)

        # a reset from another connection, then a few writes: the old sample is never used again
        assert await other.reset()
        assert await searcher.search(_QUERY, "u", "a", mode="semantic", limit=5) == []
        await other.add_many([{"content": f"sourdough rye loaf {i}", "user_id": "u", "agent_id": "a"}
                              for i in range(5)])
        small = await check("a")
        assert reference("a")[0] == 5
        assert small != pytest.approx(after_delete, abs=1e-4)
        assert await searcher.search(_QUERY, "u", "b", mode="semantic", limit=5) == []
    finally:
        await searcher.aclose()
        await other.aclose()


async def test_a_namespace_changing_faster_than_reads_is_scored_in_sql_exactly(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_postgres_dense, "REREAD_AFTER_S", 3600.0)
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    reads: list[tuple[str, str]] = []
    seen: list[tuple[float, float]] = []
    rank, read = _pipeline.rank, _postgres_dense.SampleCache._read

    def spy_rank(request: Any, hits: Any, dense: Any, *rest: Any) -> Any:
        seen.append((dense.mean, dense.std))
        return rank(request, hits, dense, *rest)

    async def spy_read(self: Any, conn: Any, user: str, *rest: Any) -> Any:
        reads.append((user, rest[0]))
        return await read(self, conn, user, *rest)

    monkeypatch.setattr(_pipeline, "rank", spy_rank)
    monkeypatch.setattr(_postgres_dense.SampleCache, "_read", spy_read)
    searcher, writer = PostgresAdapter(url), PostgresAdapter(url)
    vector = searcher._embed([_QUERY])[0]
    try:
        got = []
        for topic in ("golden retriever puppy", "quarterly tax filing", "sourdough rye starter"):
            await writer.add_many([{"content": f"{topic} {i}", "user_id": "u", "agent_id": "a"} for i in range(30)])
            seen.clear()
            await searcher.search(_QUERY, "u", "a", mode="semantic", limit=5)
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute(_REFERENCE, (str(vector.tolist()), "u", "a", _postgres_dense.SAMPLE)).fetchone()
            assert row is not None
            assert seen == [pytest.approx((float(row[1]), float(row[2])), abs=1e-6)]
            got.append(seen[0])
        assert reads == [("u", "a")]  # read once; the two later changes were scored in SQL
        assert got[0] != pytest.approx(got[1], abs=1e-3) and got[1] != pytest.approx(got[2], abs=1e-3)
    finally:
        await searcher.aclose()
        await writer.aclose()


def _noise(n: int) -> str:
    return "".join(uuid.uuid4().hex for _ in range(n))


def test_a_memory_row_keeps_its_vector_inline(postgres_server: PostgresServer) -> None:
    """A row past PostgreSQL's default 2 kB target (a 384-dimension vector is 1.5 kB) stays in the
    table: an exact dense scan reads each vector with its row, not from the TOAST table."""
    import memkit

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    with memkit.open(url) as mem:
        # Random hex does not compress, so the row cannot be brought under the target that way.
        mem.add_many([{"content": f"sourdough starter feeding schedule {i} rye flour " + _noise(8),
                       "user_id": "u", "agent_id": "a", "metadata": {"note": _noise(12)}}
                      for i in range(50)])
        assert mem.search("rye flour", user_id="u", agent_id="a", limit=3, mode="semantic")
    with psycopg.connect(url) as conn:
        row_bytes, toast_bytes = conn.execute(
            "SELECT (SELECT min(octet_length(m.content) + octet_length(m.metadata::text) + pg_column_size(m.embedding))"
            " FROM memories m),"
            " pg_relation_size(c.reltoastrelid) FROM pg_class c WHERE c.relname = 'memories'").fetchone()
    assert row_bytes > 2_032  # past the default target: without the setting the vectors went to TOAST
    assert toast_bytes == 0
