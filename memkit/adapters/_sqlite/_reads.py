"""The one-shot reads of a SQLite file (:class:`memkit._core._reads.OneShotReads`), on the caller's thread.

What ``memkit runs``, ``show``, ``namespaces``, ``stats`` and ``search`` read, with the queries the
store's own worker runs (:mod:`._traces`, :mod:`._queries`, :mod:`._sql`, :mod:`._search`,
:mod:`._keywords`), but without the adapter: no worker thread, no event loop, no models, so a
command that reads a little and exits does not pay for pydantic's and asyncio's import (about
120 ms of CPU). Only a file the store could read as it is: one that is not there yet, or of another
schema version, or opened with options that make opening do something (an embedder to add, recalls
to record), goes through :class:`SQLiteAdapter` as before. A search, in any mode, runs the store's own
legs and ranking (:func:`._search.ranked_records`) on a keyword-only store or one whose vectors come
from the shipped default embedder (its table, the saved vector and keyword snapshots, the change feed
since); vectors of another embedder, an empty query, or arguments the store would refuse go to the
store (it says why). Like the store's first search, a search that had to replay many changes past a
saved snapshot saves a current one (the keyword index at once, the vectors when the reads close, after
the hits are printed), so the next command does not replay them again; it never waits for a writer to
do so, and a file it cannot write is only read.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from memkit._core._errors import ConfigError, MemkitError, StorageError
from memkit._core._filters import parse_filters
from memkit._core._records import Record
from memkit._core._runs import RunSummary, Step, step_of
from memkit._core._url import embedder_option, query_options, sqlite_path
from memkit._core._validate import DEFAULT_LIMITS, check_query, check_read
from memkit._retrieval._config import HybridConfig, check_mode, leg_depth, modes_for
from memkit.adapters._sqlite import _queries as queries
from memkit.adapters._sqlite._schema import SCHEMA_VERSION
from memkit.adapters._sqlite._sql import select
from memkit.adapters._sqlite._traces import run_summaries

if TYPE_CHECKING:
    from types import TracebackType

    from memkit._core._filters import Condition
    from memkit.adapters._sqlite._vectors import Vectors

__all__ = ["SQLiteReads", "open_reads"]

T = TypeVar("T")

_BUSY_TIMEOUT_MS = 10_000  # SQLiteAdapter's defaults
_MAX_INDEXED = 2_000_000


@dataclass(frozen=True)
class _Scope:
    user_id: str | None
    agent_id: str | None
    workflow_id: str | None


def open_reads(url: str) -> SQLiteReads | None:
    """The one-shot reads of the file ``url`` names, or ``None`` where :class:`SQLiteAdapter` must open
    it (a new file, another schema version, in RAM, an option that changes what opening does)."""
    try:
        options = query_options(url)
        path = sqlite_path(url)
    except ConfigError:
        return None
    if "embedder" in options and embedder_option(options.pop("embedder")) is not None:
        return None  # a named embedder may embed what a keyword-only store holds when it opens
    timeout_ms = options.pop("busy_timeout_ms", str(_BUSY_TIMEOUT_MS))
    if options or not timeout_ms.isdigit() or path == ":memory:" or not os.path.isfile(path):
        return None
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=int(timeout_ms) / 1000)
    except sqlite3.Error:
        return None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")
        ready = conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    except sqlite3.Error:
        ready = False
    if not ready:
        conn.close()
        return None
    return SQLiteReads(path, conn)


class SQLiteReads:
    """One open file, read by the command line's one-shot reads (see the module docstring)."""

    keeps_recalls = True

    def __init__(self, path: str, conn: sqlite3.Connection) -> None:
        self.path = path
        self._conn = conn
        self._searched: Vectors | None = None  # the vectors the last search loaded

    def __repr__(self) -> str:
        return f"SQLiteReads({self.path!r})"

    def __enter__(self) -> SQLiteReads:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Save the vector snapshot a search found far behind (see the module docstring), then close."""
        try:
            if self._searched is not None:
                self._searched.save_unsaved(self._conn)
        except (sqlite3.Error, MemkitError):
            pass  # a snapshot not saved is only replayed again by the next process
        finally:
            self._searched = None
            self._conn.close()

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(connection, *args)``, a SQLite failure told as the store tells it."""
        try:
            return fn(self._conn, *args)
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite failed on {self.path!r}: {exc}") from None

    def run_summaries(
        self, user_id: str | None = None, agent_id: str | None = None, workflow_id: str | None = None
    ) -> list[RunSummary]:
        scope = _Scope(user_id, agent_id, workflow_id)
        return self._read(lambda db: run_summaries(
            db, scope, lambda s: queries.step_recall_counts(db, s), lambda s: queries.step_mark_counts(db, s)))

    def run_steps(self, ids: tuple[str, str, str | None, str | None], size: int) -> list[Step]:
        user_id, agent_id, workflow_id, run_id = ids
        wanted: dict[str, Any] = {"type": "trace", "workflow_id": workflow_id}
        if run_id is not None:
            wanted["run_id"] = run_id
        records = self._read(select, user_id, agent_id, parse_filters(wanted), max(size, 1))
        records.reverse()  # oldest first (ties: in the order written)
        steps = [s for s in (step_of(r, None) for r in records) if s.run == ids]
        steps.sort(key=lambda s: s.created_at)
        return steps

    def recalls(self, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
        scope = _RecallScope(None, None, workflow_id, run_id, None)
        return [json.loads(body) for body in self._read(queries.recall_bodies, scope)]

    def marks(self, workflow_id: str, run_id: str | None) -> list[dict[str, Any]]:
        scope = _RecallScope(None, None, workflow_id, run_id, None)
        kept = [json.loads(body) for body in self._read(queries.mark_bodies, scope)]
        # Exact comparison after the index's, oldest first: as the store's marks() answers.
        return sorted((m for m in kept if m["workflow_id"] == workflow_id and run_id in (None, m["run_id"])),
                      key=lambda m: (datetime.fromisoformat(m["created_at"]), m["id"]))

    def namespaces(self) -> list[dict[str, Any]]:
        return self._read(queries.namespace_fields)

    def stats(self) -> dict[str, Any]:
        return self._read(queries.stats_fields, self.path)

    def search(
        self, query: str, user_id: str, agent_id: str, limit: int, filters: Any, mode: str | None
    ) -> list[dict[str, Any]] | None:
        """A search as :class:`SQLiteAdapter` runs it (the same checks, legs and ranking: :func:`._search.ranked`)
        in any mode of a keyword-only store or of one with the default embedder's vectors; ``None`` for any
        other (see the module docstring)."""
        try:
            text = check_query(query, DEFAULT_LIMITS)
            user, agent, checked, _, conditions = check_read(user_id, agent_id, limit, filters, DEFAULT_LIMITS)
            if not text:
                return None  # an empty query lists the namespace
            vectors = self._read(self._vectors)
            if vectors is None:
                return None  # vectors of another embedder: the store loads it, or says why it cannot
            resolved = check_mode(mode, modes_for(vectors.embedder is not None), repr(self))
        except MemkitError:
            return None  # the store says what is wrong, in its words
        config = HybridConfig()
        self._searched = vectors
        request = _Search(text, checked, resolved, config, user, agent, conditions, None,
                          leg_depth(resolved, config, checked))
        return [r.item_fields(score, details) for r, score, details in self._read(self._ranked, vectors, request)]

    def _vectors(self, db: sqlite3.Connection) -> Vectors | None:
        """The store's vectors as the adapter would bind them when opening, or ``None`` where opening
        would do more than read (an embedder other than the default, or a dimension it refuses)."""
        from memkit.adapters._sqlite._vectors import Vectors, recorded

        name, dim = recorded(db)
        if name is None:
            return Vectors(self.path, None, unset=False)  # keyword-only
        from memkit.embeddings import DEFAULT_EMBEDDER, get_embedder

        if name != DEFAULT_EMBEDDER:
            return None
        embedder = get_embedder("default")
        return Vectors(self.path, embedder, unset=False) if dim == embedder.dim else None

    @staticmethod
    def _ranked(db: sqlite3.Connection, vectors: Vectors, request: _Search) -> list[tuple[Record, float, Any]]:
        from memkit.adapters._sqlite._keywords import KeywordCache
        from memkit.adapters._sqlite._search import ranked_records

        return ranked_records(db, KeywordCache(_MAX_INDEXED), vectors, request)


@dataclass(frozen=True)
class _RecallScope:
    """What :func:`._queries.recall_bodies` and :func:`._queries.mark_bodies` read of their operation."""

    user_id: str | None
    agent_id: str | None
    workflow_id: str | None
    run_id: str | None
    recall_id: str | None


@dataclass(frozen=True)
class _Search:
    """What :func:`._search.ranked_records` reads of a search (:class:`._search.Legs`)."""

    query: str
    limit: int
    mode: str
    config: HybridConfig
    user_id: str
    agent_id: str
    conditions: tuple[Condition, ...]
    until_us: int | None
    depth: int
