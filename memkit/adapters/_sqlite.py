"""The embedded default: one SQLite file, WAL, BM25 keyword search, no server.

All SQL runs on one worker thread per adapter, which owns the connection. That
serialises the adapter's own calls (safe from any thread or event loop) while
WAL and ``busy_timeout`` let several processes share the file.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from memkit._errors import ConfigError, InvalidInputError, StorageError
from memkit._filters import Condition, parse_filters, type_class
from memkit._keyword import KeywordIndex, analyze_query
from memkit._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._records import Record, from_us, new_record, records_from_items, trace_record
from memkit._retrieval import DenseScores, HybridConfig, VectorIndex, check_mode, dense_leg, fuse
from memkit._url import embedder_option, query_options, sqlite_path
from memkit._validate import (
    DEFAULT_LIMITS,
    Limits,
    check_id,
    check_limit,
    check_namespace,
    check_query,
    check_read,
)
from memkit.adapters._trace_columns import (
    TRACE_CHUNK,
    TRACE_CODES,
    TRACE_NUMBERS,
    decode_trace_chunk,
    decode_trace_fields,
    gc_paused,
    pack_trace_numbers,
)

__all__ = ["SQLiteAdapter"]

# ``embedder`` left out (as opposed to ``embedder=None``): see SQLiteAdapter.
_UNSET: Any = object()

T = TypeVar("T")

SCHEMA_VERSION = 4

# Each entry upgrades the schema from the previous version; never edit a shipped one.
_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE store_meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE memories (
        seq        INTEGER PRIMARY KEY,      -- insertion order; the keyword index's key
        id         TEXT NOT NULL UNIQUE,
        user_id    TEXT NOT NULL,
        agent_id   TEXT NOT NULL,
        content    TEXT NOT NULL,
        metadata   TEXT NOT NULL DEFAULT '{}',  -- JSON, validated before it gets here
        created_us INTEGER NOT NULL          -- microseconds since the epoch, UTC
    );
    CREATE INDEX memories_namespace ON memories (user_id, agent_id, created_us DESC, seq DESC);
    """,
    2: """
    CREATE TABLE memory_vectors (
        seq    INTEGER PRIMARY KEY,          -- memories.seq
        vector BLOB NOT NULL                 -- float32 little-endian, store_meta embedder_dim values
    );
    CREATE TRIGGER memories_vectors_delete AFTER DELETE ON memories BEGIN
        DELETE FROM memory_vectors WHERE seq = old.seq;
    END;
    """,
    # Traces as typed columns, kept by triggers, so a million steps read as columns
    # without parsing each record's metadata JSON (see trace_columns). Repetitive text
    # (namespaces, workflow, step, tool, status) is stored as codes into trace_dict:
    # integers travel out of SQLite several times faster than strings.
    3: """
    CREATE TABLE trace_dict (
        code INTEGER PRIMARY KEY,
        text TEXT NOT NULL UNIQUE
    );
    CREATE TABLE trace_steps (
        seq         INTEGER PRIMARY KEY,     -- memories.seq
        id          TEXT NOT NULL,           -- memories.id
        created_us  INTEGER NOT NULL,        -- memories.created_us
        user_id     INTEGER NOT NULL,        -- codes into trace_dict from here on
        agent_id    INTEGER NOT NULL,
        workflow_id INTEGER,
        run_id      INTEGER,
        step_name   INTEGER,
        tool        INTEGER,
        status      INTEGER,
        step_index  INTEGER,
        started_us  INTEGER,                 -- trace timestamp, microseconds since the epoch
        duration_us INTEGER,
        retry_count INTEGER,
        error       TEXT,
        parameters  TEXT,                    -- JSON
        result      TEXT                     -- JSON
    );
    CREATE INDEX trace_steps_workflow ON trace_steps (workflow_id);
    CREATE TABLE trace_keys (
        kind TEXT NOT NULL,                  -- 'params' or 'result'
        key  TEXT NOT NULL,
        PRIMARY KEY (kind, key)
    ) WITHOUT ROWID;
    CREATE VIEW trace_source AS SELECT
        seq, id, created_us, user_id, agent_id,
        json_extract(metadata, '$.workflow_id') AS workflow_id,
        json_extract(metadata, '$.run_id') AS run_id,
        json_extract(metadata, '$.trace.step_name') AS step_name,
        json_extract(metadata, '$.trace.tool') AS tool,
        json_extract(metadata, '$.trace.status') AS status,
        json_extract(metadata, '$.trace.step_index') AS step_index,
        CAST(round(json_extract(metadata, '$.trace.timestamp') * 1e6) AS INTEGER) AS started_us,
        CAST(round(json_extract(metadata, '$.trace.duration') * 1e6) AS INTEGER) AS duration_us,
        json_extract(metadata, '$.trace.retry_count') AS retry_count,
        json_extract(metadata, '$.trace.error') AS error,
        CASE json_type(metadata, '$.trace.parameters') WHEN 'object' THEN metadata -> '$.trace.parameters' END
            AS parameters,
        CASE json_type(metadata, '$.trace.result') WHEN 'object' THEN metadata -> '$.trace.result' END AS result
    FROM memories WHERE json_extract(metadata, '$.type') = 'trace';
    CREATE TRIGGER trace_steps_insert AFTER INSERT ON memories
    WHEN json_extract(new.metadata, '$.type') = 'trace' BEGIN
        INSERT OR IGNORE INTO trace_dict (text)
            SELECT value FROM trace_source s, json_each(json_array(
                s.user_id, s.agent_id, s.workflow_id, s.run_id, s.step_name, s.tool, s.status))
            WHERE s.seq = new.seq AND json_each.type = 'text';
        INSERT INTO trace_steps
            SELECT seq, id, created_us,
                (SELECT code FROM trace_dict WHERE text = s.user_id),
                (SELECT code FROM trace_dict WHERE text = s.agent_id),
                (SELECT code FROM trace_dict WHERE text = s.workflow_id),
                (SELECT code FROM trace_dict WHERE text = s.run_id),
                (SELECT code FROM trace_dict WHERE text = s.step_name),
                (SELECT code FROM trace_dict WHERE text = s.tool),
                (SELECT code FROM trace_dict WHERE text = s.status),
                step_index, started_us, duration_us, retry_count, error, parameters, result
            FROM trace_source s WHERE s.seq = new.seq;
        INSERT OR IGNORE INTO trace_keys SELECT 'params', j.key FROM trace_steps t, json_each(t.parameters) j
            WHERE t.seq = new.seq;
        INSERT OR IGNORE INTO trace_keys SELECT 'result', j.key FROM trace_steps t, json_each(t.result) j
            WHERE t.seq = new.seq;
    END;
    CREATE TRIGGER trace_steps_delete AFTER DELETE ON memories BEGIN
        DELETE FROM trace_steps WHERE seq = old.seq;
    END;
    INSERT OR IGNORE INTO trace_dict (text)
        SELECT value FROM trace_source s, json_each(json_array(
            s.user_id, s.agent_id, s.workflow_id, s.run_id, s.step_name, s.tool, s.status))
        WHERE json_each.type = 'text';
    INSERT INTO trace_steps
        SELECT seq, id, created_us,
            (SELECT code FROM trace_dict WHERE text = s.user_id),
            (SELECT code FROM trace_dict WHERE text = s.agent_id),
            (SELECT code FROM trace_dict WHERE text = s.workflow_id),
            (SELECT code FROM trace_dict WHERE text = s.run_id),
            (SELECT code FROM trace_dict WHERE text = s.step_name),
            (SELECT code FROM trace_dict WHERE text = s.tool),
            (SELECT code FROM trace_dict WHERE text = s.status),
            step_index, started_us, duration_us, retry_count, error, parameters, result
        FROM trace_source s;
    INSERT OR IGNORE INTO trace_keys SELECT 'params', j.key FROM trace_steps t, json_each(t.parameters) j;
    INSERT OR IGNORE INTO trace_keys SELECT 'result', j.key FROM trace_steps t, json_each(t.result) j;
    """,
    # A million steps must become a frame in a second or two (issue 4). What leaves SQLite
    # fast is few values: so each step keeps its numbers and text codes packed in one blob
    # (see pack_trace_numbers) and its id, error, parameters and result as JSON texts joined
    # by the unit separator in one cell; reading is one pass with two group_concat()s. Only
    # the columns filters need stay as columns. The trigger calls a function that each
    # memkit connection registers, so trace memories must be written through memkit (plain
    # sqlite3 gets "no such function"). params/result keys come from the JSON: trace_keys goes.
    # The new trigger repeats part of migration 3's on purpose: a shipped migration is history,
    # so neither shares text with a later one.
    4: """
    DROP TRIGGER trace_steps_insert;
    DROP TRIGGER trace_steps_delete;
    DROP TABLE trace_keys;
    ALTER TABLE trace_steps RENAME TO trace_steps_v3;
    CREATE TABLE trace_steps (
        seq         INTEGER PRIMARY KEY,     -- memories.seq
        created_us  INTEGER NOT NULL,        -- memories.created_us
        user_id     INTEGER NOT NULL,        -- codes into trace_dict, for filters
        agent_id    INTEGER NOT NULL,
        workflow_id INTEGER,
        status      INTEGER,
        numbers     BLOB NOT NULL,           -- TRACE_NUMBERS as little-endian int64
        cells       TEXT NOT NULL            -- id, then error, parameters, result as JSON; char(31) between
    );
    INSERT INTO trace_steps
        SELECT seq, created_us, user_id, agent_id, workflow_id, status,
            memkit_pack_trace_numbers(seq, created_us, user_id, agent_id, workflow_id, run_id, step_name,
                tool, status, step_index, started_us, duration_us, retry_count),
            id || char(31) || json_quote(error) || char(31) || coalesce(parameters, 'null') || char(31)
                || coalesce(result, 'null')
        FROM trace_steps_v3;
    DROP TABLE trace_steps_v3;
    CREATE INDEX trace_steps_workflow ON trace_steps (workflow_id);
    CREATE TRIGGER trace_steps_insert AFTER INSERT ON memories
    WHEN json_extract(new.metadata, '$.type') = 'trace' BEGIN
        INSERT OR IGNORE INTO trace_dict (text)
            SELECT value FROM trace_source s, json_each(json_array(
                s.user_id, s.agent_id, s.workflow_id, s.run_id, s.step_name, s.tool, s.status))
            WHERE s.seq = new.seq AND json_each.type = 'text';
        INSERT INTO trace_steps
            SELECT seq, created_us, user_id, agent_id, workflow_id, status,
                memkit_pack_trace_numbers(seq, created_us, user_id, agent_id, workflow_id, run_id, step_name,
                    tool, status, step_index, started_us, duration_us, retry_count),
                cells
            FROM (SELECT seq, created_us,
                (SELECT code FROM trace_dict WHERE text = s.user_id) AS user_id,
                (SELECT code FROM trace_dict WHERE text = s.agent_id) AS agent_id,
                (SELECT code FROM trace_dict WHERE text = s.workflow_id) AS workflow_id,
                (SELECT code FROM trace_dict WHERE text = s.run_id) AS run_id,
                (SELECT code FROM trace_dict WHERE text = s.step_name) AS step_name,
                (SELECT code FROM trace_dict WHERE text = s.tool) AS tool,
                (SELECT code FROM trace_dict WHERE text = s.status) AS status,
                step_index, started_us, duration_us, retry_count,
                id || char(31) || json_quote(error) || char(31) || coalesce(parameters, 'null') || char(31)
                    || coalesce(result, 'null') AS cells
            FROM trace_source s WHERE s.seq = new.seq);
    END;
    CREATE TRIGGER trace_steps_delete AFTER DELETE ON memories BEGIN
        DELETE FROM trace_steps WHERE seq = old.seq;
    END;
    """,
}

_COLUMNS = "m.seq, m.id, m.user_id, m.agent_id, m.content, m.metadata, m.created_us"
_CHUNK = 10_000


def _statements(script: str) -> Iterator[str]:
    """Split a script into statements (trigger bodies included) without executescript's implicit COMMIT."""
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip()
            pending = ""


def _row_record(row: tuple[Any, ...]) -> Record:
    return Record(
        id=row[1], user_id=row[2], agent_id=row[3], content=row[4],
        metadata=json.loads(row[5]), created_us=row[6],
    )


def _equal_sql(cond: Condition, wanted: Any, params: list[Any]) -> str:
    """SQL that is 1 exactly when :func:`memkit._filters._equal` is true (never NULL)."""
    params.append(cond.json_path)
    kind = type_class(wanted)
    if kind == "null":
        return "coalesce(json_type(m.metadata, ?) = 'null', 1)"
    if kind == "bool":
        return f"coalesce(json_type(m.metadata, ?) = '{'true' if wanted else 'false'}', 0)"
    params.extend([cond.json_path, wanted])
    types = "('integer', 'real')" if kind == "number" else "('text')"
    return f"coalesce(json_type(m.metadata, ?) IN {types} AND json_extract(m.metadata, ?) = ?, 0)"


_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def filter_sql(conditions: tuple[Condition, ...]) -> tuple[str, list[Any]]:
    """Compile parsed filters to a parameterised SQL predicate over ``m.metadata``."""
    parts: list[str] = []
    params: list[Any] = []
    for cond in conditions:
        if cond.op in ("$eq", "$ne"):
            expr = _equal_sql(cond, cond.value, params)
            parts.append(expr if cond.op == "$eq" else f"NOT {expr}")
        elif cond.op in ("$in", "$nin"):
            exprs = [_equal_sql(cond, v, params) for v in cond.value] or ["0"]
            any_of = "(" + " OR ".join(exprs) + ")"
            parts.append(any_of if cond.op == "$in" else f"NOT {any_of}")
        else:
            types = "('integer', 'real')" if type_class(cond.value) == "number" else "('text')"
            params.extend([cond.json_path, cond.json_path, cond.value])
            parts.append(
                f"coalesce(json_type(m.metadata, ?) IN {types}"
                f" AND json_extract(m.metadata, ?) {_RANGE_SQL[cond.op]} ?, 0)"
            )
    return (" AND ".join(parts) or "1"), params


_EMBED_BATCH = 1_024


def _blob(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


class SQLiteAdapter:
    """Memories in one SQLite file (WAL), keyword search by BM25 with porter + unicode61 analysis.

    The keyword index of a namespace is built in memory on its first search and
    kept current from then on (this process's writes directly, other processes'
    through ``PRAGMA data_version``); see :mod:`memkit._keyword`.

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

    Examples
    --------
    >>> mem = SQLiteAdapter("data/memory.db")                      # doctest: +SKIP
    >>> await mem.add("TP53 is mutated in sample 7", "u1", "bio")  # doctest: +SKIP
    """

    provider_name = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str] = "data/memory.db",
        *,
        limits: Limits = DEFAULT_LIMITS,
        busy_timeout_ms: int = 10_000,
        max_indexed: int = 2_000_000,
        embedder: object = _UNSET,
        hybrid: HybridConfig | None = None,
    ) -> None:
        from memkit.embeddings import Embedder, get_embedder

        if hybrid is not None and not isinstance(hybrid, HybridConfig):
            raise ConfigError(f"hybrid must be a HybridConfig, got {type(hybrid).__name__}")
        self.hybrid = hybrid or HybridConfig()
        # Unset: the store decides (new stores get the default model); None: keyword-only if new.
        self._embedder_unset = embedder is _UNSET
        self._embedder: Embedder | None = None if embedder is None or embedder is _UNSET else get_embedder(embedder)
        # The embedder this file's vectors came from when we could not load it: writes are refused.
        self._foreign_embedder: str | None = None
        self._vector_indexes: dict[tuple[str, str], VectorIndex] = {}
        self._vector_version = -1
        self.path = str(path)
        self.limits = limits
        self._busy_timeout_ms = busy_timeout_ms
        self._max_indexed = max_indexed
        self._indexes: OrderedDict[tuple[str, str], KeywordIndex] = OrderedDict()
        self._seen_seq = 0
        self._data_version: int | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memkit-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        try:
            self._executor.submit(self._open).result()
        except BaseException:
            self._executor.shutdown(wait=False)
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SQLiteAdapter:
        """``sqlite:///relative.db``, ``sqlite:////absolute.db`` or ``sqlite://`` (in RAM)."""
        query = query_options(url)
        if "embedder" in query:
            options.setdefault("embedder", embedder_option(query.pop("embedder")))
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
        if self.path != ":memory:":
            parent = Path(self.path).expanduser().resolve().parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create the folder for {self.path!r}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            # NORMAL is durable across application crashes in WAL mode; only a power
            # cut can lose the last commits, and it makes small writes ~10x faster.
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.create_function(
                "memkit_pack_trace_numbers", len(TRACE_NUMBERS), pack_trace_numbers, deterministic=True
            )
            self._migrate(conn)
            self._seen_seq = conn.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
            self._data_version = conn.execute("PRAGMA data_version").fetchone()[0]
            self._conn = conn
            self._bind_embedder(conn)
        except sqlite3.DatabaseError as exc:
            self._conn = None
            conn.close()
            raise ConfigError(f"{self.path!r} is not a usable memkit database: {exc}") from exc
        except BaseException:
            self._conn = None
            conn.close()
            raise

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"this database has schema version {version}; this memkit knows up to"
                f" {SCHEMA_VERSION}: upgrade memkit"
            )
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have migrated while we waited for the lock.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in _statements(_MIGRATIONS[target]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {target}")
            conn.execute(
                "INSERT OR REPLACE INTO store_meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- embedder bookkeeping, on the worker thread --------------------------------

    @staticmethod
    def _recorded(conn: sqlite3.Connection) -> tuple[str | None, int | None]:
        rows = dict(
            conn.execute(
                "SELECT key, value FROM store_meta WHERE key IN ('embedder_name', 'embedder_dim')"
            ).fetchall()
        )
        dim = rows.get("embedder_dim")
        return rows.get("embedder_name"), (int(dim) if dim is not None else None)

    def _mismatch(self, name: str, dim: int | None, wanted: str, wanted_dim: int) -> ConfigError:
        return ConfigError(
            f"{self.path!r} holds vectors made by embedder {name!r} (dim {dim}), not {wanted!r}"
            f" (dim {wanted_dim}); memkit never mixes two embedders in one store. Open it with"
            f" embedder={name!r}, or re-embed every memory with the new one:"
            f" SQLiteAdapter({self.path!r}).reembed(<embedder>)"
            f" (from the shell: memkit.open({('sqlite:///' + self.path)!r}).reembed(<embedder>))"
        )

    @staticmethod
    def _is_new(conn: sqlite3.Connection) -> bool:
        """No memories and no recorded choice of embedder (or of none) yet."""
        marked = conn.execute("SELECT 1 FROM store_meta WHERE key = 'keyword_only'").fetchone()
        return marked is None and conn.execute("SELECT 1 FROM memories LIMIT 1").fetchone() is None

    def _bind_embedder(self, conn: sqlite3.Connection) -> None:
        from memkit.embeddings import DEFAULT_EMBEDDER, get_embedder

        name, dim = self._recorded(conn)
        if self._embedder is None:
            if name == DEFAULT_EMBEDDER:
                self._embedder = get_embedder("default")
            elif name is not None:
                self._foreign_embedder = name
                return
            elif self._embedder_unset and self._is_new(conn):
                # A new store gets the shipped static model: hybrid search by default.
                self._embedder = get_embedder("default")
            else:
                if not self._embedder_unset and self._is_new(conn):
                    # embedder=None on a new store: remember it, so reopening without
                    # embedder= keeps it keyword-only even while it is empty.
                    conn.execute("INSERT OR IGNORE INTO store_meta (key, value) VALUES ('keyword_only', '1')")
                return
        emb = self._embedder
        if name is not None:
            if name != emb.name or dim != emb.dim:
                raise self._mismatch(name, dim, emb.name, emb.dim)
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            name, dim = self._recorded(conn)  # another process may have bound one meanwhile
            if name is not None and (name != emb.name or dim != emb.dim):
                raise self._mismatch(name, dim, emb.name, emb.dim)
            if name is None:
                # A keyword-only store gains vectors for what it already holds.
                self._embed_rows(conn, "SELECT seq, content FROM memories WHERE seq > ? ORDER BY seq LIMIT ?")
                self._record_embedder(conn)
                conn.execute("DELETE FROM store_meta WHERE key = 'keyword_only'")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _record_embedder(self, conn: sqlite3.Connection) -> None:
        assert self._embedder is not None
        conn.executemany(
            "INSERT OR REPLACE INTO store_meta (key, value) VALUES (?, ?)",
            [("embedder_name", self._embedder.name), ("embedder_dim", str(self._embedder.dim))],
        )

    def _embed_rows(self, conn: sqlite3.Connection, sql: str, bar: Any = None) -> int:
        """Embed and store every row ``sql`` pages through (``seq > ? ... LIMIT ?``)."""
        assert self._embedder is not None
        after, done = -1, 0
        while True:
            rows = conn.execute(sql, (after, _EMBED_BATCH)).fetchall()
            if not rows:
                return done
            vectors = self._vectors([r[1] for r in rows])
            conn.executemany(
                "INSERT OR REPLACE INTO memory_vectors (seq, vector) VALUES (?, ?)",
                [(r[0], _blob(v)) for r, v in zip(rows, vectors, strict=True)],
            )
            after, done = rows[-1][0], done + len(rows)
            if bar is not None:
                bar.update(len(rows))

    def _vectors(self, texts: list[str]) -> np.ndarray:
        assert self._embedder is not None
        vectors = np.asarray(self._embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self._embedder.dim):
            raise ConfigError(
                f"embedder {self._embedder.name!r} returned shape {vectors.shape},"
                f" expected {(len(texts), self._embedder.dim)}"
            )
        return vectors

    def _check_writable(self) -> None:
        from memkit.embeddings import RETIRED_DEFAULTS

        if self._foreign_embedder in RETIRED_DEFAULTS:
            raise ConfigError(
                f"{self.path!r} holds vectors made by {self._foreign_embedder!r}, the default model of an"
                " earlier memkit; re-embed it with this one (a few seconds per 100k memories):"
                f" SQLiteAdapter({self.path!r}).reembed('default')"
            )
        if self._foreign_embedder is not None:
            raise ConfigError(
                f"{self.path!r} holds vectors made by embedder {self._foreign_embedder!r}; open it with"
                f" embedder=<that embedder> to write, or re-embed with SQLiteAdapter({self.path!r})"
                ".reembed(<embedder>)"
            )

    def _vector_index(self, user_id: str, agent_id: str) -> VectorIndex:
        """The namespace's vectors as one matrix, loaded once and kept in step with our writes."""
        assert self._embedder is not None
        db = self._db()
        self._sync_with_other_writers(db)
        index = self._vector_indexes.get((user_id, agent_id))
        if index is None:
            index = VectorIndex(self._embedder.dim)
            rows = db.execute(
                "SELECT v.seq, v.vector FROM memory_vectors v JOIN memories m ON m.seq = v.seq"
                " WHERE m.user_id = ? AND m.agent_id = ? ORDER BY v.seq",
                (user_id, agent_id),
            ).fetchall()
            if rows:
                matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), -1)
                index.add([r[0] for r in rows], matrix.astype(np.float32))
            self._vector_indexes[(user_id, agent_id)] = index
        return index

    def _sync_with_other_writers(self, db: sqlite3.Connection) -> None:
        """Drop cached vectors (and re-check the embedder) when another connection committed."""
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._vector_version:
            return
        self._vector_indexes.clear()
        if self._embedder is not None:
            name, dim = self._recorded(db)
            if name is not None and (name != self._embedder.name or dim != self._embedder.dim):
                # Someone re-embedded the store with another model while we had it open; keep
                # failing (the version stays unseen) until this adapter is reopened or re-embeds.
                raise self._mismatch(name, dim, self._embedder.name, self._embedder.dim)
        self._vector_version = version

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError(f"{self!r} is closed")
        return self._conn

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._closed:
            raise StorageError(f"{self!r} is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, *args)
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite failed on {self.path!r}: {exc}") from exc

    def _write(self, records: list[Record], progress: bool = False) -> list[str]:
        db = self._db()
        self._check_writable()
        self._sync_with_other_writers(db)
        vectors: np.ndarray | None = None
        if self._embedder is not None:
            # Embedded before the transaction so the write lock is held only for the inserts.
            vectors = np.concatenate(
                [self._vectors([r.content for r in records[i : i + _EMBED_BATCH]])
                 for i in range(0, len(records), _EMBED_BATCH)]
            )
        rows = (
            (r.id, r.user_id, r.agent_id, r.content,
             r.metadata_json or json.dumps(r.metadata, ensure_ascii=False, separators=(",", ":")), r.created_us)
            for r in records
        )
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(records), desc="add_many", unit="mem")
        db.execute("BEGIN IMMEDIATE")
        try:
            self._refresh_indexes()  # under the write lock: nobody can add rows until we commit
            last_seq = db.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
            for start in range(0, len(records), _CHUNK):
                chunk = [next(rows) for _ in range(min(_CHUNK, len(records) - start))]
                db.executemany(
                    "INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    chunk,
                )
                if vectors is not None:
                    # Same rowid rule as the keyword index below: max + 1, in insertion order.
                    db.executemany(
                        "INSERT OR REPLACE INTO memory_vectors (seq, vector) VALUES (?, ?)",
                        [(last_seq + 1 + start + i, _blob(vectors[start + i])) for i in range(len(chunk))],
                    )
                if bar is not None:
                    bar.update(len(chunk))
            db.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            db.execute("ROLLBACK")
            raise InvalidInputError(f"a memory with one of these ids already exists ({exc})") from None
        except BaseException:
            db.execute("ROLLBACK")
            raise
        finally:
            if bar is not None:
                bar.close()
        # rowids of an INTEGER PRIMARY KEY table are max + 1, in insertion order
        for offset, record in enumerate(records, start=last_seq + 1):
            index = self._indexes.get((record.user_id, record.agent_id))
            if index is not None:
                index.add(offset, record.content, record.created_us)
        self._seen_seq = last_seq + len(records)
        if vectors is not None and self._vector_indexes:
            groups: dict[tuple[str, str], list[int]] = {}
            for i, r in enumerate(records):
                if (r.user_id, r.agent_id) in self._vector_indexes:
                    groups.setdefault((r.user_id, r.agent_id), []).append(i)
            for key, positions in groups.items():
                self._vector_indexes[key].add([last_seq + 1 + i for i in positions], vectors[positions])
        return [r.id for r in records]

    # -- keyword indexes, on the worker thread -----------------------------------

    def _refresh_indexes(self) -> None:
        """Bring cached indexes up to date with rows other connections committed."""
        db = self._db()
        version = db.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version:
            return
        self._data_version = version
        if not self._indexes:
            self._seen_seq = db.execute("SELECT coalesce(max(seq), 0) FROM memories").fetchone()[0]
            return
        rows = db.execute(
            "SELECT seq, user_id, agent_id, content, created_us FROM memories WHERE seq > ? ORDER BY seq",
            (self._seen_seq,),
        ).fetchall()
        for seq, user, agent, content, created in rows:
            index = self._indexes.get((user, agent))
            if index is not None:
                index.add(seq, content, created)
        if rows:
            self._seen_seq = rows[-1][0]
        # another connection may also have deleted rows: drop any index whose size disagrees
        for key, index in list(self._indexes.items()):
            count = db.execute("SELECT count(*) FROM memories WHERE user_id = ? AND agent_id = ?", key).fetchone()[0]
            if count != len(index):
                del self._indexes[key]

    def _index(self, user_id: str, agent_id: str) -> KeywordIndex:
        self._refresh_indexes()
        key = (user_id, agent_id)
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
            return index
        index = KeywordIndex()
        index.add_many(self._db().execute(
            "SELECT seq, content, created_us FROM memories WHERE user_id = ? AND agent_id = ?", key
        ))
        self._indexes[key] = index
        while len(self._indexes) > 1 and sum(len(i) for i in self._indexes.values()) > self._max_indexed:
            self._indexes.popitem(last=False)
        return index

    # -- the port ----------------------------------------------------------------

    async def add(
        self, content: str, user_id: str, agent_id: str, metadata: dict[str, Any] | None = None
    ) -> str:
        record = new_record(content, user_id, agent_id, metadata, self.limits)
        return (await self._run(self._write, [record]))[0]

    async def add_trace(
        self, agent_id: str, workflow_id: str, trace_data: dict[str, Any], user_id: str = "system"
    ) -> str:
        record = trace_record(agent_id, workflow_id, trace_data, user_id, self.limits)
        return (await self._run(self._write, [record]))[0]

    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False
    ) -> list[str]:
        """Validate every item, then write all of them in one transaction (or none)."""
        records = records_from_items(items, self.limits)
        if not records:
            return []
        return await self._run(self._write, records, progress)

    def _select(
        self, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int, offset: int = 0
    ) -> list[Record]:
        where, params = filter_sql(conditions)
        sql = (
            f"SELECT {_COLUMNS} FROM memories m WHERE m.user_id = ? AND m.agent_id = ? AND {where}"  # noqa: S608
            " ORDER BY m.created_us DESC, m.seq DESC LIMIT ? OFFSET ?"
        )
        rows = self._db().execute(sql, [user_id, agent_id, *params, limit, offset]).fetchall()
        return [_row_record(r) for r in rows]

    def _keyword(
        self, text: str, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int
    ) -> list[tuple[Record, float]]:
        return [(r, score) for _, r, score in self._keyword_rows(text, user_id, agent_id, conditions, limit)]

    def _keyword_rows(
        self, text: str, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int
    ) -> list[tuple[int, Record, float]]:
        ranked = self._keyword_ranked(text, user_id, agent_id, conditions, limit)
        rows = self._records_by_seq(s for s, _ in ranked)
        return [(s, rows[s], score) for s, score in ranked if s in rows]

    def _keyword_ranked(
        self, text: str, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int
    ) -> list[tuple[int, float]]:
        """The keyword leg: ``(seq, bm25)`` of the best ``limit`` memories that pass the filters."""
        terms = analyze_query(text)
        if not terms:
            return []
        index = self._index(user_id, agent_id)
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
            db = self._db()
            passed = {row[0] for row in db.execute(sql, [json.dumps(seqs.tolist()), user_id, agent_id, *params])}
            ranked = [(s, float(score)) for s, score in zip(seqs.tolist(), scores, strict=True) if s in passed]
            if len(ranked) >= limit or len(seqs) < want or not conditions:
                return ranked[:limit]
            want *= 8

    def _records_by_seq(self, seqs: Iterable[int]) -> dict[int, Record]:
        wanted = list(seqs)
        found: dict[int, Record] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db().execute(f"SELECT {_COLUMNS} FROM memories m WHERE m.seq IN ({marks})", chunk)  # noqa: S608
            found.update((int(r[0]), _row_record(r)) for r in rows)
        return found

    def _allowed(self, seqs: list[int], conditions: tuple[Condition, ...]) -> set[int]:
        where, params = filter_sql(conditions)
        allowed: set[int] = set()
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT m.seq FROM memories m WHERE m.seq IN ({marks}) AND {where}"  # noqa: S608
            allowed.update(int(r[0]) for r in self._db().execute(sql, [*chunk, *params]))
        return allowed

    def _dense(
        self, query: np.ndarray, user_id: str, agent_id: str, conditions: tuple[Condition, ...],
        depth: int, extra: list[int],
    ) -> DenseScores:
        index = self._vector_index(user_id, agent_id)
        allowed = None if not conditions else (lambda seqs: self._allowed(seqs, conditions))
        return dense_leg(index, query, depth, allowed, extra)

    def _ranked(
        self, mode: str, text: str | None, vector: np.ndarray | None, user_id: str, agent_id: str,
        conditions: tuple[Condition, ...], limit: int, config: HybridConfig,
    ) -> list[MemoryItem]:
        """One search, start to finish, on the worker thread (index and connection live here)."""
        if mode == "keyword":
            assert text is not None
            rows = self._keyword_rows(text, user_id, agent_id, conditions, limit)
            return [
                r.to_item(score, {"mode": "keyword", "keyword": {"rank": rank, "score": score}})
                for rank, (_, r, score) in enumerate(rows, start=1)
            ]
        if vector is None:
            assert text is not None
            vector = self._vectors([text])[0]
        if mode == "semantic":
            dense = self._dense(vector, user_id, agent_id, conditions, limit, [])
            records = self._records_by_seq(dense.ranked)
            ranked = sorted(
                dense.ranked, key=lambda q: (-dense.cosine[q], -records[q].created_us, -q)
            )
            return [
                records[q].to_item(
                    dense.cosine[q],
                    {"mode": "semantic", "semantic": {"rank": rank, "score": dense.cosine[q]}},
                )
                for rank, q in enumerate(ranked, start=1)
            ]
        assert text is not None
        depth = max(config.candidates, limit)
        hits = self._keyword_ranked(text, user_id, agent_id, conditions, depth)
        dense = self._dense(vector, user_id, agent_id, conditions, depth, [q for q, _ in hits])
        fused = fuse(hits, dense, config)
        # Ties go newest first, so creation times are needed for every candidate; whole rows
        # (JSON metadata and all) only for the ones returned.
        created = dict(self._db().execute(
            "SELECT seq, created_us FROM memories WHERE seq IN (SELECT value FROM json_each(?))",
            (json.dumps([q for q, _, _ in fused]),),
        ))
        fused.sort(key=lambda t: (-t[1], -created.get(t[0], 0), -t[0]))
        top = fused[:limit]
        records = self._records_by_seq(q for q, _, _ in top)
        return [records[q].to_item(score, details) for q, score, details in top if q in records]

    async def search(
        self,
        query: str,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
        hybrid: HybridConfig | None = None,
    ) -> list[MemoryItem]:
        """Rank one namespace's memories against ``query``; an empty query lists it newest first.

        ``mode``: ``"hybrid"`` (the default with an embedder: keyword and semantic
        legs fused as in :class:`memkit.HybridConfig`), ``"keyword"`` (FTS5 BM25,
        the default without one) or ``"semantic"`` (cosine). Filters apply in every
        mode. Each result's ``score_details`` says which leg found it and how.
        """
        text = check_query(query, self.limits)
        limit = check_limit(limit, self.limits)
        user, agent = check_namespace(user_id, agent_id, self.limits)
        conditions = parse_filters(filters)
        resolved = check_mode(mode, self._embedder is not None, repr(self))
        if hybrid is not None and not isinstance(hybrid, HybridConfig):
            raise ConfigError(f"hybrid must be a HybridConfig, got {type(hybrid).__name__}")
        if not text:
            records = await self._run(self._select, user, agent, conditions, limit)
            return [r.to_item() for r in records]
        return await self._run(
            self._ranked, resolved, text, None, user, agent, conditions, limit, hybrid or self.hybrid
        )

    async def search_by_vector(
        self,
        vector: Any,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        """Semantic search with a vector you computed (same embedder and dimension as the store)."""
        if self._embedder is None:
            raise ConfigError(f"search_by_vector needs an embedder; {self!r} has none")
        try:
            query = np.asarray(vector, dtype=np.float32).reshape(-1)
        except (TypeError, ValueError):
            raise InvalidInputError("vector must be a sequence of numbers") from None
        if query.shape != (self._embedder.dim,) or not np.all(np.isfinite(query)):
            raise InvalidInputError(f"vector must hold {self._embedder.dim} finite numbers")
        norm = float(np.linalg.norm(query))
        if norm == 0.0:
            raise InvalidInputError("vector must not be all zeros")
        limit = check_limit(limit, self.limits)
        user, agent = check_namespace(user_id, agent_id, self.limits)
        conditions = parse_filters(filters)
        return await self._run(
            self._ranked, "semantic", None, query / norm, user, agent, conditions, limit, self.hybrid
        )

    @property
    def embedder(self) -> Any:
        """The :class:`memkit.embeddings.Embedder` in use, or ``None`` (keyword only)."""
        return self._embedder

    def _reembed(self, embedder: Any, progress: bool) -> int:
        db = self._db()
        previous = self._embedder
        total = db.execute("SELECT count(*) FROM memories").fetchone()[0]
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, desc=f"reembed ({embedder.name})", unit="mem")
        self._embedder = embedder
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM memory_vectors")
            done = self._embed_rows(db, "SELECT seq, content FROM memories WHERE seq > ? ORDER BY seq LIMIT ?", bar)
            self._record_embedder(db)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            self._embedder = previous
            raise
        finally:
            if bar is not None:
                bar.close()
        self._foreign_embedder = None
        self._vector_indexes.clear()
        return done

    async def reembed(self, embedder: object = "default", *, progress: bool = True) -> int:
        """Replace every vector with ``embedder``'s (one transaction) and use it from now on.

        This is how a store moves to another embedding model: open it without
        ``embedder`` (or with the old one) and call ``reembed(new)``. Returns the
        number of memories embedded; ``progress`` shows a tqdm bar.
        """
        from memkit.embeddings import get_embedder

        return await self._run(self._reembed, get_embedder(embedder), progress)

    async def get_all(
        self, user_id: str, agent_id: str, limit: int = 10, filters: dict[str, Any] | None = None
    ) -> list[MemoryItem]:
        return await self.get_page(user_id, agent_id, limit=limit, filters=filters)

    async def get_page(
        self,
        user_id: str,
        agent_id: str,
        *,
        offset: int = 0,
        limit: int = 50,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        read = check_read(user_id, agent_id, limit, filters, self.limits, offset)
        records = await self._run(self._select, read.user, read.agent, read.conditions, read.limit, read.offset)
        return [r.to_item() for r in records]

    def _get(self, memory_id: str) -> Record | None:
        row = self._db().execute(f"SELECT {_COLUMNS} FROM memories m WHERE m.id = ?", (memory_id,)).fetchone()  # noqa: S608
        return None if row is None else _row_record(row)

    async def get(self, memory_id: str) -> MemoryItem | None:
        check_id(memory_id, "memory_id", self.limits)
        record = await self._run(self._get, memory_id)
        return None if record is None else record.to_item()

    def _delete(self, memory_id: str, user_id: str | None, agent_id: str | None) -> bool:
        sql = "DELETE FROM memories WHERE id = ?"
        params: list[str] = [memory_id]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        if agent_id is not None:
            sql += " AND agent_id = ?"
            params.append(agent_id)
        deleted = self._db().execute(sql + " RETURNING seq, user_id, agent_id", params).fetchall()
        for seq, user, agent in deleted:
            index = self._indexes.get((user, agent))
            if index is not None:
                index.remove(seq)
            vectors = self._vector_indexes.get((user, agent))
            if vectors is not None:
                vectors.remove([seq])
        return bool(deleted)

    async def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> bool:
        """Delete one memory; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        check_id(memory_id, "memory_id", self.limits)
        return await self._run(self._delete, memory_id, user_id, agent_id)

    def _reset(self) -> bool:
        db = self._db()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM memories")
            db.execute("DELETE FROM trace_dict")  # names of users, workflows and tools go too
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        self._indexes.clear()
        self._vector_indexes.clear()
        return True

    async def reset(self) -> bool:
        """Delete every memory of every namespace in this file."""
        return await self._run(self._reset)

    # -- capabilities ------------------------------------------------------------

    def _namespaces(self) -> list[NamespaceInfo]:
        rows = self._db().execute(
            "SELECT user_id, agent_id, count(*), min(created_us), max(created_us)"
            " FROM memories GROUP BY user_id, agent_id ORDER BY user_id, agent_id"
        ).fetchall()
        return [
            NamespaceInfo(user_id=u, agent_id=a, count=c, first_at=from_us(lo), last_at=from_us(hi))
            for u, a, c, lo, hi in rows
        ]

    async def namespaces(self) -> list[NamespaceInfo]:
        return await self._run(self._namespaces)

    def _stats(self) -> Stats:
        db = self._db()
        memories, traces = db.execute(
            "SELECT count(*), coalesce(sum(json_extract(metadata, '$.type') = 'trace'), 0) FROM memories"
        ).fetchone()
        namespaces = db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM memories GROUP BY user_id, agent_id)"
        ).fetchone()[0]
        pages = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
        name, dim = self._recorded(db)
        vectors = db.execute("SELECT count(*) FROM memory_vectors").fetchone()[0]
        return Stats(
            provider=self.provider_name, memories=memories, traces=traces, namespaces=namespaces,
            storage_bytes=pages, path=self.path, schema_version=SCHEMA_VERSION,
            embedder=name, embedder_dim=dim, vectors=vectors,
        )

    async def stats(self) -> Stats:
        return await self._run(self._stats)

    def _ping(self) -> str:
        version = self._db().execute("PRAGMA user_version").fetchone()[0]
        return f"schema version {version}, SQLite {sqlite3.sqlite_version}"

    async def health(self) -> Health:
        start = time.perf_counter()
        try:
            detail = await self._run(self._ping)
            ok = True
        except StorageError as exc:
            detail, ok = str(exc), False
        return Health(ok=ok, provider=self.provider_name, latency_ms=(time.perf_counter() - start) * 1e3, detail=detail)

    def _export_chunk(
        self, after: tuple[int, int], user_id: str | None, agent_id: str | None, size: int
    ) -> list[tuple[Any, ...]]:
        sql = f"SELECT {_COLUMNS} FROM memories m WHERE (m.created_us, m.seq) > (?, ?)"  # noqa: S608
        params: list[Any] = list(after)
        if user_id is not None:
            sql += " AND m.user_id = ?"
            params.append(user_id)
        if agent_id is not None:
            sql += " AND m.agent_id = ?"
            params.append(agent_id)
        sql += " ORDER BY m.created_us, m.seq LIMIT ?"
        return self._db().execute(sql, [*params, size]).fetchall()

    async def export(self, user_id: str | None = None, agent_id: str | None = None) -> AsyncIterator[MemoryItem]:
        """Every record, oldest first, read in chunks so memory use stays flat."""
        after = (-(2**62), -1)
        while True:
            rows = await self._run(self._export_chunk, after, user_id, agent_id, 2_000)
            for row in rows:
                yield _row_record(row).to_item()
            if len(rows) < 2_000:
                return
            after = (rows[-1][6], rows[-1][0])

    def _trace_columns(
        self,
        workflow_id: str | None,
        agent_id: str | None,
        user_id: str | None,
        status: str | None,
        since_us: int | None,
    ) -> dict[str, Any]:
        db = self._db()
        where: list[str] = ["1"]
        params: list[Any] = []
        for column, value in (("workflow_id", workflow_id), ("agent_id", agent_id),
                              ("user_id", user_id), ("status", status)):
            if value is not None:
                where.append(f"{column} = (SELECT code FROM trace_dict WHERE text = ?)")  # noqa: S608
                params.append(value)
        if since_us is not None:
            where.append("created_us >= ?")
            params.append(since_us)
        with gc_paused():
            return self._read_trace_columns(db, " AND ".join(where), params)

    def _read_trace_columns(self, db: sqlite3.Connection, condition: str, params: list[Any]) -> dict[str, Any]:
        db.execute("BEGIN")  # every chunk and the dictionary from one snapshot
        try:
            low, high = db.execute(
                f"SELECT min(seq), max(seq) FROM trace_steps WHERE {condition}", params  # noqa: S608
            ).fetchone()
            if low is None:
                return {"id": [], "error": [], **{name: np.zeros(0, dtype=np.int64) for name in TRACE_NUMBERS}}
            # Chunks by seq range, pipelined: while this thread parses one chunk, another
            # reads the next from SQLite (sqlite3 releases the GIL while it steps; one thread
            # at a time uses the connection).
            chunk_count = max(1, min(16, (high - low) // TRACE_CHUNK + 1))
            edges: list[int] = np.linspace(low - 1, high, chunk_count + 1).astype(np.int64).tolist()
            sql = (
                "SELECT count(*), CAST(group_concat(numbers, '') AS BLOB), group_concat(cells, char(31))"  # noqa: S608
                f" FROM trace_steps WHERE {condition} AND seq > ? AND seq <= ?"
            )

            def fetch(i: int) -> tuple[Any, ...]:
                row: tuple[Any, ...] = db.execute(sql, [*params, edges[i], edges[i + 1]]).fetchone()
                return row

            chunks: list[dict[str, Any]] = []
            with ThreadPoolExecutor(max_workers=1) as pool:
                pending = pool.submit(fetch, 0)
                for i in range(chunk_count):
                    count, packed, joined = pending.result()
                    if i + 1 < chunk_count:
                        pending = pool.submit(fetch, i + 1)
                    chunks.append(decode_trace_chunk(count, packed, joined, self.path))
            for i, chunk in enumerate(chunks):
                if chunk.pop("cells", False):  # an id held the separator (a row not written by memkit)
                    rows = db.execute(
                        f"SELECT cells FROM trace_steps WHERE {condition} AND seq > ? AND seq <= ?",  # noqa: S608
                        [*params, edges[i], edges[i + 1]],
                    )
                    chunk.update(decode_trace_fields([f for (cell,) in rows for f in cell.rsplit("\x1f", 3)]))
            steps = sum(len(c["id"]) for c in chunks)
            if steps >= db.execute("SELECT count(*) FROM trace_dict").fetchone()[0]:
                dictionary = db.execute("SELECT code, text FROM trace_dict").fetchall()
            else:  # a few steps of a big store: only the texts they use
                codes = np.unique(np.concatenate([c[name] for c in chunks for name in TRACE_CODES]))
                dictionary = db.execute(
                    "SELECT code, text FROM trace_dict WHERE code IN (SELECT value FROM json_each(?))",
                    (json.dumps(codes[codes > 0].tolist()),),
                ).fetchall()
        finally:
            db.execute("COMMIT")
        # Code 0 never occurs (INTEGER PRIMARY KEY starts at 1): it stands for "no value".
        lookup = np.empty(max((c for c, _ in dictionary), default=0) + 1, dtype=object)
        for code, text in dictionary:
            lookup[code] = text
        out: dict[str, Any] = {}
        names = dict.fromkeys(name for chunk in chunks for name in chunk)
        for name in names:
            parts = [c[name] if name in c else np.full(len(c["id"]), None, dtype=object) for c in chunks]
            if name == "id":
                out[name] = [value for part in parts for value in part]
            else:
                out[name] = np.concatenate(parts) if len(parts) > 1 else parts[0]
            if name in TRACE_CODES:
                out[name] = lookup[out[name]]
        return out

    async def trace_columns(
        self,
        *,
        workflow_id: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        since_us: int | None = None,
    ) -> dict[str, Any]:
        """Every trace step as columns (see :class:`memkit.SupportsTraceColumns`), in storage order."""
        return await self._run(self._trace_columns, workflow_id, agent_id, user_id, status, since_us)

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def aclose(self) -> None:
        if self._closed:
            return
        await self._run(self._close)
        self._closed = True
        self._executor.shutdown(wait=True)

    def close(self) -> None:
        """Close from sync code (no event loop needed)."""
        if self._closed:
            return
        self._executor.submit(self._close).result()
        self._closed = True
        self._executor.shutdown(wait=True)
