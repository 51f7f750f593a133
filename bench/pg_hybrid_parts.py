"""Where a PostgreSQL hybrid search's time goes: each part of one search timed on its own.

    python bench/pg_hybrid_parts.py --url postgresql://... --size 1000000 --queries 60

Searches a store bench/postgres.py wrote (its namespace, its queries for ``--size``). For each
query, in turn: the whole search per mode, then the parts of a hybrid search one at a time on the
store's own pool and event loop: the keyword leg and the dense leg at the hybrid depth and at the
limit, the two legs at once on two connections (as a search runs them), the statements after the
legs (the keyword hits' cosines, neighbours, speakers: one round trip), memkit's fusion, and the
final row fetch. Medians and p95 in ms, the load average beside them; a warm-up pass first. Each
part's server CPU (its connections' backends, from ``/proc``) is reported beside its wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.run import make_queries, make_varied


def _cpu(pids: list[int]) -> float:
    """CPU seconds the server processes ``pids`` have used (``/proc``: the server runs on this machine)."""
    return sum(int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) for pid in pids) / 1e9


def _stats(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1e3:7.1f} {p95 * 1e3:7.1f}"


async def _parts(mem: Any, query: str, times: dict[str, list[float]], counts: dict[str, list[int]]) -> None:
    from memkit._retrieval._config import HybridConfig
    from memkit._retrieval._fusion import CONTEXT_REACH
    from memkit._retrieval._keyword import analyze_query
    from memkit.adapters._postgres import _keyword as kw
    from memkit.adapters._postgres import _search as s
    from memkit.adapters._postgres import _sql as q
    from memkit.adapters._postgres._keyword import keyword_hits
    from memkit.store import _search as _pipeline
    from memkit.store._ops import SearchOp

    pool, samples = mem._pool, mem._samples
    scored: list[int] = []
    original = kw._scores

    async def counting(*args: Any) -> list[tuple[int, int, float]]:
        scored.append(len(args[5]))
        return await original(*args)

    kw._scores = counting  # how many memories the keyword leg reads and scores
    vector = mem._embed([query])[0]
    terms = list(dict.fromkeys(q.query_terms(analyze_query(query))))
    config = HybridConfig()
    depth = config.candidates

    async with pool.connection() as conn, pool.connection() as other:
        pids = [int((await (await c.execute("SELECT pg_backend_pid()")).fetchone())[0]) for c in (conn, other)]
        cpu = [0.0]

        def timed(name: str, start: float) -> None:
            times.setdefault(name, []).append(time.perf_counter() - start)
            now = _cpu(pids)
            times.setdefault(f"{name} [server CPU]", []).append(now - cpu[0])
            cpu[0] = _cpu(pids)

        for d in (depth, 10):
            start, cpu[0] = time.perf_counter(), _cpu(pids)
            scored.clear()
            hits = await keyword_hits(conn, "lab", "bio", terms, (), d)
            timed(f"keyword leg, depth {d}", start)
            counts.setdefault(f"keyword memories scored, depth {d}", []).append(sum(scored))
            start, cpu[0] = time.perf_counter(), _cpu(pids)
            dense = await s._dense(conn, samples, "lab", "bio", (), d, vector, {})
            timed(f"dense leg, depth {d}", start)
        start, cpu[0] = time.perf_counter(), _cpu(pids)
        hits, dense = await asyncio.gather(keyword_hits(conn, "lab", "bio", terms, (), depth),
                                           s._dense(other, samples, "lab", "bio", (), depth, vector, {}))
        timed("both legs at once, depth 100", start)
        counts.setdefault("keyword hits", []).append(len(hits))
        keys = list(dict.fromkeys([*(h[0] for h in hits), *dense.ranked]))
        missing = [h[0] for h in hits if h[0] not in dense.cosine]
        counts.setdefault("candidates", []).append(len(keys))
        counts.setdefault("keyword hits without a cosine", []).append(len(missing))
        start, cpu[0] = time.perf_counter(), _cpu(pids)
        async with conn.pipeline():
            cosines = await conn.execute(q.COSINES_SQL, (vector, "lab", "bio", q.int_array(missing)))
            near = await conn.execute(*q.gaps_statement("lab", "bio", keys, len(CONTEXT_REACH)))
            spoke = await conn.execute(q.HEADS_SQL, ("lab", "bio", q.int_array(keys)))
        for cur in (cosines, near, spoke):
            await cur.fetchall()
        timed("after the legs: cosines + neighbours + speakers", start)
        for name, sql, params in (
            ("  cosines alone", q.COSINES_SQL, (vector, "lab", "bio", q.int_array(missing))),
            ("  neighbours alone", *q.gaps_statement("lab", "bio", keys, len(CONTEXT_REACH))),
            ("  speakers alone", q.HEADS_SQL, ("lab", "bio", q.int_array(keys))),
        ):
            start, cpu[0] = time.perf_counter(), _cpu(pids)
            await (await conn.execute(sql, params)).fetchall()
            timed(name, start)
        request = SearchOp(query=query, user_id="lab", agent_id="bio", limit=10, filters=None, mode="hybrid",
                           conditions=(), config=config)
        created = {k: 0 for k in keys}
        start, cpu[0] = time.perf_counter(), _cpu(pids)
        top = _pipeline.rank(request, [(h[0], h[2]) for h in hits], dense,
                             lambda seqs: {k: (created.get(k, 0), k) for k in seqs}, lambda keys, reach: {},
                             lambda keys, query: {})
        timed("fusion (memkit, no neighbours)", start)
        start, cpu[0] = time.perf_counter(), _cpu(pids)
        await (await conn.execute(f"SELECT {q.COLUMNS} FROM memories m WHERE m.seq = ANY(%s)",  # noqa: S608
                                  ([t[0] for t in top],))).fetchall()
        timed("final rows", start)
    kw._scores = original


async def run(url: str, queries: list[str]) -> None:
    import memkit

    mem = memkit.open(url).provider
    try:
        times: dict[str, list[float]] = {}
        counts: dict[str, list[int]] = {}
        for warm in (True, False):
            for query in queries:
                for mode in ("hybrid", "keyword", "semantic"):
                    start = time.perf_counter()
                    await mem.search(query, "lab", "bio", limit=10, mode=mode)
                    if not warm:
                        times.setdefault(f"search, {mode}", []).append(time.perf_counter() - start)
                part: dict[str, list[float]] = {}
                await mem._call(_parts(mem, query, part, counts if not warm else {}))
                if not warm:
                    for k, v in part.items():
                        times.setdefault(k, []).extend(v)
        print(f"{'part':55s}  p50 ms  p95 ms   (load {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
        for name, values in times.items():
            print(f"{name:55s} {_stats(values)}")
        for name, values in counts.items():
            print(f"{name:55s} median {statistics.median(values):.0f}, max {max(values)}")
    finally:
        await mem.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    texts = make_varied(args.size, args.size)
    asyncio.run(run(args.url, make_queries(texts, args.queries, 7)))


if __name__ == "__main__":
    main()
