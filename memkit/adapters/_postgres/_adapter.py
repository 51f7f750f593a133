"""A PostgreSQL store with pgvector: many processes and machines writing and searching one database.

Everything a search needs lives in the database, read in the statement that uses it: the
keyword leg is memkit's BM25 over ``tsvector`` terms (impact-ordered postings), the dense leg pgvector (exact
inside small namespaces, HNSW in large ones), and the statistics both legs normalise by
(a namespace's size, average length, document frequencies, mean and spread of cosine) are
counted there too. So no process holds an index another process's write could make stale:
what SQLite keeps in memory per process is here a query, and every process sees every
committed write at once. Fusion, tie-breaks and score details are memkit's shared pipeline.

The connection pool (psycopg 3, async) runs on one event loop thread of its own, so the
store can be used from any thread or event loop, as the other stores can.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Coroutine, Iterable
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit, urlunsplit

from memkit._core._errors import BackendUnavailableError, ConfigError, StorageError
from memkit._core._models import MemoryItem, NamespaceInfo, Stats
from memkit._core._records import Record, from_us
from memkit._core._url import bool_option, embedder_option, query_options
from memkit._core._validate import DEFAULT_LIMITS, Limits
from memkit._retrieval._fusion import HybridConfig
from memkit.adapters._postgres import _index, _schema, _writes
from memkit.adapters._postgres import _sql as q
from memkit.adapters._postgres._dense import SampleCache
from memkit.adapters._postgres._loop import Loop, conninfo, load_psycopg, safe_url, timed_out
from memkit.adapters._postgres._recalls import RecallsAndMarks
from memkit.adapters._postgres._schema import ADVISORY_LOCK, META_TABLE, MIGRATIONS, SCHEMA_VERSION
from memkit.adapters._postgres._search import ranked
from memkit.adapters._sqlbase import LISTED, created_by, embedded, filter_sql, listed_bounds
from memkit.store._base import Store
from memkit.store._ops import (
    CloseOp,
    DeleteOp,
    ExportOp,
    GetOp,
    ListOp,
    NamespacesOp,
    PingOp,
    ResetOp,
    SearchOp,
    StatsOp,
    TraceColumnsOp,
    ValuesOp,
    WriteOp,
)

__all__ = ["PostgresAdapter"]

T = TypeVar("T")

_UNSET: Any = object()
_SCHEMES = ("postgresql", "postgres")
# URL options memkit reads; every other ``?key=value`` goes to libpq (sslmode, connect_timeout, ...).
_OWN_OPTIONS = ("embedder", "record_recalls", "durable_recalls", "pool_size", "pool_min", "timeout")
_EMBED_BATCH = 512

class PostgresAdapter(RecallsAndMarks, Store):
    """Memories in a PostgreSQL database with pgvector, for many writers on many machines.

    Parameters
    ----------
    url
        ``postgresql://user:password@host:port/database?options``. Options memkit reads:
        ``embedder``, ``record_recalls``, ``pool_size``, ``pool_min`` (see below); every other
        option is libpq's (``sslmode=require``, ``connect_timeout=10``, ``application_name``...).
    limits
        Input bounds (see :class:`memkit.Limits`).
    embedder
        As for :class:`memkit.adapters.SQLiteAdapter`: left out, a new store gets the shipped
        static model and an existing one keeps what it records; ``None`` (``?embedder=none``) a
        keyword-only store; a name or an :class:`memkit.embeddings.Embedder` gives a keyword-only
        store vectors for what it holds. A store never mixes two embedders.
    hybrid
        Fusion knobs for ``mode="hybrid"`` (:class:`memkit.HybridConfig`).
    record_recalls
        Record searches made outside any step scope too (``?record_recalls=true``).
    durable_recalls
        A recall is committed before its search returns, always (every process reads it at
        once); ``True`` also waits for the commit to reach the disk (about 6 ms a search on a
        local server), so a server crash cannot lose it (``?durable_recalls=true``).
    pool_size, pool_min
        Most and fewest connections this handle keeps open (default 4 and 1).
    timeout
        Seconds a call waits for the server (``?timeout=10``; default 60) before it raises
        :class:`memkit.BackendUnavailableError`; also libpq's ``connect_timeout`` unless the URL
        sets one. A write that timed out may or may not have been applied (the error says so):
        read it back before writing it again. Opening (after connecting), ``index_vectors`` and
        ``reembed`` are not bounded: migrations and embedding may run long.

    Examples
    --------
    >>> mem = memkit.open("postgresql://memkit@db.lab.example/memkit")  # doctest: +SKIP
    """

    provider_name = "postgres"
    supports_as_of = True
    # seq comes from a sequence at insert time: a transaction holding a lower one may commit later.
    late_commit_s = 5.0
    health_failures: ClassVar[tuple[type[BaseException], ...]] = (StorageError, BackendUnavailableError)

    def __init__(
        self,
        url: str,
        *,
        limits: Limits = DEFAULT_LIMITS,
        embedder: object = _UNSET,
        hybrid: HybridConfig | None = None,
        record_recalls: bool = False,
        durable_recalls: bool = False,
        pool_size: int = 4,
        pool_min: int = 1,
        timeout: float = 60.0,
    ) -> None:
        super().__init__(limits=limits, hybrid=hybrid, record_recalls=record_recalls)
        if not isinstance(durable_recalls, bool):
            raise ConfigError(f"durable_recalls must be True or False, got {durable_recalls!r}")
        for name, size in (("pool_size", pool_size), ("pool_min", pool_min)):
            if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= 1_000:
                raise ConfigError(f"{name} must be an int from 0 to 1000, got {size!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 1e6:
            raise ConfigError(f"timeout must be a number of seconds above 0, got {timeout!r}")
        if pool_size < max(1, pool_min):
            raise ConfigError(f"pool_size must be at least 1 and at least pool_min ({pool_min}), got {pool_size}")
        if not isinstance(url, str) or urlsplit(url).scheme.lower() not in _SCHEMES:
            raise ConfigError("PostgresAdapter needs a postgresql:// URL")
        load_psycopg()
        self.durable_recalls = durable_recalls
        self.url = safe_url(url)
        self._timeout = float(timeout)
        self._conninfo = conninfo(url, timeout)
        self._pool_size, self._pool_min = pool_size, pool_min
        self._embedder: Any = None
        if embedder is not None and embedder is not _UNSET:
            from memkit.embeddings import get_embedder

            self._embedder = get_embedder(embedder)
        self._unset = embedder is _UNSET
        self._foreign: str | None = None  # vectors made by an embedder this handle cannot load
        self._dim: int | None = None
        self._pool: Any = None
        self._builds = _index.Builds(self._conninfo)
        self._loop = Loop("memkit-postgres", self.__repr__)
        try:
            # Unbounded but for connecting (connect_timeout): a migration or a first embedding may run long.
            self._loop.call(self._open())
        except BaseException:
            self._loop.close(self._release())
            raise

    @classmethod
    def from_url(cls, url: str, **options: Any) -> PostgresAdapter:
        """``postgresql://user:password@host:port/database?embedder=none&pool_size=8&sslmode=require``."""
        query = query_options(url)
        if "embedder" in query:
            options.setdefault("embedder", embedder_option(query["embedder"]))
        for flag in ("record_recalls", "durable_recalls"):
            if flag in query:
                options.setdefault(flag, bool_option(flag, query[flag]))
        if "timeout" in query:
            try:
                options.setdefault("timeout", float(query["timeout"]))
            except ValueError:
                raise ConfigError("timeout in the URL must be a number of seconds") from None
        for size in ("pool_size", "pool_min"):
            if size in query:
                try:
                    options.setdefault(size, int(query[size]))
                except ValueError:
                    raise ConfigError(f"{size} in the URL must be an integer") from None
        parts = urlsplit(url)
        rest = "&".join(
            f"{k}={v}" for k, v in (p.split("=", 1) if "=" in p else (p, "") for p in parts.query.split("&") if p)
            if k not in _OWN_OPTIONS
        )
        return cls(urlunsplit((parts.scheme, parts.netloc, parts.path, rest, "")), **options)

    def __repr__(self) -> str:
        return f"PostgresAdapter({self.url!r})"

    # -- connections, on the adapter's loop ---------------------------------------------

    def _storage_error(self, exc: BaseException) -> BaseException:
        psycopg, _ = load_psycopg()
        if isinstance(exc, psycopg.OperationalError):
            return BackendUnavailableError(f"PostgreSQL at {self.url} cannot be reached: {exc}")
        if isinstance(exc, psycopg.Error):
            return StorageError(f"PostgreSQL failed on {self.url}: {type(exc).__name__}: {exc}")
        return exc

    async def _open(self) -> None:
        psycopg, _ = load_psycopg()
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        except psycopg.ProgrammingError as exc:
            raise ConfigError(f"bad PostgreSQL URL {self.url}: {exc}") from None
        except psycopg.OperationalError as exc:
            raise BackendUnavailableError(f"PostgreSQL at {self.url} cannot be reached: {exc}") from None
        try:
            await self._migrate(conn)
            await self._bind(conn)
        except psycopg.Error as exc:
            raise self._storage_error(exc) from None
        finally:
            await conn.close()

        await self._open_pool()

    async def _open_pool(self) -> None:
        _, psycopg_pool = load_psycopg()

        async def configure(connection: Any) -> None:
            from psycopg.types.json import set_json_loads

            set_json_loads(_writes.jsonb_loads, connection)
            if self._dim is not None:
                from pgvector.psycopg import register_vector_async

                await register_vector_async(connection)

        self._samples = SampleCache()
        self._pool = psycopg_pool.AsyncConnectionPool(
            self._conninfo, min_size=self._pool_min, max_size=self._pool_size, open=False,
            kwargs={"autocommit": True}, configure=configure, name="memkit", timeout=self._timeout,
        )
        try:
            await self._pool.open(wait=True, timeout=self._timeout)
        except psycopg_pool.PoolTimeout as exc:
            raise BackendUnavailableError(f"PostgreSQL at {self.url} gave no connection: {exc}") from None

    async def _migrate(self, conn: Any) -> None:
        async with conn.transaction():
            # One process migrates; the others wait here, then find the work done.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK,))
            await conn.execute(META_TABLE)
            row = await (await conn.execute("SELECT value FROM memkit_meta WHERE key = 'schema_version'")).fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise ConfigError(
                    f"the database at {self.url} has memkit schema version {version}; this memkit knows up to"
                    f" {SCHEMA_VERSION}: upgrade memkit"
                )
            for target in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[target]:
                    await conn.execute(statement)
            await conn.execute(
                "INSERT INTO memkit_meta (key, value) VALUES ('schema_version', %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),),
            )

    async def _recorded(self, conn: Any) -> dict[str, str]:
        rows = await (await conn.execute("SELECT key, value FROM memkit_meta")).fetchall()
        return dict(rows)

    def _mismatch(self, name: str, dim: str | None) -> ConfigError:
        from memkit.embeddings import fingerprint

        emb = self._embedder
        return ConfigError(
            f"the store at {self.url} holds vectors made by embedder {name!r} (dim {dim}), not {fingerprint(emb)!r}"
            f" (dim {emb.dim}); memkit never mixes two embedders in one store. Open it with embedder={name!r}"
        )

    async def _bind(self, conn: Any) -> None:
        """Settle which embedder this handle uses, giving a store its vector column when it gets one."""
        from memkit.embeddings import DEFAULT_EMBEDDER, fingerprint, same_model

        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK,))
            meta = await self._recorded(conn)
            name, dim = meta.get("embedder_name"), meta.get("embedder_dim")
            empty = (await (await conn.execute("SELECT NOT EXISTS (SELECT 1 FROM memories)")).fetchone())[0]
            if self._embedder is None:
                if name == DEFAULT_EMBEDDER or (name is None and self._unset and empty and "keyword_only" not in meta):
                    from memkit.embeddings import get_embedder

                    self._embedder = get_embedder("default")
                elif name is not None:
                    self._foreign = name
                    self._dim = int(dim) if dim else None
                    return
                else:
                    if not self._unset and empty:
                        await conn.execute(
                            "INSERT INTO memkit_meta (key, value) VALUES ('keyword_only', '1') ON CONFLICT DO NOTHING"
                        )
                    return
            emb = self._embedder
            if name is not None:
                if not same_model(name, emb) or dim != str(emb.dim):
                    raise self._mismatch(name, dim)
                self._dim = emb.dim
                return
            for statement in _schema.vector_statements(emb.dim):
                await conn.execute(statement)
            from pgvector.psycopg import register_vector_async

            await register_vector_async(conn)
            await self._embed_all(conn)
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO memkit_meta (key, value) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [("embedder_name", fingerprint(emb)), ("embedder_dim", str(emb.dim))],
                )
            await conn.execute("DELETE FROM memkit_meta WHERE key = 'keyword_only'")
            self._dim = emb.dim

    async def _embed_all(self, conn: Any) -> int:
        """Give every memory the current embedder's vector (a keyword-only store gaining vectors)."""
        after, done = -1, 0
        while True:
            rows = await (await conn.execute(
                "SELECT seq, content FROM memories WHERE seq > %s ORDER BY seq LIMIT %s", (after, _EMBED_BATCH)
            )).fetchall()
            if not rows:
                return done
            vectors = self._embed([r[1] for r in rows])
            async with conn.cursor() as cur:
                await cur.executemany("UPDATE memories SET embedding = %s WHERE seq = %s",
                                      [(v, r[0]) for r, v in zip(rows, vectors, strict=True)])
            after, done = rows[-1][0], done + len(rows)

    def _embed(self, texts: list[str]) -> Any:
        return embedded(self._embedder, texts)

    async def _release(self) -> None:
        await self._builds.aclose()
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    async def _call(self, coro: Coroutine[Any, Any, T], bounded: bool = True) -> T:
        """Run ``coro`` on the adapter's loop, for at most the timeout; a database error becomes memkit's."""
        psycopg, psycopg_pool = load_psycopg()
        try:
            return await self._loop.run(coro, self._timeout if bounded else None)
        except (TimeoutError, psycopg_pool.PoolTimeout):  # no answer, or no connection, within the timeout
            raise timed_out(self.url, self._timeout) from None
        except psycopg.Error as exc:
            raise self._storage_error(exc) from None

    async def _fetch(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        async with self._pool.connection() as conn:
            cur = await conn.execute(sql, list(params))
            return list(await cur.fetchall())

    async def _vectors(self, records: list[Record]) -> Any:
        if self._foreign is not None:
            raise ConfigError(
                f"the store at {self.url} holds vectors made by embedder {self._foreign!r}; open it with"
                " embedder=<that embedder> to write"
            )
        # One embedder call per batch: the model's per-call cost is paid once.
        return self._embed([r.content for r in records]) if self._embedder is not None else None

    async def _insert(self, records: list[Record], vectors: Any, replace: bool = False,
                      recalls: tuple[str, list[tuple[Any, ...]]] | None = None) -> list[str]:
        metadata = [r.metadata_json or json.dumps(r.metadata, ensure_ascii=False, separators=(",", ":"))
                    for r in records]
        async with self._pool.connection() as conn:
            await _writes.insert(conn, records, metadata, vectors, replace, recalls)
        if vectors is not None:
            await self._builds.written(self._pool, self._dim or 0)
        return [r.id for r in records]

    async def index_vectors(self) -> int:
        """Bring the HNSW index up to date with every memory written so far, waiting for it.

        Writers start such builds in the background once enough memories are outside the
        index (searches score those exactly); call this after a bulk import so searches run at
        full speed at once. Returns the ``seq`` the index covers (0 for a keyword-only store).
        """
        if self._dim is None:
            return 0
        done = await self._call(_index.build(self._conninfo, self._dim, wait=True), bounded=False)
        return int(done or 0)

    async def _write(self, op: WriteOp) -> list[str]:
        bar = None
        if op.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(op.records), desc="add_many", unit="mem")
        try:
            records = list(op.records)
            # Embedding is this process's work, not the server's: the timeout counts only the writing.
            vectors = await self._call(self._vectors(records), bounded=False)
            return await self._call(self._insert(records, vectors, op.replace))
        finally:
            if bar is not None:
                bar.update(len(op.records))
                bar.close()

    async def _remove(self, op: DeleteOp) -> bool:
        sql = "DELETE FROM memories WHERE id = %s"
        params: list[Any] = [op.memory_id]
        for column, value in (("user_id", op.user_id), ("agent_id", op.agent_id)):
            if value is not None:
                sql += f" AND {column} = %s"  # column names from the tuple above, values as parameters
                params.append(value)
        async with self._pool.connection() as conn, conn.transaction():
            rows = await (await conn.execute(sql + " RETURNING user_id, agent_id, terms_len", params)).fetchall()
            for user, agent, length in rows:
                await conn.execute(
                    "UPDATE namespace_stats SET count = count - 1, terms = terms - %s"
                    " WHERE user_id = %s AND agent_id = %s",
                    (length, user, agent),
                )
        return bool(rows)

    async def _delete(self, op: DeleteOp) -> bool:
        return await self._call(self._remove(op))

    async def _truncate(self) -> None:
        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("TRUNCATE memories, namespace_stats, recalls, marks")
            await conn.execute("DELETE FROM memkit_meta WHERE key = 'vector_segments'")

    async def _reset(self, op: ResetOp) -> None:
        await self._call(self._truncate())

    # -- reads --------------------------------------------------------------------------------

    async def _select(self, op: ListOp) -> list[Record]:
        conditions = op.conditions
        if op.until_us is not None:
            conditions = (*conditions, created_by(op.until_us))
        return await q.select(self._fetch, op.user_id, op.agent_id, conditions, op.limit, op.offset)

    async def _list(self, op: ListOp) -> list[Record]:
        return await self._call(self._select(op))

    async def _values(self, op: ValuesOp) -> list[Any]:
        where, params = filter_sql(op.conditions, q.POSTGRES)
        if op.path == (LISTED,):  # indexed: a seek per distinct value, not a read of every memory
            lo, hi = listed_bounds(op.conditions) or ("", None)
            return await self._call(q.listed_values(self._fetch, op.user_id, op.agent_id, where, params, lo, hi, 2**62))
        namespace = "m.user_id = %s AND m.agent_id = %s AND m.metadata #> %s IS NOT NULL"
        sql = f"SELECT DISTINCT m.metadata #> %s FROM memories m WHERE {namespace} AND {where}"  # noqa: S608
        path = list(op.path)
        rows = await self._call(self._fetch(sql, [path, op.user_id, op.agent_id, path, *params]))
        return [row[0] for row in rows]

    async def _get(self, op: GetOp) -> Record | None:
        rows = await self._call(self._fetch(f"SELECT {q.COLUMNS} FROM memories m WHERE m.id = %s", [op.memory_id]))  # noqa: S608
        return q.row_record(rows[0]) if rows else None

    # -- search -------------------------------------------------------------------------------

    async def _rank(self, op: SearchOp) -> list[MemoryItem]:
        conditions = op.conditions
        if op.until_us is not None:
            conditions = (*conditions, created_by(op.until_us))
        vector = None if op.mode == "keyword" else self._embed([op.query])[0]
        return await self._call(ranked(self._pool, op, conditions, vector, self._samples))

    @property
    def embedder(self) -> Any:
        """The :class:`memkit.embeddings.Embedder` in use, or ``None`` (keyword only)."""
        return self._embedder

    async def _switch(self, embedder: Any) -> int:
        from memkit.embeddings import fingerprint

        async with self._pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_LOCK,))
            # Dropping the column drops every vector index with it.
            await conn.execute("ALTER TABLE memories DROP COLUMN IF EXISTS embedding")
            add_extension, add_column = _schema.vector_statements(embedder.dim)
            await conn.execute(add_extension)
            await conn.execute(add_column)
            from pgvector.psycopg import register_vector_async

            await register_vector_async(conn)
            previous, self._embedder = self._embedder, embedder
            try:
                done = await self._embed_all(conn)
            except BaseException:
                self._embedder = previous
                raise
            top = (await (await conn.execute("SELECT coalesce(max(seq), 0) FROM memories")).fetchone())[0]
            await conn.execute("DELETE FROM memkit_meta WHERE key = 'vector_segments'")
            if top:  # one segment over every vector, built at once: faster than row by row
                await conn.execute(_schema.vector_index_statement(
                    0, int(top), concurrently=False, kind=_schema.NEW_KIND, dim=embedder.dim))
                await conn.execute("INSERT INTO memkit_meta (key, value) VALUES ('vector_segments', %s)",
                                   (_schema.segments_text([int(top)], [_schema.NEW_KIND]),))
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO memkit_meta (key, value) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [("embedder_name", fingerprint(embedder)), ("embedder_dim", str(embedder.dim))],
                )
            await conn.execute("DELETE FROM memkit_meta WHERE key = 'keyword_only'")
        had_vectors, self._dim, self._foreign = self._dim is not None, embedder.dim, None
        if not had_vectors:
            # Connections opened before the store had vectors do not know the vector type: open new ones.
            await self._pool.close()
            self._pool = None
            await self._open_pool()
        return done

    async def reembed(self, embedder: object = "default", *, progress: bool = True) -> int:
        """Replace every vector with ``embedder``'s (one transaction) and use it from now on.

        Other processes holding the store open with the old embedder must reopen it: their
        writes are refused meanwhile (the vector column changed). Returns how many memories
        were embedded.
        """
        from memkit.embeddings import get_embedder

        chosen = get_embedder(embedder)
        return await self._call(self._switch(chosen), bounded=False)

    # -- capabilities -------------------------------------------------------------------------

    async def _namespaces(self, op: NamespacesOp) -> list[NamespaceInfo]:
        rows = await self._call(self._fetch(
            "SELECT user_id, agent_id, count(*), min(created_us), max(created_us)"
            " FROM memories GROUP BY user_id, agent_id ORDER BY user_id, agent_id"
        ))
        return [NamespaceInfo(user_id=u, agent_id=a, count=c, first_at=from_us(lo), last_at=from_us(hi))
                for u, a, c, lo, hi in rows]

    async def _measure(self) -> Stats:
        rows = await self._fetch(
            "SELECT (SELECT coalesce(sum(count), 0) FROM namespace_stats),"
            " (SELECT count(*) FROM memories WHERE metadata ->> 'type' = 'trace'),"
            " (SELECT count(*) FROM namespace_stats WHERE count > 0),"
            " pg_total_relation_size('memories') + pg_total_relation_size('recalls')"
            " + pg_total_relation_size('marks'), current_setting('server_version')"
        )
        memories, traces, namespaces, size, version = rows[0]
        return Stats(
            provider=self.provider_name, memories=int(memories), traces=int(traces), namespaces=int(namespaces),
            storage_bytes=int(size), url=self.url, schema_version=SCHEMA_VERSION, server_version=version,
            embedder=None if self._embedder is None else self._embedder.name, embedder_dim=self._dim,
        )

    async def _stats(self, op: StatsOp) -> Stats:
        return await self._call(self._measure())

    async def _ping(self, op: PingOp) -> str:
        rows = await self._call(self._fetch("SELECT current_setting('server_version')"))
        return f"schema version {SCHEMA_VERSION}, PostgreSQL {rows[0][0]}"

    async def _export(self, op: ExportOp) -> AsyncIterator[Record]:
        # In chunks by (created_us, seq), so memory use stays flat.
        after = (-(2**62), -1)
        while True:
            sql = f"SELECT {q.COLUMNS} FROM memories m WHERE (m.created_us, m.seq) > (%s, %s)"  # noqa: S608
            params: list[Any] = list(after)
            for column, value in (("user_id", op.user_id), ("agent_id", op.agent_id)):
                if value is not None:
                    sql += f" AND m.{column} = %s"  # column names from the tuple above, values as parameters
                    params.append(value)
            rows = await self._call(self._fetch(sql + " ORDER BY m.created_us, m.seq LIMIT 2000", params))
            for row in rows:
                yield q.row_record(row)
            if len(rows) < 2_000:
                return
            after = (rows[-1][6], rows[-1][0])

    async def _trace_columns(self, op: TraceColumnsOp) -> dict[str, Any]:
        from memkit.adapters._postgres import _traces as _postgres_traces

        return await self._call(_postgres_traces.read(
            self._pool, workflow_id=op.workflow_id, agent_id=op.agent_id, user_id=op.user_id, status=op.status,
            since_us=op.since_us, after_seq=op.after_seq,
        ))

    # -- closing --------------------------------------------------------------------------------

    async def _close(self, op: CloseOp) -> None:
        await self._loop.aclose(self._release())

    def close(self) -> None:
        """:meth:`aclose` from sync code (no event loop needed)."""
        self._loop.close(self._release())
