"""Cold first search: the first search of a big namespace in a process that just opened the store.

Run ``python bench/cold.py`` (``--size``, ``--runs``, ``--mode``). The store is built once
(default embedder, so hybrid search needs both the keyword index and the vectors; keyword-only
for ``--mode keyword``), then each
run starts a fresh Python process that opens it and times ``open``, the first search and a
second search. Reported: medians over the runs, in milliseconds, as a table and as JSON
(also written to ``--out``).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import dump, print_table
from bench.run import make_queries, make_varied

_CHILD = """
import sys, time
t0 = time.perf_counter()
from memkit.adapters import SQLiteAdapter
import asyncio
store = SQLiteAdapter(sys.argv[1])
t1 = time.perf_counter()
async def main():
    a = time.perf_counter()
    await store.search(sys.argv[2], "bench", "cold", limit=10, mode=sys.argv[4])
    b = time.perf_counter()
    await store.search(sys.argv[3], "bench", "cold", limit=10, mode=sys.argv[4])
    c = time.perf_counter()
    print(f"{(t1 - t0) * 1e3:.1f} {(b - a) * 1e3:.1f} {(c - b) * 1e3:.1f}")
asyncio.run(main())
store.close()
"""


def build(path: Path, size: int, mode: str) -> list[str]:
    import asyncio

    from memkit.adapters import SQLiteAdapter

    texts = make_varied(size, seed=11)
    store = SQLiteAdapter(path, embedder=None) if mode == "keyword" else SQLiteAdapter(path)

    async def fill() -> None:
        for start in range(0, size, 20_000):
            chunk = texts[start : start + 20_000]
            await store.add_many([{"content": t, "user_id": "bench", "agent_id": "cold", "metadata": m}
                                  for t, m in chunk])
        await store.add("one more in another namespace", "bench", "other")
        # a search in the building process, as an application would have done
        await store.search("kinase", "bench", "cold", mode=mode)

    asyncio.run(fill())
    store.close()
    return make_queries(texts, 64, seed=5)


def run(size: int, runs: int, mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cold.db"
        start = time.perf_counter()
        queries = build(path, size, mode)
        built = time.perf_counter() - start
        samples = _runs(path, queries, runs, mode)
        # The same file without its saved keyword indexes: the first search rebuilds the index
        # from every text (what each new process did before indexes were saved in the file).
        conn = sqlite3.connect(path)
        conn.execute("DELETE FROM keyword_snapshots")
        conn.commit()
        conn.close()
        rebuilt = _runs(path, queries, 1, mode)
    return {
        "size": size, "mode": mode, "runs": runs, "build_s": round(built, 1),
        "open_ms": round(statistics.median(s[0] for s in samples), 1),
        "first_search_ms": round(statistics.median(s[1] for s in samples), 1),
        "second_search_ms": round(statistics.median(s[2] for s in samples), 1),
        "first_search_rebuilding_index_ms": rebuilt[0][1],
    }


def _runs(path: Path, queries: list[str], runs: int, mode: str) -> list[list[float]]:
    samples = []
    for i in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(path), queries[2 * i], queries[2 * i + 1], mode],
            check=True, capture_output=True, text=True,
        ).stdout.split()
        samples.append([float(x) for x in out])
    return samples


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mode", choices=["hybrid", "keyword", "semantic"], default="hybrid")
    parser.add_argument("--out", type=Path, default=Path("bench/results/cold.json"))
    args = parser.parse_args(argv)
    report = run(args.size, args.runs, args.mode)
    print_table([report], list(report))
    print(dump(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(report) + "\n")
    return report


if __name__ == "__main__":
    main()
