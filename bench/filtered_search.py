"""Filtered search at 100k memories: memkit on PostgreSQL and SQLite beside LangGraph's PostgresStore.

    python bench/filtered_search.py                  # 100k memories, 60 queries, gene filter (5%)
    python bench/filtered_search.py --size 20000 --queries 20

The corpus of issue 46: research notes (templated sentences plus varied words) with metadata
``gene`` taking 20 values, so a filter on one gene keeps 5% of the namespace; the default static
embedder for every store. memkit's PostgreSQL store is written by 4 writer processes at once
(bench/postgres.py's ``ingest``), then ``index_vectors()``; SQLite by one; LangGraph's
``AsyncPostgresStore`` (HNSW over cosine, its default) on the same server by as many processes, in
batches of 1,000.

Then the same ``--queries`` filtered queries, the stores taking turns query by query (so the shared
machine's load falls on all alike), after one warm-up pass: memkit semantic and hybrid on each
store, and PostgresStore's semantic search (it has no keyword leg). Per store and mode: p50/p95 ms,
the ``dense_path`` memkit reports, and for the semantic searches the recall of the exact filtered
top 10 computed here with numpy (a hit counts as right when its exact cosine is within 1e-4 of the
exact 10th score: near-ties are not misses). The load average is printed beside the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import dump, load_average, percentiles, print_table
from bench.postgres import ingest

TOP = 10
TIE = 1e-4
GENES = 20
_VERBS = ["raised", "lowered", "silenced", "rescued", "doubled", "halved", "masked", "shifted"]
_TISSUES = ["liver", "lung", "colon", "breast", "skin", "kidney", "brain", "blood"]
_WORDS = ["assay", "cohort", "sample", "replicate", "culture", "probe", "primer", "clone", "knockout",
          "organoid", "biopsy", "lysate", "plate", "well", "batch", "control", "dose", "timepoint"]


def _varied() -> list[str]:
    import memkit

    path = Path(memkit.__file__).parent / "_static" / "minilm-l6-static" / "vocab.txt"
    return [w for w in path.read_text(encoding="utf-8").split() if w.isascii() and w.isalpha() and len(w) >= 5][:8_000]


def notes(n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    varied = _varied()
    return [(f"gene{i % GENES} {rng.choice(_VERBS)} expression in {rng.choice(_TISSUES)} {rng.choice(_WORDS)} "
             f"{' '.join(rng.sample(varied, 3))} run {rng.randint(1, 40)}", {"gene": f"g{i % GENES}", "i": i})
            for i in range(n)]


def recall(found: list[int], vectors: Any, genes: Any, query: Any, gene: str) -> float:
    import numpy as np

    scores = vectors[genes == gene] @ query
    tenth = float(np.sort(scores)[-TOP])
    return sum(1 for i in found if float(vectors[i] @ query) >= tenth - TIE) / TOP


def _embed_with(embedder: Any) -> Any:
    def embed(batch: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in embedder.embed(batch)]

    return embed


def _lg_write(args: tuple[str, list[tuple[str, dict[str, Any]]]]) -> None:
    """One LangGraph writer process: its share, in batches of 1,000."""
    from langgraph.store.base import PutOp
    from langgraph.store.postgres.aio import AsyncPostgresStore

    from memkit.embeddings import get_embedder

    dsn, texts = args
    embedder = get_embedder("default")

    async def run() -> None:
        async with AsyncPostgresStore.from_conn_string(
                dsn, index={"dims": embedder.dim, "embed": _embed_with(embedder), "fields": ["text"]}) as store:
            for at in range(0, len(texts), 1_000):
                await store.abatch([PutOp(("lab", "bio"), str(m["i"]), {"text": t, **m})
                                    for t, m in texts[at : at + 1_000]])

    asyncio.run(run())


async def _langgraph(dsn: str, texts: list[tuple[str, dict[str, Any]]], embedder: Any, writers: int) -> Any:
    """LangGraph's store, written as memkit's is: ``writers`` processes at once."""
    from langgraph.store.postgres.aio import AsyncPostgresStore

    manager = AsyncPostgresStore.from_conn_string(dsn, index={"dims": embedder.dim, "embed": _embed_with(embedder),
                                                              "fields": ["text"]})
    store = await manager.__aenter__()
    await store.setup()
    start = time.time()
    with multiprocessing.get_context("spawn").Pool(writers) as pool:
        pool.map(_lg_write, [(dsn, texts[w::writers]) for w in range(writers)])
    return manager, store, round(time.time() - start, 1)


async def searches(urls: dict[str, str], dsn: str, texts: list[tuple[str, dict[str, Any]]],
                   queries: list[tuple[str, str]], writers: int) -> dict[str, Any]:
    import numpy as np

    import memkit
    from memkit.embeddings import get_embedder

    embedder = get_embedder("default")
    vectors = np.asarray(embedder.embed([t for t, _ in texts]), dtype=np.float32)
    genes = np.array([m["gene"] for _, m in texts])
    qvec = np.asarray(embedder.embed([q for q, _ in queries]), dtype=np.float32)
    manager, lg, lg_ingest = await _langgraph(dsn, texts, embedder, writers)
    stores = {name: memkit.open(url).provider for name, url in urls.items()}
    times: dict[str, list[float]] = {}
    recalls: dict[str, list[float]] = {}
    paths: dict[str, set[str]] = {}

    async def one(name: str, text: str, gene: str, query: Any, keep: bool) -> None:
        store, mode = name.rsplit(" ", 1)
        start = time.perf_counter()
        if store == "langgraph":
            items = await lg.asearch(("lab", "bio"), query=text, filter={"gene": gene}, limit=TOP)
            found = [int(it.value["i"]) for it in items]
        else:
            hits = await stores[store].search(text, "lab", "bio", limit=TOP, filters={"gene": gene}, mode=mode)
            found = [int(h.metadata["i"]) for h in hits]
            if keep:
                paths.setdefault(name, set()).update(h.score_details["dense_path"] for h in hits)
        took = time.perf_counter() - start
        if keep:
            times.setdefault(name, []).append(took)
            if mode == "semantic":
                recalls.setdefault(name, []).append(recall(found, vectors, genes, query, gene))

    names = [f"{s} {m}" for s in stores for m in ("semantic", "hybrid")] + ["langgraph semantic"]
    try:
        for keep in (False, True):  # a warm-up pass, then the measured one
            for turn, ((text, gene), query) in enumerate(zip(queries, qvec, strict=True)):
                order = names[turn % len(names):] + names[: turn % len(names)]  # who goes first rotates
                for name in order:
                    await one(name, text, gene, query, keep)
    finally:
        for store in stores.values():
            await store.aclose()
        await manager.__aexit__(None, None, None)
    return {"langgraph_ingest_s": lg_ingest, "load": load_average(),
            **{name: {**percentiles(times[name]),
                      **({"recall": round(float(np.mean(recalls[name])), 4)} if name in recalls else {}),
                      **({"dense_path": sorted(paths[name])} if name in paths else {})} for name in names}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--writers", type=int, default=4)
    args = parser.parse_args()

    from memkit.testing import PostgresServer

    texts = notes(args.size, 46)
    rng = random.Random(7)
    queries = [(t, f"g{rng.randrange(GENES)}") for t, _ in notes(args.queries, 8)]
    results: dict[str, Any] = {"size": args.size, "queries": args.queries, "load_start": load_average()}
    with tempfile.TemporaryDirectory(prefix="memkit-bench-filt-") as tmp, PostgresServer() as server:
        urls = {"postgres": server.url("bench") + "?pool_size=2", "sqlite": f"sqlite:///{tmp}/bench.db"}
        results["ingest"] = {name: ingest(url, args.writers if name == "postgres" else 1, texts, 1_000,
                                          server.port if name == "postgres" else None)
                             for name, url in urls.items()}
        dsn = server.url("langgraph")
        results["search"] = asyncio.run(searches(urls, dsn, texts, queries, args.writers))
    rows = [{"store mode": name, "p50 ms": r["p50_ms"], "p95 ms": r["p95_ms"], "recall": r.get("recall", "-"),
             "dense_path": ",".join(r.get("dense_path", ["-"]))}
            for name, r in results["search"].items() if isinstance(r, dict)]
    print_table(rows, list(rows[0]))
    print(dump(results))


if __name__ == "__main__":
    main()
