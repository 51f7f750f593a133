"""When each process of a streamed span import works and when it waits, and streamed against one process.

    python bench/otel_timeline.py                       # 100k spans, 3 pairs, keyword-only store
    python bench/otel_timeline.py --spans 50000 --pairs 5 --timeline

The span file is bench/otel_import.py's (the real OTel SDK's spans). Each pair imports it twice into
fresh SQLite files (``?embedder=none``), once streamed (a second process reads, checks and plans it,
see memkit/otel/_stream.py; streamed here whatever the load average) and once in this process, the
order alternating from pair to pair, so that both see the same neighbours' load. Reported for each
import: wall spans/s, CPU µs a span of this process and of the child, and the load average; for a
streamed one also its timeline, from
``_stream.TIMELINE`` (both processes' events on the machine's monotonic clock) and from wrappers
put here around the store's per-chunk steps (``_sqlite/_step_rows``: rows built, inserted, recalls,
commit):

* ``child_ready_ms``: from the spawn to the child's first planned chunk sent (its interpreter start,
  memkit's import, reading and decoding the file, planning the first chunk);
* ``writer_idle_ms``: time the store's writer thread waited on the pipe for the child (reading
  included, unpickling not), in all and after the first chunk arrived;
* ``child_blocked_ms``: time the child waited for the pipe to take a chunk (this process behind);
* ``tail_ms``: from the child's last message to the commit (the last chunks' rows and inserts, the
  recalls, the commit), with the recalls and the commit on their own.

``--timeline`` also prints every event. This is a measuring tool, not a rate for the docs' table
(bench/otel_import.py gives that).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, os.environ.get("MEMKIT_BENCH_ROOT") or str(Path(__file__).resolve().parents[1]))

import memkit
from bench._util import dump, load_average, print_table
from bench.otel_import import make_file
from memkit._recall import _recording
from memkit.adapters._sqlite import _step_rows
from memkit.otel import _stream, import_otlp

_WRITER: list[tuple[float, str, str, int]] = []  # the store's side, from the wrappers below


def _wrap(module: Any, name: str, what: str, count: Callable[..., int] = lambda *a: 0) -> None:
    inner = getattr(module, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        result = inner(*args, **kwargs)
        _WRITER.append((start, "writer", what, count(*args)))
        _WRITER.append((time.perf_counter(), "writer", what + " end", count(*args)))
        return result

    setattr(module, name, timed)


def _instrument() -> None:
    _wrap(_step_rows, "step_rows", "rows", lambda steps, *a: len(steps))
    _wrap(_step_rows, "insert_memories", "insert", lambda db, rows, *a: len(rows))
    _wrap(_recording, "checked_bodies", "recalls checked", lambda bodies, *a: len(bodies))
    _wrap(_step_rows, "recall_rows", "recall rows", lambda bodies, *a: len(bodies))
    transaction = _step_rows.write_transaction  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def timed_transaction(db: Any) -> Iterator[None]:
        with transaction(db):
            _WRITER.append((time.perf_counter(), "writer", "begin", 0))
            yield
            _WRITER.append((time.perf_counter(), "writer", "commit", 0))
        _WRITER.append((time.perf_counter(), "writer", "committed", 0))

    _step_rows.write_transaction = timed_transaction  # type: ignore[attr-defined]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _one(path: Path, db: Path, n: int, streamed: bool, query: str = "?embedder=none") -> tuple[dict[str, Any], list[tuple[float, str, str, int]]]:
    timeline: list[tuple[float, str, str, int]] = []
    _WRITER.clear()
    previous = _stream.STREAM_MIN_BYTES
    if not streamed:
        _stream.STREAM_MIN_BYTES = 1 << 62
    elif hasattr(_stream, "TIMELINE"):
        _stream.TIMELINE = timeline
    load = getattr(_stream, "_load", None)
    if streamed and load is not None:
        _stream._load = lambda: 0.0  # streamed whatever the load: this compares the two ways
    try:
        mem = memkit.open(query if query.startswith("postgresql") else f"sqlite:///{db}{query}")
        start, cpu, child = time.perf_counter(), time.process_time(), _children_cpu()
        report = import_otlp(mem, path, user_id="bench", agent_id="agent")
        end = time.perf_counter()
        cpu, child = time.process_time() - cpu, _children_cpu() - child
        assert report.steps == n
        mem.close()
    finally:
        _stream.STREAM_MIN_BYTES = previous
        if load is not None:
            _stream._load = load
        if hasattr(_stream, "TIMELINE"):
            _stream.TIMELINE = None
    row = {
        "import": "streamed" if streamed else "one process", "spans_per_s": round(n / (end - start)),
        "cpu_us_parent": round(cpu * 1e6 / n, 1), "cpu_us_child": round(child * 1e6 / n, 1),
        "load": load_average().split()[0],
    }
    events = sorted([(start, "parent", "call", 0), *timeline, *_WRITER, (end, "parent", "return", 0)])
    if streamed and timeline:
        row.update(_summary(events, start, end))
    return row, [(t - start, who, what, k) for t, who, what, k in events]


def _summary(events: list[tuple[float, str, str, int]], start: float, end: float) -> dict[str, Any]:
    def at(who: str, what: str, last: bool = False) -> float:
        times = [t for t, w, x, _ in events if w == who and x == what]
        return (times[-1] if last else times[0]) if times else float("nan")

    def ms(seconds: float) -> int:
        return round(seconds * 1e3)

    idle = first_chunk_idle = 0.0
    waiting = None
    got_first = False
    blocked = 0.0
    sending = None
    for t, who, what, _ in events:
        if who == "parent" and what == "wait":
            waiting = t
        elif who == "parent" and what == "read" and waiting is not None:
            idle += t - waiting
            if got_first:
                first_chunk_idle += t - waiting
            got_first = True
            waiting = None
        elif who == "child" and what == "send":
            sending = t
        elif who == "child" and what == "sent" and sending is not None:
            blocked += t - sending
            sending = None
    done = at("child", "done")
    return {
        "child_python_ms": ms(at("child", "python") - at("parent", "spawn")),
        "child_imports_ms": ms(at("child", "imported") - at("child", "python")),
        "child_read_ms": ms(at("child", "decoded") - at("parent", "spawn")),
        "child_ready_ms": ms(at("child", "send") - at("parent", "spawn")),
        "first_rows_ms": ms(at("writer", "rows") - start),
        "writer_idle_ms": ms(idle), "idle_after_first_ms": ms(first_chunk_idle),
        "child_blocked_ms": ms(blocked), "child_done_ms": ms(done - start),
        "tail_ms": ms(end - done),
        "recalls_ms": ms(at("writer", "recall rows end", True) - at("writer", "recalls checked", True)),
        "commit_ms": ms(at("writer", "committed", True) - at("writer", "commit", True)),
        "wall_ms": ms(end - start),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--timeline", action="store_true", help="print every event of each streamed import")
    parser.add_argument("--streamed-only", action="store_true")
    parser.add_argument("--embedder", action="store_true", help="the default embedder instead of keyword-only")
    parser.add_argument("--postgres", action="store_true", help="into a PostgreSQL store (default embedder)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    _instrument()
    table: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        server = None
        if args.postgres:
            from memkit.testing import PostgresServer

            server = stack.enter_context(PostgresServer())
        path = Path(tmp) / "spans.otlp.json"
        n = make_file(path, args.spans)
        for pair in range(args.pairs):
            order = (True,) if args.streamed_only else (True, False) if pair % 2 == 0 else (False, True)
            for stream in order:
                db = Path(tmp) / f"import-{pair}-{stream}.db"
                query = "" if args.embedder else "?embedder=none"
                if server is not None:
                    query = server.url(f"import{pair}{int(stream)}")
                row, events = _one(path, db, n, stream, query)
                table.append({"pair": pair, **row})
                if stream and args.timeline and not args.json:
                    for t, who, what, k in events:
                        print(f"{t * 1e3:9.1f} ms  {who:6}  {what}{f' ({k})' if k else ''}")
                db.unlink(missing_ok=True)
    if args.json:
        print(dump(table))
        return
    columns = ["pair", "import", "spans_per_s", "cpu_us_parent", "cpu_us_child", "load"]
    print_table(table, columns)
    streamed = [r for r in table if r["import"] == "streamed" and "wall_ms" in r]
    if streamed:
        keys = [k for k in streamed[0] if k.endswith("_ms")]
        print_table([{"ms": k, "median": statistics.median(r[k] for r in streamed),
                      "each": " ".join(str(r[k]) for r in streamed)} for k in keys], ["ms", "median", "each"])


if __name__ == "__main__":
    main()
