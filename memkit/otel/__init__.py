"""OpenTelemetry traces in and out: memkit runs as OTLP spans, and OTLP / OpenInference spans as runs.

Out (:func:`export_otlp`, :func:`send_otlp`): one span per step, following the OTel GenAI semantic
conventions (``gen_ai.operation.name="execute_tool"``, ``gen_ai.tool.name``), with the step's
parameters and result as ``input.value``/``output.value`` (what Phoenix shows) and a failed step as
span status ERROR with its error. Each recall the step made is a child span, the memory operation
``search_memory`` (``gen_ai.memory.query``, ``gen_ai.memory.search.mode``, ``gen_ai.memory.top_k``),
whose hits are retrieval documents (``retrieval.documents.<i>.document.id/score/content``).

In (:func:`import_otlp`, :class:`MemkitSpanProcessor`): each trace becomes one run (``run_id`` =
the trace id), each span a step: name, kind (OpenInference ``openinference.span.kind`` or
``gen_ai.operation.name``) as ``tool`` unless the span names its tool, start and duration, status
and error, ``input.value``/``output.value`` as parameters/result, and its place in the tree
(``span_id``, ``parent_span_id``, ``parent_step_index``). A retriever span's documents become a
recall of its step. A file is checked whole before anything is written, and written in one batch:
a bad file changes nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memkit._core._errors import BackendUnavailableError, InvalidInputError
from memkit._core._models import MemoryItem
from memkit._core._port import MemoryProvider, SupportsAddMany, SupportsNamespaces, SupportsPaging, SupportsRecalls
from memkit._core._records import from_us, to_us, trace_record
from memkit._recall._recording import Recall, RecalledMemory, checked_recalls
from memkit._sync import Memory, call, provider_of

__all__ = [
    "MAX_ATTRIBUTE_CHARS",
    "MemkitSpanProcessor",
    "OtlpImport",
    "export_otlp",
    "import_otlp",
    "send_otlp",
    "spans_to_otlp",
]

#: The longest attribute value (as text) an import accepts; longer ones are refused, not cut.
MAX_ATTRIBUTE_CHARS = 1_000_000
_MAX_SPANS_PER_FILE = 5_000_000
_SCOPE = {"name": "memkit", "version": "0.1.0"}
# OTLP SpanKind (the enum's number and its JSON name).
_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_KIND_NAMES = {f"SPAN_KIND_{v}": k for k, v in _KINDS.items()}
# OpenInference span kinds and the GenAI operation names memkit reads as a step's kind.
OPENINFERENCE_KINDS = (
    "LLM", "CHAIN", "TOOL", "RETRIEVER", "AGENT", "EMBEDDING", "RERANKER", "GUARDRAIL", "EVALUATOR",
    "PROMPT", "UNKNOWN",
)
_GENAI_KINDS = {
    "chat": "LLM", "text_completion": "LLM", "generate_content": "LLM", "embeddings": "EMBEDDING",
    "execute_tool": "TOOL", "invoke_agent": "AGENT", "create_agent": "AGENT", "search_memory": "RETRIEVER",
    "retrieval": "RETRIEVER",
}
_MAX_NS = 253_402_300_799 * 10**9  # 9999-12-31T23:59:59Z


# -- OTLP JSON values ------------------------------------------------------------------------------

def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any_value(v) for v in value]}}
    return {"stringValue": json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)}


def _attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any_value(v)} for k, v in values.items() if v is not None]


def _read_value(value: Any, where: str) -> Any:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"{where}: an OTLP attribute value must be an object, got {type(value).__name__}")
    if not value:
        return None
    (kind, raw), *rest = value.items()
    if rest:
        raise InvalidInputError(f"{where}: an OTLP AnyValue holds one field, got {sorted(value)}")
    if kind == "stringValue":
        if not isinstance(raw, str):
            raise InvalidInputError(f"{where}: stringValue must be a string")
        if len(raw) > MAX_ATTRIBUTE_CHARS:
            raise InvalidInputError(
                f"{where} is {len(raw):,} characters; memkit.otel.MAX_ATTRIBUTE_CHARS is {MAX_ATTRIBUTE_CHARS:,}"
            )
        return raw
    if kind == "boolValue":
        return bool(raw)
    if kind == "intValue":
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: intValue {raw!r} is not an integer") from None
    if kind == "doubleValue":
        try:
            number = float(raw)
        except (TypeError, ValueError):
            raise InvalidInputError(f"{where}: doubleValue {raw!r} is not a number") from None
        return number if math.isfinite(number) else None
    if kind == "arrayValue":
        values = raw.get("values", []) if isinstance(raw, Mapping) else None
        if not isinstance(values, list):
            raise InvalidInputError(f"{where}: arrayValue.values must be a list")
        return [_read_value(v, where) for v in values]
    if kind == "kvlistValue":
        values = raw.get("values", []) if isinstance(raw, Mapping) else None
        if not isinstance(values, list):
            raise InvalidInputError(f"{where}: kvlistValue.values must be a list")
        return _read_attributes(values, where)
    if kind == "bytesValue":
        return str(raw)
    raise InvalidInputError(f"{where}: unknown OTLP value type {kind!r}")


def _read_attributes(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise InvalidInputError(f"{where}: attributes must be a list of key/value objects")
    out: dict[str, Any] = {}
    for pair in raw:
        if not isinstance(pair, Mapping) or not isinstance(pair.get("key"), str):
            raise InvalidInputError(f"{where}: an attribute needs a string 'key'")
        out[pair["key"]] = _read_value(pair.get("value", {}), f"{where} attribute {pair['key']!r}")
    return out


def _span_id(raw: Any, size: int, where: str, *, optional: bool = False) -> str | None:
    """A trace/span id as lower-case hex; OTLP JSON writes hex, protobuf's JSON mapping base64."""
    if raw in (None, "") and optional:
        return None
    if not isinstance(raw, str) or not raw:
        raise InvalidInputError(f"{where} must be a non-empty hex string")
    text = raw.strip()
    if len(text) == size * 2:
        try:
            bytes.fromhex(text)
            return text.lower()
        except ValueError:
            pass
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) != size:
        raise InvalidInputError(f"{where} {raw[:40]!r} is not a {size}-byte id (hex or base64)")
    return decoded.hex()


def _nanos(raw: Any, where: str) -> int:
    if isinstance(raw, bool) or raw is None:
        raise InvalidInputError(f"{where} is missing or not a number of nanoseconds since the epoch")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{where} {str(raw)[:40]!r} is not a number of nanoseconds since the epoch") from None
    if not 0 < value <= _MAX_NS:
        raise InvalidInputError(f"{where} {value} is outside 1970..9999 (nanoseconds since the epoch)")
    return value


# -- out -------------------------------------------------------------------------------------------

def _hex(seed: str, size: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[: size * 2]


async def _steps(provider: MemoryProvider, user_id: str | None, agent_id: str | None) -> list[MemoryItem]:
    if user_id is not None and agent_id is not None:
        spaces = [(user_id, agent_id)]
    elif isinstance(provider, SupportsNamespaces):
        spaces = [
            (i.user_id, i.agent_id) for i in await provider.namespaces()
            if user_id in (None, i.user_id) and agent_id in (None, i.agent_id)
        ]
    else:
        raise InvalidInputError(f"{type(provider).__name__} cannot list namespaces: pass user_id and agent_id")
    steps: list[MemoryItem] = []
    for user, agent in spaces:
        if isinstance(provider, SupportsPaging):
            offset = 0
            while True:
                page = await provider.get_page(user, agent, offset=offset, limit=1_000, filters={"type": "trace"})
                steps.extend(page)
                offset += len(page)
                if len(page) < 1_000:
                    break
        else:
            steps.extend(await provider.get_all(user, agent, 10_000, {"type": "trace"}))
    return steps


async def _read_runs(
    provider: MemoryProvider, user_id: str | None, agent_id: str | None, workflow_id: str | None
) -> tuple[list[Recall], list[MemoryItem]]:
    """The recalls and trace steps an export covers, read in one visit to memkit's loop."""
    recalls: list[Recall] = []
    if isinstance(provider, SupportsRecalls):
        recalls = await provider.recalls(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id)
    return recalls, await _steps(provider, user_id, agent_id)


def _recall_span(recall: Recall, trace_id: str, parent: str, start_ns: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "search_memory",
        "gen_ai.memory.query": recall.query,
        "gen_ai.memory.search.mode": recall.mode,
        "gen_ai.memory.top_k": recall.limit,
        "gen_ai.memory.namespace": f"{recall.user_id}/{recall.agent_id}",
        "openinference.span.kind": "RETRIEVER",
        "input.value": recall.query,
        "memkit.recall.id": recall.id,
        "memkit.recall.kind": recall.kind,
        "memkit.recall.user_id": recall.user_id,
        "memkit.recall.agent_id": recall.agent_id,
        "memkit.recall.filters": None if recall.filters is None else json.dumps(recall.filters, sort_keys=True),
        "memkit.recall.options": None if recall.options is None else json.dumps(recall.options, sort_keys=True),
        "memkit.recall.attempt": recall.attempt,
    }
    for i, hit in enumerate(recall.hits):
        prefix = f"retrieval.documents.{i}.document"
        attrs[f"{prefix}.id"] = hit.id
        attrs[f"{prefix}.content"] = hit.content
        attrs[f"{prefix}.score"] = hit.score
        attrs[f"{prefix}.metadata"] = json.dumps({"rank": hit.rank, "details": hit.details}, sort_keys=True)
    at = to_us(recall.created_at) * 1_000 or start_ns
    return {
        "traceId": trace_id, "spanId": _hex(f"recall:{recall.id}", 8), "parentSpanId": parent,
        "name": f"search_memory {recall.agent_id}", "kind": 1,
        "startTimeUnixNano": str(at), "endTimeUnixNano": str(at),
        "attributes": _attributes(attrs), "status": {"code": 1},
    }


def _step_span(item: MemoryItem, recalls: list[Recall]) -> dict[str, Any]:
    meta = item.metadata
    data: dict[str, Any] = dict(meta.get("trace") or {})
    workflow = str(meta.get("workflow_id", "unknown_workflow"))
    run_id = data.get("run_id")
    run_seed = f"{item.user_id}|{item.agent_id}|{workflow}|{run_id}"
    trace_id = data.get("trace_id") or _hex(f"run:{run_seed}", 16)
    index = data.get("step_index")
    def step_span_id(step: Any) -> str:
        return _hex(f"step:{run_seed}|{step}" if step is not None else f"step:{item.id}", 8)

    span_id = data.get("span_id") or step_span_id(index)
    parent = data.get("parent_span_id")
    if parent is None and isinstance(data.get("parent_step_index"), int):
        parent = step_span_id(data["parent_step_index"])  # a step started inside another (Step nesting)
    start = float(data.get("timestamp") or (item.created_at.timestamp() if item.created_at else 0.0))
    duration = float(data.get("duration") or 0.0)
    start_ns = round(start * 1e9) or 1
    status = data.get("status")
    kind = data.get("span_kind") or "TOOL"
    tool = data.get("tool")
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool" if kind == "TOOL" else kind.lower(),
        "gen_ai.tool.name": tool,
        "gen_ai.agent.id": item.agent_id,
        "openinference.span.kind": kind,
        "input.value": None if data.get("parameters") is None else json.dumps(data["parameters"], sort_keys=True),
        "input.mime_type": None if data.get("parameters") is None else "application/json",
        "output.value": None if data.get("result") is None else json.dumps(data["result"], sort_keys=True),
        "output.mime_type": None if data.get("result") is None else "application/json",
        "user.id": item.user_id,
        "memkit.workflow_id": workflow,
        "memkit.run_id": run_id,
        "memkit.user_id": item.user_id,
        "memkit.agent_id": item.agent_id,
        "memkit.step_index": index,
        "memkit.status": status,
        "memkit.retry_count": data.get("retry_count"),
        "memkit.retry_errors": None if not data.get("retry_errors") else json.dumps(data["retry_errors"]),
    }
    span: dict[str, Any] = {
        "traceId": trace_id, "spanId": span_id, "name": str(data.get("step_name") or tool or "step"),
        "kind": 1, "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + max(0, round(duration * 1e9))),
        "attributes": _attributes(attrs),
        "status": {"code": 2, "message": str(data.get("error") or "")} if status == "failed" else {"code": 1},
    }
    if parent:
        span["parentSpanId"] = parent
    if status == "failed" and data.get("error"):
        span["events"] = [{
            "name": "exception", "timeUnixNano": span["endTimeUnixNano"],
            "attributes": _attributes({"exception.message": str(data["error"])}),
        }]
    children = [_recall_span(r, trace_id, span_id, start_ns) for r in recalls]
    return {"span": span, "children": children}


def export_otlp(
    mem: Memory | MemoryProvider,
    path: str | os.PathLike[str] | None = None,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
    run_id: str | None = None,
    service_name: str = "memkit",
) -> dict[str, Any]:
    """The store's runs as an OTLP JSON ``ExportTraceServiceRequest`` (and written to ``path`` if given).

    Every step is a span of its run's trace; every recall its child ``search_memory`` span. Narrow
    with ``user_id``/``agent_id``/``workflow_id``/``run_id``. The file opens in any OTLP viewer
    (Phoenix, Jaeger, the OTel collector's file receiver) and :func:`import_otlp` reads it back.
    """
    recalls, steps = call(mem, _read_runs, user_id, agent_id, workflow_id)
    by_step: dict[tuple[str, str, str, str | None, int], list[Recall]] = {}
    for recall in recalls:
        if recall.workflow_id is None or recall.step_index is None:
            continue
        user = recall.trace_user_id or recall.user_id
        agent = recall.trace_agent_id or recall.agent_id
        by_step.setdefault((user, agent, recall.workflow_id, recall.run_id, recall.step_index), []).append(recall)
    spans: list[dict[str, Any]] = []
    for item in steps:
        meta = item.metadata
        data = meta.get("trace") or {}
        if workflow_id is not None and meta.get("workflow_id") != workflow_id:
            continue
        if run_id is not None and data.get("run_id") != run_id:
            continue
        key = (str(item.user_id), str(item.agent_id), str(meta.get("workflow_id")), data.get("run_id"),
               data.get("step_index", -1))
        built = _step_span(item, by_step.get(key, []))
        spans.append(built["span"])
        spans.extend(built["children"])
    spans.sort(key=lambda s: (s["traceId"], int(s["startTimeUnixNano"])))
    request = {"resourceSpans": [{
        "resource": {"attributes": _attributes({"service.name": service_name})},
        "scopeSpans": [{"scope": _SCOPE, "spans": spans}],
    }]}
    if path is not None:
        Path(path).write_text(json.dumps(request, ensure_ascii=False), encoding="utf-8")
    return request


def send_otlp(
    mem: Memory | MemoryProvider,
    endpoint: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10.0,
    **narrow: Any,
) -> int:
    """POST the store's runs (as :func:`export_otlp` builds them) to an OTLP/HTTP collector.

    Sent through the OTel SDK's ``OTLPSpanExporter`` (protobuf over HTTP, ``endpoint`` such as
    ``http://127.0.0.1:6006/v1/traces``); needs ``memkit[otel]``. Returns how many spans went out.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError as exc:
        raise BackendUnavailableError("send_otlp needs the OTel SDK: pip install 'memkit[otel]'") from exc
    spans = _readable_spans(export_otlp(mem, **narrow))
    exporter = OTLPSpanExporter(endpoint=endpoint, headers=dict(headers or {}), timeout=timeout)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    if result is not SpanExportResult.SUCCESS:
        from memkit._core._errors import StorageError

        raise StorageError(f"the OTLP endpoint {endpoint} refused the {len(spans)} spans")
    return len(spans)


def _readable_spans(request: Mapping[str, Any]) -> list[Any]:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    out: list[Any] = []
    for spans, resource in _walk(request):
        res = Resource.create(resource)
        for raw in spans:
            attrs = _read_attributes(raw.get("attributes"), "span")
            ctx = SpanContext(int(raw["traceId"], 16), int(raw["spanId"], 16), is_remote=False,
                              trace_flags=TraceFlags(TraceFlags.SAMPLED))
            parent = raw.get("parentSpanId")
            parent_ctx = None if not parent else SpanContext(int(raw["traceId"], 16), int(parent, 16), is_remote=False)
            code = (raw.get("status") or {}).get("code", 0)
            out.append(ReadableSpan(
                name=raw["name"], context=ctx, parent=parent_ctx, resource=res, attributes=attrs,
                kind=SpanKind(max(0, int(raw.get("kind", 1)) - 1)),
                status=Status(StatusCode.ERROR if code == 2 else StatusCode.OK if code == 1 else StatusCode.UNSET,
                              (raw.get("status") or {}).get("message") or None),
                start_time=int(raw["startTimeUnixNano"]), end_time=int(raw["endTimeUnixNano"]),
                events=[Event(e["name"], _read_attributes(e.get("attributes"), "event"), int(e["timeUnixNano"]))
                        for e in raw.get("events", [])],
                instrumentation_scope=InstrumentationScope(_SCOPE["name"], _SCOPE["version"]),
            ))
    return out


def spans_to_otlp(spans: Sequence[Any]) -> dict[str, Any]:
    """OTel SDK ``ReadableSpan`` objects as an OTLP JSON request (what :func:`import_otlp` reads).

    For tests and for writing a span file from an in-process exporter; needs ``memkit[otel]``.
    """
    try:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    except ImportError as exc:
        raise BackendUnavailableError("spans_to_otlp needs the OTel SDK: pip install 'memkit[otel]'") from exc
    request: dict[str, Any] = MessageToDict(encode_spans(list(spans)))
    return request


# -- in --------------------------------------------------------------------------------------------

@dataclass
class _Span:
    trace_id: str
    span_id: str
    parent: str | None
    name: str
    kind: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any]
    error: str | None
    service: str | None
    where: str


@dataclass
class OtlpImport:
    """What :func:`import_otlp` wrote: ``runs`` (one per trace), ``steps`` and ``recalls``."""

    runs: int = 0
    steps: int = 0
    recalls: int = 0
    run_ids: list[str] = field(default_factory=list)


def _walk(request: Any) -> Iterator[tuple[list[Mapping[str, Any]], dict[str, Any]]]:
    if not isinstance(request, Mapping) or not isinstance(request.get("resourceSpans"), list):
        raise InvalidInputError("an OTLP trace file is a JSON object with a 'resourceSpans' list")
    for r, block in enumerate(request["resourceSpans"]):
        if not isinstance(block, Mapping):
            raise InvalidInputError(f"resourceSpans[{r}] must be an object")
        resource = _read_attributes((block.get("resource") or {}).get("attributes"), f"resourceSpans[{r}].resource")
        scopes = block.get("scopeSpans", block.get("instrumentationLibrarySpans", []))
        if not isinstance(scopes, list):
            raise InvalidInputError(f"resourceSpans[{r}].scopeSpans must be a list")
        for s, scope in enumerate(scopes):
            spans = scope.get("spans", []) if isinstance(scope, Mapping) else None
            if not isinstance(spans, list):
                raise InvalidInputError(f"resourceSpans[{r}].scopeSpans[{s}].spans must be a list")
            yield spans, resource


def _kind_of(raw: Mapping[str, Any], attrs: Mapping[str, Any], where: str) -> str:
    kind = raw.get("kind", 0)
    if isinstance(kind, str):
        if kind not in _KIND_NAMES:
            raise InvalidInputError(f"{where}: unknown span kind {kind!r}; OTLP's are {sorted(_KIND_NAMES)}")
    elif isinstance(kind, bool) or not isinstance(kind, int) or kind not in _KINDS:
        raise InvalidInputError(f"{where}: unknown span kind {kind!r}; OTLP's are 0..5")
    oi = attrs.get("openinference.span.kind")
    if oi is not None:
        if not isinstance(oi, str) or oi.upper() not in OPENINFERENCE_KINDS:
            raise InvalidInputError(
                f"{where}: unknown openinference.span.kind {str(oi)[:40]!r}; known: {', '.join(OPENINFERENCE_KINDS)}"
            )
        return oi.upper()
    operation = attrs.get("gen_ai.operation.name")
    if isinstance(operation, str) and operation in _GENAI_KINDS:
        return _GENAI_KINDS[operation]
    return "CHAIN" if not raw.get("parentSpanId") else "UNKNOWN"


def _parse(request: Any) -> list[_Span]:
    spans: list[_Span] = []
    seen: set[tuple[str, str]] = set()
    for raw_spans, resource in _walk(request):
        service = resource.get("service.name")
        for raw in raw_spans:
            where = f"span {len(spans)}"
            if len(spans) >= _MAX_SPANS_PER_FILE:
                raise InvalidInputError(f"the file holds more than {_MAX_SPANS_PER_FILE:,} spans; split it")
            if not isinstance(raw, Mapping):
                raise InvalidInputError(f"{where} must be an object")
            name = raw.get("name")
            if not isinstance(name, str) or not name:
                raise InvalidInputError(f"{where}: 'name' must be a non-empty string")
            where = f"span {len(spans)} ({name[:60]!r})"
            trace_id = _span_id(raw.get("traceId"), 16, f"{where} traceId")
            span_id = _span_id(raw.get("spanId"), 8, f"{where} spanId")
            parent = _span_id(raw.get("parentSpanId"), 8, f"{where} parentSpanId", optional=True)
            assert trace_id is not None and span_id is not None
            if (trace_id, span_id) in seen:
                raise InvalidInputError(f"{where}: span id {span_id} appears twice in trace {trace_id}")
            seen.add((trace_id, span_id))
            attrs = _read_attributes(raw.get("attributes"), where)
            start = _nanos(raw.get("startTimeUnixNano"), f"{where} startTimeUnixNano")
            end = _nanos(raw.get("endTimeUnixNano"), f"{where} endTimeUnixNano")
            if end < start:
                raise InvalidInputError(f"{where} ends before it starts ({end} < {start})")
            status = raw.get("status") or {}
            if not isinstance(status, Mapping):
                raise InvalidInputError(f"{where}: status must be an object")
            code = status.get("code", 0)
            failed = code in (2, "STATUS_CODE_ERROR")
            error = None
            if failed:
                error = str(status.get("message") or "")
                for event in raw.get("events") or []:
                    if isinstance(event, Mapping) and event.get("name") == "exception":
                        ev = _read_attributes(event.get("attributes"), f"{where} event")
                        kind = ev.get("exception.type")
                        message = ev.get("exception.message") or ""
                        error = error or (f"{kind}: {message}" if kind else str(message))
                error = error or "error"
            spans.append(_Span(trace_id, span_id, parent, name, _kind_of(raw, attrs, where), start, end,
                               attrs, error, service if isinstance(service, str) else None, where))
    _check_tree(spans)
    return spans


def _check_tree(spans: list[_Span]) -> None:
    """Refuse a parent cycle (a span its own ancestor): no tree view or roll-up could end."""
    parent_of = {(s.trace_id, s.span_id): s.parent for s in spans}
    done: set[tuple[str, str]] = set()
    for span in spans:
        path: list[tuple[str, str]] = []
        on_path: set[tuple[str, str]] = set()
        node: tuple[str, str] | None = (span.trace_id, span.span_id)
        while node is not None and node not in done:
            if node in on_path:
                raise InvalidInputError(
                    f"{span.where}: its parent ids form a cycle ({' -> '.join(n[1] for n in path)} -> {node[1]})"
                )
            on_path.add(node)
            path.append(node)
            parent = parent_of.get(node)
            node = None if parent is None or (node[0], parent) not in parent_of else (node[0], parent)
        done.update(path)


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"value": value}
        return parsed if isinstance(parsed, dict) else {"value": parsed}
    return None if value is None else {"value": value}


def _documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    docs: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith("retrieval.documents."):
            index, _, rest = key[len("retrieval.documents."):].partition(".")
            if index.isdigit() and rest.startswith("document."):
                docs.setdefault(int(index), {})[rest[len("document."):]] = value
    return [docs[i] for i in sorted(docs)]


def _step_of(span: _Span, index: int, parent_index: int | None) -> dict[str, Any]:
    a = span.attrs
    tool = a.get("tool.name") or a.get("gen_ai.tool.name")
    data: dict[str, Any] = {
        "step_name": span.name,
        "tool": str(tool) if tool is not None else span.kind.lower(),
        "status": a.get("memkit.status") if isinstance(a.get("memkit.status"), str)
        else ("failed" if span.error is not None else "success"),
        "error": span.error,
        "timestamp": span.start_ns / 1e9,
        "duration": (span.end_ns - span.start_ns) / 1e9,
        "parameters": _json_or_text(a.get("input.value")),
        "result": _json_or_text(a.get("output.value")),
        "retry_count": a.get("memkit.retry_count") if isinstance(a.get("memkit.retry_count"), int) else 0,
        "step_index": index,
        # A memkit export says its run (None included); a foreign trace's run is the trace.
        "run_id": a.get("memkit.run_id") if "memkit.workflow_id" in a else span.trace_id,
        "span_kind": span.kind,
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent,
        "parent_step_index": parent_index,
    }
    if isinstance(a.get("memkit.retry_errors"), str):
        data["retry_errors"] = json.loads(a["memkit.retry_errors"])
    model = a.get("llm.model_name") or a.get("gen_ai.request.model")
    if model is not None:
        data["model"] = str(model)
    tokens = {k: a[k] for k in ("llm.token_count.prompt", "llm.token_count.completion",
                                "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens") if k in a}
    if tokens:
        data["tokens"] = tokens
    return {k: v for k, v in data.items() if v is not None}


def _recall_of(
    span: _Span, step: Mapping[str, Any], workflow: str, user_id: str, agent_id: str, own: bool
) -> Recall | None:
    a = span.attrs
    docs = _documents(a)
    query = a.get("gen_ai.memory.query", a.get("input.value"))
    if not docs and not own:
        return None
    hits = []
    for rank, doc in enumerate(docs, start=1):
        meta = doc.get("metadata")
        extra: dict[str, Any] = {}
        if isinstance(meta, str):
            try:
                extra = json.loads(meta)
            except ValueError:
                extra = {}
        score = doc.get("score")
        hits.append(RecalledMemory(
            id=str(doc.get("id") or f"{span.span_id}-{rank}"),
            rank=int(extra.get("rank", rank)) if isinstance(extra, dict) else rank,
            score=float(score) if isinstance(score, (int, float)) else None,
            details=extra.get("details") if isinstance(extra, dict) else None,
            content=str(doc.get("content") or ""),
        ))

    def loaded(key: str) -> Any:
        value = a.get(key)
        return json.loads(value) if isinstance(value, str) else None

    attempt = a.get("memkit.recall.attempt")
    return Recall(
        id=str(a.get("memkit.recall.id") or f"otel-{span.trace_id}-{span.span_id}"),
        created_at=from_us(span.start_ns // 1_000),
        user_id=str(a.get("memkit.recall.user_id") or user_id),
        agent_id=str(a.get("memkit.recall.agent_id") or agent_id),
        kind="context" if a.get("memkit.recall.kind") == "context" else "search",
        query=str(query or ""),
        mode=str(a.get("gen_ai.memory.search.mode") or "retriever"),
        filters=loaded("memkit.recall.filters"),
        limit=int(a.get("gen_ai.memory.top_k") or max(len(hits), 1)),
        options=loaded("memkit.recall.options"),
        workflow_id=workflow, run_id=step.get("run_id"), step_index=step.get("step_index"),
        step_name=step.get("step_name"), attempt=attempt if isinstance(attempt, int) else None,
        trace_user_id=user_id, trace_agent_id=agent_id, hits=hits,
    )


def _plan(
    spans: list[_Span], user_id: str | None, agent_id: str | None, workflow_id: str | None
) -> tuple[list[tuple[str, str, str, dict[str, Any]]], list[Recall], list[str]]:
    """(user, agent, workflow, step data) per step and the recalls, for the whole file."""
    by_trace: dict[str, list[_Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    steps: list[tuple[str, str, str, dict[str, Any]]] = []
    recalls: list[Recall] = []
    runs: list[str] = []
    for trace_id, members in by_trace.items():
        members.sort(key=lambda s: (s.start_ns, s.end_ns))
        own_recalls = [s for s in members if "memkit.recall.id" in s.attrs]
        step_spans = [s for s in members if "memkit.recall.id" not in s.attrs]
        # A memkit export keeps each step's index; a foreign trace is numbered by start time.
        indexed = all(isinstance(s.attrs.get("memkit.step_index"), int) for s in step_spans)
        index_of = {
            s.span_id: (s.attrs["memkit.step_index"] if indexed else i) for i, s in enumerate(step_spans)
        }
        by_span: dict[str, dict[str, Any]] = {}
        first = step_spans[0] if step_spans else members[0]
        for span in step_spans:
            a = span.attrs
            user = str(user_id or a.get("memkit.user_id") or a.get("user.id") or "system")
            agent = str(agent_id or a.get("memkit.agent_id") or a.get("gen_ai.agent.id") or span.service or "otel")
            workflow = str(workflow_id or a.get("memkit.workflow_id") or first.service or first.name)
            data = _step_of(span, index_of[span.span_id],
                            None if span.parent is None else index_of.get(span.parent))
            by_span[span.span_id] = {"data": data, "user": user, "agent": agent, "workflow": workflow}
            steps.append((user, agent, workflow, data))
            if span.kind == "RETRIEVER":
                recall = _recall_of(span, data, workflow, user, agent, own=False)
                if recall is not None:
                    recalls.append(recall)
        for span in own_recalls:
            owner = by_span.get(span.parent or "")
            if owner is None:
                raise InvalidInputError(f"{span.where}: a memkit recall span whose parent step is not in the file")
            recall = _recall_of(span, owner["data"], owner["workflow"], owner["user"], owner["agent"], own=True)
            assert recall is not None
            recalls.append(recall)
        runs.append(trace_id)
    return steps, recalls, runs


def _load(source: Any) -> list[Any]:
    if isinstance(source, Mapping):
        return [source]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInputError(f"cannot read the span file {str(path)!r}: {exc.strerror or exc}") from None
        try:
            return [json.loads(text)]
        except ValueError:
            pass
        requests = []
        for n, line in enumerate(text.splitlines(), start=1):  # JSON lines: the collector's file exporter
            if line.strip():
                try:
                    requests.append(json.loads(line))
                except ValueError as exc:
                    raise InvalidInputError(f"{path.name} line {n} is not JSON: {exc}") from None
        return requests
    raise InvalidInputError(f"import_otlp takes a path or an OTLP JSON dict, got {type(source).__name__}")


def import_otlp(
    mem: Memory | MemoryProvider,
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
) -> OtlpImport:
    """Import an OTLP JSON span file (one request, or JSON lines of them) as memkit runs.

    ``user_id``/``agent_id``/``workflow_id`` say where the runs go; left out, a file exported by
    memkit goes back where it came from, and a foreign one to ``user.id`` (else ``"system"``), the
    service name (else ``"otel"``) and its root span's service or name. The whole file is checked
    first; any bad span (a huge attribute, a parent cycle, an unknown kind, a bad timestamp) is an
    :class:`memkit.InvalidInputError` naming it, and nothing is written.
    """
    provider = provider_of(mem)
    spans: list[_Span] = []
    for request in _load(source):
        spans.extend(_parse(request))
    steps, recalls, runs = _plan(spans, user_id, agent_id, workflow_id)
    records = []
    for user, agent, workflow, data in steps:
        try:
            records.append(trace_record(agent, workflow, data, user))
        except InvalidInputError as exc:
            raise InvalidInputError(f"span {data.get('span_id')} ({data.get('step_name')!r}): {exc}") from None
    if recalls and not isinstance(provider, SupportsRecalls):
        recalls = []
    checked = checked_recalls(recalls)
    rows = [
        {"id": r.id, "content": r.content, "user_id": r.user_id, "agent_id": r.agent_id,
         "metadata": r.metadata, "created_at": r.created_at}
        for r in records
    ]
    if not isinstance(provider, SupportsAddMany):
        raise InvalidInputError(f"{type(provider).__name__} cannot write a batch; import_otlp needs add_many")
    call(provider, _write, rows, checked)
    return OtlpImport(runs=len(runs), steps=len(rows), recalls=len(checked), run_ids=runs)


async def _write(provider: MemoryProvider, rows: list[dict[str, Any]], recalls: list[Recall]) -> None:
    """Store an import's steps in one batch, then its recalls; a refused recall takes the steps back out."""
    assert isinstance(provider, SupportsAddMany)
    written = await provider.add_many(rows) if rows else []
    if recalls:
        assert isinstance(provider, SupportsRecalls)
        try:
            await provider.add_recalls(recalls)
        except BaseException:
            for memory_id in written:  # nothing half-imported
                await provider.delete(memory_id)
            raise


# -- live ------------------------------------------------------------------------------------------

_ProcessorBase: Any
try:
    from opentelemetry.sdk.trace import SpanProcessor as _ProcessorBase
except ImportError:  # pragma: no cover - depends on the install; the class still documents itself
    _ProcessorBase = object


class MemkitSpanProcessor(_ProcessorBase):  # type: ignore[misc]
    """An OTel SDK ``SpanProcessor`` that stores each span as a memkit step when it ends.

    >>> provider.add_span_processor(MemkitSpanProcessor(mem, user_id="alice", agent_id="bot"))  # doctest: +SKIP

    Steps are numbered per trace in the order their spans end (children end before their
    parents); ``span_id``/``parent_span_id`` keep the tree. A retriever span's documents become a
    recall of its step. A span the store refuses is reported on stderr by the SDK's own error
    handling and does not stop the agent.
    """

    def __init__(
        self,
        mem: Memory | MemoryProvider,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
    ) -> None:
        if _ProcessorBase is object:
            raise BackendUnavailableError("MemkitSpanProcessor needs the OTel SDK: pip install 'memkit[otel]'")
        self._mem = mem
        self._provider = provider_of(mem)
        self.user_id, self.agent_id, self.workflow_id = user_id, agent_id, workflow_id
        self._counts: dict[str, int] = {}
        self._roots: dict[str, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.parent is None:
            self._roots[format(span.context.trace_id, "032x")] = span.name

    def on_end(self, span: Any) -> None:
        request = spans_to_otlp([span])
        parsed = _parse(request)
        trace_id = parsed[0].trace_id
        index = self._counts.get(trace_id, 0)
        self._counts[trace_id] = index + 1
        parsed[0].attrs.setdefault("memkit.step_index", index)
        workflow = self.workflow_id or parsed[0].service or self._roots.get(trace_id) or parsed[0].name
        if span.parent is None:
            self._roots.pop(trace_id, None)
            self._counts.pop(trace_id, None)
        steps, recalls, _ = _plan(parsed, self.user_id, self.agent_id, workflow)
        for *_, data in steps:
            data.pop("parent_step_index", None)  # the parent has not ended yet: its index is unknown
        call(self._provider, _store_span, steps, recalls)

    def shutdown(self) -> None:
        self._counts.clear()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


async def _store_span(
    provider: MemoryProvider, steps: list[tuple[str, str, str, dict[str, Any]]], recalls: list[Recall]
) -> None:
    """One ended span's steps and recalls, stored in one visit to memkit's loop."""
    for user, agent, workflow, data in steps:
        await provider.add_trace(agent, workflow, data, user)
    if recalls and isinstance(provider, SupportsRecalls):
        await provider.add_recalls(recalls)
