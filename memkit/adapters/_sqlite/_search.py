"""One search of the store, start to finish, on the adapter's worker thread."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memkit._core._filters import Condition
from memkit._core._records import Record
from memkit._retrieval._fusion import DenseScores, dense_leg, widened
from memkit._retrieval._keyword import KeywordIndex, analyze_query
from memkit.adapters._sqlbase import created_by
from memkit.adapters._sqlite._keywords import KeywordCache, snapshot
from memkit.adapters._sqlite._sql import Passing, records_by_seq
from memkit.adapters._sqlite._vectors import Vectors
from memkit.store._search import Ranking, rank

if TYPE_CHECKING:  # the models load with a store's search; the one-shot keyword search needs none
    from memkit._core._models import MemoryItem

__all__ = ["Legs", "ranked", "ranked_records"]


class Legs(Ranking, Protocol):
    """What :func:`ranked_records` reads of a search (a :class:`memkit.store._ops.SearchOp` is one)."""

    @property
    def user_id(self) -> str: ...

    @property
    def agent_id(self) -> str: ...

    @property
    def conditions(self) -> tuple[Condition, ...]: ...

    @property
    def until_us(self) -> int | None: ...

    @property
    def depth(self) -> int: ...


def keyword_ranked(
    index: KeywordIndex, text: str, limit: int, passing: Passing | None,
) -> list[tuple[int, float]]:
    """The keyword leg: ``(seq, bm25)`` of the best ``limit`` memories of ``index`` that pass the filters."""
    terms = analyze_query(text)
    if not terms:
        return []
    want = limit
    while True:
        # Filters are checked on the best candidates first, widening until enough pass; only the
        # seqs come back from that check, full rows are read for the hits alone.
        seqs, scores = index.top(terms, want)
        keys = seqs.tolist()
        passed = set(keys) if passing is None else passing(keys)
        hits = [(s, float(score)) for s, score in zip(keys, scores, strict=True) if s in passed]
        if len(hits) >= limit or len(keys) < want or passing is None:
            return hits[:limit]
        want = widened(want, len(hits), limit)


def _dense(
    db: sqlite3.Connection, vectors: Vectors, query: np.ndarray, user_id: str, agent_id: str,
    passing: Passing | None, depth: int, extra: list[int],
) -> DenseScores:
    # One read transaction: a restored index reads the vectors it rescores as of its feed position.
    with snapshot(db):
        index = vectors.index(db, user_id, agent_id, depth, passing is not None)
        return dense_leg(index, query, depth, passing, extra)


def ranked(
    db: sqlite3.Connection, keywords: KeywordCache, vectors: Vectors, request: Legs,
    vector: np.ndarray | None = None,
) -> list[MemoryItem]:
    """The SQLite legs of :func:`memkit.store._search.rank` (the index and connection live on this thread)."""
    return [record.to_item(score, details) for record, score, details in
            ranked_records(db, keywords, vectors, request, vector)]


def ranked_records(
    db: sqlite3.Connection, keywords: KeywordCache, vectors: Vectors, request: Legs,
    vector: np.ndarray | None = None,
) -> list[tuple[Record, float, dict[str, Any]]]:
    """:func:`ranked` before the models: ``(record, score, score_details)``, best first (the command
    line's one-shot search prints these without loading pydantic)."""
    user_id, agent_id, conditions, text = request.user_id, request.agent_id, request.conditions, request.query
    if request.until_us is not None:
        conditions = (*conditions, created_by(request.until_us))
    depth = request.depth
    index = None if request.mode == "semantic" else keywords.index(db, user_id, agent_id)
    passing = Passing(db, user_id, agent_id, conditions) if conditions else None
    hits = [] if index is None else keyword_ranked(index, text, depth, passing)
    dense = None
    records: dict[int, Record] = {}
    if request.mode != "keyword":
        if vector is None:
            vector = vectors.embed([text])[0]
        dense = _dense(db, vectors, vector, user_id, agent_id, passing, depth, [q for q, _ in hits])

    def newer(seqs: list[int]) -> dict[int, tuple[int, int]]:
        if request.mode == "semantic":  # few candidates: read their rows now, they are all returned
            records.update(records_by_seq(db, seqs))
            return {q: (records[q].created_us if q in records else 0, q) for q in seqs}
        # Hybrid: creation times for every candidate; whole rows (JSON metadata and all) only for the returned.
        created = dict(db.execute(
            "SELECT seq, created_us FROM memories WHERE seq IN (SELECT value FROM json_each(?))",
            (json.dumps(seqs),),
        ))
        return {q: (created.get(q, 0), q) for q in seqs}

    top = rank(request, hits, dense, newer, None if index is None else index.neighbours,
               None if index is None else index.spoken_by)
    missing = [q for q, _, _ in top if q not in records]
    if missing:
        records.update(records_by_seq(db, missing))
    return [(records[q], score, details) for q, score, details in top if q in records]
