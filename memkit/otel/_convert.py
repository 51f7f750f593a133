"""OTLP JSON values both ways: attribute values, ids and timestamps, and the limits an import holds them to.

The span kinds memkit reads (OpenInference and OTel GenAI) live here too, so export and import agree.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from memkit._core._errors import InvalidInputError

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
    if type(value) is dict and len(value) == 1:
        # The usual case, answered before the general checks: one short string.
        raw = value.get("stringValue")
        if type(raw) is str:
            return raw
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
        if type(pair) is not dict and not isinstance(pair, Mapping):
            raise InvalidInputError(f"{where}: an attribute needs a string 'key'")
        key = pair.get("key")
        if type(key) is not str:
            raise InvalidInputError(f"{where}: an attribute needs a string 'key'")
        value = pair.get("value")
        if type(value) is dict and len(value) == 1:
            # The usual case, read here without a call or the text naming the attribute: one short string.
            raw = value.get("stringValue")
            if type(raw) is str:
                out[key] = raw
                continue
        value = {} if value is None and "value" not in pair else value
        try:
            out[key] = _read_value(value, where)
        except InvalidInputError:
            # The text naming the attribute is built for a refusal only: read again with it.
            _read_value(value, f"{where} attribute {key!r}")
            raise
    return out


def _span_id(
    raw: Any, size: int, where: str, *, optional: bool = False, seen: dict[str, str] | None = None
) -> str | None:
    """A trace/span id as lower-case hex; OTLP JSON writes hex, protobuf's JSON mapping base64.

    ``seen`` remembers ids already read (a trace id recurs on each of its spans, a parent on each child).
    """
    if seen is not None and type(raw) is str:
        known = seen.get(raw)
        if known is None:
            known = _span_id(raw, size, where, optional=optional)
            if known is not None:
                seen[raw] = known
        return known
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
