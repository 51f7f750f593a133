"""Input checks shared by every adapter, so bad input fails the same way everywhere.

Every public write or read goes through these before touching a backend; a
failure raises :class:`~memkit.InvalidInputError` and nothing is written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from memkit._errors import ConfigError, InvalidInputError
from memkit._filters import Condition, parse_filters

__all__ = ["DEFAULT_LIMITS", "Limits"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_INT64 = 2**63


@dataclass(frozen=True)
class Limits:
    """Bounds on what one call may carry; pass your own to an adapter to change them.

    Parameters
    ----------
    max_content_chars
        Longest ``content`` accepted by ``add``.
    max_id_chars
        Longest ``user_id``, ``agent_id``, ``workflow_id`` or memory id.
    max_metadata_bytes
        Largest metadata, measured as compact UTF-8 JSON.
    max_metadata_depth
        Deepest nesting of dicts and lists inside metadata (and trace data), at most 200:
        stores, views and exports walk nested values recursively.
    max_limit
        Largest ``limit`` for ``search`` and ``get_all``.
    max_query_chars
        Longest search query.
    """

    max_content_chars: int = 100_000
    max_id_chars: int = 256
    max_metadata_bytes: int = 256_000
    max_metadata_depth: int = 10
    max_limit: int = 10_000
    max_query_chars: int = 10_000

    def __post_init__(self) -> None:
        depth = self.max_metadata_depth
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH_LIMIT:
            raise ConfigError(f"Limits.max_metadata_depth must be an int from 1 to {MAX_DEPTH_LIMIT}, got {depth!r}")


# Python walks nested values recursively (json, pydantic, the redactor, the views), about a
# thousand frames deep at most; a bound well under that keeps every walk after the check safe.
MAX_DEPTH_LIMIT = 200

DEFAULT_LIMITS = Limits()


def check_depth(value: object, limit: int, name: str) -> None:
    """Refuse ``value`` if dicts and lists nest in it deeper than ``limit`` levels.

    A loop, not recursion: it runs before anything else walks the value (a redactor, the JSON
    checks), so data nested thousands of levels deep is an :class:`InvalidInputError`, never a
    ``RecursionError``. The top level counts as level 1, as in the metadata checks.
    """
    stack: list[tuple[object, int, str]] = [(value, 1, name)]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.items()
        elif isinstance(item, (list, tuple)):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            raise InvalidInputError(
                f"{name} is nested deeper than {limit} levels (at {shorten_path(where)});"
                " flatten it or raise Limits.max_metadata_depth"
            )
        for key, child in children:
            if isinstance(child, (Mapping, list, tuple)):
                stack.append((child, depth + 1, f"{where}.{key}" if isinstance(item, Mapping) else f"{where}[{key}]"))


def shorten_path(where: str, keep: int = 120) -> str:
    """A path into nested data, its middle left out when long (a path 600 levels deep is not read)."""
    return where if len(where) <= keep else f"{where[: keep // 2]}…{where[-keep // 2 :]}"


def check_text(value: str, name: str) -> str:
    """``value`` unchanged if it is valid Unicode: a lone surrogate (``"\\ud800"``) can be
    neither stored as UTF-8 nor sent to a server, so it is refused before any write."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"{name} holds {value[exc.start:exc.end]!r} at position {exc.start}, a lone surrogate,"
                " which is not text (decode bytes with errors='replace' first)"
            ) from None
    return value


def check_id(value: object, name: str, limits: Limits = DEFAULT_LIMITS) -> str:
    """A user, agent, workflow or memory id: a non-blank string without control characters."""
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    check_text(value, name)
    if not value.strip():
        raise InvalidInputError(f"{name} must not be empty")
    if len(value) > limits.max_id_chars:
        raise InvalidInputError(f"{name} is {len(value)} characters; the limit is {limits.max_id_chars}")
    if _CONTROL.search(value):
        raise InvalidInputError(f"{name} must not contain control characters")
    return value


def check_namespace(user_id: object, agent_id: object, limits: Limits = DEFAULT_LIMITS) -> tuple[str, str]:
    return check_id(user_id, "user_id", limits), check_id(agent_id, "agent_id", limits)


def check_scope(
    memory_id: object, user_id: object, agent_id: object, limits: Limits = DEFAULT_LIMITS
) -> tuple[str, str | None, str | None]:
    """A scoped delete's arguments: the memory id, and the namespace parts given (``None`` = any)."""
    return (
        check_id(memory_id, "memory_id", limits),
        None if user_id is None else check_id(user_id, "user_id", limits),
        None if agent_id is None else check_id(agent_id, "agent_id", limits),
    )


def check_content(content: object, limits: Limits = DEFAULT_LIMITS) -> str:
    if not isinstance(content, str):
        raise InvalidInputError(f"content must be a string, got {type(content).__name__}")
    if not content.strip():
        raise InvalidInputError("content must not be empty")
    if len(content) > limits.max_content_chars:
        raise InvalidInputError(
            f"content is {len(content)} characters; the limit is {limits.max_content_chars}"
            " (raise Limits.max_content_chars to allow more)"
        )
    if "\x00" in content:
        raise InvalidInputError("content must not contain NUL characters")
    return check_text(content, "content")


def _check_json(value: Any, depth: int, limits: Limits, where: str) -> None:
    if depth > limits.max_metadata_depth:
        raise InvalidInputError(f"metadata is nested deeper than {limits.max_metadata_depth} levels at {where}")
    if isinstance(value, str):
        check_text(value, f"metadata value at {where}")
        return
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -_INT64 <= value < _INT64:
            raise InvalidInputError(f"metadata integer at {where} does not fit in 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"metadata value at {where} is {value}, which JSON cannot hold")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"metadata keys must be strings; {key!r} at {where} is not")
            check_text(key, f"metadata key at {where}")
            _check_json(item, depth + 1, limits, f"{where}.{key}")
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check_json(item, depth + 1, limits, f"{where}[{index}]")
        return
    raise InvalidInputError(
        f"metadata value at {where} is a {type(value).__name__}, which is not JSON-serialisable"
        " (use str, int, float, bool, None, list or dict)"
    )


def _plain(value: Any) -> Any:
    """Mappings as dicts and sequences as lists, recursively (json.dumps takes no other kinds)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _flat_scalars(metadata: Mapping[Any, Any]) -> bool:
    """True for the common case (string keys, scalar values) that needs no deep walk or copy."""
    for key, value in metadata.items():
        kind = type(value)
        if type(key) is not str or not key.isascii():
            return False
        if kind is int:
            if not -_INT64 <= value < _INT64:
                return False
        elif kind is float:
            if not math.isfinite(value):
                return False
        elif kind is str:
            if not value.isascii():
                return False  # the deep walk checks it is valid text
        elif kind is not bool and value is not None:
            return False
    return True


def encode_metadata(metadata: object, limits: Limits = DEFAULT_LIMITS) -> tuple[dict[str, Any], str]:
    """Validate metadata; return a private JSON-normalised copy and its compact JSON text."""
    if metadata is None:
        return {}, "{}"
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"metadata must be a dict, got {type(metadata).__name__}")
    flat = _flat_scalars(metadata)
    if not flat:
        _check_json(metadata, 1, limits, "metadata")  # stops at the depth limit: it never recurses far
    # A read-only or custom mapping (MappingProxyType, ...) as a dict: json writes dicts only.
    plain: dict[str, Any] = _plain(metadata) if not flat or type(metadata) is not dict else metadata
    encoded = json.dumps(plain, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    size = len(encoded) if encoded.isascii() else len(encoded.encode("utf-8"))
    if size > limits.max_metadata_bytes:
        raise InvalidInputError(f"metadata is {size} bytes as JSON; the limit is {limits.max_metadata_bytes}")
    # Scalars are immutable, so a shallow copy is already private; anything nested is rebuilt from JSON.
    result: dict[str, Any] = dict(plain) if flat else json.loads(encoded)
    return result, encoded


def check_metadata(metadata: object, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """Return a private JSON-normalised copy (tuples become lists) of valid metadata."""
    return encode_metadata(metadata, limits)[0]


def check_limit(limit: object, limits: Limits = DEFAULT_LIMITS, name: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInputError(f"{name} must be an integer, got {type(limit).__name__}")
    if not 1 <= limit <= limits.max_limit:
        raise InvalidInputError(f"{name} must be between 1 and {limits.max_limit}, got {limit}")
    return limit


def check_offset(offset: object) -> int:
    if isinstance(offset, bool) or not isinstance(offset, int):
        raise InvalidInputError(f"offset must be an integer, got {type(offset).__name__}")
    if offset < 0:
        raise InvalidInputError(f"offset must not be negative, got {offset}")
    return offset


def check_query(query: object, limits: Limits = DEFAULT_LIMITS) -> str:
    """``None`` and blank queries become ``""``, which lists the namespace newest first."""
    if query is None:
        return ""
    if not isinstance(query, str):
        raise InvalidInputError(f"query must be a string or None, got {type(query).__name__}")
    if len(query) > limits.max_query_chars:
        raise InvalidInputError(f"query is {len(query)} characters; the limit is {limits.max_query_chars}")
    return check_text(query, "query").strip()


def check_trace_data(trace_data: object, limits: Limits = DEFAULT_LIMITS) -> dict[str, Any]:
    """A trace's data as a dict, refused before anything walks it (the redactor runs next) if it
    nests deeper than the metadata it becomes may."""
    if not isinstance(trace_data, Mapping):
        raise InvalidInputError(f"trace_data must be a dict, got {type(trace_data).__name__}")
    check_depth(trace_data, limits.max_metadata_depth, "trace_data")
    return dict(trace_data)


class Read(NamedTuple):
    """A validated read of one namespace: what every adapter's ``get_page`` starts from."""

    user: str
    agent: str
    limit: int
    offset: int
    conditions: tuple[Condition, ...]


def check_read(
    user_id: object, agent_id: object, limit: object, filters: object, limits: Limits = DEFAULT_LIMITS,
    offset: object = 0,
) -> Read:
    """Validate a namespace read in one place, so every adapter rejects the same things."""
    checked_limit = check_limit(limit, limits)
    checked_offset = check_offset(offset)
    user, agent = check_namespace(user_id, agent_id, limits)
    return Read(user, agent, checked_limit, checked_offset, parse_filters(filters))
