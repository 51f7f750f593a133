"""``memkit mcp``: one memkit store served to any Model Context Protocol client.

The server is built on the official ``mcp`` SDK's low-level ``Server`` so that each
tool's JSON schema is written once, here (or, for the key-value tools, reused from
:data:`memkit.tools.MEMORY_TOOL_DEFINITIONS`), and so that arguments reach the
library untouched: memkit validates them exactly as it validates a Python caller,
and a refusal comes back as a tool error whose text starts with memkit's error
category (``invalid_input: limit must be between 1 and 10000, got 0``).

Namespaces: a server is bound to the namespaces its operator named and nothing
else. With ``--user``/``--agent`` and no allow list, tools take no namespace
argument at all; with ``--allow USER/AGENT`` (repeatable), a ``namespace``
argument chooses among the allowed ones. A namespace is written ``user/agent``
with ``%`` and ``/`` inside an id percent-encoded, so the label is unambiguous.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import re
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import quote, unquote

from memkit._display import format_time, is_trace, summary
from memkit._errors import ConfigError, ErrorCategory, InvalidInputError, MemkitError, NotFoundError, missing_extra
from memkit._factory import build_provider, default_url
from memkit._models import MemoryItem
from memkit._protocols import MemoryProvider, SupportsClose, SupportsPaging, SupportsRecalls
from memkit._validate import DEFAULT_LIMITS, Limits, check_namespace
from memkit.tools import MEMORY_TOOL_DEFINITIONS, MemoryTools

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext
    from mcp_types import CallToolResult

    Ctx = ServerRequestContext[Any]

__all__ = ["Access", "McpMemory", "namespace_label", "parse_namespace", "serve"]

log = logging.getLogger("memkit.mcp")

Namespace = tuple[str, str]
_URI_PREFIX = "memkit://namespace/"
_RECENT_LINES = 50


def namespace_label(user_id: str, agent_id: str) -> str:
    """``user/agent`` as clients see it (and as the key-value scratchpad's ``run_id``)."""
    return f"{quote(user_id, safe='')}/{quote(agent_id, safe='')}"


def parse_namespace(label: str) -> Namespace:
    """The inverse of :func:`namespace_label`; raises ``InvalidInputError`` for anything else."""
    parts = label.split("/")
    if len(parts) != 2:
        raise InvalidInputError(f"a namespace is written user/agent (one '/'), got {label!r}")
    user, agent = check_namespace(unquote(parts[0]), unquote(parts[1]))
    return user, agent


@dataclass(frozen=True)
class Access:
    """Which namespaces a client may reach, and whether it may write.

    ``namespaces`` maps each label to its ``(user_id, agent_id)``. With ``choose``
    False the server is bound to its single namespace and tools take no namespace
    argument; with ``choose`` True a ``namespace`` argument picks one of the
    labels (``default`` when the argument is left out, if there is a default).
    """

    namespaces: dict[str, Namespace]
    choose: bool = False
    default: str | None = None
    read_only: bool = False

    @classmethod
    def from_flags(
        cls, user: str | None, agent: str | None, allow: list[str] | None = None, read_only: bool = False
    ) -> Access:
        """Build from ``--user``, ``--agent``, ``--allow`` and ``--read-only``."""
        if (user is None) != (agent is None):
            raise ConfigError("give both --user and --agent (or neither, with --allow)")
        namespaces: dict[str, Namespace] = {}
        default = None
        if user is not None and agent is not None:
            pair = check_namespace(user, agent)
            default = namespace_label(*pair)
            namespaces[default] = pair
        for label in allow or []:
            pair = parse_namespace(label)
            namespaces[namespace_label(*pair)] = pair
        if not namespaces:
            raise ConfigError("memkit mcp needs a namespace: --user U --agent A, or --allow U/A (repeatable)")
        return cls(namespaces, choose=bool(allow), default=default, read_only=read_only)

    def resolve(self, label: object) -> Namespace:
        """The namespace a call names (or the bound one); refuses every other."""
        if not self.choose:
            return next(iter(self.namespaces.values()))
        if label is None:
            if self.default is None:
                raise InvalidInputError(f"namespace is required; one of: {', '.join(self.namespaces)}")
            return self.namespaces[self.default]
        if not isinstance(label, str):
            raise InvalidInputError(f"namespace must be a string, got {type(label).__name__}")
        if label not in self.namespaces:
            raise InvalidInputError(
                f"namespace {label!r} is not served here; allowed: {', '.join(self.namespaces)}"
            )
        return self.namespaces[label]


@dataclass(frozen=True)
class _Tool:
    name: str
    description: str
    properties: dict[str, Any]
    required: list[str]
    run: Callable[..., Awaitable[Any]]
    writes: bool = False


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


def _item(item: MemoryItem) -> dict[str, Any]:
    """A memory as a tool returns it; a trace step reads as its summary, not its stored string."""
    data = item.model_dump(mode="json", exclude_none=True)
    data["summary"] = summary(item)
    if is_trace(item):
        del data["content"]
    return data


@dataclass
class McpMemory:
    """The tools and resources of one store, with the namespace policy applied to every call."""

    provider: MemoryProvider
    access: Access
    kv_path: str | None = None
    #: The bounds every tool's arguments are held to (the store's, and the key-value tools').
    limits: Limits = DEFAULT_LIMITS
    tools: dict[str, _Tool] = field(init=False)
    _kv: dict[Namespace, MemoryTools] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        tools = [
            _Tool(
                "remember",
                "Save a memory (a note, a finding, a decision) so it can be recalled later.",
                {"content": {"type": "string", "description": "The text to remember"},
                 "metadata": {"type": "object", "description": 'Optional labels, e.g. {"gene": "TP53"}'}},
                ["content"], self._remember, writes=True,
            ),
            _Tool(
                "recall",
                "Search memory for what is relevant to a query. Returns the best matches, best first, each "
                "with its score and score_details (which retrieval leg found it, at what rank).",
                {"query": {"type": "string", "description": "What to look for; empty lists the newest"},
                 "limit": {"type": "integer", "description": "How many memories to return at most", "default": 5},
                 "mode": {"type": "string", "enum": ["hybrid", "keyword", "semantic"],
                          "description": "Retrieval mode (default: hybrid if the store has an embedder, "
                          "else keyword)"},
                 "filters": _FILTERS_SCHEMA},
                ["query"], self._recall,
            ),
            _Tool(
                "forget",
                "Delete one memory by id. Only a memory of this namespace can be deleted.",
                {"memory_id": {"type": "string", "description": "The id remember or recall returned"}},
                ["memory_id"], self._forget, writes=True,
            ),
            _Tool(
                "list_recent",
                "List memories newest first, a page at a time (use next_offset for the next page).",
                {"limit": {"type": "integer", "description": "Page size", "default": 10},
                 "offset": {"type": "integer", "description": "How many of the newest to skip", "default": 0},
                 "filters": _FILTERS_SCHEMA},
                [], self._list_recent,
            ),
            _Tool(
                "record_step",
                "Record one step of a workflow's execution trace (what ran, with which tool, how it ended).",
                {"workflow_id": {"type": "string", "description": "The workflow (run) the step belongs to"},
                 "step": _STEP_SCHEMA},
                ["workflow_id", "step"], self._record_step, writes=True,
            ),
        ]
        if self.kv_path is not None:
            for definition in MEMORY_TOOL_DEFINITIONS:
                spec = definition["function"]
                params = spec["parameters"]
                tools.append(_Tool(
                    spec["name"], spec["description"], dict(params["properties"]), list(params["required"]),
                    self._kv_call(spec["name"]), writes=spec["name"] in ("write", "delete"),
                ))
        self.tools = {t.name: t for t in tools}

    # -- tools -------------------------------------------------------------------------

    async def _remember(self, ns: Namespace, content: Any, metadata: Any = None) -> dict[str, Any]:
        return {"id": await self.provider.add(content, ns[0], ns[1], metadata)}

    async def _recall(
        self, ns: Namespace, query: Any, limit: Any = 5, mode: Any = None, filters: Any = None
    ) -> dict[str, Any]:
        # The one library call a recall makes, so recording recalls in the library covers MCP too.
        search: Any = self.provider.search
        hits: list[MemoryItem] = await search(query, ns[0], ns[1], limit, filters, mode=mode)
        return {"results": [_item(hit) for hit in hits]}

    async def _forget(self, ns: Namespace, memory_id: Any) -> dict[str, Any]:
        delete: Any = self.provider.delete
        return {"deleted": bool(await delete(memory_id, user_id=ns[0], agent_id=ns[1]))}

    async def _list_recent(
        self, ns: Namespace, limit: Any = 10, offset: Any = 0, filters: Any = None
    ) -> dict[str, Any]:
        if isinstance(self.provider, SupportsPaging):
            items = await self.provider.get_page(ns[0], ns[1], offset=offset, limit=limit, filters=filters)
        elif offset == 0:
            items = await self.provider.get_all(ns[0], ns[1], limit, filters)
        else:
            raise ConfigError(f"{self.provider!r} cannot page; offset must be 0")
        more = isinstance(limit, int) and len(items) == limit
        return {"results": [_item(i) for i in items], "next_offset": offset + len(items) if more else None}

    async def _record_step(self, ns: Namespace, workflow_id: Any, step: Any) -> dict[str, Any]:
        return {"id": await self.provider.add_trace(ns[1], workflow_id, step, ns[0])}

    def _kv_call(self, name: str) -> Callable[..., Awaitable[str]]:
        async def call(ns: Namespace, **arguments: Any) -> str:
            tools = self._kv.get(ns)
            if tools is None:
                assert self.kv_path is not None
                # Each namespace's scratchpad is its own run_id, so namespaces stay apart here too.
                tools = self._kv[ns] = MemoryTools(self.kv_path, run_id=namespace_label(*ns), limits=self.limits)
            result: str = await asyncio.to_thread(getattr(tools, name), **arguments)
            return result

        return call

    # -- dispatch ---------------------------------------------------------------------

    def listed(self) -> list[_Tool]:
        """The tools a client sees: no write tools on a read-only server."""
        return [t for t in self.tools.values() if not (t.writes and self.access.read_only)]

    def input_schema(self, tool: _Tool) -> dict[str, Any]:
        properties = dict(tool.properties)
        required = list(tool.required)
        if self.access.choose:
            properties["namespace"] = {
                "type": "string", "enum": list(self.access.namespaces),
                "description": "Which namespace (user/agent) to use"
                + (f"; default {self.access.default}" if self.access.default else ""),
            }
            if self.access.default is None:
                required.append("namespace")
        return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> Any:
        """Run a tool; raises a :class:`MemkitError` for anything the caller got wrong."""
        tool = self.tools.get(name)
        if tool is None:
            raise InvalidInputError(f"unknown tool {name!r}; tools: {', '.join(t.name for t in self.listed())}")
        if tool.writes and self.access.read_only:
            raise ConfigError(f"{name} is refused: this server is read-only (started with --read-only)")
        args = dict(arguments or {})
        # Only a server with an allow list takes a namespace argument; elsewhere it is an unknown argument.
        ns = self.access.resolve(args.pop("namespace", None) if self.access.choose else None)
        unknown = sorted(set(args) - set(tool.properties))
        if unknown:
            raise InvalidInputError(f"{name} got unknown argument(s) {unknown}; it takes {sorted(tool.properties)}")
        missing = [p for p in tool.required if p not in args]
        if missing:
            raise InvalidInputError(f"{name} needs {', '.join(missing)}")
        return await tool.run(ns, **args)

    # -- resources --------------------------------------------------------------------

    def resource_uris(self) -> list[tuple[str, str]]:
        """``(uri, label)`` of each namespace's recent-memories resource."""
        return [(f"{_URI_PREFIX}{label}/recent", label) for label in self.access.namespaces]

    def workflow_templates(self) -> list[tuple[str, str]]:
        return [(f"{_URI_PREFIX}{label}/workflow/{{workflow_id}}", label) for label in self.access.namespaces]

    async def read(self, uri: str) -> str:
        """The text of a resource: one :func:`memkit._display.summary` line per memory or step."""
        parts = uri.removeprefix(_URI_PREFIX).split("/") if uri.startswith(_URI_PREFIX) else []
        label = "/".join(parts[:2])
        if label not in self.access.namespaces or parts[2:3] not in (["recent"], ["workflow"]):
            raise InvalidInputError(f"no such resource here: {uri!r}")
        user, agent = self.access.namespaces[label]
        if parts[2:] == ["recent"]:
            items = await self.provider.get_all(user, agent, _RECENT_LINES)
            return "\n".join(f"{format_time(i.created_at)}  {i.id}  {summary(i)}" for i in items)
        if len(parts) != 4:
            raise InvalidInputError(f"no such resource here: {uri!r}")
        workflow = unquote(parts[3])
        filters = {"type": "trace", "workflow_id": workflow}
        steps = await self.provider.get_all(user, agent, self.limits.max_limit, filters)
        if not steps:
            raise NotFoundError(f"workflow {workflow!r} has no steps in {label}")

        def order(item: MemoryItem) -> tuple[bool, int, float]:
            index = item.metadata.get("step_index")
            at = item.created_at.timestamp() if item.created_at else 0.0
            if isinstance(index, int) and not isinstance(index, bool):
                return (False, index, at)
            return (True, 0, at)

        return "\n".join(summary(step) for step in sorted(steps, key=order))

    def close(self) -> None:
        for tools in self._kv.values():
            tools.close()


def _error_result(exc: BaseException) -> CallToolResult:
    from mcp_types import CallToolResult, TextContent

    if isinstance(exc, MemkitError):
        category, message = exc.category, str(exc)
    else:
        # Not a refusal memkit meant: keep the server up, say what failed, log the traceback.
        log.error("tool call failed", exc_info=exc)
        category, message = ErrorCategory.STORAGE, f"{type(exc).__name__}: {exc}"
    return CallToolResult(
        content=[TextContent(text=f"{category.value}: {message}")],
        structured_content={"error": {"category": category.value, "message": message}},
        is_error=True,
    )


def build_server(memory: McpMemory) -> Server[Any]:
    """The SDK ``Server`` exposing ``memory``'s tools and resources."""
    try:
        from mcp.server import Server
        from mcp.shared.exceptions import MCPError
        from mcp_types import (
            INVALID_PARAMS,
            CallToolRequestParams,
            CallToolResult,
            ListResourcesResult,
            ListResourceTemplatesResult,
            ListToolsResult,
            PaginatedRequestParams,
            ReadResourceRequestParams,
            ReadResourceResult,
            Resource,
            ResourceTemplate,
            TextContent,
            TextResourceContents,
            Tool,
            ToolAnnotations,
        )
    except ImportError:
        raise missing_extra("mcp", "mcp") from None

    async def list_tools(ctx: Ctx, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[
            Tool(name=t.name, description=t.description, input_schema=memory.input_schema(t),
                 annotations=ToolAnnotations(read_only_hint=not t.writes,
                                             destructive_hint=t.name in ("forget", "delete")))
            for t in memory.listed()
        ])

    async def call_tool(ctx: Ctx, params: CallToolRequestParams) -> CallToolResult:
        try:
            result = await memory.call(params.name, params.arguments)
        except Exception as exc:
            return _error_result(exc)
        if isinstance(result, str):  # the key-value tools answer in words, as in function calling
            return CallToolResult(content=[TextContent(text=result)])
        text = json.dumps(result, ensure_ascii=False)
        return CallToolResult(content=[TextContent(text=text)], structured_content=result)

    async def list_resources(ctx: Ctx, params: PaginatedRequestParams | None) -> ListResourcesResult:
        return ListResourcesResult(resources=[
            Resource(uri=uri, name=f"recent memories of {label}", mime_type="text/plain",
                     description=f"The {_RECENT_LINES} newest memories of {label}, one line each")
            for uri, label in memory.resource_uris()
        ])

    async def list_templates(ctx: Ctx, params: PaginatedRequestParams | None) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[
            ResourceTemplate(uri_template=uri, name=f"workflow steps in {label}", mime_type="text/plain",
                             description="One workflow's trace steps in order, one line each")
            for uri, label in memory.workflow_templates()
        ])

    async def read_resource(ctx: Ctx, params: ReadResourceRequestParams) -> ReadResourceResult:
        try:
            text = await memory.read(str(params.uri))
        except MemkitError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"{exc.category.value}: {exc}") from None
        contents = TextResourceContents(uri=str(params.uri), text=text, mime_type="text/plain")
        return ReadResourceResult(contents=[contents])

    labels = ", ".join(memory.access.namespaces)
    return Server(
        "memkit",
        instructions=f"Long-term memory (memkit) for namespace(s) {labels}"
        + (" (read-only)" if memory.access.read_only else ""),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


# -- stdio: every line answered ------------------------------------------------------------
#
# The SDK's stdio transport drops a line it cannot parse (it hands the server an exception the
# server only logs), so a client that sent one waits forever. Lines are screened here first and
# each one the transport could not take is answered with the JSON-RPC error the protocol names.

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_COLON = re.compile(r"\s*:\s*")
_ENVELOPE_KEYS = ("jsonrpc", "id", "method")


def _outline(text: str) -> tuple[int, dict[str, Any]]:
    """How deep ``text`` nests, and the scalar ``jsonrpc``, ``id`` and ``method`` of its top
    level, read without parsing what is nested (which may be too deep to parse)."""
    depth = deepest = 0
    top: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth -= 1
        elif depth == 1 and (colon := _COLON.match(text, match.end())) is not None:
            key = json.loads(token)
            start = colon.end()
            if key in _ENVELOPE_KEYS and key not in top and text[start:start + 1] not in ("[", "{"):
                with contextlib.suppress(ValueError):
                    top[key] = decoder.raw_decode(text, start)[0]
    return deepest, top


@functools.cache
def _parse_depth() -> int:
    """The deepest nesting the SDK's JSON parser reads (found once, by trying)."""
    from pydantic_core import from_json

    low, high = 1, 100_000
    while low < high:
        middle = (low + high + 1) // 2
        try:
            from_json("[" * middle + "]" * middle)
            low = middle
        except ValueError:
            high = middle - 1
    return low


def _lone_surrogate(value: Any) -> str | None:
    """Where ``value`` holds a string with a lone surrogate, and which (``None``: nowhere)."""
    stack: list[tuple[Any, str]] = [(value, "params")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"{where} holds {node[exc.start:exc.end]!r}"
        elif isinstance(node, dict):
            for key, item in node.items():
                if isinstance(key, str) and _lone_surrogate(key) is not None:
                    return f"a key in {where} holds {key!r}"
                stack.append((item, f"{where}.{key}"))
        elif isinstance(node, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(node))
    return None


def _request_id(value: object) -> str | int | None:
    return value if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)) else None


def screen(line: bytes) -> str | tuple[int, str, str | int | None] | None:
    """One line from the client: the text to pass on, or ``(code, message, id)`` to answer it
    with, or ``None`` for nothing to do (a blank line; a broken notification, which JSON-RPC
    forbids answering)."""
    from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
    from pydantic import ValidationError

    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return PARSE_ERROR, f"Parse error: the line is not UTF-8 (byte {line[exc.start]:#04x} at {exc.start})", None
    if not text.strip():
        return None
    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)
        return text
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
    try:
        value: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        return PARSE_ERROR, f"Parse error: the line is not JSON ({exc.msg} at column {exc.colno})", None
    except RecursionError:
        value = None  # too deep even for Python's parser: the outline still finds the envelope
    depth, top = _outline(text)
    if isinstance(value, dict):
        top = {k: value[k] for k in _ENVELOPE_KEYS if k in value}
    request_id = _request_id(top.get("id"))
    is_request = top.get("jsonrpc") == "2.0" and isinstance(top.get("method"), str)
    if is_request and "id" not in top:
        log.warning("dropped a notification the server cannot read: %s", problem)
        return None
    if not is_request or request_id is None:
        return (INVALID_REQUEST, 'Invalid Request: a JSON-RPC 2.0 request is an object with "jsonrpc": "2.0",'
                f' a string "method" and a string or integer "id" ({problem})', request_id)
    # The envelope is sound, so what the transport could not read is in the params.
    if depth > _parse_depth():
        reason = f"the request is nested {depth} levels deep; the server reads at most {_parse_depth()} levels"
    elif isinstance(value, dict) and (where := _lone_surrogate(value.get("params"))) is not None:
        reason = f"{where}, a lone surrogate, which is not text"
    else:
        reason = problem
    return INVALID_PARAMS, f"Invalid params: {reason}", request_id


class _ClientLines:
    """The client's lines, screened, as the SDK's stdio transport reads them (an async iterable
    of text lines); a refused line is answered on the transport's write stream."""

    def __init__(self) -> None:
        import anyio

        self._lines = anyio.wrap_file(sys.stdin.buffer)
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_on(self, write_stream: Any) -> None:
        self._answers = write_stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        import anyio
        from mcp.shared.message import SessionMessage
        from mcp_types import ErrorData, JSONRPCError

        async for line in self._lines:
            screened = screen(line)
            if screened is None or isinstance(screened, str):
                if screened is not None:
                    yield screened
                continue
            code, message, request_id = screened
            log.warning("answered a line the server cannot read with %d: %s", code, message)
            await self._ready.wait()
            error = JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._answers.send(SessionMessage(error))


@contextlib.asynccontextmanager
async def _stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport (which keeps stray prints off stdout), reading screened lines."""
    from mcp.server.stdio import stdio_server

    lines = _ClientLines()
    async with stdio_server(stdin=cast(Any, lines)) as (read, write):
        lines.answer_on(write)
        yield read, write


def _kv_path(provider: MemoryProvider) -> str | None:
    """The SQLite file the key-value tools share with the store, if the store is one."""
    from memkit.adapters import SQLiteAdapter

    return provider.path if isinstance(provider, SQLiteAdapter) and provider.path != ":memory:" else None


def limits_from_flags(**flags: int | None) -> Limits:
    """:class:`Limits` from ``memkit mcp``'s ``--max-...`` flags (``None``: the default)."""
    given = {name: value for name, value in flags.items() if value is not None}
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInputError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
    try:
        return Limits(**given)
    except TypeError:
        unknown = sorted(set(given) - {f.name for f in dataclasses.fields(Limits)})
        raise InvalidInputError(f"no such limit: {', '.join(unknown)}") from None


async def _serve(url: str | None, access: Access, http_port: int | None, limits: Limits) -> None:
    # The store enforces the limits on what reaches it; the key-value tools get the same ones.
    provider = build_provider({"url": url or default_url(), "limits": limits}, default_url())
    if isinstance(provider, SupportsRecalls):
        # An external agent's reads are what an audit most needs to see, and no step scope
        # reaches across the protocol: a served store records every recall.
        provider.record_recalls = True
    memory = McpMemory(provider, access, kv_path=_kv_path(provider), limits=limits)
    try:
        server = build_server(memory)
        if http_port is None:
            async with _stdio() as (read, write):
                await server.run(read, write, server.create_initialization_options())
        else:
            import uvicorn

            app = server.streamable_http_app(host="127.0.0.1")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", http_port))
            sock.listen(128)  # clients that connect before uvicorn is up wait in the backlog
            port = sock.getsockname()[1]
            print(f"memkit mcp: serving {', '.join(access.namespaces)} at http://127.0.0.1:{port}/mcp",
                  file=sys.stderr, flush=True)
            await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[sock])
    finally:
        memory.close()
        if isinstance(provider, SupportsClose):
            await provider.aclose()


def serve(url: str | None, access: Access, http_port: int | None = None, limits: Limits = DEFAULT_LIMITS) -> None:
    """Serve the store at ``url`` over stdio, or over streamable HTTP on 127.0.0.1:``http_port``,
    every tool's arguments held to ``limits``."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise missing_extra("mcp", "mcp") from None
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how a person stops a server started by hand
        asyncio.run(_serve(url, access, http_port, limits))
