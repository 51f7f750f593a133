"""Reading OTLP JSON span files: each span decoded and checked (the first bad one is an error naming
it), in file order."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memkit._core._errors import InvalidInputError
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
        if not isinstance(service, str):
            service = None
        for raw in raw_spans:
            n = len(spans)
            if n >= _MAX_SPANS_PER_FILE:
                raise InvalidInputError(f"the file holds more than {_MAX_SPANS_PER_FILE:,} spans; split it")
            try:
                span = _read_span(raw, n, service, trace_ids, span_ids, seen, False)
            except RecursionError:  # an attribute value (a dict given, not a file) nested past Python's stack
                raise InvalidInputError(f"span {n}: an attribute value is nested deeper than memkit reads") from None
            except InvalidInputError:
                # The texts naming the span and its field are built for a refusal only: the span is
                # read again with them (nothing was kept of it), which raises the worded error.
                _read_span(raw, n, service, trace_ids, span_ids, seen, True)
                raise
            seen.add((span.trace_id, span.span_id))
            spans.append(span)
            keep(span)


def _read_span(
    raw: Any, n: int, service: str | None, trace_ids: dict[str, str], span_ids: dict[str, str],
    seen: set[tuple[str, str]], worded: bool,
) -> _Span:
    """Span ``n`` of the file checked; its errors name the span only when ``worded``. ``trace_ids`` and
    ``span_ids`` remember the ids read (as written -> hex), ``seen`` the spans kept before it."""
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise InvalidInputError(f"span {n} must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidInputError(f"span {n}: 'name' must be a non-empty string")
    where = f"span {n} ({name[:60]!r})" if worded else ""
    # Ids seen before are looked up here, before the text naming them is built.
    raw_id = raw.get("traceId")
    trace_id = trace_ids.get(raw_id) if type(raw_id) is str else None
    if trace_id is None:
        trace_id = _span_id(raw_id, 16, f"{where} traceId" if worded else "", seen=trace_ids)
    raw_id = raw.get("spanId")
    span_id = span_ids.get(raw_id) if type(raw_id) is str else None
    if span_id is None:
        span_id = _span_id(raw_id, 8, f"{where} spanId" if worded else "", seen=span_ids)
    raw_id = raw.get("parentSpanId")
    parent = span_ids.get(raw_id) if type(raw_id) is str else None
    if parent is None and raw_id not in (None, ""):
        parent = _span_id(raw_id, 8, f"{where} parentSpanId" if worded else "", optional=True, seen=span_ids)
    assert trace_id is not None and span_id is not None
    if (trace_id, span_id) in seen:
        raise InvalidInputError(f"{where}: span id {span_id} appears twice in trace {trace_id}")
    attrs = _read_attributes(raw.get("attributes"), where)
    start = _nanos(raw.get("startTimeUnixNano"), f"{where} startTimeUnixNano" if worded else "")
    end = _nanos(raw.get("endTimeUnixNano"), f"{where} endTimeUnixNano" if worded else "")
    if end < start:
        raise InvalidInputError(f"{where} ends before it starts ({end} < {start})")
    status = raw.get("status") or {}
    if type(status) is not dict and not isinstance(status, Mapping):
        raise InvalidInputError(f"{where}: status must be an object")
    code = status.get("code", 0)
    error = None
    if code in (2, "STATUS_CODE_ERROR"):
        error = str(status.get("message") or "")
        for event in raw.get("events") or []:
            if isinstance(event, Mapping) and event.get("name") == "exception":
                ev = _read_attributes(event.get("attributes"), f"{where} event")
                kind = ev.get("exception.type")
                message = ev.get("exception.message") or ""
                error = error or (f"{kind}: {message}" if kind else str(message))
        error = error or "error"
    return _Span(trace_id, span_id, parent, name, _kind_of(raw, attrs, where), start, end, attrs, error, service, n)


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


def _is_memory(span: _Span) -> bool:
    """A memory's creation as memkit exports it (``export_otlp(memories=True)``), not a step."""
    return span.attrs.get("gen_ai.operation.name") == "create_memory" and "memkit.memory.id" in span.attrs


def _load(source: Any) -> list[Any]:
    if isinstance(source, Mapping):
        return [source]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidInputError(f"cannot read the span file {str(path)!r}: {exc.strerror or exc}") from None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            number = data.count(b"\n", 0, exc.start) + 1
            raise InvalidInputError(f"{path.name} line {number} is not UTF-8 text (byte {exc.start + 1})") from None
        try:
            return [json.loads(text)]
        except (ValueError, RecursionError):
            pass  # JSON lines, or a line that says what is wrong
        requests = []
        for n, line in enumerate(text.splitlines(), start=1):  # JSON lines: the collector's file exporter
            if line.strip():
                try:
                    requests.append(json.loads(line))
                except ValueError as exc:
                    raise InvalidInputError(f"{path.name} line {n} is not JSON: {exc}") from None
                except RecursionError:
                    raise InvalidInputError(
                        f"{path.name} line {n} is JSON nested deeper than Python can read") from None
        if not requests:
            raise InvalidInputError(f"{path.name} is empty: an OTLP trace file holds at least one request")
        return requests
    raise InvalidInputError(f"import_otlp takes a path or an OTLP JSON dict, got {type(source).__name__}")
