"""``memkit mcp``: one memkit store served to any Model Context Protocol client.

The server is built on the official ``mcp`` SDK's low-level ``Server`` so that each
tool's JSON schema is the one declared in the tool catalogue (:mod:`memkit._serve._catalogue`),
and so that arguments reach the library untouched: memkit validates them exactly as it validates a Python caller,
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
import json
import logging
import socket
import sys
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from memkit._core._errors import (
    ConfigError,
    ErrorCategory,
    InvalidInputError,
    MemkitError,
    NotFoundError,
    missing_extra,
)
from memkit._core._models import MemoryItem
from memkit._core._port import MemoryProvider, SupportsClose, SupportsMarks, SupportsRecalls
from memkit._core._recalls import Mark
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_namespace
from memkit._display import format_time, printable, shorten, summary
from memkit._serve._catalogue import KEY_VALUE_TOOLS, MCP_TOOLS, Namespace, Tool
from memkit._serve._kv import MemoryTools, kv_path
from memkit._serve._stdio import stdio
from memkit.store._registry import build_provider, default_url

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext
    from mcp_types import CallToolResult

    Ctx = ServerRequestContext[Any]

__all__ = ["Access", "McpMemory", "limits_from_flags", "namespace_label", "parse_namespace", "serve"]

log = logging.getLogger("memkit.mcp")

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


@dataclass
class McpMemory:
    """The tools and resources of one store, with the namespace policy applied to every call."""

    provider: MemoryProvider
    access: Access
    kv_path: str | None = None
    #: The bounds every tool's arguments are held to (the store's, and the key-value tools').
    limits: Limits = DEFAULT_LIMITS
    tools: dict[str, Tool[Any]] = field(init=False)
    _kv: dict[Namespace, MemoryTools] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        tools: list[Tool[Any]] = list(MCP_TOOLS)
        if self.kv_path is not None:
            tools += KEY_VALUE_TOOLS
        self.tools = {t.name: t for t in tools}

    def _kv_call(self, tool: Tool[Any], ns: Namespace, arguments: dict[str, Any]) -> Awaitable[str]:
        tools = self._kv.get(ns)
        if tools is None:
            assert self.kv_path is not None
            # Each namespace's scratchpad is its own run_id, so namespaces stay apart here too.
            tools = self._kv[ns] = MemoryTools(self.kv_path, run_id=namespace_label(*ns), limits=self.limits)
            tools._refusals_as_text = False  # an MCP client reads a refusal as a tool error
        assert tool.method is not None
        return asyncio.to_thread(tool.method(tools), **arguments)

    # -- dispatch ---------------------------------------------------------------------

    def listed(self) -> list[Tool[Any]]:
        """The tools a client sees: no write tools on a read-only server."""
        return [t for t in self.tools.values() if not (t.writes and self.access.read_only)]

    def input_schema(self, tool: Tool[Any]) -> dict[str, Any]:
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
        if tool.run is None:
            return await self._kv_call(tool, ns, args)
        return await tool.run(self.provider, ns, **args)

    # -- resources --------------------------------------------------------------------

    def resource_uris(self) -> list[tuple[str, str]]:
        """``(uri, label)`` of each namespace's recent-memories resource."""
        return [(f"{_URI_PREFIX}{label}/recent", label) for label in self.access.namespaces]

    def workflow_templates(self) -> list[tuple[str, str]]:
        return [(f"{_URI_PREFIX}{label}/workflow/{{workflow_id}}", label) for label in self.access.namespaces]

    async def read(self, uri: str) -> str:
        """The text of a resource: one :func:`memkit._display.summary` line per memory or step (a step
        a researcher marked good or bad says so, with the note)."""
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

        verdicts: dict[str, Mark] = {}
        if isinstance(self.provider, SupportsMarks):
            verdicts = {m.step_id: m for m in await self.provider.marks(user_id=user, agent_id=agent,
                                                                         workflow_id=workflow)
                        if m.step_id is not None}
        return "\n".join(summary(step) + _verdict(verdicts.get(step.id)) for step in sorted(steps, key=order))

    def close(self) -> None:
        for tools in self._kv.values():
            tools.close()


def _verdict(mark: Mark | None) -> str:
    if mark is None:
        return ""
    note = f': "{printable(shorten(mark.note, 200))}"' if mark.note else ""
    return f" · marked {mark.label.replace('_', ' ')}{note}"


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
                                             destructive_hint=t.destructive))
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
    memory = McpMemory(provider, access, kv_path=kv_path(provider), limits=limits)
    try:
        server = build_server(memory)
        if http_port is None:
            async with stdio() as (read, write):
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
