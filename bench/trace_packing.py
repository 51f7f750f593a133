"""Is the SQLite store's packed trace table worth its code? ``traces_frame`` and ``memkit runs`` read
the same steps from the packed table memkit writes (each step's numbers and text codes in one blob,
its id, error, parameters and result in one unit-separated cell, read in chunks as two
``group_concat``s) and from a plain table beside it in the same file (one column per field, texts as
texts, read with one ``SELECT``), alternated, medians.

    python bench/trace_packing.py --steps 100000 --rounds 5
    python bench/trace_packing.py --steps 1000000 --rounds 3   # builds the store once: minutes

The store is built with ``add_many`` (the steps of ``bench/frames.py``) in ``bench/.cache/`` and reused;
the plain table is filled from the same rows. Both readers parse the JSON objects the same way
(:func:`memkit.adapters._sqlite._traces._object_columns`): only the storage and its transfer differ.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from bench._util import load_average
from bench.frames import fill
from memkit import frames
from memkit._core._runs import RunScope, RunSummary, summarise_rows
from memkit.adapters._sqlbase import trace_filter
from memkit.adapters._sqlite import _adapter, _reads
from memkit.adapters._sqlite._adapter import SQLiteAdapter
from memkit.adapters._sqlite._sql import SQLITE
from memkit.adapters._sqlite._trace_writes import step_fields
from memkit.adapters._sqlite._traces import (
    MISSING,
    TRACE_CODES,
    TRACE_NUMBERS,
    _json_column,
    _object_columns,
    gc_paused,
)
from memkit.traces._items import status_of

_PLAIN = """
CREATE TABLE plain_steps (
    seq INTEGER PRIMARY KEY, id TEXT NOT NULL, created_us INTEGER NOT NULL, user_id TEXT NOT NULL,
    agent_id TEXT NOT NULL, workflow_id TEXT, run_id TEXT, step_name TEXT, tool TEXT, status TEXT,
    step_index INTEGER, started_us INTEGER, duration_us INTEGER, retry_count INTEGER,
    error TEXT, parameters TEXT, result TEXT
)"""
_COLUMNS = ("seq, created_us, user_id, agent_id, workflow_id, run_id, step_name, tool, status, step_index,"
            " started_us, duration_us, retry_count, id, error, parameters, result")


def fill_plain(path: Path) -> None:
    """The plain table: every step's fields as memkit's one builder reads them, a column each."""
    with sqlite3.connect(path, isolation_level=None) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'plain_steps'").fetchone():
            return
        db.execute("BEGIN")
        db.execute(_PLAIN)
        db.execute("CREATE INDEX plain_steps_workflow ON plain_steps (workflow_id)")
        source = db.execute("SELECT seq, created_us, id, user_id, agent_id, metadata FROM memories ORDER BY seq")
        while chunk := source.fetchmany(20_000):
            rows = []
            for seq, created, memory_id, user, agent, metadata in chunk:
                fields = step_fields(memory_id, user, agent, json.loads(metadata))
                if fields is None:
                    continue
                texts, cells, index, started, lasted, retries = fields
                _, error, params, result = cells.rsplit("\x1f", 3)
                numbers = [None if n == MISSING else n for n in (index, started, lasted, retries)]
                rows.append((seq, memory_id, created, *texts, *numbers, json.loads(error),
                             None if params == "null" else params, None if result == "null" else result))
            db.executemany(f"INSERT INTO plain_steps VALUES ({','.join('?' * 17)})", rows)  # noqa: S608
        db.execute("COMMIT")


def plain_columns(db: sqlite3.Connection, path: str, workflow_id: str | None, agent_id: str | None,
                  user_id: str | None, status: str | None, since_us: int | None) -> dict[str, Any]:
    """``trace_columns`` from the plain table: one SELECT, a column per field."""
    values = {"workflow_id": workflow_id, "agent_id": agent_id, "user_id": user_id, "status": status}
    tests = {name: f"{name} = ?" for name in values}
    where, params = trace_filter(SQLITE, tests, "created_us >= ?", values, since_us)
    with gc_paused():
        rows = db.execute(f"SELECT {_COLUMNS} FROM plain_steps WHERE {where}", params).fetchall()  # noqa: S608
        if not rows:
            return {"id": [], "error": [], **{name: np.zeros(0, dtype=np.int64) for name in TRACE_NUMBERS}}
        columns = list(zip(*rows, strict=True))
        out: dict[str, Any] = {"id": list(columns[13])}
        for j, name in enumerate(TRACE_NUMBERS):
            if name in TRACE_CODES:
                out[name] = np.array(columns[j], dtype=object)
            else:
                out[name] = np.fromiter((MISSING if v is None else v for v in columns[j]), dtype=np.int64,
                                        count=len(rows))
        out["error"] = _json_column([json.dumps(e) for e in columns[14]])
        out.update(_object_columns([p or "null" for p in columns[15]], "params"))
        out.update(_object_columns([r or "null" for r in columns[16]], "result"))
    return out


def plain_run_summaries(db: sqlite3.Connection, op: RunScope, recalls: Any, marks: Any) -> list[RunSummary]:
    """``run_summaries`` from the plain table (the same summary, the same recall and mark counts)."""
    where, params = ["1"], []
    for column, value in (("workflow_id", op.workflow_id), ("agent_id", op.agent_id), ("user_id", op.user_id)):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    db.execute("BEGIN")
    try:
        sql = ("SELECT seq, created_us, user_id, agent_id, workflow_id, run_id, step_name, tool, status, step_index,"
               " started_us, duration_us, retry_count, error FROM plain_steps WHERE ")
        steps = db.execute(sql + " AND ".join(where), params).fetchall()
        indexes = recalls(op)
        marked = marks(op)
    finally:
        db.execute("COMMIT")
    per_index = {key: Counter(map(int, listed.split(","))) for key, listed in indexes.items() if listed}
    by_run: dict[tuple[Any, ...], dict[str, int]] = {}
    for user, agent, workflow, run, label, n in marked:
        by_run.setdefault((user, agent, workflow, run), {})[label] = n
    states: dict[Any, str] = {}
    rows = []
    for (_, created, user, agent, workflow, run, name, tool, status, index, started, duration, retries,
         error) in sorted(steps, key=lambda s: (s[1], s[0])):
        key = (user, agent, workflow, run)
        found = per_index.get(key)
        state = states.get(status)
        if state is None:
            state = states[status] = status_of(status)
        rows.append((key, (state, index, name, tool, started, duration, retries,
                           error if state == "failed" else None,
                           found.get(index, 0) if found is not None and index is not None else 0, created)))
    return summarise_rows(rows, by_run)


def _frame(store: SQLiteAdapter) -> tuple[float, float]:
    """Wall and CPU seconds (all the process's threads: the packed reader fetches on a second one)."""
    start, cpu = time.perf_counter(), time.process_time()
    frame = frames.traces_frame(store, usage=False)
    took = time.perf_counter() - start, time.process_time() - cpu
    assert len(frame)
    return took


def _runs(url: str) -> tuple[float, float]:
    start, cpu = time.perf_counter(), time.process_time()
    reads = _reads.open_reads(url)  # what `memkit runs` opens and reads
    assert reads is not None
    with reads:
        assert reads.run_summaries()
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cache = Path(__file__).parent / ".cache"
    cache.mkdir(exist_ok=True)
    path = cache / f"packing_{args.steps}.db"
    store = SQLiteAdapter(path, embedder=None)
    if asyncio.run(store.stats()).traces != args.steps:
        asyncio.run(store.reset())
        start = time.perf_counter()
        asyncio.run(fill(store, args.steps))
        store._written.clear()  # no keyword index saved at close: this measures traces only
        print(f"built {path} ({args.steps:,} steps) in {time.perf_counter() - start:.0f} s")
    store.close()
    fill_plain(path)
    url = f"sqlite:///{path}"
    packed = (_adapter.trace_columns, _reads.run_summaries)
    plain = (plain_columns, plain_run_summaries)
    # Same frames and the same runs from both tables, before any timing.
    store = SQLiteAdapter(path, embedder=None)
    results = []
    for columns, summaries in (packed, plain):
        _adapter.trace_columns, _reads.run_summaries = columns, summaries  # type: ignore[assignment]
        reads = _reads.open_reads(url)
        assert reads is not None
        with reads:
            results.append((frames.traces_frame(store, usage=False), reads.run_summaries()))
    assert results[0][0].equals(results[1][0]) and results[0][1] == results[1][1]
    times: dict[str, dict[str, list[tuple[float, float]]]] = {
        "packed": {"frame": [], "runs": []}, "plain": {"frame": [], "runs": []}}
    for round_ in range(args.rounds):
        order = [("packed", packed), ("plain", plain)]
        for name, (columns, summaries) in order if round_ % 2 == 0 else order[::-1]:
            _adapter.trace_columns, _reads.run_summaries = columns, summaries  # type: ignore[assignment]
            times[name]["frame"].append(_frame(store))
            times[name]["runs"].append(_runs(url))
    store.close()
    print(f"{args.steps:,} steps, {len(results[0][1]):,} runs, {args.rounds} alternated rounds, load {load_average()}")
    for what, label in (("frame", "traces_frame(usage=False)"), ("runs", "memkit runs (open + run_summaries)")):
        for j, clock in enumerate(("wall", "CPU")):
            a = statistics.median(t[j] for t in times["packed"][what])
            b = statistics.median(t[j] for t in times["plain"][what])
            print(f"{label:36} {clock:4} packed {a:7.3f} s  plain {b:7.3f} s  plain/packed {b / a:5.2f}x")


if __name__ == "__main__":
    main()
