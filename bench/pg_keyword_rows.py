"""The keyword leg scoring from ``memories`` (schema 5) against scoring from ``keyword_rows`` (schema 6).

    python bench/pg_keyword_rows.py --url postgresql://... --size 1000000 --queries 60

Searches a store of schema 6 or later that bench/postgres.py wrote (its namespace, its queries for
``--size``). For each query the keyword leg runs at a hybrid search's depth (100) and at a keyword
search's (10), once scoring its candidates the schema-5 way (the memories' own rows: content,
metadata and vector beside the terms) and once from the narrow rows, in alternating order, on one
connection. Reported per variant: medians and p95 of the leg's wall time, the server backend's
CPU (from ``/proc``, so the server must run on this machine), the scoring statement's
wall time alone, and whether the two gave the same rows
(seq, time and score, bit for bit). A warm-up pass of both first; the load average beside.
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

# Schema 5's scoring statement: the candidates' rows of ``memories``.
_SCHEMA_5 = """
WITH w AS (SELECT * FROM unnest(%s::text[], %s::float8[]) AS w(lexeme, idf)),
hits AS MATERIALIZED (
    SELECT m.seq, m.created_us, m.terms_len, ts_filter(setweight(m.terms, 'A', %s::text[]), '{a}') AS found
    FROM memories m
    WHERE m.user_id = %s AND m.agent_id = %s AND m.seq = ANY(%s) AND (true)
)
SELECT h.seq, h.created_us,
       sum(w.idf * cardinality(u.positions) * %s::float8
           / (cardinality(u.positions) + %s::float8 * (1 - %s::float8 + %s::float8 * h.terms_len / %s::float8)))
           AS score
FROM hits h CROSS JOIN LATERAL unnest(h.found) AS u(lexeme, positions, weights) JOIN w ON w.lexeme = u.lexeme
GROUP BY h.seq, h.created_us
ORDER BY score DESC, h.created_us DESC, h.seq DESC
LIMIT %s
"""


def _cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` so far, to the nanosecond (``stat`` counts 10 ms ticks)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def _stats(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1e3:7.1f} {p95 * 1e3:7.1f}"


async def _run(url: str, queries: list[str]) -> None:
    import psycopg

    from memkit._retrieval._keyword import K1, B, analyze_query
    from memkit.adapters import _postgres_keyword as kw
    from memkit.adapters import _postgres_sql as q

    narrow = kw._scores

    async def wide(conn: Any, user_id: str, agent_id: str, found: Any, idf: dict[str, float],
                   candidates: list[int], conditions: Any, limit: int) -> list[tuple[int, int, float]]:
        used = [f.term for f in found if f.seqs]
        return [(int(s), int(c), float(v)) for s, c, v in await (await conn.execute(
            _SCHEMA_5, [used, [idf[t] for t in used], used, user_id, agent_id, candidates,
                        K1 + 1.0, K1, B, B, found[0].avglen, limit], prepare=False)).fetchall()]

    scoring: list[float] = []

    def timing(score: Any) -> Any:
        async def timed(*args: Any) -> list[tuple[int, int, float]]:
            start = time.perf_counter()
            try:
                return await score(*args)  # type: ignore[no-any-return]
            finally:
                scoring.append(time.perf_counter() - start)
        return timed

    variants = {"memories (schema 5)": timing(wide), "keyword_rows (schema 6)": timing(narrow)}
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        pid = int((await (await conn.execute("SELECT pg_backend_pid()")).fetchone())[0])
        counted = kw.Frequencies()
        wall: dict[tuple[str, int], list[float]] = {}
        scored: dict[tuple[str, int], list[float]] = {}
        cpu: dict[tuple[str, int], list[float]] = {}
        same = differ = 0
        for timed in (False, True):
            for i, query in enumerate(queries):
                terms = list(dict.fromkeys(q.query_terms(analyze_query(query))))
                for depth in (100, 10):
                    got = {}
                    order = list(variants) if (i + depth) % 2 else list(reversed(variants))
                    for name in order:
                        kw._scores = variants[name]  # type: ignore[assignment]
                        del scoring[:]
                        start, before = time.perf_counter(), _cpu(pid)
                        got[name] = await kw.keyword_hits(conn, "lab", "bio", terms, (), depth, counted)
                        if timed:
                            wall.setdefault((name, depth), []).append(time.perf_counter() - start)
                            cpu.setdefault((name, depth), []).append(_cpu(pid) - before)
                            scored.setdefault((name, depth), []).append(sum(scoring))
                    kw._scores = narrow  # type: ignore[assignment]
                    if timed:
                        same, differ = (same + 1, differ) if len({repr(v) for v in got.values()}) == 1 else (
                            same, differ + 1)
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"{len(queries)} queries, alternated; load average {load}")
        print(f"{'variant':28} {'depth':>5} {'leg p50':>8} {'p95':>7} {'scoring p50':>11} {'p95':>7}"
              f" {'server CPU p50':>14} {'p95':>7} {'mean':>6}")
        for (name, depth), values in sorted(wall.items(), key=lambda kv: (-kv[0][1], kv[0][0])):
            mean = statistics.fmean(cpu[(name, depth)]) * 1e3
            print(f"{name:28} {depth:5} {_stats(values)}     {_stats(scored[(name, depth)])}"
                  f"        {_stats(cpu[(name, depth)])} {mean:6.1f}")
        print(f"same rows, times and scores: {same} of {same + differ} searches")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    texts = make_varied(args.size, args.size)
    asyncio.run(_run(args.url, make_queries(texts, args.queries, 7)))


if __name__ == "__main__":
    main()
