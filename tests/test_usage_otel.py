"""LLM usage from real instrumentations' spans, through the OTel import, on four stores.

Three span files, each made by the real OTel SDK: OpenInference's OpenAI instrumentation tracing two
chat calls (the OpenAI client against a local fake server on 127.0.0.1) inside a chain span that
reports their tokens again; pydantic-ai's own GenAI instrumentation of an agent run (its test model,
a tool call between two requests); and spans with OTel GenAI attributes in both the current and the
older names (``gen_ai.usage.input_tokens`` / ``prompt_tokens``, ``gen_ai.response.model``) whose agent
span reports its calls' tokens again. Every step's tokens and every run's totals are checked against
what the spans say, rolled up without counting a call twice.
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs memkit[otel]")
pytest.importorskip("openinference.instrumentation.openai", reason="needs memkit[dev]")

import openai
from openinference.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel

import memkit
from memkit.frames import runs_frame, traces_frame
from memkit.otel import import_otlp, spans_to_otlp

PRICES = {"gpt-4o": (2.5, 10.0), "claude-3-5-sonnet": (3.0, 15.0)}
OPENAI_USAGE = [(31, 7), (52, 11)]


def _recording() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _openai_spans(path: Path) -> None:
    """Two chat calls through the OpenAI client, traced by OpenInference, under a chain span that
    reports their tokens again."""
    answers = iter(OPENAI_USAGE)

    class _Completions(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            prompt, completion = next(answers)
            body = json.dumps({
                "id": "c", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "TP53"}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    provider, exporter = _recording()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="test",
                               max_retries=0)
        with provider.get_tracer("agent").start_as_current_span("answer") as chain:
            chain.set_attribute("openinference.span.kind", "CHAIN")
            chain.set_attribute("llm.token_count.prompt", sum(u[0] for u in OPENAI_USAGE))
            chain.set_attribute("llm.token_count.completion", sum(u[1] for u in OPENAI_USAGE))
            for question in ("which gene?", "why?"):
                client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": question}])
    finally:
        instrumentor.uninstrument()
        server.shutdown()
        server.server_close()
    path.write_text(json.dumps(spans_to_otlp(exporter.get_finished_spans())))


def _pydantic_ai_spans(path: Path) -> list[tuple[int, int]]:
    """A pydantic-ai agent run (test model, one tool call), traced by its own GenAI instrumentation."""
    provider, exporter = _recording()
    agent = Agent(TestModel())
    agent.instrument = InstrumentationSettings(tracer_provider=provider)

    @agent.tool_plain
    def fetch(gene: str) -> str:
        """Fetch a gene's record."""
        return f"{gene}: HTTP 404"

    agent.run_sync("which gene?")
    spans = exporter.get_finished_spans()
    path.write_text(json.dumps(spans_to_otlp(spans)))
    return [(int(s.attributes["gen_ai.usage.input_tokens"]), int(s.attributes["gen_ai.usage.output_tokens"]))
            for s in spans if s.attributes and "gen_ai.usage.input_tokens" in s.attributes]


def _genai_spans(path: Path) -> list[tuple[str, int, int]]:
    """An agent span reporting the sum of its two chat calls (OTel GenAI attributes), and a tool."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("genai-agent")
    calls = [("gpt-4o-2024-08-06", 120, 30), ("claude-3-5-sonnet-20241022", 200, 45)]
    with tracer.start_as_current_span("invoke_agent research") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        agent.set_attribute("gen_ai.usage.input_tokens", sum(c[1] for c in calls))
        agent.set_attribute("gen_ai.usage.output_tokens", sum(c[2] for c in calls))
        for model, tokens_in, tokens_out in calls:
            with tracer.start_as_current_span(f"chat {model}") as chat:
                chat.set_attribute("gen_ai.operation.name", "chat")
                chat.set_attribute("gen_ai.request.model", model.rsplit("-", 1)[0])
                chat.set_attribute("gen_ai.response.model", model)
                chat.set_attribute("gen_ai.usage.prompt_tokens" if "claude" in model else "gen_ai.usage.input_tokens",
                                   tokens_in)
                chat.set_attribute("gen_ai.usage.completion_tokens" if "claude" in model
                                   else "gen_ai.usage.output_tokens", tokens_out)
        with tracer.start_as_current_span("execute_tool fetch") as tool:
            tool.set_attribute("gen_ai.tool.name", "fetch")
    path.write_text(json.dumps(spans_to_otlp(exporter.get_finished_spans())))
    return calls


@pytest.fixture(params=["sqlite", "memory", "postgres", "falkordb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memkit.Memory]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'u.db'}?embedder=none"
    elif request.param == "memory":
        url = "memory://"
    elif request.param == "postgres":
        url = str(request.getfixturevalue("postgres_server").url(f"uo_{uuid.uuid4().hex[:8]}")) + "?embedder=none"
    else:
        url = str(request.getfixturevalue("falkordb_server").url(f"uo-{uuid.uuid4().hex[:8]}"))
    with memkit.open(url) as mem:
        yield mem


def _of(steps: pd.DataFrame, workflow: str) -> pd.DataFrame:
    return steps[steps["workflow_id"].eq(workflow).to_numpy(dtype=bool)]


def test_real_instrumentations_usage_rolls_up_once_per_call(store: memkit.Memory, tmp_path: Path) -> None:
    _openai_spans(tmp_path / "oi.json")
    pai_usage = _pydantic_ai_spans(tmp_path / "pai.json")
    genai_calls = _genai_spans(tmp_path / "genai.json")
    for name in ("oi", "pai", "genai"):
        import_otlp(store, tmp_path / f"{name}.json", user_id="alice", agent_id="bio", workflow_id=name)
    steps = traces_frame(store, prices=PRICES)
    runs = runs_frame(store, prices=PRICES).set_index("workflow_id")

    oi = _of(steps, "oi")
    calls = oi[oi["usage_counted"].to_numpy(dtype=bool)]
    assert sorted(zip(calls["tokens_in"], calls["tokens_out"], strict=True)) == OPENAI_USAGE
    assert list(calls["tokens_total"]) == [a + b for a, b in zip(calls["tokens_in"], calls["tokens_out"], strict=True)]
    assert set(calls["model"]) == {"gpt-4o-2024-08-06"}
    chain = oi[oi["step_name"].eq("answer").to_numpy(dtype=bool)].iloc[0]
    assert chain["tokens_in"] == 83 and not chain["usage_counted"]  # its calls' tokens, counted there
    assert (runs.loc["oi", "tokens_in"], runs.loc["oi", "tokens_out"]) == (83, 18)
    assert runs.loc["oi", "cost"] == pytest.approx(sum(a * 2.5 + b * 10.0 for a, b in OPENAI_USAGE) / 1e6)

    pai = _of(steps, "pai")
    assert len(pai_usage) == 2 and sorted(zip(pai.loc[pai["usage_counted"].to_numpy(dtype=bool), "tokens_in"],
                                             pai.loc[pai["usage_counted"].to_numpy(dtype=bool), "tokens_out"],
                                             strict=True)) == sorted(pai_usage)
    assert runs.loc["pai", "tokens_total"] == sum(a + b for a, b in pai_usage) and runs.loc["pai", "models"] == "test"
    assert pd.isna(runs.loc["pai", "cost"])  # "test" is in no price table

    genai = _of(steps, "genai")
    by_name = {name: row for name, row in zip(genai["step_name"], genai.to_dict("records"), strict=True)}
    agent = by_name["invoke_agent research"]
    assert agent["tokens_in"] == 320 and not agent["usage_counted"]
    for model, tokens_in, tokens_out in genai_calls:
        call = by_name[f"chat {model}"]
        assert (call["model"], call["tokens_in"], call["tokens_out"], call["usage_counted"]) == (
            model, tokens_in, tokens_out, True)
    assert pd.isna(by_name["execute_tool fetch"]["tokens_total"])
    assert (runs.loc["genai", "tokens_in"], runs.loc["genai", "tokens_out"], runs.loc["genai", "tokens_total"]) == (
        320, 75, 395)
    assert runs.loc["genai", "models"] == "claude-3-5-sonnet-20241022, gpt-4o-2024-08-06"
    assert runs.loc["genai", "cost"] == pytest.approx((120 * 2.5 + 30 * 10.0 + 200 * 3.0 + 45 * 15.0) / 1e6)
