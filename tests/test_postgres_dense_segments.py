"""The PostgreSQL vector index in segments: writes stay out of every HNSW graph, each build a write
starts adds one segment over the memories written since the last and never rebuilds an older one
(a build once writes stop may merge the small trailing ones), and every search, in any process,
reads every segment plus the memories no segment holds yet. A schema-4 store's one index becomes
the first segment, unchanged."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from memkit.adapters._postgres import _index as _postgres_index
from memkit.adapters._postgres import _sql as _postgres_sql
from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.adapters._postgres._schema import index_name, segment_bounds, segment_kinds
from memkit.testing import PostgresServer

_TOPICS = ["golden retriever puppy", "quarterly tax filing", "kinase assay buffer", "sourdough starter"]


def _database(server: PostgresServer) -> str:
    return server.url(f"t_{uuid.uuid4().hex[:12]}")


def _state(url: str) -> tuple[str | None, dict[str, int]]:
    """The recorded segment ends and the vector indexes (name -> oid: a rebuilt index gets a new oid)."""
    with psycopg.connect(url, autocommit=True) as conn:
        ends = conn.execute("SELECT value FROM memkit_meta WHERE key = 'vector_segments'").fetchone()
        names = conn.execute("SELECT c.relname, c.oid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid"
                             " WHERE c.relname LIKE 'memories_embedding%' ORDER BY 1").fetchall()
    return (ends[0] if ends else None), {name: int(oid) for name, oid in names}


async def _until(url: str, ends: str) -> dict[str, int]:
    """The indexes once the segments recorded are ``ends`` and the graphs they replaced are dropped
    (a build records its segment first, then drops what it merged or rebuilt: searches never wait)."""
    bounds, kinds = segment_bounds(ends), segment_kinds(ends)
    names = {index_name(lo, hi, kind) for lo, hi, kind in zip([0, *bounds], bounds, kinds, strict=False)}
    for _ in range(1_200):  # a background build on a loaded machine: up to two minutes
        recorded, indexes = _state(url)
        if recorded == ends and set(indexes) == names:
            return indexes
        await asyncio.sleep(0.1)
    raise AssertionError(f"segments never reached {ends!r}: {_state(url)}")


async def test_each_segment_is_built_once_and_every_search_reads_all_of_them(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 0)  # namespaces this small go through HNSW too
    url = _database(postgres_server)
    writer, other = PostgresAdapter(url), PostgresAdapter(url)
    try:
        first = await writer.add_many([{"content": f"{t} note {i}", "user_id": "u", "agent_id": "a"}
                                       for i in range(30) for t in _TOPICS])
        assert _state(url) == (None, {})
        with psycopg.connect(url, autocommit=True) as conn:  # what builds cut short by kill -9 leave
            for name, where in (("memories_embedding_7", "seq <= 7"),
                                ("memories_embedding_3_9", "seq > 3 AND seq <= 9")):
                conn.execute(f"CREATE INDEX {name} ON memories USING hnsw (embedding vector_cosine_ops)"
                             f" WHERE {where}")
            # A concurrent build killed midway leaves its index marked invalid.
            conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'memories_embedding_7'::regclass")
        assert await writer.index_vectors() == 120
        ends, indexes = _state(url)
        assert (ends, list(indexes)) == ("120:halfvec", ["memories_embedding_0_120_halfvec"])
        oldest = indexes["memories_embedding_0_120_halfvec"]

        late = await other.add("a dachshund puppy at the vet", "u", "a")  # after the build: in no segment
        assert (await writer.search("dachshund puppy vet", "u", "a", mode="semantic", limit=5))[0].id == late
        assert (await writer.search("golden retriever puppy note 7", "u", "a", mode="semantic", limit=3))[0].id \
            == first[28]

        monkeypatch.setattr(_postgres_index, "INDEX_DELTA", 50)
        await writer.add_many([{"content": f"{t} more {i}", "user_id": "u", "agent_id": "b"}
                               for i in range(30) for t in _TOPICS])  # 121 outside >= 120 in segments: a build
        indexes = await _until(url, "120:halfvec 241:halfvec")
        assert indexes == {"memories_embedding_0_120_halfvec": oldest, "memories_embedding_120_241_halfvec": indexes[
            "memories_embedding_120_241_halfvec"]}
        second = indexes["memories_embedding_120_241_halfvec"]

        newest = await writer.add_many([{"content": f"sourdough loaf bake {i}", "user_id": "u", "agent_id": "a"}
                                        for i in range(10)])  # 10 < 241: no build
        assert _state(url)[0] == "120:halfvec 241:halfvec"
        assert (await other.search("dachshund puppy vet", "u", "a", mode="semantic", limit=5))[0].id == late
        with psycopg.connect(url, autocommit=True) as conn:  # a build done, its process gone before recording
            conn.execute("CREATE INDEX memories_embedding_241_245_halfvec ON memories"
                         " USING hnsw ((embedding::halfvec(384)) halfvec_cosine_ops) WHERE seq > 241 AND seq <= 245")
        orphan = _state(url)[1]["memories_embedding_241_245_halfvec"]
        assert await other.index_vectors() == 251
        ends, indexes = _state(url)
        assert ends == "120:halfvec 241:halfvec 245:halfvec 251:halfvec"
        assert sorted(indexes) == ["memories_embedding_0_120_halfvec", "memories_embedding_120_241_halfvec",
                                   "memories_embedding_241_245_halfvec", "memories_embedding_245_251_halfvec"]
        assert [indexes[n] for n in ("memories_embedding_0_120_halfvec", "memories_embedding_120_241_halfvec",
                                     "memories_embedding_241_245_halfvec")] == [oldest, second, orphan]

        # Every memory of the namespace, from each segment, and none of another's.
        found = await other.search("puppy", "u", "a", mode="semantic", limit=200)
        assert {m.id for m in found} == {*first, late, *newest}
        assert (await other.search("sourdough loaf bake 3", "u", "a", mode="semantic", limit=3))[0].id == newest[3]
        assert len(await writer.search("puppy", "u", "b", mode="semantic", limit=200)) == 120
        assert all(m.agent_id == "b" for m in await writer.search("sourdough loaf", "u", "b", mode="hybrid"))
        assert not await writer.search("puppy", "u", "other", mode="semantic", limit=5)

        await writer.reset()
        assert _state(url)[0] is None
        again = await writer.add("a puppy again", "u", "a")
        assert [m.id for m in await other.search("puppy", "u", "a", mode="semantic")] == [again]
        top = await other.index_vectors()  # the forgotten segments go; one new segment over what is left
        assert _state(url)[0] == f"{top}:halfvec"
        assert list(_state(url)[1]) == [f"memories_embedding_0_{top}_halfvec"]
        assert [m.id for m in await writer.search("puppy", "u", "a", mode="semantic")] == [again]
    finally:
        await writer.aclose()
        await other.aclose()


async def test_a_schema_4_store_keeps_its_vector_index_as_the_first_segment(postgres_server: PostgresServer) -> None:
    """A store schema 4 wrote (one HNSW index over ``seq <= W``, recorded as ``vector_indexed_seq``)
    opened by this memkit: the upgrade keeps the index as is (same oid) as the first segment, a
    ``vector`` one, and searches use it and the rest; the next build adds a segment beside it and
    rebuilds it as a ``halfvec`` graph."""
    from memkit.adapters._postgres._schema import META_TABLE, MIGRATIONS, SCHEMA_VERSION, vector_statements
    from memkit.adapters._postgres._sql import terms_vector
    from memkit.embeddings import get_embedder

    embedder = get_embedder("default")
    url = _database(postgres_server)
    texts = [(f"{t} note {i}", "a" if i % 3 else "b") for i in range(40) for t in _TOPICS]
    vectors = embedder.embed([t for t, _ in texts])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(META_TABLE)
        with conn.transaction():
            for version in (1, 2, 3, 4):
                for statement in MIGRATIONS[version]:
                    conn.execute(statement)
            for statement in vector_statements(embedder.dim):
                conn.execute(statement)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us, terms, terms_len,"
                " embedding) VALUES (%s, 'u', %s, %s, '{}', %s, %s::tsvector, %s, %s::vector)",
                [(f"m{i}", agent, text, 1_000 + i, *terms_vector(text), "[" + ",".join(map(str, v.tolist())) + "]")
                 for i, ((text, agent), v) in enumerate(zip(texts, vectors, strict=True))],
            )
        conn.execute("INSERT INTO namespace_stats (user_id, agent_id, count, terms)"
                     " SELECT user_id, agent_id, count(*), sum(terms_len) FROM memories GROUP BY 1, 2")
        # Schema 4's index and records, as its builds left them.
        conn.execute("CREATE INDEX memories_embedding_150 ON memories USING hnsw (embedding vector_cosine_ops)"
                     " WHERE seq <= 150")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO memkit_meta (key, value) VALUES (%s, %s)", [
                ("schema_version", "4"), ("vector_indexed_seq", "150"), ("embedder_name", embedder.name),
                ("embedder_dim", str(embedder.dim))])
        found = conn.execute("SELECT 'memories_embedding_150'::regclass::oid").fetchone()
        assert found is not None
        oid = int(found[0])

    mem = PostgresAdapter(url)
    try:
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT value FROM memkit_meta WHERE key = 'schema_version'").fetchone() == (
                str(SCHEMA_VERSION),)
            assert conn.execute("SELECT value FROM memkit_meta WHERE key = 'vector_indexed_seq'").fetchone() is None
        assert _state(url) == ("150", {"memories_embedding_150": oid})
        hits = await mem.search("kinase assay buffer note 7", "u", "a", mode="semantic", limit=3)
        assert hits[0].content == "kinase assay buffer note 7"
        assert (await mem.search("kinase assay buffer note 39", "u", "b", mode="semantic", limit=3))[0].content \
            == "kinase assay buffer note 39"  # seq 158: past the old index
        added = await mem.add("a newt in the pond", "u", "b")
        # The next builds add a halfvec segment and rebuild the old one as a halfvec graph in its place.
        assert await mem.index_vectors() == 161
        assert _state(url)[0] == "150:halfvec 161:halfvec"
        assert sorted(_state(url)[1]) == ["memories_embedding_0_150_halfvec", "memories_embedding_150_161_halfvec"]
        assert (await mem.search("kinase assay buffer note 7", "u", "a", mode="semantic", limit=3))[0].content \
            == "kinase assay buffer note 7"
        assert (await mem.search("newt pond", "u", "b", mode="semantic", limit=3))[0].id == added
        assert await mem.search("newt pond", "u", "a", mode="semantic", limit=200) != [] and all(
            h.agent_id == "a" for h in await mem.search("newt pond", "u", "a", mode="semantic", limit=200))
    finally:
        await mem.aclose()


def test_a_deep_leg_asks_each_segment_for_its_share_and_a_shallow_one_for_everything() -> None:
    """A hybrid leg (100 candidates) over segments of 6k, 23k, 121k and 850k memories asks the small
    ones for their share four times over, at least 20 each and never more than 100; a semantic leg
    of 10, or a store with one segment, asks every segment for all of them."""
    ends = [6_000, 29_000, 150_000, 1_000_000]
    assert _postgres_sql.segment_limits(100, ends, 1_000_000) == [20, 20, 49, 100]
    assert _postgres_sql.segment_limits(10, ends, 1_000_000) == [10, 10, 10, 10]
    assert _postgres_sql.segment_limits(100, [5_000], 9_000) == [100]
    # A namespace whose memories stopped before the last segment: shares of the whole table still.
    assert _postgres_sql.segment_limits(100, ends, 400) == [20, 20, 49, 100]
    parts = _postgres_sql.dense_statements("u", "a", (), 100, False, [0.0], ends, [20, 20, 49, 100])
    assert [asked for _, _, asked in parts] == [20, 20, 49, 100, 100]  # the unindexed rest: all of them
    assert [params[-1] for _, params, _ in parts] == [20, 20, 49, 100, 100]


def test_an_idle_build_keeps_each_kept_segment_larger_than_what_follows_it() -> None:
    # ends 5k, 10k, 20k, 40k, 80k; 20k more: the 40k segment (80k - 40k) is larger than those, kept
    assert _postgres_index.kept(100_000, [5_000, 10_000, 20_000, 40_000, 80_000]) == 5
    # 5k after segments of 20k and 5k: the 5k one is merged, the 20k one is larger than the 10k after it
    assert _postgres_index.kept(110_000, [80_000, 100_000, 105_000]) == 2
    # a run of small segments collapses into one, as a binary counter carries
    assert _postgres_index.kept(40, [10, 20, 30]) == 0
    assert _postgres_index.kept(50, []) == 0


async def test_writes_that_stop_get_a_segment_merged_with_the_small_ones_before_it(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bulk load leaves up to half its memories outside the segments (the doubling rule): once the
    writer has written nothing for ``IDLE_S``, they get a segment, and trailing segments no larger than
    what follows them are built into it (their graphs dropped), so searches walk few graphs."""
    monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 0)
    monkeypatch.setattr(_postgres_index, "INDEX_DELTA", 50)
    monkeypatch.setattr(_postgres_index, "IDLE_S", 0.3)
    builds: list[bool] = []  # each build started, True for an idle one: a spy around the real build
    real_build = _postgres_index.build

    async def counted(*args: Any, **kwargs: Any) -> int | None:
        builds.append(bool(kwargs.get("idle")))
        return await real_build(*args, **kwargs)

    monkeypatch.setattr(_postgres_index, "build", counted)
    url = _database(postgres_server)
    writer = PostgresAdapter(url)
    try:
        def notes(n: int, word: str) -> list[dict[str, str]]:
            return [{"content": f"{_TOPICS[i % 4]} {word} {i}", "user_id": "u", "agent_id": "a"} for i in range(n)]

        first = await writer.add_many(notes(200, "first"))  # 200 outside >= max(50, 0): due at once
        await _until(url, "200:halfvec")
        second = await writer.add_many(notes(55, "second"))  # 55 < 200: not due; idle, 55 >= 50: built
        indexes = await _until(url, "200:halfvec 255:halfvec")
        assert sorted(indexes) == ["memories_embedding_0_200_halfvec", "memories_embedding_200_255_halfvec"]
        kept_oid = indexes["memories_embedding_0_200_halfvec"]

        started = len(builds)
        third = await writer.add_many(notes(10, "third"))  # 10 < 50: no segment even when idle
        await asyncio.sleep(1.0)
        assert _state(url)[0] == "200:halfvec 255:halfvec"
        assert len(builds) == started  # and no build connected only to find that out
        # 60 past 255, idle: 200..255 (55 <= 60) is built into the new segment; 0..200 (200 > 115) is kept
        fourth = await writer.add_many(notes(50, "fourth"))
        indexes = await _until(url, "200:halfvec 315:halfvec")
        assert indexes == {"memories_embedding_0_200_halfvec": kept_oid,
                           "memories_embedding_200_315_halfvec": indexes["memories_embedding_200_315_halfvec"]}

        found = await writer.search("note", "u", "a", mode="semantic", limit=500)
        assert {m.id for m in found} == {*first, *second, *third, *fourth}
        assert (await writer.search("kinase assay buffer fourth 6", "u", "a", mode="semantic", limit=3))[0].id \
            == fourth[6]
    finally:
        await writer.aclose()

