"""The filter language: parsing, the reference semantics, and SQL that agrees with it."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit import InvalidInputError, MemoryFilter
from memkit._core._filters import matches, parse_filters
from memkit.adapters._postgres._sql import POSTGRES
from memkit.adapters._sqlbase import filter_sql
from memkit.adapters._sqlite._sql import SQLITE
from memkit.testing import PostgresServer

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=5),
    st.sampled_from([0.5, 1.0, -2.25, 3.0]),
    st.sampled_from(["", "a", "b", "TP53", "tp53", "Z", "ä", "1"]),
)
values = st.one_of(scalars, st.lists(scalars, max_size=2), st.dictionaries(st.sampled_from(["x", "y"]), scalars))
metadata = st.dictionaries(st.sampled_from(["a", "b", "c"]), values, max_size=3).map(
    lambda d: {**d, "nest": {"a": d.get("a")}} if "a" in d else d
)
paths = st.sampled_from(["a", "b", "c", "nest.a", "missing"])
ops = st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"])


@st.composite
def filters(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for _ in range(draw(st.integers(1, 2))):
        path, op = draw(paths), draw(ops)
        if op in ("$in", "$nin"):
            value: Any = draw(st.lists(scalars, max_size=3))
        elif op in ("$gt", "$gte", "$lt", "$lte"):
            value = draw(st.one_of(st.integers(-5, 5), st.sampled_from([0.5, "a", "TP53", ""])))
        else:
            value = draw(scalars)
        out.setdefault(path, {})[op] = value
    return out


def _sql_matches(conn: sqlite3.Connection, meta: dict[str, Any], spec: dict[str, Any]) -> bool:
    import json

    where, params = filter_sql(parse_filters(spec), SQLITE)
    # the CTE's placeholder comes first in the text, so the row's JSON is bound first
    sql = f"WITH m(metadata) AS (SELECT ?) SELECT {where} FROM m"  # noqa: S608 - compiled predicate, values bound
    row = conn.execute(sql, [json.dumps(meta), *params]).fetchone()
    return bool(row[0])


@settings(max_examples=400, deadline=None)
@given(meta=metadata, spec=filters())
def test_sql_agrees_with_reference(meta: dict[str, Any], spec: dict[str, Any]) -> None:
    conn = sqlite3.connect(":memory:")
    assert _sql_matches(conn, meta, spec) == matches(parse_filters(spec), meta)


@pytest.fixture(scope="module")
def postgres(postgres_server: PostgresServer) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(postgres_server.url("filters"), autocommit=True) as conn:
        yield conn


@settings(max_examples=300, deadline=None)
@given(meta=metadata, spec=filters())
def test_postgres_sql_agrees_with_reference(postgres: Any, meta: dict[str, Any], spec: dict[str, Any]) -> None:
    """The same compiler in PostgreSQL's dialect, on a real server, means what the reference means."""
    import json

    where, params = filter_sql(parse_filters(spec), POSTGRES)
    sql = f"WITH m(metadata) AS (SELECT %s::jsonb) SELECT {where} FROM m"  # noqa: S608 - compiled predicate, values bound
    row = postgres.execute(sql, [json.dumps(meta), *params]).fetchone()
    assert row[0] is (matches(parse_filters(spec), meta))


def test_memory_filter_model_is_accepted() -> None:
    assert parse_filters(MemoryFilter(metadata={"gene": "TP53"})) == parse_filters({"gene": "TP53"})


@pytest.mark.parametrize(
    ("spec", "meta", "expected"),
    [
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": 1}, {"n": True}, False),
        ({"n": True}, {"n": 1}, False),
        ({"n": "1"}, {"n": 1}, False),
        ({"n": None}, {}, True),
        ({"n": None}, {"n": None}, True),
        ({"n": None}, {"n": 0}, False),
        ({"n": {"$ne": 2}}, {}, True),
        ({"n": {"$gt": 2}}, {}, False),
        ({"n": {"$gt": 2}}, {"n": "3"}, False),
        ({"s": {"$lt": "b"}}, {"s": "a"}, True),
        ({"s": {"$lt": "b"}}, {"s": "B"}, True),  # code point order: "B" < "b"
        ({"t": "a"}, {"t": ["a"]}, False),
        ({"a.b": 1}, {"a": {"b": 1}}, True),
        ({"a.b": 1}, {"a": [1]}, False),
    ],
)
def test_reference_semantics(spec: dict[str, Any], meta: dict[str, Any], expected: bool) -> None:
    assert matches(parse_filters(spec), meta) is expected


@pytest.mark.parametrize(
    "bad",
    [
        {"a": {"$regex": "x"}},
        {"a b": 1},
        {"a-b": 1},
        {"a.": 1},
        {"": 1},
        {"a": {"$in": [[1]]}},
        {"a": {"$gt": [1]}},
        {"a": float("nan")},
        {"a": {"$in": list(range(1001))}},
        {1: 1},
        "a=1",
    ],
)
def test_bad_filters_raise(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        parse_filters(bad)


def test_asyncio_is_not_needed_to_parse() -> None:
    # parse errors happen before any I/O, so they surface even without a running loop
    with pytest.raises(InvalidInputError):
        asyncio.run(_parse_in_loop())


async def _parse_in_loop() -> None:
    parse_filters({"bad key": 1})
