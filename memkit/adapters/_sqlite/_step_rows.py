"""The rows a bulk import writes: memories (with their trace steps) and recalls, straight from the
planned steps and recall bodies.

An import (:class:`memkit.store._ops.ImportStepsOp`) hands the SQLite store the steps' records and
the recalls as stored bodies: each step's memories row and trace_steps row come from the same code as
any other write (:mod:`._trace_writes`), and the recalls' rows from the bodies without a pydantic
``Recall`` each, all in one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from memkit._core._errors import InvalidInputError
from memkit._core._records import Record
from memkit._core._validate import Limits
from memkit._recall import _recording as _recall
from memkit.adapters._sqlite._keywords import feed_head
from memkit.adapters._sqlite._schema import write_transaction
from memkit.adapters._sqlite._trace_writes import insert_memories, step_fields
from memkit.adapters._sqlite._vectors import Vectors, blob
from memkit.store._ops import ImportStepsOp

__all__ = ["INSERT_RECALL", "import_steps", "memory_rows", "recall_rows"]

_CHUNK = 2_000  # steps built, embedded and inserted at a time
_IMPORT_CACHE = -32_768  # KiB (32 MiB): the page cache an import's connection holds meanwhile

INSERT_RECALL = (
    "INSERT INTO recalls (id, created_us, user_id, agent_id, workflow_id, run_id, step_index, step_user_id,"
    " step_agent_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

MemoryRow = tuple[str, str, str, str, str, int]


def memory_rows(records: Sequence[Record]) -> tuple[list[MemoryRow], list[dict[str, Any]]]:
    """``records`` as memories' columns (id, user_id, agent_id, content, metadata text, created_us),
    and their metadata."""
    rows = [
        (r.id, r.user_id, r.agent_id, r.content,
         r.metadata_json or json.dumps(r.metadata, ensure_ascii=False, separators=(",", ":")), r.created_us)
        for r in records
    ]
    return rows, [r.metadata for r in records]


def import_steps(
    db: sqlite3.Connection, vectors: Vectors, op: ImportStepsOp, limits: Limits, written: Counter[tuple[str, str]]
) -> int:
    """Write an import's steps and then its recalls in one write transaction, all or none; returns how
    many recalls. ``written`` counts the namespaces written, once committed. The rows are built and
    embedded first, so that the write lock is held only for the inserts."""
    vectors.check_writable()
    vectors.sync(db)
    chunks = list(_chunks(op, limits, vectors))
    # SQLite's default page cache (2 MB) is far smaller than the pages an import dirties: the random
    # ids' index pages were written out and read back again and again (a quarter of the insert's
    # CPU at 100k steps). The connection gets a larger cache for the import only, freed after.
    cache = db.execute("PRAGMA cache_size").fetchone()[0]
    db.execute(f"PRAGMA cache_size = {_IMPORT_CACHE}")
    # The commit would copy the whole import from the WAL into the file at once (a checkpoint, about
    # as long as the inserts' last quarter); the caller runs that after the import has returned.
    autocheckpoint = db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    db.execute("PRAGMA wal_autocheckpoint = 0")
    namespaces: Counter[tuple[str, str]] = Counter()
    try:
        with write_transaction(db):
            # Under the write lock nobody else can insert until we commit, so our rows take the seqs
            # right after the last one handed out, in insertion order.
            seq = feed_head(db)[0] + 1
            for rows, metas, fields, blobs in chunks:
                try:
                    insert_memories(db, rows, metas, seq, fields)
                except sqlite3.IntegrityError as exc:
                    raise InvalidInputError(f"a memory with one of these ids already exists ({exc})") from None
                if blobs:
                    db.executemany("INSERT OR REPLACE INTO memory_vectors (seq, vector) VALUES (?, ?)",
                                   [(seq + i, b) for i, b in enumerate(blobs)])
                namespaces.update((row[1], row[2]) for row in rows)
                seq += len(rows)
            checked = _recall.checked_bodies(op.recalls, limits)
            try:
                db.executemany(INSERT_RECALL, recall_rows(checked))
            except sqlite3.IntegrityError as exc:
                raise InvalidInputError(f"a recall with one of these ids already exists ({exc})") from None
    finally:
        db.execute(f"PRAGMA cache_size = {int(cache)}")
        db.execute(f"PRAGMA wal_autocheckpoint = {int(autocheckpoint)}")
    written.update(namespaces)
    return len(checked)


def _chunks(op: ImportStepsOp, limits: Limits, vectors: Vectors) -> Iterator[tuple[list[Any], ...]]:
    for done in range(0, len(op.records), _CHUNK):
        chunk = op.records[done:done + _CHUNK]
        rows, metas = memory_rows(chunk)
        fields = [step_fields(meta) for meta in metas]
        embedded = vectors.embed_contents([row[3] for row in rows])
        yield rows, metas, fields, [] if embedded is None else [blob(vector) for vector in embedded]


def recall_rows(bodies: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The recalls table's rows of recall bodies (see :mod:`memkit._recall._recording`)."""
    return [
        (b["id"], _recall.created_us(b), b["user_id"], b["agent_id"], b["workflow_id"], b["run_id"],
         b["step_index"], b.get("trace_user_id") or b["user_id"], b.get("trace_agent_id") or b["agent_id"],
         _recall.encode(b))
        for b in bodies
    ]
