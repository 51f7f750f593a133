"""PostgreSQL: what each speed-only mechanism buys a search, against the plain way, alternated.

    python bench/pg_speed.py                       # 100k memories, 60 queries
    python bench/pg_speed.py --size 20000 --queries 40

One store (a fresh server, bench/run.py's Zipf notes with the default embedder, one namespace,
written by this process in ``add_many`` batches of 1,000, then ``index_vectors()``). Beside the
store's own structures the plain ones are built in the same database: a GIN index on the
``tsvector`` column and one HNSW graph over every vector (``halfvec``, as the store's segments).
Then, query by query, each variant in turn (the order rotating), each mode timed:

* ``as is``: the store's search;
* ``plain keyword``: the keyword leg as one statement over the memories holding a query term, found
  through the GIN index (no postings, no bounds, no cached document frequencies);
* ``plain stats``: the dense leg's cosine mean and spread scored in SQL on every search (no
  per-process sample of vectors);
* ``plain vector index``: one HNSW graph over the whole table instead of the segments;

and the modes: hybrid, hybrid with a metadata filter (``{"gene": "TP53"}``), keyword, semantic.
Reported: p50 / p95 in ms per variant and mode, and each variant's ratio to ``as is`` (p50), with
the load average. The plain variants change only where the time goes, not the results' meaning.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("MEMKIT_BENCH_ROOT") or str(Path(__file__).resolve().parents[1]))

from bench.run import make_queries, make_varied

_MODES = (("hybrid", None), ("hybrid+filter", {"gene": "TP53"}), ("keyword", None), ("semantic", None))


def _plain_keyword_sql() -> str:
    from memkit.adapters._postgres import _sql as q

    # The exhaustive statement, its rows found through the GIN index instead of the postings.
    head, _, rest = q.KEYWORD_SQL.partition("AND m.seq IN (")
    _, _, tail = rest.partition("AND m.terms @@ %s::tsquery")
    return head + "AND m.terms @@ %s::tsquery" + tail


@contextlib.contextmanager
def _variant(name: str, top: int, dim: int) -> Iterator[None]:
    from memkit._retrieval._keyword import K1, B
    from memkit.adapters._postgres import _dense as d
    from memkit.adapters._postgres import _search as s
    from memkit.adapters._postgres import _sql as q
    from memkit.adapters._sqlbase import filter_sql

    saved = (s.keyword_hits, d.SampleCache.stats, s.segment_bounds, s.segment_kinds)
    if name in ("plain keyword", "all plain"):
        sql = _plain_keyword_sql()

        async def plain_hits(conn: Any, user: str, agent: str, terms: list[str], conditions: Any, limit: int,
                             *_: Any) -> list[tuple[int, int, float]]:
            where, params = filter_sql(conditions, q.POSTGRES)
            rows = await (await conn.execute(sql.format(where=where), [
                user, agent, *params, terms, user, agent, q.any_query(terms), K1 + 1.0, K1, B, B, limit,
            ], prepare=False)).fetchall()
            return [(int(a), int(b), float(c)) for a, b, c in rows]

        s.keyword_hits = plain_hits  # type: ignore[assignment]
    if name in ("plain stats", "all plain"):
        async def sql_stats(self: Any, conn: Any, user: str, agent: str, version: Any,
                            query: Any) -> tuple[float, float]:
            row = await (await conn.execute(d._STATS_SQL, (query, user, agent, d.SAMPLE))).fetchone()
            return float(row[0]), float(row[1])

        d.SampleCache.stats = sql_stats  # type: ignore[method-assign]
    if name in ("plain vector index", "all plain"):
        s.segment_bounds = lambda text: [top]  # type: ignore[assignment]
        s.segment_kinds = lambda text: ["halfvec"]  # type: ignore[assignment]
    try:
        yield
    finally:
        s.keyword_hits, d.SampleCache.stats, s.segment_bounds, s.segment_kinds = saved  # type: ignore[method-assign]


async def run(
    url: str, queries: list[str], variants: list[str], top: int, dim: int,
) -> dict[str, dict[str, list[float]]]:
    import memkit

    mem = memkit.open(url).provider
    times: dict[str, dict[str, list[float]]] = {v: {} for v in variants}
    try:
        for warm in (True, False):
            for i, query in enumerate(queries):
                order = variants[i % len(variants):] + variants[:i % len(variants)]
                for variant in order:
                    with _variant(variant, top, dim):
                        for mode, filters in _MODES:
                            start = time.perf_counter()
                            await mem.search(query, "lab", "bio", limit=10, mode=mode.split("+")[0],
                                             filters=filters)
                            if not warm:
                                times[variant].setdefault(mode, []).append(time.perf_counter() - start)
    finally:
        await mem.aclose()
    return times


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3


_PLAIN_SCHEMA = (
    "DROP TRIGGER memories_postings_add ON memories",
    "DROP TRIGGER memories_postings_drop ON memories",
    "CREATE INDEX memories_terms_plain ON memories USING gin (terms)",
    "CREATE INDEX memories_hnsw_plain ON memories USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops)",
)


async def _ingest(url: str, texts: list[tuple[str, dict[str, Any]]], plain: bool) -> float:
    """Seconds to write ``texts`` and have every vector in a graph: as is (postings kept by triggers,
    segments built in bulk, ``index_vectors()`` at the end), or the plain way (a GIN index and one
    HNSW graph kept up by every insert)."""
    import memkit
    from memkit.adapters._postgres import _index as _postgres_index

    mem = memkit.open(url).provider
    saved = _postgres_index.maybe_start
    try:
        await mem.add_many([{"content": texts[0][0], "user_id": "lab", "agent_id": "warm"}])
        if plain:
            async def never(*args: Any) -> None:
                return None

            _postgres_index.maybe_start = never  # type: ignore[assignment]
            async with mem._pool.connection() as conn:
                for statement in _PLAIN_SCHEMA:
                    await conn.execute(statement.format(dim=int(mem._dim or 0)))
        start = time.perf_counter()
        for at in range(0, len(texts), 1_000):
            await mem.add_many([{"content": t, "user_id": "lab", "agent_id": "bio", "metadata": m}
                                for t, m in texts[at:at + 1_000]])
        if not plain:
            await mem.index_vectors()
        return time.perf_counter() - start
    finally:
        _postgres_index.maybe_start = saved  # type: ignore[assignment]
        await mem.aclose()


async def _fill(url: str, texts: list[tuple[str, dict[str, Any]]]) -> tuple[float, int, int]:
    import memkit

    mem = memkit.open(url).provider
    try:
        start = time.perf_counter()
        for at in range(0, len(texts), 1_000):
            await mem.add_many([{"content": t, "user_id": "lab", "agent_id": "bio", "metadata": m}
                                for t, m in texts[at:at + 1_000]])
        top = int(await mem.index_vectors())
        return time.perf_counter() - start, top, int(mem._dim or 0)
    finally:
        await mem.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--variants", default="as is,plain keyword,plain stats,plain vector index,all plain")
    parser.add_argument("--ingest", type=int, default=0, metavar="ROUNDS",
                        help="instead: ingest --size memories as is and the plain way, alternated, ROUNDS each")
    args = parser.parse_args()
    import psycopg

    from memkit.testing import PostgresServer

    texts = make_varied(args.size, args.size)
    queries = make_queries(texts, args.queries, 7)
    server = PostgresServer(settings={"shared_buffers": "1GB", "maintenance_work_mem": "512MB"})
    if args.ingest:
        taken: dict[bool, list[float]] = {False: [], True: []}
        with server:
            for r in range(args.ingest):
                for plain in (False, True) if r % 2 == 0 else (True, False):
                    taken[plain].append(asyncio.run(_ingest(server.url(f"ingest{r}{int(plain)}"), texts, plain)))
                    print(f"round {r}, {'plain' if plain else 'as is'}: {args.size / taken[plain][-1]:,.0f}"
                          f" memories/s (load {os.getloadavg()[0]:.1f})", flush=True)
        ratio = statistics.median(taken[True]) / statistics.median(taken[False])
        print(f"median memories/s: as is {args.size / statistics.median(taken[False]):,.0f}, plain"
              f" {args.size / statistics.median(taken[True]):,.0f} (as is {ratio:.2f}x as fast)")
        return
    with server:
        url = server.url("bench") + "?pool_size=2"
        filled, top, dim = asyncio.run(_fill(url, texts))
        print(f"{args.size:,} memories written and indexed in {filled:.0f} s (load {os.getloadavg()[0]:.1f})",
              flush=True)
        start = time.perf_counter()
        with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
            conn.execute("SET maintenance_work_mem = '512MB'")
            conn.execute("CREATE INDEX memories_terms_plain ON memories USING gin (terms)")
            gin = time.perf_counter() - start
            conn.execute(f"CREATE INDEX memories_hnsw_plain ON memories USING hnsw"
                         f" ((embedding::halfvec({int(dim)})) halfvec_cosine_ops)")
            conn.execute("ANALYZE memories")
        print(f"plain indexes built: GIN {gin:.0f} s, one HNSW graph {time.perf_counter() - start - gin:.0f} s",
              flush=True)
        variants = args.variants.split(",")
        times = asyncio.run(run(url, queries, variants, top, dim))
    print(f"{len(queries)} queries, p50 / p95 ms (ratio: the variant's p50 over 'as is'), load "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"{'variant':20s}" + "".join(f"{mode:>26s}" for mode, _ in _MODES))
    for variant in variants:
        cells = []
        for mode, _ in _MODES:
            v, base = times[variant][mode], times[variants[0]][mode]
            ratio = statistics.median(v) / statistics.median(base)
            cells.append(f"{_p(v, .5):7.1f} /{_p(v, .95):7.1f} ({ratio:4.2f}x)")
        print(f"{variant:20s}" + "".join(f"{c:>26s}" for c in cells))


if __name__ == "__main__":
    main()
