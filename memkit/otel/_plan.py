"""Planning checked spans as memkit runs: each trace's steps (``add_trace``'s data) and recalls, and
the memories of a memkit export."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from memkit._core._errors import InvalidInputError
from memkit._core._recalls import Recall, RecalledMemory
from memkit._core._records import Record, from_us, new_record
from memkit._core._validate import Limits, check_bound, check_id
from memkit._recall._recording import body_of
from memkit.otel._spans import _Span


def _json_or_text(value: Any) -> Any:
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python parses: text
            return {"value": value}
        return parsed if isinstance(parsed, dict) else {"value": parsed}
    return None if value is None else {"value": value}


def _document_field(key: str) -> tuple[int, str] | None:
    """``(n, field)`` of an attribute key ``retrieval.documents.<n>.document.<field>``, else None."""
    if key.startswith("retrieval.documents."):
        index, _, rest = key[len("retrieval.documents."):].partition(".")
        if index.isascii() and index.isdigit() and rest.startswith("document."):
            return int(index), rest[len("document."):]
    return None


# Retriever spans repeat the same few attribute keys: each key's reading, remembered (up to a bound).
_DOCUMENT_FIELDS: dict[str, tuple[int, str] | None] = {}
_DOCUMENT_FIELDS_MAX = 4_096
_UNREAD = (-1, "")


def _documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    docs: dict[int, dict[str, Any]] = {}
    fields = _DOCUMENT_FIELDS
    for key, value in attrs.items():
        field = fields.get(key, _UNREAD)
        if field is _UNREAD:
            field = _document_field(key)
            if len(fields) < _DOCUMENT_FIELDS_MAX:
                fields[key] = field
        if field is not None:
            docs.setdefault(field[0], {})[field[1]] = value
    return [docs[i] for i in sorted(docs)]


# Where a span keeps its input and output: OpenInference's values, else the OTel GenAI messages
# (a model call) or the tool call's arguments and result (pydantic-ai, the GenAI conventions).
_INPUT_KEYS = ("input.value", "gen_ai.input.messages", "gen_ai.tool.call.arguments")
_OUTPUT_KEYS = ("output.value", "gen_ai.output.messages", "gen_ai.tool.call.result")


def _first(attrs: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None:
            return value
    return None


# Every usage spelling a span may carry, kept as written: memkit._core._usage.usage_of reads them all.
_TOKEN_KEYS = ("llm.token_count.prompt", "llm.token_count.completion", "llm.token_count.total",
               "llm.cost.total", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
               "gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens")


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
    parameters, result = _json_or_text(_first(a, _INPUT_KEYS)), _json_or_text(_first(a, _OUTPUT_KEYS))
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
        try:
            errors = json.loads(a["memkit.retry_errors"])
        except (ValueError, RecursionError):  # a foreign span's attribute of that name: kept as its text
            errors = a["memkit.retry_errors"]
        if errors is not None:
            data["retry_errors"] = errors
    model = a.get("llm.model_name") or a.get("gen_ai.response.model") or a.get("gen_ai.request.model")
    if model is not None:
        data["model"] = str(model)
    tokens = {k: a[k] for k in _TOKEN_KEYS if k in a}
    if tokens:
        data["tokens"] = tokens
    return data


@functools.lru_cache(maxsize=256)
def _namespace_key(user_id: str, agent_id: str, workflow: str) -> str:
    where = f"{user_id}\x00{agent_id}\x00{workflow}"
    return hashlib.sha256(where.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _recall_id(user_id: str, agent_id: str, workflow: str, span: _Span) -> str:
    """A foreign retriever span's recall id: its trace and span ids, and a digest of the namespace and
    workflow it goes to, so that the same file imported by two users gives two recalls (recall ids
    are unique store-wide: without it, the second import would be refused, telling its user the
    first's)."""
    return f"otel-{_namespace_key(user_id, agent_id, workflow)}-{span.trace_id}-{span.span_id}"


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
    from memkit._core._recalls import Recall
    def loaded(key: str) -> Any:
        value = a.get(key)
        if not isinstance(value, str):
            return None
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            raise InvalidInputError(f"{span.where}: {key} is not JSON") from None

    return Recall(
        id=str(a.get("memkit.recall.id") or _recall_id(user_id, agent_id, workflow, span)),
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
    def recall_of(span: _Span, data: dict[str, Any], workflow: str, user: str, agent: str, own: bool) -> Any:
        recall = _recall_of(span, data, workflow, user, agent, own)
        return body_of(recall) if bodies and recall is not None else recall

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


def _memory_of(span: _Span, user_id: str | None, agent_id: str | None, limits: Limits) -> Record:
    a = span.attrs
    raw = a.get("memkit.memory.metadata")
    try:
        metadata = json.loads(raw) if isinstance(raw, str) else None
        record = new_record(a.get("input.value"), user_id or a.get("memkit.memory.user_id"),
                            agent_id or a.get("memkit.memory.agent_id"), metadata, limits)
        record.id = check_bound(
            check_id(a.get("memkit.memory.id"), "memkit.memory.id", limits), record.user_id, record.agent_id,
            "memkit.memory.id",
        )
    except ValueError as exc:  # InvalidInputError included
        raise InvalidInputError(f"{span.where}: {exc}") from None
    except RecursionError:
        raise InvalidInputError(f"{span.where}: memkit.memory.metadata is nested deeper than Python reads") from None
    record.created_us = span.start_ns // 1_000
    return record
