"""The PostgreSQL keyword leg's postings: kept right through every write, read namespace-first, and
giving the exhaustive BM25 statement's rows whether the bound proves the cut or not."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.testing import PostgresServer

# Postings as the triggers should have them: one per (memory, term), from the memories themselves.
_EXPECTED = """
SELECT m.user_id, m.agent_id, hashtextextended(u.lexeme, 0), memkit_impact(cardinality(u.positions), m.terms_len), m.seq
FROM memories m CROSS JOIN LATERAL unnest(m.terms) AS u(lexeme, positions, weights)
ORDER BY 1, 2, 3, 5
"""
_STORED = """
SELECT s.user_id, s.agent_id, p.term, p.impact, p.seq FROM postings p JOIN namespaces s ON s.id = p.ns
ORDER BY 1, 2, 3, 5
"""

_WORDS = [f"w{i}" for i in range(60)]


def _note(rng: random.Random) -> str:
    # Zipf-like: a few words in most notes, repeated within a note, notes of very different lengths.
    words = [_WORDS[min(int(rng.paretovariate(0.8)) - 1, len(_WORDS) - 1)] for _ in range(rng.randint(1, 40))]
    return " ".join(words)


def _postings_match(url: str) -> None:
    import psycopg

    with psycopg.connect(url) as conn:
        stored = conn.execute(_STORED).fetchall()
        assert stored == conn.execute(_EXPECTED).fetchall()


async def test_postings_follow_every_write_and_the_migration_fills_them(postgres_server: PostgresServer) -> None:
    import psycopg

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(3)
    mem = PostgresAdapter(url, embedder=None)
    try:
        ids = await mem.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "a"} for _ in range(300)])
        await mem.add_many([{"content": _note(rng), "user_id": "other", "agent_id": "a"} for _ in range(100)])
        await mem.add("w1 w1 w2 single", "u", "a")
        _postings_match(url)
        for memory_id in ids[::7]:
            assert await mem.delete(memory_id)
        assert not await mem.delete(ids[1], user_id="other")  # someone else's id: nothing changes
        _postings_match(url)
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) > 0 FROM postings p JOIN namespaces s ON s.id = p.ns"
                                " WHERE s.user_id = 'other'").fetchone() == (True,)
    finally:
        await mem.aclose()
    # A store written before migration 3: the upgrades (3, then 4) fill postings from its memories.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE postings, namespaces")
        conn.execute("DROP FUNCTION memkit_postings_add, memkit_postings_drop, memkit_postings_change,"
                     " memkit_postings_clear CASCADE")
        conn.execute("DROP FUNCTION memkit_impact")
        conn.execute("CREATE INDEX memories_terms ON memories USING gin (terms)")  # schema 2 had it
        conn.execute("UPDATE memkit_meta SET value = '2' WHERE key = 'schema_version'")
    mem = PostgresAdapter(url, embedder=None)
    try:
        _postings_match(url)
        assert (await mem.search("single", "u", "a", mode="keyword", limit=1))[0].content == "w1 w1 w2 single"
        await mem.reset()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM postings").fetchone() == (0,)
        await mem.add("after the reset", "u", "a")
        _postings_match(url)
    finally:
        await mem.aclose()


# Each term's best postings, as a search reads them: the memories a search may return.
_TOP_READ = """
SELECT DISTINCT x.seq FROM unnest(%s::text[]) AS t(term) CROSS JOIN LATERAL (
    SELECT p.seq FROM postings p JOIN namespaces s ON s.id = p.ns
    WHERE s.user_id = 'u' AND s.agent_id = 'a' AND p.term = hashtextextended(t.term, 0)
    ORDER BY p.impact DESC, p.seq DESC LIMIT %s) x
"""


@pytest.mark.parametrize("budget", [12, 160, 8_000])
async def test_the_top_postings_give_exact_scores_and_the_exhaustive_rows_when_nothing_is_cut(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch, budget: int,
) -> None:
    """Every row returned carries the memory's exact BM25 (as scoring every memory gives it), in the
    exhaustive order, and the rows are the best of the memories in the postings read (the bounds that
    spare scoring most of them never drop one that belongs); with no list cut (2,000 postings per
    term in a namespace of 1,500) they are the exhaustive statement's, and so are they when a filter
    rejects too many candidates. Never a memory of the other namespace, which holds the same words."""
    import psycopg

    from memkit._core._filters import parse_filters
    from memkit.adapters._postgres import _keyword as _postgres_keyword
    from memkit.adapters._postgres import _sql as _postgres_sql

    monkeypatch.setattr(_postgres_keyword, "TOP_POSTINGS", budget)
    monkeypatch.setattr(_postgres_keyword, "PER_CANDIDATE", 1)
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(budget)
    mem = PostgresAdapter(url, embedder=None)
    try:
        await mem.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "a", "metadata": {"k": i % 3}}
                            for i in range(1_500)])
        await mem.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "b"} for _ in range(500)])
    finally:
        await mem.aclose()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        mine = {r[0] for r in await (await conn.execute(
            "SELECT seq FROM memories WHERE user_id = 'u' AND agent_id = 'a'")).fetchall()}
        queries = [rng.sample(_WORDS[:12], rng.randint(1, 4)) for _ in range(20)] + [["w59", "nosuchword"]]
        for terms in queries:
            for conditions in ((), parse_filters({"k": 1})):
                sql, params = _postgres_sql.keyword_statement("u", "a", terms, conditions, 10_000)
                every: list[Any] = await (await conn.execute(sql, params, prepare=False)).fetchall()
                exact = {s: float(v) for s, _, v in every}
                for limit in (1, 10, 100):
                    got = await _postgres_keyword.keyword_hits(conn, "u", "a", terms, conditions, limit)
                    assert len(got) == min(limit, len(every)), (terms, conditions, limit)
                    assert {s for s, _, _ in got} <= mine
                    assert [v for _, _, v in got] == pytest.approx([exact[s] for s, _, _ in got], rel=1e-9)
                    assert got == sorted(got, key=lambda r: (-r[2], -r[1], -r[0]))
                    reach = _postgres_keyword.postings_read(len(terms), limit)
                    if reach >= 1_500:
                        assert [s for s, _, _ in got] == [s for s, _, _ in every[:limit]], (terms, limit)
                    elif not conditions:
                        read = {r[0] for r in await (await conn.execute(_TOP_READ, (terms, reach))).fetchall()}
                        best = [s for s, _, _ in every if s in read][:limit]
                        assert [s for s, _, _ in got] == best, (terms, limit)


async def test_a_schema_3_store_upgrades_to_integer_postings(postgres_server: PostgresServer) -> None:
    """A store written by schema 3 (text-keyed postings, filled by its triggers) opened by this
    memkit: migration 4 numbers its namespaces, rebuilds the postings from the memories, and
    searches, writes and deletes go on with the new triggers; namespaces stay apart."""
    import psycopg

    from memkit.adapters._postgres._schema import META_TABLE, MIGRATIONS, SCHEMA_VERSION
    from memkit.adapters._postgres._sql import terms_vector

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(4)
    notes = [(_note(rng), ("u", "a") if i % 3 else ("u", "b")) for i in range(400)]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(META_TABLE)
        with conn.transaction():
            for version in (1, 2, 3):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
            conn.execute("INSERT INTO memkit_meta (key, value) VALUES ('schema_version', '3')")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us, terms, terms_len)"
                " VALUES (%s, %s, %s, %s, '{}', %s, %s::tsvector, %s)",
                [(f"m{i}", user, agent, text, 1_000 + i, *terms_vector(text)) for i, (text, (user, agent)) in
                 enumerate(notes)],
            )
        conn.execute("INSERT INTO namespace_stats (user_id, agent_id, count, terms)"
                     " SELECT user_id, agent_id, count(*), sum(terms_len) FROM memories GROUP BY 1, 2")
        assert conn.execute("SELECT count(*) FROM postings").fetchone()[0] > 400  # schema 3's own
    mem = PostgresAdapter(url, embedder=None)
    try:
        with psycopg.connect(url) as conn:
            version = conn.execute("SELECT value FROM memkit_meta WHERE key = 'schema_version'").fetchone()
            assert version == (str(SCHEMA_VERSION),)
            assert conn.execute("SELECT user_id, agent_id FROM namespaces ORDER BY id").fetchall() == [
                ("u", "a"), ("u", "b")]
            assert conn.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'memories_terms'").fetchone() == (0,)
        _postings_match(url)
        await mem.add("w1 w1 w2 upgraded", "u", "b")
        await mem.add("w1 brandnew", "v", "c")
        assert await mem.delete("m5")
        _postings_match(url)
        hits = await mem.search("upgraded w2", "u", "b", mode="keyword", limit=5)
        assert hits[0].content == "w1 w1 w2 upgraded"
        assert all(h.user_id == "u" and h.agent_id == "b" for h in hits)
        assert [h.content for h in await mem.search("brandnew", "v", "c", mode="keyword")] == ["w1 brandnew"]
        assert await mem.search("brandnew", "u", "a", mode="keyword") == []
    finally:
        await mem.aclose()


async def test_keyword_scores_follow_every_write_from_elsewhere(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every search scores exactly as the exhaustive statement does after another store's inserts,
    deletes and reset, each term's list cut short."""
    import psycopg

    from memkit.adapters._postgres import _keyword as _postgres_keyword
    from memkit.adapters._postgres import _sql as _postgres_sql

    monkeypatch.setattr(_postgres_keyword, "TOP_POSTINGS", 20)  # every common term's list is cut
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(9)
    reader = PostgresAdapter(url, embedder=None)
    other = PostgresAdapter(url, embedder=None)
    queries = [["w0", "w1", "w5"], ["w2", "w3"], ["w0", "w7", "nosuchword"]]

    async def check(conn: Any) -> None:
        for terms in queries:
            sql, params = _postgres_sql.keyword_statement("u", "a", terms, (), 10_000)
            exact = {s: float(v) for s, _, v in await (await conn.execute(sql, params, prepare=False)).fetchall()}
            got = await _postgres_keyword.keyword_hits(conn, "u", "a", terms, (), 10)
            assert len(got) == min(10, len(exact))
            assert [v for _, _, v in got] == pytest.approx([exact[s] for s, _, _ in got], rel=1e-9), terms

    try:
        ids = await other.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "a"} for _ in range(400)])
        await reader.add("w0 w1 from the reader", "u", "a")
        # autocommit: an open transaction would hold the lock the other store's reset waits for
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await check(conn)
            await other.add_many([{"content": "w0 w0 w1 w2 w3 " + _note(rng), "user_id": "u", "agent_id": "a"}
                                  for _ in range(60)])
            await check(conn)
            for memory_id in ids[:50]:
                assert await other.delete(memory_id)
            await check(conn)
            await other.add("w0 w5 w5 keeps the count", "u", "a")
            assert await other.delete(ids[60])
            await check(conn)
            await other.reset()
            await other.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "a"} for _ in range(100)])
            await check(conn)
    finally:
        await reader.aclose()
        await other.aclose()


async def test_memories_that_cannot_make_the_list_are_not_scored(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rare query term beside a common one: the memories holding only the common term cannot
    outscore those holding both (their bounds say so), so they are never read and scored, and the
    rows are still the exhaustive statement's."""
    import psycopg

    from memkit.adapters._postgres import _keyword as _postgres_keyword
    from memkit.adapters._postgres import _sql as _postgres_sql

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(5)
    mem = PostgresAdapter(url, embedder=None)
    try:
        await mem.add_many([{"content": "w0 " + _note(rng), "user_id": "u", "agent_id": "a"} for _ in range(300)])
        await mem.add_many([{"content": f"w0 zebra note {i}", "user_id": "u", "agent_id": "a"} for i in range(3)])
        await mem.add_many([{"content": "w0 zebra elsewhere", "user_id": "u", "agent_id": "b"} for _ in range(5)])
    finally:
        await mem.aclose()
    scored: list[int] = []
    real = _postgres_keyword._scores

    async def spy(*args: Any) -> Any:
        scored.append(len(args[5]))
        return await real(*args)

    monkeypatch.setattr(_postgres_keyword, "_scores", spy)
    async with await psycopg.AsyncConnection.connect(url) as conn:
        sql, params = _postgres_sql.keyword_statement("u", "a", ["w0", "zebra"], (), 3)
        every = await (await conn.execute(sql, params, prepare=False)).fetchall()
        got = await _postgres_keyword.keyword_hits(conn, "u", "a", ["w0", "zebra"], (), 3)
    assert [(s, c) for s, c, _ in got] == [(s, c) for s, c, _ in every]
    assert [v for _, _, v in got] == pytest.approx([float(v) for _, _, v in every], rel=1e-9)
    assert len(scored) == 1 and 3 <= scored[0] < 30, scored  # of 303 memories holding a query term


async def test_memory_numbers_travel_as_one_bigint_array_literal(postgres_server: PostgresServer) -> None:
    """The lists of seqs a search sends (candidates, fused keys, final rows) are bound as one
    ``bigint[]`` literal: the server reads back exactly the numbers, order and duplicates kept,
    numpy integers and seqs past 32 bits included, and an empty list as an empty array."""
    import numpy as np
    import psycopg

    from memkit.adapters._postgres._sql import int_array

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    cases: list[list[int]] = [[], [7], [3, 1, 3, 2**40 + 1, 0], [int(x) for x in np.arange(5_000, 7_000)]]
    async with await psycopg.AsyncConnection.connect(url) as conn:
        for seqs in cases:
            got = await (await conn.execute("SELECT %s::bigint[]", (int_array(seqs),))).fetchone()
            assert got is not None and list(got[0]) == seqs
        got = await (await conn.execute("SELECT %s::bigint[]", (int_array(np.array([5, 2**33], dtype=np.int64)),))
                     ).fetchone()
        assert got is not None and got[0] == [5, 2**33]
