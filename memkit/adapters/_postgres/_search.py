"""Search in the PostgreSQL store: the keyword and dense legs run in the database, one after the
other on one connection, and memkit's shared pipeline fuses them (see :mod:`memkit.adapters._postgres._sql`).
"""

from __future__ import annotations

from typing import Any

from memkit._core._models import MemoryItem
from memkit._retrieval._fusion import CONTEXT_REACH, DenseScores
from memkit._retrieval._keyword import analyze_query, named_speakers
from memkit.adapters._postgres import _sql as q
from memkit.adapters._postgres._dense import VERSION_SQL, SampleCache
from memkit.adapters._postgres._keyword import keyword_hits
from memkit.adapters._postgres._schema import segment_bounds, segment_kinds
from memkit.store import _search as _pipeline
from memkit.store._ops import SearchOp

__all__ = ["ranked"]

_HNSW_SETTINGS = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %s, true),"
    " set_config('enable_sort', %s, true)"
)


async def ranked(
    pool: Any, request: SearchOp, conditions: tuple[Any, ...], vector: Any, samples: SampleCache,
) -> list[MemoryItem]:
    """The top memories for ``request``: the database's legs, memkit's fusion (``samples``: this
    store's cosine statistics, see :mod:`memkit.adapters._postgres._dense`)."""
    user, agent, depth = request.user_id, request.agent_id, request.depth
    created: dict[int, int] = {}
    hits: list[tuple[int, float]] = []
    terms = q.query_terms(analyze_query(request.query)) if request.mode != "semantic" else []
    async with pool.connection() as conn:
        # A filter's selectivity decides how both legs read: the rows that pass are scored
        # exactly when few enough do (see memkit._retrieval._config).
        exact = await q.filtered_exactly(conn, user, agent, conditions) if conditions else False

        if terms:
            for seq, created_us, score in await keyword_hits(conn, user, agent, list(dict.fromkeys(terms)),
                                                             conditions, depth, exact):
                hits.append((seq, score))
                created[seq] = created_us
        dense = None
        if vector is not None:
            dense = await _dense(conn, samples, user, agent, conditions, depth, vector, created, exact)
        around: dict[int, list[tuple[int, int]]] = {}
        heads: dict[int, str] = {}
        keys = list(dict.fromkeys([*(s for s, _ in hits), *(dense.ranked if dense else [])]))
        missing = [s for s, _ in hits if dense is not None and s not in dense.cosine]
        hybrid = request.mode == "hybrid" and keys
        # Independent statements, sent together: one round trip, not one each.
        async with conn.pipeline():
            cosines = await conn.execute(q.COSINES_SQL, (vector, user, agent, q.int_array(missing))) if missing \
                else None
            near = None
            if hybrid and request.config.context > 0 and len(keys) > 1:
                near = await conn.execute(*q.gaps_statement(user, agent, keys, len(CONTEXT_REACH)))
            # Who spoke a chat line is in its first characters; no index in this process holds it.
            spoke = await conn.execute(q.HEADS_SQL, (user, agent, q.int_array(keys))) \
                if hybrid and request.config.speaker > 0 else None
        if cosines is not None and dense is not None:
            for seq, created_us, cos in await cosines.fetchall():
                dense.cosine[seq] = q.finite(float(cos))
                created.setdefault(seq, created_us)
        if near is not None:
            around = q.neighbours(keys, [gap for gap, in await near.fetchall()], len(CONTEXT_REACH))
        if spoke is not None:
            heads = dict(await spoke.fetchall())

        def newer(seqs: list[int]) -> dict[int, tuple[int, int]]:
            return {s: (created.get(s, 0), s) for s in seqs}

        top = _pipeline.rank(request, hits, dense, newer, lambda keys, reach: around,
                             lambda keys, query: named_speakers({k: heads[k] for k in keys if k in heads}, query))
        wanted = [s for s, _, _ in top]
        rows = await (await conn.execute(
            f"SELECT {q.COLUMNS} FROM memories m WHERE m.seq = ANY(%s::bigint[])", (q.int_array(wanted),)  # noqa: S608
        )).fetchall() if wanted else []
    records = {r[0]: q.row_record(r) for r in rows}
    return [records[s].to_item(score, details) for s, score, details in top if s in records]

async def _dense(
    conn: Any, samples: SampleCache, user: str, agent: str, conditions: tuple[Any, ...], depth: int, vector: Any,
    created: dict[int, int], filtered_exactly: bool,
) -> DenseScores:
    """The dense leg; ``filtered_exactly``: few enough of the namespace's memories pass the filters
    that every one is scored (:func:`memkit._retrieval._config.dense_path`)."""
    size, top, embedder, writer, ends = await (
        await conn.execute(VERSION_SQL, {"u": user, "a": agent})).fetchone()
    size, segments = int(size or 0), segment_bounds(ends)
    if size == 0:
        return DenseScores({}, [], 0.0, 0.0)
    mean, std = await samples.stats(conn, user, agent, (size, int(top or 0), embedder, writer), vector)
    exact = size <= q.DENSE_EXACT_MAX or not segments or filtered_exactly
    # A deep leg (a hybrid search's candidates) asks each segment for about its share of them: a
    # segment's graph walk costs about the same for a tenth of the memories, so asking the small
    # ones for all 100 doubled the leg's time (at a million memories in 4 segments: 129 -> 64 ms,
    # the top 100 holding 43.6% -> 41.6% of the exact top 100, 25 queries, load average 11).
    limits = q.segment_limits(depth, segments, int(top or 0)) if not exact else []
    parts = q.dense_statements(user, agent, conditions, depth, exact, vector, segments, limits, segment_kinds(ends),
                               len(vector))
    # The settings, the statements and the transaction around them in one round trip.
    cursors = []
    async with conn.pipeline(), conn.transaction():
        for sql, params, asked in parts:
            if not exact:
                # Filtered HNSW scans keep going until enough rows of this namespace pass (iterative
                # scan). A segment of the index may hold a few thousand of the namespace's memories: for
                # a deep leg (ef_search 200) the planner then prefers reading all of them and sorting
                # by distance, ten times the cost of walking the graph (pgvector prices a distance
                # like any operator), so sorting is turned off; only the unindexed rest has no other
                # order than a sort. A namespace that is a sliver of the table is left to the planner,
                # which reads its few memories of a segment through its own index.
                sort = "off" if size * 100 >= segments[-1] else "on"
                # Several segments are several smaller graphs, each walked to its own ``ef_search``:
                # at the same search list their merged top is closer to the exact one than one
                # graph's (60,000 memories, 5 segments, top 100: 0.86 of the exact top 100 at 100
                # against 0.80 for one graph at 200), for about 1.5 times the server's work.
                # pgvector takes at most 1,000; the iterative scan goes on past it for a deeper leg.
                ef = min(1_000, max(40, 2 * asked) if len(segments) == 1 else max(40, asked))
                await conn.execute(_HNSW_SETTINGS, (str(ef), sort))
            # Never a prepared statement: a generic plan, not knowing the LIMIT, scores the whole
            # namespace through its seq index instead of walking the HNSW graph (seen at 100k: 1-2 s).
            cursors.append(await conn.execute(sql, params, prepare=False))
    rows = [row for cur in cursors for row in await cur.fetchall()]
    ranked: list[int] = []
    cosine: dict[int, float] = {}
    for seq, created_us, cos in sorted(rows, key=lambda r: (-float(r[2]), r[0]))[:depth]:
        ranked.append(seq)
        cosine[seq] = q.finite(float(cos))
        created[seq] = created_us
    return DenseScores(cosine, ranked, q.finite(mean), q.finite(std), "exact" if exact else "index")

