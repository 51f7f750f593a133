"""Out: memkit runs as OTLP spans (:func:`export_otlp`, :func:`send_otlp`, :func:`spans_to_otlp`)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memkit._core._errors import BackendUnavailableError, InvalidInputError
from memkit._core._items import status_of
from memkit._core._models import MemoryItem
from memkit._core._port import MemoryProvider, SupportsNamespaces, SupportsPaging, SupportsRecalls
from memkit._core._recalls import Recall
from memkit._core._records import to_us
from memkit._sync import Memory, call
from memkit.otel._convert import _SCOPE, _attributes, _read_attributes, _walk


def _hex(seed: str, size: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[: size * 2]


async def _steps(
    provider: MemoryProvider, user_id: str | None, agent_id: str | None, memories: bool = False
) -> list[MemoryItem]:
    """The trace steps of the namespaces asked for; with ``memories``, their other memories too."""
    wanted = None if memories else {"type": "trace"}
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
                page = await provider.get_page(user, agent, offset=offset, limit=1_000, filters=wanted)
                steps.extend(page)
                offset += len(page)
                if len(page) < 1_000:
                    break
        else:
            steps.extend(await provider.get_all(user, agent, 10_000, wanted))
    return steps


async def _read_runs(
    provider: MemoryProvider, user_id: str | None, agent_id: str | None, workflow_id: str | None,
    memories: bool = False,
) -> tuple[list[Recall], list[MemoryItem]]:
    """The recalls and trace steps (and with ``memories`` the other memories) an export covers, read
    in one visit to memkit's loop."""
    recalls: list[Recall] = []
    if isinstance(provider, SupportsRecalls):
        recalls = await provider.recalls(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id)
    return recalls, await _steps(provider, user_id, agent_id, memories)


def _memory_span(item: MemoryItem) -> dict[str, Any]:
    """A memory's creation as the GenAI memory operation ``create_memory``, in one trace per namespace."""
    namespace = f"{item.user_id}/{item.agent_id}"
    at = (to_us(item.created_at) * 1_000 if item.created_at is not None else 0) or 1
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "create_memory",
        "gen_ai.memory.record.id": item.id,
        "gen_ai.memory.namespace": namespace,
        "gen_ai.agent.id": item.agent_id,
        "user.id": item.user_id,
        "input.value": item.content,
        "memkit.memory.id": item.id,
        "memkit.memory.user_id": item.user_id,
        "memkit.memory.agent_id": item.agent_id,
        "memkit.memory.metadata": json.dumps(item.metadata, ensure_ascii=False, sort_keys=True),
    }
    return {
        "traceId": _hex(f"memories:{item.user_id}|{item.agent_id}", 16), "spanId": _hex(f"memory:{item.id}", 8),
        "name": f"create_memory {item.agent_id}", "kind": 1,
        "startTimeUnixNano": str(at), "endTimeUnixNano": str(at),
        "attributes": _attributes(attrs), "status": {"code": 1},
    }


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
    failed = status_of(status, warn=False) == "failed"  # the agent's word (error, ERROR, 503...) as read
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
        "status": {"code": 2, "message": str(data.get("error") or "")} if failed else {"code": 1},
    }
    if parent:
        span["parentSpanId"] = parent
    if failed and data.get("error"):
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
    memories: bool = False,
) -> dict[str, Any]:
    """The store's runs as an OTLP JSON ``ExportTraceServiceRequest`` (and written to ``path`` if given).

    Every step is a span of its run's trace; every recall its child ``search_memory`` span. Narrow
    with ``user_id``/``agent_id``/``workflow_id``/``run_id``. With ``memories=True`` (and no
    ``workflow_id`` or ``run_id``: a memory belongs to no run), each memory of the namespaces
    exported is also a ``create_memory`` span at the time it was written, in one trace per
    namespace. The file opens in any OTLP viewer (Phoenix, Jaeger, the OTel collector's file
    receiver) and :func:`import_otlp` reads it back (memories as memories).
    """
    memories = memories and workflow_id is None and run_id is None
    recalls, items = call(mem, _read_runs, user_id, agent_id, workflow_id, memories)
    steps = [i for i in items if i.metadata.get("type") == "trace"]
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
    if memories:
        spans.extend(_memory_span(i) for i in items if i.metadata.get("type") != "trace")
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
    user_id: str | None = None,
    agent_id: str | None = None,
    workflow_id: str | None = None,
    run_id: str | None = None,
    service_name: str = "memkit",
    memories: bool = False,
) -> int:
    """POST the store's runs (as :func:`export_otlp` builds them) to an OTLP/HTTP collector.

    Sent through the OTel SDK's ``OTLPSpanExporter`` (protobuf over HTTP, ``endpoint`` such as
    ``http://127.0.0.1:6006/v1/traces``); needs ``memkit[otel]``. Returns how many spans went out.
    The keywords after ``timeout`` narrow and shape the export as :func:`export_otlp`'s do.
    """
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import SpanExportResult
    except ImportError as exc:
        raise BackendUnavailableError("send_otlp needs the OTel SDK: pip install 'memkit[otel]'") from exc
    request = export_otlp(mem, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id,
                          service_name=service_name, memories=memories)
    spans = _readable_spans(request)
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
