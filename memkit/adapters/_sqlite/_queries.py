"""The store's reads and small writes that need nothing but the connection: one function per
operation, each run on the adapter's worker thread (``db`` is its connection), or on the caller's
by the one-shot reads (:mod:`._reads`), which is why the models load only where one is made."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any, Protocol

from memkit._core._records import from_us, to_us
from memkit.adapters._sqlbase import LISTED, filter_sql, listed_bounds
from memkit.adapters._sqlite._schema import SCHEMA_VERSION, write_transaction
from memkit.adapters._sqlite._sql import COLUMNS, SQLITE, listed_values

if TYPE_CHECKING:
    from memkit._core._models import NamespaceInfo, Stats
    from memkit._core._runs import RunScope
    from memkit.store._ops import ExportOp, PutMarksOp, RemoveMarksOp, TracePayloadsOp, ValuesOp

__all__ = [
    "export_chunk",
    "mark_bodies",
    "namespace_fields",
    "namespaces",
    "put_marks",
    "recall_bodies",
    "recall_step_counts",
    "remove_marks",
    "schema_line",
    "stats",
    "stats_fields",
    "step_mark_counts",
    "step_recall_counts",
    "trace_payloads",
    "values",
]


class MarkScope(Protocol):
    """What a read of marks narrows to (``MarksOp`` is one; ``None``: any)."""

    @property
    def user_id(self) -> str | None: ...

    @property
    def agent_id(self) -> str | None: ...

    @property
    def workflow_id(self) -> str | None: ...

    @property
    def run_id(self) -> str | None: ...


class RecallScope(MarkScope, Protocol):
    """What a read of recalls narrows to (``RecallsOp`` is one)."""

    @property
    def recall_id(self) -> str | None: ...


def _where(sql: str, wanted: tuple[tuple[str, str | None], ...]) -> tuple[str, list[Any]]:
    """``sql`` narrowed to the columns given a value (column names are ours, values parameters)."""
    params: list[Any] = []
    for column, value in wanted:
        if value is not None:
            sql += f" AND {column} = ?"
            params.append(value)
    return sql, params


def values(db: sqlite3.Connection, op: ValuesOp) -> list[Any]:
    """The distinct values of one metadata path among a namespace's filtered memories, read in SQLite
    alone (each as JSON text: a boolean stays one, a list or an object whole)."""
    where, params = filter_sql(op.conditions, SQLITE)
    if op.path == (LISTED,):  # indexed: a seek per distinct value, not a read of every memory
        lo, hi = listed_bounds(op.conditions) or ("", None)
        return listed_values(db, op.user_id, op.agent_id, where, params, lo, hi, 2**62)
    path = "$." + ".".join(op.path)  # identifiers joined by dots (parse_filters' rule), as a parameter
    value = (
        "CASE json_type(m.metadata, ?) WHEN 'true' THEN 'true' WHEN 'false' THEN 'false'"
        " WHEN 'array' THEN json_extract(m.metadata, ?) WHEN 'object' THEN json_extract(m.metadata, ?)"
        " ELSE json_quote(json_extract(m.metadata, ?)) END"
    )
    namespace = "m.user_id = ? AND m.agent_id = ? AND json_type(m.metadata, ?) IS NOT NULL"
    sql = f"SELECT DISTINCT {value} FROM memories m WHERE {namespace} AND {where}"  # noqa: S608
    rows = db.execute(sql, [path, path, path, path, op.user_id, op.agent_id, path, *params]).fetchall()
    return [json.loads(row[0]) for row in rows]


def namespace_fields(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """:class:`memkit.NamespaceInfo`'s fields per namespace, sorted (the command line prints these)."""
    return [{"user_id": u, "agent_id": a, "count": c, "first_at": from_us(lo), "last_at": from_us(hi)}
            for u, a, c, lo, hi in db.execute(
                "SELECT user_id, agent_id, count(*), min(created_us), max(created_us)"
                " FROM memories GROUP BY user_id, agent_id ORDER BY user_id, agent_id")]


def namespaces(db: sqlite3.Connection) -> list[NamespaceInfo]:
    from memkit._core._models import NamespaceInfo

    return [NamespaceInfo(**fields) for fields in namespace_fields(db)]


def stats_fields(db: sqlite3.Connection, path: str) -> dict[str, Any]:
    """The fields of :meth:`stats`, in its order."""
    from memkit.adapters._sqlite._vectors import recorded

    memories, traces = db.execute(
        "SELECT count(*), coalesce(sum(json_extract(metadata, '$.type') = 'trace'), 0) FROM memories"
    ).fetchone()
    spaces = db.execute("SELECT count(*) FROM (SELECT 1 FROM memories GROUP BY user_id, agent_id)").fetchone()[0]
    pages = db.execute("PRAGMA page_count").fetchone()[0] * db.execute("PRAGMA page_size").fetchone()[0]
    name, dim = recorded(db)
    vectors = db.execute("SELECT count(*) FROM memory_vectors").fetchone()[0]
    return {
        "provider": "sqlite", "memories": memories, "traces": traces, "namespaces": spaces, "storage_bytes": pages,
        "path": path, "schema_version": SCHEMA_VERSION, "embedder": name, "embedder_dim": dim, "vectors": vectors,
    }


def stats(db: sqlite3.Connection, path: str) -> Stats:
    from memkit._core._models import Stats

    return Stats(**stats_fields(db, path))


def schema_line(db: sqlite3.Connection) -> str:
    version = db.execute("PRAGMA user_version").fetchone()[0]
    return f"schema version {version}, SQLite {sqlite3.sqlite_version}"


def export_chunk(db: sqlite3.Connection, op: ExportOp, after: tuple[int, int], size: int) -> list[tuple[Any, ...]]:
    """The next ``size`` rows after ``after`` (``(created_us, seq)``), oldest first."""
    sql, params = _where(
        f"SELECT {COLUMNS} FROM memories m WHERE (m.created_us, m.seq) > (?, ?)",  # noqa: S608
        (("m.user_id", op.user_id), ("m.agent_id", op.agent_id)),
    )
    return db.execute(sql + " ORDER BY m.created_us, m.seq LIMIT ?", [*after, *params, size]).fetchall()


def trace_payloads(db: sqlite3.Connection, op: TracePayloadsOp) -> dict[str, Any]:
    """The data of the trace steps whose metadata text holds any of ``op.containing`` (SQLite's instr, in
    C): only those are parsed in Python."""
    words = [w for w in op.containing if w]
    sql, params = _where(
        "SELECT m.id, m.metadata FROM memories m WHERE m.seq IN (SELECT seq FROM trace_steps)",
        (("m.user_id", op.user_id), ("m.agent_id", op.agent_id)),
    )
    if words:
        sql += " AND (" + " OR ".join("instr(m.metadata, ?) > 0" for _ in words) + ")"
    found: dict[str, Any] = {}
    for step_id, text in db.execute(sql, [*params, *words]):
        trace = json.loads(text).get("trace")
        if isinstance(trace, dict):
            found[step_id] = trace
    return found


def recall_bodies(db: sqlite3.Connection, op: RecallScope) -> list[str]:
    sql, params = _where("SELECT body FROM recalls WHERE 1", (
        ("user_id", op.user_id), ("agent_id", op.agent_id), ("workflow_id", op.workflow_id),
        ("run_id", op.run_id), ("id", op.recall_id),
    ))
    return [row[0] for row in db.execute(sql + " ORDER BY seq", params)]


def recall_step_counts(
    db: sqlite3.Connection, workflow_id: str | None, user_id: str | None, agent_id: str | None
) -> list[tuple[Any, ...]]:
    # A recall counts for the step of its trace's namespace (see _recall.step_namespace);
    # one recorded without it belongs to the step of the namespace it searched.
    sql, params = _where(
        "SELECT su, sa, workflow_id, run_id, step_index, count(*), sum(hits) FROM ("
        " SELECT coalesce(json_extract(body, '$.trace_user_id'), user_id) AS su,"
        " coalesce(json_extract(body, '$.trace_agent_id'), agent_id) AS sa,"
        " workflow_id, run_id, step_index, json_array_length(body, '$.hits') AS hits"
        " FROM recalls WHERE step_index IS NOT NULL) WHERE 1 = 1",
        (("workflow_id", workflow_id), ("su", user_id), ("sa", agent_id)),
    )
    return list(db.execute(sql + " GROUP BY su, sa, workflow_id, run_id, step_index", params))


def mark_bodies(db: sqlite3.Connection, op: MarkScope) -> list[str]:
    sql, params = _where("SELECT body FROM marks WHERE 1", (
        ("user_id", op.user_id), ("agent_id", op.agent_id), ("workflow_id", op.workflow_id), ("run_id", op.run_id),
    ))
    return [row[0] for row in db.execute(sql, params)]


def put_marks(db: sqlite3.Connection, op: PutMarksOp) -> int:
    from memkit._recall import _marks

    with write_transaction(db):
        db.executemany(
            "INSERT OR REPLACE INTO marks (id, created_us, user_id, agent_id, workflow_id, run_id, body)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(m.id, to_us(m.created_at), m.user_id, m.agent_id, m.workflow_id, m.run_id, _marks.dumps(m))
             for m in op.marks],
        )
    return len(op.marks)


def remove_marks(db: sqlite3.Connection, op: RemoveMarksOp) -> int:
    with write_transaction(db):
        return sum(
            db.execute("DELETE FROM marks WHERE id = ? AND user_id = ? AND agent_id = ?",
                       (i, op.user_id, op.agent_id)).rowcount
            for i in op.mark_ids
        )


def step_recall_counts(db: sqlite3.Connection, op: RunScope) -> dict[tuple[Any, ...], str]:
    """The step index of every recall of a run, comma-separated, keyed ``(user_id, agent_id,
    workflow_id, run_id)`` of the step: read from an index alone (no recall body is read). One row
    per run, not per step: at thousands of runs the rows themselves are what costs."""
    sql, params = _where(
        "SELECT step_user_id, step_agent_id, workflow_id, run_id, group_concat(step_index) FROM recalls"
        " WHERE step_index IS NOT NULL",
        (("step_user_id", op.user_id), ("step_agent_id", op.agent_id), ("workflow_id", op.workflow_id)),
    )
    rows = db.execute(sql + " GROUP BY step_user_id, step_agent_id, workflow_id, run_id", params)
    return {row[:4]: row[4] for row in rows}


def step_mark_counts(db: sqlite3.Connection, op: RunScope) -> list[tuple[Any, ...]]:
    """``(user_id, agent_id, workflow_id, run_id, label, marks)`` per run and label of its step marks."""
    sql, params = _where(
        "SELECT user_id, agent_id, workflow_id, run_id, body ->> '$.label', count(*) FROM marks"
        " WHERE body ->> '$.step_id' IS NOT NULL",  # a mark on a step names it
        (("user_id", op.user_id), ("agent_id", op.agent_id), ("workflow_id", op.workflow_id)),
    )
    return db.execute(sql + " GROUP BY user_id, agent_id, workflow_id, run_id, body ->> '$.label'", params).fetchall()
