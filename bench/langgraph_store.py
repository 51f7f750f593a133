"""MemkitStore (keyword-only SQLite) against LangGraph's own SqliteStore on the reads a graph makes.

Items are spread over ``--namespaces`` LangGraph namespaces ``("users", "u<i>", "memories")``; each
store is filled with the same items, then timed on ``get`` of random keys, ``search(prefix)``
without a query (a page of 10, newest first) and ``list_namespaces(prefix=("users",))``. Process CPU
time (every thread, so memkit's SQLite worker and loop count) and wall time per call; the two stores
run alternately ``--rounds`` times and the medians are reported with the memkit / SqliteStore ratio.

    PYTHONPATH=. python bench/langgraph_store.py --sizes 10000 100000 --rounds 3

(``PYTHONPATH=.``: the memkit of this tree, not the one the virtualenv has installed.)
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore, PutOp
from langgraph.store.sqlite import SqliteStore

from memkit.langgraph import MemkitStore

_WORDS = [f"w{i}" for i in range(3_000)]


def _items(size: int, namespaces: int) -> list[PutOp]:
    rng = random.Random(7)
    return [
        PutOp(("users", f"u{i % namespaces}", "memories"), f"k{i}",
              {"text": " ".join(rng.choice(_WORDS) for _ in range(12)), "n": i})
        for i in range(size)
    ]


def _fill(store: BaseStore, items: list[PutOp]) -> None:
    for start in range(0, len(items), 1_000):
        store.batch(items[start : start + 1_000])


def _timed(fn: Callable[[int], Any], calls: int) -> tuple[float, float]:
    for i in range(3):  # warm: statement caches, first pages
        fn(i)
    cpu, wall = time.process_time(), time.perf_counter()
    for i in range(calls):
        fn(i)
    return (time.process_time() - cpu) / calls * 1e3, (time.perf_counter() - wall) / calls * 1e3


def _operations(size: int, namespaces: int) -> dict[str, tuple[Callable[[BaseStore, int], Any], int]]:
    rng = random.Random(3)
    keys = [rng.randrange(size) for _ in range(2_000)]
    return {
        "get": (lambda s, i: s.get(("users", f"u{keys[i] % namespaces}", "memories"), f"k{keys[i]}"), 1_000),
        "search(prefix)": (lambda s, i: s.search(("users", f"u{keys[i] % namespaces}"), limit=10), 200),
        "list_namespaces": (lambda s, i: s.list_namespaces(prefix=("users",), limit=100), 10),
    }


def _open(kind: str, folder: Path) -> tuple[BaseStore, Callable[[], None]]:
    if kind == "memkit":
        store = MemkitStore(f"sqlite:///{folder}/memkit.db?embedder=none", user_id="bench", agent_id="graph")
        return store, store.close
    manager = SqliteStore.from_conn_string(str(folder / "langgraph.db"))
    sqlite_store = manager.__enter__()
    sqlite_store.setup()
    return sqlite_store, lambda: manager.__exit__(None, None, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--namespaces", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for size in args.sizes:
        items = _items(size, args.namespaces)
        with tempfile.TemporaryDirectory() as tmp:
            stores = {}
            for kind in ("memkit", "sqlitestore"):
                folder = Path(tmp) / kind
                folder.mkdir()
                store, close = _open(kind, folder)
                start = time.perf_counter()
                _fill(store, items)
                print(f"{size:>7} {kind:<12} filled in {time.perf_counter() - start:.1f} s", flush=True)
                stores[kind] = (store, close)
            results: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for _ in range(args.rounds):
                for name, (op, calls) in _operations(size, args.namespaces).items():
                    for kind, (store, _close) in stores.items():
                        results.setdefault((name, kind), []).append(_timed(lambda i, s=store, o=op: o(s, i), calls))
            for _store, close in stores.values():
                close()
        print(f"\n{size} items, {args.namespaces} namespaces, median of {args.rounds} alternated rounds (ms per call)")
        print(f"{'operation':<16} {'memkit cpu':>10} {'sqlite cpu':>10} {'ratio':>6}"
              f" {'memkit wall':>11} {'sqlite wall':>11}")
        for name in _operations(size, args.namespaces):
            mine = results[(name, "memkit")]
            theirs = results[(name, "sqlitestore")]
            cpu_m, cpu_s = statistics.median(c for c, _ in mine), statistics.median(c for c, _ in theirs)
            wall_m, wall_s = statistics.median(w for _, w in mine), statistics.median(w for _, w in theirs)
            print(f"{name:<16} {cpu_m:>10.3f} {cpu_s:>10.3f} {cpu_m / cpu_s:>6.2f} {wall_m:>11.3f} {wall_s:>11.3f}")
        print(flush=True)


if __name__ == "__main__":
    main()
