"""How long ``memkit.frames.traces_frame`` takes to turn N stored trace steps into a DataFrame.

    python bench/frames.py                 # 1,000,000 steps (builds the store once: minutes)
    python bench/frames.py --steps 100000  # quicker

The store is built once with ``add_many`` in ``bench/.cache/`` and reused. Each step has
3 parameters (one a list, the same on every step) and 2 result keys (one a list, unique per
step); 10% of steps fail. Reports the median of
``--repeat`` runs for the SQLite fast path (``trace_columns``) and, for comparison, the
generic ``export()`` path on the in-memory adapter with a tenth of the steps.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import percentiles, time_each
from memkit import frames
from memkit._core._records import trace_record
from memkit.adapters._memory._adapter import InMemoryAdapter
from memkit.adapters._sqlite import SQLiteAdapter

TOOLS = ("blast", "fetch_pdb", "align", "summarize", "search_pubmed")


def steps(start: int, n: int) -> list[dict[str, Any]]:
    items = []
    base = 1.79e9
    for i in range(start, start + n):
        ok = i % 10 != 7
        data = {
            "step_name": f"step_{i % 20}",
            "tool": TOOLS[i % 5],
            "status": "success" if ok else "failed",
            "result": {"hits": i % 7, "ids": [i, i + 1]} if ok else None,
            "error": None if ok else "network timeout",
            "timestamp": base + i * 0.5,
            "parameters": {"query": f"gene{i % 50}", "databases": ["nr", "pdb"], "evalue": 0.001},
            "duration": 0.1 + (i % 10) / 10,
            "retry_count": i % 2,
            "step_index": i % 20,
        }
        record = trace_record(f"agent{i % 3}", f"wf{i // 20}", data, "system")
        items.append({"content": record.content, "user_id": record.user_id, "agent_id": record.agent_id,
                      "metadata": record.metadata})
    return items


async def fill(adapter: Any, n: int) -> None:
    chunk = 50_000
    for start in range(0, n, chunk):
        await adapter.add_many(steps(start, min(chunk, n - start)))


def timed(fn: Any, repeat: int) -> tuple[float, int, float]:
    """Median and slowest of ``repeat`` runs, and the row count."""
    runs, rows = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        rows = len(fn())
        runs.append(time.perf_counter() - start)
    return statistics.median(runs), rows, max(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--writes", type=int, default=2_000, help="single add_trace calls to time")
    args = parser.parse_args()

    cache = Path(__file__).parent / ".cache"
    cache.mkdir(exist_ok=True)
    path = cache / f"frames_{args.steps}_v2.db"  # v2: the step data above
    store = SQLiteAdapter(path, embedder=None)  # measures frames, not embedding
    have = asyncio.run(store.stats()).traces
    if have != args.steps:
        asyncio.run(store.reset())
        start = time.perf_counter()
        asyncio.run(fill(store, args.steps))
        print(f"built {path} with {args.steps:,} steps in {time.perf_counter() - start:.0f} s")

    median, rows, slowest = timed(lambda: frames.traces_frame(store, usage=False), args.repeat)
    print(f"sqlite  traces_frame(usage=False): {rows:,} rows in {median:.2f} s (median of {args.repeat}, "
          f"slowest {slowest:.2f} s)")
    # The usage columns read every step's record once more (its model, tokens, cost in any spelling).
    median, rows, slowest = timed(lambda: frames.traces_frame(store), max(1, args.repeat // 2))
    print(f"sqlite  traces_frame (with usage): {rows:,} rows in {median:.2f} s (slowest {slowest:.2f} s)")
    median, rows, _ = timed(lambda: frames.traces_frame(store, workflow_id="wf7"), args.repeat)
    print(f"sqlite  traces_frame(workflow_id=...): {rows:,} rows in {median * 1e3:.1f} ms")
    store.close()

    # What the trace tables cost each write: single add_trace calls into a fresh file.
    with tempfile.TemporaryDirectory() as tmp:
        fresh = SQLiteAdapter(Path(tmp) / "w.db", embedder=None)
        data = steps(0, args.writes)

        async def write_all() -> list[float]:
            calls = [lambda d=d: fresh.add_trace(d["agent_id"], d["metadata"]["workflow_id"], d["metadata"]["trace"])
                     for d in data]
            return await time_each(calls)

        stats = percentiles(asyncio.run(write_all()))
        fresh.close()
    print(f"sqlite  single add_trace: p50 {stats['p50_ms']:.2f} ms, p95 {stats['p95_ms']:.2f} ms (n={stats['n']})")

    small = args.steps // 10
    memory = InMemoryAdapter()
    asyncio.run(fill(memory, small))
    median, rows, _ = timed(lambda: frames.traces_frame(memory), max(1, args.repeat // 2))
    print(f"memory  traces_frame (generic export path): {rows:,} rows in {median:.2f} s")


if __name__ == "__main__":
    main()
