"""The rows a bulk import writes: memories (with their trace steps) and recalls, straight from the
planned steps and recall bodies.

The general path builds a :class:`~memkit._core._records.Record` per step, a pydantic ``Recall`` per
recall, then reads each back to make its rows. An import (:class:`memkit.store._ops.ImportStepsOp`)
hands the SQLite store the steps as ``add_trace`` takes them and the recalls as stored bodies: each
step's memories row comes from :func:`~memkit._core._records.trace_row` (the same texts
``trace_record`` gives) and its trace_steps row from the same code as any other write
(:mod:`._trace_writes`), so an import writes the bytes ``add_trace`` + ``add_recalls`` would.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, cast

from memkit._core._errors import InvalidInputError
from memkit._core._records import Record, now_us, trace_row
from memkit._core._validate import Limits
from memkit._recall import _recording as _recall
from memkit.adapters._sqlite._keywords import feed_head
from memkit.adapters._sqlite._schema import write_transaction
from memkit.adapters._sqlite._trace_writes import Fields, insert_memories, step_fields
from memkit.adapters._sqlite._vectors import Vectors, blob
from memkit.store._ops import ImportStepsOp, StepsRestarted

__all__ = ["INSERT_RECALL", "import_steps", "memory_rows", "recall_rows", "step_rows"]

_CHUNK = 2_000  # steps built, embedded and inserted at a time
_IMPORT_CACHE = -32_768  # KiB (32 MiB): the page cache an import's connection holds meanwhile

INSERT_RECALL = (
    "INSERT INTO recalls (id, created_us, user_id, agent_id, workflow_id, run_id, step_index, step_user_id,"
    " step_agent_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

MemoryRow = tuple[str, str, str, str, str, int]
_UNREAD: dict[str, Any] = {}  # the metadata of a step whose fields came made: never read


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
    many recalls. ``written`` counts the namespaces written, once committed.

    ``op.steps`` may be a stream still arriving (a span file another process plans): each chunk of
    steps is built, embedded and inserted as it comes, the write lock held meanwhile. A refusal from
    the stream rolls everything back; a :class:`~memkit.store._ops.StepsRestarted` rolls back and
    writes the steps the stream gives again. Steps already at hand (a list) are built and embedded
    first, so that the lock is held only for the inserts."""
    vectors.check_writable()
    vectors.sync(db)
    # SQLite's default page cache (2 MB) is far smaller than the pages an import dirties: the random
    # ids' index pages were written out and read back again and again (a quarter of the insert's
    # CPU at 100k steps). The connection gets a larger cache for the import only, freed after.
    cache = db.execute("PRAGMA cache_size").fetchone()[0]
    db.execute(f"PRAGMA cache_size = {_IMPORT_CACHE}")
    # The commit would copy the whole import from the WAL into the file at once (a checkpoint, about
    # as long as the inserts' last quarter); the caller runs that after the import has returned.
    autocheckpoint = db.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    db.execute("PRAGMA wal_autocheckpoint = 0")
    try:
        while True:
            try:
                return _import_once(db, vectors, op, limits, written)
            except StepsRestarted:
                continue
    finally:
        db.execute(f"PRAGMA cache_size = {int(cache)}")
        db.execute(f"PRAGMA wal_autocheckpoint = {int(autocheckpoint)}")


def _chunks(op: ImportStepsOp, limits: Limits, vectors: Vectors) -> Iterator[tuple[list[Any], ...]]:
    steps = iter(op.steps)
    done = 0
    while chunk := list(itertools.islice(steps, _CHUNK)):

        def general(i: int, base: int = done) -> Record:
            return op.general(base + i)  # general's index counts from the first step

        rows, metas, fields, made = step_rows(chunk, general, limits, op.built, done)
        blobs: list[bytes] = []
        if vectors.embedder is not None:
            # The vectors the other process made (the same model's) are taken as they came.
            missing = [i for i, b in enumerate(made) if b is None]
            embedded = vectors.embed_contents([rows[i][3] for i in missing]) if missing else None
            for i, vector in zip(missing, () if embedded is None else embedded, strict=True):
                made[i] = blob(vector)
            blobs = cast(list[bytes], made)
        yield rows, metas, fields, blobs
        done += len(rows)


def _import_once(
    db: sqlite3.Connection, vectors: Vectors, op: ImportStepsOp, limits: Limits, written: Counter[tuple[str, str]]
) -> int:
    chunks: Iterable[tuple[list[Any], ...]] = _chunks(op, limits, vectors)
    if isinstance(op.steps, Sequence):
        chunks = list(chunks)
    namespaces: Counter[tuple[str, str]] = Counter()
    recalls = _Recalls(db, limits)
    streamed = not isinstance(op.steps, Sequence)
    try:
        with write_transaction(db):
            # Under the write lock nobody else can insert until we commit, so our rows take the seqs
            # right after the last one handed out, in insertion order.
            seq = feed_head(db)[0] + 1
            for rows, metas, fields, blobs in chunks:
                insert_memories(db, rows, metas, seq, fields)
                if blobs:
                    db.executemany("INSERT OR REPLACE INTO memory_vectors (seq, vector) VALUES (?, ?)",
                                   [(seq + i, b) for i, b in enumerate(blobs)])
                namespaces.update((row[1], row[2]) for row in rows)
                seq += len(rows)
                if streamed:
                    recalls.take(op.recalls)  # those that came with the steps so far
            # After the last step a stream's recalls have all arrived.
            recalls.take(op.recalls)
            taken = recalls.finish()
    except sqlite3.IntegrityError as exc:
        raise InvalidInputError(f"a memory with one of these ids already exists ({exc})") from None
    written.update(namespaces)
    return taken


class _Recalls:
    """An import's recall bodies, checked and inserted as they arrive (a stream's come with its steps),
    each refusal kept until :meth:`finish`, which raises the one an import of all the steps first and then
    all the recalls would raise: a step's refusal is raised as it comes, before; a recall body
    refused by the checks before any clash of an id with a stored recall."""

    def __init__(self, db: sqlite3.Connection, limits: Limits) -> None:
        self.db = db
        self.limits = limits
        self.taken = 0
        self.seen: set[str] = set()
        self.refused: InvalidInputError | None = None
        self.clash: InvalidInputError | None = None

    def take(self, bodies: Sequence[dict[str, Any]]) -> None:
        """Those of ``bodies`` (all that have arrived, in order) not taken yet."""
        new = bodies[self.taken:]
        self.taken = len(bodies)
        if not new or self.refused is not None:
            return
        try:
            checked = _recall.checked_bodies(new, self.limits, self.seen)
        except InvalidInputError as exc:
            self.refused = exc
            return
        if self.clash is None:  # after a clash the rest are only checked: the transaction rolls back
            try:
                self.db.executemany(INSERT_RECALL, recall_rows(checked))
            except sqlite3.IntegrityError as exc:
                self.clash = InvalidInputError(f"a recall with one of these ids already exists ({exc})")

    def finish(self) -> int:
        """How many recalls, once all are taken; raises the refusal to say, if any."""
        error = self.refused or self.clash
        if error is not None:
            raise error
        return self.taken


def step_rows(
    steps: Iterable[tuple[str, str, str, dict[str, Any]]], general: Callable[[int], Record], limits: Limits,
    built: Callable[[int], Any] | None = None, base: int = 0,
) -> tuple[list[MemoryRow], list[dict[str, Any]], list[Fields | None], list[bytes | None]]:
    """The memories columns and metadata of each planned ``(user, agent, workflow, trace_data)`` step,
    checked as ``add_trace`` checks them, and its trace_steps fields
    (:func:`~memkit.adapters._sqlite._trace_writes.step_fields`, the parameters and result encoded once
    for both); ``general(i)`` makes (or refuses, naming the step) the record of a step :func:`trace_row`
    does not take. ``built(base + i)``: step i's row if another process already made it, as trace_row
    gives it or in :func:`~._trace_writes.built_rows`' form (its write time is taken here, so that times
    follow the seqs); last, each step's vector if that process made it."""
    rows: list[MemoryRow] = []
    metas: list[dict[str, Any]] = []
    fields: list[Fields | None] = []
    made: list[bytes | None] = []  # each step's vector if the other process made it
    add_row, add_meta, add_fields, add_made = rows.append, metas.append, fields.append, made.append
    for i, (user, agent, workflow, data) in enumerate(steps):
        row = None if built is None else built(base + i)
        if row is not None and len(row) == 3:  # built_rows' form: the columns and the fields, all it needs
            columns, made_fields, vector = row
            add_made(vector)
            add_row((*columns[:5], now_us()))
            add_meta(_UNREAD)
            add_fields(made_fields)
            continue
        add_made(None)
        if row is not None:
            row = (*row[:5], now_us(), *row[6:])
        else:
            try:
                row = trace_row(agent, workflow, data, user, limits)
            except InvalidInputError:
                row = None  # general(i) says so, naming the step
        if row is None:
            record = general(i)
            more, meta = memory_rows((record,))
            add_row(more[0])
            add_meta(meta[0])
            add_fields(step_fields(record.metadata))
        else:
            add_row(row[:6])
            add_meta(row[6])
            # Built now: while a stream's next steps are being planned by the other process, the
            # write left with the least.
            add_fields(step_fields(row[6], row[7:]))
    return rows, metas, fields, made


def recall_rows(bodies: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The recalls table's rows of recall bodies (see :mod:`memkit._recall._recording`)."""
    return [
        (b["id"], _recall.created_us(b), b["user_id"], b["agent_id"], b["workflow_id"], b["run_id"],
         b["step_index"], b.get("trace_user_id") or b["user_id"], b.get("trace_agent_id") or b["agent_id"],
         _recall.encode(b))
        for b in bodies
    ]
