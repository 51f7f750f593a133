"""``memkit mcp`` against hostile input: every line gets an answer, and every tool holds to the limits.

The server is the real ``memkit mcp`` process; lines are written to its stdin byte for byte, as a
broken or malicious client would, and its stdout is read as JSON-RPC.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit.tools import MemoryTools

pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install 'memkit[mcp]'")
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

MEMKIT = [sys.executable, "-m", "memkit"]
BOUND = ["--user", "alice", "--agent", "bio"]


class RawClient:
    """Writes raw lines to a ``memkit mcp`` process and reads its answers."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.unmatched: list[dict[str, Any]] = []

    async def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        await self.proc.stdin.drain()

    async def message(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 120)
        assert line, "the server closed its stdout"
        reply: dict[str, Any] = json.loads(line)
        return reply

    async def call(self, request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": name, "arguments": arguments}}
        await self.send(json.dumps(body).encode())
        return await self.message()


@asynccontextmanager
async def raw_server(url: str, *flags: str) -> AsyncIterator[RawClient]:
    proc = await asyncio.create_subprocess_exec(
        *MEMKIT, "--url", url, "mcp", *flags,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, limit=2**26,
    )
    client = RawClient(proc)
    try:
        hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
        await client.send(json.dumps(hello).encode())
        assert "result" in await client.message()
        await client.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        yield client
        assert proc.stdin is not None
        proc.stdin.close()
        assert await asyncio.wait_for(proc.wait(), 60) == 0
        assert proc.stderr is not None
        assert "Traceback" not in (await proc.stderr.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"k": value}
    return value


def _call_line(request_id: int, name: str, arguments_json: str) -> bytes:
    return (f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call",'
            f' "params": {{"name": "{name}", "arguments": {arguments_json}}}}}').encode()


def _error(reply: dict[str, Any], code: int, request_id: int | None) -> str:
    assert reply.get("id", "missing") == request_id, reply
    assert reply["error"]["code"] == code, reply
    message: str = reply["error"]["message"]
    return message


async def test_every_line_gets_the_jsonrpc_error_it_earns_and_the_server_keeps_serving(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/memory.db"
    async with raw_server(url, *BOUND) as client:
        # Not JSON at all, and bytes that are not UTF-8: a parse error, with no id to answer to.
        await client.send(b"this is not json {")
        assert "not JSON" in _error(await client.message(), -32700, None)
        await client.send(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": "\xed\xa0\x80"}')
        assert "not UTF-8" in _error(await client.message(), -32700, None)

        # JSON, but not a JSON-RPC request: invalid request, with the id when there is one.
        await client.send(b'{"jsonrpc": "2.0", "id": 2}')
        _error(await client.message(), -32600, 2)
        await client.send(b"[1, 2, 3]")
        _error(await client.message(), -32600, None)
        await client.send(b'{"jsonrpc": "1.0", "id": "three", "method": "tools/list"}')
        _error(await client.message(), -32600, "three")
        # An id member makes a request (JSON-RPC), and MCP's ids are strings or integers: the SDK
        # took these for notifications and never answered; each is refused, to id null.
        for bad_id in (b"null", b'{"n": 1}', b"1.5", b"true", b"[3]"):
            await client.send(b'{"jsonrpc": "2.0", "id": ' + bad_id + b', "method": "tools/list"}')
            assert "neither a string nor an integer" in _error(await client.message(), -32600, None)
        await client.send(b'{"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": {"name": "remember",'
                          b' "arguments": {"content": "never stored"}}}')
        _error(await client.message(), -32600, None)

        # A sound request whose arguments the transport cannot read: invalid params, to its id.
        await client.send(_call_line(4, "remember", '{"content": "lone \\ud800 surrogate"}'))
        message = _error(await client.message(), -32602, 4)
        assert "params.arguments.content" in message and "lone surrogate" in message
        deep = '{"content": "deep", "metadata": ' + '{"k": ' * 5_000 + '"bottom"' + "}" * 5_000 + "}"
        await client.send(_call_line(5, "remember", deep))
        message = _error(await client.message(), -32602, 5)
        assert "nested 5003 levels deep" in message  # the envelope, params and arguments are 3 more
        await client.send(_call_line(6, "record_step", json.dumps({"workflow_id": "wf", "step": _nested(600)})))
        _error(await client.message(), -32602, 6)

        # A broken notification gets no answer (JSON-RPC forbids one); the next request is answered.
        await client.send(b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "\\ud800"}')
        # Nesting the transport can read reaches memkit, which refuses it as a tool error.
        reply = await client.call(7, "remember", {"content": "nested", "metadata": _nested(50)})
        assert reply["id"] == 7 and reply["result"]["isError"], reply
        assert "nested deeper than 10 levels" in reply["result"]["content"][0]["text"]

        reply = await client.call(8, "remember", {"content": "still serving"})
        assert reply["id"] == 8 and not reply["result"]["isError"], reply
    with memkit.open(url) as mem:
        assert [m.content for m in mem.get_all("alice", "bio")] == ["still serving"]


@asynccontextmanager
async def sdk_client(url: str, *flags: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(command=MEMKIT[0], args=[*MEMKIT[1:], "--url", url, "mcp", *flags])
    async with Client(params) as client:
        yield client


def _refusal(result: CallToolResult) -> str:
    assert result.is_error, result.content
    assert result.structured_content is not None
    assert result.structured_content["error"]["category"] == "invalid_input", result.structured_content
    block = result.content[0]
    assert block.type == "text"
    return block.text


async def test_a_ten_megabyte_value_is_refused_with_the_default_limit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/memory.db"
    huge = "x" * 10_000_000
    async with sdk_client(url, *BOUND) as client:
        assert "the limit is 100000" in _refusal(await client.call_tool("write", {"key": "k", "value": huge}))
        assert "the limit is 100000" in _refusal(await client.call_tool("remember", {"content": huge}))
        listed = await client.call_tool("list", {})
        assert listed.content[0].type == "text" and listed.content[0].text == "No keys stored"
    with memkit.open(url) as mem:
        assert mem.stats().memories == 0


LIMIT_FLAGS = ["--max-content-chars", "50", "--max-id-chars", "20", "--max-metadata-bytes", "200",
               "--max-metadata-depth", "3", "--max-limit", "7", "--max-query-chars", "30"]

# Every tool, each argument past the bound the flags set, and the limit its refusal must name.
PAST_THE_LIMITS: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {"content": "c" * 51}, "the limit is 50"),
    ("remember", {"content": "ok", "metadata": {"notes": "n" * 300}}, "the limit is 200"),
    ("remember", {"content": "ok", "metadata": _nested(4)}, "nested deeper than 3 levels"),
    ("recall", {"query": "q" * 31}, "the limit is 30"),
    ("recall", {"query": "q", "limit": 8}, "between 1 and 7"),
    ("forget", {"memory_id": "m" * 21}, "the limit is 20"),
    ("list_recent", {"limit": 8}, "between 1 and 7"),
    ("record_step", {"workflow_id": "w" * 21, "step": {"tool": "blast"}}, "the limit is 20"),
    ("record_step", {"workflow_id": "wf", "step": {"tool": "blast", "result": {"text": "r" * 300}}},
     "the limit is 200"),
    ("write", {"key": "k", "value": "v" * 51}, "the limit is 50"),
    ("write", {"key": "k" * 21, "value": "v"}, "the limit is 20"),
    ("read", {"key": "k" * 21}, "the limit is 20"),
    ("delete", {"key": "k" * 21}, "the limit is 20"),
    ("pattern_search", {"pattern": "p" * 31}, "the limit is 30"),
]


async def test_the_limits_set_on_the_command_line_hold_for_every_tool(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/memory.db"
    async with sdk_client(url, *BOUND, *LIMIT_FLAGS) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools - {"list"} == {name for name, _, _ in PAST_THE_LIMITS}  # list takes no argument
        for name, arguments, limit in PAST_THE_LIMITS:
            message = _refusal(await client.call_tool(name, arguments))
            assert limit in message, (name, message)
        # Within the limits everything works.
        assert not (await client.call_tool("remember", {"content": "c" * 50})).is_error
        assert not (await client.call_tool("write", {"key": "k" * 20, "value": "v" * 50})).is_error
        assert not (await client.call_tool("recall", {"query": "c", "limit": 7})).is_error
    with memkit.open(url) as mem:
        assert [m.content for m in mem.get_all("alice", "bio")] == ["c" * 50]
    with MemoryTools(str(tmp_path / "memory.db"), "alice/bio") as kv:
        assert kv.list() == "k" * 20


@pytest.mark.parametrize(("flag", "value"), [("--max-content-chars", "0"), ("--max-limit", "-3")])
def test_a_limit_flag_must_be_a_positive_integer(tmp_path: Path, flag: str, value: str) -> None:
    run = subprocess.run([*MEMKIT, "--url", f"sqlite:///{tmp_path}/m.db", "mcp", *BOUND, flag, value],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert run.returncode == 2
    assert f"{flag} must be a positive integer, got {value}" in run.stderr
