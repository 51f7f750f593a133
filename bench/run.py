"""Core benchmark: add (single, batch), keyword search and get_all at several sizes, per adapter.

Run ``python bench/run.py`` (or ``make bench``); ``--sizes`` and ``--adapters`` narrow it.
Prints a table, then the same numbers as JSON (also written to ``--out``).
Each size uses a fresh store holding that many memories in ONE namespace (the worst case
for a per-namespace query), plus a second namespace of the same size to prove the
namespace filter does not cost a scan of everyone else's rows.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import dump, percentiles, print_table, time_each
from memkit._demo import _MAKERS
from memkit._retrieval._keyword import STOPWORDS, analyze_query
from memkit.adapters import InMemoryAdapter, SQLiteAdapter


def make_texts(n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """Templated research notes: a tiny vocabulary, so common query words match a third of the store."""
    rng = random.Random(seed)
    makers = list(_MAKERS.values())
    return [rng.choice(makers)(rng) for _ in range(n)]


def _vocabulary(size: int = 30_000) -> list[str]:
    """Stopwords first (the most frequent ranks, as in English), then deterministic pseudo-words."""
    rng = random.Random(1234)
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "qu", "ch", "st"]
    words: list[str] = sorted(STOPWORDS)
    seen = set(words)
    while len(words) < size:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def make_varied(n: int, seed: int) -> list[tuple[str, dict[str, Any]]]:
    """Notes whose words follow a Zipf law over 30k words (stopwords most frequent), like real text."""
    rng = random.Random(seed)
    vocab = _vocabulary()
    weights = [1.0 / (rank + 1) ** 1.07 for rank in range(len(vocab))]
    # choices() would accumulate all 30k weights for every note; the same sums once give the same draws
    cum_weights = list(itertools.accumulate(weights))
    out = []
    for _ in range(n):
        text, meta = rng.choice(list(_MAKERS.values()))(rng)
        words = rng.choices(vocab, cum_weights=cum_weights, k=rng.randint(8, 24))
        out.append((f"{text} {' '.join(words)}", meta))
    return out


def make_queries(texts: list[tuple[str, dict[str, Any]]], count: int, seed: int) -> list[str]:
    """Questions about things in the store: 2-4 content words taken from a random memory."""
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        words = [w for w in analyze_query(rng.choice(texts)[0]) if not w.isdigit()]
        queries.append(" ".join(rng.sample(words, min(len(words), rng.randint(2, 4)))))
    return queries


CORPORA = {"varied": make_varied, "templates": make_texts}


def adapter_factories(tmp: Path) -> dict[str, Callable[[int], Any]]:
    return {
        # keyword-only, like the in-memory adapter, so the two compare (bench/retrieval.py --scale
        # measures the default, embedding store)
        "sqlite": lambda size: SQLiteAdapter(tmp / f"bench-{size}-{time.monotonic_ns()}.db", embedder=None),
        "memory": lambda size: InMemoryAdapter(),
    }


async def bench_one(
    name: str, make: Callable[[int], Any], size: int, samples: int, corpus: str
) -> dict[str, Any]:
    adapter = make(size)
    texts = CORPORA[corpus](size, size)
    rows = [{"content": text, "user_id": "bench", "agent_id": "main", "metadata": meta} for text, meta in texts]
    others = [{**row, "agent_id": "other"} for row in rows]
    start = time.perf_counter()
    await adapter.add_many(rows)
    batch_s = time.perf_counter() - start
    await adapter.add_many(others)

    extra = CORPORA[corpus](samples, size + 1)
    adds = await time_each([
        (lambda t=t, m=m: adapter.add(t, "bench", "main", m)) for t, m in extra
    ])
    queries = make_queries(texts, samples, seed=size)
    searches = await time_each([(lambda q=q: adapter.search(q, "bench", "main", limit=10)) for q in queries])
    filtered = await time_each([
        (lambda q=q: adapter.search(q, "bench", "main", limit=10, filters={"gene": "TP53"})) for q in queries
    ])
    lists = await time_each([(lambda: adapter.get_all("bench", "main", limit=10)) for _ in range(samples)])
    if hasattr(adapter, "aclose"):
        await adapter.aclose()
    return {
        "adapter": name,
        "corpus": corpus,
        "size": size,
        "add_many_per_s": round(size / batch_s),
        "add": percentiles(adds),
        "search": percentiles(searches),
        "search_filtered": percentiles(filtered),
        "get_all": percentiles(lists),
    }


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        factories = adapter_factories(Path(tmp))
        for name in args.adapters:
            for size in args.sizes:
                if name == "memory" and size > args.memory_max:
                    continue  # the in-memory adapter scans in Python; it is for tests, not 100k stores
                for corpus in args.corpus:
                    results.append(await bench_one(name, factories[name], size, args.samples, corpus))
                    print(f"  done {name} @ {size} ({corpus})", file=sys.stderr)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--adapters", default="sqlite,memory", type=lambda s: s.split(","))
    parser.add_argument("--corpus", default="varied", type=lambda s: s.split(","),
                        help="varied (Zipf vocabulary, like real notes) and/or templates (worst case)")
    parser.add_argument("--samples", type=int, default=200, help="timed calls per operation")
    parser.add_argument("--memory-max", type=int, default=10_000, help="largest size for the in-memory adapter")
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    table = [
        {
            "adapter": r["adapter"], "corpus": r["corpus"], "size": r["size"], "add_many/s": r["add_many_per_s"],
            "add p50": r["add"]["p50_ms"], "add p95": r["add"]["p95_ms"],
            "search p50": r["search"]["p50_ms"], "search p95": r["search"]["p95_ms"],
            "filtered p95": r["search_filtered"]["p95_ms"],
            "get_all p50": r["get_all"]["p50_ms"], "get_all p95": r["get_all"]["p95_ms"],
        }
        for r in results
    ]
    print("times in ms")
    print_table(table, list(table[0]))
    text = dump(results)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


if __name__ == "__main__":
    main()
