"""The one internal record shape every adapter stores, and how ``add_trace`` fills it."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from memkit._core._encoding import content_text, encode_metadata_once
from memkit._core._errors import InvalidInputError
from memkit._core._stamps import from_us, new_id, now_us, to_us
from memkit._core._timing import with_timing
from memkit._core._validate import (
    DEFAULT_LIMITS,
    Limits,
    check_bound,
    check_content,
    check_depth,
    check_id,
    check_metadata,
    check_namespace,
    encode_metadata,
)

# The models (and pydantic) load with the first record made into an item: the command line's
# one-shot reads use records' times and never make one.
if TYPE_CHECKING:
    from memkit._core._models import MemoryItem, NamespaceInfo, NewMemory

# from_us, now_us and to_us live in _stamps and are read from here by much of memkit.
__all__ = [
    "REDACTED",
    "TRACE_FIELDS",
    "Record",
    "Redactor",
    "from_us",
    "get_trace_redactor",
    "namespace_infos",
    "new_record",
    "now_us",
    "records_from_items",
    "set_trace_redactor",
    "to_us",
    "trace_record",
    "trace_row",
]

# Scalar fields of ``trace_data`` copied into metadata so audits can filter on them.
TRACE_FIELDS = ("tool", "status", "step_index", "step_name", "run_id")

REDACTED = "[REDACTED]"

# Matched with re.search against the lower-cased key. ``token$`` catches access_token
# and accessToken but not max_tokens / token_count, which are ordinary LLM parameters.
DEFAULT_SECRET_KEYS = (
    r"api[_\-]?key",
    r"token$",
    r"passw(or)?d",
    r"secret",
    r"authorization",
    r"credential",
    r"private[_\-]?key",
    r"access[_\-]?key",
    r"cookie",
)


class Redactor:
    """Replace the values of secret-looking keys, at any depth, before a trace is stored.

    Parameters
    ----------
    patterns
        Regular expressions searched in each lower-cased dict key; a match replaces
        the value (whatever its type) with ``replacement``.
    replacement
        What a secret value becomes.

    Examples
    --------
    >>> Redactor()({"db": {"password": "hunter2", "host": "x"}})
    {'db': {'password': '[REDACTED]', 'host': 'x'}}
    """

    def __init__(self, patterns: Iterable[str] = DEFAULT_SECRET_KEYS, replacement: Any = REDACTED) -> None:
        self.patterns = tuple(patterns)
        self.replacement = replacement
        self._regex = re.compile("|".join(f"(?:{p})" for p in self.patterns)) if self.patterns else None
        self._known: dict[str, bool] = {}
        self._clean: set[tuple[Any, ...]] = set()  # key tuples of dicts with no secret key (see _plain_copy)

    def __repr__(self) -> str:
        return f"Redactor({self.patterns!r})"

    def is_secret(self, key: str) -> bool:
        known = self._known.get(key)
        if known is None:
            # Agents repeat the same few keys on every step: each is matched once.
            if len(self._known) >= _KNOWN_KEYS:
                self._known.clear()
            known = self._known[key] = self._regex is not None and self._regex.search(key.lower()) is not None
        return known

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._walk(data)
        return result

    def _walk(self, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {
                k: (self.replacement if isinstance(k, str) and self.is_secret(k) else self._walk(v))
                for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return [self._walk(v) for v in value]
        return value


_KNOWN_KEYS = 10_000  # keys whose verdict a Redactor remembers



TraceRedactor = Callable[[dict[str, Any]], dict[str, Any]]
_redactor: TraceRedactor | None = Redactor()
_redactor_lock = threading.Lock()


def set_trace_redactor(redactor: TraceRedactor | None) -> TraceRedactor | None:
    """Install the process-wide hook every ``add_trace`` applies; ``None`` turns redaction off.

    Returns the previous hook so a caller can restore it.
    """
    global _redactor
    if redactor is not None and not callable(redactor):
        raise InvalidInputError(f"a trace redactor must be callable or None, got {type(redactor).__name__}")
    with _redactor_lock:
        previous, _redactor = _redactor, redactor
    return previous


def get_trace_redactor() -> TraceRedactor | None:
    """The hook ``add_trace`` currently applies (a :class:`Redactor` by default)."""
    return _redactor

@dataclass(slots=True)
class Record:
    id: str
    user_id: str
    agent_id: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_us: int = 0
    metadata_json: str | None = None  # the validated encoding, kept so stores need not encode twice

    @property
    def created_at(self) -> datetime:
        return from_us(self.created_us)

    def item_fields(self, score: float | None = None, details: dict[str, Any] | None = None) -> dict[str, Any]:
        """:class:`memkit.MemoryItem`'s fields, in its order (what ``to_item(...).model_dump()`` gives):
        what validation would do is done here, the dicts copied (a caller changing its item never
        changes the store) and the score made a float."""
        return {"id": self.id, "content": self.content, "score": None if score is None else float(score),
                "metadata": dict(self.metadata), "created_at": self.created_at, "agent_id": self.agent_id,
                "user_id": self.user_id, "score_details": None if details is None else dict(details)}

    def to_item(self, score: float | None = None, details: dict[str, Any] | None = None) -> MemoryItem:
        # A record holds what its store validated: constructing skips building MemoryItem's validator
        # (~20 ms in a one-shot command).
        from memkit._core._models import MemoryItem

        return MemoryItem.model_construct(**self.item_fields(score, details))


def new_record(
    content: object,
    user_id: object,
    agent_id: object,
    metadata: object = None,
    limits: Limits = DEFAULT_LIMITS,
    memory_id: str | None = None,
) -> Record:
    """Validate one memory and stamp it with a time and an id (a new one unless ``memory_id``, which
    the caller checks); raise before any write."""
    user, agent = check_namespace(user_id, agent_id, limits)
    text = check_content(content, limits)
    meta, encoded = encode_metadata(metadata, limits)
    return Record(
        id=new_id() if memory_id is None else memory_id, user_id=user, agent_id=agent, content=text, metadata=meta,
        created_us=now_us(), metadata_json=encoded,
    )


# The fields ExecutionItem writes, by the type views and stores read them as. Missing (absent or
# None) is always fine: researchers' traces lack fields and add their own, and other keys are kept
# as they are. Only a present field of another type is refused, since every store would keep it
# and every view would then trip over it (or, worse, each store would read it differently).
_TRACE_TEXT = ("step_name", "tool", "status", "error", "run_id")
_TRACE_INTEGERS = ("step_index", "retry_count")
_TRACE_NUMBERS = ("timestamp", "duration")
_TRACE_OBJECTS = ("parameters", "result")
_DIGITS = re.compile(r"\s*[+-]?\d{1,18}\s*")


def _shown(value: object) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _number(key: str, value: object) -> float | int:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
        if key == "timestamp":
            try:
                return to_us(datetime.fromisoformat(value.strip())) / 1_000_000
            except ValueError:
                pass
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    elif isinstance(value, datetime) and key == "timestamp":
        return to_us(value) / 1_000_000
    raise InvalidInputError(
        f"trace_data[{key!r}] must be a number of seconds"
        + (" (or a datetime or an ISO 8601 time)" if key == "timestamp" else "") + f", got {_shown(value)}"
    )


def check_trace_fields(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ExecutionItem's fields checked for type, in place; the first wrong one is an
    :class:`InvalidInputError` naming it and the type expected.

    Text fields (``step_name, tool, status, error, run_id``) must be strings. ``step_index`` and
    ``retry_count`` must be integers; a string of digits (``"3"``, as CSV and some JSON writers give
    it) and an integral float (``3.0``) are stored as the integer, since either can only mean that.
    ``timestamp`` and ``duration`` must be numbers of seconds; a numeric string is stored as the
    number, and a ``timestamp`` given as a datetime or an ISO 8601 time as epoch seconds (a
    naive one is UTC).
    ``parameters`` and ``result`` must be dicts, ``retry_errors`` a list.
    """
    for key in _TRACE_TEXT:
        value = data.get(key)
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"trace_data[{key!r}] must be a string, got {_shown(value)}")
    for key in _TRACE_INTEGERS:
        value = data.get(key)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            continue
        if (isinstance(value, float) and value.is_integer()) or (isinstance(value, str) and _DIGITS.fullmatch(value)):
            data[key] = int(value)
        else:
            raise InvalidInputError(
                f"trace_data[{key!r}] must be an integer (or a string of digits such as '3'), got {_shown(value)}"
            )
    for key in _TRACE_NUMBERS:
        value = data.get(key)
        if value is not None:
            data[key] = _number(key, value)
    for key in _TRACE_OBJECTS:
        value = data.get(key)
        if value is not None and not isinstance(value, Mapping):
            raise InvalidInputError(
                f"trace_data[{key!r}] must be a dict, got {_shown(value)} (wrap a lone value: {{'value': ...}})"
            )
    errors = data.get("retry_errors")
    if errors is not None and not isinstance(errors, (list, tuple)):
        raise InvalidInputError(f"trace_data['retry_errors'] must be a list of strings, got {_shown(errors)}")
    return data


# Each field of check_trace_fields with the exact types it keeps as they are.
_AS_STORED = (*((key, (str,)) for key in _TRACE_TEXT), *((key, (int,)) for key in _TRACE_INTEGERS),
              *((key, (float, int)) for key in _TRACE_NUMBERS), *((key, (dict,)) for key in _TRACE_OBJECTS),
              ("retry_errors", (list, tuple)))


def _fields_as_stored(data: dict[str, Any]) -> bool:
    """Whether :func:`check_trace_fields` would take ``data`` as it is: each field absent, None or of
    an exact type it keeps (what ExecutionItem and an import give). Then no copy is made to check it."""
    get = data.get
    for key, kinds in _AS_STORED:
        value = get(key)
        if value is not None and type(value) not in kinds:
            return False
    return True


_CLEAN_WITHOUT_REDACTOR: set[tuple[Any, ...]] = set()  # _plain_copy's known key tuples when nothing is redacted
_CLEAN_KEYS_MAX = 64  # longer key tuples are not remembered: hashing them would cost what it saves


class _NotPlain(Exception):
    """Raised inside :func:`_plain_copy` for anything it does not take; the general path then decides."""


def _plain_copy(value: Any, depth: int, limit: int, redactor: Redactor | None) -> Any:
    """A private copy of plain JSON (exact dicts, lists, tuples, str, finite float, 64-bit int, bool,
    None) no deeper than ``limit`` (``depth`` counts as in stored metadata), with ``redactor``
    applied on the way; :class:`_NotPlain` at anything else (a datetime, a secret dict, a lone
    surrogate...), so that the general path, which knows every case and says what is wrong,
    handles it. Valid steps, nearly all of them, are then walked once instead of five times.
    """
    if depth > limit:
        raise _NotPlain
    kind = type(value)
    if kind is str:
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _NotPlain from None
        return value
    if kind is dict:
        out = {}
        inline = depth < limit  # a value kept here sits one level deeper
        keys = tuple(value)
        clean = _CLEAN_WITHOUT_REDACTOR if redactor is None else redactor._clean
        if keys in clean:
            # Steps repeat the same keys: once a key tuple is known to be ASCII text with no
            # secret, a dict with those keys is checked for its values only.
            for key, item in value.items():
                kind = type(item)
                if inline and ((kind is str and item.isascii()) or item is None or kind is bool or (
                        kind is float and item - item == 0.0)
                    or (kind is int and -(2**63) <= item < 2**63)):
                    out[key] = item
                else:
                    out[key] = _plain_copy(item, depth + 1, limit, redactor)
            return out
        secret = False
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                raise _NotPlain
            if redactor is not None and redactor.is_secret(key):
                if isinstance(item, (Mapping, list, tuple)):
                    raise _NotPlain  # the depth check must still see what the redactor drops
                item = redactor.replacement
                secret = True
            kind = type(item)
            # Most values are short ASCII text or numbers: kept here without a call per value.
            if inline and ((kind is str and item.isascii()) or item is None or kind is bool or (
                    kind is float and item - item == 0.0)
                    or (kind is int and -(2**63) <= item < 2**63)):
                out[key] = item
            else:
                out[key] = _plain_copy(item, depth + 1, limit, redactor)
        if not secret and len(keys) <= _CLEAN_KEYS_MAX:
            if len(clean) >= _KNOWN_KEYS:
                clean.clear()
            clean.add(keys)
        return out
    if kind is list or kind is tuple:
        return [_plain_copy(item, depth + 1, limit, redactor) for item in value]
    if kind is float:
        if value - value != 0.0:  # inf or nan
            raise _NotPlain
        return value
    if kind is int:
        if not -(2**63) <= value < 2**63:
            raise _NotPlain
        return value
    if value is None or kind is bool:
        return value
    raise _NotPlain


def trace_record(
    agent_id: object,
    workflow_id: object,
    trace_data: object,
    user_id: object = "system",
    limits: Limits = DEFAULT_LIMITS,
) -> Record:
    """Build the record ``add_trace`` stores (the port's trace contract).

    Content: ``[trace] workflow=<wf> agent=<agent> data=<json>`` so keyword search
    finds a trace by tool, step name or parameter. Metadata: ``type="trace"``,
    ``workflow_id``, the scalar audit fields of :data:`TRACE_FIELDS` when present,
    the caller's ``trace_data["metadata"]``, and the whole payload under ``trace``
    so replay never has to parse content; step timing in any spelling memkit reads
    (see :mod:`memkit._core._timing`) is also stored as ``timestamp``/``duration``.
    ``type`` and ``workflow_id`` cannot be overridden by the payload. The process-wide redactor (see
    :func:`set_trace_redactor`) runs first, so secrets reach neither content nor
    metadata.
    """
    row = trace_row(agent_id, workflow_id, trace_data, user_id, limits)
    if row is None:
        return _checked_trace_record(agent_id, workflow_id, trace_data, user_id, limits)
    record_id, user, agent, content, encoded, created, meta = row[:7]
    return Record(id=record_id, user_id=user, agent_id=agent, content=content, metadata=meta,
                  created_us=created, metadata_json=encoded)


TraceRow = tuple[str, str, str, str, str, int, dict[str, Any], str, str]

_last_ids: tuple[object, ...] = ()  # the (workflow, agent, user, limits) trace_row checked last


def trace_row(
    agent_id: object, workflow_id: object, trace_data: object, user_id: object, limits: Limits
) -> TraceRow | None:
    """What :func:`trace_record` stores, as ``(id, user_id, agent_id, content, metadata_json, created_us,
    metadata, parameters, result)``, for the plain steps nearly every trace is made of; ``None`` for any
    other (a datetime, a secret dict, a custom redactor...): :func:`trace_record` then checks it in full
    and says what is wrong. ``parameters``/``result`` are those objects as the metadata text holds them
    (``"null"`` when absent), encoded once for both.

    A bulk import writes these texts as they are, without a :class:`Record` per step; the bytes are
    those of :func:`trace_record`, which is this plus the record.
    """
    global _last_ids
    if not isinstance(trace_data, Mapping):
        return None
    ids = (workflow_id, agent_id, user_id, limits)
    # A file's steps name the same few: the ids checked for the step before are not checked again
    # (exact strings only, under the same limits). The user is checked where trace_record checks it.
    known = ids == _last_ids and type(workflow_id) is str and type(agent_id) is str and type(user_id) is str
    workflow = cast(str, workflow_id) if known else check_id(workflow_id, "workflow_id", limits)
    agent = cast(str, agent_id) if known else check_id(agent_id, "agent_id", limits)
    if type(trace_data) is dict and _fields_as_stored(trace_data):
        data = trace_data  # the copy below is the one stored
    else:
        data = dict(trace_data)
        try:
            check_trace_fields(data)
        except (InvalidInputError, RecursionError):
            return None
    redactor = _redactor
    if redactor is not None and type(redactor) is not Redactor:
        return None
    try:
        # The payload sits at depth 2 of the metadata (under "trace"), hence the start at 2.
        payload = _plain_copy(data, 2, limits.max_metadata_depth, redactor)
    except _NotPlain:
        return None
    extra = payload.pop("metadata", None) or {}
    if not isinstance(extra, dict):
        extra = {"metadata": extra}
    payload = with_timing(payload)
    meta: dict[str, Any] = extra
    for key in TRACE_FIELDS:
        value = payload.get(key)
        if value is not None and not isinstance(value, (dict, list)):
            meta[key] = value
    meta["trace"] = payload
    meta["type"] = "trace"
    meta["workflow_id"] = workflow
    rendered = content_text(payload)
    user = cast(str, user_id) if known else check_id(user_id, "user_id", limits)
    _last_ids = ids
    content = f"[trace] workflow={workflow} agent={agent} data={rendered}"
    if len(content) > limits.max_content_chars:
        # Only the length can be wrong: the text is not blank, the ids were checked, the copy took
        # valid Unicode only and JSON escapes a NUL.
        check_content(content, limits)
    encoded, objects = encode_metadata_once(meta, payload)
    size = len(encoded) if encoded.isascii() else len(encoded.encode("utf-8"))
    if size > limits.max_metadata_bytes:
        raise InvalidInputError(f"metadata is {size} bytes as JSON; the limit is {limits.max_metadata_bytes}")
    return new_id(), user, agent, content, encoded, now_us(), meta, objects[0], objects[1]


def _checked_trace_record(
    agent_id: object, workflow_id: object, trace_data: object, user_id: object, limits: Limits
) -> Record:
    """:func:`trace_record` for data :func:`_plain_copy` does not take: every check in turn, each
    with its own message, and whatever the installed redactor does."""
    workflow = check_id(workflow_id, "workflow_id", limits)
    agent = check_id(agent_id, "agent_id", limits)
    if not isinstance(trace_data, Mapping):
        raise InvalidInputError(f"trace_data must be a dict, got {type(trace_data).__name__}")
    data = dict(trace_data)
    try:
        check_trace_fields(data)
    except (InvalidInputError, RecursionError):  # the message shows a bad value, which can be deep
        check_depth(trace_data, limits.max_metadata_depth, "trace_data")  # too deep is said first
        raise
    check_depth(trace_data, limits.max_metadata_depth, "trace_data")
    redactor = _redactor
    if redactor is not None:
        redacted = redactor(data)
        if not isinstance(redacted, dict):
            raise InvalidInputError(f"the trace redactor returned {type(redacted).__name__}, not a dict")
        data = redacted
    extra = data.get("metadata") or {}
    if not isinstance(extra, dict):
        extra = {"metadata": extra}
    # Any timing spelling becomes the canonical timestamp/duration too (see memkit._core._timing).
    payload = with_timing({k: v for k, v in data.items() if k != "metadata"})
    payload = check_metadata(payload, limits)  # JSON-safe before it is rendered
    meta: dict[str, Any] = dict(extra)
    for key in TRACE_FIELDS:
        value = payload.get(key)
        if value is not None and not isinstance(value, (dict, list)):
            meta[key] = value
    meta["trace"] = payload
    meta["type"] = "trace"
    meta["workflow_id"] = workflow
    rendered = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    content = f"[trace] workflow={workflow} agent={agent} data={rendered}"
    return new_record(content, user_id, agent, meta, limits)


def _as_datetime(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInputError(f"created_at {value!r} is not an ISO 8601 time") from None
    raise InvalidInputError(f"created_at must be a datetime or an ISO 8601 string, got {type(value).__name__}")


def records_from_items(items: Iterable[NewMemory | Mapping[str, Any]], limits: Limits = DEFAULT_LIMITS) -> list[Record]:
    """Validate a whole batch before anything is written; the first bad item names its index."""
    from memkit._core._models import NewMemory

    records: list[Record] = []
    seen: set[str] = set()
    for index, raw in enumerate(items):
        if isinstance(raw, NewMemory):
            fields: Mapping[str, Any] = raw.model_dump()
        elif isinstance(raw, Mapping):
            fields = raw
            unknown = set(fields) - NewMemory.model_fields.keys()
            if unknown:
                raise InvalidInputError(f"item {index} of add_many has unknown fields: {', '.join(sorted(unknown))}")
        else:
            raise InvalidInputError(f"item {index} of add_many must be a dict or NewMemory, got {type(raw).__name__}")
        try:
            given = fields.get("id")
            record = new_record(
                fields.get("content"), fields.get("user_id"), fields.get("agent_id"), fields.get("metadata"), limits,
                given if isinstance(given, str) else None,
            )
            if given is not None:
                record.id = check_bound(check_id(given, "id", limits), record.user_id, record.agent_id)
            created = fields.get("created_at")
            if created is not None:
                record.created_us = to_us(_as_datetime(created))
        except InvalidInputError as exc:
            raise InvalidInputError(f"item {index} of add_many: {exc}") from None
        if record.id in seen:
            raise InvalidInputError(f"item {index} of add_many repeats id {record.id!r}")
        seen.add(record.id)
        records.append(record)
    return records


def namespace_infos(records: Iterable[Record]) -> list[NamespaceInfo]:
    """One :class:`~memkit.NamespaceInfo` per (user_id, agent_id) of ``records``, sorted: for stores
    without a query engine of their own."""
    from memkit._core._models import NamespaceInfo

    spans: dict[tuple[str, str], list[int]] = {}
    for r in records:
        span = spans.setdefault((r.user_id, r.agent_id), [0, r.created_us, r.created_us])
        span[0] += 1
        span[1] = min(span[1], r.created_us)
        span[2] = max(span[2], r.created_us)
    return [
        NamespaceInfo(user_id=u, agent_id=a, count=c, first_at=from_us(lo), last_at=from_us(hi))
        for (u, a), (c, lo, hi) in sorted(spans.items())
    ]
