"""A foreign span's payload is the agent's data: imported whole or cut with a mark, never refused; and the live
processor never breaks the agent, whatever memkit or its store does.

Span files here are OTLP JSON written by hand (a span's attributes as an instrumentation could
write them); the live tests run the real OTel SDK with a real exporter after memkit's processor.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs memkit[otel]")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import memkit
from memkit.otel import CUT_MARK, MemkitSpanProcessor, import_otlp
from memkit.testing import FalkorDBServer

_TRACE = "5b8efff798038103d269b633813fc60c"
# Nested 40 levels: deeper than memkit's metadata (10) and than LangChain's 9+ levels of tool calls.
_DEEP: Any = 1
for _ in range(40):
    _DEEP = {"args": [_DEEP]}
_DEEP_TEXT = json.dumps(_DEEP)
# What json parses but metadata cannot hold: NaN, an integer beyond 64 bits, a lone surrogate.
_ODD_TEXT = '{"score": NaN, "big": 1180591620717411303424, "name": "\\ud800x"}'
_HUGE = "x" * 2_000_000


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"key": key, "value": {"stringValue": value}}
    return {"key": key, "value": value}


def _request(*payloads: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """One trace: a root chain span and one LLM child per payload (name, attributes)."""
    spans = [{"traceId": _TRACE, "spanId": "a" * 16, "name": "agent", "kind": 1, "startTimeUnixNano": "1000",
              "endTimeUnixNano": "9000", "attributes": [_attr("openinference.span.kind", "CHAIN")]}]
    for n, (name, attrs) in enumerate(payloads, start=1):
        spans.append({
            "traceId": _TRACE, "spanId": f"{n:016x}", "parentSpanId": "a" * 16, "name": name, "kind": 1,
            "startTimeUnixNano": str(1000 + n), "endTimeUnixNano": str(2000 + n),
            "attributes": [_attr("openinference.span.kind", "LLM"), *(_attr(k, v) for k, v in attrs.items())],
        })
    return {"resourceSpans": [{"resource": {"attributes": [_attr("service.name", "bio")]},
                               "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}]}]}




def _nested(depth: int) -> dict[str, Any]:
    """An OTLP array value ``depth`` arrays deep around the integer 7."""
    value: dict[str, Any] = {"intValue": "7"}
    for _ in range(depth):
        value = {"arrayValue": {"values": [value]}}
    return value


_PAYLOADS = (
    ("deep", {"input.value": "plan", "output.value": _DEEP_TEXT, "llm.token_count.prompt": _nested(12)}),
    ("odd", {"input.value": _ODD_TEXT}),
    ("huge", {"input.value": "summarise", "output.value": _HUGE}),
)


@pytest.fixture(params=["sqlite", "memory"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memkit.Memory]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'p.db'}"
    with memkit.open(url) as opened:
        yield opened


def _steps(mem: memkit.Memory) -> dict[str, dict[str, Any]]:
    return {m.metadata["trace"]["step_name"]: m.metadata["trace"] for m in mem.get_all("u", "a", 100)}


def test_deep_odd_and_huge_payloads_are_stored_not_refused(mem: memkit.Memory, tmp_path: Path) -> None:
    path = tmp_path / "foreign.otlp.json"
    path.write_text(json.dumps(_request(*_PAYLOADS)))
    report = import_otlp(mem, path, user_id="u", agent_id="a")
    assert (report.steps, report.truncated) == (4, 1)
    steps = _steps(mem)
    # Too deep for metadata: kept whole as its JSON text, which parses back to the span's value.
    deep = steps["deep"]
    assert json.loads(deep["result"]["value"]) == _DEEP and "truncated" not in deep
    assert json.loads(deep["tokens"]) == {"llm.token_count.prompt": json.loads("[" * 12 + "7" + "]" * 12)}
    # NaN, a 70-bit integer and a lone surrogate: the text, the surrogate as U+FFFD.
    odd = steps["odd"]["parameters"]["value"]
    assert "NaN" in odd and "1180591620717411303424" in odd and "\ufffdx" in odd
    # Too big for a step: cut, marked with the whole length, and counted.
    huge = steps["huge"]
    assert huge["truncated"] is True and huge["parameters"] == {"value": "summarise"}
    kept = huge["result"]["value"]
    assert kept.endswith(f"{CUT_MARK}2,000,000 characters]") and kept.startswith("x" * 1000)
    assert 1000 < len(kept) <= memkit.Limits().max_content_chars
    assert steps["agent"]["status"] == "success" and len(steps) == 4


def test_what_is_still_refused_writes_nothing(mem: memkit.Memory) -> None:
    bad = _request(*_PAYLOADS)
    spans = bad["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["parentSpanId"] = spans[1]["spanId"]  # a cycle, after the odd payloads
    with pytest.raises(memkit.InvalidInputError, match="cycle"):
        import_otlp(mem, bad, user_id="u", agent_id="a")
    assert mem.stats().memories == 0


# -- the live processor ------------------------------------------------------------------------

def _chain(mem: memkit.Memory, **options: Any) -> tuple[TracerProvider, MemkitSpanProcessor, InMemorySpanExporter]:
    """memkit's processor first, then an exporter (as Phoenix's would be) after it."""
    provider = TracerProvider()
    processor = MemkitSpanProcessor(mem, user_id="u", agent_id="a", **options)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, processor, exporter


def _agent(provider: TracerProvider, calls: int = 3, kind: str = "TOOL") -> None:
    tracer = provider.get_tracer("agent")
    with tracer.start_as_current_span("run") as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        for n in range(calls):
            with tracer.start_as_current_span(f"call-{n}") as span:
                span.set_attribute("openinference.span.kind", kind if n == 1 else "TOOL")
                span.set_attribute("output.value", _DEEP_TEXT if n == 0 else _HUGE if n == 2 else "ok")


def test_a_span_memkit_refuses_reaches_the_next_processor(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'live.db'}") as mem:
        provider, processor, exporter = _chain(mem)
        _agent(provider, kind="TELEPORTER")  # not an OpenInference kind: memkit refuses that span
        assert len(exporter.get_finished_spans()) == 4
        assert (processor.errors, processor.dropped, processor.pending, processor.truncated) == (1, 0, 0, 1)
        steps = _steps(mem)
        assert sorted(steps) == ["call-0", "call-2", "run"]
        assert json.loads(steps["call-0"]["result"]["value"]) == _DEEP  # deep, stored whole
        assert steps["call-2"]["result"]["value"].endswith(f"{CUT_MARK}2,000,000 characters]")


def test_a_closed_store_neither_breaks_the_agent_nor_the_next_processor(tmp_path: Path) -> None:
    mem = memkit.open(f"sqlite:///{tmp_path / 'closed.db'}")
    provider, processor, exporter = _chain(mem, max_pending=2)
    mem.close()
    _agent(provider)  # would raise out of span.end() if the processor did
    assert len(exporter.get_finished_spans()) == 4
    assert (processor.pending, processor.dropped, processor.errors) == (2, 2, 0)
    assert processor.force_flush() is False and processor.pending == 2


def test_spans_wait_while_the_server_is_down_and_are_stored_when_it_is_back() -> None:
    server = FalkorDBServer(persistent=True).start()
    try:
        mem = memkit.open(server.url("live"))
        try:
            provider, processor, exporter = _chain(mem)
            _agent(provider, calls=1)
            assert sorted(_steps(mem)) == ["call-0", "run"]
            server.kill()
            _agent(provider, calls=2)  # 3 spans while the server is down
            assert len(exporter.get_finished_spans()) == 2 + 3
            assert (processor.pending, processor.errors, processor.dropped) == (3, 0, 0)
            server.restart()  # from its append-only file: the graph as it was before the crash
            assert processor.force_flush() is True and processor.pending == 0
            names = sorted(m.metadata["trace"]["step_name"] for m in mem.get_all("u", "a", 100))
            assert names == ["call-0", "call-0", "call-1", "run", "run"]
        finally:
            mem.close()
    finally:
        server.stop()


def test_the_span_processor_checks_its_buffer_size(tmp_path: Path) -> None:
    with memkit.open("memory://") as mem, pytest.raises(memkit.InvalidInputError, match="max_pending"):
        MemkitSpanProcessor(mem, max_pending=-1)


def test_a_failed_span_status_survives_the_chain(tmp_path: Path) -> None:
    with memkit.open("memory://") as mem:
        provider, _, exporter = _chain(mem)
        with provider.get_tracer("t").start_as_current_span("fetch") as span:
            span.set_status(Status(StatusCode.ERROR, "timeout talking to PDB"))
        assert _steps(mem)["fetch"]["error"] == "timeout talking to PDB"
        assert exporter.get_finished_spans()[0].status.status_code is StatusCode.ERROR
