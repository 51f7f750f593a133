"""The Neo4j the suite runs on is a real one, and what only Neo4j does: its server, crashes, index checks."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from memkit import BackendUnavailableError, ConfigError
from memkit.adapters import Neo4jAdapter
from memkit.graph import amemory_graph
from memkit.testing import NEO4J_CURRENT, NEO4J_LTS, Neo4jServer


class Ones:
    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), self.dim), self.dim ** -0.5, dtype=np.float32)


async def test_the_server_is_a_real_neo4j(neo4j_uri: str) -> None:
    mem = Neo4jAdapter(neo4j_uri)
    try:
        rows = await mem.dialect.read("CALL dbms.components() YIELD name, versions, edition"
                                      " RETURN name, versions, edition", {})
    finally:
        await mem.aclose()
    # 2025+ also lists its Cypher versions as a component.
    [row] = [r for r in rows if r["name"] != "Cypher"]
    assert row["name"] == "Neo4j Kernel"
    if not os.environ.get("MEMKIT_NEO4J_URI"):
        assert row["versions"] == [os.environ.get("MEMKIT_NEO4J_VERSION") or NEO4J_LTS]
        assert row["edition"] == "community"


async def test_a_vector_index_of_another_dimension_is_a_config_error(neo4j_uri: str) -> None:
    first = Neo4jAdapter(neo4j_uri, embedder=Ones(64))
    await first.reset()
    await first.add("TP53 knockdown", "u", "a")
    await first.aclose()
    other = Neo4jAdapter(neo4j_uri, embedder=Ones(32))
    with pytest.raises(ConfigError, match=r"64-dimensional vector index .* 32-dimensional vectors"):
        await other.add("BRCA1", "u", "a")
    await other.aclose()
    check = Neo4jAdapter(neo4j_uri)
    assert [i.content for i in await check.get_all("u", "a")] == ["TP53 knockdown"]  # nothing was written
    await check.aclose()


def test_without_java_the_server_says_what_to_install() -> None:
    server = Neo4jServer(version=NEO4J_LTS, java="/nonexistent/bin/java")
    with pytest.raises(RuntimeError, match=r"needs Java 17 or newer .* apt-get install openjdk-17-jdk-headless"):
        server.start()
    assert server.process is None


def test_without_maven_an_unbuilt_launcher_says_what_to_install(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "neo4j"
    project.mkdir()
    shutil.copy(Path(__file__).parents[1] / "neo4j" / "pom.xml", project / "pom.xml")
    monkeypatch.setenv("MEMKIT_NEO4J_LAUNCHER", str(project))
    java = shutil.which("java")
    assert java is not None, "Java is not installed: the Neo4j tests need it (apt-get install openjdk-17-jdk-headless)"
    monkeypatch.setenv("PATH", str(tmp_path))  # no mvn on it
    with pytest.raises(RuntimeError, match=r"needs Maven: install it \(Debian: apt-get install maven\)"):
        Neo4jServer(version=NEO4J_LTS, java=java).start()


def test_a_server_that_cannot_start_shows_its_output() -> None:
    server = Neo4jServer(heap="1k", startup_timeout=60)  # the JVM refuses such a heap at once
    with pytest.raises(RuntimeError, match=r"(?s)did not start.*launcher output:.*heap"):
        server.start()
    assert server.process is None and server.log_path is None  # stopped, folder removed


async def _write_running(uri: str) -> bool:
    mem = Neo4jAdapter(uri, max_retry_time=0)
    try:
        rows = await mem.dialect.read("SHOW TRANSACTIONS YIELD currentQuery RETURN currentQuery", {})
    finally:
        await mem.aclose()
    return any("UNWIND $memories" in r["currentQuery"] for r in rows)


@pytest.mark.slow
async def test_kill_mid_batch_leaves_no_half_written_trace() -> None:
    server = Neo4jServer().start()
    try:
        mem = Neo4jAdapter(server.url, max_retry_time=2)
        kept = await mem.add_trace("agent", "wf", {"tool": "fastqc", "step_index": 0, "run_id": "r"}, user_id="u")
        rows = [
            {"content": f"step {i} aligned reads", "user_id": "u", "agent_id": "agent",
             "metadata": {"type": "trace", "workflow_id": "wf", "run_id": "r", "step_index": i + 1,
                          "tool": f"tool-{i % 50}", "gene": f"G{i % 300}", "trace": {"i": i}}}
            for i in range(5_000)
        ]
        batch = asyncio.create_task(mem.add_many(rows))
        deadline = time.monotonic() + 120
        while not await _write_running(server.url):
            assert not batch.done(), "the batch finished before the server could be killed; make it bigger"
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        server.kill()
        with pytest.raises(BackendUnavailableError, match=r"Neo4j at bolt://127\.0\.0\.1:\d+/ is unreachable"):
            await batch
        server.restart()  # recovers from its transaction log
        items = await mem.get_all("u", "agent", limit=100)
        assert [i.id for i in items] == [kept]
        graph = await amemory_graph(mem, workflow_id="wf")
        assert graph.node_types() == {"Namespace": 1, "Memory": 1, "Workflow": 1, "Trace": 1, "Step": 1,
                                      "Tool": 1}
        orphans = await mem.dialect.read(
            "MATCH (m:Memory) WHERE m.type = 'trace' OPTIONAL MATCH (s:Step)-[r:RECORDED_AS]->(m)"
            " WITH m, count(r) AS n WHERE n = 0 RETURN count(m) AS n", {})
        assert orphans == [{"n": 0}]
        await mem.add_trace("agent", "wf", {"tool": "bwa", "step_index": 1, "run_id": "r"}, user_id="u")
        assert (await mem.stats()).traces == 2
        await mem.aclose()
    finally:
        server.stop()


def test_the_versions_agree_across_pom_makefile_and_server() -> None:
    root = Path(__file__).parents[1]
    pom = (root / "neo4j" / "pom.xml").read_text()
    assert f"<neo4j.version>{NEO4J_LTS}</neo4j.version>" in pom.split("<profiles>")[0]
    assert f"<neo4j.version>{NEO4J_CURRENT}</neo4j.version>" in pom.split("<profiles>")[1]
    assert f"NEO4J_JAR := neo4j/target/{NEO4J_LTS}/memkit-neo4j.jar" in (root / "Makefile").read_text()
