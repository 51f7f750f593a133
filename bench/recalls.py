"""What recording recalls costs a SQLite search: the same queries with recording off and on.

    python bench/recalls.py                          # 10k and 100k memories, keyword and hybrid
    python bench/recalls.py --sizes 10000 --modes keyword

For each store size and mode, the same query list runs in alternating blocks: a block
with recording off, then a block inside a step scope (every search writes a recall with
its hits' text snapshots), ``--rounds`` times. The recall write is queued on the
adapter's worker thread behind the search, so it can slow the *next* search rather than
this one: besides the per-search median (``p50``), the table reports each block's wall
time per search (``block``) and the process's CPU time per search (``cpu``, both threads;
the steadiest figure on a shared machine), both including every queued write, each as
the median over blocks; then the CPU time measured inside recording itself per recorded
search: on the caller's thread (``recording_caller_ms``: capturing the recall, the only part
a search waits for), on the worker (``recording_writer_ms``: encoding and inserting them in
batches, SQLite's own page writes and checkpoints included), their sum (``recording_cpu_ms``),
and that as a share of a search's CPU time with recording off.
Differences of wall times swing by tens of percent on a loaded machine; the last two
columns do not.

    python bench/recalls.py --durable --sizes 10000 --modes keyword

``--durable`` measures what ``durable_recalls=True`` costs instead: blocks of trace steps
(each ``--searches`` recorded searches, then the step stored with ``add_trace``), alternating
durable off and on in one store; per step, the median block's wall and CPU time (queued recall
writes included: a block ends by writing them) and the median time to store the step (the
write that, when durable, carries its recalls).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memkit
import memkit._recall._recording
from bench._util import dump, print_table
from bench.run import make_queries, make_texts
from memkit.adapters._sqlite import SQLiteAdapter

NS = ("bench_user", "bench_agent")


async def build(path: Path, n: int, embedder: object) -> SQLiteAdapter:
    store = SQLiteAdapter(path, embedder=embedder)
    texts = make_texts(n, seed=n)
    rows = [{"content": t, "user_id": NS[0], "agent_id": NS[1], "metadata": m} for t, m in texts]
    for start in range(0, n, 20_000):
        await store.add_many(rows[start : start + 20_000])
    return store


async def block(
    store: SQLiteAdapter, queries: list[str], mode: str, limit: int
) -> tuple[list[float], float, float]:
    """Each search's wall time, and the block's wall and CPU time per search, queued recall writes included."""
    times = []
    start, cpu = time.perf_counter(), time.process_time()
    for query in queries:
        t0 = time.perf_counter()
        await store.search(query, *NS, limit=limit, mode=mode)
        times.append(time.perf_counter() - t0)
    await store.recalls(workflow_id="settle")  # reading recalls writes the queued ones first
    n = len(queries)
    return times, (time.perf_counter() - start) / n, (time.process_time() - cpu) / n


class Meter:
    """CPU time spent inside recording itself (building recalls on the caller, writing them on the worker)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.thread_time() - start

        return timed


async def bench(n: int, mode: str, limit: int, rounds: int, queries_per_block: int, tmp: Path) -> dict[str, Any]:
    store = await build(tmp / f"bench_{n}_{mode}.db", n, None if mode == "keyword" else "default")
    caller, writer = Meter(), Meter()
    record = memkit._recall._recording.record
    memkit._recall._recording.record = caller.wrap(record)
    store._flush_recalls = writer.wrap(store._flush_recalls)  # type: ignore[method-assign]
    queries = make_queries(make_texts(n, seed=n), queries_per_block, seed=7)
    await block(store, queries, mode, limit)  # warm the indexes and caches
    runs: dict[str, tuple[list[float], list[float], list[float]]] = {"off": ([], [], []), "on": ([], [], [])}
    for round_ in range(rounds):
        # Alternate which goes first so drift in the machine's load hits both alike.
        for state in ("on", "off") if round_ % 2 else ("off", "on"):
            scope = memkit.recall_scope("bench", step=f"round {round_}") if state == "on" else contextlib.nullcontext()
            with scope:
                times, wall, cpu = await block(store, queries, mode, limit)
            runs[state][0].extend(times)
            runs[state][1].append(wall)
            runs[state][2].append(cpu)
    recalls = len(await store.recalls())
    await store.aclose()
    memkit._recall._recording.record = record
    row: dict[str, Any] = {"memories": n, "mode": mode, "limit": limit, "searches": 2 * rounds * len(queries),
                           "recalls": recalls}
    for label, index in (("p50", 0), ("block", 1), ("cpu", 2)):
        off, on = statistics.median(runs["off"][index]), statistics.median(runs["on"][index])
        row[f"{label}_off_ms"] = round(off * 1e3, 3)
        row[f"{label}_on_ms"] = round(on * 1e3, 3)
        row[f"{label}_overhead_%"] = round(100 * (on - off) / off, 1)
    recorded = len(runs["on"][0])
    spent = caller.seconds + writer.seconds
    row["recording_caller_ms"] = round(caller.seconds / recorded * 1e3, 3)
    row["recording_writer_ms"] = round(writer.seconds / recorded * 1e3, 3)
    row["recording_cpu_ms"] = round(spent / recorded * 1e3, 3)
    row["recording_%_of_search_cpu"] = round(100 * spent / recorded / statistics.median(runs["off"][2]), 1)
    return row


async def step_block(
    store: SQLiteAdapter, queries: list[str], mode: str, limit: int, searches: int, label: str
) -> tuple[list[float], float, float]:
    """Steps of ``searches`` recorded searches each, then ``add_trace``: each step's store time, and
    the block's wall and CPU time per step, its queued recall writes included."""
    stores = []
    start, cpu = time.perf_counter(), time.process_time()
    steps = len(queries) // searches
    for index in range(steps):
        with memkit.recall_scope("bench", step=f"{label} {index}", step_index=index, run_id=label):
            for query in queries[index * searches : (index + 1) * searches]:
                await store.search(query, *NS, limit=limit, mode=mode)
        t0 = time.perf_counter()
        await store.add_trace(NS[1], "bench", {"step_name": f"{label} {index}", "tool": "search",
                                               "status": "success", "step_index": index, "run_id": label},
                              user_id=NS[0])
        stores.append(time.perf_counter() - t0)
    await store.recalls(workflow_id="settle")  # reading recalls writes the queued ones first
    return stores, (time.perf_counter() - start) / steps, (time.process_time() - cpu) / steps


async def bench_durable(
    n: int, mode: str, limit: int, rounds: int, queries_per_block: int, searches: int, tmp: Path
) -> dict[str, Any]:
    store = await build(tmp / f"durable_{n}_{mode}.db", n, None if mode == "keyword" else "default")
    queries = make_queries(make_texts(n, seed=n), queries_per_block, seed=7)
    await step_block(store, queries, mode, limit, searches, "warm")
    runs: dict[bool, tuple[list[float], list[float], list[float]]] = {False: ([], [], []), True: ([], [], [])}
    for round_ in range(rounds):
        for durable in (True, False) if round_ % 2 else (False, True):
            store.durable_recalls = durable
            stores, wall, cpu = await step_block(store, queries, mode, limit, searches, f"{durable}-{round_}")
            runs[durable][0].extend(stores)
            runs[durable][1].append(wall)
            runs[durable][2].append(cpu)
    await store.aclose()
    row: dict[str, Any] = {"memories": n, "mode": mode, "limit": limit, "searches_per_step": searches,
                           "steps": sum(len(r[0]) for r in runs.values())}
    for label, index in (("store", 0), ("step", 1), ("step_cpu", 2)):
        off, on = statistics.median(runs[False][index]), statistics.median(runs[True][index])
        row[f"{label}_batched_ms"] = round(off * 1e3, 3)
        row[f"{label}_durable_ms"] = round(on * 1e3, 3)
        row[f"{label}_overhead_%"] = round(100 * (on - off) / off, 1)
    return row


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for n in args.sizes:
            for mode in args.modes:
                if args.durable:
                    rows.append(await bench_durable(n, mode, args.limit, args.rounds, args.queries, args.searches,
                                                    Path(folder)))
                else:
                    rows.append(await bench(n, mode, args.limit, args.rounds, args.queries, Path(folder)))
                print(rows[-1], file=sys.stderr)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[10_000, 100_000])
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["keyword", "hybrid"])
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--queries", type=int, default=25, help="queries per block")
    parser.add_argument("--durable", action="store_true",
                        help="measure durable_recalls=True against batched recall writes, per trace step")
    parser.add_argument("--searches", type=int, default=2, help="recorded searches per step (--durable)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = asyncio.run(main_async(args))
    print_table(rows, list(rows[0]))
    text = dump(rows)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
