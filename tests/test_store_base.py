"""The store base: a backend written as its own file only (the operations it executes), run
through the same conformance suite as memkit's adapters; and what a declaration promises."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from memkit import InvalidInputError, SupportsGet, SupportsMarks, SupportsStats, SupportsTraceColumns
from memkit._core._models import MemoryItem
from memkit._core._ops import DeleteOp, GetOp, ListOp, MarksOp, PingOp, ResetOp, SearchOp, WriteOp
from memkit._core._port import Capability
from memkit._core._records import Record, new_record
from memkit._core._store import Store
from memkit._retrieval._filters import matches
from memkit._retrieval._keyword import analyze_query
from memkit._retrieval._pipeline import rank
from memkit.adapters import InMemoryAdapter, SQLiteAdapter
from memkit.testing import ProviderConformance


class DictStore(Store):
    """The example adapter of docs: a dict, word-overlap ranking, nothing else of its own."""

    provider_name = "dict"
    capabilities = frozenset({Capability.ADD_MANY, Capability.GET, Capability.PAGING, Capability.AS_OF})

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[str, Record] = {}  # insertion order is writing order

    async def _write(self, op: WriteOp) -> list[str]:
        clash = next((r.id for r in op.records if r.id in self._rows), None)
        if clash is not None:
            raise InvalidInputError(f"a memory with id {clash!r} already exists")
        self._rows.update((r.id, r) for r in op.records)
        return [r.id for r in op.records]

    async def _list(self, op: ListOp) -> list[Record]:
        rows = [r for r in self._rows.values() if (r.user_id, r.agent_id) == (op.user_id, op.agent_id)
                and matches(op.conditions, r.metadata) and (op.until_us is None or r.created_us <= op.until_us)]
        order = {r.id: i for i, r in enumerate(self._rows.values())}
        rows.sort(key=lambda r: (r.created_us, order[r.id]), reverse=True)
        return rows[op.offset : op.offset + op.limit]

    async def _rank(self, op: SearchOp) -> list[MemoryItem]:
        terms = set(analyze_query(op.query))
        rows = await self._list(ListOp(op.user_id, op.agent_id, op.conditions, len(self._rows) + 1,
                                       until_us=op.until_us))  # newest first: a stable sort keeps ties so
        scored = sorted(((r, float(len(terms & set(analyze_query(r.content))))) for r in rows), key=lambda t: -t[1])
        found = {r.id: r for r, score in scored if score > 0}
        keyword = [(r.id, score) for r, score in scored if score > 0][: op.depth]
        return [found[k].to_item(score, details) for k, score, details in rank(op, keyword, None, lambda keys: {})]

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


class TestDictStore(ProviderConformance):
    """A backend written against the base alone passes the whole suite."""

    @pytest.fixture
    def make_provider(self) -> Callable[[], DictStore]:
        return DictStore


def test_isinstance_answers_from_the_declaration() -> None:
    store = DictStore()
    assert isinstance(store, SupportsGet)
    # The base has a stats() method, but the store does not declare STATS: it does not support it.
    assert not isinstance(store, SupportsStats) and not isinstance(store, SupportsMarks)
    assert not isinstance(InMemoryAdapter(), SupportsTraceColumns)
    sqlite = SQLiteAdapter(":memory:", embedder=None)
    try:
        assert isinstance(sqlite, SupportsTraceColumns) and isinstance(sqlite, SupportsMarks)
    finally:
        sqlite.close()


def test_an_undeclared_capability_is_absent() -> None:
    store = DictStore()
    # The base writes stats() and marks(); a store that does not declare them does not have them.
    assert not hasattr(store, "stats") and not hasattr(store, "put_marks") and hasattr(store, "get")
    with pytest.raises(AttributeError, match=r"DictStore does not support stats\(\)"):
        store.stats()  # type: ignore[unused-coroutine]


class _Forwarding:
    """A wrapper that forwards every attribute, as a third-party proxy may."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_a_forwarding_wrapper_offers_what_the_store_declares() -> None:
    assert isinstance(_Forwarding(InMemoryAdapter()), SupportsMarks)
    assert not isinstance(_Forwarding(InMemoryAdapter()), SupportsTraceColumns)
    assert not isinstance(_Forwarding(DictStore()), SupportsStats)


def test_a_declaration_without_its_methods_fails_at_class_definition() -> None:
    with pytest.raises(TypeError, match="declares MARKS but does not define _marks, _put_marks, _remove_marks"):
        type("Half", (DictStore,), {"capabilities": frozenset({Capability.MARKS})})


class FailingPing(DictStore):
    capabilities = DictStore.capabilities | {Capability.HEALTH}

    async def _ping(self, op: PingOp) -> str:
        raise ConnectionError("the server went away")


@pytest.mark.asyncio
async def test_health_is_timed_and_a_failure_reported_not_raised() -> None:
    health = await FailingPing().health()
    assert (health.ok, health.provider, health.detail) == (False, "dict", "the server went away")
    assert health.latency_ms >= 0
    with pytest.raises(AttributeError, match="does not support health"):  # undeclared: absent, not reported
        await DictStore().health()


@pytest.mark.asyncio
async def test_execute_runs_an_operation_value() -> None:
    store = DictStore()
    [memory_id] = await store.execute(WriteOp((new_record("kinase screen", "u", "a", None, store.limits),)))
    assert [r.id for r in await store.execute(ListOp("u", "a", (), limit=10))] == [memory_id]
    with pytest.raises(NotImplementedError, match="does not support marks"):
        await store.execute(MarksOp(user_id="u"))
