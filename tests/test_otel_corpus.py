"""Traces made by real instrumentations (tests/otel_corpus.py) import whole, by file and live, on every backend.

Each corpus entry runs a real agent (LangGraph through OpenInference, the OpenAI SDK through
OpenInference and through the OTel GenAI instrumentation against a local fake server, pydantic-ai's
own spans) and its spans are checked against what memkit stored: the tree, kinds, model, token
counts, inputs and outputs, errors and retriever documents, as Phoenix would show them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs memkit[otel]")
pytest.importorskip("openinference.instrumentation.langchain", reason="needs memkit[dev]")
pytest.importorskip("openinference.instrumentation.openai", reason="needs memkit[dev]")
pytest.importorskip("opentelemetry.instrumentation.openai_v2", reason="needs memkit[dev]")

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import memkit
from memkit.otel import MemkitSpanProcessor, import_otlp, spans_to_otlp
from tests.otel_corpus import MAKERS, make_spans

_SERVERS = ("postgres", "falkordb", "neo4j")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[ReadableSpan]]]:
    """Each entry's OTLP JSON file (made here, by its instrumentation) and its spans."""
    folder = tmp_path_factory.mktemp("corpus")
    made = {}
    for name in MAKERS:
        spans = make_spans(name)
        path = folder / f"{name}.otlp.json"
        path.write_text(json.dumps(spans_to_otlp(spans)))
        made[name] = (path, spans)
    return made


def _url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'corpus.db'}"
    if backend == "memory":
        return "memory://"
    if backend == "postgres":
        return str(request.getfixturevalue("postgres_server").url(f"corpus{uuid.uuid4().hex[:8]}"))
    if backend == "falkordb":
        return str(request.getfixturevalue("falkordb_server").url(f"corpus-{uuid.uuid4().hex[:8]}"))
    uri = str(request.getfixturevalue("neo4j_uri"))
    with memkit.open(uri) as mem:
        mem.reset()
    return uri


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memkit.Memory]:
    with memkit.open(_url(request.param, request, tmp_path)) as mem:
        yield mem


def _hex(number: int, width: int) -> str:
    return format(number, f"0{width}x")


def _check(mem: memkit.Memory, name: str, spans: list[ReadableSpan], live: bool) -> None:
    """Every span is a step holding what Phoenix shows of it; retriever documents are recalls."""
    stored = {m.metadata["trace"]["span_id"]: m.metadata["trace"] for m in mem.get_all("alice", "bot", 1000)}
    assert len(stored) == len(spans), sorted(d["step_name"] for d in stored.values())
    for span in spans:
        attrs = dict(span.attributes or {})
        step = stored[_hex(span.context.span_id, 16)]
        assert step["step_name"] == span.name
        assert step["trace_id"] == _hex(span.context.trace_id, 32)
        if span.parent is None:
            assert "parent_span_id" not in step
        else:
            assert step["parent_span_id"] == _hex(span.parent.span_id, 16)
            if not live:  # live, a parent ends after its children: its index is not known yet
                assert step["parent_step_index"] == stored[step["parent_span_id"]]["step_index"]
        kind = attrs.get("openinference.span.kind")
        if kind is not None:
            assert step["span_kind"] == kind
        failed = span.status.status_code is StatusCode.ERROR
        assert step["status"] == ("failed" if failed else "success")
        if failed and span.status.description:
            assert span.status.description in step["error"]
        model = attrs.get("llm.model_name") or attrs.get("gen_ai.request.model")
        assert step.get("model") == model
        for key in ("llm.token_count.prompt", "llm.token_count.completion", "gen_ai.usage.input_tokens",
                    "gen_ai.usage.output_tokens"):
            assert step.get("tokens", {}).get(key) == attrs.get(key)
        source = attrs.get("input.value") or attrs.get("gen_ai.input.messages") or attrs.get(
            "gen_ai.tool.call.arguments")
        if source is not None:  # whole: the stored input is the span's, parsed or as its text
            held = step["parameters"]
            assert held == {"value": source} or held == json.loads(str(source)) or held == {
                "value": json.loads(str(source))}
        output = attrs.get("output.value") or attrs.get("gen_ai.output.messages") or attrs.get(
            "gen_ai.tool.call.result")
        if output is not None:
            held = step["result"]
            assert held == {"value": output} or held == json.loads(str(output)) or held == {
                "value": json.loads(str(output))}
    retrievers = [s for s in spans if dict(s.attributes or {}).get("openinference.span.kind") == "RETRIEVER"]
    recalls = mem.recalls(user_id="alice", agent_id="bot")
    assert len(recalls) == len(retrievers)
    for span, recall in zip(retrievers, recalls, strict=True):
        attrs = dict(span.attributes or {})
        documents = sorted({k.split(".")[2] for k in attrs if k.startswith("retrieval.documents.")}, key=int)
        assert [h.content for h in recall.hits] == [
            attrs[f"retrieval.documents.{i}.document.content"] for i in documents]
        assert recall.step_index == stored[_hex(span.context.span_id, 16)]["step_index"]
    _check_entry(name, stored)


def _check_entry(name: str, stored: dict[str, dict[str, Any]]) -> None:
    """What each agent did, as its steps say it."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for step in stored.values():
        by_name.setdefault(step["step_name"], []).append(step)
    if name == "langgraph-openinference":
        failed = by_name["fetch_structure"][0]
        assert failed["status"] == "failed" and "PDB has no structure for TP53" in failed["error"]
        assert failed["tool"] == "fetch_structure" and failed["span_kind"] == "TOOL"
        root = by_name["LangGraph"][0]
        # retrieve and plan ran in parallel, both children of the graph
        assert by_name["retrieve"][0]["parent_span_id"] == by_name["plan"][0]["parent_span_id"] == root["span_id"]
        llm = by_name["FakeMessagesListChatModel"]
        assert {s["span_kind"] for s in llm} == {"LLM"}
        assert sorted(s["tokens"]["llm.token_count.prompt"] for s in llm) == [31, 58]
        # The model's tool call, nested ten levels down in its output, is kept whole.
        assert any("9606" in json.dumps(s["result"]) for s in llm)
    elif name in ("openai-openinference", "openai-genai"):
        chats = sorted(stored.values(), key=lambda s: s["timestamp"])
        assert [s["model"] for s in chats[:2]] == ["gpt-4o-mini", "gpt-4o-mini"]
        assert "broken-model" in json.dumps(chats[2]["parameters"]) + chats[2].get("model", "")
        assert chats[2]["status"] == "failed" and "broken-model does not exist" in chats[2]["error"]
        assert {s["span_kind"] for s in chats} == {"LLM"}
        assert "lookup_gene" in json.dumps(chats[0]["result"]) and "TP53" in json.dumps(chats[0]["parameters"])
    elif name == "pydantic-ai":
        failed = by_name["execute_tool fetch_structure"][0]
        assert failed["status"] == "failed" and failed["tool"] == "fetch_structure"
        assert "PDB has no structure for TP53" in json.dumps(failed["result"])
        assert by_name["execute_tool lookup_gene"][0]["parameters"] == {"symbol": "TP53"}
        assert {s["model"] for s in by_name["chat fake-bio-model"]} == {"fake-bio-model"}


_LOCAL = [pytest.param(b, id=b) for b in ("sqlite", "memory")]
_EVERY = [*_LOCAL, *(pytest.param(b, id=b) for b in _SERVERS)]


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("store", _EVERY, indirect=True)
def test_each_corpus_file_imports_whole(
    corpus: dict[str, tuple[Path, list[ReadableSpan]]], store: memkit.Memory, name: str
) -> None:
    path, spans = corpus[name]
    report = import_otlp(store, path, user_id="alice", agent_id="bot")
    assert report.steps == len(spans) and report.truncated == 0
    assert report.runs == len({s.context.trace_id for s in spans})
    _check(store, name, spans, live=False)


@pytest.mark.parametrize("name", list(MAKERS))
@pytest.mark.parametrize("store", _LOCAL, indirect=True)
def test_each_corpus_agent_is_stored_live(store: memkit.Memory, name: str) -> None:
    processor = MemkitSpanProcessor(store, user_id="alice", agent_id="bot")
    spans = make_spans(name, [processor])
    assert (processor.errors, processor.dropped, processor.pending) == (0, 0, 0)
    _check(store, name, spans, live=True)


@pytest.mark.parametrize("store", [pytest.param(b, id=b) for b in _SERVERS], indirect=True)
def test_a_langgraph_agent_is_stored_live_on_a_server(store: memkit.Memory) -> None:
    processor = MemkitSpanProcessor(store, user_id="alice", agent_id="bot")
    spans = make_spans("langgraph-openinference", [processor])
    assert (processor.errors, processor.dropped, processor.pending) == (0, 0, 0)
    _check(store, "langgraph-openinference", spans, live=True)
