"""Reading a namespace's saved vector snapshot and its vectors from the store file (helpers of
:mod:`memkit.adapters._sqlite._vectors`; inside the caller's read transaction, on the adapter's
worker thread)."""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

#: Vectors a restored index reads per step behind its searches (about 25 MB at 384 dimensions).
SUPPLY = 16_384


class _Replaced(Exception):
    """The snapshot a partial index was restored from is gone (a newer one replaced it)."""


def _arrays(head: bytes, coarse: bytes, size: int, dim: int, coarse_dim: int) -> dict[str, np.ndarray]:
    """A saved index's arrays (views of the stored bytes; VectorIndex.restore copies them)."""
    import numpy as np

    parts = [("keys", "<i8", size), ("sum", "<f8", dim), ("moment", "<f8", dim * dim)]
    if coarse_dim:
        parts.append(("basis", "<f4", dim * coarse_dim))
    arrays: dict[str, np.ndarray] = {}
    offset = 0
    for name, dtype, count in parts:
        arrays[name] = np.frombuffer(head, dtype=dtype, count=count, offset=offset)
        offset += count * np.dtype(dtype).itemsize
    if offset != len(head) or len(coarse) != size * coarse_dim * 4:
        raise ValueError("a vector snapshot of the wrong size")
    arrays["moment"] = arrays["moment"].reshape(dim, dim)
    if coarse_dim:
        arrays["basis"] = arrays["basis"].reshape(dim, coarse_dim)
        arrays["coarse"] = np.frombuffer(coarse, dtype="<f4").reshape(size, coarse_dim)
    return arrays


def _namespace_rows(db: sqlite3.Connection, user_id: str, agent_id: str, upto: int) -> list[tuple[int, bytes]]:
    """Every ``(seq, vector)`` of the namespace up to seq ``upto``, in seq order (inside the caller's
    read transaction). Its seqs come from the namespace index alone; when they are at least half
    of the seqs between their ends (one writer's bulk import), the vectors are then read as one
    range of the vectors table and the others' dropped: a join looked up every row and sorted the
    vectors in a temporary b-tree (7.5 against 2.4 µs a row at 100k)."""
    seqs = [seq for (seq,) in db.execute(
        "SELECT seq FROM memories WHERE user_id = ? AND agent_id = ? AND seq <= ?", (user_id, agent_id, upto)
    )]
    if not seqs:
        return []
    low, high = min(seqs), max(seqs)
    if 2 * len(seqs) < high - low + 1:
        rows = db.execute(
            "SELECT seq, vector FROM memory_vectors WHERE seq IN (SELECT value FROM json_each(?))",
            (json.dumps(seqs),),
        ).fetchall()
        rows.sort()
        return rows
    wanted = set(seqs)
    return [row for row in db.execute(
        "SELECT seq, vector FROM memory_vectors WHERE seq >= ? AND seq <= ? ORDER BY seq", (low, high)
    ) if row[0] in wanted]


def _rows(db: sqlite3.Connection, keys: np.ndarray, dim: int) -> np.ndarray:
    """The stored vectors of ``keys``, in that order (inside the caller's read transaction)."""
    import numpy as np

    found = dict(db.execute(
        "SELECT seq, vector FROM memory_vectors WHERE seq IN (SELECT value FROM json_each(?))",
        (json.dumps(keys.tolist()),),
    ))
    return np.frombuffer(b"".join(found[k] for k in keys.tolist()), dtype="<f4").reshape(len(keys), dim)


def _stored(db: sqlite3.Connection, keys: np.ndarray, dim: int) -> np.ndarray:
    """The vectors of a snapshot saved without them, from the vectors table in ``keys``' order,
    :data:`SUPPLY` keys at a time (a range of the table where they are dense, else by key), so
    that no more than a slice's rows are held besides the result. Raises :class:`_Replaced` when
    one is gone: its memory was deleted since this index was restored (the caller reloads)."""
    import numpy as np

    out = np.empty((len(keys), dim), dtype=np.float32)
    for start in range(0, len(keys), SUPPLY):
        part = keys[start : start + SUPPLY].tolist()
        low, high = min(part), max(part)
        if 2 * len(part) < high - low + 1:
            found = dict(db.execute(
                "SELECT seq, vector FROM memory_vectors WHERE seq IN (SELECT value FROM json_each(?))",
                (json.dumps(part),),
            ))
        else:
            wanted = set(part)
            found = {seq: vector for seq, vector in db.execute(
                "SELECT seq, vector FROM memory_vectors WHERE seq >= ? AND seq <= ?", (low, high)
            ) if seq in wanted}
        if len(found) != len(part):
            raise _Replaced
        out[start : start + len(part)] = np.frombuffer(
            b"".join(found[k] for k in part), dtype="<f4"
        ).reshape(len(part), dim)
    return out
