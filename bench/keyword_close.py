"""Closing a SQLite store after a bulk import: CPU µs a memory, median of several rounds.

    python bench/keyword_close.py                       # 100k OTel spans, 3 rounds, keyword-only
    python bench/keyword_close.py --spans 20000 --rounds 5 --flavour all

A store that has just taken a bulk write builds its namespace's keyword index when it closes and
saves it in the file, so that the next process's first search loads it instead of analysing every
memory again (the vector index too, with an embedder). A researcher running ``memkit import`` waits
for that close as much as for the import.

The store is made once: the span file of bench/otel_import.py (the real OTel SDK's spans, 50 a
trace) imported with ``import_otlp`` and closed. Each round then copies that file, deletes its saved
indexes (as they are right after an import), opens the copy, adds one memory to the namespace (the
store saves only the namespaces its handle wrote) and times ``close()``: reading every memory's
text, analysing it, building the BM25 postings, packing and writing the index. Reported: the
median by this process's CPU time (all threads) and by wall time, per memory, the saved keyword
index's size, and the load average when the flavour ended (2 cores, shared).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memkit
from bench._util import dump, print_table
from bench.otel_import import make_file
from memkit.otel import import_otlp


def close_once(made: Path, work: Path, query: str) -> tuple[float, float, int]:
    """CPU and wall seconds of one close that builds and saves the indexes, and the keyword blob's size."""
    shutil.copyfile(made, work)
    with sqlite3.connect(work) as db:
        db.execute("DELETE FROM keyword_snapshots")
        db.execute("DELETE FROM vector_snapshots")
    db.close()
    mem = memkit.open(f"sqlite:///{work}{query}")
    mem.add("one more step after the import", "bench", "agent")
    cpu, wall = time.process_time(), time.perf_counter()
    mem.close()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    with sqlite3.connect(work) as db:
        (size,) = db.execute("SELECT coalesce(sum(length(data)), 0) FROM keyword_snapshots").fetchone()
    db.close()
    work.unlink()
    return cpu, wall, int(size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flavour", choices=("all", "keyword-only"), default="keyword-only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        spans = Path(tmp) / "spans.otlp.json"
        n = make_file(spans, args.spans)
        flavours = (("keyword-only", "?embedder=none"), ("default embedder", ""))
        for flavour, query in flavours if args.flavour == "all" else flavours[:1]:
            made = Path(tmp) / f"made-{flavour[:3]}.db"
            mem = memkit.open(f"sqlite:///{made}{query}")
            import_otlp(mem, spans, user_id="bench", agent_id="agent")
            mem.close()
            with sqlite3.connect(made) as db:
                (memories,) = db.execute("SELECT count(*) FROM memories").fetchone()
            db.close()
            runs = [close_once(made, Path(tmp) / "round.db", query) for _ in range(args.rounds)]
            rows.append({
                "store": f"sqlite {flavour}", "spans": n, "memories": memories + 1,
                "close_cpu_us_per_memory": round(statistics.median(r[0] for r in runs) * 1e6 / (memories + 1), 1),
                "close_wall_us_per_memory": round(statistics.median(r[1] for r in runs) * 1e6 / (memories + 1), 1),
                "keyword_index_mb": round(runs[0][2] / 1e6, 1),
                "rounds": args.rounds, "load_average": round(os.getloadavg()[0], 1),
            })
    if args.json:
        print(dump({"rows": rows}))
    else:
        print("closing a store right after an OTel import (keyword and vector indexes built and saved); "
              "load average when each flavour ended in the last column (2 cores)")
        print_table(rows, ["store", "spans", "memories", "close_cpu_us_per_memory", "close_wall_us_per_memory",
                           "keyword_index_mb", "rounds", "load_average"])


if __name__ == "__main__":
    main()
