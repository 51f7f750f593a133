"""Every Cypher statement the Neo4j dialect can send, checked by Neo4j's own parser.

``@neo4j-cypher/language-support`` (installed by ``make test`` under tests/cypher/)
parses each statement and checks every function and procedure against Neo4j 5's
registry, in a second, without a server. The statements come from the code
(``Dialect.statements()``), and recording runs on a real FalkorDB and a real Neo4j
prove that list covers everything the adapters actually send.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.adapters._graph._store import GraphAdapter
from memkit.adapters._neo4j._adapter import Neo4jDialect
from memkit.testing import FalkorDBServer

LINT_DIR = Path(__file__).parent / "cypher"


def lint(statements: list[str]) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node.js is not installed: the Cypher lint needs it (apt-get install nodejs)")
    if not (LINT_DIR / "node_modules" / "@neo4j-cypher" / "language-support").exists():
        pytest.fail("the Cypher linter is not installed: run `make install-test` (npm ci in tests/cypher)")
    done = subprocess.run(
        [node, str(LINT_DIR / "lint.cjs")], input=json.dumps(statements), capture_output=True,
        text=True, cwd=LINT_DIR, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    report: list[dict[str, Any]] = json.loads(done.stdout)
    return report


def test_the_linter_catches_errors() -> None:
    report = lint(["MATCH (n RETURN n", "RETURN nosuchfunction(1)", "CALL db.idx.fulltext.queryNodes('M', $q)",
                   "RETURN vecf32([1.0])", "MATCH (n:Memory {id: $id}) RETURN n.id"])
    assert [bool(r["errors"]) for r in report] == [True, True, True, True, False]


def test_every_neo4j_statement_is_valid_cypher_5() -> None:
    statements = Neo4jDialect("neo4j://localhost:7687", None, None, None).statements()
    assert len(statements) >= 20
    report = lint(statements)
    failures = [(statements[r["index"]], r["errors"]) for r in report if r["errors"]]
    assert not failures, "\n\n".join(f"{query}\n-> {errors}" for query, errors in failures)


class OnesEmbedder:
    """Enough of an embedder to make the adapter send its vector statements.

    64 dimensions like the vector tests' embedder: a Neo4j database has one vector index.
    """

    dim = 64

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.full((len(texts), self.dim), self.dim ** -0.5, dtype=np.float32)


@pytest.mark.parametrize("backend", ["falkordb", "neo4j"])
async def test_statements_list_covers_what_the_adapter_sends(request: pytest.FixtureRequest, backend: str) -> None:
    sent: list[str] = []
    mem: GraphAdapter
    if backend == "neo4j":
        mem = Neo4jAdapter(request.getfixturevalue("neo4j_uri"), embedder=OnesEmbedder())
        assert isinstance(mem.dialect, Neo4jDialect)
        run = mem.dialect._session_run

        # Every statement the Neo4j dialect sends, schema included, goes through _session_run.
        async def record_run(statements: Any, write: bool, limit: float | None = None) -> list[list[dict[str, Any]]]:
            sent.extend(q for q, _ in statements)
            return await run(statements, write, limit)

        mem.dialect._session_run = record_run  # type: ignore[method-assign]
        await mem.reset()
    else:
        server: FalkorDBServer = request.getfixturevalue("falkordb_server")
        mem = FalkorDBAdapter.from_url(server.url(f"record-{uuid.uuid4().hex[:8]}"))
        dialect = mem.dialect
        read, write = dialect.read, dialect.write

        async def record_read(query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
            sent.append(query)
            return await read(query, params)

        async def record_write(statements: Any) -> list[list[dict[str, Any]]]:
            sent.extend(q for q, _ in statements)
            return await write(statements)

        dialect.read = record_read  # type: ignore[method-assign]
        dialect.write = record_write  # type: ignore[method-assign]
    dialect = mem.dialect
    try:
        a = await mem.add("TP53 knockdown in HeLa", "u", "a", {"gene": "TP53"})
        t = await mem.add_trace("a", "wf", {"tool": "blast", "step_index": 0}, user_id="u")
        await mem.add_many([{"content": "more", "user_id": "u", "agent_id": "a"}])
        await mem.search("TP53", "u", "a")
        if backend == "neo4j":
            await mem.search("TP53", "u", "a", mode="keyword")
            await mem.search("TP53", "u", "a", mode="semantic")
        await mem.search("", "u", "a", filters={"gene": "TP53"})
        await mem.get_page("u", "a", offset=1, limit=2)
        await mem.get(a)
        await mem.namespaces()
        await mem.stats()
        await mem.health()
        _ = [i async for i in mem.export()]
        await mem.neighbours(a)
        await mem.graph(user_id="u")
        await mem.delete(t)
        await mem.delete(a, user_id="u", agent_id="a")
        await mem.reset()
    finally:
        await mem.aclose()
    known = {*dialect.statements(), *dialect.vector_schema_statements(OnesEmbedder.dim)}
    unknown = [q for q in sent if q not in known]
    assert not unknown, unknown
    assert len(set(sent)) >= 15
