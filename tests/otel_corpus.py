"""A corpus of real traces, made by real instrumentations driving fake models, for the trace-import tests.

Each maker runs one agent under its instrumentation (OpenInference for LangGraph and the OpenAI SDK,
OTel GenAI for the OpenAI SDK, pydantic-ai's own spans) with a tracer provider of its own, and
returns the ended spans; the fake models answer in-process or from a local HTTP server on
127.0.0.1, so nothing reaches the network and nothing is downloaded.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

Maker = Callable[[TracerProvider], None]


# -- LangGraph through OpenInference ------------------------------------------------------------

class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    docs: list[str]
    plan: str


def langgraph_agent(provider: TracerProvider) -> None:
    """A tool-calling LangGraph agent: a retriever and a planner in parallel, then a chat model that
    calls two tools (one fails) and answers; OpenInference's LangChain instrumentation traces it."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import tool
    from langgraph.graph import END, START, StateGraph
    from langgraph.prebuilt import ToolNode
    from openinference.instrumentation.langchain import LangChainInstrumentor

    class Retriever(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            return [Document(page_content="TP53 is mutated in half of all cancers", id="doc-tp53"),
                    Document(page_content="KRAS drives pancreatic cancer", id="doc-kras")]

    @tool
    def lookup_gene(symbol: str, filters: dict[str, Any]) -> str:
        """Look a gene up."""
        return f"{symbol}: tumour suppressor"

    @tool
    def fetch_structure(symbol: str) -> str:
        """Fetch a protein structure."""
        raise ValueError(f"PDB has no structure for {symbol}")

    # Tool-call arguments nested deep: OpenInference writes the model's output (generations ->
    # message -> kwargs -> tool_calls -> args ...) as one JSON text, 9+ levels down.
    deep_args = {"symbol": "TP53", "filters": {"organism": {"taxon": {"id": {"ncbi": {"value": 9606}}}}}}
    llm = FakeMessagesListChatModel(responses=[
        AIMessage(content="", tool_calls=[
            {"name": "lookup_gene", "args": deep_args, "id": "call-1", "type": "tool_call"},
            {"name": "fetch_structure", "args": {"symbol": "TP53"}, "id": "call-2", "type": "tool_call"},
        ], usage_metadata={"input_tokens": 31, "output_tokens": 12, "total_tokens": 43}),
        AIMessage(content="TP53 is the gene; no structure was found.",
                  usage_metadata={"input_tokens": 58, "output_tokens": 9, "total_tokens": 67}),
    ])
    retriever = Retriever()

    def retrieve(state: State) -> dict[str, Any]:
        return {"docs": [d.page_content for d in retriever.invoke(str(state["messages"][0].content))]}

    def plan(state: State) -> dict[str, Any]:
        return {"plan": "look the gene up, then its structure"}

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("retrieve", retrieve)
    builder.add_node("plan", plan)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([lookup_gene, fetch_structure], handle_tool_errors=True))
    builder.add_edge(START, "retrieve")
    builder.add_edge(START, "plan")  # retrieve and plan run in parallel
    builder.add_edge(["retrieve", "plan"], "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    graph = builder.compile()
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        graph.invoke({"messages": [HumanMessage("which gene is mutated in cancers?")], "docs": [], "plan": ""})
    finally:
        instrumentor.uninstrument()


# -- the OpenAI SDK against a local fake server ------------------------------------------------

def _chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat completion: a tool call to the first request, an answer once a tool replied."""
    answered = any(m.get("role") == "tool" for m in body.get("messages", []))
    if answered or not body.get("tools"):
        message: dict[str, Any] = {"role": "assistant", "content": "TP53 is a tumour suppressor."}
        finish = "stop"
    else:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call-1", "type": "function",
            "function": {"name": "lookup_gene", "arguments": json.dumps({"symbol": "TP53"})}}]}
        finish = "tool_calls"
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 21, "completion_tokens": 7, "total_tokens": 28},
    }


class _FakeOpenAI(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # the http.server hook's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("model") == "broken-model":
            self._reply(400, {"error": {"message": "model broken-model does not exist", "type": "invalid_request_error",
                                        "code": "model_not_found"}})
            return
        self._reply(200, _chat_completion(body))

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


@contextmanager
def fake_openai_server() -> Iterator[str]:
    """A local OpenAI-compatible chat-completions server; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _openai_conversation(base_url: str) -> None:
    """A tool-calling exchange with the OpenAI SDK, then a refused request (a failed span)."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="test-key", max_retries=0)
    tools = [{"type": "function", "function": {
        "name": "lookup_gene", "description": "Look a gene up.",
        "parameters": {"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]}}}]
    messages: list[Any] = [{"role": "user", "content": "What is TP53?"}]
    first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)  # type: ignore[arg-type]
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "TP53: tumour suppressor"}]
    client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)  # type: ignore[arg-type]
    with suppress(openai.BadRequestError):
        client.chat.completions.create(model="broken-model", messages=[{"role": "user", "content": "hi"}])


def openai_openinference(provider: TracerProvider) -> None:
    """The OpenAI SDK traced by ``openinference-instrumentation-openai``."""
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    with fake_openai_server() as url:
        instrumentor.instrument(tracer_provider=provider)
        try:
            _openai_conversation(url)
        finally:
            instrumentor.uninstrument()


def openai_genai(provider: TracerProvider) -> None:
    """The OpenAI SDK traced by ``opentelemetry-instrumentation-openai-v2`` on the latest GenAI
    conventions, messages captured on the spans (``gen_ai.input.messages``/``gen_ai.output.messages``)."""
    import os

    from opentelemetry.instrumentation._semconv import _OpenTelemetrySemanticConventionStability
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    settings = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"}
    before = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    # The SDK reads the opt-in once per process: read again with it, and again after.
    _OpenTelemetrySemanticConventionStability._initialized = False
    instrumentor = OpenAIInstrumentor()
    try:
        with fake_openai_server() as url:
            instrumentor.instrument(tracer_provider=provider)
            try:
                _openai_conversation(url)
            finally:
                instrumentor.uninstrument()
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        _OpenTelemetrySemanticConventionStability._initialized = False


# -- pydantic-ai's own OTel GenAI spans --------------------------------------------------------

def pydantic_ai_agent(provider: TracerProvider) -> None:
    """A pydantic-ai agent (``instrument=``) on a FunctionModel that calls a tool, then a failing one,
    then answers."""
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turns = sum(1 for m in messages if m.kind == "response")
        if turns == 0:
            return ModelResponse(parts=[ToolCallPart("lookup_gene", {"symbol": "TP53"}, tool_call_id="c1"),
                                        ToolCallPart("fetch_structure", {"symbol": "TP53"}, tool_call_id="c2")])
        return ModelResponse(parts=[TextPart("TP53 is a tumour suppressor.")])

    agent = Agent(FunctionModel(model, model_name="fake-bio-model"), retries=1)
    agent.instrument = InstrumentationSettings(tracer_provider=provider)

    @agent.tool_plain
    def lookup_gene(symbol: str) -> str:
        """Look a gene up."""
        return f"{symbol}: tumour suppressor"

    @agent.tool_plain
    def fetch_structure(symbol: str) -> str:
        """Fetch a protein structure."""
        raise ModelRetry(f"PDB has no structure for {symbol}")

    agent.run_sync("What is TP53?")


MAKERS: dict[str, Maker] = {
    "langgraph-openinference": langgraph_agent,
    "openai-openinference": openai_openinference,
    "openai-genai": openai_genai,
    "pydantic-ai": pydantic_ai_agent,
}


def make_spans(name: str, processors: Sequence[Any] = ()) -> list[ReadableSpan]:
    """The ended spans of corpus entry ``name``, each also given to ``processors`` (added after the
    exporter that collects them)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for processor in processors:
        provider.add_span_processor(processor)
    MAKERS[name](provider)
    provider.force_flush()
    return list(exporter.get_finished_spans())
