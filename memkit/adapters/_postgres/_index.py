"""The PostgreSQL store's HNSW index: segments over ranges of ``seq``, each built once, in bulk.

Writers never maintain an HNSW graph. The index is a list of partial indexes, *segments*, each
over the memories of one range of ``seq`` (``lo < seq <= hi``); ``memkit_meta.vector_segments``
records their ends. Searches walk every segment's graph and score the memories written after the
last one exactly (see :func:`memkit.adapters._postgres._sql.dense_statements`). A write that leaves
enough memories outside the segments starts, in the background of the writing process, a build of
one new segment over just those: a vector is built into a graph once and never again. (Schema 4
rebuilt one index over everything each time, so each vector was built about twice, and in ever
larger graphs, where a vector costs more: 230 µs of server CPU in a 5,000-vector build, 540 µs
in a 40,000-vector one.) Each new segment holds at least as many memories as the ones before it
together, so a store of ``n`` memories has about ``log2(n / INDEX_DELTA) + 1`` segments to search.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from memkit.adapters._postgres._loop import load_psycopg
from memkit.adapters._postgres._schema import (
    INDEX_LOCK,
    NEW_KIND,
    index_name,
    segment_bounds,
    segment_kinds,
    segment_of,
    segments_text,
    vector_index_statement,
)

__all__ = ["INDEX_DELTA", "build", "due", "maybe_start"]

#: A write that leaves at least this many memories (and at least as many as the segments hold)
#: outside the segments starts a build of the next segment.
INDEX_DELTA = 5_000
_POLL_S = 0.2
_SEGMENTS = "SELECT value FROM memkit_meta WHERE key = 'vector_segments'"
_log = logging.getLogger("memkit")


def due(top: int, ends: list[int]) -> bool:
    """Whether the memories up to ``seq`` ``top`` past segments ending at ``ends`` make a new segment."""
    indexed = ends[-1] if ends else 0
    return top - indexed >= max(INDEX_DELTA, indexed)


def _report_failure(task: asyncio.Task[int | None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        # Searches stay right without the segment (they read unindexed memories exactly): say why
        # it was not built, and let the next write try again.
        _log.warning("memkit could not build the PostgreSQL vector index: %s", task.exception())


async def _record(conn: Any, recorded: str | None, ends: list[int], kinds: list[str]) -> bool:
    """Record segments ending at ``ends``, of ``kinds``, if they still are ``recorded`` (``None``: none yet)."""
    after = segments_text(ends, kinds)
    if recorded is None:
        cur = await conn.execute("INSERT INTO memkit_meta (key, value) VALUES ('vector_segments', %s)"
                                 " ON CONFLICT (key) DO NOTHING", (after,))
    else:
        cur = await conn.execute("UPDATE memkit_meta SET value = %s WHERE key = 'vector_segments' AND value = %s",
                                 (after, recorded))
    return bool(cur.rowcount)


def _stale(kinds: list[str]) -> int | None:
    """The first segment whose graph is not of :data:`NEW_KIND` (built by an older schema), if any."""
    return next((i for i, kind in enumerate(kinds) if kind != NEW_KIND), None)


async def maybe_start(pool: Any, conninfo: str, dim: int) -> asyncio.Task[int | None] | None:
    """Start a background build when enough memories are outside the segments, or a segment's graph
    is of an older kind (after a write)."""
    async with pool.connection() as conn:
        top, ends = await (await conn.execute(
            f"SELECT (SELECT coalesce(max(seq), 0) FROM memories), ({_SEGMENTS})"  # noqa: S608
        )).fetchone()
    if not due(int(top), segment_bounds(ends)) and _stale(segment_kinds(ends)) is None:
        return None
    task = asyncio.get_running_loop().create_task(build(conninfo, dim, wait=False))
    task.add_done_callback(_report_failure)
    return task


async def build(conninfo: str, dim: int | None, *, wait: bool) -> int | None:
    """Build a segment over every memory written since the last one; return where the segments end.

    On a connection of its own (a build takes a while and the pool serves searches and writes
    meanwhile), holding a session advisory lock so that one process builds at a time;
    ``CREATE INDEX CONCURRENTLY`` lets every other writer and search go on. Returns ``None`` when
    another process was building (``wait`` false).

    Then segments an older schema built as ``vector`` graphs are rebuilt as :data:`NEW_KIND` ones
    (all of them when ``wait``, else one per build): the new graph is built beside the old one,
    recorded in its place (searches use it from then on), and the old one dropped.
    """
    psycopg, _ = load_psycopg()
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        # Waiting by polling, never inside one statement: a statement blocked on the lock holds a
        # snapshot, which the running build's CREATE/DROP INDEX CONCURRENTLY waits out (a deadlock).
        while not (await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (INDEX_LOCK,))).fetchone())[0]:
            if not wait:
                return None
            await asyncio.sleep(_POLL_S)
        top, recorded, work_mem, stored_dim = await (await conn.execute(
            f"SELECT (SELECT coalesce(max(seq), 0) FROM memories), ({_SEGMENTS}),"  # noqa: S608
            " (SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem'),"
            " (SELECT value FROM memkit_meta WHERE key = 'embedder_dim')"
        )).fetchone()
        top, dim = int(top), int(dim or stored_dim or 0)
        ends, kinds = segment_bounds(recorded), segment_kinds(recorded)
        ends, kinds, recorded = await _tidy(conn, top, ends, kinds, recorded)
        indexed = ends[-1] if ends else 0
        # A background build started to rebuild an old segment leaves a tail too small to be due.
        if top > indexed and (wait or due(top, ends)):
            await _prepare(conn, top - indexed, dim, int(work_mem or 0), wait)
            await _create(conn, vector_index_statement(indexed, top, concurrently=True, kind=NEW_KIND, dim=dim))
            # Recorded at once (searches use it from then on), and only if the segments are still
            # the ones this build extends: a reset in between forgot them (the next build drops it).
            if await _record(conn, recorded, [*ends, top], [*kinds, NEW_KIND]):
                ends, kinds = [*ends, top], [*kinds, NEW_KIND]
                recorded = segments_text(ends, kinds)
            # A table written in bulk may not be analysed yet (autovacuum lags under load): the
            # planner then thinks the namespace holds one row and scans it exactly instead of
            # walking the graph.
            await conn.execute("ANALYZE memories")
            # The keyword leg counts a term's postings from their index alone only where the
            # table's visibility map says every row is visible; an insert-only table waits for
            # autovacuum for that, which lags under load (a common term's count then reads the table).
            await conn.execute("VACUUM (ANALYZE) postings")
        while (stale := _stale(kinds)) is not None:
            lo, hi = ([0, *ends])[stale], ends[stale]
            await _prepare(conn, hi - lo, dim, int(work_mem or 0), wait)
            await _create(conn, vector_index_statement(lo, hi, concurrently=True, kind=NEW_KIND, dim=dim))
            now = [*kinds[:stale], NEW_KIND, *kinds[stale + 1:]]
            if not await _record(conn, recorded, ends, now):
                break  # a reset forgot the segments: the next build drops what this one built
            await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(lo, hi, kinds[stale])}")
            kinds, recorded = now, segments_text(ends, now)
            if not wait:
                break
        return ends[-1] if ends else 0
    finally:
        await conn.close()


async def _tidy(
    conn: Any, top: int, ends: list[int], kinds: list[str], recorded: str | None,
) -> tuple[list[int], list[str], str | None]:
    """Keep what interrupted builds left that is whole, drop the rest; the segments as recorded after."""
    kept = {index_name(lo, hi, kind) for lo, hi, kind in zip([0, *ends], ends, kinds, strict=False)}
    found = await (await conn.execute(
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = 'memories'::regclass ORDER BY 1"
    )).fetchall()
    drop: dict[str, None] = {}
    for name, valid in found:
        segment = segment_of(name)
        if segment is None or name in kept:
            continue
        lo, hi, kind = segment
        indexed = ends[-1] if ends else 0
        # A build that finished but was stopped before recording its segment (the process closed
        # or died during the statistics below) left a whole segment: keep it, if it starts where
        # the segments end and holds memories (not one a reset emptied).
        if (valid and lo == indexed and indexed < hi <= top and (await (await conn.execute(
            "SELECT EXISTS (SELECT FROM memories WHERE seq > %s AND seq <= %s)", (lo, hi))).fetchone())[0]
                and await _record(conn, recorded, [*ends, hi], [*kinds, kind])):
            ends, kinds = [*ends, hi], [*kinds, kind]
            recorded = segments_text(ends, kinds)
            continue
        # The same for a rebuild as the new kind of a recorded segment: it takes that one's place
        # (whose graph, no longer recorded, is dropped below or by the next build).
        spans = list(zip([0, *ends], ends, strict=False))
        if valid and kind == NEW_KIND and (lo, hi) in spans:
            at = spans.index((lo, hi))
            now = [*kinds[:at], kind, *kinds[at + 1:]]
            if kinds[at] != kind and await _record(conn, recorded, ends, now):
                drop[index_name(lo, hi, kinds[at])] = None
                kinds, recorded = now, segments_text(ends, now)
                continue
        # Left by an interrupted build, or by segments a reset forgot.
        drop[name] = None
    for name in drop:
        await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    return ends, kinds, recorded


async def _prepare(conn: Any, count: int, dim: int, work_mem: int, wait: bool) -> None:
    # pgvector builds the graph in memory when it fits maintenance_work_mem (many times faster
    # than on disk): raise it for this session to what the graph needs (about 1.5 kB per
    # 384-dimension vector in a halfvec graph: a million vectors need 1.5 GB), up to 4 GB.
    need = min(4 * 2**30, count * (dim * 4 + 700))
    if need > work_mem:
        await conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (f"{need // 1024}kB",))
    if not wait:
        # A build in the background shares the server with the writers that started it: one
        # process builds, so parallel build workers never crowd those writers out.
        await conn.execute("SET max_parallel_maintenance_workers = 0")


async def _create(conn: Any, statement: str) -> None:
    try:
        await conn.execute(statement)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await conn.cancel_safe()
        raise
