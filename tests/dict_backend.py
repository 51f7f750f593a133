"""A third-party backend as a stranger would write one: a dict, word-overlap ranking, public imports only."""

from __future__ import annotations

import re

from memkit import InvalidInputError, MemoryItem
from memkit.store import DeleteOp, GetOp, ListOp, Record, ResetOp, SearchOp, Store, WriteOp, matches, rank


class DictStore(Store):
    provider_name = "dict"
    supports_as_of = True  # _list and _rank leave out what was written after op.until_us

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, Record] = {}  # insertion order is writing order

    async def _write(self, op: WriteOp) -> list[str]:
        if clash := next((r.id for r in op.records if r.id in self._rows), None):
            raise InvalidInputError(f"a memory with id {clash!r} already exists")
        self._rows.update((r.id, r) for r in op.records)
        return [r.id for r in op.records]

    async def _list(self, op: ListOp) -> list[Record]:
        order = {key: i for i, key in enumerate(self._rows)}
        rows = [r for r in self._rows.values() if (r.user_id, r.agent_id) == (op.user_id, op.agent_id)
                and matches(op.conditions, r.metadata) and (op.until_us is None or r.created_us <= op.until_us)]
        rows.sort(key=lambda r: (r.created_us, order[r.id]), reverse=True)
        return rows[op.offset : op.offset + op.limit]

    async def _rank(self, op: SearchOp) -> list[MemoryItem]:
        terms = set(re.findall(r"\w+", op.query.lower()))
        everything = ListOp(op.user_id, op.agent_id, op.conditions, len(self._rows) + 1, until_us=op.until_us)
        rows = await self._list(everything)
        overlap = [(r, float(len(terms & set(re.findall(r"\w+", r.content.lower()))))) for r in rows]
        scored = sorted(overlap, key=lambda t: -t[1])
        keyword = [(r.id, score) for r, score in scored if score > 0][: op.depth]
        ranked = rank(op, keyword, None, lambda keys: {})
        return [self._rows[key].to_item(score, details) for key, score, details in ranked]

    async def _get(self, op: GetOp) -> Record | None:
        return self._rows.get(op.memory_id)

    async def _delete(self, op: DeleteOp) -> bool:
        row = self._rows.get(op.memory_id)
        if row is None or op.user_id not in (None, row.user_id) or op.agent_id not in (None, row.agent_id):
            return False
        del self._rows[op.memory_id]
        return True

    async def _reset(self, op: ResetOp) -> None:
        self._rows.clear()
