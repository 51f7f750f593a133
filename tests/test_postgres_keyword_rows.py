"""The keyword leg's narrow rows (``keyword_rows``, schema 6): a schema-5 store upgrades in place and
an older memkit then refuses it; every write keeps them with the memory in one transaction, even with
several writer processes; and scoring from them gives exactly what scoring from ``memories`` gave."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import uuid

import pytest

from memkit.adapters._postgres import PostgresAdapter
from memkit.testing import PostgresServer

# The rows as the triggers should keep them: one per memory, from the memory itself.
_EXPECTED = """
SELECT m.user_id, m.agent_id, m.seq, m.created_us, m.terms_len, m.terms::text FROM memories m ORDER BY 1, 2, 3
"""
_STORED = """
SELECT s.user_id, s.agent_id, k.seq, k.created_us, k.terms_len, k.terms::text
FROM keyword_rows k JOIN namespaces s ON s.id = k.ns ORDER BY 1, 2, 3
"""

# Schema 5's scoring statement (from the memories' own rows): what the narrow rows must reproduce.
_SCHEMA_5_SCORE = """
WITH w AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS w(lexeme, idf)),
hits AS MATERIALIZED (
    SELECT m.seq, m.created_us, m.terms_len, ts_filter(setweight(m.terms, 'A', %s::text[]), '{{a}}') AS found
    FROM memories m
    WHERE m.user_id = %s AND m.agent_id = %s AND m.seq = ANY(%s) AND ({where})
)
SELECT h.seq, h.created_us,
       sum(w.idf * cardinality(u.positions) * %s::float8
           / (cardinality(u.positions) + %s::float8 * (1 - %s::float8 + %s::float8 * h.terms_len / %s::float8)))
           AS score
FROM hits h CROSS JOIN LATERAL unnest(h.found) AS u(lexeme, positions, weights) JOIN w ON w.lexeme = u.lexeme
GROUP BY h.seq, h.created_us
ORDER BY score DESC, h.created_us DESC, h.seq DESC
LIMIT %s
"""

_WORDS = [f"w{i}" for i in range(40)]


def _note(rng: random.Random) -> str:
    words = [_WORDS[min(int(rng.paretovariate(0.8)) - 1, len(_WORDS) - 1)] for _ in range(rng.randint(1, 30))]
    return " ".join(words)


def _rows_match(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        stored = conn.execute(_STORED).fetchall()
        assert stored == conn.execute(_EXPECTED).fetchall()
        return len(stored)


async def test_a_schema_5_store_upgrades_in_place_and_an_older_memkit_refuses_it(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Memories written under schema 5 (two namespaces, a deleted one) get their narrow rows from
    the upgrade; writes go on keeping them; a memkit of schema 5 then refuses the store."""
    import psycopg

    from memkit import ConfigError
    from memkit.adapters import _postgres
    from memkit.adapters._postgres_schema import MIGRATIONS, SCHEMA_VERSION

    assert SCHEMA_VERSION >= 6
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(6)
    monkeypatch.setattr(_postgres, "SCHEMA_VERSION", 5)  # this memkit, as schema 5's was
    old = PostgresAdapter(url, embedder=None)
    try:
        ids = await old.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "a"} for _ in range(300)])
        await old.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "b"} for _ in range(100)])
        assert await old.delete(ids[3])
    finally:
        await old.aclose()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT value FROM memkit_meta WHERE key = 'schema_version'").fetchone() == ("5",)
        assert conn.execute("SELECT to_regclass('keyword_rows')").fetchone() == (None,)
    monkeypatch.setattr(_postgres, "SCHEMA_VERSION", SCHEMA_VERSION)
    assert len(MIGRATIONS) == SCHEMA_VERSION
    mem = PostgresAdapter(url, embedder=None)
    try:
        assert _rows_match(url) == 399
        await mem.add("w1 w1 w2 upgraded", "u", "b")
        assert await mem.delete(ids[4])
        assert _rows_match(url) == 399
        hits = await mem.search("upgraded w2", "u", "b", mode="keyword", limit=5)
        assert hits[0].content == "w1 w1 w2 upgraded"
        assert all(h.user_id == "u" and h.agent_id == "b" for h in hits)
    finally:
        await mem.aclose()
    monkeypatch.setattr(_postgres, "SCHEMA_VERSION", 5)
    with pytest.raises(ConfigError, match="upgrade memkit"):
        PostgresAdapter(url, embedder=None)


async def test_every_kind_of_write_keeps_the_rows(postgres_server: PostgresServer) -> None:
    """Batches, single adds, deletes (and a delete of someone else's id), a change of a memory's
    terms or time made in SQL, and a reset: the narrow rows are always the memories'."""
    import psycopg

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(7)
    mem = PostgresAdapter(url, embedder=None)
    try:
        ids = await mem.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "a"} for _ in range(200)])
        await mem.add_many([{"content": _note(rng), "user_id": "other", "agent_id": "a"} for _ in range(50)])
        await mem.add("w1 w1 w2 single", "u", "a")
        assert _rows_match(url) == 251
        for memory_id in ids[::9]:
            assert await mem.delete(memory_id)
        assert not await mem.delete(ids[1], user_id="other")
        assert _rows_match(url) == 251 - len(ids[::9])
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE memories SET terms = 'zz:1,2'::tsvector, terms_len = 2 WHERE id = %s", (ids[1],))
            conn.execute("UPDATE memories SET created_us = created_us + 1 WHERE id = %s", (ids[2],))
        assert _rows_match(url) == 251 - len(ids[::9])
        await mem.reset()
        assert _rows_match(url) == 0
        await mem.add("after the reset", "u", "a")
        assert _rows_match(url) == 1
    finally:
        await mem.aclose()


async def test_scores_from_the_narrow_rows_equal_schema_5s_from_the_memories(
    postgres_server: PostgresServer,
) -> None:
    """The same candidates and idfs scored by schema 5's statement (reading ``memories``) and by
    this one: the same rows in the same order with the same scores, bit for bit, with and without
    filters; candidates of another namespace (seqs are global) never come back."""
    import psycopg

    from memkit._retrieval._filters import parse_filters
    from memkit._retrieval._keyword import K1, B
    from memkit.adapters import _postgres_keyword, _postgres_sql
    from memkit.adapters._sqlbase import filter_sql

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(8)
    mem = PostgresAdapter(url, embedder=None)
    try:
        ids = await mem.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "a",
                                   "metadata": {"k": i % 3, "tag": rng.choice(["x", "y"])}} for i in range(600)])
        await mem.add_many([{"content": _note(rng), "user_id": "u", "agent_id": "b", "metadata": {"k": 1}}
                            for _ in range(200)])
        for memory_id in ids[::11]:
            assert await mem.delete(memory_id)
    finally:
        await mem.aclose()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        every = [r[0] for r in await (await conn.execute("SELECT seq FROM memories ORDER BY seq")).fetchall()]
        mine = {r[0] for r in await (await conn.execute(
            "SELECT seq FROM memories WHERE user_id = 'u' AND agent_id = 'a'")).fetchall()}
        compared = 0
        for _ in range(25):
            terms = rng.sample(_WORDS[:15], rng.randint(1, 4)) + (["nosuchword"] if rng.random() < 0.2 else [])
            candidates = sorted(rng.sample(every, rng.randint(1, len(every))))
            idf = [rng.uniform(0.01, 3.0) for _ in terms]
            found = [_postgres_keyword._Found(600.0, 12.5, t, 1, [1], [1.0], 1) for t in terms]
            for conditions in ((), parse_filters({"k": 1}), parse_filters({"tag": "x", "k": {"$gte": 1}})):
                for limit in (1, 10, 1_000):
                    got = await _postgres_keyword._scores(conn, "u", "a", found, dict(zip(terms, idf, strict=True)),
                                                          candidates, conditions, limit)
                    where, params = filter_sql(conditions, _postgres_sql.POSTGRES)
                    old = [(int(s), int(c), float(v)) for s, c, v in await (await conn.execute(
                        _SCHEMA_5_SCORE.format(where=where),
                        [terms, idf, terms, "u", "a", candidates, *params, K1 + 1.0, K1, B, B, 12.5, limit],
                        prepare=False)).fetchall()]
                    assert got == old, (terms, conditions, limit)
                    assert {s for s, _, _ in got} <= mine
                    compared += len(got)
        assert compared > 1_000


_WRITER = """
import random, sys, memkit
url, me, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(me)
mem = memkit.open(url)
ids = []
for r in range(rounds):
    ns = ("lab", "bio") if r % 3 else ("lab", f"w{me}")
    ids += mem.add_many([{"content": f"writer{me} round{r} " + " ".join(rng.choice("abcdefgh") for _ in range(8)),
                          "user_id": ns[0], "agent_id": ns[1]} for _ in range(rng.randint(1, 40))])
    if r % 4 == 3:
        mem.delete(ids.pop(rng.randrange(len(ids))))
print("done")
"""

# In one snapshot: memories without their row, rows without their memory (or differing from it).
_ORPHANS = """
SELECT (SELECT count(*) FROM memories m WHERE NOT EXISTS (
            SELECT 1 FROM keyword_rows k JOIN namespaces s ON s.id = k.ns
            WHERE s.user_id = m.user_id AND s.agent_id = m.agent_id AND k.seq = m.seq
              AND k.created_us = m.created_us AND k.terms_len = m.terms_len AND k.terms = m.terms)),
       (SELECT count(*) FROM keyword_rows k WHERE NOT EXISTS (
            SELECT 1 FROM memories m JOIN namespaces s ON s.user_id = m.user_id AND s.agent_id = m.agent_id
            WHERE s.id = k.ns AND m.seq = k.seq)),
       (SELECT count(*) FROM memories)
"""


@pytest.mark.slow
def test_several_writer_processes_never_show_a_memory_without_its_row(postgres_server: PostgresServer) -> None:
    """Three processes write batches into a shared and their own namespaces and delete some; every
    snapshot a reader takes meanwhile has each memory's narrow row and no other, and a keyword search
    finds every batch a writer had acknowledged."""
    import psycopg

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    PostgresAdapter(url, embedder=None).close()  # the schema exists before the race
    children = [subprocess.Popen([sys.executable, "-c", _WRITER, url, str(me), "60"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in range(3)]
    snapshots = 0
    seen: set[int] = set()
    with psycopg.connect(url, autocommit=True) as conn:
        while any(child.poll() is None for child in children) or snapshots < 3:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                row = conn.execute(_ORPHANS).fetchone()
            assert row is not None
            missing, orphans, count = row
            assert (missing, orphans) == (0, 0), (missing, orphans, count)
            seen.add(count)
            snapshots += 1
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0 and out.strip() == "done", err[-2000:]
    assert _rows_match(url) > 0
    assert len(seen) > 1 or snapshots >= 3  # snapshots were taken while the store grew (or after, at least)

    with psycopg.connect(url) as conn:
        kept = {c.split(" ", 2)[0] + " " + c.split(" ", 2)[1] for c, in conn.execute(
            "SELECT content FROM memories").fetchall()}

    async def check() -> None:
        # Round 6 went to each writer's own namespace, round 4 to the shared one.
        mem = PostgresAdapter(url, embedder=None)
        try:
            for me in range(3):
                for agent, r in ((f"w{me}", 6), ("bio", 4)):
                    hits = await mem.search(f"writer{me} round{r}", "lab", agent, mode="keyword", limit=50)
                    assert hits and all((h.user_id, h.agent_id) == ("lab", agent) for h in hits)
                    if f"writer{me} round{r}" in kept:
                        assert hits[0].content.startswith(f"writer{me} round{r} ")
        finally:
            await mem.aclose()

    asyncio.run(check())
