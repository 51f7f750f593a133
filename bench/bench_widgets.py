"""How responsive the panels stay on a big store: 100,000 memories and 2,000 workflow runs.

Builds a SQLite store with ``--memories`` memories in all: ``--runs`` workflow runs
(one of ``--long-run`` steps, the others 5-15 steps, every 7th failing), one big
namespace of plain notes (60,000 at the defaults) and the demo sample. Then times what
a researcher does in the Dashboard, TraceReplay, NamespaceBrowser and GraphExplorer.
Prints median and max milliseconds over ``--repeat`` runs (the target is 300 ms each).

    .venv/bin/python bench/bench_widgets.py --memories 100000 --runs 2000
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
from memkit._demo import demo_items, run_items
from memkit.widgets import Dashboard, GraphExplorer, NamespaceBrowser, TraceReplay

GENES = ["TP53", "BRCA1", "EGFR", "KRAS", "MYC", "PTEN"]


def _fill_runs(mem: memkit.Memory, runs: int, long_run: int) -> int:
    """``runs`` runs over three agents; returns how many steps were stored."""
    rng = random.Random(5)
    batch: list[dict[str, object]] = run_items("lab", "executor", "long-run", "r-long", long_run, fail_every=97)
    stored = 0
    for n in range(runs - 1):
        agent = ("planner", "bioinformatics", "executor")[n % 3]
        batch += run_items("lab", agent, f"wf-{n % 40}", f"run-{n}", rng.randint(5, 15), seed=n,
                           fail_every=7 if n % 7 == 0 else 0)
        if len(batch) >= 10_000:
            mem.add_many(batch)
            stored += len(batch)
            batch = []
    mem.add_many(batch)
    return stored + len(batch)


BIG = 60_000  # the namespace the browser pages and searches; the rest of the notes go next door


def _fill(mem: memkit.Memory, n: int) -> None:
    rng = random.Random(3)
    batch = []
    for i in range(n):
        gene = rng.choice(GENES)
        user, agent = ("big", "bioinformatics") if i < BIG else ("lab", "notes")
        batch.append({"content": f"note {i}: {gene} variant in sample S{rng.randint(1, 400)}", "user_id": user,
                      "agent_id": agent, "metadata": {"gene": gene, "n": i}})
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
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--long-run", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, memkit.open(f"sqlite:///{Path(tmp) / 'big.db'}?embedder=none") as mem:
        start = time.perf_counter()
        steps = _fill_runs(mem, args.runs, args.long_run)
        _fill(mem, max(args.memories - steps - len(demo_items()), 0))
        stats = mem.stats()
        print(f"store: {stats.memories:,} memories ({stats.traces:,} trace steps in {args.runs + 18:,} runs), "
              f"filled in {time.perf_counter() - start:.1f} s")
        _trace_cases(mem, args.repeat)
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
            ("keyword search in the 60k namespace (top 20)", search),
            ("open one memory", select),
            ("refresh namespaces", browser.refresh),
            ("GraphExplorer(mem) + draw 100k namespace (newest 300)", lambda: _draw(mem)),
        ]
        for name, fn in cases:
            med, worst = _time(fn, args.repeat)
            print(f"{name:<55} {med:>10.1f} {worst:>10.1f}")


def _trace_cases(mem: memkit.Memory, repeat: int) -> None:
    panel = TraceReplay(mem)
    runs = panel.all_runs
    assert runs is not None
    other = next(r for r in runs.index if r != "long-run/r-long" and r.startswith("wf-"))

    def filter_runs() -> None:
        panel.filters = {"status": "failed", "agent_id": "bioinformatics"}
        panel.filters = {"min_duration": 60}
        panel.filters = {}

    def open_long() -> None:
        panel.run = ""
        panel.run = "long-run/r-long"

    def open_step() -> None:
        panel.step = -1
        panel.step = 500

    def compare() -> None:
        panel.compare_with = ""
        panel.compare_with = other

    turns = iter(range(1_000_000))

    def flip() -> None:
        panel.sort = {"column": "duration_s", "descending": next(turns) % 2 == 0}

    open_long()
    cases: list[tuple[str, Callable[[], object]]] = [
        ("Dashboard(mem) (all three tabs)", lambda: Dashboard(mem)),
        ("TraceReplay(mem) (read every trace, run list)", lambda: TraceReplay(mem)),
        ("filter the run list (x3, per filter)", filter_runs),
        ("sort the run list by duration (each way in turn)", flip),
        ("open the 1,000-step run's timeline", open_long),
        ("open one step", open_step),
        ("compare two runs", compare),
    ]
    print(f"{'action':<55} {'median ms':>10} {'max ms':>10}")
    for name, fn in cases:
        med, worst = _time(fn, repeat)
        if name.startswith("filter"):
            med, worst = med / 3, worst / 3
        print(f"{name:<55} {med:>10.1f} {worst:>10.1f}")


def _draw(mem: memkit.Memory) -> None:
    explorer = GraphExplorer(mem)
    explorer.namespace.value = ("big", "bioinformatics")
    explorer.draw_button.click()


if __name__ == "__main__":
    main()
