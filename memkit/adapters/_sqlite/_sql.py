"""Reading memories: rows to records, and metadata filters compiled to parameterised SQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from memkit._core._filters import Condition
from memkit._core._records import Record
from memkit.adapters._sqlbase import LISTED, Dialect, filter_sql, listed_bounds

__all__ = ["COLUMNS", "LISTED_SQL", "SQLITE", "Passing", "listed_values", "records_by_seq", "row_record", "select"]

COLUMNS = "m.seq, m.id, m.user_id, m.agent_id, m.content, m.metadata, m.created_us"
# The expression the ``memories_listed`` index holds (spelled as it is there, or SQLite does not use it).
LISTED_SQL = f"json_extract(m.metadata, '$.{LISTED}')"


def row_record(row: tuple[Any, ...]) -> Record:
    return Record(
        id=row[1], user_id=row[2], agent_id=row[3], content=row[4],
        metadata=json.loads(row[5]), created_us=row[6],
    )


#: SQLite's JSON1: ``json_type`` names true and false apart, ``json_extract`` reads a true as 1; text
#: compares by byte, which for UTF-8 is code point order.
SQLITE = Dialect(
    mark="?", true="1", false="0",
    type_of="json_type(m.metadata, ?)",
    types={"bool": "'true', 'false'", "number": "'integer', 'real'", "string": "'text'"},
    values=dict.fromkeys(("bool", "number", "string"), "json_extract(m.metadata, ?)"),
    operands=dict.fromkeys(("bool", "number", "string"), "?"),
    path=lambda cond: cond.json_path,
    # json_extract ends a string at a NUL ("a\u0000b" reads as "a"): equality looks at the JSON text,
    # which memkit wrote as json.dumps does, where a row's text holds an escaped NUL at all.
    string_json="(m.metadata -> ?)", no_nul="instr(m.metadata, '\\u0000') = 0",
)


def select(
    db: sqlite3.Connection, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int,
    offset: int = 0,
) -> list[Record]:
    """One namespace's memories that pass the filters, newest first."""
    where, params = filter_sql(conditions, SQLITE)
    namespace, narrowed = "m.user_id = ? AND m.agent_id = ?", []
    tests = {c.path: c.value for c in conditions if c.op == "$eq" and isinstance(c.value, str)}
    if tests.get(("type",)) == "trace" and isinstance(tests.get(("workflow_id",)), str):
        # One workflow's steps: every trace memory has its trace_steps row, under the code of
        # its (text) workflow_id, so that index names every row that can pass; the namespace index
        # would test the filters on each of the namespace's rows (unary + keeps the planner off it).
        namespace = ("+m.user_id = ? AND +m.agent_id = ? AND m.seq IN (SELECT seq FROM trace_steps"
                     " WHERE workflow_id = ?)")
        narrowed = [tests[("workflow_id",)]]
    elif (bounds := listed_bounds(conditions)) is not None:
        # A range that holds one value (a LangGraph namespace without sub-namespaces) reads that
        # value's rows in the index's newest-first order; one that holds several is read as before.
        found = listed_values(db, user_id, agent_id, "1", [], *bounds, 2)
        if not found:
            return []
        if len(found) == 1:
            namespace = f"m.user_id = ? AND m.agent_id = ? AND {LISTED_SQL} = ?"
            narrowed = found
    sql = (
        f"SELECT {COLUMNS} FROM memories m WHERE {namespace} AND {where}"  # noqa: S608
        " ORDER BY m.created_us DESC, m.seq DESC LIMIT ? OFFSET ?"
    )
    rows = db.execute(sql, [user_id, agent_id, *narrowed, *params, limit, offset]).fetchall()
    return [row_record(r) for r in rows]


def listed_values(
    db: sqlite3.Connection, user_id: str, agent_id: str, where: str, params: list[Any], lo: str, hi: str | None,
    limit: int,
) -> list[str]:
    """The distinct :data:`LISTED` values in ``[lo, hi)`` (``hi`` ``None``: from ``lo`` on) of the
    namespace's memories that pass ``where``, ascending, at most ``limit``: one index seek a value."""
    bound, bounds = ("", []) if hi is None else (f" AND {LISTED_SQL} < ?", [hi])

    def step(after: str) -> str:
        return (
            f"SELECT {LISTED_SQL} FROM memories m WHERE m.user_id = ? AND m.agent_id = ? AND {LISTED_SQL} {after}"  # noqa: S608
            f"{bound} AND {where} ORDER BY {LISTED_SQL} LIMIT 1"
        )

    sql = (
        f"WITH RECURSIVE seen(v, n) AS (SELECT ({step('>= ?')}), 1"  # noqa: S608
        f" UNION ALL SELECT ({step('> seen.v')}), n + 1 FROM seen WHERE v IS NOT NULL AND n < ?)"
        " SELECT v FROM seen WHERE v IS NOT NULL"
    )
    once = [*bounds, *params]
    rows = db.execute(sql, [user_id, agent_id, lo, *once, user_id, agent_id, *once, limit]).fetchall()
    return [row[0] for row in rows]


def records_by_seq(db: sqlite3.Connection, seqs: Iterable[int]) -> dict[int, Record]:
    """The records of the seqs that still exist."""
    wanted = list(seqs)
    found: dict[int, Record] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = db.execute(f"SELECT {COLUMNS} FROM memories m WHERE m.seq IN ({marks})", chunk)  # noqa: S608
        found.update((int(r[0]), row_record(r)) for r in rows)
    return found


class Passing:
    """Which memories of one namespace pass a search's filters: each memory is tested once, however
    many legs (and widening windows) ask about it."""

    def __init__(self, db: sqlite3.Connection, user_id: str, agent_id: str, conditions: tuple[Condition, ...]) -> None:
        where, params = filter_sql(conditions, SQLITE)
        self._db = db
        # unary + keeps the planner on the seq primary key: the namespace index would scan it all
        self._sql = ("SELECT m.seq FROM memories m WHERE m.seq IN (SELECT value FROM json_each(?))"  # noqa: S608
                     f" AND +m.user_id = ? AND +m.agent_id = ? AND {where}")
        self._params = [user_id, agent_id, *params]
        self._seen: dict[int, bool] = {}

    def __call__(self, seqs: list[int]) -> set[int]:
        new = sorted(s for s in seqs if s not in self._seen)  # in seq order: neighbours share a page
        if new:
            passed = {row[0] for row in self._db.execute(self._sql, [json.dumps(new), *self._params])}
            self._seen.update((s, s in passed) for s in new)
        return {s for s in seqs if self._seen[s]}
