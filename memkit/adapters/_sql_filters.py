"""Metadata filters compiled to SQL, once for every SQL store; a :class:`Dialect` says how its database reads JSON.

The compiler owns the meaning (:mod:`memkit._retrieval._filters`: types never mix, a missing key
is ``None``, ``$ne``/``$nin`` are exact negations, every test is true or false, never NULL). A
dialect owns only text: its placeholder, its boolean literals, the expression that names a JSON
value's type, the type names of each kind, and how a value of a kind is read and compared.

Nothing a caller supplies is part of a statement's text: paths and values travel as parameters,
and every template holds exactly one placeholder, so the parameters follow the text in order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memkit._retrieval._filters import Condition, type_class

__all__ = ["CREATED_BY", "Dialect", "created_by", "filter_sql"]

Kind = Literal["bool", "number", "string"]

# Not a metadata operator (the filter parser never makes it): ``search(as_of=...)`` rides on
# the filter machinery so every leg and the empty-query listing honour it the same way.
CREATED_BY = "$created_by"

_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def created_by(until_us: int) -> Condition:
    """A condition that holds for memories created at or before ``until_us``."""
    return Condition(path=(), op=CREATED_BY, value=int(until_us))


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Dialect:
    """How one database reads a JSON value of ``m.metadata`` at a bound path.

    ``type_of`` and each ``values`` entry read the value at the path bound to their one
    placeholder; ``types`` lists, as SQL literals, the type names ``type_of`` gives a kind
    (``null`` included); ``operands`` is how a bound filter value of a kind is compared.
    """

    mark: str
    true: str
    false: str
    type_of: str
    types: Mapping[Kind, str]
    values: Mapping[Kind, str]
    operands: Mapping[Kind, str]
    #: The bound form of a metadata path (a JSONPath string, a text array).
    path: Callable[[Condition], object]
    #: The bound form of a filter value of a kind (identity unless the database wants text).
    binds: Mapping[Kind, Callable[[Any], object]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for template in (self.type_of, *self.values.values(), *self.operands.values()):
            if template.count(self.mark) != 1:
                raise ValueError(f"SQL dialect template {template!r} must hold exactly one {self.mark!r}")

    def bind(self, kind: Kind, value: Any) -> object:
        convert: Callable[[Any], object] = self.binds.get(kind, _same)
        return convert(value)


def _kind(value: Any) -> Kind:
    kind = type_class(value)
    if kind not in ("bool", "number", "string"):
        raise ValueError(f"a filter value of type {type(value).__name__} cannot be compiled")
    return kind


def _test(d: Dialect, cond: Condition, op: str, value: Any, params: list[Any]) -> str:
    """``metadata[path] op value``, true only when the stored value is of the value's kind."""
    path = d.path(cond)
    if value is None:
        params.append(path)
        return f"coalesce({d.type_of} = 'null', {d.true})"
    kind = _kind(value)
    params.extend([path, path, d.bind(kind, value)])
    return (
        f"coalesce(CASE WHEN {d.type_of} IN ({d.types[kind]})"
        f" THEN {d.values[kind]} {op} {d.operands[kind]} END, {d.false})"
    )


def filter_sql(conditions: tuple[Condition, ...], d: Dialect) -> tuple[str, list[Any]]:
    """Compile parsed filters to a parameterised predicate over ``m`` (the memories table)."""
    parts: list[str] = []
    params: list[Any] = []
    for cond in conditions:
        if cond.op == CREATED_BY:
            parts.append(f"m.created_us <= {d.mark}")
            params.append(cond.value)
        elif cond.op in ("$eq", "$ne"):
            expr = _test(d, cond, "=", cond.value, params)
            parts.append(expr if cond.op == "$eq" else f"NOT {expr}")
        elif cond.op in ("$in", "$nin"):
            exprs = [_test(d, cond, "=", v, params) for v in cond.value] or [d.false]
            any_of = "(" + " OR ".join(exprs) + ")"
            parts.append(any_of if cond.op == "$in" else f"NOT {any_of}")
        else:
            parts.append(_test(d, cond, _RANGE_SQL[cond.op], cond.value, params))
    return (" AND ".join(parts) or d.true), params
