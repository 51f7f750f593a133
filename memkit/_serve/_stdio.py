"""``memkit mcp`` over stdio: every line a client sends gets an answer.

The SDK's stdio transport drops a line it cannot parse (it hands the server an exception the
server only logs), so a client that sent one waits forever. Lines are screened here first and
each one the transport could not take is answered with the JSON-RPC error the protocol names:
-32700 (not UTF-8, not JSON), -32600 (not a request), -32602 (a lone surrogate, nesting deeper
than the SDK's parser reads), to the request's id; a broken notification is only logged.
A message with an ``id`` member is a request (JSON-RPC), and MCP's ids are strings or integers:
the SDK reads one whose id is null, fractional, boolean or structured as a notification and never
answers it, so it is answered here with -32600 and ``"id": null``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import sys
from collections.abc import AsyncIterator
from typing import Any, cast

__all__ = ["screen", "stdio"]

log = logging.getLogger("memkit.mcp")

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_COLON = re.compile(r"\s*:\s*")
_ENVELOPE_KEYS = ("jsonrpc", "id", "method")
_NESTED = object()


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
            if key in _ENVELOPE_KEYS and key not in top:
                if text[start:start + 1] in ("[", "{"):
                    top[key] = _NESTED  # present, and not a scalar, which is all a reader needs
                else:
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
    from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, JSONRPCNotification, jsonrpc_message_adapter
    from pydantic import ValidationError

    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return PARSE_ERROR, f"Parse error: the line is not UTF-8 (byte {line[exc.start]:#04x} at {exc.start})", None
    if not text.strip():
        return None
    try:
        message = jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"] if exc.errors() else str(exc)
    else:
        if not isinstance(message, JSONRPCNotification) or "id" not in _outline(text)[1]:
            return text
        problem = "its id is neither a string nor an integer"
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
async def stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's stdio transport (which keeps stray prints off stdout), reading screened lines."""
    from mcp.server.stdio import stdio_server

    lines = _ClientLines()
    async with stdio_server(stdin=cast(Any, lines)) as (read, write):
        lines.answer_on(write)
        yield read, write
