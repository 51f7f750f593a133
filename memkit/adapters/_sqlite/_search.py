"""One search of the store, start to finish, on the adapter's worker thread."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from memkit._filters import Condition
from memkit._keyword import analyze_query
from memkit._models import MemoryItem
from memkit._retrieval import DenseScores, HybridConfig, dense_leg, fuse
from memkit.adapters._sqlite._keywords import KeywordCache, snapshot
from memkit.adapters._sqlite._sql import allowed, filter_sql, records_by_seq
from memkit.adapters._sqlite._vectors import Vectors

__all__ = ["ranked"]


def keyword_ranked(
    db: sqlite3.Connection, keywords: KeywordCache, text: str, user_id: str, agent_id: str,
    conditions: tuple[Condition, ...], limit: int,
) -> list[tuple[int, float]]:
    """The keyword leg: ``(seq, bm25)`` of the best ``limit`` memories that pass the filters."""
    terms = analyze_query(text)
    if not terms:
        return []
    index = keywords.index(db, user_id, agent_id)
    where, params = filter_sql(conditions)
    sql = (
        "SELECT m.seq FROM memories m WHERE m.seq IN (SELECT value FROM json_each(?))"  # noqa: S608
        # unary + keeps the planner on the seq primary key: the namespace index would scan it all
        f" AND +m.user_id = ? AND +m.agent_id = ? AND {where}"
    )
    want = limit
    while True:
        # Filters are checked on the best candidates first, widening until enough pass; only the
        # seqs come back from that check, full rows are read for the hits alone.
        seqs, scores = index.top(terms, want if conditions else limit)
        passed = {row[0] for row in db.execute(sql, [json.dumps(seqs.tolist()), user_id, agent_id, *params])}
        hits = [(s, float(score)) for s, score in zip(seqs.tolist(), scores, strict=True) if s in passed]
        if len(hits) >= limit or len(seqs) < want or not conditions:
            return hits[:limit]
        want *= 8


def _dense(
    db: sqlite3.Connection, vectors: Vectors, query: np.ndarray, user_id: str, agent_id: str,
    conditions: tuple[Condition, ...], depth: int, extra: list[int],
) -> DenseScores:
    # One read transaction: a restored index reads the vectors it rescores as of its feed position.
    with snapshot(db):
        index = vectors.index(db, user_id, agent_id, depth, bool(conditions))
        passing = None if not conditions else (lambda seqs: allowed(db, seqs, conditions))
        return dense_leg(index, query, depth, passing, extra)


def ranked(
    db: sqlite3.Connection, keywords: KeywordCache, vectors: Vectors, mode: str, text: str | None,
    vector: np.ndarray | None, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int,
    config: HybridConfig,
) -> list[MemoryItem]:
    """Rank the namespace in ``mode`` (the index and connection live on this thread)."""
    if mode == "keyword":
        assert text is not None
        hits = keyword_ranked(db, keywords, text, user_id, agent_id, conditions, limit)
        rows = records_by_seq(db, (s for s, _ in hits))
        return [
            rows[s].to_item(score, {"mode": "keyword", "keyword": {"rank": rank, "score": score}})
            for rank, (s, score) in enumerate(((s, score) for s, score in hits if s in rows), start=1)
        ]
    if vector is None:
        assert text is not None
        vector = vectors.embed([text])[0]
    if mode == "semantic":
        dense = _dense(db, vectors, vector, user_id, agent_id, conditions, limit, [])
        records = records_by_seq(db, dense.ranked)
        order = sorted(dense.ranked, key=lambda q: (-dense.cosine[q], -records[q].created_us, -q))
        return [
            records[q].to_item(
                dense.cosine[q], {"mode": "semantic", "semantic": {"rank": rank, "score": dense.cosine[q]}}
            )
            for rank, q in enumerate(order, start=1)
        ]
    assert text is not None
    depth = max(config.candidates, limit)
    hits = keyword_ranked(db, keywords, text, user_id, agent_id, conditions, depth)
    dense = _dense(db, vectors, vector, user_id, agent_id, conditions, depth, [q for q, _ in hits])
    fused = fuse(hits, dense, config)
    # Ties go newest first, so creation times are needed for every candidate; whole rows
    # (JSON metadata and all) only for the ones returned.
    created = dict(db.execute(
        "SELECT seq, created_us FROM memories WHERE seq IN (SELECT value FROM json_each(?))",
        (json.dumps([q for q, _, _ in fused]),),
    ))
    fused.sort(key=lambda t: (-t[1], -created.get(t[0], 0), -t[0]))
    top = fused[:limit]
    records = records_by_seq(db, (q for q, _, _ in top))
    return [records[q].to_item(score, details) for q, score, details in top if q in records]
