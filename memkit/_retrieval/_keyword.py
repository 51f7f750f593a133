"""Keyword retrieval: one BM25 index per namespace, in numpy, shared by every adapter.

Text is analysed like SQLite FTS5's ``porter unicode61`` tokenizer (lower-case,
diacritics removed, split on anything that is not a letter or digit, Porter
stemming of tokens longer than two characters), plus the date terms of
:mod:`memkit._retrieval._dates` (a memory's dates, relative ones resolved, and a marker for
memories that say when something happened) and the speaker terms of a chat line
(``"[date] Caroline: ..."`` -> ``@caroline``, see :func:`speaker_terms`), and scored with FTS5's ``bm25()``
formula (idf floored at 1e-6) with k1 = 0.9, b = 0.4 instead of FTS5's fixed 1.2 and
0.75: chat-sized memories vary little in length, and the lower values won in every
held-out fold on LoCoMo (docs/retrieval.md).

Unlike FTS5, which scores every matching row, the index scores a query with a
few vectorised operations over the query terms' posting arrays, so a query
whose words appear in a third of a 100,000-memory namespace still costs about a
millisecond. Statistics (N, document frequency, average length) are those of
the namespace alone: one tenant's memories never change another's ranking.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import threading
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from memkit._retrieval._dates import date_terms, query_date_terms

__all__ = ["ANALYZER", "STOPWORDS", "KeywordIndex", "StaleIndexError", "analyze", "analyze_many", "analyze_query",
           "query_words", "speaker_terms", "stemmed_words"]

#: Version of the analysis below; an index saved by another version is rebuilt, never mixed.
ANALYZER = 3

# Dropped from queries (never from stored text): they match almost every memory,
# cost the most to score, and add nothing to the ranking.
STOPWORDS = frozenset(
    [
        "a", "about", "above", "after", "again", "all", "am", "an", "and", "any", "are", "as", "at", "be",
        "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
        "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had",
        "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how",
        "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself",
        "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours",
        "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that",
        "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those",
        "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when",
        "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
        "yourself", "yourselves"
    ]
)

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
# The same split of an ASCII text: letters lower-cased, digits kept, any other character a space.
_ASCII_WORDS = str.maketrans({chr(c): chr(c).lower() if chr(c).isalnum() else " " for c in range(128)})
K1, B = 0.9, 0.4

# A chat line's speaker: an optional "[timestamp]" prefix, then one to three capitalised words and a
# colon ("[1:56 pm on 8 May, 2023] Caroline: ...", "John Smith: ..."). Its words become speaker terms.
# Possessive words: neither " " nor ":" is a word character, so giving one back never helps a match,
# and a line that is no chat line fails at once instead of trying every split of its first words.
_SPEAKER = re.compile(r"\s*(?:\[[^\]\n]{0,80}\]\s*)?([^\W\d_][\w'.-]*+(?: [^\W\d_][\w'.-]*+){0,2}):", re.UNICODE)
#: Speaker terms start with this, which no word token contains, so a query's words never match them.
SPEAKER_MARK = "@"
_K = TypeVar("_K")


def speaker_terms(text: str) -> list[str]:
    """``@word`` for each lower-cased word of the speaker a chat line starts with (none otherwise).

    Kept out of BM25 (no query term starts with ``@``) and out of the document length: they only
    say who spoke, for :meth:`KeywordIndex.spoken_by`.
    """
    match = _SPEAKER.match(text) if ":" in text else None  # every add asks; most texts have no colon
    if match is None or not all(word[0].isupper() for word in match.group(1).split()):
        return []
    return [SPEAKER_MARK + word for word in dict.fromkeys(_tokens(match.group(1)))]


def named_speakers(texts: Mapping[_K, str], query: str) -> set[_K]:
    """The keys of ``texts`` that are chat lines by someone ``query`` names: what
    :meth:`KeywordIndex.spoken_by` answers, for a store that keeps no index in the process
    (it reads the candidates' text instead)."""
    words = {SPEAKER_MARK + word for word in _tokens(query)}
    return {key for key, text in texts.items() if words and not words.isdisjoint(speaker_terms(text))}


class StaleIndexError(ValueError):
    """A saved index was analysed differently from this version (see :data:`ANALYZER`)."""


class _Stemmer:
    """Porter stemming by SQLite's own FTS5 ``porter unicode61`` tokenizer (C, exact, offline).

    Unknown tokens are inserted into a scratch FTS5 table and read back through
    ``fts5vocab``; results are cached, so each distinct word is stemmed once per process.
    ASCII digits are their own stem (unicode61 keeps them, Porter's rules end in letters): a trace
    step's numbers and timestamps are half of its distinct tokens, and skip SQLite.
    """

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        # Contentless: nothing is read back but the vocabulary, and 'delete-all' empties it at once
        # (a DELETE would tokenise every row again to find what to remove).
        self._db.execute("CREATE VIRTUAL TABLE words USING fts5(word, content='', tokenize='porter unicode61')")
        self._db.execute("CREATE VIRTUAL TABLE terms USING fts5vocab(words, 'instance')")
        self._lock = threading.Lock()
        self.cache: dict[str, str] = {}

    def learn(self, tokens: Iterable[str]) -> None:
        cache = self.cache
        unknown = {t for t in tokens if t not in cache}
        if not unknown:
            return
        numbers = [t for t in unknown if t.isdigit() and t.isascii()]
        words = list(unknown.difference(numbers)) if numbers else list(unknown)
        with self._lock:
            found: dict[int, str] = {}
            if words:
                db = self._db
                db.execute("BEGIN")
                db.executemany("INSERT INTO words (rowid, word) VALUES (?, ?)", enumerate(words))
                found = dict(db.execute("SELECT doc, term FROM terms WHERE offset = 0"))
                db.execute("INSERT INTO words (words) VALUES ('delete-all')")
                db.execute("COMMIT")
            if len(cache) > 2_000_000:  # bound memory on pathological vocabularies
                cache.clear()
            for row, token in enumerate(words):
                cache[token] = found.get(row, token)
            cache.update({number: number for number in numbers})


_stemmer = _Stemmer()


def _tokens(text: str) -> list[str]:
    """The lower-cased runs of letters and digits of ``text`` (no underscores), in order."""
    if text.isascii():  # the usual text: one C pass, where the pattern tests each character's class
        return text.translate(_ASCII_WORDS).split()
    return _TOKEN.findall(text.lower())


def stemmed_words(text: str) -> list[str]:
    """The words of ``text`` as FTS5's ``porter unicode61`` indexes them, in order (repeats kept)."""
    tokens = _tokens(text)
    _stemmer.learn(tokens)
    cache = _stemmer.cache
    return [cache[t] for t in tokens]


def analyze(text: str) -> list[str]:
    """The index terms of ``text``: :func:`stemmed_words`, then its date terms (no speaker terms)."""
    tokens = _tokens(text)
    _stemmer.learn(tokens)
    cache = _stemmer.cache
    return [cache[t] for t in tokens] + date_terms(text, tokens)


def analyze_many(texts: Iterable[str]) -> list[list[str]]:
    """:func:`analyze` of each text, for a batch: each text is split once, and the batch's new words
    are stemmed in one round (a round per text costs a write of many texts more than the analysis)."""
    texts = list(texts)
    tokens = [_tokens(text) for text in texts]
    _stemmer.learn(t for words in tokens for t in words)
    cache = _stemmer.cache
    return [[cache[t] for t in words] + date_terms(text, words) for text, words in zip(texts, tokens, strict=True)]


def query_words(text: str) -> list[str]:
    """Distinct lower-cased words of a query, stopwords dropped unless the query has nothing else.

    For backends with their own full-text engine, which stem the words themselves.
    """
    tokens = list(dict.fromkeys(_tokens(text)))
    return [t for t in tokens if t not in STOPWORDS] or tokens


def analyze_query(text: str) -> list[str]:
    """Distinct index terms of a query (:func:`query_words`, stemmed, then its date terms)."""
    kept = query_words(text)
    _stemmer.learn(kept)
    return list(dict.fromkeys([*(_stemmer.cache[t] for t in kept), *query_date_terms(text)]))


class _SavedTerms:
    """The terms of a saved index with their ``(start, end)`` in its packed postings, looked up by
    bisection: :meth:`KeywordIndex.to_bytes` saves them sorted, and a loaded index is searched for a
    handful of terms, so building a dict of every term (tens of thousands) would cost more than it saves."""

    __slots__ = ("_ends", "_terms")

    def __init__(self, terms: list[str], ends: list[int]) -> None:
        self._terms, self._ends = terms, ends

    def get(self, term: str) -> tuple[int, int] | None:
        at = bisect_left(self._terms, term)
        if at == len(self._terms) or self._terms[at] != term:
            return None
        return (self._ends[at - 1] if at else 0), self._ends[at]

    def __iter__(self) -> Iterator[str]:
        return iter(self._terms)

    @property
    def terms(self) -> list[str]:
        return self._terms

    @property
    def ends(self) -> list[int]:
        return self._ends


class KeywordIndex:
    """BM25 over one namespace: documents are appended, deleted ones are masked out.

    ``key`` is the store's own row key (an int that grows with insertion) and
    ``order`` the creation time; ties in score go to the larger ``(order, key)``,
    which is "newest first".
    """

    def __init__(self) -> None:
        self._slot: dict[int, int] = {}
        self._keys: list[int] = []
        self._order: list[int] = []
        self._lengths: list[int] = []
        self._alive: list[bool] = []
        self._postings: dict[str, tuple[list[int], list[int]]] = {}
        self._live = 0
        self._total_length = 0
        self._frozen: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]] = {}
        # Postings loaded by from_bytes: term -> (start, end) into the two packed arrays.
        self._base_terms = _SavedTerms([], [])
        self._base_slots: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self._base_tfs: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        # Per-document arrays loaded by from_bytes, turned into the lists above on the first change
        # (a loaded index that is only searched never pays for 100k-entry lists and dicts).
        self._loaded: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._arrays: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64],
                            npt.NDArray[np.bool_]] | None = None
        self._live_sorted: tuple[object, npt.NDArray[np.int64]] | None = None  # for neighbours(), per _arrays
        self._speakers: dict[str, tuple[tuple[int, int, int], npt.NDArray[np.int64]]] = {}  # see _spoken()

    def __len__(self) -> int:
        return self._live

    def __contains__(self, key: int) -> bool:
        self._thaw()
        return key in self._slot and self._alive[self._slot[key]]

    def add(self, key: int, text: str, order: int) -> None:
        """Index one document; adding a key twice is a no-op."""
        self._thaw()
        if key not in self._slot:
            self._add(key, analyze(text), speaker_terms(text), order)

    def _add(self, key: int, terms: list[str], speakers: list[str], order: int) -> None:
        slot = len(self._keys)
        self._slot[key] = slot
        self._keys.append(key)
        self._order.append(order)
        self._lengths.append(len(terms))
        self._alive.append(True)
        self._live += 1
        self._total_length += len(terms)
        postings, frozen = self._postings, self._frozen
        for term, tf in Counter(terms + speakers).items():
            entry = postings.get(term)
            if entry is None:
                postings[term] = ([slot], [tf])
            else:
                entry[0].append(slot)
                entry[1].append(tf)
            frozen.pop(term, None)  # a cached posting (loaded part + appended part) is now short
        self._arrays = None

    def add_many(self, rows: Iterable[tuple[int, str, int]]) -> None:
        """Index many documents: new words are stemmed in one batch, postings built with numpy.

        Into an empty index (a namespace indexed whole, as when a store closes after an import)
        the postings go straight into the packed arrays a loaded index has, which :meth:`to_bytes`
        writes as they are: no list per term is made only to be packed again.
        """
        self._thaw()
        # Each distinct token of the batch gets an id when first seen, by C-level lookups (no
        # Python call per word). A date or speaker term is keyed with a leading space, which no
        # token has: it is indexed as it is, where a token is indexed by its stem.
        ids: defaultdict[str, int] = defaultdict(int)
        ids.default_factory = ids.__len__
        seen: set[int] = set()
        occurrences: list[int] = []
        keys: list[int] = []
        orders: list[int] = []
        lengths: list[int] = []
        counts: list[int] = []  # a document's term occurrences, speaker terms included
        for key, text, order in rows:
            if key in self._slot or key in seen:
                continue
            seen.add(key)
            tokens = _tokens(text)
            occurrences.extend(map(ids.__getitem__, tokens))
            extra = date_terms(text, tokens)
            speakers = speaker_terms(text)
            if extra or speakers:
                occurrences.extend([ids[" " + term] for term in extra + speakers])
            keys.append(key)
            orders.append(order)
            lengths.append(len(tokens) + len(extra))
            counts.append(lengths[-1] + len(speakers))
        if not keys:
            return
        names = list(ids)  # insertion order is id order
        _stemmer.learn([name for name in names if name[0] != " "])
        cache = _stemmer.cache
        terms = [name[1:] if name[0] == " " else cache[name] for name in names]
        first = len(self._keys)
        empty = not first and not self._postings and not self._base_terms.ends
        self._slot.update(zip(keys, range(first, first + len(keys)), strict=True))
        self._keys.extend(keys)
        self._order.extend(orders)
        self._lengths.extend(lengths)
        self._alive.extend([True] * len(keys))
        self._live += len(keys)
        self._total_length += sum(lengths)
        self._arrays = None
        if not occurrences:
            return
        # Term ranks in sorted order, the order a saved index keeps its terms in
        distinct = sorted(set(terms))
        rank = dict(zip(distinct, range(len(distinct)), strict=True))
        rank_of_id = np.fromiter(map(rank.__getitem__, terms), dtype=np.int64, count=len(terms))
        # (term, doc) pairs as one number, sorted: by term, then doc; runs of equal pairs are term frequencies
        width = first + len(keys)
        pairs = rank_of_id[np.asarray(occurrences, dtype=np.int64)] * width
        pairs += np.repeat(np.arange(first, width, dtype=np.int64), counts)
        pairs.sort()
        starts = np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1]])
        pair_tfs = np.diff(np.append(starts, len(pairs)))
        pairs = pairs[starts]
        pair_terms, pair_docs = np.divmod(pairs, width)
        ends = np.cumsum(np.bincount(pair_terms, minlength=len(distinct)))
        if empty:
            self._base_terms = _SavedTerms(distinct, ends.tolist())
            self._base_slots, self._base_tfs = pair_docs.astype(np.int32), pair_tfs.astype(np.int32)
            self._frozen.clear()
            return
        postings, frozen = self._postings, self._frozen
        all_slots, all_tfs = pair_docs.tolist(), pair_tfs.tolist()
        lo = 0
        for term, hi in zip(distinct, ends.tolist(), strict=True):
            slots, tfs = all_slots[lo:hi], all_tfs[lo:hi]
            lo = hi
            entry = postings.get(term)
            if entry is None:
                postings[term] = (slots, tfs)
            else:
                entry[0].extend(slots)
                entry[1].extend(tfs)
            frozen.pop(term, None)

    def remove(self, key: int) -> bool:
        self._thaw()
        slot = self._slot.get(key)
        if slot is None or not self._alive[slot]:
            return False
        self._alive[slot] = False
        self._live -= 1
        self._total_length -= self._lengths[slot]
        self._arrays = None
        return True

    def _columns(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64],
                                npt.NDArray[np.bool_]]:
        if self._arrays is None:
            self._arrays = (
                np.asarray(self._keys, dtype=np.int64),
                np.asarray(self._order, dtype=np.int64),
                np.asarray(self._lengths, dtype=np.float64),
                np.asarray(self._alive, dtype=np.bool_),
            )
        return self._arrays

    def _posting(self, term: str) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]] | None:
        frozen = self._frozen.get(term)
        if frozen is None:
            raw = self._postings.get(term)
            span = self._base_terms.get(term)
            if raw is None and span is None:
                return None
            slots = np.asarray(raw[0] if raw else [], dtype=np.int64)
            tfs = np.asarray(raw[1] if raw else [], dtype=np.float64)
            if span is not None:  # loaded postings first: their slots are the older ones
                lo, hi = span
                slots = np.concatenate([self._base_slots[lo:hi].astype(np.int64), slots])
                tfs = np.concatenate([self._base_tfs[lo:hi].astype(np.float64), tfs])
            frozen = (slots, tfs)
            self._frozen[term] = frozen
        return frozen

    # -- persistence: an index saved once loads in milliseconds instead of re-analysing every text

    def to_bytes(self) -> bytes:
        """The whole index as one blob (see :meth:`from_bytes`)."""
        terms, ends, slots, tfs = self._packed()
        keys, order, lengths, alive = self._columns()
        header = json.dumps({"analyzer": ANALYZER, "terms": terms, "docs": len(keys), "postings": len(slots),
                             "live": self._live, "total_length": self._total_length}).encode()
        parts = [
            keys.astype("<i8"), order.astype("<i8"), lengths.astype("<i4"), alive.astype("u1"),
            ends.astype("<i8"), slots.astype("<i4"), tfs.astype("<i4"),
        ]
        return len(header).to_bytes(8, "little") + header + b"".join(p.tobytes() for p in parts)

    def _packed(self) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """Every term, sorted, with the end of its posting in the packed slots and frequencies:
        the loaded (or bulk-built) postings of a term first, then those appended since."""
        base_terms, base_ends = self._base_terms.terms, np.asarray(self._base_terms.ends, dtype=np.int64)
        if not self._postings:
            return base_terms, base_ends, self._base_slots, self._base_tfs
        new_terms = sorted(self._postings)
        lists = [self._postings[term] for term in new_terms]
        new_counts = np.fromiter((len(p[0]) for p in lists), dtype=np.int64, count=len(lists))
        new_slots = np.fromiter(chain.from_iterable(p[0] for p in lists), dtype=np.int32, count=int(new_counts.sum()))
        new_tfs = np.fromiter(chain.from_iterable(p[1] for p in lists), dtype=np.int32, count=len(new_slots))
        if not base_terms:
            return new_terms, np.cumsum(new_counts), new_slots, new_tfs
        terms = sorted(set(base_terms).union(new_terms))
        rank = dict(zip(terms, range(len(terms)), strict=True))
        base_counts = np.diff(base_ends, prepend=0)
        term_of = np.concatenate([  # each posting entry's term rank: loaded entries, then appended ones
            np.repeat(np.fromiter(map(rank.__getitem__, base_terms), dtype=np.int64, count=len(base_terms)),
                      base_counts),
            np.repeat(np.fromiter(map(rank.__getitem__, new_terms), dtype=np.int64, count=len(new_terms)),
                      new_counts),
        ])
        by_term = np.argsort(term_of, kind="stable")  # stable: a term's loaded entries stay first
        ends = np.cumsum(np.bincount(term_of, minlength=len(terms)))
        slots = np.concatenate([self._base_slots, new_slots])[by_term]
        tfs = np.concatenate([self._base_tfs, new_tfs])[by_term]
        return terms, ends, slots, tfs

    @classmethod
    def from_bytes(cls, blob: bytes) -> KeywordIndex:
        """An index saved by :meth:`to_bytes`; its postings stay packed arrays until a term is searched.

        Raises :class:`StaleIndexError` for an index another analyzer version saved (its terms would
        not match this version's queries): the caller rebuilds it from the texts.
        """
        size = int.from_bytes(blob[:8], "little")
        header = json.loads(blob[8 : 8 + size])
        if header.get("analyzer", 1) != ANALYZER:
            raise StaleIndexError(f"keyword index saved by analyzer {header.get('analyzer', 1)}, not {ANALYZER}")
        docs, total, terms = header["docs"], header["postings"], header["terms"]
        at = 8 + size

        def take(dtype: str, count: int) -> np.ndarray:
            nonlocal at
            array = np.frombuffer(blob, dtype=dtype, count=count, offset=at)
            at += array.nbytes
            return array

        keys, order = take("<i8", docs), take("<i8", docs)
        lengths, alive = take("<i4", docs), take("u1", docs).astype(bool)
        ends = take("<i8", len(terms))
        index = cls()
        index._base_slots, index._base_tfs = take("<i4", total), take("<i4", total)
        index._base_terms = _SavedTerms(terms, ends.tolist())
        index._loaded = (keys, order, lengths, alive)
        index._arrays = (keys.astype(np.int64), order.astype(np.int64), lengths.astype(np.float64), alive)
        index._live, index._total_length = header["live"], header["total_length"]
        return index

    def _thaw(self) -> None:
        """Turn loaded arrays into the appendable lists (once, before the first change)."""
        if self._loaded is None:
            return
        keys, order, lengths, alive = self._loaded
        self._loaded = None
        self._keys, self._order = keys.tolist(), order.tolist()
        self._lengths, self._alive = lengths.tolist(), alive.tolist()
        self._slot = dict(zip(self._keys, range(len(self._keys)), strict=True))

    def neighbours(self, keys: Iterable[int], reach: int) -> dict[int, list[tuple[int, int]]]:
        """For each live key, ``(distance, key)`` of the live keys up to ``reach`` places before and
        after it in writing order in this namespace (deleted ones skipped)."""
        columns = self._columns()
        if self._live_sorted is None or self._live_sorted[0] is not columns:
            all_keys, _, _, alive = columns
            self._live_sorted = (columns, np.sort(all_keys[alive]))
        live = self._live_sorted[1]
        wanted = np.fromiter(keys, dtype=np.int64)
        if len(live) == 0 or len(wanted) == 0:
            return {}
        at = np.searchsorted(live, wanted)
        found = live[np.minimum(at, len(live) - 1)] == wanted
        wanted, at = wanted[found], at[found]
        out: dict[int, list[tuple[int, int]]] = {key: [] for key in wanted.tolist()}
        for step in (s for d in range(1, reach + 1) for s in (-d, d)):
            place = at + step
            inside = (place >= 0) & (place < len(live))
            for key, other in zip(wanted[inside].tolist(), live[place[inside]].tolist(), strict=True):
                out[key].append((abs(step), other))
        return out

    def spoken_by(self, keys: Iterable[int], query: str) -> set[int]:
        """The ``keys`` whose memory is a chat line by someone the query names (by any word of the
        speaker's name, case-insensitively), for fusion's ``speaker`` weight."""
        wanted = np.fromiter(keys, dtype=np.int64)
        out: set[int] = set()
        for word in dict.fromkeys(_tokens(query)) if len(wanted) else ():
            spoken = self._spoken(SPEAKER_MARK + word)
            if spoken is not None and len(spoken):
                at = np.minimum(np.searchsorted(spoken, wanted), len(spoken) - 1)
                out.update(wanted[spoken[at] == wanted].tolist())
        return out

    def _spoken(self, term: str) -> npt.NDArray[np.int64] | None:
        """The live keys with speaker term ``term``, sorted; cached until the index changes (a speaker
        of a large chat namespace has tens of thousands of lines: sorting them per query would cost ms)."""
        posting = self._posting(term)
        if posting is None:
            return None
        stamp = (len(posting[0]), self._live, len(self._keys) if self._loaded is None else len(self._loaded[0]))
        cached = self._speakers.get(term)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        all_keys, _, _, alive = self._columns()
        slots = posting[0]
        spoken = np.sort(all_keys[slots[alive[slots]]])  # deleted memories speak no more
        self._speakers[term] = (stamp, spoken)
        return spoken

    def top(
        self, terms: list[str], k: int, *, k1: float | None = None, b: float | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Keys of the ``k`` best live documents matching any term, best first, with their BM25 scores.

        ``k1`` and ``b`` default to :data:`K1` and :data:`B` (FTS5's own are 1.2 and 0.75).
        """
        k1 = K1 if k1 is None else k1
        b = B if b is None else b
        keys, order, lengths, alive = self._columns()
        n = self._live
        if n == 0 or not terms:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
        norm = k1 * (1.0 - b + b * lengths / (self._total_length / n or 1.0))
        scores = np.zeros(len(keys), dtype=np.float64)
        any_deleted = self._live < len(keys)
        for term in terms:
            posting = self._posting(term)
            if posting is None:
                continue
            slots, tf = posting
            if any_deleted:
                live = alive[slots]
                slots, tf = slots[live], tf[live]
            df = len(slots)
            if df == 0:
                continue
            idf = math.log((n - df + 0.5) / (df + 0.5))
            idf = idf if idf > 0 else 1e-6  # FTS5's floor: a match always scores above zero
            scores[slots] += idf * tf * (k1 + 1.0) / (tf + norm[slots])
        hits = np.flatnonzero(scores)
        if len(hits) > k:
            # keep everything tied with the k-th score so the tie-break below stays exact
            kth = np.partition(scores[hits], len(hits) - k)[len(hits) - k]
            hits = hits[scores[hits] >= kth]
        # best score first; ties newest first (larger creation time, then larger key)
        ranking = np.lexsort((-keys[hits], -order[hits], -scores[hits]))[:k]
        best = hits[ranking]
        return keys[best], scores[best]

