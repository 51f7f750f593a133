"""The embedded default: one SQLite file, WAL, BM25 keyword search, no server.

All SQL runs on one worker thread per adapter, which owns the connection. That
serialises the adapter's own calls (safe from any thread or event loop) while
WAL and ``busy_timeout`` let several processes share the file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import warnings
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

from memkit._core._errors import ConfigError, InvalidInputError, StorageError
from memkit._core._models import MemoryItem, NamespaceInfo, Stats
from memkit._core._recalls import Mark, Recall
from memkit._core._records import Record
from memkit._core._runs import RunSummary
from memkit._core._url import bool_option, embedder_option, query_options, sqlite_path
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_id, check_read
from memkit._recall import _marks
from memkit._recall import _recording as _recall
from memkit._retrieval._fusion import HybridConfig
from memkit.adapters._plumbing import Worker
from memkit.adapters._sqlbase import created_by
from memkit.adapters._sqlite import _queries as queries
from memkit.adapters._sqlite._keywords import KeywordCache, feed_head
from memkit.adapters._sqlite._reader import ThreadReads, row_by_id
from memkit.adapters._sqlite._schema import connect, write_transaction
from memkit.adapters._sqlite._snapshots import save_stale
from memkit.adapters._sqlite._sql import row_record, select
from memkit.adapters._sqlite._step_rows import INSERT_RECALL, MemoryRow, import_steps, memory_rows, recall_rows
from memkit.adapters._sqlite._trace_writes import delete_replaced, insert_memories
from memkit.adapters._sqlite._traces import run_summaries, trace_columns
from memkit.adapters._sqlite._vectors import Vectors, blob
from memkit.store import _ops as ops
from memkit.store._base import Store

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike

    from memkit.embeddings import Embedder

__all__ = ["SQLiteAdapter"]


# ``embedder`` left out (as opposed to ``embedder=None``): see SQLiteAdapter.
_UNSET: Any = object()

T = TypeVar("T")

_CHUNK = 10_000

_RECALL_BATCH = 256
_RECALL_DELAY_S = 0.2


def _flush_later(adapter_ref: weakref.ref[SQLiteAdapter], wake: threading.Event) -> None:
    """One thread per adapter that records recalls: write them _RECALL_DELAY_S after the first is queued.

    A thread rather than a timer per batch: starting a thread costs more than a search on a
    busy machine. It holds the adapter weakly and ends when the adapter closes or is collected.
    """
    while True:
        wake.wait()
        time.sleep(_RECALL_DELAY_S)
        wake.clear()
        adapter = adapter_ref()
        if adapter is None or adapter._worker.closed:
            return
        adapter._submit_flush()
        del adapter


class SQLiteOptions(TypedDict, total=False):
    """The keywords :class:`SQLiteAdapter` takes besides its path (what ``from_url`` passes on)."""

    limits: Limits
    busy_timeout_ms: int
    max_indexed: int
    embedder: object  # a name, an Embedder, or None (see memkit.embeddings.get_embedder)
    hybrid: HybridConfig | None
    record_recalls: bool
    durable_recalls: bool


class SQLiteAdapter(Store):
    """Memories in one SQLite file (WAL), keyword search by BM25 with porter + unicode61 analysis.

    The keyword index of a namespace is built in memory on its first search, saved
    in the file for the next process, and kept current from the store's change
    feed, whoever wrote (see :mod:`memkit.adapters._sqlite._keywords`).

    Parameters
    ----------
    path
        Database file; parent folders are created. ``":memory:"`` keeps it in RAM.
    limits
        Input bounds (see :class:`memkit.Limits`).
    busy_timeout_ms
        How long a write waits for another process's lock before failing.
    max_indexed
        Most memories kept in in-memory keyword indexes (least recently searched
        namespaces are dropped first and rebuilt when searched again).
    embedder
        Left out: a new store gets the shipped static model (so search is hybrid)
        and an existing store keeps what it records (vectors from the default
        model, or keyword-only). ``None`` (URL ``?embedder=none``): a new store is
        keyword-only and stays so when reopened without ``embedder=``. ``"default"``
        (the shipped static model), ``"st:/model/folder"`` or an
        :class:`memkit.embeddings.Embedder`: a keyword-only store gains vectors for
        what it holds. The store records which embedder made its vectors and
        refuses another one (see :meth:`reembed`); a store with vectors is never
        written without them, whatever ``embedder`` says.
    hybrid
        Fusion knobs for ``mode="hybrid"`` (:class:`memkit.HybridConfig`).
    record_recalls
        Record searches made outside any step scope as recalls too (URL
        ``?record_recalls=true``); inside a step they are always recorded. See
        :class:`memkit.SupportsRecalls`.
    durable_recalls
        Write the recalls recorded so far in the same transaction as the next memory or
        trace step (URL ``?durable_recalls=true``), so a step's recalls are on disk no later
        than the step itself: a process killed at any moment never leaves a stored step
        without its recalls. Off, recalls are written in batches behind the searches and a
        kill can lose the last 0.2 s of them (see docs/recalls.md).

    Examples
    --------
    >>> mem = SQLiteAdapter("data/memory.db")                      # doctest: +SKIP
    >>> await mem.add("TP53 is mutated in sample 7", "u1", "bio")  # doctest: +SKIP
    """

    provider_name = "sqlite"
    supports_as_of = True
    health_failures = (StorageError,)

    def __init__(
        self,
        path: str | os.PathLike[str] = "data/memory.db",
        *,
        limits: Limits = DEFAULT_LIMITS,
        busy_timeout_ms: int = 10_000,
        max_indexed: int = 2_000_000,
        embedder: object = _UNSET,
        hybrid: HybridConfig | None = None,
        record_recalls: bool = False,
        durable_recalls: bool = False,
    ) -> None:
        super().__init__(limits=limits, hybrid=hybrid, record_recalls=record_recalls)
        if not isinstance(durable_recalls, bool):
            raise ConfigError(f"durable_recalls must be True or False, got {durable_recalls!r}")
        self.durable_recalls = durable_recalls
        self.path = str(path)
        self._busy_timeout_ms = busy_timeout_ms
        chosen = None
        if embedder is not None and embedder is not _UNSET:
            from memkit.embeddings import get_embedder  # and numpy: a store read without one never needs it

            chosen = get_embedder(embedder)
        self._vectors = Vectors(self.path, chosen, unset=embedder is _UNSET)
        self._keywords = KeywordCache(max_indexed)
        self._worker = Worker("memkit-sqlite", self.__repr__, translate=self._storage_error)
        self._reads = ThreadReads(self.path, busy_timeout_ms)
        self.get_now = self._reads.get  # one memory by id, read in the calling thread (see ThreadReads)
        self._conn: sqlite3.Connection | None = None
        self._settling = False  # a Vectors.settle step is queued on the worker
        # Rows this handle wrote per namespace since it last saved their snapshots (worker thread only).
        self._written: Counter[tuple[str, str]] = Counter()
        self._recall_lock = threading.Lock()
        self._pending_recalls: list[dict[str, Any]] = []
        self._recall_wake = threading.Event()
        self._recall_flusher: threading.Thread | None = None
        try:
            self._worker.call(self._open)
        except BaseException:
            self._worker.abandon()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Unpack[SQLiteOptions]) -> SQLiteAdapter:
        """``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``sqlite://`` (in RAM)."""
        query = query_options(url)
        if "embedder" in query:
            options.setdefault("embedder", embedder_option(query.pop("embedder")))
        if "record_recalls" in query:
            options.setdefault("record_recalls", bool_option("record_recalls", query.pop("record_recalls")))
        if "durable_recalls" in query:
            options.setdefault("durable_recalls", bool_option("durable_recalls", query.pop("durable_recalls")))
        if "busy_timeout_ms" in query:
            try:
                options.setdefault("busy_timeout_ms", int(query.pop("busy_timeout_ms")))
            except ValueError:
                raise ConfigError("busy_timeout_ms in the URL must be an integer") from None
        if query:
            raise ConfigError(f"unknown sqlite:// URL options: {', '.join(sorted(query))}")
        return cls(sqlite_path(url), **options)

    def __repr__(self) -> str:
        return f"SQLiteAdapter({self.path!r})"

    # -- connection, on the worker thread --------------------------------------

    def _open(self) -> None:
        self._conn = connect(self.path, self._busy_timeout_ms, self._vectors.bind)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError(f"{self!r} is closed")
        return self._conn

    def _storage_error(self, exc: Exception) -> StorageError | None:
        if isinstance(exc, sqlite3.Error):
            return StorageError(f"SQLite failed on {self.path!r}: {exc}")
        return None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._worker.run(fn, *args)

    def _insert(
        self, rows: list[MemoryRow], metas: list[dict[str, Any]], progress: bool = False, replace: bool = False
    ) -> list[str]:
        """Insert memories' ``rows`` (``metas`` their metadata) in one transaction; ``replace``: those
        whose ids a memory of the same namespace holds take its place (see :class:`memkit.store._ops.WriteOp`)."""
        db = self._db()
        self._vectors.check_writable()
        self._vectors.sync(db)
        # Embedded before the transaction so the write lock is held only for the inserts.
        vectors = self._vectors.embed_contents([row[3] for row in rows])
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(rows), desc="add_many", unit="mem")
        recalls = self._take_recalls() if self.durable_recalls else []
        try:
            with write_transaction(db):
                if recalls:
                    # First, in the same transaction: the step this write stores cannot reach the
                    # disk without the recalls it made (a kill between two commits cannot split them).
                    db.executemany(INSERT_RECALL, recall_rows(recalls))
                if replace:
                    self._written.update(delete_replaced(db, rows))
                # Under the write lock nobody else can insert until we commit, so our rows take
                # the seqs right after the last one handed out, in insertion order.
                last_seq = feed_head(db)[0]
                for start in range(0, len(rows), _CHUNK):
                    end = start + _CHUNK
                    insert_memories(db, rows[start:end], metas[start:end], last_seq + 1 + start)
                    if vectors is not None:
                        db.executemany(
                            "INSERT OR REPLACE INTO memory_vectors (seq, vector) VALUES (?, ?)",
                            [(last_seq + 1 + i, blob(vectors[i])) for i in range(start, min(end, len(rows)))],
                        )
                    if bar is not None:
                        bar.update(min(end, len(rows)) - start)
        except BaseException as exc:
            if recalls:
                self._requeue_recalls(recalls)  # rolled back with the write: they wait for the next one
            if isinstance(exc, sqlite3.IntegrityError):
                raise InvalidInputError(f"a memory with one of these ids already exists ({exc})") from None
            raise
        finally:
            if bar is not None:
                bar.close()
        self._written.update((row[1], row[2]) for row in rows)
        return [row[0] for row in rows]

    # -- the operations --------------------------------------------------------------

    async def _write(self, op: ops.WriteOp) -> list[str]:
        return await self._run(lambda: self._insert(*memory_rows(op.records), op.progress, op.replace))

    def _import(self, op: ops.ImportStepsOp) -> int:
        self._flush_recalls()  # recorded before: written first, as add_recalls does
        try:
            return import_steps(self._db(), self._vectors, op, self.limits, self._written)
        finally:
            self._worker.submit(self._checkpoint)

    def _checkpoint(self) -> None:
        if self._conn is not None:
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    async def _import_steps(self, op: ops.ImportStepsOp) -> int:
        return await self._run(self._import, op)

    def _select(self, *args: Any) -> list[Record]:
        return select(self._db(), *args)

    def _ranked(self, op: ops.SearchOp, vector: np.ndarray | None = None) -> list[MemoryItem]:
        from memkit.adapters._sqlite._search import ranked  # numpy and the keyword index: searches only

        hits = ranked(self._db(), self._keywords, self._vectors, op, vector)
        if self._vectors.unsettled and not self._settling:
            # Reading the rest of a restored index, or saving one for the next process, waits until
            # this search has returned. Refused once closing: the next process does it.
            self._settling = self._worker.submit(self._settle)
        return hits

    def _settle(self) -> None:
        more = self._conn is not None and self._vectors.settle(self._conn)
        # The next step queues behind any call that came meanwhile: none waits for more than one.
        self._settling = more and self._worker.submit(self._settle)

    async def _rank(self, op: ops.SearchOp) -> list[MemoryItem]:
        return await self._run(self._ranked, op)

    async def _list(self, op: ops.ListOp) -> list[Record]:
        conditions = op.conditions if op.until_us is None else (*op.conditions, created_by(op.until_us))
        return await self._run(self._select, op.user_id, op.agent_id, conditions, op.limit, op.offset)

    async def search_by_vector(
        self,
        vector: ArrayLike,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        """Semantic search with a vector you computed (same embedder and dimension as the store)."""
        import numpy as np

        embedder = self.embedder
        if embedder is None:
            raise ConfigError(f"search_by_vector needs an embedder; {self!r} has none")
        try:
            query = np.asarray(vector, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInputError("vector must be a sequence of numbers") from None
        if query.shape != (embedder.dim,) or not np.all(np.isfinite(query)):
            raise InvalidInputError(f"vector must hold {embedder.dim} finite numbers")
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            raise InvalidInputError("vector must not be all zeros")
        user, agent, limit, _, conditions = check_read(user_id, agent_id, limit, filters, self.limits)
        request = ops.SearchOp(
            query="", user_id=user, agent_id=agent, limit=limit, filters=filters, conditions=conditions,
            mode="semantic", config=self.hybrid,
        )
        return await self._run(self._ranked, request, query / norm)

    @property
    def embedder(self) -> Embedder | None:
        """The :class:`memkit.embeddings.Embedder` in use, or ``None`` (keyword only)."""
        return self._vectors.embedder

    def _reembed(self, embedder: Embedder, progress: bool) -> int:
        db = self._db()
        previous = self._vectors.embedder
        total = db.execute("SELECT count(*) FROM memories").fetchone()[0]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, desc=f"reembed ({embedder.name})", unit="mem")
        self._vectors.embedder = embedder
        try:
            with write_transaction(db):
                db.execute("DELETE FROM memory_vectors")
                done = self._vectors.embed_all(db, bar)
        except BaseException:
            self._vectors.embedder = previous
            raise
        finally:
            if bar is not None:
                bar.close()
        self._vectors.foreign = None
        self._vectors.clear()
        return done

    async def reembed(self, embedder: object = "default", *, progress: bool = True) -> int:
        """Replace every vector with ``embedder``'s (one transaction) and use it from now on.

        This is how a store moves to another embedding model: open it without
        ``embedder`` (or with the old one) and call ``reembed(new)``. Returns the
        number of memories embedded; ``progress`` shows a tqdm bar.
        """
        from memkit.embeddings import get_embedder

        return await self._run(self._reembed, get_embedder(embedder), progress)

    async def _get(self, op: ops.GetOp) -> Record | None:
        return await self._query(row_by_id, op.memory_id)

    def _delete_rows(self, memory_id: str, user_id: str | None, agent_id: str | None) -> bool:
        sql = "DELETE FROM memories WHERE id = ?"
        params: list[str] = [memory_id]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        if agent_id is not None:
            sql += " AND agent_id = ?"
            params.append(agent_id)
        deleted = self._db().execute(sql + " RETURNING seq, user_id, agent_id", params).fetchall()
        self._written.update((user, agent) for _, user, agent in deleted)
        return bool(deleted)

    async def _delete(self, op: ops.DeleteOp) -> bool:
        return await self._run(self._delete_rows, op.memory_id, op.user_id, op.agent_id)

    def _wipe(self) -> None:
        self._flush_recalls()  # recorded before the reset: they go with everything else
        db = self._db()
        with write_transaction(db):
            db.execute("DELETE FROM memories")
            db.execute("DELETE FROM keyword_snapshots")
            db.execute("DELETE FROM vector_snapshots")
            db.execute("DELETE FROM recalls")
            db.execute("DELETE FROM marks")
        self._keywords.clear()
        self._vectors.clear()
        self._written.clear()

    async def _reset(self, op: ops.ResetOp) -> None:
        await self._run(self._wipe)

    # -- capabilities ------------------------------------------------------------

    def _on_db(self, fn: Callable[..., T], *args: Any) -> T:
        return fn(self._db(), *args)

    async def _query(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)`` on the worker thread (a function of :mod:`._queries`)."""
        return await self._run(self._on_db, fn, *args)

    async def _namespaces(self, op: ops.NamespacesOp) -> list[NamespaceInfo]:
        return await self._query(queries.namespaces)

    async def _values(self, op: ops.ValuesOp) -> list[Any]:
        return await self._query(queries.values, op)

    async def _stats(self, op: ops.StatsOp) -> Stats:
        return await self._query(queries.stats, self.path)

    async def _ping(self, op: ops.PingOp) -> str:
        return await self._query(queries.schema_line)

    async def _export(self, op: ops.ExportOp) -> AsyncIterator[Record]:
        # In chunks, so memory use stays flat.
        after = (-(2**62), -1)
        while True:
            rows = await self._query(queries.export_chunk, op, after, 2_000)
            for row in rows:
                yield row_record(row)
            if len(rows) < 2_000:
                return
            after = (rows[-1][6], rows[-1][0])

    def _columns(self, *args: Any) -> dict[str, Any]:
        return trace_columns(self._db(), self.path, *args)

    async def _trace_payloads(self, op: ops.TracePayloadsOp) -> dict[str, Any]:
        return await self._run(lambda: queries.trace_payloads(self._db(), op))

    async def _trace_columns(self, op: ops.TraceColumnsOp) -> dict[str, Any]:
        return await self._run(self._columns, op.workflow_id, op.agent_id, op.user_id, op.status, op.since_us,
                               op.after_seq)

    def _summaries(self, op: ops.RunsOp) -> list[RunSummary]:
        self._flush_recalls()  # recorded recalls count too
        db = self._db()
        return run_summaries(db, op, lambda o: queries.step_recall_counts(db, o),
                             lambda o: queries.step_mark_counts(db, o))

    async def _run_summaries(self, op: ops.RunsOp) -> list[RunSummary]:
        return await self._run(self._summaries, op)

    # -- recalls, written behind the searches, in batches, on the worker thread --------

    def _insert_recalls(self, bodies: list[dict[str, Any]]) -> int:
        rows = recall_rows(bodies)
        db = self._db()
        try:
            with write_transaction(db):
                db.executemany(INSERT_RECALL, rows)
        except sqlite3.IntegrityError as exc:
            raise InvalidInputError(f"a recall with one of these ids already exists ({exc})") from None
        return len(rows)

    def _take_recalls(self) -> list[dict[str, Any]]:
        with self._recall_lock:
            pending, self._pending_recalls = self._pending_recalls, []
        return pending

    def _requeue_recalls(self, bodies: list[dict[str, Any]]) -> None:
        with self._recall_lock:
            self._pending_recalls[:0] = bodies  # before any recorded since: recording order is kept
        self._recall_wake.set()  # the batch writer may have run meanwhile: have it look again

    def _flush_recalls(self) -> None:
        """Write the recalls recorded so far (on the worker thread, before any read of recalls)."""
        pending = self._take_recalls()
        if pending:
            try:
                self._insert_recalls(pending)
            except (sqlite3.Error, StorageError) as exc:
                warnings.warn(
                    f"memkit could not record {len(pending)} recall(s) in {self.path!r}: {exc}",
                    RuntimeWarning, stacklevel=1,
                )

    def _submit_flush(self) -> None:
        # Refused once the store is closing: _close flushes what is left.
        self._worker.submit(self._flush_recalls)

    def _keep_recall(self, body: dict[str, Any]) -> None:
        # One transaction per recall would cost more than a keyword search: recalls queue
        # and are written together, _RECALL_BATCH at a time or _RECALL_DELAY_S after the
        # first, and always before recalls are read or the store closes.
        with self._recall_lock:
            self._pending_recalls.append(body)
            count = len(self._pending_recalls)
            if self._recall_flusher is None:
                self._recall_flusher = threading.Thread(
                    target=_flush_later, args=(weakref.ref(self), self._recall_wake),
                    name="memkit-sqlite-recalls", daemon=True,
                )
                self._recall_flusher.start()
        if count == _RECALL_BATCH:
            self._submit_flush()
        elif count == 1:
            self._recall_wake.set()

    def _flushed(self, fn: Callable[..., T], *args: Any) -> T:
        self._flush_recalls()  # the recalls recorded so far are read too
        return fn(self._db(), *args)

    async def _recalls(self, op: ops.RecallsOp) -> list[Recall]:
        return [_recall.loads(body) for body in await self._run(self._flushed, queries.recall_bodies, op)]

    async def recall_step_counts(
        self, workflow_id: str | None = None, *, user_id: str | None = None, agent_id: str | None = None
    ) -> list[tuple[Any, ...]]:
        """``(user_id, agent_id, workflow_id, run_id, step_index, recalls, memories returned)`` per
        step that recalled, the namespace being the step's: :func:`memkit.frames.recall_counts`
        counted in SQL, without reading each recall."""
        for value, name in ((workflow_id, "workflow_id"), (user_id, "user_id"), (agent_id, "agent_id")):
            if value is not None:
                check_id(value, name, self.limits)
        return await self._run(self._flushed, queries.recall_step_counts, workflow_id, user_id, agent_id)

    async def _add_recalls(self, op: ops.AddRecallsOp) -> int:
        # One transaction: an id already stored refuses them all.
        return await self._run(self._import_recalls, [_recall.body_of(r) for r in op.recalls])

    def _import_recalls(self, bodies: list[dict[str, Any]]) -> int:
        self._flush_recalls()
        return self._insert_recalls(bodies)

    # -- marks ----------------------------------------------------------------------

    async def _marks(self, op: ops.MarksOp) -> list[Mark]:
        return list(map(_marks.loads, await self._query(queries.mark_bodies, op)))

    async def _put_marks(self, op: ops.PutMarksOp) -> int:
        return await self._query(queries.put_marks, op)

    async def _remove_marks(self, op: ops.RemoveMarksOp) -> int:
        return await self._query(queries.remove_marks, op)

    def _release(self) -> None:
        self._recall_wake.set()  # the recall thread sees the store closing and ends
        self._reads.close()
        if self._conn is not None:
            self._flush_recalls()
            written, self._written = self._written, Counter()
            try:
                save_stale(self._conn, self.path, written, self._keywords, self._vectors)
            except Exception as exc:  # a cache not saved is only rebuilt by the next process: close anyway
                warnings.warn(f"{self!r}: search snapshots not saved on close: {exc!r}", stacklevel=1)
            self._conn.close()
            self._conn = None

    async def _close(self, op: ops.CloseOp) -> None:
        # Writes the queued recalls and closes the file; again is a no-op, any other call then fails.
        await self._worker.aclose(self._release)

    def close(self) -> None:
        """:meth:`aclose` from sync code (no event loop needed)."""
        self._worker.close(self._release)
