"""``memkit mcp`` as a subprocess, driven by the MCP SDK's own client over stdio and streamable HTTP.

Every result is checked against the same SQLite file opened from Python.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit._serve._catalogue import KEY_VALUE_TOOLS
from memkit.tools import MemoryTools

mcp = pytest.importorskip("mcp", reason="the mcp extra is not installed: pip install 'memkit[mcp]'")
from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_types import CallToolResult  # noqa: E402

DOCS = Path(__file__).parent.parent / "docs" / "mcp.md"
MEMKIT = [sys.executable, "-m", "memkit"]
WRITE_TOOLS = {"remember", "forget", "record_step", "write", "delete"}
READ_TOOLS = {"recall", "list_recent", "read", "list", "pattern_search"}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    path = tmp_path / "memory.db"
    yield f"sqlite:///{path}", path


class HttpServer:
    """``memkit mcp --http 0`` in a subprocess; the port it chose is read from its first stderr line."""

    def __init__(self, url: str, *flags: str) -> None:
        self.proc = subprocess.Popen(
            [*MEMKIT, "--url", url, "mcp", *flags, "--http", "0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + 120
        while not any("/mcp" in line for line in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"memkit mcp --http did not start: {''.join(self.lines)}")
            time.sleep(0.05)
        found = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", "".join(self.lines))
        assert found, self.lines
        self.port = int(found.group(1))
        self.endpoint = found.group(0)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=5)


@contextmanager
def http_server(url: str, *flags: str) -> Iterator[HttpServer]:
    server = HttpServer(url, *flags)
    try:
        yield server
    finally:
        server.stop()


@asynccontextmanager
async def connect(transport: str, url: str, *flags: str) -> AsyncIterator[Client]:
    """A connected SDK client of ``memkit --url URL mcp FLAGS`` over ``transport``."""
    if transport == "stdio":
        params = StdioServerParameters(command=MEMKIT[0], args=[*MEMKIT[1:], "--url", url, "mcp", *flags])
        async with Client(params) as client:
            yield client
    else:
        with http_server(url, *flags) as server:
            async with Client(server.endpoint) as client:
                yield client


def ok(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def text(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert block.type == "text"
    return block.text


def refused(result: CallToolResult, category: str) -> str:
    """The message of a tool error, after checking it carries memkit's error ``category``."""
    assert result.is_error, result.content
    assert result.structured_content["error"]["category"] == category, result.structured_content
    message = text(result)
    assert message.startswith(f"{category}: ")
    return message


BOUND = ["--user", "alice", "--agent", "bio"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_every_tool_against_the_store(transport: str, db: tuple[str, Path]) -> None:
    url, path = db
    async with connect(transport, url, *BOUND) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == WRITE_TOOLS | READ_TOOLS
        # The key-value tools are the catalogue's, as function calling offers them: not a copy that could drift.
        for tool in KEY_VALUE_TOOLS:
            spec = tool.definition()["function"]
            assert tools[tool.name].description == spec["description"]
            assert tools[tool.name].input_schema["properties"] == spec["parameters"]["properties"]
        assert tools["recall"].input_schema["required"] == ["query"]
        assert tools["recall"].input_schema["properties"]["mode"]["enum"] == ["hybrid", "keyword", "semantic"]
        assert "namespace" not in tools["recall"].input_schema["properties"]  # bound: nothing to choose
        assert tools["recall"].annotations.read_only_hint and not tools["remember"].annotations.read_only_hint

        saved = ok(await client.call_tool(
            "remember", {"content": "BLAST of TP53 returned 12 homologs", "metadata": {"gene": "TP53", "n": 12}}
        ))
        other = ok(await client.call_tool("remember", {"content": "BRCA2 alignment finished"}))
        with memkit.open(url) as mem:
            stored = mem.get(saved["id"])
            assert stored is not None and stored.content == "BLAST of TP53 returned 12 homologs"
            assert (stored.user_id, stored.agent_id, stored.metadata) == ("alice", "bio", {"gene": "TP53", "n": 12})

        hits = ok(await client.call_tool("recall", {"query": "TP53 homologs", "mode": "keyword", "limit": 5}))
        assert [h["id"] for h in hits["results"]] == [saved["id"]]
        top = hits["results"][0]
        assert top["score"] > 0 and top["score_details"]["mode"] == "keyword"
        assert top["score_details"]["keyword"]["rank"] == 1
        assert top["summary"] == "BLAST of TP53 returned 12 homologs"
        hybrid = ok(await client.call_tool("recall", {"query": "TP53", "filters": {"gene": "TP53"}}))
        assert [h["id"] for h in hybrid["results"]] == [saved["id"]]
        assert set(hybrid["results"][0]["score_details"]["found_by"]) <= {"keyword", "semantic"}

        step = {"step_index": 2, "step_name": "align", "tool": "bwa", "status": "failed",
                "error": "Connection reset by peer", "duration": 2.1, "parameters": {"api_key": "hunter2"}}
        traced = ok(await client.call_tool("record_step", {"workflow_id": "wf-1", "step": step}))
        ok(await client.call_tool("record_step", {"workflow_id": "wf-1", "step": {
            "step_index": 1, "step_name": "fetch", "tool": "pdb", "status": "success", "duration": 0.34}}))
        with memkit.open(url) as mem:
            trace = mem.get(traced["id"])
            assert trace is not None and (trace.user_id, trace.agent_id) == ("alice", "bio")
            assert trace.metadata["type"] == "trace" and trace.metadata["workflow_id"] == "wf-1"
            assert trace.metadata["status"] == "failed" and trace.metadata["tool"] == "bwa"
            assert "hunter2" not in trace.content  # the library's redaction applies to MCP writes too

        page1 = ok(await client.call_tool("list_recent", {"limit": 3}))
        page2 = ok(await client.call_tool("list_recent", {"limit": 3, "offset": page1["next_offset"]}))
        with memkit.open(url) as mem:
            newest_first = [m.id for m in mem.get_all("alice", "bio", limit=10)]
        assert [m["id"] for m in page1["results"] + page2["results"]] == newest_first
        assert page1["next_offset"] == 3 and page2["next_offset"] is None
        step_row = next(m for m in page1["results"] if m["id"] == traced["id"])
        assert "content" not in step_row and step_row["summary"].startswith("step 2 · bwa · align · failed")

        recent = await client.read_resource("memkit://namespace/alice/bio/recent")
        lines = recent.contents[0].text.splitlines()
        assert len(lines) == 4 and traced["id"] in lines[1] and "[trace]" not in recent.contents[0].text
        steps = (await client.read_resource("memkit://namespace/alice/bio/workflow/wf-1")).contents[0].text
        assert steps.splitlines() == [
            "step 1 · pdb · fetch · success · 340 ms",
            'step 2 · bwa · align · failed · 2.1 s · "Connection reset by peer"',
        ]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["memkit://namespace/alice/bio/workflow/{workflow_id}"]

        assert ok(await client.call_tool("forget", {"memory_id": other["id"]})) == {"deleted": True}
        assert ok(await client.call_tool("forget", {"memory_id": other["id"]})) == {"deleted": False}
        with memkit.open(url) as mem:
            assert mem.get(other["id"]) is None and mem.get(saved["id"]) is not None

        assert text(await client.call_tool("write", {"key": "task_status", "value": "in_progress"})) == (
            "Wrote value to key 'task_status'"
        )
        ok(await client.call_tool("write", {"key": "task_owner", "value": "alice"}))
        assert text(await client.call_tool("read", {"key": "task_status"})) == "in_progress"
        assert text(await client.call_tool("list", {})) == "task_status, task_owner"
        assert text(await client.call_tool("pattern_search", {"pattern": "owner"})) == "task_owner"
        assert text(await client.call_tool("delete", {"key": "task_owner"})) == "Deleted key 'task_owner'"
        # The scratchpad is MemoryTools' table in the same file, under the namespace as run_id.
        with MemoryTools(str(path), run_id="alice/bio") as kv:
            assert kv.list() == "task_status" and kv.read("task_status") == "in_progress"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_another_namespace_is_unreachable(transport: str, db: tuple[str, Path]) -> None:
    url, path = db
    with memkit.open(url) as mem:
        secret = mem.add("bob's private plan: TP53 knockout", "bob", "planner", {"gene": "TP53"})
        mem.add_trace("planner", "wf-bob", {"step_index": 1, "tool": "bwa", "status": "success"}, "bob")
    with MemoryTools(str(path), run_id="bob/planner") as kv:
        kv.write("plan", "secret")
    async with connect(transport, url, *BOUND) as client:
        assert ok(await client.call_tool("recall", {"query": "TP53 plan"})) == {"results": []}
        assert ok(await client.call_tool("list_recent", {})) == {"results": [], "next_offset": None}
        assert ok(await client.call_tool("forget", {"memory_id": secret})) == {"deleted": False}
        refused(await client.call_tool("recall", {"query": "TP53", "namespace": "bob/planner"}), "invalid_input")
        assert text(await client.call_tool("read", {"key": "plan"})) == "Error: Key 'plan' not found"
        assert text(await client.call_tool("list", {})) == "No keys stored"
        for uri in ("memkit://namespace/bob/planner/recent", "memkit://namespace/bob/planner/workflow/wf-bob"):
            with pytest.raises(mcp.MCPError, match="invalid_input: no such resource"):
                await client.read_resource(uri)
        uris = [r.uri for r in (await client.list_resources()).resources]
        assert uris == ["memkit://namespace/alice/bio/recent"]
    with memkit.open(url) as mem:
        assert mem.get(secret) is not None


async def test_an_allow_list_lets_a_tool_argument_choose(db: tuple[str, Path]) -> None:
    url, _ = db
    with memkit.open(url) as mem:
        carol = mem.add("carol's note", "carol", "x")
    async with connect("stdio", url, "--allow", "alice/bio", "--allow", "bob/planner") as client:
        schema = {t.name: t for t in (await client.list_tools()).tools}["remember"].input_schema
        assert schema["properties"]["namespace"]["enum"] == ["alice/bio", "bob/planner"]
        assert "namespace" in schema["required"]  # no default: every call says where it goes
        for_alice = ok(await client.call_tool("remember", {"content": "for alice", "namespace": "alice/bio"}))
        for_bob = ok(await client.call_tool("remember", {"content": "for bob", "namespace": "bob/planner"}))
        refused(await client.call_tool("remember", {"content": "nowhere"}), "invalid_input")
        message = refused(await client.call_tool("recall", {"query": "note", "namespace": "carol/x"}), "invalid_input")
        assert "not served here" in message
        refused(await client.call_tool("forget", {"memory_id": carol, "namespace": "carol/x"}), "invalid_input")
        listed = ok(await client.call_tool("list_recent", {"namespace": "bob/planner"}))
        assert [m["id"] for m in listed["results"]] == [for_bob["id"]]
        ok(await client.call_tool("write", {"key": "k", "value": "bob's", "namespace": "bob/planner"}))
        assert text(await client.call_tool("read", {"key": "k", "namespace": "alice/bio"})).startswith("Error:")
    with memkit.open(url) as mem:
        assert mem.get(for_alice["id"]).user_id == "alice"  # type: ignore[union-attr]
        assert mem.get(for_bob["id"]).user_id == "bob"  # type: ignore[union-attr]
        assert mem.get(carol) is not None
        assert {(n.user_id, n.agent_id): n.count for n in mem.namespaces()} == {
            ("alice", "bio"): 1, ("bob", "planner"): 1, ("carol", "x"): 1,
        }


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("remember", {"content": 123}, "invalid_input"),
    ("remember", {"content": "   "}, "invalid_input"),
    ("remember", {"content": "x\u0000y"}, "invalid_input"),
    ("remember", {"content": "x" * 100_001}, "invalid_input"),
    ("remember", {"content": "ok", "metadata": "gene=TP53"}, "invalid_input"),
    ("remember", {"content": "ok", "metadata": {"big": "x" * 300_000}}, "invalid_input"),
    ("remember", {"content": "ok", "metadata": {"n": 2**70}}, "invalid_input"),
    ("remember", {"content": "ok", "metadata": json.loads('{"a":' * 12 + "1" + "}" * 12)}, "invalid_input"),
    ("remember", {"content": "ok", "colour": "red"}, "invalid_input"),
    ("remember", {}, "invalid_input"),
    ("recall", {"query": "x", "limit": 0}, "invalid_input"),
    ("recall", {"query": "x", "limit": "5"}, "invalid_input"),
    ("recall", {"query": "x", "mode": "psychic"}, "invalid_input"),
    ("recall", {"query": "x", "filters": {"gene": {"$regex": ".*"}}}, "invalid_input"),
    ("recall", {"query": ["x"]}, "invalid_input"),
    ("list_recent", {"offset": -1}, "invalid_input"),
    ("forget", {"memory_id": 7}, "invalid_input"),
    ("record_step", {"workflow_id": "wf", "step": "ran bwa"}, "invalid_input"),
    ("record_step", {"workflow_id": "", "step": {}}, "invalid_input"),
    ("record_step", {"workflow_id": "wf\x1b[31m", "step": {}}, "invalid_input"),
    ("write", {"key": 1, "value": "v"}, "invalid_input"),
    ("write", {"key": "k"}, "invalid_input"),
    ("drop_everything", {}, "invalid_input"),
]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_bad_arguments_are_tool_errors_and_store_nothing(transport: str, db: tuple[str, Path]) -> None:
    url, _ = db
    async with connect(transport, url, *BOUND) as client:
        for name, arguments, category in BAD_CALLS:
            refused(await client.call_tool(name, arguments), category)
        # Still serving after every refusal.
        assert ok(await client.call_tool("list_recent", {})) == {"results": [], "next_offset": None}
        assert text(await client.call_tool("list", {})) == "No keys stored"
    with memkit.open(url) as mem:
        assert mem.stats().memories == 0


async def test_read_only_lists_no_write_tool_and_refuses_every_write(db: tuple[str, Path]) -> None:
    url, _ = db
    with memkit.open(url) as mem:
        kept = mem.add("TP53 is mutated in sample 7", "alice", "bio")
    async with connect("stdio", url, *BOUND, "--read-only") as client:
        assert {t.name for t in (await client.list_tools()).tools} == READ_TOOLS
        refused(await client.call_tool("remember", {"content": "sneaky"}), "config")
        message = refused(await client.call_tool("forget", {"memory_id": kept}), "config")
        assert "read-only" in message
        refused(await client.call_tool("record_step", {"workflow_id": "wf", "step": {}}), "config")
        refused(await client.call_tool("write", {"key": "k", "value": "v"}), "config")
        hits = ok(await client.call_tool("recall", {"query": "TP53", "mode": "keyword"}))
        assert [h["id"] for h in hits["results"]] == [kept]
        assert text(await client.call_tool("read", {"key": "k"})) == "Error: Key 'k' not found"
    with memkit.open(url) as mem:
        assert [m.id for m in mem.get_all("alice", "bio")] == [kept]


def _post(port: int, body: dict[str, Any], session: str | None = None) -> bytes:
    """An HTTP request to the MCP endpoint as raw bytes, so a test can hang up whenever it likes."""
    payload = json.dumps(body).encode()
    headers = [
        "POST /mcp HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
        "Accept: application/json, text/event-stream", "MCP-Protocol-Version: 2025-06-18",
        f"Content-Length: {len(payload)}",
    ]
    if session:
        headers.append(f"Mcp-Session-Id: {session}")
    return ("\r\n".join(headers) + "\r\n\r\n").encode() + payload


async def test_the_http_server_survives_a_client_that_hangs_up_mid_call(db: tuple[str, Path]) -> None:
    url, _ = db
    with memkit.open(url) as mem:
        mem.add_many({"content": f"note {i} about TP53 and BRCA2", "user_id": "alice", "agent_id": "bio"}
                     for i in range(2000))
    with http_server(url, *BOUND) as server:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "rude", "version": "0"}}}
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
            sock.sendall(_post(server.port, init))
            reply = sock.recv(65536).decode()
        found = re.search(r"mcp-session-id: (\S+)", reply, flags=re.I)
        assert found, reply
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "recall", "arguments": {"query": "TP53 BRCA2", "limit": 1000}}}
        for _ in range(5):  # hang up right after asking, before any answer
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
                sock.sendall(_post(server.port, call, found.group(1)))
        async with Client(server.endpoint) as client:
            hits = ok(await client.call_tool("recall", {"query": "note 7", "mode": "keyword", "limit": 3}))
            assert hits["results"][0]["content"] == "note 7 about TP53 and BRCA2"
        assert server.proc.poll() is None
    assert server.proc.returncode in (0, -15)  # stopped by the test, not crashed
    assert "Traceback" not in "".join(server.lines)


async def test_the_stdio_server_exits_cleanly_when_its_client_vanishes_mid_call(db: tuple[str, Path]) -> None:
    url, _ = db
    with memkit.open(url) as mem:
        mem.add_many({"content": f"note {i} about TP53", "user_id": "alice", "agent_id": "bio"} for i in range(2000))
    proc = await asyncio.create_subprocess_exec(
        *MEMKIT, "--url", url, "mcp", *BOUND,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    def call(request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}}
        return json.dumps(message).encode() + b"\n"

    async def answer(request_id: int) -> dict[str, Any]:
        while True:
            reply: dict[str, Any] = json.loads(await asyncio.wait_for(proc.stdout.readline(), 120))  # type: ignore[union-attr]
            if reply.get("id") == request_id:
                return reply
            assert "error" in reply, reply  # only a refusal of the hostile message may come first

    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
        proc.stdin.write(json.dumps(hello).encode() + b"\n")
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        assert "result" in await answer(1)
        # A lone surrogate cannot be stored anywhere; it must neither land nor stop the server.
        proc.stdin.write(call(2, "remember", {"content": "lone surrogate \ud800"}))
        proc.stdin.write(call(3, "remember", {"content": "written before the hang-up"}))
        assert not (await answer(3))["result"]["isError"]
        proc.stdin.write(call(4, "recall", {"query": "TP53", "limit": 1000}))
        await proc.stdin.drain()
        proc.stdin.close()  # the client is gone while its call is in flight
        code = await asyncio.wait_for(proc.wait(), 60)
        stderr = (await proc.stderr.read()).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    with memkit.open(url) as mem:
        assert mem.stats().memories == 2001
        assert mem.get_all("alice", "bio", limit=1)[0].content == "written before the hang-up"


def test_the_command_line_refuses_an_unsafe_or_unclear_namespace(db: tuple[str, Path]) -> None:
    url, _ = db
    cases = [
        ([], "needs a namespace"),
        (["--user", "alice"], "both --user and --agent"),
        (["--allow", "alice"], "user/agent"),
        (["--allow", "a/b/c"], "user/agent"),
        (["--user", "alice", "--agent", "bad\x1bid"], "control characters"),
        (["--user", "alice", "--agent", "bio", "--http", "70000"], "between 0 and 65535"),
    ]
    for flags, expected in cases:
        run = subprocess.run([*MEMKIT, "--url", url, "mcp", *flags], capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert run.returncode == 2, (flags, run.stderr)
        assert expected in run.stderr, (flags, run.stderr)


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from memkit._serve._mcp import Access, serve

    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(memkit.BackendUnavailableError, match=r"pip install 'memkit\[mcp\]'"):
        serve("memory://", Access.from_flags("alice", "bio"))


def _docs_block(marker: str, lang: str) -> str:
    docs = DOCS.read_text()
    start = docs.index(marker)
    return re.search(rf"```{lang}\n(.*?)```", docs[start:], flags=re.S).group(1)  # type: ignore[union-attr]


async def test_the_client_config_snippet_starts_a_working_server(db: tuple[str, Path]) -> None:
    config = json.loads(_docs_block("<!-- client config -->", "json"))
    server = config["mcpServers"]["memkit"]
    assert server["command"] == "memkit"
    args = list(server["args"])
    args[args.index("--url") + 1] = db[0]
    async with Client(StdioServerParameters(command=MEMKIT[0], args=[*MEMKIT[1:], *args])) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == WRITE_TOOLS | READ_TOOLS
        saved = ok(await client.call_tool("remember", {"content": "from the config snippet"}))
    with memkit.open(db[0]) as mem:
        item = mem.get(saved["id"])
        assert item is not None and (item.user_id, item.agent_id) == ("alice", "bioinformatics")


def test_the_pydantic_ai_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fastmcp", reason="pydantic-ai's MCP client: pip install 'memkit[agents]'")
    monkeypatch.chdir(tmp_path)
    # The example starts the `memkit` console script; put this interpreter's first on PATH.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{__import__('os').environ['PATH']}")
    code = _docs_block("<!-- pydantic-ai example -->", "python")
    scope: dict[str, Any] = {}
    exec(compile(code, str(DOCS), "exec"), scope)
    output = json.loads(scope["result"].output)
    assert [m["content"] for m in output["list_recent"]["results"]] == ["TP53 is mutated in sample 7"]


def test_the_readme_registers_the_server_as_the_docs_do() -> None:
    readme = (DOCS.parent.parent / "README.md").read_text()
    start = readme.index("<!-- readme-mcp -->")
    snippet = re.search(r"```json\n(.*?)```", readme[start:], flags=re.S).group(1)  # type: ignore[union-attr]
    assert json.loads(snippet) == json.loads(_docs_block("<!-- client config -->", "json"))


async def test_ids_with_a_slash_are_percent_encoded_and_stay_apart(db: tuple[str, Path]) -> None:
    from memkit._serve._mcp import Access, McpMemory

    url, path = db
    access = Access.from_flags(None, None, ["a%2Fb/c", "a/b%2Fc"])
    assert access.namespaces == {"a%2Fb/c": ("a/b", "c"), "a/b%2Fc": ("a", "b/c")}
    provider = memkit.get_memory_provider(url)
    memory = McpMemory(provider, access, kv_path=str(path))
    try:
        step = {"step_index": 1, "tool": "bwa", "status": "success"}
        await memory.call("record_step", {"namespace": "a%2Fb/c", "workflow_id": "wf/1", "step": step})
        await memory.call("write", {"namespace": "a%2Fb/c", "key": "k", "value": "1"})
        assert await memory.call("read", {"namespace": "a/b%2Fc", "key": "k"}) == "Error: Key 'k' not found"
        assert await memory.read("memkit://namespace/a%2Fb/c/workflow/wf%2F1") == "step 1 · bwa · success"
        with pytest.raises(memkit.NotFoundError):
            await memory.read("memkit://namespace/a/b%2Fc/workflow/wf%2F1")
        with pytest.raises(memkit.InvalidInputError):
            await memory.read("memkit://namespace/a/b/c/workflow/wf%2F1")
    finally:
        memory.close()
        await provider.aclose()  # type: ignore[attr-defined]
    with MemoryTools(str(path), run_id="a%2Fb/c") as kv:
        assert kv.read("k") == "1"


async def test_recalls_made_over_mcp_are_recorded_for_the_audit(db: tuple[str, Path]) -> None:
    url, _ = db
    async with connect("stdio", url, *BOUND) as client:
        saved = ok(await client.call_tool("remember", {"content": "BLAST of TP53 returned 12 homologs"}))
        ok(await client.call_tool("recall", {"query": "TP53 homologs", "mode": "keyword", "limit": 3}))
    # The server has exited (and closed the store), so its recalls are in the file.
    from memkit import frames

    with memkit.open(url) as mem:
        rows = frames.recalls_frame(mem, user_id="alice", agent_id="bio")
        assert list(rows["query"]) == ["TP53 homologs"] and list(rows["memory_id"]) == [saved["id"]]
        assert list(rows["rank"]) == [1] and list(rows["mode"]) == ["keyword"]
        assert frames.recalls_frame(mem, user_id="bob", agent_id="bio").empty


async def test_the_workflow_resource_says_which_steps_a_researcher_marked(db: tuple[str, Path]) -> None:
    from memkit._serve._mcp import Access, McpMemory

    url, _ = db
    with memkit.open(url) as mem:
        aligned = mem.add_trace("bio", "wf-1", {"step_index": 1, "tool": "bwa", "status": "success"}, "alice")
        mem.add_trace("bio", "wf-1", {"step_index": 2, "tool": "gatk", "status": "failed"}, "alice")
        mem.mark_step(aligned, good=False, user_id="alice", agent_id="bio", note="wrong reference \u202e genome")
        # bob's step of the same workflow id, marked by bob: never part of alice's resource
        bobs = mem.add_trace("bio", "wf-1", {"step_index": 2, "tool": "gatk", "status": "failed"}, "bob")
        mem.mark_step(bobs, good=True, user_id="bob", agent_id="bio")
    provider = memkit.get_memory_provider(url)
    memory = McpMemory(provider, Access.from_flags(None, None, ["alice/bio", "bob/bio"]))
    try:
        alice = await memory.read("memkit://namespace/alice/bio/workflow/wf-1")
        bob = await memory.read("memkit://namespace/bob/bio/workflow/wf-1")
    finally:
        memory.close()
        await provider.aclose()  # type: ignore[attr-defined]
    assert alice.splitlines() == ['step 1 · bwa · success · marked bad: "wrong reference \\u202e genome"',
                                  "step 2 · gatk · failed"]
    assert bob.splitlines() == ["step 2 · gatk · failed · marked good"]
