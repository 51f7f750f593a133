"""FalkorDB through its native client (RESP), never its Bolt port.

FalkorDB 4.16's Bolt endpoint mangles quotes, truncates floats and ignores
transactions; the native client sends parameters in a CYPHER header that round
trips quotes, backslashes, 100 KB strings and full float precision.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, Unpack
from urllib.parse import unquote, urlsplit

from memkit._core._errors import BackendUnavailableError, ConfigError, InvalidInputError, StorageError, missing_extra
from memkit._core._url import bool_option, embedder_option, query_options
from memkit.adapters._graph._cypher import Dialect, Statement
from memkit.adapters._graph._store import GraphAdapter, GraphOptions
from memkit.adapters._plumbing import Worker

__all__ = ["FalkorDBAdapter", "FalkorDBDialect"]

T = TypeVar("T")

# Keyed MERGE targets and the lookups the query layer makes; FalkorDB's DDL is unnamed.
# Only JSON keys and UUIDs are indexed: the 4.16 range index trims whitespace from stored strings.
_INDEXES = (
    ("Memory", "key"), ("Memory", "ns"), ("Namespace", "key"), ("Entity", "key"), ("Workflow", "key"),
    ("Trace", "key"), ("Trace", "id"), ("Tool", "key"), ("Step", "id"), ("Recall", "key"), ("Recall", "ns"),
    ("Recall", "id"), ("Mark", "key"), ("Mark", "ns"),
)


_UNIQUE = (("Memory", "key"), ("Step", "id"), ("Recall", "key"), ("Mark", "key"))
# A property name memkit's statements use (``m.key``, ``{id: ...}``).
_PROPERTY = re.compile(r"\b[A-Za-z_]\w*\.([a-z_][a-z0-9_]*)\b(?!\()|[{,]\s*([a-z_][a-z0-9_]*)\s*:")


class FalkorDBDialect(Dialect):
    """FalkorDB 4.x: unnamed index DDL, ``db.idx.vector.*``, atomic single statements."""

    name = "falkordb"
    transactional = False
    max_skip = 2**31 - 1

    def __init__(self, host: str, port: int, graph: str, password: str | None = None,
                 socket_timeout: float = 60.0, workers: int = 4) -> None:
        try:
            from falkordb import FalkorDB
        except ImportError:
            raise missing_extra("falkordb", "graph") from None
        self.host, self.port, self.graph_name = host, port, graph
        self._factory = FalkorDB
        self.__password = password
        self._socket_timeout = socket_timeout
        # The client connects when built, so it is built on first use, on a worker thread.
        self._client: Any = None
        self._graph_handle: Any = None
        self._connect_lock = threading.Lock()
        self._worker = Worker("memkit-falkordb", self.describe, threads=workers, translate=self._memkit_error)

    def describe(self) -> str:
        return f"falkordb://{self.host}:{self.port}/{self.graph_name}"

    def schema_statements(self) -> list[str]:
        return [
            *(f"CREATE INDEX FOR (n:{label}) ON (n.{prop})" for label, prop in _INDEXES),
        ]

    def vector_schema_statements(self, dim: int) -> list[str]:
        return [
            f"CREATE VECTOR INDEX FOR (m:Memory) ON (m.embedding)"
            f" OPTIONS {{dimension: {int(dim)}, similarityFunction: 'cosine'}}"
        ]

    def vector_value(self, expr: str) -> str:
        return f"vecf32({expr})"

    async def ensure_vector_schema(self, dim: int) -> None:
        await self._call(self._ensure, self.vector_schema_statements(dim))

    def _memkit_error(self, exc: Exception) -> Exception | None:
        import redis.exceptions as rex

        # A write in flight when the answer does not come may have been applied: the server was
        # seen storing one it was frozen in the middle of. Each write is one atomic statement.
        unknown = ("if this was a write, it may or may not have been applied (each write is one atomic"
                   " statement: whole or absent); read it back before writing it again")
        if isinstance(exc, (rex.TimeoutError, TimeoutError)):
            return BackendUnavailableError(
                f"FalkorDB at {self.host}:{self.port} did not answer within the timeout ({self._socket_timeout:g} s;"
                f" set it with ?socket_timeout= or socket_timeout=): {unknown}"
            )
        if isinstance(exc, (rex.ConnectionError, ConnectionError)):
            return BackendUnavailableError(
                f"FalkorDB at {self.host}:{self.port} is unreachable or dropped the connection"
                f" ({type(exc).__name__}): {unknown}"
            )
        if isinstance(exc, rex.AuthenticationError):
            return ConfigError(f"FalkorDB at {self.host}:{self.port} rejected the password")
        if isinstance(exc, rex.ResponseError):
            if "unique constraint violation" in str(exc):
                return InvalidInputError("a memory with one of these ids already exists")
            return StorageError(f"FalkorDB rejected a query: {str(exc)[:300]}")
        return None

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._worker.run(fn, *args)

    @property
    def _graph(self) -> Any:
        with self._connect_lock:
            if self._graph_handle is None:
                self._client = self._factory(
                    host=self.host, port=self.port, password=self.__password,
                    socket_timeout=self._socket_timeout, socket_connect_timeout=10.0,
                )
                self._graph_handle = self._client.select_graph(self.graph_name)
            return self._graph_handle

    def _read(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        result = self._graph.ro_query(query, _sent(params))
        header = [h[1] if isinstance(h, (list, tuple)) else h for h in result.header]
        names = [h.decode() if isinstance(h, bytes) else str(h) for h in header]
        return [dict(zip(names, _received(row), strict=True)) for row in result.result_set]

    def _write(self, statements: Sequence[Statement]) -> list[list[dict[str, Any]]]:
        out = []
        for query, params in statements:
            result = self._graph.query(query, _sent(params))
            header = [h[1] if isinstance(h, (list, tuple)) else h for h in result.header]
            names = [h.decode() if isinstance(h, bytes) else str(h) for h in header]
            out.append([dict(zip(names, _received(row), strict=True)) for row in result.result_set])
        return out

    async def read(self, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return await self._call(self._read, query, params)

    async def write(self, statements: Sequence[Statement]) -> list[list[dict[str, Any]]]:
        return await self._call(self._write, statements)

    def _ensure(self, statements: list[str]) -> None:
        import redis.exceptions as rex

        for statement in statements:
            try:
                self._graph.query(statement)
            except rex.ResponseError as exc:
                if "already indexed" not in str(exc):
                    raise
        if statements == self.schema_statements():
            # Unique constraints (over the indexes above) close the race between two writers
            # adding the same memory id; a violating statement is rolled back whole.
            for label, prop in _UNIQUE:
                try:
                    self._graph.create_node_unique_constraint(label, prop)
                except rex.ResponseError as exc:
                    if "already exists" not in str(exc):
                        raise
            # A fresh graph learns each property name at its first use; two connections writing
            # and reading it at once then (seen with 8 threads over 2 stores) could store a node
            # whose properties read back under other names. Every name is learnt here, before
            # anything else runs, by a node created and deleted in one statement.
            names = sorted({a or b for s in self.statements() for a, b in _PROPERTY.findall(s)})
            self._graph.query("CREATE (x {" + ", ".join(f"{n}: 0" for n in names) + "}) DELETE x")

    async def ensure_schema(self) -> None:
        await self._call(self._ensure, self.schema_statements())

    def _close(self) -> None:
        with self._connect_lock:
            if self._client is not None:
                self._client.close()
            self._client = self._graph_handle = None

    async def aclose(self) -> None:
        await self._worker.aclose(self._close)


# FalkorDB's strings end at a NUL (the rest of the query text went with it: a StorageError), which
# every other store keeps. So a NUL travels as U+FFFF then "0", and U+FFFF itself (a noncharacter,
# rare in text) as U+FFFF then "1": reversible, and the same for what is stored and what is asked,
# so equality holds. Metadata travels as JSON text, where a NUL is already "\u0000".
_MARK = "\uffff"
_MARKED = re.compile("\uffff([01])")


def _sent(value: Any) -> Any:
    """``value`` (parameters) with NUL and U+FFFF spelled as above in every string."""
    if isinstance(value, str):
        if "\x00" in value or _MARK in value:
            return value.replace(_MARK, _MARK + "1").replace("\x00", _MARK + "0")
        return value
    if isinstance(value, dict):  # parameter maps: memkit's own keys, the caller's values
        return {k: _sent(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if value and type(value[0]) is float:  # a vector: numbers only
            return value
        return [_sent(v) for v in value]
    return value


def _received(value: Any) -> Any:
    """What :func:`_sent` was given, in a result row (strings, lists, maps, nodes' properties)."""
    if isinstance(value, str):
        return _MARKED.sub(lambda m: "\x00" if m.group(1) == "0" else _MARK, value) if _MARK in value else value
    if isinstance(value, dict):
        return {_received(k): _received(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_received(v) for v in value]
    properties = getattr(value, "properties", None)
    if isinstance(properties, dict):
        value.properties = _received(properties)
    return value


def parse_falkordb_url(url: str) -> dict[str, Any]:
    """``falkordb://[:password@]host:port/graph`` -> constructor keywords (never echoes the password)."""
    parts = urlsplit(url)
    if parts.scheme != "falkordb":
        raise ConfigError(f"not a falkordb:// URL: {parts.scheme}://...")
    try:
        port = parts.port or 6379
    except ValueError:
        raise ConfigError("the port of the falkordb:// URL is not a number") from None
    graph = unquote(parts.path.lstrip("/")) or "memkit"
    options: dict[str, Any] = {"host": parts.hostname or "127.0.0.1", "port": port, "graph": graph}
    if parts.password is not None:
        options["password"] = unquote(parts.password)
    for key, value in query_options(url).items():
        if key == "socket_timeout":
            try:
                options[key] = float(value)
            except ValueError:
                raise ConfigError(f"socket_timeout must be a number, got {value!r}") from None
        elif key == "embedder":  # as in sqlite:// URLs: none, default, st:/model/folder
            options[key] = embedder_option(value)
        elif key == "record_recalls":
            options[key] = bool_option(key, value)
        else:
            raise ConfigError(
                f"unknown falkordb:// URL option {key!r}; known: embedder, record_recalls, socket_timeout")
    return options


class FalkorDBOptions(GraphOptions, total=False):
    """Every keyword of :class:`FalkorDBAdapter` (what ``from_url`` takes beside the URL)."""

    host: str
    port: int
    graph: str
    password: str | None
    socket_timeout: float


class FalkorDBAdapter(GraphAdapter):
    """Memories as a graph in FalkorDB, through the native ``falkordb`` client.

    Parameters
    ----------
    host, port, graph
        Where the server is and which graph holds the memories.
    password
        Redis password; defaults to ``$MEMKIT_FALKORDB_PASSWORD``. Never shown in reprs or errors.
    **options
        ``limits``, ``entity_fields`` (see :class:`~memkit.adapters._graph._store.GraphAdapter`), ``socket_timeout``.

    Examples
    --------
    >>> mem = FalkorDBAdapter.from_url("falkordb://127.0.0.1:6379/memkit")  # doctest: +SKIP
    """

    provider_name = "falkordb"

    def __init__(
        self, host: str = "127.0.0.1", port: int = 6379, graph: str = "memkit", *,
        password: str | None = None, socket_timeout: float = 60.0, **options: Unpack[GraphOptions],
    ) -> None:
        if not isinstance(graph, str) or not graph.strip():
            raise ConfigError("graph must be a non-empty name")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ConfigError(f"port must be an integer between 1 and 65535, got {port!r}")
        password = password if password is not None else os.environ.get("MEMKIT_FALKORDB_PASSWORD") or None
        dialect = FalkorDBDialect(host, port, graph, password, socket_timeout)
        try:
            super().__init__(dialect, **options)
        except InvalidInputError:
            raise
        except BaseException:
            dialect._worker.abandon()
            raise

    @classmethod
    def from_url(cls, url: str, **options: Unpack[FalkorDBOptions]) -> FalkorDBAdapter:
        """``falkordb://host:port/graph`` (the factory calls this)."""
        return cls(**{**parse_falkordb_url(url), **options})
