"""PostgreSQL ingest as CPU per memory (writers and server apart), code trees alternated in one run.

    python bench/pg_ingest_cpu.py --roots /work/main,.            # A/B: main's code, then this tree's
    python bench/pg_ingest_cpu.py --size 60000 --rounds 2 --writers 4

On a shared machine wall-clock rates say more about the neighbours than about the code, so each
tree's run reports CPU seconds per memory: the writer processes' own (embedding, analysis, COPY
encoding), the local server's while they write (COPY, indexes, postings, the background vector
index builds), and the server's for the catch-up build after them (``index_vectors()``, what a
bulk import adds before searches run at full speed). Then ``--queries`` searches per mode from
one process: p50/p95 wall and the server's CPU per search, and recall@10 of semantic search against
an exact scan of the namespace. Each tree runs in a subprocess importing memkit from that tree, on
a server of its own (the tests' PostgreSQL with pgvector); ``--rounds`` alternates the trees
(A B A B ...) so load drifts hit both. Medians of one run each; the load average is printed.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.postgres import server_cpu

_CHILD = r"""
import json, multiprocessing, os, sys, time
root = sys.argv[1]
size, writers, batch, queries = (int(x) for x in sys.argv[2:6])
sys.path.insert(0, root)
import memkit
assert memkit.__file__.startswith(root), memkit.__file__
from bench.run import make_queries, make_varied
from pathlib import Path


def write(args):
    url, texts, go = args
    with memkit.open(url) as mem:
        time.sleep(max(0.0, go - time.time()))
        cpu = time.process_time()
        for at in range(0, len(texts), batch):
            mem.add_many([{"content": t, "user_id": "lab", "agent_id": "bio", "metadata": m}
                          for t, m in texts[at:at + batch]])
        return time.process_time() - cpu


if __name__ == "__main__":
    import psycopg
    from memkit.testing import PostgresServer
    texts = make_varied(size, size)
    asked = make_queries(texts, queries, 7)
    out = {"root": root, "size": size}
    with PostgresServer(settings={"shared_buffers": "1GB"}) as server:
        url = server.url("cpu")
        memkit.open(url).close()
        shares = [(url, texts[w::writers], time.time() + 3.0) for w in range(writers)]
        # fork: this script has no file a spawned child could import ``write`` from
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(writers) as pool:
            s0 = server_cpu(server.port)
            w0 = time.time()
            spent = pool.map(write, shares)
            wall = time.time() - w0
            s1 = server_cpu(server.port)
        out["ingest_per_s"] = round(size / (wall - 3.0))
        out["writers_us"] = round(sum(spent) / size * 1e6)
        out["server_us"] = round((s1 - s0) / size * 1e6)
        out["load_ingest"] = round(os.getloadavg()[0], 1)
        import asyncio
        async def catch_up():
            provider = memkit.open(url).provider
            try:
                return await provider.index_vectors()
            finally:
                await provider.aclose()
        w0 = time.time()
        asyncio.run(catch_up())
        out["catchup_s"] = round(time.time() - w0, 1)
        with memkit.open(url) as mem:
            s2 = server_cpu(server.port)
            out["catchup_server_us"] = round((s2 - s1) / size * 1e6)
            with psycopg.connect(url) as conn:
                out["vector_indexes"] = conn.execute(
                    "SELECT count(*) FROM pg_indexes WHERE indexname LIKE 'memories_embedding%'").fetchone()[0]
            from memkit.embeddings import get_embedder
            vectors = get_embedder("default").embed(asked)
            with psycopg.connect(url) as conn:
                exact = [[r[0] for r in conn.execute(
                    "SELECT id FROM memories WHERE user_id = 'lab' AND agent_id = 'bio'"
                    " ORDER BY embedding <#> %s::vector, seq LIMIT 10", ("[" + ",".join(map(str, v.tolist())) + "]",))]
                    for v in vectors]
            for mode in ("semantic", "hybrid"):
                for q in asked[:5]:
                    mem.search(q, user_id="lab", agent_id="bio", mode=mode, limit=10)
                times, hits = [], 0
                c0 = server_cpu(server.port)
                for q, truth in zip(asked, exact):
                    t0 = time.perf_counter()
                    found = mem.search(q, user_id="lab", agent_id="bio", mode=mode, limit=10)
                    times.append((time.perf_counter() - t0) * 1e3)
                    hits += len({h.id for h in found} & set(truth))
                c1 = server_cpu(server.port)
                times.sort()
                out[mode] = {"p50_ms": round(times[len(times) // 2], 1),
                             "p95_ms": round(times[int(len(times) * 0.95)], 1),
                             "server_ms": round((c1 - c0) / len(asked) * 1e3, 2)}
                if mode == "semantic":
                    out[mode]["recall@10"] = round(hits / (10 * len(asked)), 3)
            out["load_search"] = round(os.getloadavg()[0], 1)
    print("RESULT " + json.dumps(out), flush=True)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--roots", default=".", help="comma-separated code trees (default: this one)")
    parser.add_argument("--size", type=int, default=60_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    roots = [str(Path(r).resolve()) for r in args.roots.split(",")]
    results: dict[str, list[dict[str, Any]]] = {r: [] for r in roots}
    for _ in range(args.rounds):
        for root in roots:
            child = _CHILD.replace("if __name__", inspect.getsource(server_cpu) + "\n\nif __name__", 1)
            done = subprocess.run(
                [sys.executable, "-c", child, root, str(args.size), str(args.writers), str(args.batch),
                 str(args.queries)],
                capture_output=True, text=True, check=False, cwd=root,
                env={**os.environ, "PYTHONPATH": root},
            )
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                print(done.stdout[-2000:], done.stderr[-4000:], file=sys.stderr)
                raise SystemExit(f"the run of {root} failed")
            result = json.loads(line[len("RESULT "):])
            print(json.dumps(result), flush=True)
            results[root].append(result)
    for root, runs in results.items():
        keys = ("writers_us", "server_us", "catchup_server_us", "catchup_s", "ingest_per_s")
        print(root, {k: statistics.median(r[k] for r in runs) for k in keys})


if __name__ == "__main__":
    main()
