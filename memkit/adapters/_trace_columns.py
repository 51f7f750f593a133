"""Trace steps as columns: how the SQLite store packs them on write and unpacks them on read.

What costs time at a million steps is the number of values that leave SQLite and the Python
objects made from them, so each step is stored as one packed blob of integers (see
:func:`pack_trace_numbers`) and one text of JSON cells joined by the unit separator; see
``docs/traces.md``.
"""

from __future__ import annotations

import gc
import json
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import repeat
from operator import methodcaller
from typing import Any

import numpy as np

from memkit._errors import StorageError

# The packed numbers of a trace step, in this order, as little-endian int64; a missing value
# is int64's minimum, which is also numpy's NaT, so timestamps need no extra pass.
TRACE_NUMBERS = (
    "seq", "created_us", "user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status",
    "step_index", "started_us", "duration_us", "retry_count",
)
TRACE_CODES = frozenset(("user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status"))
_PACKED = struct.Struct(f"<{len(TRACE_NUMBERS)}q")
MISSING = -(2**63)
TRACE_CHUNK = 65_536  # steps per chunk when reading
_copy = methodcaller("copy")
_NO_KEYS: dict[str, Any] = {}


def pack_trace_numbers(*values: object) -> bytes:
    """SQL function for the trace trigger; must never raise (that would abort the write)."""
    return _PACKED.pack(*(v if type(v) is int and MISSING < v < 2**63 else MISSING for v in values))


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
    import pandas as pd

    sample = cells[:: max(1, len(cells) // 2_000)]
    if len(set(sample)) > len(sample) // 2:
        return None, json.loads("[" + ",".join(cells) + "]")
    codes, uniques = pd.factorize(np.array(cells, dtype=object))
    return codes, json.loads("[" + ",".join(uniques) + "]")


def _column(values: list[Any], codes: np.ndarray | None) -> np.ndarray:
    """One object cell per row; a list or dict that several rows would share is copied per
    row, so mutating one cell never changes another row."""
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
