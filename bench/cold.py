"""Cold first search: the first search of a big namespace in a process that just opened the store.

Run ``python bench/cold.py`` (``--size``, ``--runs``). The store is built with the default embedder
the way a bulk import does it: ``add_many`` in chunks of 20,000, the last chunk in a process of its
own that then closes the store, in two scenarios:

* ``searched_before_close``: that process searches once before closing (the search saves the keyword
  index and the vector snapshot in the file, as it always has);
* ``closed_unsearched``: it closes without a search (closing saves what the import left stale).

``close_s`` is how long that ``close`` took. Then each run starts a fresh Python process that opens
the store and times ``open``, the first search and a second search, in each mode (``keyword``,
``semantic``, ``hybrid``) and in three states of the file (the last two on the first scenario only):

* ``saved``: keyword index and vector snapshot saved (what a store looks like after use);
* ``no_vector_snapshot``: the keyword index saved, the vector snapshot not (memkit before vector
  snapshots: every vector read and the namespace's statistics recomputed);
* ``nothing_saved``: neither (every text analysed, every vector read and recomputed; what a bulk
  import closed unsearched left before closing saved it).

``second_at_once_ms`` is a second search issued as soon as the first returned (with a snapshot it
waits for one step of reading the rest of the vectors at most); ``then_behind_ms`` the rest of the
work the first search left queued behind it on the store's thread; ``later_search_ms`` a search
after that. The runs that find nothing saved do not save
(so every run starts from the same file); one more run times what saving costs: the first search
without a vector snapshot, then the snapshot written behind it (``save_ms``). Every mode's first
results (ids and scores) are compared across the scenarios and states (``same_results``). Reported:
medians over the runs, in milliseconds, as a table and as JSON (also written to ``--out``), with
the load average. ``--store PATH`` keeps the built store (all but the last chunk) and reuses it.

``--cli`` instead times each ``memkit`` command started cold (a fresh process, as a shell script
runs it) on the trace store of ``bench/panels.py`` (``--cli-runs`` runs x 10 steps with recalls):
median of 5 of the CPU time (the process and its children) and the wall time, goal 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._util import dump, print_table
from bench.run import make_queries, make_varied

MODES = ("keyword", "semantic", "hybrid")
STATES = ("saved", "no_vector_snapshot", "nothing_saved")

_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from memkit.adapters import SQLiteAdapter
import asyncio
path, first, second, mode, save = sys.argv[1:6]
store = SQLiteAdapter(path)
if save == "no":
    store._keywords.resave_min = store._vectors.resave_min = 10**12
t1 = time.perf_counter()
async def main():
    a = time.perf_counter()
    hits = await store.search(first, "bench", "cold", limit=10, mode=mode)
    b = time.perf_counter()
    await store.search(second, "bench", "cold", limit=10, mode=mode)  # at once: behind one step at most
    c = time.perf_counter()
    while store._vectors.unsettled:  # what the first search left to do behind it, step by step
        store._worker.call(lambda: None)
    d = time.perf_counter()
    await store.search(second, "bench", "cold", limit=10, mode=mode)
    e = time.perf_counter()
    print(json.dumps({"open": (t1 - t0) * 1e3, "first": (b - a) * 1e3, "at_once": (c - b) * 1e3,
                      "save": (d - c) * 1e3, "second": (e - d) * 1e3, "hits": [[h.id, h.score] for h in hits]}))
asyncio.run(main())
store.close()
"""


CHUNK = 20_000
SCENARIOS = ("searched_before_close", "closed_unsearched")


def _items(texts: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"content": t, "user_id": "bench", "agent_id": "cold", "metadata": m} for t, m in texts]


def build(path: Path, size: int) -> None:
    """Every chunk of the import but the last, written and closed without saving any snapshot."""
    import asyncio

    from memkit.adapters import SQLiteAdapter

    texts = make_varied(size, seed=11)
    store = SQLiteAdapter(path)
    store._keywords.resave_min = store._vectors.resave_min = 10**12

    async def fill() -> None:
        for start in range(0, size - CHUNK, CHUNK):
            await store.add_many(_items(texts[start : start + CHUNK]))
        await store.add("one more in another namespace", "bench", "other")

    asyncio.run(fill())
    store.close()


_FINISH = """
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[4])
from bench.cold import CHUNK, _items
from bench.run import make_varied
from memkit.adapters import SQLiteAdapter
path, size, search = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "yes"
from datetime import datetime, timedelta, timezone
# The same ids and times in both scenarios' files, so their answers can be compared.
t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
last = [{**item, "id": f"last-{i}", "created_at": t0 + timedelta(microseconds=i)}
        for i, item in enumerate(_items(make_varied(size, seed=11)[size - CHUNK:]))]
store = SQLiteAdapter(path)
async def main():
    await store.add_many(last)
    if search:  # as an application that searched would have done (saves both indexes)
        await store.search("kinase", "bench", "cold", mode="hybrid")
asyncio.run(main())
t = time.perf_counter()
store.close()
print(json.dumps({"close_s": time.perf_counter() - t}))
"""


def finish(path: Path, size: int, searched: bool) -> float:
    """The import's last chunk in a process of its own, which then closes the store; the close's seconds."""
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", _FINISH, str(path), str(size), "yes" if searched else "no", root],
                         check=True, capture_output=True, text=True).stdout
    close_s: float = json.loads(out)["close_s"]
    return close_s


def _child(path: Path, first: str, second: str, mode: str, save: bool) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), first, second, mode, "yes" if save else "no"],
        check=True, capture_output=True, text=True,
    ).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def _forget(path: Path, tables: tuple[str, ...]) -> None:
    conn = sqlite3.connect(path)
    for table in tables:
        conn.execute(f"DELETE FROM {table}")  # noqa: S608 - fixed names
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def run(size: int, runs: int, store: Path | None = None, states: tuple[str, ...] = STATES) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    closes: dict[str, float] = {}
    snapshot_mb: dict[str, float] = {}
    queries = make_queries(make_varied(size, seed=11), 64, seed=5)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base.db"
        start = time.perf_counter()
        if store is not None and store.exists():  # a copy of one built earlier (all but the last chunk)
            shutil.copy(store, base)
        else:
            build(base, size)
            if store is not None:
                shutil.copy(base, store)
        built = time.perf_counter() - start
        first_hits: dict[tuple[str, str, str], list[Any]] = {}
        saving: dict[str, Any] = {"first": float("nan"), "at_once": float("nan"), "save": float("nan")}
        for scenario in SCENARIOS:
            path = Path(tmp) / f"{scenario}.db"
            shutil.copy(base, path)
            closes[scenario] = round(finish(path, size, searched=scenario == "searched_before_close"), 2)
            snapshot_mb[scenario] = round(sqlite3.connect(path).execute(
                "SELECT coalesce((sum(length(head)) + sum(length(coarse)) + sum(length(matrix))) / 1e6, 0)"
                " FROM vector_snapshots"
            ).fetchone()[0], 1)
            for state in states if scenario == SCENARIOS[0] else ("saved",):
                if state == "no_vector_snapshot":
                    _forget(path, ("vector_snapshots",))
                    saving = _child(path, queries[0], queries[1], "semantic", save=True)
                    _forget(path, ("vector_snapshots",))  # what that run saved goes again
                elif state == "nothing_saved":
                    _forget(path, ("keyword_snapshots", "vector_snapshots"))
                for mode in MODES:
                    samples = [_child(path, queries[2 * i], queries[2 * i + 1], mode, save=False)
                               for i in range(runs)]
                    first_hits[(scenario, state, mode)] = samples[0]["hits"]
                    rows.append({
                        "scenario": scenario, "state": state, "mode": mode,
                        "open_ms": round(statistics.median(s["open"] for s in samples), 1),
                        "first_search_ms": round(statistics.median(s["first"] for s in samples), 1),
                        "second_at_once_ms": round(statistics.median(s["at_once"] for s in samples), 1),
                        "then_behind_ms": round(statistics.median(s["save"] for s in samples), 1),
                        "later_search_ms": round(statistics.median(s["second"] for s in samples), 1),
                    })
    same = {mode: len({json.dumps(h) for (_, _, m), h in first_hits.items() if m == mode}) == 1 for mode in MODES}
    return {
        "size": size, "runs": runs, "build_s": round(built, 1), "load_average": [round(x, 2) for x in os.getloadavg()],
        "close_s": closes,
        "snapshot_mb": snapshot_mb,
        "semantic_first_search_without_snapshot_ms": round(saving["first"], 1),
        "save_ms": round(saving["at_once"] + saving["save"], 1),  # one search included
        "same_results": same,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results/cold.json"))
    parser.add_argument("--store", type=Path, default=None,
                        help="keep the built store here and reuse it on the next run (same --size; with --cli,"
                        " a folder of one store per size)")
    parser.add_argument("--states", type=lambda s: tuple(s.split(",")), default=STATES,
                        help=f"a subset of {','.join(STATES)}, in that order")
    parser.add_argument("--cli", action="store_true", help="time the memkit commands instead (see above)")
    parser.add_argument("--cli-runs", type=int, nargs="+", default=[300, 3000])
    args = parser.parse_args(argv)
    if args.cli:
        return cli(args.cli_runs, args.store)
    report = run(args.size, args.runs, args.store, args.states)
    print_table(report["rows"], list(report["rows"][0]))
    print(dump(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(dump(report) + "\n")
    return report


def cli(sizes: list[int], store: Path | None = None) -> dict[str, Any]:
    """Each ``memkit`` command as a fresh process on a store of ``size`` runs (``store``: keep and reuse it)."""
    from bench.panels import build, measure_cli

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memkit-bench-cli-") as tmp:
        for size in sizes:
            path = (store or Path(tmp)) / f"cli-{size}.db"
            path.parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{path}?embedder=none"
            if not path.exists():
                build(path, size)
            rows += measure_cli(url, size, "wf-1/run-1")
    report = {"load_average": [round(x, 2) for x in os.getloadavg()], "rows": rows}
    print_table(rows, ["runs", "action", "wall_ms", "cpu_ms", "goal_ms", "met"])
    print(dump(report))
    return report


if __name__ == "__main__":
    main()
