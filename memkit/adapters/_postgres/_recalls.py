"""Recalls and marks in the PostgreSQL store: a mixin over the adapter's pool and loop.

A recall is committed before its search returns (on disk too with ``durable_recalls``); marks
are upserted by id. Every read names its namespace, workflow or run as parameters, never in the
statement's text.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Iterable
from typing import Any, TypeVar

from memkit._core._errors import InvalidInputError
from memkit._core._recalls import Mark, Recall
from memkit._core._records import Record, to_us
from memkit._core._validate import Limits, check_id
from memkit._recall import _marks
from memkit._recall import _recording as _recall
from memkit.adapters._postgres._loop import load_psycopg
from memkit.store._ops import AddRecallsOp, ImportStepsOp, MarksOp, PutMarksOp, RecallsOp, RemoveMarksOp

__all__ = ["RecallsAndMarks"]

T = TypeVar("T")

_INSERT_RECALL = (
    "INSERT INTO recalls (id, created_us, user_id, agent_id, workflow_id, run_id, step_index, step_user_id,"
    " step_agent_id, hits, body) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)


class RecallsAndMarks:
    """The recall and mark handlers of :class:`memkit.adapters.PostgresAdapter`."""

    limits: Limits
    durable_recalls: bool
    _pool: Any

    async def _call(self, coro: Coroutine[Any, Any, T], bounded: bool = True) -> T:
        raise NotImplementedError

    async def _fetch(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    async def _vectors(self, records: list[Record]) -> Any:
        raise NotImplementedError

    async def _insert(
        self, records: list[Record], vectors: Any, replace: bool = False,
        recalls: tuple[str, list[tuple[Any, ...]]] | None = None,
    ) -> list[str]:
        raise NotImplementedError

    async def _import_steps(self, op: ImportStepsOp) -> int:
        """An OTel import's steps and recalls in one transaction (a crash between two writes would
        leave steps without their recalls)."""
        records = list(op.records)
        rows = [self._recall_row(body) for body in _recall.checked_bodies(op.recalls, self.limits)]
        # embedding is this process's work: the timeout counts only the writing
        vectors = await self._call(self._vectors(records), bounded=False)
        await self._call(self._insert(records, vectors, recalls=(_INSERT_RECALL, rows)))
        return len(rows)

    @staticmethod
    def _recall_row(body: dict[str, Any]) -> tuple[Any, ...]:
        return (
            body["id"], _recall.created_us(body), body["user_id"], body["agent_id"], body["workflow_id"],
            body["run_id"], body["step_index"], body.get("trace_user_id") or body["user_id"],
            body.get("trace_agent_id") or body["agent_id"], len(body.get("hits") or ()), _recall.encode(body),
        )

    async def _insert_recalls(self, rows: list[tuple[Any, ...]]) -> int:
        psycopg, _ = load_psycopg()
        try:
            async with self._pool.connection() as conn, conn.pipeline(), conn.transaction(), conn.cursor() as cur:
                if not self.durable_recalls:
                    # Committed (every process reads it at once) without waiting for the disk: a
                    # server crash can lose the last moment of recalls, as SQLite's batches can.
                    await cur.execute("SET LOCAL synchronous_commit TO off")
                await cur.executemany(_INSERT_RECALL, rows)
        except psycopg.errors.UniqueViolation as exc:
            detail = exc.diag.message_detail
            raise InvalidInputError(f"a recall with one of these ids already exists ({detail})") from None
        return len(rows)

    def _keep_recall(self, body: dict[str, Any]) -> Awaitable[None]:
        row = self._recall_row(body)

        async def keep() -> None:
            await self._call(self._insert_recalls([row]))

        return keep()

    async def _recalls(self, op: RecallsOp) -> list[Recall]:
        sql = "SELECT body FROM recalls WHERE true"
        params: list[Any] = []
        for column, value in (("user_id", op.user_id), ("agent_id", op.agent_id), ("workflow_id", op.workflow_id),
                              ("run_id", op.run_id), ("id", op.recall_id)):
            if value is not None:
                sql += f" AND {column} = %s"  # column names from the tuple above, values as parameters
                params.append(value)
        rows = await self._call(self._fetch(sql + " ORDER BY seq", params))
        return [_recall.loads(r[0]) for r in rows]

    async def _add_recalls(self, op: AddRecallsOp) -> int:
        return await self._call(self._insert_recalls([self._recall_row(_recall.body_of(r)) for r in op.recalls]))

    async def recall_step_counts(
        self, workflow_id: str | None = None, *, user_id: str | None = None, agent_id: str | None = None
    ) -> list[tuple[Any, ...]]:
        """``(user_id, agent_id, workflow_id, run_id, step_index, recalls, memories returned)`` per step
        that recalled, the namespace being the step's (as on SQLite)."""
        sql = ("SELECT step_user_id, step_agent_id, workflow_id, run_id, step_index, count(*), sum(hits)"
               " FROM recalls WHERE step_index IS NOT NULL")
        params: list[Any] = []
        for column, value, name in (("workflow_id", workflow_id, "workflow_id"), ("step_user_id", user_id, "user_id"),
                                    ("step_agent_id", agent_id, "agent_id")):
            if value is not None:
                check_id(value, name, self.limits)
                sql += f" AND {column} = %s"  # column names from the tuple above, values as parameters
                params.append(value)
        sql += " GROUP BY step_user_id, step_agent_id, workflow_id, run_id, step_index"
        return [tuple(r) for r in await self._call(self._fetch(sql, params))]

    # -- marks ----------------------------------------------------------------------------------

    async def _marks(self, op: MarksOp) -> list[Mark]:
        sql = "SELECT body FROM marks WHERE true"
        params: list[Any] = []
        for column, value in (("user_id", op.user_id), ("agent_id", op.agent_id), ("workflow_id", op.workflow_id),
                              ("run_id", op.run_id)):
            if value is not None:
                sql += f" AND {column} = %s"  # column names from the tuple above, values as parameters
                params.append(value)
        rows = await self._call(self._fetch(sql + " ORDER BY created_us, id", params))
        return [_marks.loads(r[0]) for r in rows]

    async def _upsert_marks(self, batch: tuple[Mark, ...]) -> int:
        async with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            await cur.executemany(
                "INSERT INTO marks (id, created_us, user_id, agent_id, workflow_id, run_id, body)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET created_us = excluded.created_us,"
                " user_id = excluded.user_id, agent_id = excluded.agent_id, workflow_id = excluded.workflow_id,"
                " run_id = excluded.run_id, body = excluded.body",
                [(m.id, to_us(m.created_at), m.user_id, m.agent_id, m.workflow_id, m.run_id, _marks.dumps(m))
                 for m in batch],
            )
        return len(batch)

    async def _put_marks(self, op: PutMarksOp) -> int:
        return await self._call(self._upsert_marks(op.marks))

    async def _remove_marks(self, op: RemoveMarksOp) -> int:
        rows = await self._call(self._fetch(
            "DELETE FROM marks WHERE id = ANY(%s) AND user_id = %s AND agent_id = %s RETURNING id",
            [list(op.mark_ids), op.user_id, op.agent_id],
        ))
        return len(rows)
