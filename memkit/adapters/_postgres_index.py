"""The PostgreSQL store's HNSW index, built in bulk instead of row by row.

Writers never maintain an HNSW graph: the index is partial, over the memories up to a recorded
``seq`` (``memkit_meta.vector_indexed_seq``), and searches score the memories written after it
exactly (see :func:`memkit.adapters._postgres_sql.dense_statement`). A write that leaves enough
memories outside the index starts a build over everything in the background of the writing
process; each build covers at least twice what the last one did.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from memkit.adapters._postgres_loop import load_psycopg
from memkit.adapters._postgres_schema import INDEX_LOCK, index_name, indexed_upto, vector_index_statement

__all__ = ["INDEX_DELTA", "build", "maybe_start"]

#: A write that leaves at least this many memories (and at least as many as the HNSW index
#: holds) outside the index starts a rebuild: each rebuild covers at least twice what the last
#: one did, so building costs about two bulk builds per vector.
INDEX_DELTA = 5_000
_INDEXED_SEQ = "SELECT value FROM memkit_meta WHERE key = 'vector_indexed_seq'"
_log = logging.getLogger("memkit")


def _report_failure(task: asyncio.Task[int | None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        # Searches stay right without the index (they read unindexed memories exactly): say why
        # it was not built, and let the next write try again.
        _log.warning("memkit could not build the PostgreSQL vector index: %s", task.exception())


async def maybe_start(pool: Any, conninfo: str, dim: int) -> asyncio.Task[int | None] | None:
    """Start a background build when enough memories are outside the index (after a write)."""
    async with pool.connection() as conn:
        top, indexed = await (await conn.execute(
            f"SELECT (SELECT coalesce(max(seq), 0) FROM memories), ({_INDEXED_SEQ})"  # noqa: S608
        )).fetchone()
    indexed = int(indexed or 0)
    if int(top) - indexed < max(INDEX_DELTA, indexed):
        return None
    task = asyncio.get_running_loop().create_task(build(conninfo, dim, wait=False))
    task.add_done_callback(_report_failure)
    return task


async def build(conninfo: str, dim: int | None, *, wait: bool) -> int | None:
    """Build the HNSW index over every memory written so far, then drop the one it replaces.

    On a connection of its own (a build takes a while and the pool serves searches and writes
    meanwhile), holding a session advisory lock so that one process builds at a time;
    ``CREATE INDEX CONCURRENTLY`` lets every other writer and search go on. Returns the ``seq``
    the index now covers, or ``None`` when another process was building (``wait`` false).
    """
    psycopg, _ = load_psycopg()
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    try:
        if wait:
            await conn.execute("SELECT pg_advisory_lock(%s)", (INDEX_LOCK,))
        elif not (await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (INDEX_LOCK,))).fetchone())[0]:
            return None
        top, indexed, work_mem = await (await conn.execute(
            f"SELECT (SELECT coalesce(max(seq), 0) FROM memories), ({_INDEXED_SEQ}),"  # noqa: S608
            " (SELECT setting::bigint * 1024 FROM pg_settings WHERE name = 'maintenance_work_mem')"
        )).fetchone()
        top, indexed = int(top), int(indexed or 0)
        names = await (await conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'memories'"
        )).fetchall()
        for (name,) in names:
            upto = indexed_upto(name)
            if upto is not None and upto != indexed:  # left by an interrupted build
                await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(upto)}")
        if top <= indexed:
            return indexed
        # pgvector builds the graph in memory when it fits maintenance_work_mem (many times
        # faster than on disk): raise it for this session to what the graph needs (about 2 kB
        # per 384-dimension vector: a million vectors need 2 GB), up to 4 GB.
        need = min(4 * 2**30, top * ((dim or 0) * 4 + 700))
        if need > int(work_mem or 0):
            await conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (f"{need // 1024}kB",))
        if not wait:
            # A build in the background shares the server with the writers that started it: one
            # process builds, so parallel build workers never crowd those writers out.
            await conn.execute("SET max_parallel_maintenance_workers = 0")
        try:
            await conn.execute(vector_index_statement(top, concurrently=True))
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await conn.cancel_safe()
            raise
        # A table written in bulk may not be analysed yet (autovacuum lags under load): the planner
        # then thinks the namespace holds one row and scans it exactly instead of walking the graph.
        await conn.execute("ANALYZE memories")
        # The keyword leg counts a term's postings from their index alone only where the table's
        # visibility map says every row is visible; an insert-only table waits for autovacuum
        # for that, which lags under load (a common term's count then reads the table).
        await conn.execute("VACUUM (ANALYZE) postings")
        await conn.execute(
            "INSERT INTO memkit_meta (key, value) VALUES ('vector_indexed_seq', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(top),),
        )
        if indexed:
            await conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(indexed)}")
        return top
    finally:
        await conn.close()
