"""SQLite with embeddings: modes, score details, filters in every mode, embedder bookkeeping, reembed."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest

import memkit
from memkit import ConfigError, HybridConfig, InvalidInputError
from memkit.adapters import SQLiteAdapter
from memkit.embeddings import DEFAULT_EMBEDDER

NS = ("u1", "agent")

FACTS = [
    ("Caroline adopted a golden retriever puppy named Max", {"topic": "pets", "year": 2023}),
    ("The quarterly tax filing is due next Tuesday", {"topic": "money", "year": 2023}),
    ("Melanie painted a sunrise over the lake", {"topic": "art", "year": 2022}),
    ("Max the dog chewed through the garden hose", {"topic": "pets", "year": 2022}),
    ("BLAST found 12 homologs of the TP53 tumour suppressor", {"topic": "bio", "year": 2024}),
]


class Hashing:
    """A tiny deterministic embedder (hashed bag of words) for bookkeeping tests, not for quality."""

    def __init__(self, name: str = "hashing", dim: int = 16) -> None:
        self.name, self.dim = name, dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % self.dim] += 1.0
        norms = np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out / norms


@pytest.fixture
async def mem(tmp_path: Path) -> AsyncIterator[SQLiteAdapter]:
    adapter = SQLiteAdapter(tmp_path / "m.db", embedder="default")
    for text, meta in FACTS:
        await adapter.add(text, *NS, metadata=meta)
    yield adapter
    await adapter.aclose()


async def test_hybrid_is_the_default_with_an_embedder(mem: SQLiteAdapter) -> None:
    hits = await mem.search("dog", *NS)
    assert hits and all(h.score_details and h.score_details["mode"] == "hybrid" for h in hits)
    plain = SQLiteAdapter(":memory:", embedder=None)
    await plain.add("dog", *NS)
    [hit] = await plain.search("dog", *NS)
    assert hit.score_details == {"mode": "keyword", "found_by": ["keyword"], "keyword": {"rank": 1, "score": hit.score}}
    with pytest.raises(InvalidInputError, match="embedder='default'"):
        await plain.search("dog", *NS, mode="hybrid")
    await plain.aclose()


async def test_semantic_finds_what_keywords_miss(mem: SQLiteAdapter) -> None:
    query = "which pet does Caroline have"
    keyword = await mem.search("puppy animal", *NS, mode="keyword")
    semantic = await mem.search("puppy animal", *NS, mode="semantic", limit=2)
    assert "golden retriever" in keyword[0].content
    assert {h.content.split()[0] for h in semantic} <= {"Caroline", "Max"}
    hybrid = await mem.search(query, *NS, limit=2)
    assert "golden retriever" in hybrid[0].content


async def test_score_details_name_each_leg(mem: SQLiteAdapter) -> None:
    hits = await mem.search("Max the dog", *NS, limit=5)
    top = hits[0]
    assert top.content.startswith("Max the dog")
    details = top.score_details
    assert details is not None
    assert details["found_by"] == ["keyword", "semantic"]
    assert details["keyword"]["rank"] == 1 and details["keyword"]["score"] > 0
    assert details["semantic"]["rank"] >= 1 and -1.0 <= details["semantic"]["score"] <= 1.0
    assert details["fused"]["score"] == pytest.approx(top.score)
    assert details["fused"]["alpha"] == HybridConfig().alpha
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    semantic = await mem.search("Max the dog", *NS, mode="semantic")
    assert semantic[0].score_details == {
        "mode": "semantic", "found_by": ["semantic"], "semantic": {"rank": 1, "score": semantic[0].score},
        "dense_path": "exact",
    }


async def test_semantic_only_hits_need_min_similarity(mem: SQLiteAdapter) -> None:
    hits = await mem.search("zebra", *NS)
    assert all(h.score_details["keyword"]["rank"] is not None  # type: ignore[index]
               or h.score_details["semantic"]["score"] >= HybridConfig().min_similarity for h in hits)  # type: ignore[index]
    strict = await mem.search("puppy", *NS, hybrid=HybridConfig(min_similarity=1.0))
    assert all("puppy" in h.content for h in strict)


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "semantic"])
async def test_filters_apply_in_every_mode(mem: SQLiteAdapter, mode: str) -> None:
    cases = [
        ({"topic": "pets"}, {"pets"}),
        ({"year": {"$lt": 2023}}, {"art", "pets"}),
        ({"topic": {"$nin": ["pets", "art"]}}, {"money", "bio"}),
    ]
    for filters, topics in cases:
        hits = await mem.search("dog puppy painting tax homologs", *NS, limit=10, mode=mode, filters=filters)
        assert hits, (mode, filters)
        assert {h.metadata["topic"] for h in hits} <= topics
        every = await mem.get_all(*NS, limit=50, filters=filters)
        assert {h.id for h in hits} <= {h.id for h in every}
    with pytest.raises(InvalidInputError):
        await mem.search("dog", *NS, mode=mode, filters={"$bad": 1})


async def test_filter_finds_matches_beyond_the_first_candidates(tmp_path: Path) -> None:
    mem = SQLiteAdapter(tmp_path / "f.db", embedder="default")
    await mem.add_many([{"content": f"dog note {i}", "user_id": "u", "agent_id": "a", "metadata": {"i": i}}
                        for i in range(300)])
    hits = await mem.search("dog", "u", "a", mode="semantic", limit=3, filters={"i": {"$gte": 297}})
    assert sorted(h.metadata["i"] for h in hits) == [297, 298, 299]
    await mem.aclose()


async def test_bad_mode_and_config(mem: SQLiteAdapter) -> None:
    with pytest.raises(InvalidInputError, match="mode"):
        await mem.search("dog", *NS, mode="fuzzy")
    with pytest.raises(ConfigError):
        HybridConfig(alpha=1.5)
    with pytest.raises(ConfigError):
        HybridConfig(candidates=0)
    with pytest.raises(ConfigError):
        HybridConfig(context=-0.1)
    with pytest.raises(InvalidInputError):
        await mem.search("dog", *NS, hybrid={"alpha": 0.5})  # type: ignore[arg-type]


async def test_alpha_extremes_match_the_single_legs(mem: SQLiteAdapter) -> None:
    query = "Max the dog garden"
    keyword = [h.id for h in await mem.search(query, *NS, mode="keyword")]
    config = HybridConfig(alpha=0.0, min_similarity=1.0, context=0.0)
    only_kw = [h.id for h in await mem.search(query, *NS, hybrid=config)]
    assert only_kw == keyword


async def test_empty_query_lists_newest_first_in_every_mode(mem: SQLiteAdapter) -> None:
    newest = [h.id for h in await mem.get_all(*NS)]
    for mode in ("hybrid", "keyword", "semantic"):
        hits = await mem.search("", *NS, limit=10, mode=mode)
        assert [h.id for h in hits] == newest and all(h.score is None for h in hits)


async def test_namespaces_never_leak_through_vectors(mem: SQLiteAdapter) -> None:
    other = await mem.add("Caroline adopted a golden retriever puppy named Max", "u2", "agent")
    for mode in ("hybrid", "semantic"):
        assert other not in {h.id for h in await mem.search("golden retriever", *NS, limit=50, mode=mode)}
        assert [h.id for h in await mem.search("golden retriever", "u2", "agent", mode=mode)] == [other]


async def test_delete_and_reset_update_the_vector_cache(mem: SQLiteAdapter) -> None:
    [first] = await mem.search("golden retriever", *NS, limit=1, mode="semantic")
    assert await mem.delete(first.id)
    assert first.id not in {h.id for h in await mem.search("golden retriever", *NS, limit=10, mode="semantic")}
    added = await mem.add("a brand new golden retriever", *NS)
    assert (await mem.search("golden retriever", *NS, limit=1, mode="semantic"))[0].id == added
    await mem.reset()
    assert await mem.search("golden retriever", *NS, mode="semantic") == []
    assert (await mem.stats()).vectors == 0  # type: ignore[attr-defined]


async def test_another_connections_writes_are_seen(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    a = SQLiteAdapter(path, embedder="default")
    b = SQLiteAdapter(path, embedder="default")
    await a.add("the first note about kinases", *NS)
    assert len(await a.search("kinase", *NS, mode="semantic")) == 1  # loads a's cache
    new = await b.add("a second note about kinase inhibitors", *NS)
    assert new in {h.id for h in await a.search("kinase", *NS, mode="semantic")}
    await a.aclose()
    await b.aclose()


async def test_store_records_its_embedder_and_refuses_another(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    mem = SQLiteAdapter(path, embedder="default")
    await mem.add("a note", *NS)
    stats = await mem.stats()
    assert (stats.embedder, stats.embedder_dim, stats.vectors) == (DEFAULT_EMBEDDER, 384, 1)  # type: ignore[attr-defined]
    await mem.aclose()
    with pytest.raises(ConfigError, match="reembed") as err:
        SQLiteAdapter(path, embedder=Hashing())
    assert DEFAULT_EMBEDDER in str(err.value) and "hashing" in str(err.value)
    with pytest.raises(ConfigError, match="dim"):
        SQLiteAdapter(path, embedder=Hashing(name=DEFAULT_EMBEDDER, dim=8))
    # without an embedder option the recorded default model is used again
    again = SQLiteAdapter(path)
    assert again.embedder is not None and again.embedder.name == DEFAULT_EMBEDDER
    assert (await again.search("note", *NS))[0].score_details["mode"] == "hybrid"  # type: ignore[index]
    await again.aclose()


async def test_custom_embedder_store_is_read_only_without_it(tmp_path: Path) -> None:
    path = tmp_path / "custom.db"
    mem = SQLiteAdapter(path, embedder=Hashing())
    await mem.add("a note about kinases", *NS)
    await mem.aclose()
    bare = SQLiteAdapter(path)
    assert bare.embedder is None
    assert [h.content for h in await bare.search("kinases", *NS)] == ["a note about kinases"]
    with pytest.raises(ConfigError, match="hashing"):
        await bare.add("another", *NS)
    assert len(await bare.get_all(*NS)) == 1
    await bare.aclose()


async def test_reembed_switches_the_model(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    mem = SQLiteAdapter(path, embedder=Hashing())
    ids = [await mem.add(text, *NS, metadata=meta) for text, meta in FACTS]
    await mem.aclose()
    mem = SQLiteAdapter(path)
    assert await mem.reembed("default", progress=False) == len(FACTS)
    assert mem.embedder is not None and mem.embedder.name == DEFAULT_EMBEDDER
    hits = await mem.search("puppy", *NS, mode="semantic", limit=1)
    assert hits[0].id == ids[0]
    await mem.add("writes work again", *NS)
    await mem.aclose()
    reopened = SQLiteAdapter(path, embedder="default")
    assert (await reopened.stats()).vectors == len(FACTS) + 1  # type: ignore[attr-defined]
    await reopened.aclose()
    conn = sqlite3.connect(path)
    meta = dict(conn.execute("SELECT key, value FROM store_meta").fetchall())
    assert (meta["embedder_name"], meta["embedder_dim"]) == (DEFAULT_EMBEDDER, "384")


async def test_keyword_store_gains_vectors_when_opened_with_an_embedder(tmp_path: Path) -> None:
    path = tmp_path / "k.db"
    plain = SQLiteAdapter(path, embedder=None)
    first = await plain.add("Caroline adopted a golden retriever puppy", *NS)
    await plain.aclose()
    mem = SQLiteAdapter(path, embedder="default")
    assert [h.id for h in await mem.search("dog", *NS, mode="semantic")] == [first]
    await mem.aclose()
    again = SQLiteAdapter(path)  # it records the model now
    assert again.embedder is not None and again.embedder.name == DEFAULT_EMBEDDER
    await again.aclose()


async def test_a_new_store_embeds_with_the_default_model_unless_told_not_to(tmp_path: Path) -> None:
    mem = SQLiteAdapter(tmp_path / "new.db")
    assert mem.embedder is not None and mem.embedder.name == DEFAULT_EMBEDDER
    await mem.add("Caroline adopted a golden retriever puppy", *NS)
    [hit] = await mem.search("dog", *NS)
    assert hit.score_details is not None and hit.score_details["mode"] == "hybrid"
    await mem.aclose()
    with memkit.open(f"sqlite:///{tmp_path / 'url.db'}") as sync:
        assert sync.provider.embedder is not None  # type: ignore[attr-defined]
    for url in (f"sqlite:///{tmp_path / 'none.db'}?embedder=none", f"sqlite:///{tmp_path / 'none2.db'}?embedder=None"):
        with memkit.open(url) as sync:
            assert sync.provider.embedder is None  # type: ignore[attr-defined]
    assert SQLiteAdapter(":memory:").embedder is not None
    # the in-memory adapter stays keyword-only unless asked (docs/retrieval.md)
    assert memkit.open("memory://").provider.embedder is None  # type: ignore[attr-defined]
    assert memkit.open("memory://?embedder=none").provider.embedder is None  # type: ignore[attr-defined]


async def test_keyword_only_stays_keyword_only_when_reopened(tmp_path: Path) -> None:
    empty, full = tmp_path / "empty.db", tmp_path / "full.db"
    SQLiteAdapter(empty, embedder=None).close()
    again = SQLiteAdapter(empty)  # empty, but it was made keyword-only on purpose
    assert again.embedder is None
    await again.aclose()
    mem = SQLiteAdapter(full, embedder=None)
    await mem.add("a note about kinases", *NS)
    await mem.aclose()
    reopened = SQLiteAdapter(full)
    assert reopened.embedder is None
    assert (await reopened.search("kinases", *NS))[0].score_details["mode"] == "keyword"  # type: ignore[index]
    await reopened.add("writes stay keyword-only", *NS)
    assert (await reopened.stats()).vectors == 0  # type: ignore[attr-defined]
    await reopened.aclose()


async def test_a_store_with_vectors_keeps_them_under_embedder_none(tmp_path: Path) -> None:
    path = tmp_path / "v.db"
    SQLiteAdapter(path).close()
    mem = SQLiteAdapter(path, embedder=None)  # never writes a memory without its vector
    assert mem.embedder is not None and mem.embedder.name == DEFAULT_EMBEDDER
    await mem.add("a note", *NS)
    assert (await mem.stats()).vectors == 1  # type: ignore[attr-defined]
    await mem.aclose()


async def test_a_store_of_an_earlier_default_model_says_how_to_move(tmp_path: Path) -> None:
    path = tmp_path / "old-model.db"
    mem = SQLiteAdapter(path, embedder=Hashing(name="static-minilm-l6-d256", dim=256))
    first = await mem.add("Caroline adopted a golden retriever puppy", *NS)
    await mem.aclose()
    old = SQLiteAdapter(path)
    assert old.embedder is None  # readable keyword-only
    assert [h.id for h in await old.search("puppy", *NS)] == [first]
    with pytest.raises(ConfigError, match=r"earlier memkit.*reembed\('default'\)"):
        await old.add("another", *NS)
    assert await old.reembed("default", progress=False) == 1
    assert [h.id for h in await old.search("dog", *NS, mode="semantic")] == [first]
    await old.aclose()


async def test_schema_1_database_migrates(tmp_path: Path) -> None:
    from memkit.adapters._sqlite._schema import MIGRATIONS, statements

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in statements(MIGRATIONS[1]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(
        "INSERT INTO memories (id, user_id, agent_id, content, created_us) VALUES ('m1', 'u1', 'agent', 'old dog', 1)"
    )
    conn.close()
    mem = SQLiteAdapter(path, embedder="default")
    assert [h.id for h in await mem.search("puppy", *NS, mode="semantic")] == ["m1"]
    await mem.aclose()


async def test_add_many_embeds_in_batches(tmp_path: Path) -> None:
    class Counting(Hashing):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[int] = []

        def embed(self, texts: Sequence[str]) -> np.ndarray:
            self.calls.append(len(texts))
            return super().embed(texts)

    emb = Counting()
    mem = SQLiteAdapter(tmp_path / "b.db", embedder=emb)
    await mem.add_many([{"content": f"note {i}", "user_id": "u", "agent_id": "a"} for i in range(2500)])
    # the store's fingerprint of this unversioned embedder (two probe texts), then the batches
    assert emb.calls == [2, 1024, 1024, 452]
    assert (await mem.stats()).vectors == 2500  # type: ignore[attr-defined]
    await mem.aclose()


async def test_search_by_vector(mem: SQLiteAdapter) -> None:
    assert mem.embedder is not None
    vector = mem.embedder.embed(["a puppy"])[0]
    hits = await mem.search_by_vector(vector.tolist(), *NS, limit=2)
    assert hits[0].score_details["mode"] == "semantic"  # type: ignore[index]
    with pytest.raises(InvalidInputError):
        await mem.search_by_vector([1.0, 2.0], *NS)
    with pytest.raises(InvalidInputError):
        await mem.search_by_vector(np.zeros(mem.embedder.dim), *NS)


def test_url_option_and_sync_facade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/u.db?embedder=default"
    with memkit.open(url) as mem:
        mem.add("Caroline adopted a golden retriever puppy", *NS)
        [hit] = mem.search("dog", *NS, mode="semantic")
        assert hit.score_details["mode"] == "semantic"  # type: ignore[index]
        assert mem.reembed("default", progress=False) == 1
    with pytest.raises(ConfigError, match="unknown embedder"):
        memkit.open(f"sqlite:///{tmp_path}/v.db?embedder=word2vec")


async def test_in_memory_adapter_fuses_like_sqlite(tmp_path: Path) -> None:
    """Same fusion code: with identical keyword scores and vectors the two adapters agree on the legs."""
    memory = memkit.get_memory_provider("memory://?embedder=default")
    for text, meta in FACTS:
        await memory.add(text, *NS, metadata=meta)
    for mode in ("hybrid", "semantic"):
        hits = await memory.search("Max the dog", *NS, mode=mode)
        assert hits[0].content.startswith("Max the dog"), mode
        assert hits[0].score_details["mode"] == mode  # type: ignore[index]
    semantic = await memory.search("puppy animal", *NS, mode="semantic", filters={"topic": "pets"})
    assert {h.metadata["topic"] for h in semantic} == {"pets"}
    sqlite = SQLiteAdapter(tmp_path / "same.db", embedder="default")
    for text, meta in FACTS:
        await sqlite.add(text, *NS, metadata=meta)
    a = [h.content for h in await memory.search("golden dog puppy", *NS, mode="semantic")]
    b = [h.content for h in await sqlite.search("golden dog puppy", *NS, mode="semantic")]
    assert a == b
    await sqlite.aclose()


async def test_reembed_by_another_connection_is_noticed(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    first = SQLiteAdapter(path, embedder="default")
    await first.add("a note", *NS)
    other = SQLiteAdapter(path)
    await other.reembed(Hashing(), progress=False)
    with pytest.raises(ConfigError, match="hashing"):
        await first.add("written with the old model", *NS)
    with pytest.raises(ConfigError, match="hashing"):
        await first.search("note", *NS, mode="semantic")
    assert len(await other.get_all(*NS)) == 1
    await first.aclose()
    await other.aclose()


@pytest.mark.parametrize("url", ["sqlite", "memory://?embedder=default"])
async def test_context_lifts_the_reply_next_to_the_match_within_its_namespace(tmp_path: Path, url: str) -> None:
    mem = (SQLiteAdapter(tmp_path / "c.db", embedder="default") if url == "sqlite"
           else memkit.get_memory_provider(url))
    question = await mem.add("Ben: did the kinase screen come back?", *NS)
    await mem.add("Zed: kinase screen notes from another tenant", "u2", "agent")  # between them, elsewhere
    reply = await mem.add("Ann: yes, the results came back today and every one of them was positive", *NS)
    later = [await mem.add(f"Ann: results day {i}", *NS) for i in range(6)]  # newer: they win ties
    query = "kinase screen results"
    plain = await mem.search(query, *NS, limit=10, hybrid=HybridConfig(context=0.0))
    lifted = await mem.search(query, *NS, limit=10)
    assert [h.id for h in lifted][:2] == [question, reply]  # the reply right after the question it answers
    assert [h.id for h in plain].index(reply) > 1
    assert all("Zed" not in h.content for h in lifted)
    fused = {h.id: h.score_details["fused"] for h in lifted}  # type: ignore[index]
    before = {key: f["score"] - f["context"] for key, f in fused.items()}
    weight = HybridConfig().context
    # one place away: the gap to the better side in full; two places away: a third of it
    def gain(own: float, near: float, far: float) -> float:
        return weight * max(0.0, near - own) + weight / 3 * max(0.0, far - own)

    assert fused[reply]["context"] == pytest.approx(
        gain(before[reply], max(before[question], before[later[0]]), before[later[1]]))
    assert fused[later[0]]["context"] == pytest.approx(
        gain(before[later[0]], max(before[reply], before[later[1]]), max(before[question], before[later[2]])))
    assert fused[question]["context"] == 0.0  # its neighbours score lower: they pull nothing
    if url == "sqlite":
        await mem.aclose()


@pytest.mark.parametrize("url", ["sqlite", "memory://?embedder=default", "postgresql"])
async def test_speaker_weight_lifts_the_lines_of_the_person_the_query_names(
    tmp_path: Path, url: str, request: pytest.FixtureRequest
) -> None:
    if url == "postgresql":  # reads the candidates' opening characters instead of a speaker index
        url = str(request.getfixturevalue("postgres_server").url(f"speaker_{uuid.uuid4().hex[:8]}"))
    mem = (SQLiteAdapter(tmp_path / "s.db", embedder="default") if url == "sqlite"
           else memkit.get_memory_provider(url))
    about = await mem.add("[8 May, 2023] Ann: Ben keeps talking about hiking in the mountains, mountains all day", *NS)
    said = await mem.add("[9 May, 2023] Ben: I went hiking again", *NS)
    note = await mem.add("Ben hiking plan: mountains in June", *NS)  # not a chat line: no speaker
    await mem.add("[9 May, 2023] Ben: hiking in the mountains is my thing", "u2", "agent")  # another tenant
    for i in range(8):
        await mem.add(f"[10 May, 2023] Ann: lunch order number {i}", *NS)
    query = "Where does Ben go hiking in the mountains?"
    plain = await mem.search(query, *NS, limit=5, hybrid=HybridConfig(speaker=0.0))
    weighted = await mem.search(query, *NS, limit=5)
    assert [h.id for h in plain].index(said) > [h.id for h in plain].index(about)
    assert weighted[0].id == said  # Ben's own line, though Ann's matches more of the words
    assert {h.id for h in weighted} <= {h.id for h in plain} | {said} and about in {h.id for h in weighted}
    assert all(h.user_id == "u1" for h in weighted)
    before = {h.id: h.score for h in plain}
    factor = 1.0 + HybridConfig().speaker
    for hit in weighted:
        fused = hit.score_details["fused"]  # type: ignore[index]
        assert fused["speaker"] == (factor if hit.id == said else 1.0), hit.content
        assert hit.score == pytest.approx(before[hit.id] * fused["speaker"])
    assert note in before  # found on its words, never weighted as a speaker
    # a query naming nobody who speaks here, or the weight off, changes nothing
    nobody = await mem.search("hiking in the mountains", *NS, limit=5)
    assert all(h.score_details["fused"]["speaker"] == 1.0 for h in nobody)  # type: ignore[index]
    with pytest.raises(ConfigError, match="speaker"):
        HybridConfig(speaker=-0.5)
    with pytest.raises(ConfigError, match="speaker"):
        HybridConfig(speaker=True)
    if url == "sqlite" or url.startswith("postgresql"):
        await mem.aclose()
