"""Trace steps as columns, what the SQL stores share: the columns ``trace_columns`` returns (see
:class:`memkit.SupportsTraceColumns`), a step's timing in microseconds, and JSON cells made into
object columns. SQLite (:mod:`memkit.adapters._sqlite._traces`) and PostgreSQL
(:mod:`memkit.adapters._postgres._traces`) each read their own table with these.
"""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import repeat
from operator import methodcaller
from typing import TYPE_CHECKING, Any

from memkit._core._timing import step_timing

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MISSING", "TEXTS", "TRACE_NUMBERS", "decode_trace_fields", "gc_paused", "object_columns", "step_timing_us"]


# The columns of a step that trace_columns returns beside id and error (texts and int64 numbers);
# a missing number is int64's minimum, which is also numpy's NaT, so timestamps need no extra pass.
TRACE_NUMBERS = (
    "seq", "created_us", "user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status",
    "step_index", "started_us", "duration_us", "retry_count",
)
TEXTS = frozenset(("user_id", "agent_id", "workflow_id", "run_id", "step_name", "tool", "status"))
MISSING = -(2**63)
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


def object_columns(cells: list[str], prefix: str) -> dict[str, np.ndarray]:
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
        **object_columns(fields[2::4], "params"),
        **object_columns(fields[3::4], "result"),
    }


