"""bench/peers.py's smoke run: the harness drives memkit and LangGraph's own stores through the
same calls, each on a fresh database, and both answer the same listing questions; Mem0 through the
port. Timings are not asserted (they belong to the benchmark, not the suite). Phoenix, the otlp
comparison's peer, lives in a venv of its own that only `make bench-peers` builds (850 MB), so the
suite does not start it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import peers
from memkit.testing import PostgresServer


@pytest.mark.slow
def test_quick_run_covers_every_operation_on_every_backend(tmp_path: Path, postgres_server: PostgresServer) -> None:
    out = tmp_path / "peers.json"
    backends = [*peers.LANGGRAPH, "mem0"]
    assert peers.main(["--quick", "--backends", *backends, "--pg-url", postgres_server.url("peers_admin"),
                       "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    seen = {(row["backend"], row["operation"]) for row in result["rows"]}
    assert seen == {(b, op) for b in backends for op, _ in peers.OPERATIONS[b]}
    for row in result["rows"]:
        if row["operation"] in {"file_mb"} and row["backend"] == "memory":
            continue
        assert row["memkit"] > 0 and row["peer"] > 0, row
    # the same questions get the same answers on both sides: 300 items over 50 namespaces list 6 each
    assert result["checks"]["mem0/100/memkit"] == result["checks"]["mem0/100/peer"] == [{"listed": 10}]
    for backend in peers.LANGGRAPH:
        mine = result["checks"][f"{backend}/300/memkit"]
        theirs = result["checks"][f"{backend}/300/peer"]
        assert mine == theirs == [{"list10": 6, "namespaces": 50}]


def test_table_goes_between_the_readme_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nbefore\n{peers.MARK_START}\nold table\n{peers.MARK_END}\nafter\n")
    result = {"parts": [{"what": "sqlite", "rounds": 3, "samples": 100, "load": "1.0 1.0 1.0"}], "rows": [
        {"backend": "sqlite", "size": 100_000, "operation": "get", "what": "get one item, ms",
         "memkit": 0.5, "peer": 0.25, "ratio": 2.0, "memkit_p95": 1.0, "peer_p95": 0.5, "cpu_ratio": 1.5},
    ]}
    peers.write_readme(peers.table(result), readme)
    body = readme.read_text()
    assert "old table" not in body and "before" in body and "after" in body
    assert "| sqlite | 100,000 | get one item, ms | 0.50 | 0.25 | 2.00 | 1.00 / 0.50 | 1.50 |" in body
    assert "Ratio is memkit / peer" in body


def test_runs_made_apart_merge_into_one_table_in_backend_order(tmp_path: Path) -> None:
    def saved(name: str, backend: str, size: int, load: str) -> Path:
        path = tmp_path / name
        path.write_text(json.dumps({
            "parts": [{"what": backend, "rounds": 1, "samples": 10, "load": load}],
            "checks": {f"{backend}/{size}/memkit": [{}]},
            "rows": [{"backend": backend, "size": size, "operation": "get", "what": "get one item, ms",
                      "memkit": 1.0, "peer": 2.0, "ratio": 0.5}],
        }))
        return path

    readme = tmp_path / "README.md"
    readme.write_text(f"{peers.MARK_START}\n{peers.MARK_END}\n")
    parts = [saved("otlp.json", "otlp", 100_000, "9.0 9.0 9.0"), saved("sqlite.json", "sqlite", 10_000, "2.0 2.0 2.0")]
    assert peers.main(["--merge", *map(str, parts), "--readme", str(readme), "--write-readme"]) == 0
    body = readme.read_text()
    assert body.index("| sqlite | 10,000 |") < body.index("| otlp | 100,000 |")
    assert "otlp at 100,000: 1 alternated round, 10 calls a latency, load average at the end 9.0 9.0 9.0" in body
    assert "sqlite at 10,000: 1 alternated round" in body
