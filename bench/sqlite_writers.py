"""Several writer processes into ONE SQLite file and one namespace, then searches from a fresh process.

    python bench/sqlite_writers.py                              # 4 writers x 25k memories
    python bench/sqlite_writers.py --writers 4 --each 250000    # the million
    PYTHONPATH=/path/to/other/checkout python bench/sqlite_writers.py --out other.json
                                                                # another memkit (the bench's own
                                                                # repository is only a fallback)

What a pool of agent workers does to one ``memkit.db``: ``--writers`` processes (spawned) each
write ``--each`` notes (bench/run.py's Zipf corpus, their own seed) in ``add_many`` batches of
``--batch`` with the default embedder, into the same namespace, starting together; each then
closes its store, which is where a writer may save the namespace's search snapshots for the next
process. Per writer: ingest seconds, RSS before closing, close seconds (wall and CPU) and the
process's peak RSS. Then one fresh process opens the file: its first search (what the snapshots
left behind save it) and p50/p95 per mode over ``--queries`` queries after one warm-up pass. The
load average is printed beside each phase (the machine is shared: compare runs alternated).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Appended, not inserted: a memkit on PYTHONPATH (a baseline checkout) wins over this repository's.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from bench._util import dump, load_average
from bench.postgres import searches
from bench.run import make_queries, make_varied


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _write(args: tuple[str, int, int, int, float]) -> dict[str, Any]:
    """One writer: its notes (made before ``go``, a wall-clock time at which all writers start), written
    in batches; then its close, timed on its own."""
    import memkit

    url, me, each, batch, go = args
    texts = make_varied(each, seed=1000 + me)
    mem = memkit.open(url)
    time.sleep(max(0.0, go - time.time()))
    start, cpu = time.time(), time.process_time()
    for at in range(0, len(texts), batch):
        mem.add_many([{"content": t, "user_id": "lab", "agent_id": "bio", "metadata": {**m, "w": me}}
                      for t, m in texts[at : at + batch]])
    written, ingest_cpu = time.time(), time.process_time() - cpu
    rss = _rss_mb()
    cpu = time.process_time()
    mem.close()
    done = time.time()
    return {"writer": me, "start": start, "written": written, "closed": done,
            "ingest_s": round(written - start, 1), "ingest_cpu_s": round(ingest_cpu, 1),
            "rss_before_close_mb": rss, "close_s": round(done - written, 1),
            "close_cpu_s": round(time.process_time() - cpu, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _lags(path: str) -> dict[str, int]:
    """How many of the namespace's memories each saved snapshot lacks (all of them if none was saved)."""
    conn = sqlite3.connect(path)
    try:
        total = conn.execute("SELECT count(*) FROM memories WHERE user_id = 'lab' AND agent_id = 'bio'").fetchone()[0]
        out = {"memories": total}
        for table in ("keyword_snapshots", "vector_snapshots"):
            row = conn.execute(f"SELECT seq FROM {table} WHERE user_id = 'lab' AND agent_id = 'bio'").fetchone()  # noqa: S608
            seq = row[0] if row else 0
            out[f"{table}_lag"] = conn.execute(
                "SELECT count(*) FROM memories WHERE user_id = 'lab' AND agent_id = 'bio' AND seq > ?", (seq,)
            ).fetchone()[0]
        return out
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--each", type=int, default=25_000, help="memories each writer adds")
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--dir", default=None, help="folder for the store (a temporary one by default)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import memkit

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = f"{tmp}/writers.db"
        url = f"sqlite:///{path}"
        memkit.open(url).close()  # the schema and the embedder's record exist before the race
        go = time.time() + 15 + 3 * args.writers  # time for every writer to start and make its notes
        result: dict[str, Any] = {"memkit": str(Path(memkit.__file__).parent), "writers": args.writers,
                                  "each": args.each, "load_before": load_average()}
        with multiprocessing.get_context("spawn").Pool(args.writers) as pool:
            rows = pool.map(_write, [(url, me, args.each, args.batch, go) for me in range(args.writers)])
        first = min(r["start"] for r in rows)
        last_written = max(r["written"] for r in rows)
        n = args.writers * args.each
        result["ingest_per_s"] = round(n / (last_written - first))
        result["all_closed_s"] = round(max(r["closed"] for r in rows) - first, 1)
        result["load_after_writers"] = load_average()
        result["per_writer"] = [{k: v for k, v in r.items() if k not in ("start", "written", "closed")}
                                for r in rows]
        result["snapshots"] = _lags(path)
        result["file_mb"] = round(os.path.getsize(path) / 2**20)
        queries = make_queries(make_varied(2_000, seed=1000), args.queries, seed=7)
        result["search"] = asyncio.run(searches(url, queries, {}))
        result["snapshots_after_search"] = _lags(path)
    print(dump(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
