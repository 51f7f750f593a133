"""How responsive the panels stay on a big store (issue 7: 100,000 memories).

Builds a SQLite store with ``--memories`` memories (one big namespace plus the
demo sample), then times what a researcher does in NamespaceBrowser, TraceReplay
and GraphExplorer. Prints median and max milliseconds over ``--repeat`` runs.

    .venv/bin/python bench/bench_widgets.py --memories 100000
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import memkit
from memkit._demo import demo_items
from memkit.widgets import GraphExplorer, NamespaceBrowser, TraceReplay

GENES = ["TP53", "BRCA1", "EGFR", "KRAS", "MYC", "PTEN"]


def _fill(mem: memkit.Memory, n: int) -> None:
    rng = random.Random(3)
    batch = []
    for i in range(n):
        gene = rng.choice(GENES)
        batch.append({"content": f"note {i}: {gene} variant in sample S{rng.randint(1, 400)}", "user_id": "big",
                      "agent_id": "bioinformatics", "metadata": {"gene": gene, "n": i}})
        if len(batch) == 10_000:
            mem.add_many(batch)
            batch = []
    if batch:
        mem.add_many(batch)
    mem.add_many(demo_items())


def _time(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs), max(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, memkit.open(f"sqlite:///{Path(tmp) / 'big.db'}?embedder=none") as mem:
        start = time.perf_counter()
        _fill(mem, args.memories)
        print(f"store: {mem.stats().memories:,} memories, filled in {time.perf_counter() - start:.1f} s")
        browser = NamespaceBrowser(mem)

        def deep_page() -> None:
            browser.offset = 50_000 if args.memories > 50_000 else 0
            browser.show_page()

        def filtered() -> None:
            browser.filters.value = '{"gene": "TP53"}'
            browser.search_button.click()
            browser.next_button.click()
            browser.filters.value = ""

        def search() -> None:
            browser.query.value = "TP53 variant"
            browser.search_button.click()
            browser.query.value = ""

        def switch() -> None:
            browser.namespace.value = ("alice", "planner")
            browser.namespace.value = ("big", "bioinformatics")

        def select() -> None:
            browser.rows.value = browser.items[0].id
            browser.rows.value = ""

        cases: list[tuple[str, Callable[[], object]]] = [
            ("NamespaceBrowser(mem) (namespaces + first page)", lambda: NamespaceBrowser(mem)),
            ("switch namespace (alice/planner, then the 100k one)", switch),
            ("next page", lambda: browser.next_button.click()),
            ("page at offset 50,000", deep_page),
            ("filter gene=TP53 + next page", filtered),
            ("keyword search (top 20)", search),
            ("open one memory", select),
            ("refresh namespaces", browser.refresh),
            ("TraceReplay(mem)", lambda: TraceReplay(mem)),
            ("GraphExplorer(mem) + draw 100k namespace (newest 300)", lambda: _draw(mem)),
        ]
        print(f"{'action':<55} {'median ms':>10} {'max ms':>10}")
        for name, fn in cases:
            med, worst = _time(fn, args.repeat)
            print(f"{name:<55} {med:>10.1f} {worst:>10.1f}")


def _draw(mem: memkit.Memory) -> None:
    explorer = GraphExplorer(mem)
    explorer.namespace.value = ("big", "bioinformatics")
    explorer.draw_button.click()


if __name__ == "__main__":
    main()
