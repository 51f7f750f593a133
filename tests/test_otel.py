"""memkit.otel: runs out as OTLP (file and OTLP/HTTP), span files and live spans in.

Every span file here is made by the real OTel SDK, most of them by OpenInference's LangChain
instrumentation tracing a real LangGraph graph; hostile files are such a file with one thing broken.
"""

from __future__ import annotations

import copy
import http.server
import json
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import pandas as pd
import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs memkit[otel]")
pytest.importorskip("openinference.instrumentation.langchain", reason="needs memkit[dev]")

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

import memkit
from memkit import frames
from memkit.otel import (
    MemkitSpanProcessor,
    export_otlp,
    import_otlp,
    send_otlp,
    spans_to_otlp,
)
from memkit.traces import ExecutionHistory


class _Retriever(BaseRetriever):
    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [
            Document(page_content="TP53 is mutated in half of all cancers", id="m-1"),
            Document(page_content="KRAS drives pancreatic cancer", id="m-2"),
        ]


@tool
def lookup_gene(symbol: str) -> str:
    """Look a gene up."""
    if symbol == "XXX":
        raise ValueError("unknown gene XXX")
    return f"{symbol}: tumour suppressor"


class _State(TypedDict):
    question: str
    docs: list[str]
    answer: str


def _agent() -> Any:
    retriever = _Retriever()
    llm = FakeListChatModel(responses=["TP53"])

    def retrieve(state: _State) -> dict[str, Any]:
        return {"docs": [d.page_content for d in retriever.invoke(state["question"])]}

    def think(state: _State) -> dict[str, Any]:
        gene = str(llm.invoke(state["question"]).content)
        return {"answer": lookup_gene.invoke({"symbol": gene})}

    builder = StateGraph(_State)
    builder.add_node("retrieve", retrieve)
    builder.add_node("think", think)
    builder.add_edge(START, "retrieve")
    builder.add_edge("retrieve", "think")
    builder.add_edge("think", END)
    return builder.compile()


@pytest.fixture(scope="module")
def instrumented() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider, exporter
    finally:
        instrumentor.uninstrument()


@pytest.fixture
def span_file(instrumented: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path) -> Path:
    """An OpenInference trace of one LangGraph run, as the OTel SDK encodes it (OTLP JSON)."""
    _, exporter = instrumented
    exporter.clear()
    _agent().invoke({"question": "which gene is mutated in cancers?", "docs": [], "answer": ""})
    spans = exporter.get_finished_spans()
    assert len(spans) >= 5
    path = tmp_path / "agent.otlp.json"
    path.write_text(json.dumps(spans_to_otlp(spans)))
    return path


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[memkit.Memory]:
    with memkit.open(f"sqlite:///{tmp_path}/otel.db") as opened:
        yield opened


def test_an_openinference_langgraph_trace_imports_as_one_nested_run(span_file: Path, mem: memkit.Memory) -> None:
    spans = json.loads(span_file.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]
    report = import_otlp(mem, span_file, user_id="alice", agent_id="bio-agent", workflow_id="qa")
    assert (report.runs, report.steps, report.recalls) == (1, len(spans), 1)

    steps = frames.traces_frame(mem)
    assert len(steps) == len(spans) and set(steps["workflow_id"]) == {"qa"}
    assert set(steps["run_id"]) == {report.run_ids[0]}
    stored = {m.metadata["trace"]["span_id"]: m.metadata["trace"] for m in mem.get_all("alice", "bio-agent", 100)}
    kinds = {d["span_kind"] for d in stored.values()}
    assert {"CHAIN", "RETRIEVER", "LLM", "TOOL"} <= kinds
    roots = [d for d in stored.values() if "parent_span_id" not in d]
    assert [r["step_name"] for r in roots] == ["LangGraph"] and roots[0]["step_index"] == 0
    for data in stored.values():  # every parent is a step of the same run, by id and by index
        if "parent_span_id" in data:
            parent = stored[data["parent_span_id"]]
            assert data["parent_step_index"] == parent["step_index"]
            assert parent["timestamp"] <= data["timestamp"] + 1e-6
    tool_step = next(d for d in stored.values() if d["span_kind"] == "TOOL")
    assert tool_step["tool"] == "lookup_gene" and tool_step["status"] == "success"
    assert steps["duration_s"].notna().all() and (steps["duration_s"] >= 0).all()

    recalls = frames.recalls_frame(mem, "qa")
    assert list(recalls["content"]) == ["TP53 is mutated in half of all cancers", "KRAS drives pancreatic cancer"]
    # OpenInference's LangChain tracer writes no document ids: each hit gets one from its span and rank.
    assert recalls["memory_id"].nunique() == 2 and list(recalls["rank"]) == [1, 2]
    retriever = next(d for d in stored.values() if d["span_kind"] == "RETRIEVER")
    assert recalls["step_index"].iloc[0] == retriever["step_index"]
    assert recalls["query"].iloc[0] == "which gene is mutated in cancers?"


def test_a_failed_tool_span_is_a_failed_step_with_its_error(
    instrumented: tuple[TracerProvider, InMemorySpanExporter], mem: memkit.Memory
) -> None:
    provider, exporter = instrumented
    exporter.clear()
    with pytest.raises(ValueError, match="unknown gene"):
        lookup_gene.invoke({"symbol": "XXX"})
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("plain-sdk-step") as span:
        span.set_status(Status(StatusCode.ERROR, "timeout talking to PDB"))
    import_otlp(mem, spans_to_otlp(exporter.get_finished_spans()), user_id="u", agent_id="a")
    steps = frames.traces_frame(mem).set_index("step_name")
    assert steps.loc["lookup_gene", "status"] == "failed"
    assert "unknown gene XXX" in steps.loc["lookup_gene", "error"]
    assert steps.loc["plain-sdk-step", "error"] == "timeout talking to PDB"


def _spans(request: dict[str, Any]) -> list[dict[str, Any]]:
    return request["resourceSpans"][0]["scopeSpans"][0]["spans"]  # type: ignore[no-any-return]


def _break_cycle(request: dict[str, Any]) -> None:
    spans = _spans(request)
    root = next(s for s in spans if not s.get("parentSpanId"))
    child = next(s for s in spans if s.get("parentSpanId") == root["spanId"])
    root["parentSpanId"] = child["spanId"]


def _break_kind(request: dict[str, Any]) -> None:
    _spans(request)[2]["kind"] = 42


def _break_oi_kind(request: dict[str, Any]) -> None:
    for attr in _spans(request)[2]["attributes"]:
        if attr["key"] == "openinference.span.kind":
            attr["value"] = {"stringValue": "TELEPORTER"}


def _break_time(request: dict[str, Any]) -> None:
    _spans(request)[3]["startTimeUnixNano"] = "yesterday"


def _break_order(request: dict[str, Any]) -> None:
    span = _spans(request)[3]
    span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - 1)


def _break_duplicate(request: dict[str, Any]) -> None:
    spans = _spans(request)
    spans[4]["spanId"] = spans[3]["spanId"]


def _break_id(request: dict[str, Any]) -> None:
    _spans(request)[0]["traceId"] = "abc"


@pytest.mark.parametrize(("breaker", "message"), [
    (_break_duplicate, "appears twice"),
    (_break_id, "is not a 16-byte id"),
    (_break_cycle, "cycle"),
    (_break_kind, "unknown span kind 42"),
    (_break_oi_kind, "unknown openinference.span.kind 'TELEPORTER'"),
    (_break_time, "'yesterday' is not a number of nanoseconds"),
    (_break_order, "ends before it starts"),
])
def test_a_hostile_file_is_refused_whole(span_file: Path, mem: memkit.Memory, breaker: Any, message: str) -> None:
    good = json.loads(span_file.read_text())
    hostile = copy.deepcopy(good)
    breaker(hostile)
    mem.add("already here", "alice", "bio-agent")
    with pytest.raises(memkit.InvalidInputError, match=message) as caught:
        import_otlp(mem, hostile, user_id="alice", agent_id="bio-agent")
    # Names the span at fault, and its field: the words are built only once a span is refused.
    assert re.match(r"span \d+ \('[^']+'\)[ :]", str(caught.value)), str(caught.value)
    if breaker in (_break_id, _break_time):
        assert (" traceId " if breaker is _break_id else " startTimeUnixNano ") in str(caught.value)
    assert mem.stats().memories == 1 and mem.recalls() == []
    # The same file unbroken imports.
    assert import_otlp(mem, good, user_id="alice", agent_id="bio-agent").steps == len(_spans(good))


def test_odd_retrieval_document_keys_are_not_documents(span_file: Path, mem: memkit.Memory) -> None:
    """A key shaped like a document's but whose number is not ASCII digits (a superscript two, Arabic
    digits) is an ordinary attribute: the retriever's documents are the others, the file imports."""
    request = json.loads(span_file.read_text())
    retriever = next(s for s in _spans(request) if any(
        a["key"] == "openinference.span.kind" and a["value"] == {"stringValue": "RETRIEVER"} for a in s["attributes"]))
    before = import_otlp(memkit.open("memory://"), copy.deepcopy(request), user_id="alice", agent_id="bio-agent")
    for odd in ("\u00b2", "\u0663", "1x"):
        retriever["attributes"].append({"key": f"retrieval.documents.{odd}.document.content",
                                        "value": {"stringValue": "not a document"}})
    report = import_otlp(mem, request, user_id="alice", agent_id="bio-agent")
    assert report.recalls == before.recalls >= 1
    hits = [h for r in mem.recalls() for h in r.hits]
    assert hits and all(h.content != "not a document" for h in hits)


def test_json_lines_of_requests_import_as_one_file(span_file: Path, mem: memkit.Memory, tmp_path: Path) -> None:
    """The OTel collector's file exporter writes one request per line."""
    request = json.loads(span_file.read_text())
    spans = _spans(request)
    first, second = copy.deepcopy(request), copy.deepcopy(request)
    _spans(first)[:] = spans[: len(spans) // 2]
    _spans(second)[:] = spans[len(spans) // 2 :]
    lines = tmp_path / "spans.jsonl"
    lines.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    report = import_otlp(mem, lines, user_id="u", agent_id="a")
    assert (report.runs, report.steps) == (1, len(spans))
    assert len(frames.runs_frame(mem)) == 1


def _memkit_run(mem: memkit.Memory) -> None:
    ids = [mem.add(t, "u1", "bio") for t in ("TP53 guards the genome", "KRAS is an oncogene", "BRCA1 repairs DNA")]
    assert len(ids) == 3
    for user, run in (("u1", "r1"), ("u2", "r1")):  # two users share the workflow id
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id=user, run_id=run)
        with history.step("plan", tool="llm", parameters={"q": "TP53"}) as step:
            step.result = {"hits": len(mem.search("TP53 genome", "u1", "bio", limit=2))}
        with pytest.raises(RuntimeError), history.step("fetch", tool="pdb", parameters={"id": "1TUP"}):
            raise RuntimeError("network timeout")
        with history.step("summarise", tool="llm") as step:
            mem.search("oncogene", "u1", "bio", limit=1)
            step.result = {"text": "done"}


_STEP_VIEW = ["user_id", "agent_id", "workflow_id", "run_id", "step_index", "step_name", "tool", "status",
              "error", "started_at", "duration_s", "retry_count"]
_RECALL_VIEW = ["user_id", "agent_id", "workflow_id", "run_id", "step_index", "step_name", "kind", "query", "mode",
                "limit", "rank", "memory_id", "score", "content", "created_at"]


def _views(mem: memkit.Memory) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    steps = frames.traces_frame(mem, recalls=True)
    steps = steps[[*_STEP_VIEW, "recalls"]].sort_values(["user_id", "step_index"]).reset_index(drop=True)
    steps["started_at"] = steps["started_at"].dt.floor("ms")
    steps["duration_s"] = steps["duration_s"].round(6)
    recalls = frames.recalls_frame(mem)[_RECALL_VIEW].sort_values(["created_at", "rank"]).reset_index(drop=True)
    recalls["created_at"] = recalls["created_at"].dt.floor("ms")
    runs = frames.runs_frame(mem).drop(columns=["started_at", "ended_at", "duration_s"])
    return steps, recalls, runs.sort_values(["user_id"]).reset_index(drop=True)


@pytest.fixture(params=["sqlite", "falkordb", "neo4j"])
def backend_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'rt.db'}"
    if request.param == "falkordb":
        return str(request.getfixturevalue("falkordb_server").url(f"otel-{uuid.uuid4().hex[:8]}"))
    uri = str(request.getfixturevalue("neo4j_uri"))
    with memkit.open(uri) as mem:
        mem.reset()
    return uri


def test_round_trip_memkit_otlp_memkit_keeps_what_the_views_show(backend_url: str, tmp_path: Path) -> None:
    with memkit.open(backend_url) as mem:
        _memkit_run(mem)
        before = _views(mem)
        assert len(before[0]) == 6 and len(before[1]) >= 4 and set(before[0]["status"]) == {"success", "failed"}
        path = tmp_path / "runs.otlp.json"
        request = export_otlp(mem, path)
        spans = _spans(request)
        failed = [s for s in spans if s["status"].get("code") == 2]
        assert [s["name"] for s in failed] == ["fetch", "fetch"]
        assert failed[0]["status"]["message"] == "RuntimeError: network timeout"
        searches = [s for s in spans if s["name"].startswith("search_memory")]
        assert len(searches) == 4 and all(s["parentSpanId"] for s in searches)
        memories = [m for m in mem.get_all("u1", "bio", 10) if m.metadata.get("type") != "trace"]
        mem.reset()
        mem.add_many([{"id": m.id, "content": m.content, "user_id": "u1", "agent_id": "bio",
                       "created_at": m.created_at} for m in memories])
        report = import_otlp(mem, path)
        assert (report.steps, report.recalls) == (6, 4)
        after = _views(mem)
    pd.testing.assert_frame_equal(before[0], after[0], check_dtype=False)
    pd.testing.assert_frame_equal(before[1], after[1], check_dtype=False)
    pd.testing.assert_frame_equal(before[2], after[2], check_dtype=False)


class _Collector(http.server.BaseHTTPRequestHandler):
    received: list[bytes] = []  # noqa: RUF012

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_send_otlp_posts_protobuf_spans_to_a_collector(mem: memkit.Memory) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    _memkit_run(mem)
    server = http.server.HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        sent = send_otlp(mem, f"http://127.0.0.1:{server.server_port}/v1/traces", user_id="u1", agent_id="bio")
    finally:
        server.shutdown()
        server.server_close()
    request = ExportTraceServiceRequest()
    request.ParseFromString(_Collector.received[-1])
    spans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    assert sent == len(spans) == 3 + 2
    names = sorted(s.name for s in spans)
    assert names == ["fetch", "plan", "search_memory bio", "search_memory bio", "summarise"]
    fetch = next(s for s in spans if s.name == "fetch")
    assert fetch.status.code == 2 and fetch.status.message == "RuntimeError: network timeout"
    attrs = {a.key: a.value for a in fetch.attributes}
    assert attrs["gen_ai.operation.name"].string_value == "execute_tool"
    assert attrs["gen_ai.tool.name"].string_value == "pdb"


def test_the_span_processor_streams_a_live_agent_into_memkit(
    instrumented: tuple[TracerProvider, InMemorySpanExporter], mem: memkit.Memory
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(MemkitSpanProcessor(mem, user_id="alice", agent_id="live", workflow_id="chat"))
    instrumentor = LangChainInstrumentor()  # one per process: moved to this provider, then back
    instrumentor.uninstrument()
    instrumentor.instrument(tracer_provider=provider)
    try:
        _agent().invoke({"question": "which gene?", "docs": [], "answer": ""})
    finally:
        instrumentor.uninstrument()
        instrumentor.instrument(tracer_provider=instrumented[0])
    stored = [m.metadata["trace"] for m in mem.get_all("alice", "live", 100)]
    by_span = {d["span_id"]: d for d in stored}
    assert len(stored) >= 5 and {d["run_id"] for d in stored} == {stored[0]["trace_id"]}
    assert sorted(d["step_index"] for d in stored) == list(range(len(stored)))
    root = next(d for d in stored if "parent_span_id" not in d)
    assert root["step_name"] == "LangGraph" and root["step_index"] == len(stored) - 1  # ends last
    assert all(d["parent_span_id"] in by_span for d in stored if d is not root)
    recalls = mem.recalls(user_id="alice", agent_id="live")
    assert [h.content for h in recalls[0].hits] == ["TP53 is mutated in half of all cancers",
                                                    "KRAS drives pancreatic cancer"]


def test_nested_memkit_steps_keep_their_parent_through_otlp(mem: memkit.Memory, tmp_path: Path) -> None:
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id="u1", run_id="r")
    other = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id="u2", run_id="r")
    with history.step("agent", tool="agent"):
        with history.step("plan", tool="llm"):
            pass
        with other.step("elsewhere", tool="llm"):  # another user's run: not a child
            pass
        with history.step("act", tool="blast"), history.step("parse", tool="python"):
            pass
    stored = {m.metadata["trace"]["step_name"]: m.metadata["trace"] for m in mem.get_all("u1", "bio", 10)}
    assert {k: v.get("parent_step_index") for k, v in stored.items()} == {
        "agent": None, "plan": 0, "act": 0, "parse": stored["act"]["step_index"]}
    assert "parent_step_index" not in mem.get_all("u2", "bio", 1)[0].metadata["trace"]

    request = export_otlp(mem, user_id="u1", agent_id="bio")
    by_name = {s["name"]: s for s in _spans(request)}
    assert "parentSpanId" not in by_name["agent"]
    assert by_name["plan"]["parentSpanId"] == by_name["act"]["parentSpanId"] == by_name["agent"]["spanId"]
    assert by_name["parse"]["parentSpanId"] == by_name["act"]["spanId"]
    with memkit.open(f"sqlite:///{tmp_path}/copy.db") as copy:
        import_otlp(copy, request)
        back = {m.metadata["trace"]["step_name"]: m.metadata["trace"] for m in copy.get_all("u1", "bio", 10)}
    assert {k: v.get("parent_step_index") for k, v in back.items()} == {
        k: v.get("parent_step_index") for k, v in stored.items()}


def test_an_import_is_held_to_the_stores_own_limits(span_file: Path, tmp_path: Path) -> None:
    """Each step is checked once, against the store it goes to (not memkit's defaults): a store with
    tighter limits refuses the file whole, naming the span, before anything is written."""
    from memkit.adapters import SQLiteAdapter

    n_spans = len(_spans(json.loads(span_file.read_text())))
    tight = memkit.Memory(SQLiteAdapter(tmp_path / "tight.db", limits=memkit.Limits(max_metadata_bytes=1_000)))
    with tight:
        too_big = r"span \w+ .*metadata is \d+ bytes as JSON; the limit is 1000"
        with pytest.raises(memkit.InvalidInputError, match=too_big):
            import_otlp(tight, span_file, user_id="alice", agent_id="bio-agent")
        assert tight.stats().memories == 0 and tight.recalls() == []
    roomy = memkit.Memory(SQLiteAdapter(tmp_path / "roomy.db"))
    with roomy:
        report = import_otlp(roomy, span_file, user_id="alice", agent_id="bio-agent")
        assert roomy.stats().memories == report.steps == n_spans
