"""The PostgreSQL store's HNSW index: segments over ranges of ``seq``, each built in bulk.

Writers never maintain an HNSW graph. The index is a list of partial indexes, *segments*, each
over the memories of one range of ``seq`` (``lo < seq <= hi``); ``memkit_meta.vector_segments``
records their ends. Searches walk every segment's graph and score the memories written after the
last one exactly (see :func:`memkit.adapters._postgres._sql.dense_statements`).

Two things start a build, in the background of the writing process:

- a write that leaves enough memories outside the segments (:func:`due`) starts a build of one new
  segment over just those, holding at least as many memories as the segments before it together:
  while writes go on, a vector is built into a graph once, and a store of ``n`` memories has about
  ``log2(n / INDEX_DELTA) + 1`` segments. (Schema 4 rebuilt one index over everything each time, so
  each vector was built about twice, and in ever larger graphs, where a vector costs more: 230 µs
  of server CPU in a 5,000-vector build, 540 µs in a 40,000-vector one.)
- writes that stop (:data:`IDLE_S` without one from this process) with at least ``INDEX_DELTA``
  memories outside the segments: that rule alone leaves up to half a bulk-loaded store outside them,
  scored exactly by every search from then on (at 100,000 memories, 20,000 of them: a semantic
  search 3-10x slower). The build covers them and the trailing segments no larger than what comes
  after each (:func:`kept`), so sizes fall along the list as in a binary counter: still about
  ``log2`` segments, each vector built again at most about that many times.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
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

__all__ = ["IDLE_S", "INDEX_DELTA", "Builds", "build", "due", "kept"]

#: A write that leaves at least this many memories (and at least as many as the segments hold)
#: outside the segments starts a build of the next segment.
INDEX_DELTA = 5_000
#: Seconds without a write from this process after which at least ``INDEX_DELTA`` memories outside
#: the segments get a segment (see the module docstring).
IDLE_S = 1.0
_POLL_S = 0.2
_SEGMENTS = "SELECT value FROM memkit_meta WHERE key = 'vector_segments'"
_log = logging.getLogger("memkit")


def due(top: int, ends: list[int]) -> bool:
    """Whether the memories up to ``seq`` ``top`` past segments ending at ``ends`` make a new segment."""
    indexed = ends[-1] if ends else 0
    return top - indexed >= max(INDEX_DELTA, indexed)


def kept(top: int, ends: list[int]) -> int:
    """How many of the segments ending at ``ends`` a build after writes stopped keeps: each later one,
    no larger than what follows it up to ``top``, is built into the new segment instead."""
    starts, keep = [0, *ends], len(ends)
    while keep and ends[keep - 1] - starts[keep - 1] <= top - ends[keep - 1]:
        keep -= 1
    return keep


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


async def _wanted(pool: Any, *, idle: bool = False) -> bool:
    """Whether enough memories are outside the segments (``idle``: at least ``INDEX_DELTA``), or a
    segment's graph is of an older kind: asked on the pool, so that no build connects for nothing."""
    async with pool.connection() as conn:
        top, ends = await (await conn.execute(
            f"SELECT (SELECT coalesce(max(seq), 0) FROM memories), ({_SEGMENTS})"  # noqa: S608
        )).fetchone()
    bounds = segment_bounds(ends)
    outside = int(top) - (bounds[-1] if bounds else 0)
    return (due(int(top), bounds) or (idle and outside >= INDEX_DELTA)
            or _stale(segment_kinds(ends)) is not None)


class Builds:
    """One process's background builds: the one a write past :func:`due` starts, and the one writes
    that stop start (:data:`IDLE_S`); :meth:`aclose` cancels them. Runs on the adapter's loop."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self._pool: Any = None
        self._task: asyncio.Task[int | None] | None = None
        self._idle: asyncio.TimerHandle | None = None
        self._dim = 0
        self._closed = False

    async def written(self, pool: Any, dim: int) -> None:
        """After a write of vectors: start a build if one is due, and wait again for writes to stop."""
        self._pool, self._dim = pool, dim
        if (self._task is None or self._task.done()) and await _wanted(pool):
            self._start(build(self._conninfo, dim, wait=False))
        if self._idle is not None:
            self._idle.cancel()
        if not self._closed:
            self._idle = asyncio.get_running_loop().call_later(IDLE_S, self._when_idle)

    def _when_idle(self) -> None:
        self._idle = None
        if not self._closed:
            running = self._task if self._task is not None and not self._task.done() else None
            self._start(self._idle_build(running))

    async def _idle_build(self, running: asyncio.Task[int | None] | None) -> int | None:
        if running is not None:  # a build the last write started: the rest once it is done
            with contextlib.suppress(Exception):
                await running
        if not await _wanted(self._pool, idle=True):
            return None  # a few writes: what they left is scored exactly, as cheaply as a graph walk
        return await build(self._conninfo, self._dim, wait=False, idle=True)

    def _start(self, coro: Coroutine[Any, Any, int | None]) -> None:
        self._task = asyncio.get_running_loop().create_task(coro)
        self._task.add_done_callback(_report_failure)

    async def aclose(self) -> None:
        """Cancel the builds: the next writer past the threshold builds again; an interrupted build
        leaves at most an unused index, which that build drops first."""
        self._closed = True
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _report_failure(task: asyncio.Task[int | None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        # Searches stay right without the segment (they read unindexed memories exactly): say why
        # it was not built, and let the next write try again.
        _log.warning("memkit could not build the PostgreSQL vector index: %s", task.exception())


async def build(conninfo: str, dim: int | None, *, wait: bool, idle: bool = False) -> int | None:
    """Build a segment over every memory written since the last one; return where the segments end.
    ``idle`` (writes stopped): only if at least ``INDEX_DELTA`` of them, merging trailing segments
    (:func:`kept`) unless the build is :func:`due` anyway.

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
        due_now = due(top, ends)
        if top > indexed and (wait or due_now or (idle and top - indexed >= INDEX_DELTA)):
            keep = kept(top, ends) if idle and not due_now else len(ends)
            lo = ([0, *ends])[keep]
            await _prepare(conn, top - lo, dim, int(work_mem or 0), wait)
            await _create(conn, vector_index_statement(lo, top, concurrently=True, kind=NEW_KIND, dim=dim))
            # Recorded at once (searches use it from then on), and only if the segments are still
            # the ones this build extends: a reset in between forgot them (the next build drops it).
            if await _record(conn, recorded, [*ends[:keep], top], [*kinds[:keep], NEW_KIND]):
                merged = list(zip([0, *ends][keep:-1], ends[keep:], kinds[keep:], strict=True))
                ends, kinds = [*ends[:keep], top], [*kinds[:keep], NEW_KIND]
                recorded = segments_text(ends, kinds)
                for old_lo, old_hi, old_kind in merged:  # no search reads them any more
                    await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(old_lo, old_hi, old_kind)}")
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
