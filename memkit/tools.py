"""Memory tools an LLM agent can call, in the Ollama/OpenAI function-calling format.

* :class:`MemoryTools`: the seed's persistent key-value scratchpad (``write``, ``read``,
  ``list``, ``delete``, ``pattern_search``), isolated per ``run_id``, in SQLite.
* :class:`ProviderTools`: ``recall_memory`` and ``save_note`` over any memkit store,
  bound to one ``(user_id, agent_id)`` namespace.
* :class:`ToolDispatcher`: calls a tool by name with the model's arguments and always
  answers with a string (never raises for a bad tool name or bad arguments). Call context
  the agent passes along (``run_id=``, ``cycle_number=``, ...) is recorded with each call.
* :func:`register_pydantic_ai_tools`: ``recall_memory`` and ``save_note`` on a pydantic-ai agent.
* :func:`import_tinydb`: the key-value records of the seed's first design (a TinyDB JSON file)
  into ``MemoryTools``' SQLite table.

The messages are part of the contract (users' tests match them word for word). ``write``
stores strings only, as the tool's schema says: any other JSON value (a number, a list, an
object) is refused with the seed's ``Error: Invalid arguments for tool 'write': ...`` and
nothing is written, so that what ``read`` returns is always exactly what was written.
``memkit mcp`` serves the same tools' declarations (one catalogue) to MCP clients.
"""

from __future__ import annotations

from memkit._serve._dispatch import ProviderTools, ToolCall, ToolDispatcher, register_pydantic_ai_tools
from memkit._serve._kv import MemoryTools, import_tinydb

__all__ = ["MemoryTools", "ProviderTools", "ToolCall", "ToolDispatcher", "import_tinydb", "register_pydantic_ai_tools"]
