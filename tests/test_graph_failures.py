"""Crashes and unreachable servers: clear errors, no half-written traces, no leaked credentials."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

import memkit
from memkit import BackendUnavailableError, ConfigError
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.graph import amemory_graph
from memkit.testing import FalkorDBServer


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _graph_query_running(server: FalkorDBServer) -> bool:
    import redis

    client = redis.Redis(host=server.host, port=server.port, socket_timeout=1)
    try:
        # flag "b": the client is blocked while FalkorDB's writer thread runs its query
        return any(c.get("cmd", "").lower() == "graph.query" and "b" in c.get("flags", "")
                   for c in client.client_list())
    finally:
        client.close()


@pytest.mark.slow
async def test_kill_mid_batch_leaves_no_half_written_trace() -> None:
    server = FalkorDBServer(persistent=True).start()
    try:
        mem = FalkorDBAdapter.from_url(server.url("crash"))
        kept = await mem.add_trace("agent", "wf", {"tool": "fastqc", "step_index": 0, "run_id": "r"}, user_id="u")
        rows = [
            {"content": f"step {i} aligned reads", "user_id": "u", "agent_id": "agent",
             "metadata": {"type": "trace", "workflow_id": "wf", "run_id": "r", "step_index": i + 1,
                          "tool": f"tool-{i % 50}", "gene": f"G{i % 300}", "trace": {"i": i}}}
            for i in range(5_000)
        ]
        batch = asyncio.create_task(mem.add_many(rows))
        deadline = time.monotonic() + 60
        while not await asyncio.to_thread(_graph_query_running, server):
            assert not batch.done(), "the batch finished before the server could be killed; make it bigger"
            assert time.monotonic() < deadline
            await asyncio.sleep(0.005)
        server.kill()
        with pytest.raises(BackendUnavailableError, match=r"FalkorDB at 127\.0\.0\.1:\d+"):
            await batch
        server.restart()  # replays the fsync-always append-only file
        items = await mem.get_all("u", "agent", limit=100)
        assert [i.id for i in items] == [kept]
        graph = await amemory_graph(mem, workflow_id="wf")
        assert graph.node_types() == {"Namespace": 1, "Memory": 1, "Workflow": 1, "Trace": 1, "Step": 1,
                                      "Tool": 1}
        orphans = await mem.dialect.read(
            "MATCH (m:Memory) WHERE m.type = 'trace' OPTIONAL MATCH (s:Step)-[r:RECORDED_AS]->(m)"
            " WITH m, count(r) AS n WHERE n = 0 RETURN count(m) AS n", {})
        assert orphans == [{"n": 0}]
        # and the store works again
        await mem.add_trace("agent", "wf", {"tool": "bwa", "step_index": 1, "run_id": "r"}, user_id="u")
        assert (await mem.stats()).traces == 2
        await mem.aclose()
    finally:
        server.stop()


async def test_unreachable_falkordb_is_a_clear_error_without_the_password() -> None:
    port = _closed_port()
    mem = FalkorDBAdapter.from_url(f"falkordb://:s3cret-pw@127.0.0.1:{port}/g")
    assert "s3cret" not in repr(mem)
    with pytest.raises(BackendUnavailableError) as caught:
        await mem.add("x", "u", "a")
    assert f"127.0.0.1:{port}" in str(caught.value) and "s3cret" not in str(caught.value)
    health = await mem.health()
    assert health.ok is False and "s3cret" not in health.detail
    await mem.aclose()


async def test_neo4j_credentials_from_url_or_env_are_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _closed_port()
    mem = memkit.get_memory_provider({"url": f"neo4j://neo:s3cret-pw@127.0.0.1:{port}/memories", "max_retry_time": 0})
    assert isinstance(mem, Neo4jAdapter)
    assert "s3cret" not in repr(mem) and "neo:" not in repr(mem)
    assert repr(mem) == f"Neo4jAdapter(neo4j://127.0.0.1:{port}/memories)"
    with pytest.raises(BackendUnavailableError) as caught:
        await mem.get_all("u", "a")
    assert "s3cret" not in str(caught.value)
    await mem.aclose()
    monkeypatch.setenv("MEMKIT_NEO4J_USER", "envuser")
    monkeypatch.setenv("MEMKIT_NEO4J_PASSWORD", "env-s3cret")
    for scheme in ("bolt", "neo4j+s", "neo4j"):
        env = memkit.get_memory_provider(f"{scheme}://127.0.0.1:{port}")
        assert isinstance(env, Neo4jAdapter) and "s3cret" not in repr(env)
        await env.aclose()


def test_bad_graph_urls_are_config_errors() -> None:
    for url in ("falkordb://127.0.0.1:notaport/g", "falkordb://127.0.0.1:1/g?colour=red", "neo4j://h:port"):
        with pytest.raises(ConfigError):
            memkit.get_memory_provider(url)
    with pytest.raises(ConfigError):
        FalkorDBAdapter(port=0)


def test_a_server_that_cannot_start_says_why() -> None:
    # The session fixture turns this RuntimeError into a failed run, never a skip.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = FalkorDBServer(port=taken.getsockname()[1], startup_timeout=10)
        with pytest.raises(RuntimeError, match=r"(?s)FalkorDB did not start.*(in use|bind)"):
            server.start()
    assert server.process is None
