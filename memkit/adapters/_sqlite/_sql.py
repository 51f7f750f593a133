"""Reading memories: rows to records, and metadata filters compiled to parameterised SQL."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from memkit._core._records import Record
from memkit._retrieval._filters import Condition, type_class

__all__ = ["COLUMNS", "allowed", "created_by", "filter_sql", "records_by_seq", "row_record", "select"]

COLUMNS = "m.seq, m.id, m.user_id, m.agent_id, m.content, m.metadata, m.created_us"


def row_record(row: tuple[Any, ...]) -> Record:
    return Record(
        id=row[1], user_id=row[2], agent_id=row[3], content=row[4],
        metadata=json.loads(row[5]), created_us=row[6],
    )


def _equal_sql(cond: Condition, wanted: Any, params: list[Any]) -> str:
    """SQL that is 1 exactly when :func:`memkit._retrieval._filters._equal` is true (never NULL)."""
    params.append(cond.json_path)
    kind = type_class(wanted)
    if kind == "null":
        return "coalesce(json_type(m.metadata, ?) = 'null', 1)"
    if kind == "bool":
        return f"coalesce(json_type(m.metadata, ?) = '{'true' if wanted else 'false'}', 0)"
    params.extend([cond.json_path, wanted])
    types = "('integer', 'real')" if kind == "number" else "('text')"
    return f"coalesce(json_type(m.metadata, ?) IN {types} AND json_extract(m.metadata, ?) = ?, 0)"


# Not a metadata operator (the filter parser never makes it): ``search(as_of=...)`` rides on
# the filter machinery so every leg and the empty-query listing honour it the same way.
_CREATED_BY = "$created_by"


def created_by(until_us: int) -> Condition:
    """A condition that holds for memories created at or before ``until_us``."""
    return Condition(path=(), op=_CREATED_BY, value=int(until_us))


_RANGE_SQL = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def filter_sql(conditions: tuple[Condition, ...]) -> tuple[str, list[Any]]:
    """Compile parsed filters to a parameterised SQL predicate over ``m.metadata``."""
    parts: list[str] = []
    params: list[Any] = []
    for cond in conditions:
        if cond.op == _CREATED_BY:
            parts.append("m.created_us <= ?")
            params.append(cond.value)
        elif cond.op in ("$eq", "$ne"):
            expr = _equal_sql(cond, cond.value, params)
            parts.append(expr if cond.op == "$eq" else f"NOT {expr}")
        elif cond.op in ("$in", "$nin"):
            exprs = [_equal_sql(cond, v, params) for v in cond.value] or ["0"]
            any_of = "(" + " OR ".join(exprs) + ")"
            parts.append(any_of if cond.op == "$in" else f"NOT {any_of}")
        else:
            types = "('integer', 'real')" if type_class(cond.value) == "number" else "('text')"
            params.extend([cond.json_path, cond.json_path, cond.value])
            parts.append(
                f"coalesce(json_type(m.metadata, ?) IN {types}"
                f" AND json_extract(m.metadata, ?) {_RANGE_SQL[cond.op]} ?, 0)"
            )
    return (" AND ".join(parts) or "1"), params


def select(
    db: sqlite3.Connection, user_id: str, agent_id: str, conditions: tuple[Condition, ...], limit: int,
    offset: int = 0,
) -> list[Record]:
    """One namespace's memories that pass the filters, newest first."""
    where, params = filter_sql(conditions)
    sql = (
        f"SELECT {COLUMNS} FROM memories m WHERE m.user_id = ? AND m.agent_id = ? AND {where}"  # noqa: S608
        " ORDER BY m.created_us DESC, m.seq DESC LIMIT ? OFFSET ?"
    )
    rows = db.execute(sql, [user_id, agent_id, *params, limit, offset]).fetchall()
    return [row_record(r) for r in rows]


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


def allowed(db: sqlite3.Connection, seqs: list[int], conditions: tuple[Condition, ...]) -> set[int]:
    """Those of ``seqs`` whose memory passes the filters."""
    where, params = filter_sql(conditions)
    passing: set[int] = set()
    for start in range(0, len(seqs), 500):
        chunk = seqs[start : start + 500]
        marks = ",".join("?" * len(chunk))
        sql = f"SELECT m.seq FROM memories m WHERE m.seq IN ({marks}) AND {where}"  # noqa: S608
        passing.update(int(r[0]) for r in db.execute(sql, [*chunk, *params]))
    return passing
