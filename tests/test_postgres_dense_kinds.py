"""The kinds of graph a PostgreSQL vector index segment is: new segments are ``halfvec`` graphs
(the vectors rounded to 16-bit floats) whose candidates carry the full vectors' cosines; a store
upgraded from an earlier schema keeps its ``vector`` segments, searches them, and has them rebuilt
as ``halfvec`` graphs by later builds, even when a build is killed midway."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest
from test_postgres_dense_segments import _database, _state, _until

from memkit._core._errors import ConfigError
from memkit.adapters._postgres import _adapter as _postgres
from memkit.adapters._postgres import _index as _postgres_index
from memkit.adapters._postgres import _sql as _postgres_sql
from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.adapters._postgres._schema import SCHEMA_VERSION
from memkit.testing import PostgresServer

_TOPICS = ["golden retriever puppy", "quarterly tax filing", "kinase assay buffer", "sourdough starter",
           "tide pool anemone", "violin bow rosin"]


def _as_schema_5(url: str, ends: list[int]) -> dict[str, int]:
    """Turn a store into what schema 5 left: ``vector`` graphs over ``ends``, recorded as bare ends."""
    with psycopg.connect(url, autocommit=True) as conn:
        for (name,) in conn.execute("SELECT relname FROM pg_class WHERE relname LIKE 'memories_embedding%%'"
                                    " AND relkind = 'i'").fetchall():
            conn.execute(f"DROP INDEX {name}")
        for lo, hi in zip([0, *ends], ends, strict=False):
            name = f"memories_embedding_{lo}_{hi}" if lo else f"memories_embedding_{hi}"
            where = f"seq > {lo} AND seq <= {hi}" if lo else f"seq <= {hi}"
            conn.execute(f"CREATE INDEX {name} ON memories USING hnsw (embedding vector_cosine_ops) WHERE {where}")
        conn.execute("UPDATE memkit_meta SET value = %s WHERE key = 'vector_segments'", (" ".join(map(str, ends)),))
        conn.execute("UPDATE memkit_meta SET value = '5' WHERE key = 'schema_version'")
    return _state(url)[1]


def _notes(agent: str, count: int, tag: str = "note") -> list[dict[str, str]]:
    return [{"content": f"{_TOPICS[i % len(_TOPICS)]} {tag} {i}", "user_id": "u", "agent_id": agent}
            for i in range(count)]


async def test_an_upgraded_store_keeps_its_vector_segments_until_builds_rebuild_them_as_halfvec(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 0)  # namespaces this small go through HNSW too
    url = _database(postgres_server)
    mem = PostgresAdapter(url)
    try:
        # Two users' namespaces interleaved, as two agents writing at once leave them.
        for i in range(0, 240, 40):
            await mem.add_many(_notes("a", 240)[i:i + 40] + _notes("b", 240, "entry")[i:i + 40])
        assert await mem.index_vectors() == 480
    finally:
        await mem.aclose()
    old = _as_schema_5(url, [300, 480])

    mem = PostgresAdapter(url)  # the upgrade to schema 6
    try:
        # It rebuilds nothing: the same graphs, recorded as before, and searched.
        assert _state(url) == ("300 480", old)
        hits = await mem.search("kinase assay buffer note 86", "u", "a", mode="semantic", limit=3)
        assert hits[0].content == "kinase assay buffer note 86"
        assert all(h.agent_id == "a" for h in await mem.search("kinase assay", "u", "a", mode="semantic", limit=100))
        with monkeypatch.context() as older:  # a memkit of schema 5 refuses the upgraded store
            older.setattr(_postgres, "SCHEMA_VERSION", 5)
            with pytest.raises(ConfigError, match=f"schema version {SCHEMA_VERSION}"):
                PostgresAdapter(url)

        # A write starts a background build: nothing new is due, so it rebuilds the first old segment
        # (and only it: the build once writes stop, which would rebuild the next, is put off here).
        monkeypatch.setattr(_postgres_index, "IDLE_S", 3_600.0)
        await mem.add("a newt in the pond", "u", "b")
        indexes = await _until(url, "300:halfvec 480")
        assert sorted(indexes) == ["memories_embedding_0_300_halfvec", "memories_embedding_300_480"]
        assert indexes["memories_embedding_300_480"] == old["memories_embedding_300_480"]
        assert (await mem.search("tide pool anemone entry 100", "u", "b", mode="semantic", limit=3))[0].content \
            == "tide pool anemone entry 100"
        assert await mem.index_vectors() == 481  # the rest, waited for
        assert _state(url)[0] == "300:halfvec 480:halfvec 481:halfvec"
        assert sorted(_state(url)[1]) == ["memories_embedding_0_300_halfvec", "memories_embedding_300_480_halfvec",
                                          "memories_embedding_480_481_halfvec"]
        for agent, tag in (("a", "note"), ("b", "entry")):
            found = await mem.search(f"violin bow rosin {tag} 5", "u", agent, mode="semantic", limit=240)
            assert found[0].content == f"violin bow rosin {tag} 5"
            assert {h.agent_id for h in found} == {agent}
    finally:
        await mem.aclose()


async def test_a_halfvec_graph_picks_the_rows_and_the_full_vectors_score_them(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Searching through halfvec segments gives the exact scan's scores, not 16-bit ones: on a store
    small enough that every graph walk finds all of its rows, the two answers are identical."""
    url = _database(postgres_server)
    mem = PostgresAdapter(url)
    try:
        await mem.add_many(_notes("a", 150) + _notes("b", 90, "entry"))
        await mem.index_vectors()
        await mem.add_many(_notes("a", 30, "late"))  # in no segment yet: scored exactly either way
        assert _state(url)[0] == "240:halfvec"
        for query, mode in (("sourdough starter note 13", "semantic"), ("puppy late", "hybrid")):
            monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 0)
            graph = await mem.search(query, "u", "a", mode=mode, limit=40)
            monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 10_000)
            exact = await mem.search(query, "u", "a", mode=mode, limit=40)
            assert [(h.id, h.score) for h in graph] == [(h.id, h.score) for h in exact]
            assert {h.agent_id for h in graph} == {"a"}
    finally:
        await mem.aclose()


_REBUILD = """
import asyncio, sys
from memkit.adapters._postgres._adapter import PostgresAdapter

async def main():
    mem = PostgresAdapter(sys.argv[1])
    await mem.index_vectors()

asyncio.run(main())
"""


def _kill_while_building(url: str) -> None:
    """Run ``index_vectors()`` in a process of its own and kill -9 it once its build is running."""
    child = subprocess.Popen([sys.executable, "-c", _REBUILD, url], stdout=subprocess.DEVNULL)
    try:
        seen = False
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and child.poll() is None:
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX%%'"
                                   " AND state = 'active' AND datname = current_database()").fetchone()
            seen = bool(row and row[0])
            if seen:
                os.kill(child.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
        assert seen, "the rebuild was never seen running"
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()


async def test_killing_a_process_while_it_rebuilds_a_segment_leaves_a_usable_store(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 0)
    url = _database(postgres_server)
    mem = PostgresAdapter(url)
    try:
        for i in range(0, 6_000, 1_000):
            await mem.add_many(_notes("a", 6_000)[i:i + 1_000])
        await mem.index_vectors()
    finally:
        await mem.aclose()
    old = _as_schema_5(url, [6_000])
    with psycopg.connect(url, autocommit=True) as conn:  # the upgrade, before the build starts
        conn.execute("UPDATE memkit_meta SET value = '6' WHERE key = 'schema_version'")
    _kill_while_building(url)
    mem = PostgresAdapter(url)
    try:
        # Usable at once: the old graph is still recorded, whatever the killed build left beside it.
        assert _state(url)[0] == "6000"
        assert _state(url)[1]["memories_embedding_6000"] == old["memories_embedding_6000"]
        hits = await mem.search("kinase assay buffer note 3002", "u", "a", mode="semantic", limit=3)
        assert hits[0].content == "kinase assay buffer note 3002"
        assert await mem.index_vectors() == 6_000
        assert _state(url)[0] == "6000:halfvec"
        assert list(_state(url)[1]) == ["memories_embedding_0_6000_halfvec"]
        hits = await mem.search("kinase assay buffer note 3002", "u", "a", mode="semantic", limit=3)
        assert hits[0].content == "kinase assay buffer note 3002"
    finally:
        await mem.aclose()
