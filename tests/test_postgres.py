"""The PostgreSQL store on a real server (pgvector included): the conformance suite, keyword-only
and hybrid, and what only a server store has to show."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.testing import PostgresServer, ProviderConformance


def _database(server: PostgresServer) -> str:
    return server.url(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="module")
def keyword_db(postgres_server: PostgresServer) -> str:
    return _database(postgres_server)


@pytest.fixture(scope="module")
def hybrid_db(postgres_server: PostgresServer) -> str:
    return _database(postgres_server)


class TestPostgresAdapter(ProviderConformance):
    """Keyword-only: memkit's BM25 in SQL."""

    persistent = True

    @pytest.fixture
    def make_provider(self, keyword_db: str) -> Callable[[], PostgresAdapter]:
        return lambda: PostgresAdapter(keyword_db, embedder=None)


class TestPostgresAdapterWithEmbeddings(ProviderConformance):
    """Hybrid: the default static embedder's vectors in pgvector."""

    persistent = True

    @pytest.fixture
    def make_provider(self, hybrid_db: str) -> Callable[[], PostgresAdapter]:
        return lambda: PostgresAdapter(hybrid_db, embedder="default")


def test_the_url_carries_memkit_and_libpq_options_and_never_shows_the_password(
    postgres_server: PostgresServer,
) -> None:
    import memkit
    from memkit import ConfigError

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    secret = url.replace("postgresql://postgres@", "postgresql://postgres:s3cr3t-pw@")
    with memkit.open(secret + "?embedder=none&pool_size=2&pool_min=0&application_name=memkit-test") as mem:
        assert mem.provider.search_modes == ("keyword",)
        assert "s3cr3t" not in repr(mem.provider) and "s3cr3t" not in mem.stats().url
        assert mem.health().ok
    with pytest.raises(ConfigError, match="pool_size"):
        memkit.open(url + "?pool_size=many")
    with pytest.raises(ConfigError) as refused:
        memkit.open(secret + "?no_such_libpq_option=1")
    assert "s3cr3t" not in str(refused.value)


async def test_a_newer_schema_is_refused_and_an_older_one_is_migrated(postgres_server: PostgresServer) -> None:
    import psycopg

    from memkit import ConfigError
    from memkit.adapters._postgres._schema import SCHEMA_VERSION

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    await PostgresAdapter(url, embedder=None).aclose()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE memkit_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(ConfigError, match="upgrade memkit"):
        PostgresAdapter(url, embedder=None)
    with psycopg.connect(url, autocommit=True) as conn:  # as if written by a memkit before the last step
        conn.execute("UPDATE memkit_meta SET value = %s WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
    mem = PostgresAdapter(url, embedder=None)
    try:
        assert (await mem.stats()).schema_version == SCHEMA_VERSION
    finally:
        await mem.aclose()


async def test_a_keyword_only_store_gains_vectors_and_keeps_its_embedder(postgres_server: PostgresServer) -> None:
    from memkit import ConfigError
    from memkit.embeddings import get_embedder

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    mem = PostgresAdapter(url, embedder=None)
    try:
        ids = await mem.add_many([{"content": t, "user_id": "u", "agent_id": "a"}
                                  for t in ("golden retriever puppy", "quarterly tax filing", "kinase assay")])
        assert mem.search_modes == ("keyword",)
        assert await mem.reembed("default", progress=False) == 3
        assert mem.search_modes == ("hybrid", "keyword", "semantic")
        assert (await mem.search("dog", "u", "a", mode="semantic", limit=1))[0].id == ids[0]
        await mem.add("a second puppy", "u", "a")  # written with its vector
    finally:
        await mem.aclose()
    reopened = PostgresAdapter(url)  # left out: the store's own embedder
    try:
        assert reopened.embedder is not None and reopened.embedder.name == get_embedder("default").name
        assert len(await reopened.search("puppy", "u", "a", mode="semantic", limit=10)) == 4
    finally:
        await reopened.aclose()

    class Other:
        name, dim = "other-model", 8

        def embed(self, texts: list[str]) -> object:
            import numpy as np

            return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)

    with pytest.raises(ConfigError, match="never mixes two embedders"):
        PostgresAdapter(url, embedder=Other())


@pytest.mark.slow
@pytest.mark.parametrize("path", ["exact", "hnsw"])
async def test_locomo_dev_scores_like_sqlite(
    tmp_path: Path, postgres_server: PostgresServer, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same retrieval on the same data: every mode within 0.02 of SQLite on every metric, with the
    dense leg scoring each namespace exactly or (forced here: the index rebuilt after every write)
    through the HNSW index."""
    from test_retrieval_backends import METRICS, MODES, _dev_conversations, _harness, _scores

    from memkit.adapters import SQLiteAdapter
    from memkit.adapters._postgres import _sql as _postgres_sql

    class Indexed(PostgresAdapter):
        async def add_many(self, *args: Any, **kwargs: Any) -> list[str]:
            ids = await super().add_many(*args, **kwargs)
            assert await self.index_vectors() > 0
            return ids

    adapter = PostgresAdapter
    if path == "hnsw":
        monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 0)
        adapter = Indexed
    harness = _harness()
    conversations = _dev_conversations(harness)
    reference = await _scores(harness, SQLiteAdapter(tmp_path / "dev.db", embedder="default"), conversations)
    scored = await _scores(harness, adapter(_database(postgres_server), embedder="default"), conversations)
    for mode in MODES:
        for metric in METRICS:
            got, want = scored[mode]["overall"][metric], reference[mode]["overall"][metric]
            assert got == pytest.approx(want, abs=0.02), (mode, metric, got, want)
            if mode == "keyword" or path == "exact":
                assert got == pytest.approx(want, abs=0.002), (mode, metric, got, want)


async def test_the_binary_copy_stores_the_terms_the_text_form_spells(postgres_server: PostgresServer) -> None:
    """Writes send each memory's terms in tsvector's binary form: what is stored equals the tsvector
    input text the keyword leg was written against, for quotes, backslashes, repeats past 256
    positions, words too long to index, dates and non-ASCII words."""
    from memkit.adapters._postgres._sql import terms_vector

    texts = [
        "O'Brien's lab: 'quoted' and \"double\" words, back\\slash",
        " ".join(["repeat"] * 300) + " once",
        "x" * 3_000 + " short words stay",
        "Met on 8 May, 2023 at 1:56 pm; follow-up 2023-05-09",
        "Zellkultur in München, 東京 の 実験, naïve café",
        "!!! ... ???",
    ]
    mem = PostgresAdapter(_database(postgres_server), embedder=None)
    try:
        ids = await mem.add_many([{"content": t, "user_id": "u", "agent_id": "a"} for t in texts])
        for memory_id, text in zip(ids, texts, strict=True):
            expected, length = terms_vector(text)
            rows = await mem._call(mem._fetch(
                "SELECT terms = %s::tsvector, terms_len FROM memories WHERE id = %s", [expected, memory_id]
            ))
            assert rows == [(True, length)], text[:40]
    finally:
        await mem.aclose()
