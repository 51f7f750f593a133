"""CPU time of one ``add`` on a 10,000-memory namespace (keyword-only SQLite and the in-memory store).

Process CPU time (every thread, so SQLite's worker counts) divided by the number of adds: on a
shared machine this moves far less than wall time. Compare two trees by running it alternately
with ``PYTHONPATH`` pointing at each and take the median of the runs.

    python bench/add_cpu.py --adds 3000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from memkit.adapters import InMemoryAdapter, SQLiteAdapter

_WORDS = [f"w{i}" for i in range(3_000)]


def _texts(n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    genes = ["TP53", "BRCA2", "EGFR"]
    return [(" ".join(rng.choice(_WORDS) for _ in range(20)), {"gene": rng.choice(genes), "i": i}) for i in range(n)]


async def _one(kind: str, tmp: Path, adds: int, size: int) -> tuple[float, float]:
    store: Any = InMemoryAdapter()
    if kind == "sqlite":
        store = SQLiteAdapter(tmp / f"add-{time.monotonic_ns()}.db", embedder=None)
    rows = [{"content": t, "user_id": "bench", "agent_id": "main", "metadata": m} for t, m in _texts(size, 1)]
    await store.add_many(rows)
    extra = _texts(adds + 50, 2)
    for text, meta in extra[:50]:  # warm: the statement cache, the stemmer's words
        await store.add(text, "bench", "main", meta)
    cpu, wall = time.process_time(), time.perf_counter()
    for text, meta in extra[50:]:
        await store.add(text, "bench", "main", meta)
    cpu_ms = (time.process_time() - cpu) / adds * 1_000
    wall_ms = (time.perf_counter() - wall) / adds * 1_000
    if hasattr(store, "aclose"):
        await store.aclose()
    return cpu_ms, wall_ms


async def _main(adds: int, size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("sqlite", "memory"):
            cpu_ms, wall_ms = await _one(kind, Path(tmp), adds, size)
            print(f"{kind:6s} add: {cpu_ms:.4f} ms CPU, {wall_ms:.4f} ms wall per call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=3_000)
    parser.add_argument("--size", type=int, default=10_000)
    args = parser.parse_args()
    asyncio.run(_main(args.adds, args.size))


if __name__ == "__main__":
    main()
