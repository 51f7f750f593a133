"""Trace steps as columns: how the SQLite store packs them on write and unpacks them on read.

What costs time at a million steps is the number of values that leave SQLite and the Python
objects made from them, so each step is stored as one packed blob of integers (see
:data:`TRACE_NUMBERS`; rows are written by :mod:`._trace_writes`) and one text of JSON cells joined by
the unit separator; see ``docs/traces.md``.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import struct
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import repeat
from operator import methodcaller
from typing import TYPE_CHECKING, Any

from memkit._core._errors import StorageError
from memkit._core._runs import RunScope, RunSummary, summarise_rows
from memkit.adapters._sqlbase import trace_filter
from memkit.adapters._sqlite._sql import SQLITE
from memkit.traces._items import status_of
from memkit.traces._timing import step_timing

# numpy is imported by the functions that compute with it: opening a store to read its
# counts or namespaces (the command line) never loads it.
if TYPE_CHECKING:
    import numpy as np

__all__ = ["MISSING", "PACKED", "TRACE_NUMBERS", "run_summaries", "step_timing_us", "trace_columns"]

# The packed numbers of a trace step, in this order, as little-endian int64; a missing value
# is int64's minimum, which is also numpy's NaT, so timestamps need no extra pass.
TRACE_NUMBERS = (
    "seq", "created_us", "user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status",
    "step_index", "started_us", "duration_us", "retry_count",
)
TRACE_CODES = frozenset(("user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status"))
PACKED = _PACKED = struct.Struct(f"<{len(TRACE_NUMBERS)}q")
MISSING = -(2**63)
TRACE_CHUNK = 65_536  # steps per chunk when reading
_copy = methodcaller("copy")
_NO_KEYS: dict[str, Any] = {}


def step_timing_us(trace_json: str) -> tuple[int | None, int | None]:
    """(start, duration) in microseconds of a step whose trace has no numeric ``timestamp`` nor
    ``duration`` (written by ``add_many``, not ``add_trace``), read as the generic reads read it
    (:func:`memkit._core._runs.step_of`): from any spelling :func:`step_timing` knows."""
    trace = json.loads(trace_json)
    if not isinstance(trace, dict):
        return None, None
    with warnings.catch_warnings():  # the reads warn about unreadable times; a write stays silent
        warnings.simplefilter("ignore")
        timing = step_timing(trace, warn=False)
    start = None if timing.start is None else round(timing.start * 1e6)
    duration = None if timing.duration is None else round(timing.duration * 1e6)
    return start, duration


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC while millions of cells are made: its passes over them cost ~2x."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _nesting(value: Any) -> int:
    """0 for a JSON scalar, 1 for a list or dict of scalars, 2 for deeper containers."""
    if isinstance(value, list):
        return 2 if any(isinstance(v, (list, dict)) for v in value) else 1
    if isinstance(value, dict):
        return 2 if any(isinstance(v, (list, dict)) for v in value.values()) else 1
    return 0


def _parse(cells: list[str]) -> tuple[np.ndarray | None, list[Any]]:
    """JSON texts -> (codes, values): ``values[codes[i]]`` is cell i, each distinct text parsed once.

    Mostly distinct cells (judged on a sample) are parsed one by one instead (codes ``None``):
    hashing a million distinct texts costs more than it saves.
    """
    import numpy as np
    import pandas as pd

    sample = cells[:: max(1, len(cells) // 2_000)]
    if len(set(sample)) > len(sample) // 2:
        return None, json.loads("[" + ",".join(cells) + "]")
    codes, uniques = pd.factorize(np.array(cells, dtype=object))
    return codes, json.loads("[" + ",".join(uniques) + "]")


def _column(values: list[Any], codes: np.ndarray | None) -> np.ndarray:
    """One object cell per row; a list or dict that several rows would share is copied per
    row, so mutating one cell never changes another row."""
    import numpy as np

    cells = np.fromiter(values, dtype=object, count=len(values))
    if codes is None:
        return cells
    column: np.ndarray = cells[codes]
    shared = np.flatnonzero(np.bincount(codes, minlength=len(cells)) > 1)
    nesting = np.zeros(len(cells), dtype=np.int8)
    nesting[shared] = [_nesting(v) for v in cells[shared]]
    if (nesting == 1).any():  # a shallow copy is a full one
        rows = np.flatnonzero(nesting[codes] == 1)
        column[rows] = np.fromiter(map(_copy, column[rows]), dtype=object, count=len(rows))
    if (nesting == 2).any():
        rows = np.flatnonzero(nesting[codes] == 2)
        texts = np.array([json.dumps(v) if n == 2 else "" for v, n in zip(cells, nesting, strict=True)],
                         dtype=object)
        column[rows] = np.fromiter(json.loads("[" + ",".join(texts[codes[rows]]) + "]"), dtype=object,
                                   count=len(rows))
    return column


def _json_column(cells: list[str]) -> np.ndarray:
    codes, values = _parse(cells)
    return _column(values, codes)


def _object_columns(cells: list[str], prefix: str) -> dict[str, np.ndarray]:
    """JSON objects (or ``null``), one per row -> one object column per key."""
    if not cells:
        return {}
    codes, parsed = _parse(cells)
    objects = [o if type(o) is dict else _NO_KEYS for o in parsed]
    keys = sorted(set().union(*objects))
    return {f"{prefix}.{key}": _column(list(map(dict.get, objects, repeat(key))), codes) for key in keys}


def decode_trace_fields(fields: list[str]) -> dict[str, Any]:
    """The unit-separated cells of some steps (id, error, params, result) -> columns."""
    return {
        "id": fields[0::4],
        "error": _json_column(fields[1::4]),
        **_object_columns(fields[2::4], "params"),
        **_object_columns(fields[3::4], "result"),
    }


def decode_trace_chunk(count: int, packed: bytes | None, joined: str | None, path: str) -> dict[str, Any]:
    """One chunk of trace_steps -> columns; codes stay codes (0 = none) until the dictionary is read.

    When the cells do not split into four per step, the result holds ``"cells"`` instead of
    the text columns and the caller reads that chunk again row by row.
    """
    import numpy as np

    width = len(TRACE_NUMBERS)
    if len(packed or b"") != count * width * 8:
        raise StorageError(f"{path!r}: trace_steps.numbers is damaged; the file was not written by memkit")
    table = np.frombuffer(packed or b"", dtype="<i8").reshape(count, width)
    out: dict[str, Any] = {}
    for j, name in enumerate(TRACE_NUMBERS):
        numbers = np.ascontiguousarray(table[:, j])
        out[name] = np.where(numbers == MISSING, 0, numbers) if name in TRACE_CODES else numbers
    fields = joined.split("\x1f") if count and joined is not None else []
    if len(fields) != 4 * count:
        out["cells"] = True
        out["id"] = [None] * count
        return out
    out.update(decode_trace_fields(fields))
    return out


def trace_columns(
    db: sqlite3.Connection,
    path: str,
    workflow_id: str | None,
    agent_id: str | None,
    user_id: str | None,
    status: str | None,
    since_us: int | None,
) -> dict[str, Any]:
    """Every trace step that matches, as columns (see :class:`memkit.SupportsTraceColumns`)."""
    values = {"workflow_id": workflow_id, "agent_id": agent_id, "user_id": user_id, "status": status}
    where, params = trace_filter(SQLITE, _TRACE_TESTS, "created_us >= ?", values, since_us)
    with gc_paused():
        return _read(db, path, where, params)


# A text column holds its dictionary code: a filter reads the code of its value.
_TRACE_TESTS = {
    column: f"{column} = (SELECT code FROM trace_dict WHERE text = ?)"  # noqa: S608
    for column in ("workflow_id", "agent_id", "user_id", "status")
}


def _read(db: sqlite3.Connection, path: str, condition: str, params: list[Any]) -> dict[str, Any]:
    import numpy as np

    db.execute("BEGIN")  # every chunk and the dictionary from one snapshot
    try:
        low, high = db.execute(
            f"SELECT min(seq), max(seq) FROM trace_steps WHERE {condition}", params  # noqa: S608
        ).fetchone()
        if low is None:
            return {"id": [], "error": [], **{name: np.zeros(0, dtype=np.int64) for name in TRACE_NUMBERS}}
        # Chunks by seq range, pipelined: while this thread parses one chunk, another
        # reads the next from SQLite (sqlite3 releases the GIL while it steps; one thread
        # at a time uses the connection).
        chunk_count = max(1, min(16, (high - low) // TRACE_CHUNK + 1))
        edges: list[int] = np.linspace(low - 1, high, chunk_count + 1).astype(np.int64).tolist()
        sql = (
            "SELECT count(*), CAST(group_concat(numbers, '') AS BLOB), group_concat(cells, char(31))"  # noqa: S608
            f" FROM trace_steps WHERE {condition} AND seq > ? AND seq <= ?"
        )

        def fetch(i: int) -> tuple[Any, ...]:
            row: tuple[Any, ...] = db.execute(sql, [*params, edges[i], edges[i + 1]]).fetchone()
            return row

        from concurrent.futures import ThreadPoolExecutor  # and logging: the command line's reads need neither

        chunks: list[dict[str, Any]] = []
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(fetch, 0)
            for i in range(chunk_count):
                count, packed, joined = pending.result()
                if i + 1 < chunk_count:
                    pending = pool.submit(fetch, i + 1)
                chunks.append(decode_trace_chunk(count, packed, joined, path))
        for i, chunk in enumerate(chunks):
            if chunk.pop("cells", False):  # an id held the separator (a row not written by memkit)
                rows = db.execute(
                    f"SELECT cells FROM trace_steps WHERE {condition} AND seq > ? AND seq <= ?",  # noqa: S608
                    [*params, edges[i], edges[i + 1]],
                )
                chunk.update(decode_trace_fields([f for (cell,) in rows for f in cell.rsplit("\x1f", 3)]))
        steps = sum(len(c["id"]) for c in chunks)
        if steps >= db.execute("SELECT count(*) FROM trace_dict").fetchone()[0]:
            dictionary = db.execute("SELECT code, text FROM trace_dict").fetchall()
        else:  # a few steps of a big store: only the texts they use
            codes = np.unique(np.concatenate([c[name] for c in chunks for name in TRACE_CODES]))
            dictionary = db.execute(
                "SELECT code, text FROM trace_dict WHERE code IN (SELECT value FROM json_each(?))",
                (json.dumps(codes[codes > 0].tolist()),),
            ).fetchall()
    finally:
        db.execute("COMMIT")
    # Code 0 never occurs (INTEGER PRIMARY KEY starts at 1): it stands for "no value".
    lookup = np.empty(max((c for c, _ in dictionary), default=0) + 1, dtype=object)
    for code, text in dictionary:
        lookup[code] = text
    out: dict[str, Any] = {}
    names = dict.fromkeys(name for chunk in chunks for name in chunk)
    for name in names:
        parts = [c[name] if name in c else np.full(len(c["id"]), None, dtype=object) for c in chunks]
        if name == "id":
            out[name] = [value for part in parts for value in part]
        else:
            out[name] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if name in TRACE_CODES:
            out[name] = lookup[out[name]]
    return out


def run_summaries(
    db: sqlite3.Connection, op: RunScope, recalls: Callable[[RunScope], dict[tuple[Any, ...], str]],
    marks: Callable[[RunScope], list[tuple[Any, ...]]],
) -> list[RunSummary]:
    """Every run in one row, newest first, from the packed numbers of its steps (no record's JSON is
    read but a failed step's, no numpy is loaded), summarised by :func:`memkit._core._runs.summarise_rows`;
    ``recalls`` lists the step index of each recall per run (see
    :func:`memkit.adapters._sqlite._queries.step_recall_counts`), ``marks`` counts them per run in SQL.

    The steps are summarised in the order they were written, ``(created_us, seq)``, as a listing reads them."""
    where, params = ["1"], []
    for column, value in (("workflow_id", op.workflow_id), ("agent_id", op.agent_id), ("user_id", op.user_id)):
        if value is not None:
            where.append(f"{column} = (SELECT code FROM trace_dict WHERE text = ?)")  # noqa: S608
            params.append(value)
    db.execute("BEGIN")  # the steps, the dictionary and the counts from one snapshot
    try:
        words: dict[int, str | None] = dict(db.execute("SELECT code, text FROM trace_dict"))
        failing = [code for code, text in words.items() if status_of(text, warn=False) == "failed"]
        packed = b"".join(row[0] for row in db.execute(
            f"SELECT numbers FROM trace_steps WHERE {' AND '.join(where)}", params))  # noqa: S608
        errors = db.execute(
            f"SELECT numbers, cells FROM trace_steps WHERE status IN (SELECT value FROM json_each(?))"  # noqa: S608
            f" AND {' AND '.join(where)}", [json.dumps(failing), *params],
        ).fetchall() if failing else []
        indexes = recalls(op)
        marked = marks(op)
    finally:
        db.execute("COMMIT")
    words[MISSING] = None
    states: dict[int, str] = {}  # the dictionary holds every text: only a status code's word is read as one
    error_of: dict[int, str | None] = {}
    for numbers, cells in errors:
        error = json.loads(cells.rsplit("\x1f", 3)[1])  # id, error, parameters, result
        error_of[_PACKED.unpack(numbers)[0]] = error if isinstance(error, str) else None
    per_index = {key: Counter(map(int, listed.split(","))) for key, listed in indexes.items() if listed}
    by_run: dict[tuple[Any, ...], dict[str, int]] = {}
    for user, agent, workflow, run, label, n in marked:
        by_run.setdefault((user, agent, workflow, run), {})[label] = n
    keys: dict[tuple[int, int, int, int], tuple[Any, ...]] = {}
    rows = []
    for (seq, created, user, agent, workflow, run, name, tool, status, index, started, duration,
         retries) in sorted(_PACKED.iter_unpack(packed), key=lambda numbers: (numbers[1], numbers[0])):
        codes = (user, agent, workflow, run)
        key = keys.get(codes)
        if key is None:
            key = keys[codes] = (words[user], words[agent], words.get(workflow), words.get(run))
        found = per_index.get(key)
        state = states.get(status)
        if state is None:
            state = states[status] = status_of(words.get(status))
        rows.append((key, (
            state, None if index == MISSING else index, words.get(name),
            words.get(tool), None if started == MISSING else started, None if duration == MISSING else duration,
            None if retries == MISSING else retries, error_of.get(seq),
            found.get(index, 0) if found is not None and index != MISSING else 0, created)))
    return summarise_rows(rows, by_run)
