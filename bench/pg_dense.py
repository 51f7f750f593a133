"""The PostgreSQL dense leg's HNSW graph, kind against kind: build CPU per vector, search CPU, recall.

    python bench/pg_dense.py --url postgresql://.../store --size 1000000 --queries 40
    python bench/pg_dense.py --url ... --kinds vector,halfvec,bit:over=4 --range 150000:1000000

Searches a store bench/postgres.py wrote (its namespace, its queries for ``--size``), in one range of
``seq`` (default: the store's largest segment of the vector index). For each kind of graph over that
range, built here under a scratch name unless the store's own segment is of that kind, it reports:
the server CPU per vector of the build (one process, no parallel workers, the graph in memory), and
for a deep leg (``--depth``, a hybrid search's 100) and a shallow one (10): the server CPU per search
(the backend's own, from ``/proc/<pid>/schedstat``, so other work on a shared server does not count),
the client's wall time, and recall against an exact scan of the range (@10 and @100: the share of
the exact top k the graph's top k holds, ties at the k-th cosine counted as found). The kinds are
alternated query by query so that load drifts hit them alike. Scratch indexes are dropped at the end
unless ``--keep``.

A kind is ``vector`` (pgvector's full vectors, memkit's segments before schema 6), ``halfvec`` (the
graph over 16-bit floats) or ``bit`` (over binary quantisation, Hamming distance), with options
after a colon: ``m``, ``ef_construction`` (the build) and ``over`` (joined by ``+``; a quantised graph is asked for
``over`` times the rows, which the full vectors re-rank).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import load_average
from bench.run import make_queries, make_varied


def _cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


class _Workers(threading.Thread):
    """The CPU of the parallel workers helping backend ``leader`` build an index: sampled while they
    live (each exits with the build), the last reading of each kept."""

    def __init__(self, leader: int) -> None:
        super().__init__(daemon=True)
        self.leader, self.seen, self.done = leader, {}, threading.Event()

    def run(self) -> None:
        tag = f"parallel worker for PID {self.leader}".encode()
        while not self.done.wait(0.2):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    if tag in Path(f"/proc/{pid}/cmdline").read_bytes():
                        self.seen[int(pid)] = _cpu_ns(int(pid))
                except OSError:
                    continue

    def total_s(self) -> float:
        self.done.set()
        self.join()
        return sum(self.seen.values()) / 1e9


def _parse(kind: str) -> tuple[str, dict[str, int]]:
    name, _, rest = kind.partition(":")
    opts = {k: int(v) for k, v in (item.split("=") for item in rest.split("+") if item)}
    return name, opts


def _twin(kind: str, kinds: list[str]) -> bool:
    """Whether ``kind`` is a second graph of the same base as an earlier kind: it then indexes the
    vectors through ``l2_normalize`` (a no-op on memkit's unit vectors), so that each query's ORDER BY
    matches its own graph only and the planner cannot serve one kind from the other's graph."""
    base = _parse(kind)[0]
    return any(_parse(k)[0] == base for k in kinds[: kinds.index(kind)])


def _index_sql(kind: str, name: str, lo: int, hi: int, dim: int, twin: bool) -> str:
    base, opts = _parse(kind)
    expr = {"vector": f"(l2_normalize(embedding)::vector({dim})) vector_cosine_ops" if twin
            else "embedding vector_cosine_ops",
            "halfvec": f"(l2_normalize(embedding::halfvec({dim}))::halfvec({dim})) halfvec_cosine_ops" if twin
            else f"(embedding::halfvec({dim})) halfvec_cosine_ops",
            "bit": f"(binary_quantize(embedding)::bit({dim})) bit_hamming_ops"}[base]
    build = {k: v for k, v in opts.items() if k in ("m", "ef_construction")}
    with_ = f" WITH ({', '.join(f'{k} = {v}' for k, v in build.items())})" if build else ""
    return f"CREATE INDEX {name} ON memories USING hnsw ({expr}){with_} WHERE seq > {lo} AND seq <= {hi}"


def _search_sql(kind: str, lo: int, hi: int, dim: int, k: int, twin: bool) -> tuple[str, int]:
    base, opts = _parse(kind)
    head = ("SELECT m.seq, -(m.embedding <#> v.q) AS cos FROM (SELECT %(q)s::vector AS q) v, memories m"  # noqa: S608
            f" WHERE m.user_id = 'lab' AND m.agent_id = 'bio' AND m.embedding IS NOT NULL"
            f" AND m.seq > {lo} AND m.seq <= {hi}")
    if base == "vector":
        order = f"l2_normalize(m.embedding)::vector({dim}) <=> v.q" if twin else "m.embedding <=> v.q"
        return f"{head} ORDER BY {order}, m.seq LIMIT {k}", k
    order = {"halfvec": f"l2_normalize(m.embedding::halfvec({dim}))::halfvec({dim}) <=> v.q::halfvec({dim})" if twin
             else f"m.embedding::halfvec({dim}) <=> v.q::halfvec({dim})",
             "bit": f"binary_quantize(m.embedding)::bit({dim}) <~> binary_quantize(v.q)::bit({dim})"}[base]
    wide = k * opts.get("over", 1)
    return f"SELECT * FROM ({head} ORDER BY {order}, m.seq LIMIT {wide}) s ORDER BY cos DESC, seq LIMIT {k}", wide  # noqa: S608


def _recall(found: list[float], exact: list[float], k: int) -> float:
    if len(exact) < k:
        return 1.0
    kth = exact[k - 1] - 1e-6
    return min(k, sum(1 for c in found[:k] if c >= kth)) / k


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--size", type=int, required=True, help="the --size bench/postgres.py wrote the store with")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--kinds", default="vector,halfvec,bit:over=4")
    parser.add_argument("--range", help="lo:hi (lo < seq <= hi); default the largest segment")
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the scratch indexes")
    parser.add_argument("--workers", type=int, default=0, help="parallel build workers (their CPU is counted)")
    parser.add_argument("--adoptable", action="store_true",
                        help="name a plain halfvec graph as memkit names the range's segment and keep it: the"
                             " store's next build (index_vectors()) takes it in place of the range's vector graph")
    parser.add_argument("--exact-cache", type=Path, help="a JSON file keeping the exact tops between runs")
    args = parser.parse_args()

    import psycopg

    from memkit.embeddings import get_embedder

    conn = psycopg.connect(args.url, autocommit=True)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    meta = dict(conn.execute("SELECT key, value FROM memkit_meta").fetchall())
    dim = int(meta["embedder_dim"])
    if args.range:
        lo, hi = (int(x) for x in args.range.split(":"))
    else:
        ends = [int(e) for e in meta.get("vector_segments", "").split()]
        lo, hi = max(zip([0, *ends], ends, strict=False), key=lambda r: r[1] - r[0])
    texts = make_varied(args.size, args.size)
    queries = make_queries(texts, args.queries, 7)
    vectors = [list(map(float, v)) for v in get_embedder(meta["embedder_name"]).embed(queries)]
    print(f"range {lo} < seq <= {hi} ({hi - lo} memories), {len(queries)} queries, load {load_average()}", flush=True)

    cache = json.loads(args.exact_cache.read_text()) if args.exact_cache and args.exact_cache.exists() else {}
    key = f"{args.url} {lo} {hi} {args.size} {args.queries} {args.depth}"
    if key not in cache:
        start = time.time()
        conn.execute("SET enable_indexscan = off")  # a graph would serve the ORDER BY otherwise
        cache[key] = [[float(c) for _, c in conn.execute(
            f"SELECT m.seq, -(m.embedding <#> %(q)s::vector) AS cos FROM memories m WHERE m.user_id = 'lab'"  # noqa: S608
            f" AND m.agent_id = 'bio' AND m.seq > {lo} AND m.seq <= {hi} ORDER BY cos DESC LIMIT {args.depth}",
            {"q": str(v)}).fetchall()] for v in vectors]
        conn.execute("RESET enable_indexscan")
        print(f"exact tops: {time.time() - start:.0f} s", flush=True)
        if args.exact_cache:
            args.exact_cache.write_text(json.dumps(cache))
    exact = cache[key]

    kinds = args.kinds.split(",")
    own = [name for name, in conn.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " WHERE i.indrelid = 'memories'::regclass AND pg_get_expr(i.indpred, i.indrelid) LIKE %s",
        (f"%seq > {lo}%seq <= {hi}%" if lo else f"%seq <= {hi}%",)).fetchall()]
    scratch: list[str] = []
    out: dict[str, Any] = {"range": [lo, hi], "queries": len(queries), "load": load_average(), "kinds": {}}
    conn.execute(f"SET max_parallel_maintenance_workers = {int(args.workers)}")
    conn.execute("SET maintenance_work_mem = '3GB'")
    for kind in kinds:
        base, opts = _parse(kind)
        if base == "vector" and not {"m", "ef_construction"} & set(opts) and own and not _twin(kind, kinds):
            out["kinds"][kind] = {"build": f"the store's own {own[0]}"}
            continue
        name = f"pgdense_k{kinds.index(kind)}"
        if args.adoptable and kind == "halfvec":
            from memkit.adapters._postgres._schema import index_name

            name = index_name(lo, hi, "halfvec")
        conn.execute(f"DROP INDEX IF EXISTS {name}")
        cpu, start, workers = _cpu_ns(pid), time.time(), _Workers(pid)
        workers.start()
        conn.execute(_index_sql(kind, name, lo, hi, dim, _twin(kind, kinds)))
        spent = (_cpu_ns(pid) - cpu) / 1e9 + workers.total_s()
        size = conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()[0]
        if not (args.adoptable and kind == "halfvec"):
            scratch.append(name)
        out["kinds"][kind] = {"build_us_per_vector": round(spent / (hi - lo) * 1e6),
                              "build_s": round(time.time() - start), "index_mb": round(size / 2**20),
                              "load_build": load_average()}
        print(kind, out["kinds"][kind], flush=True)
    conn.execute("ANALYZE memories")

    def run(kind: str, vector: list[float], k: int) -> tuple[list[float], float, float]:
        sql, wide = _search_sql(kind, lo, hi, dim, k, _twin(kind, kinds))
        cpu, start = _cpu_ns(pid), time.perf_counter()
        with conn.transaction():
            conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
                         " set_config('hnsw.ef_search', %s, true), set_config('enable_sort', 'off', true)",
                         (str(max(40, wide)),))
            rows = conn.execute(sql, {"q": str(vector)}, prepare=False).fetchall()
        return [float(c) for _, c in rows], (_cpu_ns(pid) - cpu) / 1e6, (time.perf_counter() - start) * 1e3

    for vector in vectors[:3]:  # warm-up: the graphs' pages into the buffers
        for kind in kinds:
            run(kind, vector, args.depth)
    results: dict[str, dict[int, list[tuple[float, float, float, float]]]] = {
        kind: {args.depth: [], 10: []} for kind in kinds}
    for i, vector in enumerate(vectors):
        for kind in kinds[i % len(kinds):] + kinds[: i % len(kinds)]:
            for k in (args.depth, 10):
                found, cpu_ms, wall_ms = run(kind, vector, k)
                results[kind][k].append((cpu_ms, wall_ms, _recall(found, exact[i], k),
                                         _recall(found, exact[i], min(10, k))))
    for kind in kinds:
        for k, rows in results[kind].items():
            out["kinds"][kind][f"depth {k}"] = {
                "server_cpu_ms": round(statistics.median(r[0] for r in rows), 2),
                "wall_p50_ms": round(statistics.median(r[1] for r in rows), 2),
                f"recall@{k}": round(statistics.mean(r[2] for r in rows), 3),
                "recall@10": round(statistics.mean(r[3] for r in rows), 3)}
    out["load_search"] = load_average()
    if not args.keep:
        for name in scratch:
            conn.execute(f"DROP INDEX {name}")
    print(json.dumps(out, indent=1))
    conn.close()


if __name__ == "__main__":
    main()
