"""What the SQL stores (SQLite, PostgreSQL) share: the metadata-filter compiler, the trace
filters' predicate and the embedder's shape check. A :class:`Dialect` carries every difference.

The filter compiler owns the meaning (:mod:`memkit._core._filters`: types never mix, a missing key
is ``None``, ``$ne``/``$nin`` are exact negations, every test is true or false, never NULL). A
dialect owns only text: its placeholder, its boolean literals, the expression that names a JSON
value's type, the type names of each kind, and how a value of a kind is read and compared.

Nothing a caller supplies is part of a statement's text: paths and values travel as parameters,
and every template holds exactly one placeholder, so the parameters follow the text in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from memkit._core._errors import ConfigError
from memkit._core._filters import Condition, type_class

if TYPE_CHECKING:
    import numpy as np

    from memkit.embeddings import Embedder

__all__ = ["CREATED_BY", "LISTED", "Dialect", "created_by", "embedded", "filter_sql", "listed_bounds", "trace_filter"]

Kind = Literal["bool", "number", "string"]

# Not a metadata operator (the filter parser never makes it): ``search(as_of=...)`` rides on
# the filter machinery so every leg and the empty-query listing honour it the same way.
CREATED_BY = "$created_by"

_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}

#: The one metadata key the stores index beside the memkit namespace: the LangGraph store's
#: namespace path (:mod:`memkit.langgraph`). Listing one LangGraph namespace, or every one, then
#: reads that index instead of testing each memory of the memkit namespace.
LISTED = "lg_path"


def listed_bounds(conditions: tuple[Condition, ...]) -> tuple[str, str] | None:
    """``(lo, hi)``: the conditions keep :data:`LISTED` a string in ``[lo, hi)``, or ``None`` when
    they do not bound it. The bound is for finding rows in an index only; the conditions are still
    tested on each row found."""
    lo: str | None = None
    hi: str | None = None
    for cond in conditions:
        if cond.path != (LISTED,) or not isinstance(cond.value, str) or "\x00" in cond.value:
            continue
        if cond.op == "$eq":
            return cond.value, cond.value + "\x00"  # the next string after it
        if cond.op == "$gte":
            lo = cond.value if lo is None else max(lo, cond.value)
        elif cond.op == "$lt":
            hi = cond.value if hi is None else min(hi, cond.value)
    return (lo, hi) if lo is not None and hi is not None else None


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
    #: For a database whose string reading ends at a NUL (SQLite's ``json_extract``): the JSON text of
    #: the string at the bound path, and a test, with no placeholder, true when a row holds no NUL at
    #: all. String equality then compares JSON texts where a NUL is involved.
    string_json: str | None = None
    no_nul: str | None = None
    #: Optional: "the metadata holds this JSON object" (bound to one), an indexable test that an
    #: equality implies; it is added beside the exact test, never instead of it, so an index on it
    #: can find a selective filter's rows without reading every row of the namespace.
    contains: str | None = None

    def __post_init__(self) -> None:
        for template in (self.type_of, *self.values.values(), *self.operands.values(),
                         *([self.contains] if self.contains else [])):
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
    if kind == "string" and op == "=" and d.string_json is not None:
        text = json.dumps(value, ensure_ascii=False)
        whole = f"{d.string_json} = {d.mark}"
        if "\x00" in value:
            params.extend([path, path, text])
            return f"coalesce(CASE WHEN {d.type_of} IN ({d.types[kind]}) THEN {whole} END, {d.false})"
        params.extend([path, path, d.bind(kind, value), path, text])
        return (
            f"coalesce(CASE WHEN {d.type_of} IN ({d.types[kind]})"
            f" THEN {d.values[kind]} = {d.operands[kind]} AND ({d.no_nul} OR {whole}) END, {d.false})"
        )
    params.extend([path, path, d.bind(kind, value)])
    return (
        f"coalesce(CASE WHEN {d.type_of} IN ({d.types[kind]})"
        f" THEN {d.values[kind]} {op} {d.operands[kind]} END, {d.false})"
    )


def _holding(path: tuple[str, ...], value: Any) -> str:
    """The JSON object that holds ``value`` at ``path``."""
    import json

    node: Any = value
    for key in reversed(path):
        node = {key: node}
    return json.dumps(node, allow_nan=False)


def filter_sql(conditions: tuple[Condition, ...], d: Dialect) -> tuple[str, list[Any]]:
    """Compile parsed filters to a parameterised predicate over ``m`` (the memories table)."""
    parts: list[str] = []
    params: list[Any] = []
    for cond in conditions:
        if cond.op == CREATED_BY:
            parts.append(f"m.created_us <= {d.mark}")
            params.append(cond.value)
        elif cond.op == "$eq" and d.contains is not None and cond.value is not None:
            # the object is matched against stored JSON, so a string is spelled as it is stored
            spell = d.binds.get("string") if isinstance(cond.value, str) else None
            params.append(_holding(cond.path, spell(cond.value) if spell else cond.value))
            parts.append(f"{d.contains} AND {_test(d, cond, '=', cond.value, params)}")
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


def trace_filter(
    d: Dialect, tests: Mapping[str, str], since: str, values: Mapping[str, str | None], since_us: int | None,
) -> tuple[str, list[Any]]:
    """The predicate of a trace-columns read: the test of each filter given a value (``tests[name]``
    holds one placeholder, bound to it) and ``since`` (bound to ``since_us``) when that is given."""
    where: list[str] = [d.true]
    params: list[Any] = []
    for name, value in values.items():
        if value is not None:
            where.append(tests[name])
            params.append(value)
    if since_us is not None:
        where.append(since)
        params.append(since_us)
    return " AND ".join(where), params


def embedded(embedder: Embedder, texts: list[str]) -> np.ndarray:
    """``texts`` as a float32 matrix of the shape the embedder declares; a :class:`ConfigError` otherwise."""
    import numpy as np

    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    if vectors.shape != (len(texts), embedder.dim):
        raise ConfigError(
            f"embedder {embedder.name!r} returned shape {vectors.shape}, expected {(len(texts), embedder.dim)}"
        )
    return vectors
