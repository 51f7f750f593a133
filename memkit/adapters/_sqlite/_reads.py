"""The one-shot reads of a SQLite file (:class:`memkit._core._reads.OneShotReads`), on the caller's thread.

What ``memkit runs``, ``show``, ``namespaces``, ``stats`` and ``search`` read, with the queries the
store's own worker runs (:mod:`._traces`, :mod:`._queries`, :mod:`._sql`, :mod:`._search`,
:mod:`._keywords`), but without the adapter: no worker thread, no event loop, no models, so a
command that reads a little and exits does not pay for pydantic's and asyncio's import (about
120 ms of CPU). Only a file the store could read as it is: one that is not there yet, or of another
schema version, or opened with options that make opening do something (an embedder to add, recalls
to record), goes through :class:`SQLiteAdapter` as before; so does a search in any other mode than
keyword, or on a store with vectors, or one whose arguments the store would refuse (it says why).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from memkit._core._errors import ConfigError, MemkitError, StorageError
from memkit._core._reads import FoundView, MarkView, NamespaceView, RecallView, mark_view, recall_view
from memkit._core._records import from_us
from memkit._core._runs import RunSummary, Step, step_of
from memkit._core._url import embedder_option, query_options, sqlite_path
from memkit._core._validate import DEFAULT_LIMITS, check_query, check_read
from memkit._retrieval._config import HybridConfig, check_mode
from memkit._retrieval._filters import parse_filters
from memkit.adapters._sqlite import _queries as queries
from memkit.adapters._sqlite._schema import SCHEMA_VERSION
from memkit.adapters._sqlite._sql import select
from memkit.adapters._sqlite._traces import run_summaries

if TYPE_CHECKING:
    from types import TracebackType

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

    def __repr__(self) -> str:
        return f"SQLiteReads({self.path!r})"

    def __enter__(self) -> SQLiteReads:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
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

    def recalls(self, workflow_id: str, run_id: str | None) -> list[RecallView]:
        scope = _RecallScope(None, None, workflow_id, run_id, None)
        return [recall_view(body) for body in self._read(queries.recall_bodies, scope)]

    def marks(self, workflow_id: str, run_id: str | None) -> list[MarkView]:
        scope = _RecallScope(None, None, workflow_id, run_id, None)
        kept = [mark_view(body) for body in self._read(queries.mark_bodies, scope)]
        # Exact comparison after the index's, oldest first: as the store's marks() answers.
        return sorted((m for m in kept if m.workflow_id == workflow_id and run_id in (None, m.run_id)),
                      key=lambda m: (m.created_at, m.id))

    def namespaces(self) -> list[NamespaceView]:
        return [NamespaceView(u, a, c, from_us(lo), from_us(hi)) for u, a, c, lo, hi in
                self._read(queries.namespace_rows)]

    def stats(self) -> dict[str, Any]:
        return self._read(queries.stats_fields, self.path)

    def search(
        self, query: str, user_id: str, agent_id: str, limit: int, filters: Any, mode: str | None
    ) -> list[FoundView] | None:
        """A keyword search of a keyword-only store, as :class:`SQLiteAdapter` runs it (the same checks,
        index, leg and ranking); ``None`` for any other (see the module docstring)."""
        from memkit.adapters._sqlite._vectors import recorded

        try:
            text = check_query(query, DEFAULT_LIMITS)
            user, agent, checked, _, conditions = check_read(user_id, agent_id, limit, filters, DEFAULT_LIMITS)
            if not text or self._read(recorded)[0] is not None:
                return None  # an empty query lists; a store with an embedder ranks in its own modes
            request = _Keyword(text, checked, check_mode(mode, ("keyword",), repr(self)), HybridConfig())
        except MemkitError:
            return None  # the store says what is wrong, in its words
        return self._read(self._keyword_search, request, user, agent, conditions)

    @staticmethod
    def _keyword_search(
        db: sqlite3.Connection, request: _Keyword, user_id: str, agent_id: str, conditions: Any
    ) -> list[FoundView]:
        from memkit._retrieval._pipeline import rank
        from memkit.adapters._sqlite._keywords import KeywordCache
        from memkit.adapters._sqlite._search import keyword_ranked
        from memkit.adapters._sqlite._sql import records_by_seq

        keywords = KeywordCache(_MAX_INDEXED)
        index = keywords.index(db, user_id, agent_id)
        hits = keyword_ranked(db, keywords, request.query, user_id, agent_id, conditions, request.limit, index)

        def newer(seqs: list[int]) -> dict[int, tuple[int, int]]:  # asked in the other modes only
            raise AssertionError("a keyword ranking orders by the index alone")

        top = rank(request, hits, None, newer, index.neighbours, index.spoken_by)
        records = records_by_seq(db, [seq for seq, _, _ in top])
        return [FoundView(r.id, r.content, float(score), dict(r.metadata), r.created_at, r.agent_id, r.user_id,
                          dict(details))
                for r, score, details in ((records[q], s, d) for q, s, d in top if q in records)]


@dataclass(frozen=True)
class _RecallScope:
    """What :func:`._queries.recall_bodies` and :func:`._queries.mark_bodies` read of their operation."""

    user_id: str | None
    agent_id: str | None
    workflow_id: str | None
    run_id: str | None
    recall_id: str | None


@dataclass(frozen=True)
class _Keyword:
    """What :func:`memkit._retrieval._pipeline.rank` reads of a keyword search."""

    query: str
    limit: int
    mode: str
    config: HybridConfig
