"""Indexing a whole namespace at once (what a store does when it closes after a bulk import) takes
shortcuts that must not change a single term, posting or saved byte:

- ASCII text is split by a translation table instead of the token pattern;
- the date patterns run only on texts with a month, year or relative word among their tokens;
- numbers are their own stem, without asking SQLite's Porter stemmer;
- postings built in bulk go straight into the packed arrays a saved index holds;
- a store catching a cached index up after a bulk write adds the rows in one batch;
- the cyclic GC is paused meanwhile, and left as the caller had it, errors included.
"""

from __future__ import annotations

import gc
import hashlib
import json
import random
import sqlite3
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit import InvalidInputError
from memkit._core._validate import check_content
from memkit._retrieval._dates import date_terms
from memkit._retrieval._keyword import _TOKEN, KeywordIndex, _tokens, analyze_query, stemmed_words
from memkit.adapters import SQLiteAdapter
from memkit.adapters._trace_columns import gc_paused

SPEAKERS = ["Caroline", "Nate", "John Smith", "Dr. Émile Zola", "o'brien"]
DATES = ["8 May, 2023", "May 8th 2023", "2023-05-08", "January 2022", "the 3rd of March 2021", "Sept. 3, 2020",
         "jan 5", "5 jan", "1999", "20٢٣", "２０２３", "31 February, 2023", "may", "march", "July", "2023-13-45",
         "yesterday", "last Friday", "next month", "three years ago", "a couple of weeks later", "2 days from now",
         "this summer", "tonight", "last night", "may_2023", "2023_05_08", "Dec.", "1:56 pm on 8 May, 2023"]
WORDS = ["TP53", "kinase", "reads", "aligned", "the", "café", "naïve", "Straße", "İstanbul", "K", "ǅemal",
         "phosphorylation", "e-value", "1e-30", "0", "007", "3.14159", "9f86d081884c7d65", "snake_case_word",
         "ﬁne", "Ⅻ", "x²", "١٢٣", "\u0301", "日本語", "🧬", "now", "ago", "later", "past", "this"]
HOSTILE = ["", " ", "\x00", "\ud800 yesterday \udfff", "a" * 5_000, "2023" * 300, ":::", "[] :",
           "[" + "x" * 100 + "] Nate: hi", "Caroline:", "_ _ __2023__"]

# sha256 of the index the previous version (every posting a list, packed only when saved) saved for
# corpus(): an analysis that changes on purpose bumps ANALYZER, and this digest with it.
PREVIOUS_VERSION_SAVED = "7736ef2a1fa0e58c43ceeb02a2f068e91d34cf3ccef6fcc1a2069694eacbf6d8"


def corpus(n: int = 600, seed: int = 7) -> list[str]:
    """Texts an agent writes: chat lines with stamps and speakers, trace steps as JSON, dates in
    many spellings, Unicode, and hostile strings (NUL, lone surrogates, long runs, empty)."""
    rng = random.Random(seed)
    out = list(HOSTILE)
    while len(out) < n:
        kind = rng.randrange(4)
        words = " ".join(rng.choices(WORDS, k=rng.randint(0, 12)))
        if kind == 0:
            out.append(f"[{rng.choice(DATES)}] {rng.choice(SPEAKERS)}: {words} {rng.choice(DATES)}")
        elif kind == 1:
            step = {"step_name": rng.choice(WORDS), "timestamp": rng.uniform(1.6e9, 1.8e9),
                    "duration": rng.random() / 1e3, "span_id": f"{rng.getrandbits(64):016x}",
                    "parameters": {"value": words}}
            out.append(f"[trace] workflow=w agent=a data={json.dumps(step, sort_keys=True)}")
        elif kind == 2:
            out.append(" ".join([words, *rng.choices(DATES, k=rng.randint(1, 3))]))
        else:
            out.append(words.upper() if rng.random() < 0.3 else words)
    return out


def _rows(texts: list[str]) -> Iterator[tuple[int, str, int]]:
    return ((i + 1, text, 1_700_000_000_000_000 + (i * 7919) % 1000) for i, text in enumerate(texts))


# -- analysis: the shortcuts give what the patterns give ------------------------------------------


def test_tokens_of_ascii_text_are_what_the_pattern_finds() -> None:
    every = "".join(map(chr, range(128)))
    letters = "abcdefghijklmnopqrstuvwxyz"
    assert _tokens(every) == _TOKEN.findall(every.lower()) == ["0123456789", letters, letters]
    for text in corpus(3_000, seed=2):
        assert _tokens(text) == _TOKEN.findall(text.lower()), text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127)) | st.text())
def test_tokens_of_any_text_are_what_the_pattern_finds(text: str) -> None:
    assert _tokens(text) == _TOKEN.findall(text.lower())


def test_a_text_skips_the_date_patterns_only_when_they_find_nothing() -> None:
    # date_terms without the words always runs every pattern: the words may only save time
    texts = corpus(4_000, seed=3) + [f"{a} {b}" for a in DATES for b in DATES]
    dated = 0
    for text in texts:
        full = date_terms(text)
        assert date_terms(text, _tokens(text)) == full, text
        dated += bool(full)
    assert 1_000 < dated < len(texts) - 500  # both sides of the shortcut were taken
    assert date_terms("born 20٢٣-05-08", _tokens("born 20٢٣-05-08")) == ["ymd20230508", "ym202305", "y2023", "m05"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from([*DATES, *WORDS, " ", ", ", "_", ".", "-", "\n", "K", "İ"]), max_size=12).map("".join)
       | st.text(alphabet=" ,.-_:/0123456789abcdefghijklmnoprstuvwyMJ٢３İ", max_size=40))
def test_date_shortcut_on_generated_text(text: str) -> None:
    assert date_terms(text, _tokens(text)) == date_terms(text)


def test_numbers_are_their_own_stem_as_fts5_says() -> None:
    rng = random.Random(4)
    numbers = [str(i) for i in range(300)] + ["".join(rng.choices("0123456789", k=rng.randint(1, 90)))
                                              for _ in range(300)]
    numbers = list(dict.fromkeys(numbers))
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(c, tokenize='porter unicode61')")
    db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
    db.executemany("INSERT INTO f (rowid, c) VALUES (?, ?)", list(enumerate(numbers)))
    fts = dict(db.execute("SELECT doc, term FROM v WHERE offset = 0"))
    db.close()
    assert [fts[i] for i in range(len(numbers))] == numbers
    assert [stemmed_words(n) for n in numbers] == [[n] for n in numbers]
    # words go on to SQLite, batch after batch (the scratch table is emptied in between)
    assert stemmed_words("running 42 kinases") == ["run", "42", "kinas"]
    assert stemmed_words("calling 7 variants ２３") == ["call", "7", "variant", "２３"]


# -- the index: bulk-built, text by text, loaded, in pieces: the same bytes and answers -----------


def _built_text_by_text(rows: list[tuple[int, str, int]]) -> KeywordIndex:
    index = KeywordIndex()
    for key, text, order in rows:
        index.add(key, text, order)
    return index


def test_a_bulk_built_index_saves_the_bytes_the_previous_version_saved() -> None:
    rows = list(_rows(corpus()))
    bulk, by_text = KeywordIndex(), _built_text_by_text(rows)
    bulk.add_many(rows)
    assert bulk._postings == {} and len(bulk._base_slots) > 5_000  # packed, not a list per term
    for index in (bulk, by_text):
        for key in range(3, len(rows), 11):
            index.remove(key)
    saved = bulk.to_bytes()
    assert by_text.to_bytes() == saved
    assert hashlib.sha256(saved).hexdigest() == PREVIOUS_VERSION_SAVED
    assert KeywordIndex.from_bytes(saved).to_bytes() == saved


def test_bulk_loaded_and_piecewise_indexes_stay_identical_through_changes() -> None:
    rows = list(_rows(corpus(1_500, seed=9)))
    bulk = KeywordIndex()
    bulk.add_many(rows[:1_000])
    pieces = KeywordIndex()
    for start in range(0, 1_000, 170):  # the first batch packs, the later ones append lists
        pieces.add_many(rows[start : min(start + 170, 1_000)])
    by_text = _built_text_by_text(rows[:1_000])
    loaded = KeywordIndex.from_bytes(bulk.to_bytes())
    indexes = [bulk, pieces, by_text, loaded]
    assert len({index.to_bytes() for index in indexes}) == 1
    for index in indexes:
        index.add_many([*rows[1_000:1_300], rows[5]])  # an existing key is skipped
        for key, text, order in rows[1_300:]:
            index.add(key, text, order)
        for key in (1, 2, 500, 1_200, 1_499):
            index.remove(key)
    saved = {index.to_bytes() for index in indexes}
    assert len(saved) == 1
    again = KeywordIndex.from_bytes(saved.pop())
    queries = ["TP53 kinase", "café naïve", "8 May 2023", "when did Nate read", "9f86d081884c7d65", "the", "日本語",
               "2023", "Straße phosphorylation e-value", "zzz"]
    for query in queries:
        terms = analyze_query(query)
        want_keys, want_scores = by_text.top(terms, 50)
        for index in (*indexes, again):
            keys, scores = index.top(terms, 50)
            assert keys.tolist() == want_keys.tolist(), query
            assert np.array_equal(scores, want_scores), query
        assert bulk.spoken_by(range(1, 1_501), query) == by_text.spoken_by(range(1, 1_501), query)


def test_an_empty_batch_and_texts_without_words() -> None:
    index = KeywordIndex()
    index.add_many([])
    index.add_many([(1, "", 5), (2, "!!! ---", 6)])
    assert len(index) == 2 and index.top(["x"], 5)[0].tolist() == []
    index.add_many([(3, "kinase", 7)])
    assert index.top(["kinas"], 5)[0].tolist() == [3]
    assert KeywordIndex.from_bytes(index.to_bytes()).top(["kinas"], 5)[0].tolist() == [3]


# -- the store: what closing after a bulk write saves ---------------------------------------------


def _storable(text: str) -> bool:
    try:
        check_content(text)
    except InvalidInputError:  # empty, NUL, a lone surrogate: refused before it reaches a store
        return False
    return True


def _items(texts: list[str], user: str) -> list[dict[str, object]]:
    return [{"content": text, "user_id": user, "agent_id": "shared-agent"} for text in texts if _storable(text)]


def _saved_and_rows(path: Path, user: str) -> tuple[bytes, list[tuple[int, str, int]]]:
    conn = sqlite3.connect(path)
    try:
        (blob,) = conn.execute("SELECT data FROM keyword_snapshots WHERE user_id = ?", (user,)).fetchone()
        rows = conn.execute("SELECT seq, content, created_us FROM memories WHERE user_id = ? ORDER BY seq",
                            (user,)).fetchall()
    finally:
        conn.close()
    return blob, rows


async def test_closing_after_a_bulk_write_saves_what_indexing_text_by_text_gives(tmp_path: Path) -> None:
    # alice searched before her bulk write (her cached index catches up in one batch), bob did not
    # (his is built whole at close); they share the agent id and the texts, never an index.
    path = tmp_path / "bulk.db"
    texts = corpus(2_600, seed=11)
    store = SQLiteAdapter(path, embedder=None)
    await store.add_many(_items(texts[:300], "alice"))
    assert await store.search("kinase", "alice", "shared-agent", limit=3)
    await store.add_many(_items(texts[300:], "alice") + _items(texts, "bob"))
    await store.aclose()
    for user in ("alice", "bob"):
        blob, rows = _saved_and_rows(path, user)
        # the index's own order (the store reads a namespace newest first, then appends what follows)
        slots = KeywordIndex.from_bytes(blob)._columns()[0].tolist()
        assert sorted(slots) == [seq for seq, _, _ in rows] and len(rows) > 2_000
        by_seq = {row[0]: row for row in rows}
        assert blob == _built_text_by_text([by_seq[seq] for seq in slots]).to_bytes(), user
    reopened = SQLiteAdapter(path, embedder=None)
    try:
        for query in ("TP53 kinase 2023", "Caroline yesterday", "café"):
            alice = [h.content for h in await reopened.search(query, "alice", "shared-agent", limit=20)]
            bob = [h.content for h in await reopened.search(query, "bob", "shared-agent", limit=20)]
            assert alice and set(alice) <= set(texts) and set(bob) <= set(texts)
    finally:
        await reopened.aclose()


@pytest.mark.parametrize("enabled", [True, False])
async def test_closing_leaves_the_gc_as_the_caller_had_it(tmp_path: Path, enabled: bool) -> None:
    store = SQLiteAdapter(tmp_path / "gc.db", embedder=None)
    await store.add_many(_items(corpus(1_200, seed=5), "u"))
    (gc.enable if enabled else gc.disable)()
    try:
        await store.aclose()
        assert gc.isenabled() is enabled
        assert _saved_and_rows(tmp_path / "gc.db", "u")[0]  # the close did build and save the index
    finally:
        gc.enable()


async def test_a_failing_build_at_close_warns_and_leaves_the_gc_on(tmp_path: Path) -> None:
    # another tool wrote a blob where a memory's text belongs: analysing it fails half-way
    path = tmp_path / "broken.db"
    store = SQLiteAdapter(path, embedder=None)
    await store.add_many(_items(corpus(1_200, seed=6), "u"))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE memories SET content = CAST(content AS BLOB) WHERE seq = 700")
    conn.commit()
    conn.close()
    assert gc.isenabled()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await store.aclose()
    assert any("search snapshots not saved on close" in str(w.message) for w in caught)
    assert gc.isenabled()


def test_gc_paused_restores_the_state_on_error() -> None:
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            with pytest.raises(ZeroDivisionError), gc_paused():
                assert not gc.isenabled()
                _ = 1 / 0
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
