"""A parent step's rolled-up time in TraceReplay is the wall-clock time its children cover.

An agent that calls two tools at once spent the longer call's time, not the sum; spans made by
the real OTel SDK with explicit times show it. Steps that recorded no start time cannot be placed
on the clock, so their durations add up, as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs memkit[otel]")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import memkit
from memkit.otel import import_otlp, spans_to_otlp
from memkit.widgets import TraceReplay

T0 = 1_750_000_000 * 10**9  # a start in nanoseconds since the epoch
S = 10**9


def _parallel_tools_file(path: Path) -> Path:
    """agent > (chain 0-7 s > (tool A 0-2 s, tool B 1-4 s in parallel, tool C 6-7 s), llm 6-9 s)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rollup")

    def span(name: str, kind: str, start: int, end: int, parent: trace.Span | None) -> trace.Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        made = tracer.start_span(name, context=context, start_time=T0 + start * S,
                                 attributes={"openinference.span.kind": kind})
        made.end(end_time=T0 + end * S)
        return made

    agent = tracer.start_span("agent", start_time=T0, attributes={"openinference.span.kind": "AGENT"})
    chain = tracer.start_span("gather", context=trace.set_span_in_context(agent), start_time=T0,
                              attributes={"openinference.span.kind": "CHAIN"})
    span("tool-a", "TOOL", 0, 2, chain)
    span("tool-b", "TOOL", 1, 4, chain)
    span("tool-c", "TOOL", 6, 7, chain)
    chain.end(end_time=T0 + 7 * S)
    span("llm", "LLM", 6, 9, agent)
    agent.end(end_time=T0 + 10 * S)
    path.write_text(json.dumps(spans_to_otlp(exporter.get_finished_spans())))
    return path


def _rolled(panel: TraceReplay) -> dict[str, float | None]:
    timeline = panel.timeline
    names = [label.split(" · ")[1].split(" (")[0] for label in timeline["label"]]
    return dict(zip(names, timeline["rolled_s"], strict=True))


def test_parallel_children_roll_up_to_the_time_they_cover(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'r.db'}?embedder=none") as mem:
        report = import_otlp(mem, _parallel_tools_file(tmp_path / "spans.json"), user_id="u1", agent_id="bio")
        panel = TraceReplay(mem)
        panel.run = next(r["run"] for r in panel.runs if r["run_id"] == report.run_ids[0])
        rolled = _rolled(panel)
        # Tools A and B overlap (0-4 s), C runs 6-7 s: 5 s of wall clock, not 2 + 3 + 1 = 6 s.
        assert rolled["gather"] == pytest.approx(5.0)
        # The agent: the chain (0-7 s) and the llm started before the chain ended (6-9 s): 9 s, not 10.
        assert rolled["agent"] == pytest.approx(9.0)
        assert rolled["tool-a"] is None  # a leaf rolls up nothing
        assert panel.timeline["rolled"][0] == "9.0 s"  # what TraceReplay shows after its Σ


def test_children_without_start_times_roll_up_to_their_sum(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 's.db'}?embedder=none") as mem:
        for index, (name, parent, seconds) in enumerate(
            [("plan", None, None), ("fetch", 0, 2.0), ("parse", 0, 3.0), ("score", 0, 1.5)]
        ):
            data = {"step_name": name, "tool": name, "run_id": "r1", "step_index": index, "status": "success"}
            if parent is not None:
                data["parent_step_index"] = parent
            if seconds is not None:
                data["duration_ms"] = seconds * 1000  # timing without a start, as some agents write it
            mem.add_trace("bio", "wf", data, user_id="u1")
        panel = TraceReplay(mem)
        panel.run = next(r["run"] for r in panel.runs if r["run_id"] == "r1")
        assert _rolled(panel)["plan"] == pytest.approx(6.5)
