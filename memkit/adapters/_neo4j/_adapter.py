"""Neo4j 5 through the official async driver (Bolt): the same query layer as FalkorDB."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any, Unpack
from urllib.parse import unquote, urlsplit

from memkit._core._errors import BackendUnavailableError, ConfigError, InvalidInputError, StorageError, missing_extra
from memkit._core._url import query_options
from memkit.adapters._graph._cypher import Dialect, Statement
from memkit.adapters._graph._store import GraphAdapter, GraphOptions

__all__ = ["Neo4jAdapter", "Neo4jDialect"]

SCHEMES = ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc")

_UNIQUE = (("Memory", "key"), ("Namespace", "key"), ("Entity", "key"), ("Workflow", "key"),
           ("Trace", "key"), ("Trace", "id"), ("Tool", "key"), ("Step", "id"), ("Recall", "key"),
           ("Mark", "key"))


_VECTOR_INDEX = "memkit_memory_embedding"
_INDEX_OPTIONS = "SHOW INDEXES YIELD name, options WHERE name = $name RETURN options"
_AWAIT_INDEXES = "CALL db.awaitIndexes(300)"
# Schema statements (run once, when a store is first used) and waiting for new indexes to fill
# (the procedure's own 300 s) may outlast a call timeout chosen for reads and writes.
_SCHEMA_SECONDS = 330.0


class Neo4jDialect(Dialect):
    """Neo4j 5: named ``IF NOT EXISTS`` DDL, one transaction per write."""

    name = "neo4j"
    transactional = True

    def __init__(self, uri: str, user: str | None, password: str | None, database: str | None,
                 max_retry_time: float = 30.0, timeout: float = 60.0) -> None:
        try:
            import neo4j  # noqa: F401
        except ImportError:
            raise missing_extra("neo4j", "graph") from None
        self._uri, self.database = uri, database
        self._max_retry_time = max_retry_time
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 1e6:
            raise ConfigError(f"timeout must be a number of seconds above 0, got {timeout!r}")
        self._timeout = float(timeout)
        self._user = user
        self.__auth = (user, password or "") if user is not None else None
        # The async driver belongs to the event loop that created it.
        self._drivers: dict[int, Any] = {}
        self._closed = False

    def describe(self) -> str:
        parts = urlsplit(self._uri)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}/{self.database or ''}"

    def schema_statements(self) -> list[str]:
        return [
            *(f"CREATE CONSTRAINT memkit_{label.lower()}_{prop} IF NOT EXISTS"
              f" FOR (n:{label}) REQUIRE n.{prop} IS UNIQUE" for label, prop in _UNIQUE),
            "CREATE INDEX memkit_memory_namespace IF NOT EXISTS FOR (m:Memory) ON (m.ns)",
            "CREATE INDEX memkit_recall_namespace IF NOT EXISTS FOR (r:Recall) ON (r.ns)",
            "CREATE INDEX memkit_recall_id IF NOT EXISTS FOR (r:Recall) ON (r.id)",
            "CREATE INDEX memkit_mark_namespace IF NOT EXISTS FOR (n:Mark) ON (n.ns)",
        ]

    def vector_schema_statements(self, dim: int) -> list[str]:
        return [
            f"CREATE VECTOR INDEX {_VECTOR_INDEX} IF NOT EXISTS FOR (m:Memory) ON (m.embedding)"
            f" OPTIONS {{indexConfig: {{`vector.dimensions`: {int(dim)}, `vector.similarity_function`: 'cosine'}}}}"
        ]

    def vector_value(self, expr: str) -> str:
        return expr

    def statements(self) -> list[str]:
        return [*super().statements(), _INDEX_OPTIONS, _AWAIT_INDEXES]

    async def ensure_vector_schema(self, dim: int) -> None:
        for statement in self.vector_schema_statements(dim):
            await self._session_run([(statement, {})], write=True, limit=_SCHEMA_SECONDS)
        # IF NOT EXISTS keeps an index made for another embedder, which would then skip
        # every vector of this one without a word: say so instead.
        [rows] = await self._session_run([(_INDEX_OPTIONS, {"name": _VECTOR_INDEX})], write=False,
                                         limit=_SCHEMA_SECONDS)
        found = rows[0]["options"]["indexConfig"].get("vector.dimensions") if rows else None
        if found is not None and int(found) != int(dim):
            raise ConfigError(
                f"the Neo4j database at {self.describe()} has a {found}-dimensional vector index"
                f" ({_VECTOR_INDEX}) but this embedder makes {dim}-dimensional vectors;"
                f" use the embedder the store was built with, or DROP INDEX {_VECTOR_INDEX}"
            )
        await self._session_run([(_AWAIT_INDEXES, {})], write=False, limit=_SCHEMA_SECONDS)

    def _driver(self) -> Any:
        from neo4j import AsyncGraphDatabase

        if self._closed:
            raise StorageError(f"{self.describe()} is closed; open the store again to use it")
        key = id(asyncio.get_running_loop())
        driver = self._drivers.get(key)
        if driver is None:
            driver = AsyncGraphDatabase.driver(
                self._uri, auth=self.__auth, max_transaction_retry_time=self._max_retry_time,
                connection_timeout=min(30.0, max(self._max_retry_time, 5.0)),
                # Hints such as "property key does not exist" (any query on an empty
                # database) would be logged as warnings on every call.
                notifications_min_severity="OFF",
            )
            self._drivers[key] = driver
        return driver

    async def _session_run(
        self, statements: Sequence[Statement], write: bool, limit: float | None = None,
    ) -> list[list[dict[str, Any]]]:
        """:meth:`_run` for at most the timeout. The driver has no read timeout of its own: a frozen
        server held every call for as long as it was frozen. The call is not waited for once
        cancelled (the driver's cleanup may wait on that server too)."""
        task = asyncio.ensure_future(self._run(statements, write))
        # The timeout bounds each statement: a bulk write is many chunks in one transaction, and on a
        # busy machine 20,000 memories with vectors take longer than one statement's wait.
        wait = max(self._timeout * max(len(statements), 1), limit or 0.0)
        try:
            done, _ = await asyncio.wait([task], timeout=wait)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if done:
            return task.result()
        task.cancel()
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # nobody else reads its end
        # A store call may read before it writes: which part hung is not known here.
        raise BackendUnavailableError(
            f"Neo4j at {self.describe()} did not answer within the timeout ({self._timeout:g} s a statement,"
            f" {wait:g} s for these {len(statements)}; set it with"
            " ?timeout= or timeout=): if this was a write, it may or may not have been applied (a transaction"
            " is whole or absent); read it back before writing it again"
        )

    async def _run(self, statements: Sequence[Statement], write: bool) -> list[list[dict[str, Any]]]:
        from neo4j import exceptions as nex

        async def work(tx: Any) -> list[list[dict[str, Any]]]:
            out = []
            for query, params in statements:
                result = await tx.run(query, params)
                out.append(await result.data())
            return out

        try:
            async with self._driver().session(database=self.database) as session:
                if write:
                    return await session.execute_write(work)  # type: ignore[no-any-return]
                return await session.execute_read(work)  # type: ignore[no-any-return]
        except nex.AuthError:
            raise ConfigError(f"Neo4j at {self.describe()} rejected the credentials of user {self._user!r}") from None
        except nex.ConstraintError as exc:
            raise InvalidInputError(f"Neo4j refused a duplicate: {exc.message}") from None
        except nex.IncompleteCommit:
            raise BackendUnavailableError(
                f"Neo4j at {self.describe()} dropped the connection while committing: the write may or may not"
                " have been applied"
            ) from None
        except (nex.ServiceUnavailable, nex.SessionExpired, OSError) as exc:
            outcome = "; the transaction was rolled back" if write else ""
            raise BackendUnavailableError(
                f"Neo4j at {self.describe()} is unreachable ({type(exc).__name__}){outcome}"
            ) from None
        except nex.Neo4jError as exc:
            raise StorageError(f"Neo4j rejected a query: {exc.code}: {exc.message}") from None

    async def read(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return (await self._session_run([(query, params)], write=False))[0]

    async def write(self, statements: Sequence[Statement]) -> list[list[dict[str, Any]]]:
        return await self._session_run(statements, write=True)

    async def ensure_schema(self) -> None:
        # DDL cannot share a transaction with other statements in Neo4j.
        for statement in self.schema_statements():
            await self._session_run([(statement, {})], write=True, limit=_SCHEMA_SECONDS)
        # New indexes fill in the background; wait, so the first query after setup uses them.
        await self._session_run([(_AWAIT_INDEXES, {})], write=False, limit=_SCHEMA_SECONDS)

    async def aclose(self) -> None:
        self._closed = True
        drivers, self._drivers = list(self._drivers.values()), {}
        for driver in drivers:
            await driver.close()


def parse_neo4j_url(url: str) -> dict[str, Any]:
    """``neo4j://[user:password@]host:port[/database]`` -> constructor keywords."""
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise ConfigError(f"not a Neo4j URL: {parts.scheme}://... (use one of {', '.join(SCHEMES)})")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError("the port of the Neo4j URL is not a number") from None
    host = parts.hostname or "localhost"
    options: dict[str, Any] = {"uri": f"{parts.scheme}://{host}{f':{port}' if port else ''}"}
    if parts.username:
        options["user"] = unquote(parts.username)
    if parts.password is not None:
        options["password"] = unquote(parts.password)
    database = unquote(parts.path.lstrip("/"))
    if database:
        options["database"] = database
    if "timeout" in query_options(url):
        try:
            options["timeout"] = float(query_options(url)["timeout"])
        except ValueError:
            raise ConfigError("timeout in the Neo4j URL must be a number of seconds") from None
    return options


class Neo4jOptions(GraphOptions, total=False):
    """Every keyword of :class:`Neo4jAdapter` (what ``from_url`` takes beside the URL)."""

    uri: str
    user: str | None
    password: str | None
    database: str | None
    max_retry_time: float
    timeout: float


class Neo4jAdapter(GraphAdapter):
    """Memories as a graph in Neo4j 5.x, through the official async ``neo4j`` driver.

    Parameters
    ----------
    uri
        ``neo4j://``, ``neo4j+s://`` or ``bolt://`` address (no credentials needed in it).
    user, password
        Default to ``$MEMKIT_NEO4J_USER`` / ``$MEMKIT_NEO4J_PASSWORD``; never shown in reprs or errors.
    database
        Neo4j database name (the server's default when ``None``).
    max_retry_time
        Seconds the driver keeps retrying a transaction on transient errors or lost connections.
    timeout
        Seconds a call waits for the server (``?timeout=10`` in the URL; default 60) before it raises
        :class:`memkit.BackendUnavailableError`; a write that timed out may or may not have been
        applied (the error says so): read it back before writing it again.
    **options
        ``limits``, ``entity_fields``.

    Examples
    --------
    >>> mem = Neo4jAdapter.from_url("neo4j://localhost:7687")  # doctest: +SKIP
    """

    provider_name = "neo4j"

    def __init__(
        self, uri: str = "neo4j://localhost:7687", *, user: str | None = None, password: str | None = None,
        database: str | None = None, max_retry_time: float = 30.0, timeout: float = 60.0,
        **options: Unpack[GraphOptions],
    ) -> None:
        if urlsplit(uri).scheme not in SCHEMES:
            raise ConfigError(f"not a Neo4j URL: use one of {', '.join(s + '://' for s in SCHEMES)}")
        if urlsplit(uri).password is not None or urlsplit(uri).username is not None:
            parsed = parse_neo4j_url(uri)
            uri = parsed.pop("uri")
            user = user if user is not None else parsed.get("user")
            password = password if password is not None else parsed.get("password")
        user = user if user is not None else os.environ.get("MEMKIT_NEO4J_USER") or None
        password = password if password is not None else os.environ.get("MEMKIT_NEO4J_PASSWORD")
        super().__init__(Neo4jDialect(uri, user, password, database, max_retry_time, timeout), **options)

    @classmethod
    def from_url(cls, url: str, **options: Unpack[Neo4jOptions]) -> Neo4jAdapter:
        """``neo4j://user:password@host:7687/database`` (the factory calls this)."""
        return cls(**{**parse_neo4j_url(url), **options})
