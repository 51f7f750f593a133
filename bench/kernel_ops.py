"""Process CPU time per call of the port's everyday operations, to compare two trees of memkit.

Keyword-only SQLite and the in-memory store, one namespace of ``--size`` memories (plus a second
one of the same size): ``add``, ``search``, a filtered ``search``, ``get_all`` and ``get``. Only the
public API is used, so the same script runs against any tree; alternate the trees and take medians:

    for i in 1 2 3; do for t in OLD NEW; do PYTHONPATH=$t python bench/kernel_ops.py; done; done
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from memkit.adapters import InMemoryAdapter, SQLiteAdapter

_WORDS = [f"w{i}" for i in range(3_000)]


def _items(n: int, seed: int, user: str) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [{"content": " ".join(rng.choice(_WORDS) for _ in range(20)), "user_id": user, "agent_id": "a",
             "metadata": {"gene": rng.choice(["TP53", "BRCA2", "EGFR"]), "i": i}} for i in range(n)]


async def _measure(store: Any, size: int, calls: int) -> dict[str, float]:
    await store.add_many(_items(size, 1, "u"))
    await store.add_many(_items(size, 2, "other"))
    rng = random.Random(7)
    queries = [" ".join(rng.choice(_WORDS) for _ in range(3)) for _ in range(calls)]
    ids = [m.id for m in await store.get_all("u", "a", limit=calls)]
    out: dict[str, float] = {}

    async def each(name: str, make: Any) -> None:
        for i in range(min(20, calls)):  # warm up
            await make(i)
        start = time.process_time()
        for i in range(calls):
            await make(i)
        out[name] = (time.process_time() - start) / calls * 1e3

    await each("search", lambda i: store.search(queries[i], "u", "a", limit=5))
    await each("filtered search", lambda i: store.search(queries[i], "u", "a", limit=5, filters={"gene": "TP53"}))
    await each("get_all", lambda i: store.get_all("u", "a", limit=10))
    await each("get", lambda i: store.get(ids[i % len(ids)]))
    await each("add", lambda i: store.add(queries[i], "u", "a", {"i": i}))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    result: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        sqlite = SQLiteAdapter(Path(folder) / "m.db", embedder=None)
        try:
            result["sqlite"] = asyncio.run(_measure(sqlite, args.size, args.calls))
        finally:
            sqlite.close()
    result["memory"] = asyncio.run(_measure(InMemoryAdapter(), args.size, args.calls))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
