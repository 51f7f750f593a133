"""The same retrieval quality on every backend: LoCoMo dev through SQLite, FalkorDB and Neo4j.

All five dev conversations share one graph (five namespaces), so a dense leg that ranked the
whole graph and filtered the namespace afterwards would return fewer and worse namespace hits
than SQLite's; every mode must score within 0.02 of SQLite on every metric.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from test_graph_recalls import _drop_neo4j_vector_index

from memkit.adapters import FalkorDBAdapter, Neo4jAdapter, SQLiteAdapter
from memkit.testing import FalkorDBServer

ROOT = Path(__file__).resolve().parents[1]
MODES = ("hybrid", "keyword", "semantic")
METRICS = ("recall@5", "recall@10", "mrr@10")


def _harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_retrieval", ROOT / "bench" / "retrieval.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _dev_conversations(harness: ModuleType) -> list[Any]:
    data = Path(harness.DEFAULT_DATA)
    if not data.exists():
        pytest.skip(f"LoCoMo dev (CC BY-NC 4.0) is read from {data} and never shipped in the repository")
    return list(harness.load_locomo(data))


async def _scores(harness: ModuleType, mem: Any, conversations: list[Any]) -> dict[str, Any]:
    try:
        return dict((await harness.evaluate(mem, conversations, MODES))["modes"])
    finally:
        await mem.reset()
        await mem.aclose()


@pytest.mark.slow
async def test_every_backend_scores_locomo_dev_like_sqlite(
    tmp_path: Path, falkordb_server: FalkorDBServer, neo4j_uri: str
) -> None:
    harness = _harness()
    conversations = _dev_conversations(harness)
    assert sum(len(c.questions) for c in conversations) == 759
    await _drop_neo4j_vector_index(neo4j_uri)  # other tests leave one of their small embedders' dimension
    try:
        reference = await _scores(harness, SQLiteAdapter(tmp_path / "dev.db", embedder="default"), conversations)
        neo4j = Neo4jAdapter(neo4j_uri, embedder="default")
        await neo4j.reset()
        scored = {
            "falkordb": await _scores(harness, FalkorDBAdapter.from_url(
                falkordb_server.url(f"dev-{uuid.uuid4().hex[:8]}"), embedder="default"), conversations),
            "neo4j": await _scores(harness, neo4j, conversations),
        }
    finally:
        await _drop_neo4j_vector_index(neo4j_uri)
    # the default hybrid search is the documented one, not a degenerate run
    assert reference["hybrid"]["overall"]["recall@10"] >= 0.74
    for backend, modes in scored.items():
        for mode in MODES:
            for metric in METRICS:
                got, want = modes[mode]["overall"][metric], reference[mode]["overall"][metric]
                assert got == pytest.approx(want, abs=0.02), (backend, mode, metric, got, want)
