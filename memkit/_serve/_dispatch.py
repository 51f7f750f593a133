"""Function calling: agent tools by name, in the Ollama/OpenAI format, answering in strings.

* :class:`ProviderTools`: ``recall_memory`` and ``save_note`` over any store, in one namespace;
* :class:`ToolDispatcher`: calls a tool by name with the model's arguments and always answers
  with a string (never raises for a bad tool name or bad arguments), recording each call with
  the context the agent passed along (``run_id=``, ``cycle_number=``, ...);
* :func:`register_pydantic_ai_tools`: the same two tools on a pydantic-ai ``Agent``.

The tools themselves are declared in :mod:`memkit._serve._catalogue`.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memkit._core._errors import InvalidInputError
from memkit._core._port import MemoryProvider
from memkit._core._validate import checked_as, checked_methods
from memkit._serve._catalogue import FUNCTION_TOOLS, KEY_VALUE_TOOLS, TOOLS, KeyValueTools, Namespace
from memkit._sync import Memory, call, provider_of

__all__ = ["KEPT_CALLS", "ProviderTools", "ToolCall", "ToolDispatcher", "register_pydantic_ai_tools"]

#: How many calls a :class:`ToolDispatcher` keeps in :attr:`ToolDispatcher.calls`.
KEPT_CALLS = 1_000


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

    async def arecall_memory(self, query: str, limit: int = 5, include_traces: bool = False) -> dict[str, Any]:
        return await _run(self.provider, "recall_memory", (self.user_id, self.agent_id), query=query, limit=limit,
                          include_traces=include_traces)

    async def asave_note(self, content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
        ns = (self.user_id, self.agent_id)
        saved = await _run(self.provider, "save_note", ns, content=content, metadata=metadata)
        return {"id": saved["id"]}

    def recall_memory(self, query: str, limit: int = 5, include_traces: bool = False) -> dict[str, Any]:
        """The best matches for ``query``: ``{"results": [memory, ...]}``; the agent's own recorded steps
        (trace records) only with ``include_traces=True``."""
        return call(self.provider, _run, "recall_memory", (self.user_id, self.agent_id), query=query, limit=limit,
                    include_traces=include_traces)

    def save_note(self, content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
        """Store a note; returns ``{"id": memory_id}``."""
        saved = call(self.provider, _run, "save_note", (self.user_id, self.agent_id), content=content,
                     metadata=metadata)
        return {"id": saved["id"]}


async def _run(provider: MemoryProvider, /, name: str, ns: Namespace, **arguments: Any) -> dict[str, Any]:
    """Catalogue tool ``name`` on ``provider`` in namespace ``ns``."""
    run = TOOLS[name].run
    assert run is not None
    return await run(provider, ns, **arguments)


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
            for kv in KEY_VALUE_TOOLS:
                assert kv.method is not None
                self.register(kv.name, kv.method(memory_tools), kv.definition())
        if provider_tools is not None:
            for tool in FUNCTION_TOOLS:
                assert tool.method is not None
                self.register(tool.name, tool.method(provider_tools), tool.definition())

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
        from memkit._core._errors import missing_extra

        raise missing_extra("pydantic-ai", "agents") from None
    if not callable(getattr(agent, "tool_plain", None)):
        raise InvalidInputError(f"agent must be a pydantic-ai Agent (it has tool_plain), got {type(agent).__name__}")

    async def recall_memory(query: str, limit: int = 5, include_traces: bool = False) -> dict[str, Any]:
        """Search long-term memory for notes relevant to a query (recorded workflow steps too with include_traces)."""
        return await tools.arecall_memory(query, limit, include_traces)

    async def save_note(content: str, metadata: dict[str, Any] | None = None) -> dict[str, str]:
        """Save a note to long-term memory so it can be recalled later."""
        return await tools.asave_note(content, metadata)

    agent.tool_plain(recall_memory)
    agent.tool_plain(save_note)
