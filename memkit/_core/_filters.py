"""Metadata filters: one parser and one meaning for every adapter.

A filter is a dict of ``path -> condition``; all entries must hold (AND).
``path`` is a dotted identifier path into metadata (``"gene"``, ``"run.step"``).
A condition is either a scalar (equality) or a dict of operators::

    {"type": "trace"}                      # equality
    {"score": {"$gte": 0.5, "$lt": 0.9}}   # range, both must hold
    {"tool": {"$in": ["blast", "bwa"]}}
    {"status": {"$ne": "failed"}}          # also matches when status is absent

Semantics (the SQL and Cypher compilers must agree with :func:`matches`):

- Types never mix: ``1`` does not equal ``True`` or ``"1"``; ``1`` equals ``1.0``.
- ``None`` (or ``{"$eq": None}``) matches a missing key or a JSON null.
- ``$ne`` / ``$nin`` are the exact negations of ``$eq`` / ``$in``, so they
  match records where the key is missing.
- ``$gt``, ``$gte``, ``$lt``, ``$lte`` take a number or a string and only
  match values of the same kind; strings compare by code point.
- Lists and objects in metadata are never equal to a scalar.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from memkit._core._errors import InvalidInputError

__all__ = ["OPERATORS", "Condition", "lookup", "matches", "parse_filters", "type_class"]

OPERATORS = ("$eq", "$ne", "$in", "$nin", "$gt", "$gte", "$lt", "$lte")
_RANGE = ("$gt", "$gte", "$lt", "$lte")
_SEGMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_MAX_PATH_DEPTH = 8
_MAX_IN = 1_000

Scalar = str | int | float | bool | None
TypeClass = Literal["null", "bool", "number", "string", "other"]


@dataclass(frozen=True)
class Condition:
    """One parsed test: ``metadata[path] <op> value``."""

    path: tuple[str, ...]
    op: str
    value: Any

    @property
    def json_path(self) -> str:
        """The SQLite/JSONPath form, ``$.a.b``; safe because segments are identifiers."""
        return "$." + ".".join(self.path)


def type_class(value: object) -> TypeClass:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "other"


def _parse_path(key: object) -> tuple[str, ...]:
    if not isinstance(key, str):
        raise InvalidInputError(f"filter keys must be strings, got {type(key).__name__}")
    parts = tuple(key.split("."))
    if len(parts) > _MAX_PATH_DEPTH or not all(_SEGMENT.match(p) for p in parts):
        raise InvalidInputError(
            f"filter key {key!r} is not a metadata path: use identifiers joined by dots"
            " (letters, digits and _, not starting with a digit)"
        )
    return parts


def _scalar(value: object, key: str, op: str) -> Scalar:
    kind = type_class(value)
    if kind == "other":
        raise InvalidInputError(
            f"filter {key!r} {op} takes a str, int, float, bool or None, got {type(value).__name__}"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInputError(f"filter {key!r} {op} got {value}, which no metadata can hold")
    if kind == "number" and isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise InvalidInputError(f"filter {key!r} {op} got {value}, which does not fit in 64 bits")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidInputError(f"filter {key!r} {op} got a string with a lone surrogate") from None
    return value  # type: ignore[return-value]


def _parse_condition(key: str, path: tuple[str, ...], op: object, value: object) -> Condition:
    if op not in OPERATORS:
        raise InvalidInputError(
            f"unknown filter operator {op!r} for {key!r}; use one of {', '.join(OPERATORS)}"
        )
    assert isinstance(op, str)
    if op in ("$in", "$nin"):
        if not isinstance(value, (list, tuple)):
            raise InvalidInputError(f"filter {key!r} {op} takes a list, got {type(value).__name__}")
        if len(value) > _MAX_IN:
            raise InvalidInputError(f"filter {key!r} {op} has {len(value)} values; the limit is {_MAX_IN}")
        return Condition(path, op, tuple(_scalar(v, key, op) for v in value))
    scalar = _scalar(value, key, op)
    if op in _RANGE and type_class(scalar) not in ("number", "string"):
        raise InvalidInputError(f"filter {key!r} {op} takes a number or a string, got {scalar!r}")
    return Condition(path, op, scalar)


def parse_filters(filters: object) -> tuple[Condition, ...]:
    """Validate ``filters`` and return its conditions; raise ``InvalidInputError`` on anything odd."""
    if filters is None:
        return ()
    if not isinstance(filters, Mapping):
        from memkit._core._models import MemoryFilter  # pydantic: only a filter that is not a dict needs it

        if isinstance(filters, MemoryFilter):
            filters = filters.metadata
    if not isinstance(filters, Mapping):
        raise InvalidInputError(f"filters must be a dict, got {type(filters).__name__}")
    conditions: list[Condition] = []
    for key, spec in filters.items():
        path = _parse_path(key)
        if isinstance(spec, Mapping):
            if not spec:
                raise InvalidInputError(f"filter {key!r} has an empty operator dict")
            for op, value in spec.items():
                conditions.append(_parse_condition(key, path, op, value))
        else:
            conditions.append(_parse_condition(key, path, "$eq", spec))
    return tuple(conditions)


def lookup(metadata: Mapping[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    """``(True, value)`` at ``path`` in ``metadata``, or ``(False, None)`` where there is none."""
    node: Any = metadata
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _equal(present: bool, actual: Any, wanted: Scalar) -> bool:
    if wanted is None:
        return not present or actual is None
    return present and type_class(actual) == type_class(wanted) and actual == wanted


def _holds(cond: Condition, metadata: Mapping[str, Any]) -> bool:
    present, actual = lookup(metadata, cond.path)
    op, wanted = cond.op, cond.value
    if op == "$eq":
        return _equal(present, actual, wanted)
    if op == "$ne":
        return not _equal(present, actual, wanted)
    if op == "$in":
        return any(_equal(present, actual, w) for w in wanted)
    if op == "$nin":
        return not any(_equal(present, actual, w) for w in wanted)
    if not present or type_class(actual) != type_class(wanted):
        return False
    if op == "$gt":
        return bool(actual > wanted)
    if op == "$gte":
        return bool(actual >= wanted)
    if op == "$lt":
        return bool(actual < wanted)
    return bool(actual <= wanted)


def matches(conditions: tuple[Condition, ...], metadata: Mapping[str, Any]) -> bool:
    """True when ``metadata`` satisfies every condition."""
    return all(_holds(c, metadata) for c in conditions)
