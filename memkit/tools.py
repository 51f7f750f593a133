"""Memory tools an LLM agent can call, in the Ollama/OpenAI function-calling format.

* :class:`MemoryTools`: the seed's persistent key-value scratchpad (``write``, ``read``,
  ``list``, ``delete``, ``pattern_search``), isolated per ``run_id``, in SQLite.
* :class:`ProviderTools`: ``recall_memory`` and ``save_note`` over any memkit store,
  bound to one ``(user_id, agent_id)`` namespace.
* :class:`ToolDispatcher`: calls a tool by name with the model's arguments and always
  answers with a string (never raises for a bad tool name or bad arguments).

The messages are part of the contract (users' tests match them word for word).
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from memkit._protocols import MemoryProvider
from memkit._sync import Memory, provider_of, run_sync

__all__ = ["MemoryTools", "ProviderTools", "ToolDispatcher", "register_pydantic_ai_tools"]

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


def _need_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return value


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

    Examples
    --------
    >>> tools = MemoryTools(db_path="data/memory.db", run_id="exp-001")  # doctest: +SKIP
    >>> tools.write("task_status", "in_progress")                         # doctest: +SKIP
    "Wrote value to key 'task_status'"
    """

    def __init__(self, db_path: str = "data/memory.db", run_id: str = "default") -> None:
        self.db_path = Path(db_path)
        self.run_id = _need_str("run_id", run_id)
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

    def _keys(self) -> builtins.list[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT key FROM kv_memory WHERE run_id = ? ORDER BY rowid", (self.run_id,)
            ).fetchall()
        return [r[0] for r in rows]

    def write(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` (overwriting); returns a confirmation message."""
        _need_str("key", key)
        _need_str("value", value)
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
        _need_str("key", key)
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
        _need_str("key", key)
        with self._lock:
            removed = self._conn.execute(
                "DELETE FROM kv_memory WHERE run_id = ? AND key = ?", (self.run_id, key)
            ).rowcount
        return f"Deleted key '{key}'" if removed else f"Error: Key '{key}' not found"

    def pattern_search(self, pattern: str) -> str:
        """Keys containing ``pattern`` (case-sensitive substring), comma-separated."""
        _need_str("pattern", pattern)
        matching = [k for k in self._keys() if pattern in k]
        return ", ".join(matching) if matching else f"No keys found matching pattern '{pattern}'"


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


class ToolDispatcher:
    """Invoke tools by name with the model's arguments; every answer is a string.

    Parameters
    ----------
    memory_tools
        The key-value tools (``write``, ``read``, ``list``, ``delete``, ``pattern_search``).
    provider_tools
        Optionally, ``recall_memory`` and ``save_note`` (their dict results come back as JSON).
    """

    def __init__(
        self, memory_tools: MemoryTools | None = None, provider_tools: ProviderTools | None = None
    ) -> None:
        self.memory_tools = memory_tools
        self.provider_tools = provider_tools
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

    def dispatch(self, tool_name: str, arguments: Mapping[str, Any] | str | None = None) -> str:
        """Call ``tool_name`` with ``arguments`` (a dict, a JSON object string, or None)."""
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
        except TypeError as e:
            return f"Error: Invalid arguments for tool '{tool_name}': {e}"
        except Exception as e:
            return f"Error executing tool '{tool_name}': {e}"
        return result if isinstance(result, str) else json.dumps(result, default=str)

    def get_tool_definitions(self) -> list[dict[str, Any]]:
        """JSON-schema definitions of every registered tool (Ollama/OpenAI ``tools=`` format)."""
        return [json.loads(json.dumps(d)) for d in self._definitions.values()]


def register_pydantic_ai_tools(agent: Any, tools: ProviderTools) -> None:
    """Register ``recall_memory`` and ``save_note`` on a pydantic-ai ``Agent`` (needs ``pydantic-ai``)."""
    try:
        import pydantic_ai  # noqa: F401
    except ImportError:
        from memkit._errors import missing_extra

        raise missing_extra("pydantic-ai", "agents") from None

    async def recall_memory(query: str, limit: int = 5) -> dict[str, Any]:
        """Search long-term memory for notes and past steps relevant to a query."""
        return await tools.arecall_memory(query, limit)

    async def save_note(content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
        """Save a note to long-term memory so it can be recalled later."""
        return await tools.asave_note(content, metadata)

    agent.tool_plain(recall_memory)
    agent.tool_plain(save_note)
