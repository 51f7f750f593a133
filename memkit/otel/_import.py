"""In: OTLP JSON span files as memkit runs (:func:`import_otlp`), checked whole before anything is written.

Also the span parsing and step planning the live processor reuses.
"""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from memkit._core._errors import InvalidInputError
from memkit._core._ops import AddRecallsOp, ImportStepsOp, WriteOp
from memkit._core._port import MemoryProvider, SupportsAddMany, SupportsImportSteps, SupportsRecalls
from memkit._core._records import Record, TraceRow, from_us, new_record, trace_record
from memkit._core._store import Store
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_id
from memkit._recall._recording import Recall, RecalledMemory, body_of, checked_recalls, json_time
from memkit._sync import Memory, call, provider_of
from memkit.otel import _stream
from memkit.otel._convert import (
    _GENAI_KINDS,
    _KIND_NAMES,
    _KINDS,
    _MAX_SPANS_PER_FILE,
    OPENINFERENCE_KINDS,
    _nanos,
    _read_attributes,
    _span_id,
    _walk,
)


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
    index: int  # its place in the file, for messages

    @property
    def where(self) -> str:
        return f"span {self.index} ({self.name[:60]!r})"


@dataclass
class OtlpImport:
    """What :func:`import_otlp` wrote: ``runs`` (one per trace), ``steps``, ``recalls`` and ``memories``."""

    runs: int = 0
    steps: int = 0
    recalls: int = 0
    run_ids: list[str] = field(default_factory=list)
    memories: int = 0  # ``create_memory`` spans of a memkit export, written back as memories


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
    _read_spans(request, spans.append)
    _check_tree(spans)
    return spans


def _read_spans(request: Any, keep: Callable[[_Span], object]) -> None:
    """Each span of ``request`` checked, in file order, to ``keep``; the first bad one is an error."""
    spans: list[_Span] = []
    seen: set[tuple[str, str]] = set()
    trace_ids: dict[str, str] = {}  # as written -> hex, so each distinct id is decoded once
    span_ids: dict[str, str] = {}
    for raw_spans, resource in _walk(request):
        service = resource.get("service.name")
        for raw in raw_spans:
            where = f"span {len(spans)}"
            if len(spans) >= _MAX_SPANS_PER_FILE:
                raise InvalidInputError(f"the file holds more than {_MAX_SPANS_PER_FILE:,} spans; split it")
            if type(raw) is not dict and not isinstance(raw, Mapping):
                raise InvalidInputError(f"{where} must be an object")
            name = raw.get("name")
            if not isinstance(name, str) or not name:
                raise InvalidInputError(f"{where}: 'name' must be a non-empty string")
            where = f"span {len(spans)} ({name[:60]!r})"
            # Ids seen before are looked up here, before the text naming them is built.
            raw_id = raw.get("traceId")
            trace_id = trace_ids.get(raw_id) if type(raw_id) is str else None
            if trace_id is None:
                trace_id = _span_id(raw_id, 16, f"{where} traceId", seen=trace_ids)
            raw_id = raw.get("spanId")
            span_id = span_ids.get(raw_id) if type(raw_id) is str else None
            if span_id is None:
                span_id = _span_id(raw_id, 8, f"{where} spanId", seen=span_ids)
            raw_id = raw.get("parentSpanId")
            parent = span_ids.get(raw_id) if type(raw_id) is str else None
            if parent is None and raw_id not in (None, ""):
                parent = _span_id(raw_id, 8, f"{where} parentSpanId", optional=True, seen=span_ids)
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
            if type(status) is not dict and not isinstance(status, Mapping):
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
            span = _Span(trace_id, span_id, parent, name, _kind_of(raw, attrs, where), start, end,
                         attrs, error, service if isinstance(service, str) else None, len(spans))
            spans.append(span)
            keep(span)


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


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")  # what json.loads skips around a text
_JSON_STARTS = frozenset('{["-0123456789tfnNI')  # what a JSON text (as Python reads it) can start with


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        # Prose ("plan the assay") is not sent through the JSON parser to fail there: an
        # exception per span costs more than the parse.
        first = value[:1]
        if first not in _JSON_STARTS and (not first.isspace() or value.lstrip()[:1] not in _JSON_STARTS):
            return {"value": value}
        # json.loads, without the exception it raises for a number followed by words ("3 hits").
        try:
            parsed, end = _DECODER.raw_decode(value, _SPACE.match(value, 0).end())  # type: ignore[union-attr]
        except ValueError:
            return {"value": value}
        if _SPACE.match(value, end).end() != len(value):  # type: ignore[union-attr]
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


_TOKEN_KEYS = ("llm.token_count.prompt", "llm.token_count.completion", "gen_ai.usage.input_tokens",
               "gen_ai.usage.output_tokens")


def _step_of(span: _Span, index: int, parent_index: int | None) -> dict[str, Any]:
    """The step's trace data; a value that is None is left out (the keys keep this order)."""
    a = span.attrs
    tool = a.get("tool.name") or a.get("gen_ai.tool.name")
    status = a.get("memkit.status")
    data: dict[str, Any] = {
        "step_name": span.name,
        "tool": str(tool) if tool is not None else span.kind.lower(),
        "status": status if isinstance(status, str) else ("failed" if span.error is not None else "success"),
    }
    if span.error is not None:
        data["error"] = span.error
    data["timestamp"] = span.start_ns / 1e9
    data["duration"] = (span.end_ns - span.start_ns) / 1e9
    parameters, result = _json_or_text(a.get("input.value")), _json_or_text(a.get("output.value"))
    if parameters is not None:
        data["parameters"] = parameters
    if result is not None:
        data["result"] = result
    retries = a.get("memkit.retry_count")
    data["retry_count"] = retries if isinstance(retries, int) else 0
    data["step_index"] = index
    # A memkit export says its run (None included); a foreign trace's run is the trace.
    run_id = a.get("memkit.run_id") if "memkit.workflow_id" in a else span.trace_id
    if run_id is not None:
        data["run_id"] = run_id
    data["span_kind"] = span.kind
    data["trace_id"] = span.trace_id
    data["span_id"] = span.span_id
    if span.parent is not None:
        data["parent_span_id"] = span.parent
    if parent_index is not None:
        data["parent_step_index"] = parent_index
    if isinstance(a.get("memkit.retry_errors"), str):
        errors = json.loads(a["memkit.retry_errors"])
        if errors is not None:
            data["retry_errors"] = errors
    model = a.get("llm.model_name") or a.get("gen_ai.request.model")
    if model is not None:
        data["model"] = str(model)
    tokens = {k: a[k] for k in _TOKEN_KEYS if k in a}
    if tokens:
        data["tokens"] = tokens
    return data


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

    attempt = a.get("memkit.recall.attempt")
    try:
        return _recall_model(a, span, query, workflow, step, user_id, agent_id, attempt, hits)
    except ValidationError as exc:  # a value of the wrong type in the file, said as memkit says it
        problem = exc.errors()[0]
        raise InvalidInputError(
            f"{span.where}: its recall's {'.'.join(map(str, problem['loc']))}: {problem['msg']}"
        ) from None


def _recall_model(
    a: Mapping[str, Any], span: _Span, query: Any, workflow: str, step: Mapping[str, Any], user_id: str,
    agent_id: str, attempt: Any, hits: list[RecalledMemory],
) -> Recall:
    def loaded(key: str) -> Any:
        value = a.get(key)
        return json.loads(value) if isinstance(value, str) else None

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


# The attributes of a recall memkit exported; a span with none of them is read by _recall_body itself.
_RECALL_KEYS = frozenset((
    "memkit.recall.id", "memkit.recall.user_id", "memkit.recall.agent_id", "memkit.recall.kind",
    "memkit.recall.filters", "memkit.recall.options", "memkit.recall.attempt",
))


def _recall_body(
    span: _Span, step: Mapping[str, Any], workflow: str, user_id: str, agent_id: str, own: bool
) -> dict[str, Any] | None:
    """``body_of(_recall_of(...))``: the recall as stores keep it. A foreign retriever's (the usual
    case) is built here without the pydantic models, field for field what they would give; any other
    goes through them."""
    a = span.attrs
    run_id, step_index = step.get("run_id"), step.get("step_index")
    docs = _documents(a)
    if own or not a.keys().isdisjoint(_RECALL_KEYS) or type(step_index) is not int or not (
            run_id is None or type(run_id) is str) or any("metadata" in doc for doc in docs):
        recall = _recall_of(span, step, workflow, user_id, agent_id, own)
        return None if recall is None else body_of(recall)
    if not docs:
        return None
    hits = []
    for rank, doc in enumerate(docs, start=1):
        score = doc.get("score")
        hits.append([str(doc.get("id") or f"{span.span_id}-{rank}"), rank,
                     float(score) if isinstance(score, (int, float)) else None, None, str(doc.get("content") or "")])
    query = a.get("gen_ai.memory.query", a.get("input.value"))
    return {
        "id": f"otel-{span.trace_id}-{span.span_id}", "created_at": json_time(span.start_ns // 1_000),
        "user_id": user_id, "agent_id": agent_id, "kind": "search", "query": str(query or ""),
        "mode": str(a.get("gen_ai.memory.search.mode") or "retriever"), "filters": None,
        "limit": int(a.get("gen_ai.memory.top_k") or max(len(hits), 1)), "as_of": None, "options": None,
        "workflow_id": workflow, "run_id": run_id, "step_index": step_index, "step_name": step.get("step_name"),
        "attempt": None, "trace_user_id": user_id, "trace_agent_id": agent_id, "hits": hits,
    }


def _plan(
    spans: list[_Span], user_id: str | None, agent_id: str | None, workflow_id: str | None, bodies: bool = False
) -> tuple[list[tuple[str, str, str, dict[str, Any]]], list[Any], list[str]]:
    """(user, agent, workflow, step data) per step and the recalls (as Recall, or with ``bodies`` as the
    bodies stores keep), for the whole file."""
    by_trace: dict[str, list[_Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    steps: list[tuple[str, str, str, dict[str, Any]]] = []
    recalls: list[Any] = []
    for members in by_trace.values():
        _plan_trace(members, user_id, agent_id, workflow_id, bodies, steps, recalls)
    return steps, recalls, list(by_trace)


def _plan_trace(
    members: list[_Span], user_id: str | None, agent_id: str | None, workflow_id: str | None, bodies: bool,
    steps: list[tuple[str, str, str, dict[str, Any]]], recalls: list[Any],
) -> None:
    """One trace's steps and recalls (all its spans, in file order), appended to ``steps`` and ``recalls``."""
    recall_of = _recall_body if bodies else _recall_of
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
            recall = recall_of(span, data, workflow, user, agent, False)
            if recall is not None:
                recalls.append(recall)
    for span in own_recalls:
        owner = by_span.get(span.parent or "")
        if owner is None:
            raise InvalidInputError(f"{span.where}: a memkit recall span whose parent step is not in the file")
        recall = recall_of(span, owner["data"], owner["workflow"], owner["user"], owner["agent"], True)
        assert recall is not None
        recalls.append(recall)


def _is_memory(span: _Span) -> bool:
    """A memory's creation as memkit exports it (``export_otlp(memories=True)``), not a step."""
    return span.attrs.get("gen_ai.operation.name") == "create_memory" and "memkit.memory.id" in span.attrs


def _memory_of(span: _Span, user_id: str | None, agent_id: str | None, limits: Limits) -> Record:
    a = span.attrs
    raw = a.get("memkit.memory.metadata")
    try:
        metadata = json.loads(raw) if isinstance(raw, str) else None
        record = new_record(a.get("input.value"), user_id or a.get("memkit.memory.user_id"),
                            agent_id or a.get("memkit.memory.agent_id"), metadata, limits)
        record.id = check_id(a.get("memkit.memory.id"), "memkit.memory.id", limits)
    except ValueError as exc:  # InvalidInputError included
        raise InvalidInputError(f"{span.where}: {exc}") from None
    record.created_us = span.start_ns // 1_000
    return record


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
    # A file's spans become millions of small dicts and lists, none in a cycle: the cyclic GC's
    # passes over them, which grow with the heap, cost a third of the import. Paused (process-wide,
    # the store's writer thread included) until the import ends; anything it would have freed is
    # collected on the next pass after.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _import(mem, source, user_id, agent_id, workflow_id)
    finally:
        if was_enabled:
            gc.enable()


def _import(
    mem: Memory | MemoryProvider, source: str | os.PathLike[str] | Mapping[str, Any], user_id: str | None,
    agent_id: str | None, workflow_id: str | None,
) -> OtlpImport:
    provider = provider_of(mem)
    # Checked once, here, against the store's own limits: a memkit store then writes the records as
    # they are instead of checking every one again (any other provider gets them through add_many).
    limits = provider.limits if isinstance(provider, Store) else DEFAULT_LIMITS
    if _stream.worth_streaming(provider, source):
        assert isinstance(source, (str, os.PathLike))
        try:
            return _import_streamed(provider, Path(source), user_id, agent_id, workflow_id, limits)
        except _stream.Fallback:
            pass  # refused, or memories in it: the ordinary import says what and does it
    spans: list[_Span] = []
    for request in _load(source):
        spans.extend(_parse(request))
    records = [_memory_of(s, user_id, agent_id, limits) for s in spans if _is_memory(s)]
    memories = len(records)
    # A store that writes planned steps as rows takes them (and the recalls as bodies) in one go; a
    # file that also holds memories goes the general way.
    rows = not memories and isinstance(provider, Store) and isinstance(provider, SupportsImportSteps)
    steps, recalls, runs = _plan([s for s in spans if not _is_memory(s)] if memories else spans,
                                 user_id, agent_id, workflow_id, bodies=rows)
    if recalls and not isinstance(provider, SupportsRecalls):
        recalls = []
    if rows:

        def general(i: int) -> Record:
            user, agent, workflow, data = steps[i]
            return _step_record(agent, workflow, data, user, limits)

        written = call(provider, _write_rows, steps, recalls, general)
        return OtlpImport(runs=len(runs), steps=len(steps), recalls=written, run_ids=runs)
    for user, agent, workflow, data in steps:
        records.append(_step_record(agent, workflow, data, user, limits))
    checked = checked_recalls(recalls, limits)
    if not isinstance(provider, SupportsAddMany):
        raise InvalidInputError(f"{type(provider).__name__} cannot write a batch; import_otlp needs add_many")
    call(provider, _write, records, checked)
    return OtlpImport(runs=len(runs), steps=len(records) - memories, recalls=len(checked), run_ids=runs,
                      memories=memories)


def _import_streamed(
    provider: MemoryProvider, path: Path, user_id: str | None, agent_id: str | None, workflow_id: str | None,
    limits: Limits,
) -> OtlpImport:
    """:func:`_import` of a file parsed and planned in a second process (see :mod:`._stream`); raises
    :class:`_stream.Fallback` for a file only :func:`_import` can say what to do with."""
    stream = _stream.StepStream(path, user_id, agent_id, workflow_id, limits)
    try:

        def general(i: int) -> Record:
            user, agent, workflow, data = stream.steps[i]
            return _step_record(agent, workflow, data, user, limits)

        try:
            written = call(provider, _write_rows, stream, stream.recalls, general, stream.built.__getitem__)
        except InvalidInputError:
            # A step refused here, before the child read the whole file: a bad span after it
            # is the error to report, which the ordinary import finds first.
            if not stream.finish():
                raise _stream.Fallback from None
            raise
        assert stream.runs is not None
        return OtlpImport(runs=len(stream.runs), steps=len(stream.steps), recalls=written, run_ids=stream.runs)
    finally:
        stream.close()


def _step_record(agent: str, workflow: str, data: dict[str, Any], user: str, limits: Limits) -> Record:
    try:
        return trace_record(agent, workflow, data, user, limits)
    except InvalidInputError as exc:
        raise InvalidInputError(f"span {data.get('span_id')} ({data.get('step_name')!r}): {exc}") from None


async def _write_rows(
    provider: MemoryProvider, steps: Iterable[tuple[str, str, str, dict[str, Any]]], recalls: list[dict[str, Any]],
    general: Callable[[int], Record], built: Callable[[int], TraceRow | None] | None = None,
) -> int:
    """Steps and recalls in one transaction, by the store's own rows (see ImportStepsOp)."""
    assert isinstance(provider, Store)
    return await provider.execute(ImportStepsOp(steps, recalls, general, built))


async def _write(provider: MemoryProvider, records: list[Record], recalls: list[Recall]) -> None:
    """Store an import's steps in one batch, then its recalls; a refused recall takes the steps back out.

    ``records`` and ``recalls`` were checked against the store's limits: a memkit store writes them
    as they are; another provider gets them through its own ``add_many`` and ``add_recalls``.
    """
    written: list[str] = []
    if isinstance(provider, Store):
        written = await provider.execute(WriteOp(tuple(records))) if records else []
    elif records:
        assert isinstance(provider, SupportsAddMany)
        written = await provider.add_many([
            {"id": r.id, "content": r.content, "user_id": r.user_id, "agent_id": r.agent_id,
             "metadata": r.metadata, "created_at": r.created_at}
            for r in records
        ])
    if recalls:
        assert isinstance(provider, SupportsRecalls)
        try:
            if isinstance(provider, Store):
                await provider.execute(AddRecallsOp(tuple(recalls)))
            else:
                await provider.add_recalls(recalls)
        except BaseException:
            for memory_id in written:  # nothing half-imported
                await provider.delete(memory_id)
            raise
