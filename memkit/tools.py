"""Memory tools an LLM agent can call, in the Ollama/OpenAI function-calling format.

* :class:`MemoryTools`: the seed's persistent key-value scratchpad (``write``, ``read``,
  ``list``, ``delete``, ``pattern_search``), isolated per ``run_id``, in SQLite.
* :class:`ProviderTools`: ``recall_memory`` and ``save_note`` over any memkit store,
  bound to one ``(user_id, agent_id)`` namespace.
* :class:`ToolDispatcher`: calls a tool by name with the model's arguments and always
  answers with a string (never raises for a bad tool name or bad arguments). Call context
  the agent passes along (``run_id=``, ``cycle_number=``, ...) is recorded with each call.

The messages are part of the contract (users' tests match them word for word). ``write``
stores strings only, as the tool's schema says: any other JSON value (a number, a list, an
object) is refused with the seed's ``Error: Invalid arguments for tool 'write': ...`` and
nothing is written, so that what ``read`` returns is always exactly what was written.
"""

from __future__ import annotations

import builtins
import json
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from memkit._errors import InvalidInputError
from memkit._protocols import MemoryProvider
from memkit._sync import Memory, provider_of, run_sync
from memkit._validate import DEFAULT_LIMITS, Limits, check_text, checked_as, checked_methods

__all__ = ["MemoryTools", "ProviderTools", "ToolCall", "ToolDispatcher", "register_pydantic_ai_tools"]

#: How many calls a :class:`ToolDispatcher` keeps in :attr:`ToolDispatcher.calls`.
KEPT_CALLS = 1_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv_memory (
    run_id TEXT NOT NULL,
    key    TEXT NOT NULL,
    value  TEXT NOT NULL,
    UNIQUE (run_id, key)
)
"""


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _string(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


MEMORY_TOOL_DEFINITIONS: list[dict[str, Any]] = [
    _function(
        "write",
        "Write a value to persistent memory under a specified key. Overwrites if key exists.",
        {"key": _string("The key to store the value under"), "value": _string("The value to store")},
        ["key", "value"],
    ),
    _function("read", "Read a value from persistent memory by key.",
              {"key": _string("The key to retrieve the value for")}, ["key"]),
    _function("list", "List all keys currently stored in persistent memory.", {}, []),
    _function("delete", "Delete a key and its associated value from persistent memory.",
              {"key": _string("The key to delete")}, ["key"]),
    _function("pattern_search", "Search for keys in persistent memory that contain a specific pattern.",
              {"pattern": _string("Substring to search for in keys")}, ["pattern"]),
]

PROVIDER_TOOL_DEFINITIONS: list[dict[str, Any]] = [
    _function(
        "recall_memory",
        "Search long-term memory for notes and past steps relevant to a query.",
        {
            "query": _string("What to look for"),
            "limit": {"type": "integer", "description": "How many memories to return at most", "default": 5},
        },
        ["query"],
    ),
    _function(
        "save_note",
        "Save a note to long-term memory so it can be recalled later.",
        {
            "content": _string("The note to remember"),
            "metadata": {"type": "object", "description": "Optional structured labels for the note"},
        },
        ["content"],
    ),
]


def _need_str(name: str, value: object, most: int, knob: str) -> str:
    """``value`` if it is text of at most ``most`` characters (``knob`` is the Limits field that sets it)."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if len(value) > most:
        raise InvalidInputError(
            f"{name} is {len(value)} characters; the limit is {most} (Limits.{knob})"
        )
    return check_text(value, name)


@checked_methods
class MemoryTools:
    """A persistent key-value memory for one experiment run.

    Entries live in a ``kv_memory`` table of the SQLite file at ``db_path`` (the same
    file as a memkit store is fine); each ``run_id`` sees only its own keys. Several
    processes may share the file: every write is one transaction (WAL, busy timeout).

    Parameters
    ----------
    db_path
        SQLite file; it and its folders are created on first use.
    run_id
        Identifier of the run whose keys this instance reads and writes.
    limits
        Bounds on what one call may carry (see :class:`memkit.Limits`): a key or run id is at
        most ``max_id_chars``, a value ``max_content_chars``, a pattern ``max_query_chars``.

    Examples
    --------
    >>> tools = MemoryTools(db_path="data/memory.db", run_id="exp-001")  # doctest: +SKIP
    >>> tools.write("task_status", "in_progress")                         # doctest: +SKIP
    "Wrote value to key 'task_status'"
    """

    def __init__(
        self, db_path: str | os.PathLike[str] = "data/memory.db", run_id: str = "default",
        *, limits: Limits = DEFAULT_LIMITS,
    ) -> None:
        self.limits = limits
        self.db_path = Path(db_path)
        self.run_id = _need_str("run_id", run_id, limits.max_id_chars, "max_id_chars")
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.db_path, isolation_level=None, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA busy_timeout = 30000")
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute(_SCHEMA)

    def __repr__(self) -> str:
        return f"MemoryTools({str(self.db_path)!r}, run_id={self.run_id!r})"

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> MemoryTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _key(self, key: object) -> str:
        return _need_str("key", key, self.limits.max_id_chars, "max_id_chars")

    def _keys(self) -> builtins.list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key FROM kv_memory WHERE run_id = ? ORDER BY rowid", (self.run_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def write(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` (overwriting); returns a confirmation message."""
        self._key(key)
        _need_str("value", value, self.limits.max_content_chars, "max_content_chars")
        with self._lock:
            db = self._conn
            db.execute("BEGIN IMMEDIATE")  # check-then-write must not race another process
            try:
                updated = db.execute(
                    "UPDATE kv_memory SET value = ? WHERE run_id = ? AND key = ?", (value, self.run_id, key)
                ).rowcount
                if not updated:
                    db.execute(
                        "INSERT INTO kv_memory (run_id, key, value) VALUES (?, ?, ?)",
                        (self.run_id, key, value),
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return f"Updated key '{key}' with new value" if updated else f"Wrote value to key '{key}'"

    def read(self, key: str) -> str:
        """The value stored under ``key``, or an error message."""
        self._key(key)
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM kv_memory WHERE run_id = ? AND key = ?", (self.run_id, key)
            ).fetchone()
        return row[0] if row is not None else f"Error: Key '{key}' not found"

    def list(self) -> str:
        """Every key of this run, comma-separated, in the order they were first written."""
        keys = self._keys()
        return ", ".join(keys) if keys else "No keys stored"

    def delete(self, key: str) -> str:
        """Remove ``key``; returns a confirmation or an error message."""
        self._key(key)
        with self._lock:
            removed = self._conn.execute(
                "DELETE FROM kv_memory WHERE run_id = ? AND key = ?", (self.run_id, key)
            ).rowcount
        return f"Deleted key '{key}'" if removed else f"Error: Key '{key}' not found"

    def pattern_search(self, pattern: str) -> str:
        """Keys containing ``pattern`` (case-sensitive substring), comma-separated."""
        _need_str("pattern", pattern, self.limits.max_query_chars, "max_query_chars")
        matching = [k for k in self._keys() if pattern in k]
        return ", ".join(matching) if matching else f"No keys found matching pattern '{pattern}'"


@checked_methods
class ProviderTools:
    """``recall_memory`` and ``save_note`` over a memkit store, bound to one namespace.

    Parameters
    ----------
    memory
        A provider or :class:`memkit.Memory`.
    user_id, agent_id
        The namespace the agent reads and writes.
    """

    def __init__(self, memory: MemoryProvider | Memory, user_id: str, agent_id: str) -> None:
        self.provider = provider_of(memory)
        self.user_id = user_id
        self.agent_id = agent_id

    async def arecall_memory(self, query: str, limit: int = 5) -> dict[str, Any]:
        hits = await self.provider.search(query, self.user_id, self.agent_id, limit=limit)
        return {"results": [hit.model_dump(mode="json", exclude_none=True) for hit in hits]}

    async def asave_note(self, content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
        memory_id = await self.provider.add(content, self.user_id, self.agent_id, metadata)
        return {"id": memory_id}

    def recall_memory(self, query: str, limit: int = 5) -> dict[str, Any]:
        """The best matches for ``query``: ``{"results": [memory, ...]}``."""
        return run_sync(self.arecall_memory(query, limit))

    def save_note(self, content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
        """Store a note; returns ``{"id": memory_id}``."""
        return run_sync(self.asave_note(content, metadata))


@runtime_checkable
class KeyValueTools(Protocol):
    """What :class:`ToolDispatcher` needs of its ``memory_tools``: :class:`MemoryTools`, or a stand-in."""

    def write(self, key: str, value: str) -> str: ...
    def read(self, key: str) -> str: ...
    def list(self) -> str: ...
    def delete(self, key: str) -> str: ...
    def pattern_search(self, pattern: str) -> str: ...


@dataclass(frozen=True)
class ToolCall:
    """One call a :class:`ToolDispatcher` made: what was asked, in which context, and the answer."""

    tool: str
    arguments: Any
    #: The keywords the agent passed to ``dispatch`` besides the tool and its arguments
    #: (``run_id``, ``cycle_number``, ...), with ``run_id`` taken from the config when not given.
    context: dict[str, Any]
    result: str
    #: False when the answer is one of the ``Error...`` strings.
    ok: bool
    at: datetime
    duration_ms: float


@checked_methods
class ToolDispatcher:
    """Invoke tools by name with the model's arguments; every answer is a string.

    Parameters
    ----------
    memory_tools
        The key-value tools (``write``, ``read``, ``list``, ``delete``, ``pattern_search``):
        a :class:`MemoryTools`, or any object with those methods.
    provider_tools
        Optionally, ``recall_memory`` and ``save_note`` (their dict results come back as JSON).
    config
        The agent's run configuration (a dict or an object with attributes), kept as
        :attr:`config`; its ``run_id``, if it has one, is the context of calls that name none.

    Every call is recorded in :attr:`calls` (the last :data:`KEPT_CALLS`) with the context the
    agent passed to :meth:`dispatch`, e.g. ``dispatch("write", args, run_id="r1", cycle_number=3)``.
    """

    def __init__(
        self,
        memory_tools: KeyValueTools | None = None,
        provider_tools: ProviderTools | None = None,
        config: object = None,
    ) -> None:
        self.memory_tools = memory_tools
        self.provider_tools = provider_tools
        self.config = config
        self.calls: deque[ToolCall] = deque(maxlen=KEPT_CALLS)
        self.tools: dict[str, Callable[..., Any]] = {}
        self._definitions: dict[str, dict[str, Any]] = {}
        if memory_tools is not None:
            for definition in MEMORY_TOOL_DEFINITIONS:
                name = definition["function"]["name"]
                self.register(name, getattr(memory_tools, name), definition)
        if provider_tools is not None:
            for definition in PROVIDER_TOOL_DEFINITIONS:
                name = definition["function"]["name"]
                self.register(name, getattr(provider_tools, name), definition)

    def register(self, name: str, function: Callable[..., Any], definition: dict[str, Any]) -> None:
        """Add a tool (``definition`` in the same function-calling format)."""
        self.tools[name] = function
        self._definitions[name] = definition

    def _config_run_id(self) -> object:
        config = self.config
        return config.get("run_id") if isinstance(config, Mapping) else getattr(config, "run_id", None)

    def dispatch(self, tool_name: object, arguments: object = None, **context: Any) -> str:
        """Call ``tool_name`` with ``arguments`` (a dict, a JSON object string, or None).

        Any other keyword (``run_id=``, ``cycle_number=``, ...) is call context: it is not
        passed to the tool, and is recorded with the call in :attr:`calls`.
        """
        start = time.perf_counter()
        at = datetime.now(UTC)
        result = self._answer(tool_name, arguments)
        if "run_id" not in context and (run_id := self._config_run_id()) is not None:
            context["run_id"] = run_id
        self.calls.append(ToolCall(
            tool=str(tool_name), arguments=arguments, context=context, result=result,
            ok=not result.startswith("Error"), at=at, duration_ms=(time.perf_counter() - start) * 1e3,
        ))
        return result

    def _answer(self, tool_name: object, arguments: object) -> str:
        if not isinstance(tool_name, str) or tool_name not in self.tools:
            return f"Error: Tool '{tool_name}' not found"
        if arguments is None:
            arguments = {}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as e:
                return f"Error: Invalid arguments for tool '{tool_name}': {e}"
        if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
            return f"Error: Invalid arguments for tool '{tool_name}': arguments must be a JSON object"
        try:
            result = self.tools[tool_name](**arguments)
        except (TypeError, InvalidInputError) as e:
            return f"Error: Invalid arguments for tool '{tool_name}': {e}"
        except Exception as e:
            return f"Error executing tool '{tool_name}': {e}"
        return result if isinstance(result, str) else json.dumps(result, default=str)

    def get_tool_definitions(self) -> list[dict[str, Any]]:
        """JSON-schema definitions of every registered tool (Ollama/OpenAI ``tools=`` format)."""
        return [json.loads(json.dumps(d)) for d in self._definitions.values()]


@checked_as("register_pydantic_ai_tools")
def register_pydantic_ai_tools(agent: Any, tools: ProviderTools) -> None:
    """Register ``recall_memory`` and ``save_note`` on a pydantic-ai ``Agent`` (needs ``pydantic-ai``)."""
    try:
        import pydantic_ai  # noqa: F401
    except ImportError:
        from memkit._errors import missing_extra

        raise missing_extra("pydantic-ai", "agents") from None
    if not callable(getattr(agent, "tool_plain", None)):
        raise InvalidInputError(f"agent must be a pydantic-ai Agent (it has tool_plain), got {type(agent).__name__}")

    async def recall_memory(query: str, limit: int = 5) -> dict[str, Any]:
        """Search long-term memory for notes and past steps relevant to a query."""
        return await tools.arecall_memory(query, limit)

    async def save_note(content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
        """Save a note to long-term memory so it can be recalled later."""
        return await tools.asave_note(content, metadata)

    agent.tool_plain(recall_memory)
    agent.tool_plain(save_note)
