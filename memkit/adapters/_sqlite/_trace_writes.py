"""Trace steps' rows written from Python, in the transaction that inserts their memories.

Up to schema 11 a trigger filled ``trace_steps`` and ``trace_dict`` on every insert into
``memories``; SQLite 3.40 parses the metadata JSON once per ``json_extract`` (some 27 times a row),
which cost more than the insert itself. Since schema 12 :func:`write_trace_steps` writes the same
rows, byte for byte: a step whose fields have the types memkit's writes give them is packed here
from the record's metadata; any other step (a number where a name belongs, a bool as an index, a NUL
in a text, a time too large to round like SQLite) is written by the trigger's own SQL for that row,
in its place in the order, so dictionary codes are handed out in the order the trigger gave them.
"""

from __future__ import annotations

import json
import sqlite3
import warnings
from collections.abc import Sequence
from typing import Any

from memkit.adapters._sqlite._traces import MISSING, PACKED, step_timing_us

__all__ = [
    "Odd", "Prepared", "delete_replaced", "insert_memories", "prepare",
    "trigger_writes_steps", "write_trace_steps",
]

# The body of schema 11's trace_steps_insert trigger, for one row (new.seq is the parameter).
_TRIGGER_SQL = (
    """INSERT OR IGNORE INTO trace_dict (text)
        SELECT value FROM trace_source s, json_each(json_array(
            s.user_id, s.agent_id, s.workflow_id, s.run_id, s.step_name, s.tool, s.status))
        WHERE s.seq = ? AND json_each.type = 'text'""",
    """INSERT INTO trace_steps
        SELECT seq, created_us, user_id, agent_id, workflow_id, status,
            memkit_pack_trace_numbers(seq, created_us, user_id, agent_id, workflow_id, run_id, step_name,
                tool, status, step_index, started_us, duration_us, retry_count, timing),
            cells
        FROM (SELECT seq, created_us,
            (SELECT code FROM trace_dict WHERE text = s.user_id) AS user_id,
            (SELECT code FROM trace_dict WHERE text = s.agent_id) AS agent_id,
            (SELECT code FROM trace_dict WHERE text = s.workflow_id) AS workflow_id,
            (SELECT code FROM trace_dict WHERE text = s.run_id) AS run_id,
            (SELECT code FROM trace_dict WHERE text = s.step_name) AS step_name,
            (SELECT code FROM trace_dict WHERE text = s.tool) AS tool,
            (SELECT code FROM trace_dict WHERE text = s.status) AS status,
            step_index, started_us, duration_us, timing, retry_count,
            id || char(31) || json_quote(error) || char(31) || coalesce(parameters, 'null') || char(31)
                || coalesce(result, 'null') AS cells
        FROM trace_source s WHERE s.seq = ?)""",
)
_INSERT_STEP = (
    "INSERT INTO trace_steps (seq, created_us, user_id, agent_id, workflow_id, status, numbers, cells)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# The compact form SQLite's ``->`` copies out of a metadata text memkit encoded (it copies tokens as
# written), and json_quote's escapes (the same as json.dumps without ensure_ascii).
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_QUOTE = json.JSONEncoder(ensure_ascii=False)
_EXACT = 4503599627370496.0  # 2**52: SQLite's round() leaves a double this large as it is
_ROUNDABLE = 2.0**62


class Odd(Exception):
    """A step the trigger's SQL must write: its fields are not of the types packed here."""


def trigger_writes_steps(db: sqlite3.Connection) -> bool:
    """Whether the file still has schema 11's trigger (a store opened by a test as an older schema)."""
    return db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = 'trace_steps_insert'"
    ).fetchone() is not None


class _Codes:
    """trace_dict codes by text, handing out new ones as the trigger's INSERT OR IGNORE did (max + 1)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.known: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        code = self.known.get(text)
        if code is None:
            row = self.db.execute("SELECT code FROM trace_dict WHERE text = ?", (text,)).fetchone()
            if row is None:
                cursor = self.db.execute("INSERT INTO trace_dict (text) VALUES (?)", (text,))
                code = cursor.lastrowid
                assert code is not None
            else:
                code = row[0]
            self.known[text] = code
        return code


def _integer(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        return value if MISSING < value < 2**63 else MISSING
    if kind is float or kind is str or value is None:
        return MISSING  # a real or a text is not packed
    raise Odd  # JSON true reads as the integer 1; a subclass or a container: let SQLite say


def _number(value: Any) -> bool:
    """Whether ``value`` is a JSON number (the trigger's 'integer'/'real'); Odd for a bool or a subclass."""
    kind = type(value)
    if kind is int or kind is float:
        return True
    if value is None or kind is str:
        return False
    raise Odd


def _object(value: Any) -> str:
    """What SQLite's ``->`` gives for a JSON object, else 'null' (as the trigger's coalesce)."""
    if type(value) is dict:
        return _COMPACT.encode(value)
    if value is None or type(value) in (str, int, float, list):
        return "null"
    raise Odd


def _micros(value: Any) -> int:
    """SQLite's ``CAST(round(value * 1e6) AS INTEGER)`` of a JSON number."""
    x = value * 1e6
    if not -_ROUNDABLE < x < _ROUNDABLE:
        raise Odd
    if -_EXACT <= x <= _EXACT:
        x = float(int(x + 0.5)) if x >= 0 else -float(int(-x + 0.5))
    return int(x)


# A step's trace_steps row but for its seq and dictionary codes: its seven texts (user, agent,
# workflow, run, step name, tool, status), its cells, and step index, start, duration and retries.
Prepared = tuple[tuple[Any, ...], str, int, int, int, int]


def prepare(
    record_id: str, user_id: Any, agent_id: Any, meta: dict[str, Any], objects: tuple[str, str] | None = None
) -> Prepared | None:
    """What :func:`_row` makes of one memory before it needs the database (None when it is not a trace
    step); Odd when only the trigger's SQL can say. ``objects``: the parameters' and result's cells
    when the caller has them already (the texts their metadata encoding holds)."""
    kind = meta.get("type")
    if kind != "trace":
        if type(kind) is str and kind.startswith("trace\x00"):
            raise Odd
        return None
    if type(kind) is not str:
        raise Odd
    trace = meta.get("trace")
    if type(trace) is not dict:
        raise Odd
    texts = (user_id, agent_id, meta.get("workflow_id"), meta.get("run_id"), trace.get("step_name"),
             trace.get("tool"), trace.get("status"))
    for text in texts:
        if text is not None and (type(text) is not str or "\x00" in text):
            raise Odd  # SQLite's JSON reads a NUL as the end of the text; numbers compare as texts
    stamp, duration = trace.get("timestamp"), trace.get("duration")
    stamp_number, duration_number = _number(stamp), _number(duration)
    if stamp_number or duration_number:
        started = _micros(stamp) if stamp_number else MISSING
        lasted = _micros(duration) if duration_number else MISSING
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                started_or_none, lasted_or_none = step_timing_us(_COMPACT.encode(trace))
            except Exception:  # as the trigger's function: a step without readable timing is still stored
                started_or_none = lasted_or_none = None
        started = _integer(started_or_none)
        lasted = _integer(lasted_or_none)
    error = trace.get("error")
    if error is None:
        quoted = "null"
    elif type(error) is str and "\x00" not in error:
        quoted = _QUOTE.encode(error)
    else:
        raise Odd
    if "\x00" in record_id:
        raise Odd
    if objects is None:
        objects = (_object(trace.get("parameters")), _object(trace.get("result")))
    cells = "\x1f".join((record_id, quoted, *objects))
    return texts, cells, _integer(trace.get("step_index")), started, lasted, _integer(trace.get("retry_count"))


def _row(
    memory: Sequence[Any], meta: dict[str, Any], seq: int, codes: _Codes,
    objects: tuple[str, str] | Prepared | None = None,
) -> tuple[Any, ...] | None:
    """The trace_steps row of one memory (its memories columns and its metadata; None when it is not
    a trace step); Odd when only the trigger's SQL can say. ``objects``: what :func:`prepare` gave
    for it, or the parameters' and result's cells."""
    if objects is None or len(objects) == 2:
        prepared = prepare(memory[0], memory[1], memory[2], meta, objects)
        if prepared is None:
            return None
    else:
        prepared = objects
    texts, cells, step_index, started, lasted, retries = prepared
    known = codes.known
    numbered = [MISSING if text is None else known.get(text) or codes(text) for text in texts]
    created_us = memory[5]
    numbers = PACKED.pack(seq, created_us, *numbered, step_index, started, lasted, retries)
    status = numbered[6]
    return (seq, created_us, numbered[0], numbered[1], None if numbered[2] == MISSING else numbered[2],
            None if status == MISSING else status, numbers, cells)


def write_trace_steps(
    db: sqlite3.Connection, memories: Sequence[Sequence[Any]], metas: Sequence[dict[str, Any]], first_seq: int,
    objects: Sequence[tuple[str, str] | Prepared | None] | None = None,
) -> None:
    """Write the trace_steps rows (and new trace_dict texts) of ``memories`` (their columns as inserted,
    and their metadata), just inserted with seqs from ``first_seq`` on, inside the caller's write
    transaction. ``objects``: each step's parameters and result cells where known (see :func:`_row`)."""
    codes = _Codes(db)
    rows: list[tuple[Any, ...]] = []
    for i, memory in enumerate(memories):
        seq = first_seq + i
        try:
            row = _row(memory, metas[i], seq, codes, None if objects is None else objects[i])
        except Odd:
            db.executemany(_INSERT_STEP, rows)  # the rows before it first: codes stay in order
            rows = []
            db.execute(_TRIGGER_SQL[0], (seq,))
            db.execute(_TRIGGER_SQL[1], (seq,))
            continue
        if row is not None:
            rows.append(row)
    db.executemany(_INSERT_STEP, rows)


_INSERT_MEMORY = (
    "INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us) VALUES (?, ?, ?, ?, ?, ?)"
)


def delete_replaced(db: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> list[tuple[str, str]]:
    """Delete the memories ``rows`` replace (a row's id held in its own namespace), inside the caller's
    write transaction (BEGIN IMMEDIATE: no other writer between this and the insert); an id held in
    another namespace raises ``IntegrityError``, as a plain insert of it would. Returns the
    namespaces of the rows deleted."""
    gone: list[tuple[str, str]] = []
    for start in range(0, len(rows), 500):
        chunk = {row[0]: (row[1], row[2]) for row in rows[start : start + 500]}
        marks = ",".join("?" * len(chunk))
        held = db.execute(
            f"SELECT id, user_id, agent_id FROM memories WHERE id IN ({marks})", list(chunk)  # noqa: S608
        ).fetchall()
        if any(chunk[memory_id] != (user, agent) for memory_id, user, agent in held):
            raise sqlite3.IntegrityError("an id of this batch belongs to another namespace")
        db.executemany("DELETE FROM memories WHERE id = ?", [(h[0],) for h in held])
        gone.extend((user, agent) for _, user, agent in held)
    return gone


def insert_memories(
    db: sqlite3.Connection, rows: Sequence[tuple[Any, ...]], metas: Sequence[dict[str, Any]], first_seq: int,
    objects: Sequence[tuple[str, str] | Prepared | None] | None = None,
) -> None:
    """Insert ``rows`` (memories' columns: id, user_id, agent_id, content, metadata text, created_us;
    ``metas`` their metadata) taking seqs from ``first_seq`` on, and the trace steps among them, inside
    the caller's write transaction: the only place memkit inserts memories."""
    db.executemany(_INSERT_MEMORY, rows)
    if not trigger_writes_steps(db):
        write_trace_steps(db, rows, metas, first_seq, objects)
