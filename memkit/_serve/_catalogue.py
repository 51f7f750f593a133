"""The one catalogue of agent tools: every tool memkit offers an agent, declared once.

A :class:`Tool` is what a model reads (name, description, JSON-schema parameters), whether it
writes (a read-only MCP server leaves it out) and what it runs. Two families:

* key-value tools (``write``, ``read``, ``list``, ``delete``, ``pattern_search``): a run's
  scratchpad, run by the :class:`KeyValueTools` method the entry's ``method`` picks (on a
  :class:`memkit.tools.MemoryTools`, say); they answer in words, with the seed's messages;
* store tools: an ``async`` function of a provider, a namespace and the tool's arguments,
  answering a JSON-able dict. memkit validates the arguments as it validates a Python caller.
  Function calling runs two of them through the :class:`FunctionTools` method ``method`` picks.

:class:`memkit.tools.ToolDispatcher` (function calling) offers :data:`KEY_VALUE_TOOLS` and
:data:`FUNCTION_TOOLS`; ``memkit mcp`` offers :data:`MCP_TOOLS` and, on a SQLite store, the
key-value tools too. Each face renders the same declaration in its client's format.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from memkit._core._errors import ConfigError, InvalidInputError
from memkit._core._models import MemoryItem
from memkit._core._port import MemoryProvider, SupportsPaging
from memkit._display import is_trace, summary

__all__ = [
    "FUNCTION_TOOLS", "KEY_VALUE_TOOLS", "MCP_TOOLS", "TOOLS", "FunctionTools", "KeyValueTools", "Namespace",
    "Tool",
]

Namespace = tuple[str, str]
#: A store tool's body: ``await run(provider, (user_id, agent_id), **arguments)``.
StoreCall = Callable[..., Awaitable[dict[str, Any]]]


@runtime_checkable
class KeyValueTools(Protocol):
    """What runs the key-value tools: :class:`memkit.tools.MemoryTools`, or a stand-in."""

    def write(self, key: str, value: str) -> str: ...
    def read(self, key: str) -> str: ...
    def list(self) -> str: ...
    def delete(self, key: str) -> str: ...
    def pattern_search(self, pattern: str) -> str: ...


class FunctionTools(Protocol):
    """What runs the store tools of function calling: :class:`memkit.tools.ProviderTools`."""

    def recall_memory(self, query: str, limit: int = 5, include_traces: bool = False) -> dict[str, Any]: ...
    def save_note(self, content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]: ...


#: The kind of object a tool's ``method`` is read from.
H = TypeVar("H")


@dataclass(frozen=True)
class Tool(Generic[H]):
    """One agent tool: what a model reads, and what it runs: ``run`` on a provider (``None`` for a
    key-value tool), and ``method``, the callable of the object that serves it (a :class:`KeyValueTools`,
    a :class:`FunctionTools`), so no face looks a method up by its name."""

    name: str
    description: str
    properties: Mapping[str, Any]
    required: tuple[str, ...] = ()
    writes: bool = False
    destructive: bool = False
    run: StoreCall | None = None
    method: Callable[[H], Callable[..., Any]] | None = None

    def definition(self) -> dict[str, Any]:
        """The tool in the Ollama/OpenAI function-calling format (a copy the caller may change)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {"type": "object", "properties": copy.deepcopy(dict(self.properties)),
                               "required": list(self.required)},
            },
        }


def _string(description: str) -> dict[str, str]:
    return {"type": "string", "description": description}


_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The step, as memkit.traces.ExecutionItem records it; any other keys are kept too.",
    "properties": {
        "step_index": {"type": "integer", "description": "Position of the step in the workflow"},
        "step_name": {"type": "string", "description": "What the step does, e.g. run_blast"},
        "tool": {"type": "string", "description": "Tool or program the step used, e.g. blast"},
        "status": {"type": "string", "enum": ["pending", "running", "success", "failed", "retrying", "skipped"]},
        "parameters": {"type": "object", "description": "Inputs of the step"},
        "result": {"type": "object", "description": "Output of the step"},
        "error": {"type": "string", "description": "Why the step failed"},
        "duration": {"type": "number", "description": "Seconds the step took"},
        "retry_count": {"type": "integer"},
        "run_id": {"type": "string", "description": "Label of the run this step belongs to"},
    },
}
_FILTERS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": 'Metadata filter, e.g. {"gene": "TP53"}, {"type": {"$ne": "trace"}}, '
    '{"tool": {"$in": ["blast", "bwa"]}}; operators $eq $ne $in $nin $gt $gte $lt $lte',
}


_INCLUDE_TRACES: dict[str, Any] = {
    "type": "boolean", "default": False,
    "description": "Also return recorded workflow steps (trace records); left out unless true",
}


def _item(item: MemoryItem) -> dict[str, Any]:
    """A memory as an MCP tool returns it; a trace step reads as its summary, not its stored string."""
    data = item.model_dump(mode="json", exclude_none=True)
    data["summary"] = summary(item)
    if is_trace(item):
        del data["content"]
    return data


# -- store tools -------------------------------------------------------------------------------
# Arguments arrive as the client sent them (typed Any): the provider checks each one exactly as
# it checks a Python caller's, and its refusal is the tool's error.


async def _remember(provider: MemoryProvider, ns: Namespace, content: Any, metadata: Any = None) -> dict[str, Any]:
    return {"id": await provider.add(content, ns[0], ns[1], metadata)}


_NOT_TRACES: dict[str, Any] = {"type": {"$ne": "trace"}}


def agent_filters(filters: Any, include_traces: Any) -> Any:
    """What an agent's recall searches with: its filters, and no trace records (the agent's own logged
    steps, ``[trace] workflow=... data={json}``) unless it asked for them, with ``include_traces`` or a
    filter on ``type``. The port's ``search`` itself keeps the seed's behaviour and returns them."""
    if not isinstance(include_traces, bool):
        raise InvalidInputError(f"include_traces must be true or false, got {type(include_traces).__name__}")
    if include_traces:
        return filters
    if filters is None:
        return dict(_NOT_TRACES)
    if isinstance(filters, dict) and "type" not in filters:
        return {**filters, **_NOT_TRACES}
    return filters  # it asks about type itself, or is not a filter (the store says so)


async def _recall(
    provider: MemoryProvider, ns: Namespace, query: Any, limit: Any = 5, mode: Any = None, filters: Any = None,
    include_traces: Any = False,
) -> dict[str, Any]:
    # The one library call a recall makes, so recording recalls in the library covers MCP too.
    search: Any = provider.search
    hits: list[MemoryItem] = await search(query, ns[0], ns[1], limit, agent_filters(filters, include_traces),
                                          mode=mode)
    return {"results": [_item(hit) for hit in hits]}


async def _forget(provider: MemoryProvider, ns: Namespace, memory_id: Any) -> dict[str, Any]:
    delete: Any = provider.delete
    return {"deleted": bool(await delete(memory_id, user_id=ns[0], agent_id=ns[1]))}


async def _list_recent(
    provider: MemoryProvider, ns: Namespace, limit: Any = 10, offset: Any = 0, filters: Any = None
) -> dict[str, Any]:
    if isinstance(provider, SupportsPaging):
        items = await provider.get_page(ns[0], ns[1], offset=offset, limit=limit, filters=filters)
    elif offset == 0:
        items = await provider.get_all(ns[0], ns[1], limit, filters)
    else:
        raise ConfigError(f"{provider!r} cannot page; offset must be 0")
    more = isinstance(limit, int) and len(items) == limit
    return {"results": [_item(i) for i in items], "next_offset": offset + len(items) if more else None}


async def _record_step(provider: MemoryProvider, ns: Namespace, workflow_id: Any, step: Any) -> dict[str, Any]:
    return {"id": await provider.add_trace(ns[1], workflow_id, step, ns[0])}


async def _recall_memory(
    provider: MemoryProvider, ns: Namespace, query: Any, limit: Any = 5, include_traces: Any = False
) -> dict[str, Any]:
    hits = await provider.search(query, ns[0], ns[1], limit=limit, filters=agent_filters(None, include_traces))
    return {"results": [hit.model_dump(mode="json", exclude_none=True) for hit in hits]}


async def _save_note(provider: MemoryProvider, ns: Namespace, content: Any, metadata: Any = None) -> dict[str, Any]:
    return {"id": await provider.add(content, ns[0], ns[1], metadata)}


KEY_VALUE_TOOLS: tuple[Tool[KeyValueTools], ...] = (
    Tool("write", "Write a value to persistent memory under a specified key. Overwrites if key exists.",
         {"key": _string("The key to store the value under"), "value": _string("The value to store")},
         ("key", "value"), writes=True, method=lambda kv: kv.write),
    Tool("read", "Read a value from persistent memory by key.", {"key": _string("The key to retrieve the value for")},
         ("key",), method=lambda kv: kv.read),
    Tool("list", "List all keys currently stored in persistent memory.", {}, method=lambda kv: kv.list),
    Tool("delete", "Delete a key and its associated value from persistent memory.",
         {"key": _string("The key to delete")}, ("key",), writes=True, destructive=True, method=lambda kv: kv.delete),
    Tool("pattern_search", "Search for keys in persistent memory that contain a specific pattern.",
         {"pattern": _string("Substring to search for in keys")}, ("pattern",), method=lambda kv: kv.pattern_search),
)

#: The store tools of function calling (:class:`memkit.tools.ProviderTools`).
FUNCTION_TOOLS: tuple[Tool[FunctionTools], ...] = (
    Tool("recall_memory", "Search long-term memory for notes relevant to a query.",
         {"query": _string("What to look for"),
          "limit": {"type": "integer", "description": "How many memories to return at most", "default": 5},
          "include_traces": _INCLUDE_TRACES},
         ("query",), run=_recall_memory, method=lambda tools: tools.recall_memory),
    Tool("save_note", "Save a note to long-term memory so it can be recalled later.",
         {"content": _string("The note to remember"),
          "metadata": {"type": "object", "description": "Optional structured labels for the note"}},
         ("content",), writes=True, run=_save_note, method=lambda tools: tools.save_note),
)

#: The store tools ``memkit mcp`` serves.
MCP_TOOLS: tuple[Tool[None], ...] = (
    Tool("remember", "Save a memory (a note, a finding, a decision) so it can be recalled later.",
         {"content": _string("The text to remember"),
          "metadata": {"type": "object", "description": 'Optional labels, e.g. {"gene": "TP53"}'}},
         ("content",), writes=True, run=_remember),
    Tool("recall",
         "Search memory for what is relevant to a query. Returns the best matches, best first, each "
         "with its score and score_details (which retrieval leg found it, at what rank).",
         {"query": _string("What to look for; empty lists the newest"),
          "limit": {"type": "integer", "description": "How many memories to return at most", "default": 5},
          "mode": {"type": "string", "enum": ["hybrid", "keyword", "semantic"],
                   "description": "Retrieval mode (default: hybrid if the store has an embedder, else keyword)"},
          "filters": _FILTERS_SCHEMA, "include_traces": _INCLUDE_TRACES},
         ("query",), run=_recall),
    Tool("forget", "Delete one memory by id. Only a memory of this namespace can be deleted.",
         {"memory_id": _string("The id remember or recall returned")}, ("memory_id",), writes=True,
         destructive=True, run=_forget),
    Tool("list_recent", "List memories newest first, a page at a time (use next_offset for the next page).",
         {"limit": {"type": "integer", "description": "Page size", "default": 10},
          "offset": {"type": "integer", "description": "How many of the newest to skip", "default": 0},
          "filters": _FILTERS_SCHEMA},
         run=_list_recent),
    Tool("record_step",
         "Record one step of a workflow's execution trace (what ran, with which tool, how it ended).",
         {"workflow_id": _string("The workflow (run) the step belongs to"), "step": _STEP_SCHEMA},
         ("workflow_id", "step"), writes=True, run=_record_step),
)

#: Every tool by name.
TOOLS: dict[str, Tool[Any]] = {
    **{tool.name: tool for tool in KEY_VALUE_TOOLS}, **{tool.name: tool for tool in FUNCTION_TOOLS},
    **{tool.name: tool for tool in MCP_TOOLS},
}
