"""Importing OpenTelemetry spans into SQLite: spans per second, median of several rounds.

    python bench/otel_import.py                  # 100k spans, 3 rounds, keyword-only and default embedder
    python bench/otel_import.py --spans 20000 --rounds 5 --flavour keyword-only

The span file is made once by the real OTel SDK (TracerProvider + in-memory exporter, encoded to
OTLP JSON by memkit.otel.spans_to_otlp): traces of 50 spans each, an agent span over chains over
tools, LLM calls and retrievers with three documents each (every fifth tool span failed).
Each round imports the whole file (69 MB at 100k spans) into a fresh SQLite file with
``import_otlp``, in this process: read, decoded, checked and planned, then the store's writer
thread builds the rows and inserts them and the recalls in one write transaction. What is timed:
from the call to that commit. The checkpoint that then copies the import from the WAL
into the database file runs in the store's writer thread after the import has returned: the close
waits for it, so it is in ``close_cpu_us_per_span``.
Inside: the reading, JSON decoding, span checks and planning, the rows (step texts, their
JSON, trace_steps cells), SQLite's writes (memories, trace_steps, recalls) and, in the "default
embedder" flavour, embedding every step's text. Outside (not in the rate): the store's keyword
index, which is built and saved when the store closes after the import; its CPU time is reported on
its own (``close_cpu_us_per_span``). Reported: the median rate over rounds, per store flavour, by
wall time and by CPU time (all of this process's threads, SQLite's writer included): on the
shared 2-core machine the wall time follows the neighbours' load, the CPU time does not.

The host's speed: before and after each round a fixed pure-Python loop is timed on each core this
process may run on (``core_loop_ms``, best of 3 on each, the round's before and after side by side).
On the shared 2-core machine a core's speed jumps between two levels about 1.6 times apart, from one
second to the next and for each core on its own, whatever this benchmark does. The per-round table
shows each round's rate beside those loops, so that runs of different hours can be compared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import memkit
from bench._util import dump, print_table
from memkit.otel import import_otlp, spans_to_otlp


def make_file(path: Path, n_spans: int, per_trace: int = 50) -> int:
    spans = make_spans(n_spans, per_trace)
    path.write_text(json.dumps(spans_to_otlp(spans)))
    return len(spans)


def make_spans(n_spans: int, per_trace: int = 50) -> Any:
    """The finished SDK spans of ``make_file`` (what an exporter would send)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    made = 0
    while made < n_spans:
        with tracer.start_as_current_span("agent", attributes={"openinference.span.kind": "AGENT",
                                                                "input.value": "plan the assay"}):
            made += 1
            for c in range((per_trace - 1) // 7):
                with tracer.start_as_current_span(f"chain-{c}", attributes={"openinference.span.kind": "CHAIN"}):
                    made += 1
                    for t in range(2):
                        with tracer.start_as_current_span(f"tool-{t}", attributes={
                            "openinference.span.kind": "TOOL", "tool.name": f"blast-{t}",
                            "input.value": json.dumps({"query": f"seq {c} {t}"}), "output.value": "3 hits",
                        }) as span:
                            if (c + t) % 5 == 4:
                                span.set_status(Status(StatusCode.ERROR, "network timeout"))
                        made += 1
                    with tracer.start_as_current_span("llm", attributes={
                        "openinference.span.kind": "LLM", "llm.model_name": "gpt-x",
                        "input.value": "summarise the hits", "output.value": "TP53 looks mutated",
                        "llm.token_count.prompt": 120, "llm.token_count.completion": 12,
                    }):
                        made += 1
                    for r in range(2):
                        attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": f"gene {r}"}
                        for d in range(3):
                            attrs[f"retrieval.documents.{d}.document.id"] = f"m-{c}-{d}"
                            attrs[f"retrieval.documents.{d}.document.content"] = f"fact {d} about gene {r}"
                            attrs[f"retrieval.documents.{d}.document.score"] = 1.0 / (d + 1)
                        with tracer.start_as_current_span("retrieve", attributes=attrs):
                            made += 1
                    with tracer.start_as_current_span("format", attributes={"openinference.span.kind": "CHAIN"}):
                        made += 1
    return exporter.get_finished_spans()


_LOOP = 150_000  # iterations of the reference loop: 20-40 ms


def _loop_s() -> float:
    start = time.perf_counter()
    kept: dict[int, str] = {}
    for i in range(_LOOP):
        kept[i & 1023] = str(i)
    return time.perf_counter() - start


def core_loop_ms() -> list[float]:
    """Milliseconds of a fixed pure-Python loop on each core this process may run on (best of 3 each):
    how fast the host runs each core right now. Empty where a process cannot be pinned (not Linux)."""
    try:
        cores = os.sched_getaffinity(0)
    except AttributeError:
        return []
    times = []
    try:
        for core in sorted(cores):
            os.sched_setaffinity(0, {core})  # this thread only
            times.append(round(min(_loop_s() for _ in range(3)) * 1e3, 1))
    finally:
        os.sched_setaffinity(0, cores)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--flavour", choices=("all", "keyword-only"), default="all")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spans.otlp.json"
        start = time.perf_counter()
        n = make_file(path, args.spans)
        made_s = time.perf_counter() - start
        rows, each_round = [], []
        flavours = (("keyword-only", "?embedder=none"), ("default embedder", ""))
        for flavour, query in flavours if args.flavour == "all" else flavours[:1]:
            rates, cpu_rates, closing, loops = [], [], [], []
            for r in range(args.rounds):
                url = f"sqlite:///{tmp}/import-{flavour[:3]}-{r}.db{query}"
                mem = memkit.open(url)
                before = core_loop_ms()
                start, cpu = time.perf_counter(), time.process_time()
                report = import_otlp(mem, path, user_id="bench", agent_id="agent")
                rates.append(n / (time.perf_counter() - start))
                cpu_rates.append(n / (time.process_time() - cpu))
                after = core_loop_ms()
                loops.extend(before + after)
                each_round.append({"store": f"sqlite {flavour}", "round": r, "spans_per_s": round(rates[-1]),
                                   "core_loop_ms_before": " / ".join(map(str, before)),
                                   "core_loop_ms_after": " / ".join(map(str, after))})
                assert report.steps == n
                cpu = time.process_time()
                mem.close()  # builds and saves the namespace's keyword index: not in the rate
                closing.append((time.process_time() - cpu) * 1e6 / n)
            rows.append({
                "store": f"sqlite {flavour}", "spans": n, "recalls": report.recalls,
                "median_spans_per_s": round(statistics.median(rates)),
                "min_spans_per_s": round(min(rates)), "median_cpu_spans_per_s": round(statistics.median(cpu_rates)),
                "close_cpu_us_per_span": round(statistics.median(closing)),
                "rounds": args.rounds, "load_average": round(os.getloadavg()[0], 1),
                "core_loop_ms": f"{min(loops, default=0)}-{max(loops, default=0)}",
            })
    if args.json:
        print(dump({"file_made_s": round(made_s, 1), "rows": rows, "rounds": each_round}))
    else:
        print(f"span file: {n:,} spans made by the OTel SDK in {made_s:.1f} s ({path.name}); "
              f"load average when each flavour ended in the last column (2 cores)")
        print_table(rows, ["store", "spans", "recalls", "median_spans_per_s", "min_spans_per_s",
                           "median_cpu_spans_per_s", "close_cpu_us_per_span", "rounds", "load_average",
                           "core_loop_ms"])
        print("each round, beside the reference loop's ms on each core before and after it (the lower the faster):")
        print_table(each_round, ["store", "round", "spans_per_s", "core_loop_ms_before", "core_loop_ms_after"])


if __name__ == "__main__":
    main()
