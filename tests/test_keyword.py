"""The keyword index reproduces SQLite FTS5's porter + unicode61 analysis and its bm25() ranking
(at FTS5's k1 and b), and adds date terms to both sides."""

from __future__ import annotations

import json
import random
import sqlite3

import numpy as np
import pytest

from memkit._retrieval._keyword import (
    ANALYZER,
    KeywordIndex,
    StaleIndexError,
    analyze,
    analyze_query,
    speaker_terms,
    stemmed_words,
)

WORDS = (
    "the aligner mapped reads to the reference genome while BLAST searched homologs of TP53 "
    "ecology psychology incredibly trekked café naïve résumé Straße kinases phosphorylation "
    "is as us variant variants calling called caller sample samples sampling 2026 e-value"
).split()
WORDS = list(dict.fromkeys(WORDS))


def _fts_terms(words: list[str]) -> dict[str, list[str]]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(c, tokenize='porter unicode61')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    db.executemany("INSERT INTO f (rowid, c) VALUES (?, ?)", list(enumerate(words)))
    out: dict[str, list[str]] = {w: [] for w in words}
    for term, doc in db.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        out[words[doc]].append(term)
    return out


def test_analysis_matches_fts5() -> None:
    expected = _fts_terms(WORDS)
    for word in WORDS:
        assert stemmed_words(word) == expected[word], word


def test_query_analysis_drops_stopwords_unless_nothing_is_left() -> None:
    assert analyze_query("What did the aligner map?") == ["align", "map"]
    assert analyze_query("the and of") == ["the", "and", "of"]
    assert analyze_query("???") == []


def test_bm25_ranking_and_scores_match_fts5() -> None:
    rng = random.Random(3)
    # every word in well under half the documents: above that bm25's idf is floored to 1e-6
    vocab = ["kinase", "screen", "tumour", "sample", "read", "align", "genome", "variant", "call", "blast"]
    vocab += [f"w{i}" for i in range(60)]
    docs = [" ".join(rng.choices(vocab, k=rng.randint(3, 12))) for _ in range(300)]
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(c, tokenize='porter unicode61')")
    db.executemany("INSERT INTO f (rowid, c) VALUES (?, ?)", list(enumerate(docs, start=1)))
    index = KeywordIndex()
    index.add_many((i, d, i) for i, d in enumerate(docs, start=1))
    for query in ["kinase screen", "tumour", "variant calling blast", "aligned genomes"]:
        terms = analyze_query(query)
        match = " OR ".join(f'"{w}"' for w in query.split())  # FTS5 stems the query words itself
        fts = db.execute(
            "SELECT rowid, -bm25(f) FROM f WHERE f MATCH ? ORDER BY bm25(f), rowid DESC LIMIT 20", (match,)
        ).fetchall()
        keys, scores = index.top(terms, 20, k1=1.2, b=0.75)  # FTS5's fixed parameters
        assert keys.tolist() == [r[0] for r in fts], query
        assert [round(s, 9) for s in scores.tolist()] == [round(r[1], 9) for r in fts], query


def test_deleted_documents_stop_matching_and_stop_counting() -> None:
    index = KeywordIndex()
    index.add_many([(1, "rare kinase", 1), (2, "kinase", 2), (3, "other", 3)])
    assert index.top(["kinas"], 10)[0].tolist() == [2, 1]
    assert index.remove(2) and not index.remove(2)
    assert index.top(["kinas"], 10)[0].tolist() == [1]
    assert len(index) == 2 and 2 not in index
    index.add(1, "ignored: the key exists", 9)
    assert index.top(["ignor"], 10)[0].tolist() == []


def test_ties_are_newest_first() -> None:
    index = KeywordIndex()
    index.add_many([(1, "same words", 10), (2, "same words", 30), (3, "same words", 20)])
    assert index.top(["same"], 3)[0].tolist() == [2, 3, 1]
    assert index.top(["same"], 2)[0].tolist() == [2, 3]


def test_a_saved_index_loads_and_keeps_changing_like_the_original() -> None:
    rng = random.Random(1)
    words = ["kinase", "helicase", "ligase", "sample", "tumour", "reads", "align", "variant", "the", "dog"]
    original = KeywordIndex()
    original.add_many((i + 1, " ".join(rng.choices(words, k=rng.randint(1, 8))), i) for i in range(3_000))
    for key in range(1, 3_000, 7):
        original.remove(key)
    loaded = KeywordIndex.from_bytes(original.to_bytes())
    assert len(loaded) == len(original) and (2 in loaded) and (8 not in loaded)
    late = [(5_000 + i, " ".join(rng.choices(words, k=4)), 9_000 + i) for i in range(50)]
    for index in (original, loaded):
        index.add_many(late[:25])
        for key, text, order in late[25:]:
            index.add(key, text, order)
        index.remove(5_003)
        index.remove(10)
    again = KeywordIndex.from_bytes(loaded.to_bytes())
    for query in ["kinase dog", "the", "ligase reads variant", "zebra"]:
        terms = analyze_query(query)
        want_keys, want_scores = original.top(terms, 40)
        for index in (loaded, again):
            keys, scores = index.top(terms, 40)
            assert keys.tolist() == want_keys.tolist()
            assert np.allclose(scores, want_scores)


def test_dates_are_index_terms_on_both_sides() -> None:
    memory = analyze("[11:54 am on 2 May, 2022] Joanna: I watched the trilogy last night!")
    assert {"ymd20220502", "ymd20220501", "ym202205", "y2022", "timeref"} <= set(memory)
    query = analyze_query("What movie did Joanna watch on 1 May, 2022?")
    assert "ymd20220501" in query and "ym202205" not in query  # the query's own granularity only
    assert "timeref" in analyze_query("When did Joanna watch it?")
    index = KeywordIndex()
    index.add_many([
        (1, "[11:54 am on 2 May, 2022] Joanna: I watched a movie last night!", 1),
        (2, "[3:00 pm on 9 May, 2022] Joanna: I watched a movie yesterday!", 2),
    ])
    assert index.top(query, 2)[0].tolist() == [1, 2]  # same words; only the resolved date differs


def test_an_index_saved_by_another_analyzer_is_refused() -> None:
    index = KeywordIndex()
    index.add_many([(1, "kinase in May 2023", 1)])
    blob = index.to_bytes()
    size = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8 : 8 + size])
    assert header["analyzer"] == ANALYZER
    del header["analyzer"]  # as memkit saved it before date terms existed
    old_header = json.dumps(header).encode()
    old = len(old_header).to_bytes(8, "little") + old_header + blob[8 + size :]
    with pytest.raises(StaleIndexError):
        KeywordIndex.from_bytes(old)


def test_neighbours_follow_writing_order_and_skip_deleted() -> None:
    index = KeywordIndex()
    index.add_many([(10, "a", 1), (12, "b", 2), (15, "c", 3), (20, "d", 4)])
    assert index.neighbours([10, 15, 99], 1) == {10: [(1, 12)], 15: [(1, 12), (1, 20)]}
    assert sorted(index.neighbours([15], 2)[15]) == [(1, 12), (1, 20), (2, 10)]
    assert index.neighbours([], 2) == {} and KeywordIndex().neighbours([1], 2) == {}
    index.remove(12)
    assert index.neighbours([15], 1) == {15: [(1, 10), (1, 20)]}
    index.add(30, "e", 5)
    assert index.neighbours([20, 30], 1) == {20: [(1, 15), (1, 30)], 30: [(1, 20)]}


def test_index_cache_drops_the_least_recently_used_past_its_budget() -> None:
    from memkit._retrieval._cache import IndexCache

    cache: IndexCache[tuple[str, str], list[int]] = IndexCache(max_indexed=5)
    cache.put(("alice", "bio"), [1, 2])
    cache.put(("bob", "bio"), [3, 4])
    assert cache.get(("alice", "bio")) == [1, 2]  # alice is now the most recently used
    assert cache.peek(("bob", "bio")) == [3, 4]  # a peek does not count as a use
    cache.put(("carol", "bio"), [5, 6])  # 6 > 5: bob, the least recently used, goes
    assert list(cache) == [("alice", "bio"), ("carol", "bio")]
    assert cache.get(("bob", "bio")) is None
    cache.put(("dave", "bio"), list(range(9)))  # alone over the budget: the newest index stays
    assert list(cache) == [("dave", "bio")]
    assert cache.pop(("dave", "bio")) == list(range(9)) and len(cache) == 0


def test_speaker_terms_name_who_speaks_a_chat_line() -> None:
    assert speaker_terms("[1:56 pm on 8 May, 2023] Caroline: I went to a support group") == ["@caroline"]
    assert speaker_terms("John Smith: the run finished") == ["@john", "@smith"]
    assert speaker_terms("Note: buy milk") == ["@note"]
    for text in ("the cat: sat", "Caroline said: hi", "[x] 12: no", "no colon here", "Ann Bob Cy Dee: too long"):
        assert speaker_terms(text) == [], text


def test_speaker_terms_are_found_by_spoken_by_and_never_score() -> None:
    texts = ["[8 May, 2023] Ann: pottery class today", "[8 May, 2023] Ben: pottery again, Ann",
             "Ann went to pottery", "[9 May, 2023] Ann Lee: lunch"]
    index, plain = KeywordIndex(), KeywordIndex()
    index.add_many((i, t, i) for i, t in enumerate(texts))
    for i, text in enumerate(texts):
        plain._add(i, analyze(text), [], i)  # the same documents without speaker terms
    for query in ("pottery", "ann pottery", "lunch ann"):
        keys, scores = index.top(analyze_query(query), 10)
        want_keys, want_scores = plain.top(analyze_query(query), 10)
        assert keys.tolist() == want_keys.tolist() and scores.tolist() == pytest.approx(want_scores.tolist())
    assert index.spoken_by(range(4), "What did Ann make?") == {0, 3}  # not the line that only mentions her
    assert index.spoken_by([1, 2, 3], "what did ANN and ben do") == {1, 3}
    assert index.spoken_by(range(4), "what did Cy do") == set()
    assert index.remove(0)
    restored = KeywordIndex.from_bytes(index.to_bytes())  # saved with the index, deletions kept
    assert restored.spoken_by([0, 1, 2, 3], "Ann") == {3}
