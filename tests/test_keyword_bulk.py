"""Indexing a whole namespace at once, as a store does when it closes after a bulk import or on a
namespace's first search: the terms odd texts give, the bytes a saved index keeps, and what a search
then finds (CJK, diacritics, numbers, trace ids, dates), namespace by namespace.
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

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit import InvalidInputError
from memkit._core._validate import check_content
from memkit._retrieval._keyword import KeywordIndex, analyze, analyze_many, analyze_query, stemmed_words
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


# -- analysis: the terms of odd texts -------------------------------------------------------------

TERMS = {
    # underscores and punctuation split words; numbers are terms of their own, as FTS5 keeps them
    "snake_case_word e-value 1e-30 3.14159 007 TP53":
        ["snake", "case", "word", "e", "valu", "1e", "30", "3", "14159", "007", "tp53"],
    "日本語のテキスト 中文": ["日本語のテキスト", "中文"],  # a run of CJK is one word, as in FTS5's unicode61
    # diacritics go; a combining mark splits a word, as it does in FTS5
    "e\u0301te\u0301 café naïve Straße İstanbul ǅemal ﬁne Ⅻ x²":
        ["e", "te", "cafe", "naiv", "straß", "i", "stanbul", "ǆemal", "ﬁne", "ⅻ", "x²"],
    "\ud800 yesterday \udfff": ["yesterdai", "timeref"],  # lone surrogates are no words
    # a year in other digits is a year; the words stay as written
    "born 20٢٣-05-08 ２０２３ ١٢٣": ["born", "20٢٣", "05", "08", "２０２３", "١٢٣",
                                   "ymd20230508", "ym202305", "y2023", "m05"],
    # relative dates resolve against the line's own date
    "[1:56 pm on 8 May, 2023] Caroline: we met last Friday, three years ago":
        ["1", "56", "pm", "on", "8", "mai", "2023", "carolin", "we", "met", "last", "fridai", "three", "year", "ago",
         "ymd20230508", "ym202305", "y2023", "m05", "ymd20230505", "ym202305", "y2023", "m05", "y2020", "timeref"],
    # a trace step: its numbers and ids are terms, and no date is read into them
    '{"duration": 0.00042, "span_id": "9f86d081884c7d65", "start_time": 1764000000.5, "status": "success"}':
        ["durat", "0", "00042", "span", "id", "9f86d081884c7d65", "start", "time", "1764000000", "5", "statu",
         "success"],
    "running 42 kinases in 2023_05_08 may_2023": ["run", "42", "kinas", "in", "2023", "05", "08", "mai", "2023"],
    "May I ask?": ["mai", "i", "ask"],
    "": [],
}


def test_the_terms_of_odd_texts() -> None:
    for text, terms in TERMS.items():
        assert analyze(text) == terms, text
    assert analyze_many(TERMS) == list(TERMS.values())  # a batch analyses each text alike
    assert analyze_query("when did we meet in May 2023?") == ["meet", "mai", "2023", "ym202305", "timeref"]


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
    # words and numbers mixed, batch after batch
    assert stemmed_words("running 42 kinases") == ["run", "42", "kinas"]
    assert stemmed_words("calling 7 variants ２３") == ["call", "7", "variant", "２３"]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_analyses_into_lower_case_words(text: str) -> None:
    for term in analyze(text):
        assert term and " " not in term and term == term.lower()


# -- the index: what a bulk-built index saves and finds ---------------------------------------------


def test_a_bulk_built_index_saves_the_bytes_earlier_versions_saved() -> None:
    # an index saved by an earlier version is loaded as it is (same ANALYZER): the same texts must
    # give the same bytes, or ANALYZER must change so that old indexes are rebuilt
    rows = list(_rows(corpus()))
    index = KeywordIndex()
    index.add_many(rows)
    for key in range(3, len(rows), 11):
        index.remove(key)
    saved = index.to_bytes()
    assert hashlib.sha256(saved).hexdigest() == PREVIOUS_VERSION_SAVED
    assert KeywordIndex.from_bytes(saved).to_bytes() == saved


def test_an_empty_batch_and_texts_without_words() -> None:
    index = KeywordIndex()
    index.add_many([])
    index.add_many([(1, "", 5), (2, "!!! ---", 6)])
    assert len(index) == 2 and index.top(["x"], 5)[0].tolist() == []
    index.add_many([(3, "kinase", 7), (3, "kinase again", 8)])  # a key twice: the first text counts
    assert index.top(["kinas"], 5)[0].tolist() == [3] and index.top(["again"], 5)[0].tolist() == []
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


def _saved(path: Path, user: str) -> bytes | None:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT data FROM keyword_snapshots WHERE user_id = ?", (user,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


# (memory, a query that must find it first): CJK, diacritics, numbers, a trace step's id, dates
FINDS = [
    ("東京タワーの写真を撮った", "東京タワーの写真を撮った"),
    ("Zéphyrine sent her résumé to the Straße office", "zephyrine resume"),
    ("order 8675309 shipped", "8675309"),
    ('[trace] workflow=w agent=a data={"span_id": "5eed0f00dcafe123", "step_name": "rank"}', "5eed0f00dcafe123"),
    ("[3 March, 2021] Nate: the quokka census counted 41 animals", "when was the quokka census in March 2021?"),
]


async def _hits(store: SQLiteAdapter, query: str, user: str, limit: int = 5) -> list[str]:
    return [hit.content for hit in await store.search(query, user, "shared-agent", limit=limit)]


async def test_a_namespace_indexed_whole_finds_its_odd_memories(tmp_path: Path) -> None:
    # bob's namespace is indexed whole when the store closes after his bulk write, then loaded by the
    # next process; alice's cached index catches up with her bulk write. They share the agent id.
    path = tmp_path / "bulk.db"
    filler = corpus(2_400, seed=11)
    store = SQLiteAdapter(path, embedder=None)
    await store.add_many(_items(filler[:300], "alice"))
    assert await _hits(store, "kinase", "alice")
    await store.add_many(_items(filler[300:], "alice") + _items([m for m, _ in FINDS], "alice"))
    await store.add_many(_items(filler, "bob") + _items([m for m, _ in FINDS], "bob"))
    for memory, query in FINDS:
        assert (await _hits(store, query, "alice"))[0] == memory, query
    await store.aclose()
    assert _saved(path, "alice") and _saved(path, "bob")  # the close saved both namespaces
    reopened = SQLiteAdapter(path, embedder=None)
    try:
        for user in ("alice", "bob"):
            for memory, query in FINDS:
                assert (await _hits(reopened, query, user))[0] == memory, (user, query)
        bob = await reopened.get_all("bob", "shared-agent", limit=5_000)
        gone = next(m for m in bob if m.content == FINDS[2][0])
        await reopened.delete(gone.id)
        assert FINDS[2][0] not in await _hits(reopened, FINDS[2][1], "bob")
        assert (await _hits(reopened, FINDS[2][1], "alice"))[0] == FINDS[2][0]  # namespaces never share
        assert await _hits(reopened, "zephyrine", "carol") == []
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
        assert _saved(tmp_path / "gc.db", "u")  # the close did build and save the index
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
