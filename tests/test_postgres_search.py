"""PostgreSQL hybrid searches run their keyword and dense legs on two connections of the pool when
it has one to spare, and never wait on each other for one."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.testing import PostgresServer

_WORDS = ["sample", "cohort", "variant", "align", "reads", "tp53", "brca1", "coverage", "report", "plan"]


@pytest.mark.parametrize("pool_size", [1, 2])
async def test_many_hybrid_searches_at_once_on_a_small_pool_all_answer_as_one_at_a_time(
    postgres_server: PostgresServer, pool_size: int,
) -> None:
    """Eight hybrid searches at once on a pool of one or two connections: each would hold one
    connection while its dense leg wanted a second, so waiting for it would leave them all waiting;
    they all answer, the same as when run one after another, and only from their own namespace."""
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(7)
    writer = PostgresAdapter(url)
    try:
        for user in ("u", "other"):
            await writer.add_many([{"content": " ".join(rng.choices(_WORDS, k=rng.randint(3, 12))),
                                    "user_id": user, "agent_id": "a", "metadata": {"i": i}} for i in range(300)])
    finally:
        await writer.aclose()
    queries = [" ".join(rng.sample(_WORDS, 2)) for _ in range(8)]
    mem = PostgresAdapter(url, pool_size=pool_size, pool_min=1)
    try:
        alone = [await mem.search(q, "u", "a", limit=5, mode="hybrid") for q in queries]
        together = await asyncio.wait_for(
            asyncio.gather(*(mem.search(q, "u", "a", limit=5, mode="hybrid") for q in queries)), timeout=300)
    finally:
        await mem.aclose()
    assert [[(h.id, h.score) for h in hits] for hits in together] == [[(h.id, h.score) for h in hits] for hits in alone]
    assert all(len(hits) == 5 and all(h.user_id == "u" for h in hits) for hits in together)


async def test_candidates_find_their_neighbours_among_each_other_across_interleaved_namespaces(
    postgres_server: PostgresServer,
) -> None:
    """Fusion's context pull needs, per candidate, the other candidates written at most two places
    before or after it in its namespace. Counting the namespace's memories between candidates next
    to each other gives exactly those, with another namespace's memories written in between (and
    deleted ones) never counted."""
    import psycopg

    from memkit._retrieval._fusion import CONTEXT_REACH
    from memkit.adapters._postgres import _sql as q

    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(3)
    mem = PostgresAdapter(url, embedder=None)
    try:
        for _ in range(30):
            user = rng.choice(["u", "u", "other"])
            await mem.add_many([{"content": f"note {rng.random()}", "user_id": user, "agent_id": "a"}
                                for _ in range(rng.randint(1, 6))])
        for hit in (await mem.get_all("u", "a", limit=1_000))[::9]:
            assert await mem.delete(hit.id)
    finally:
        await mem.aclose()
    with psycopg.connect(url) as conn:
        mine = [r[0] for r in conn.execute("SELECT seq FROM memories WHERE user_id = 'u' ORDER BY seq").fetchall()]
        reach = len(CONTEXT_REACH)
        for size in (1, 2, 5, 20, len(mine) // 2, len(mine)):
            for _ in range(5):
                keys = rng.sample(mine, min(size, len(mine)))
                place = {seq: i for i, seq in enumerate(mine)}
                chosen = set(keys)
                expected = {
                    seq: sorted((abs(place[o] - place[seq]), o) for o in chosen
                                if o != seq and abs(place[o] - place[seq]) <= reach)
                    for seq in keys}
                gaps = [g for g, in conn.execute(*q.gaps_statement("u", "a", keys, reach)).fetchall()] \
                    if len(keys) > 1 else []
                got = q.neighbours(keys, gaps, reach)
                assert {k: sorted(v) for k, v in got.items()} == {k: v for k, v in expected.items() if v}


async def test_a_filter_most_of_a_namespace_passes_walks_the_index_and_a_selective_one_scores_exactly(
    postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A filter that nine in ten memories pass is searched as the namespace is, through the HNSW
    index (the walk tests the filter on the rows it meets), without counting the rows that pass;
    one that one in twenty pass scores every passing memory, so its top 10 is the exact one. The
    memories written after the index are scored exactly under the loose filter too. All of them
    return only the namespace's memories that pass, though another namespace holds the same texts."""
    from memkit.adapters._postgres import _sql as _postgres_sql

    monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 0)  # namespaces this small go through HNSW too
    url = postgres_server.url(f"t_{uuid.uuid4().hex[:12]}")
    rng = random.Random(11)
    texts = [" ".join(rng.choices(_WORDS, k=rng.randint(3, 12))) for _ in range(800)]
    mem = PostgresAdapter(url, embedder="default")
    try:
        for user in ("u", "other"):
            await mem.add_many([{"content": text, "user_id": user, "agent_id": "a",
                                 "metadata": {"i": i, "kind": "memo" if i % 10 == 0 else "note", "rare": i % 20 == 0}}
                                for i, text in enumerate(texts)])
        assert await mem.index_vectors() > 0
        query = "coverage reads plan"
        deep = await mem.search(query, "u", "a", limit=800, mode="semantic")  # past pgvector's ef_search
        assert len(deep) == 800 and {h.score_details["dense_path"] for h in deep} == {"index"}
        for mode in ("semantic", "hybrid"):
            loose = await mem.search(query, "u", "a", limit=10, filters={"kind": "note"}, mode=mode)
            assert len(loose) == 10 and {h.score_details["dense_path"] for h in loose} == {"index"}
            assert all(h.user_id == "u" and h.metadata["kind"] == "note" for h in loose)
            rare = await mem.search(query, "u", "a", limit=10, filters={"rare": True}, mode=mode)
            assert len(rare) == 10 and {h.score_details["dense_path"] for h in rare} == {"exact"}
            assert all(h.user_id == "u" and h.metadata["rare"] is True for h in rare)
        # Memories written after the index: a loose filter's walk scores them exactly, best first.
        await mem.add_many([{"content": f"{query} {text}", "user_id": user, "agent_id": "a",
                             "metadata": {"i": 800 + i, "kind": "memo" if i % 10 == 0 else "note", "rare": False}}
                            for user in ("other", "u") for i, text in enumerate(texts[:60])])
        loose = await mem.search(query, "u", "a", limit=10, filters={"kind": "note"}, mode="semantic")
        monkeypatch.setattr(_postgres_sql, "DENSE_EXACT_MAX", 10_000)
        every = await mem.search(query, "u", "a", limit=860, mode="semantic")
        assert len(every) == 860 and {h.score_details["dense_path"] for h in every} == {"exact"}
        top = [h for h in every if h.metadata["kind"] == "note"][:10]
        late = {h.id for h in top if h.metadata["i"] >= 800}
        assert late and late <= {h.id for h in loose}
        assert all(h.user_id == "u" and h.metadata["kind"] == "note" for h in loose)
        rare = await mem.search(query, "u", "a", limit=10, filters={"rare": True}, mode="semantic")
        assert [h.id for h in rare] == [h.id for h in every if h.metadata["rare"]][:10]
    finally:
        await mem.aclose()
