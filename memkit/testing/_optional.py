"""The optional capabilities in the conformance suite: each is whole or absent, and works when present.

:class:`OptionalConformance` is the half of :class:`memkit.testing.ProviderConformance` that
checks them: an adapter without a capability has none of its members (on memkit's store base,
the methods of a capability the adapter does not declare are absent too).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from datetime import UTC
from typing import Any, ClassVar

try:
    import pytest
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("memkit.testing needs pytest and pytest-asyncio: pip install 'memkit[dev]'") from exc

from memkit._core import _port as port
from memkit._core._errors import InvalidInputError, MemkitError
from memkit.testing._cases import ids as _ids

__all__ = ["OptionalConformance", "absence_report"]

# Each optional capability, and the :class:`memkit.Memory` method that must refuse it with
# NotImplementedError on an adapter without it (None: no sync method of its own).
OPTIONAL: dict[type, str | None] = {
    port.SupportsGet: "get",
    port.SupportsAddMany: "add_many",
    port.SupportsNamespaces: "namespaces",
    port.SupportsStats: "stats",
    port.SupportsHealth: "health",
    port.SupportsExport: "export",
    port.SupportsPaging: "get_page",
    port.SupportsRecalls: "recalls",
    port.SupportsMarks: "marks",
    port.SupportsAsOf: None,
    port.SupportsTraceColumns: None,
    port.SupportsClose: None,
}

# The capabilities each adapter class was seen without, for the end-of-run report.
_ABSENT: dict[str, set[str]] = {}


def _members(capability: type) -> list[str]:
    """The names a capability protocol requires (what ``isinstance`` checks)."""
    return sorted({name for name in vars(capability) if not name.startswith("_")} | set(capability.__annotations__))


def absence_report() -> list[str]:
    """One line per adapter the suite ran on that lacks optional capabilities, naming them."""
    return [
        f"{adapter} does not offer: {', '.join(sorted(absent))}"
        for adapter, absent in sorted(_ABSENT.items()) if absent
    ]


class OptionalConformance:
    """The optional capabilities' tests (fixtures ``provider``, ``make_provider`` and ``ns`` come
    from :class:`memkit.testing.ProviderConformance`)."""

    persistent: ClassVar[bool] = False
    differences: ClassVar[dict[str, str]] = {}

    @staticmethod
    async def _build(make: Callable[[], Any]) -> Any:
        provider = make()
        if inspect.isawaitable(provider):
            provider = await provider
        return provider

    @staticmethod
    def _lacks(provider: Any, capability: type) -> bool:
        """False when ``provider`` offers ``capability``; else check that it says so cleanly, and note it.

        An adapter without a capability must have none of its members (no half-built
        capability a caller would trip on) and :class:`memkit.Memory` must refuse the
        call with ``NotImplementedError`` naming it. The absence is listed at the end
        of the run (see :func:`absence_report`), never skipped in silence.
        """
        if isinstance(provider, capability):
            return False
        # On memkit's store base the methods of an undeclared capability are absent in the same way.
        present = [m for m in _members(capability) if hasattr(provider, m) and m != "search"]
        assert present == [], f"{type(provider).__name__} has {present} of {capability.__name__} but not all of it"
        method = OPTIONAL.get(capability)
        if method is not None:
            from memkit._sync import Memory

            facade = Memory(provider)
            with pytest.raises(NotImplementedError, match=f"does not support {method}"):
                result = getattr(facade, method)(*(["some-id"] if method == "get" else []))
                if method == "export":
                    next(iter(result))
        _ABSENT.setdefault(type(provider).__name__, set()).add(capability.__name__)
        return True

    @pytest.mark.asyncio
    @pytest.mark.parametrize("capability", list(OPTIONAL), ids=lambda c: c.__name__)
    async def test_optional_capability_is_whole_or_absent(
        self, provider: Any, ns: tuple[str, str], capability: type
    ) -> None:
        from datetime import datetime

        lacking = self._lacks(provider, capability)
        if capability is port.SupportsAsOf:
            memory_id = await provider.add("written after the cut-off", *ns)
            past = datetime(2000, 1, 1, tzinfo=UTC)
            if lacking:
                # A search that cannot honour as_of must refuse it, not answer as of now.
                with pytest.raises((TypeError, MemkitError)):
                    await provider.search("written", *ns, as_of=past)
            else:
                assert provider.searches_as_of is True
                assert await provider.search("written", *ns, as_of=past) == []
                assert _ids(await provider.search("written", *ns, as_of=datetime.now(UTC))) == [memory_id]
        elif lacking:
            return
        elif capability is port.SupportsRecalls:
            assert await provider.recalls(user_id=ns[0], agent_id=ns[1]) == []
            assert await provider.get_recall("no-such-recall") is None
        elif capability is port.SupportsMarks:
            assert await provider.marks(user_id=ns[0], agent_id=ns[1]) == []
            assert await provider.remove_marks(["no-such-mark"], user_id=ns[0], agent_id=ns[1]) == 0
        elif capability is port.SupportsTraceColumns:
            await provider.add_trace(ns[1], "wf-columns", {"tool": "bwa", "status": "success"}, user_id=ns[0])
            columns = await provider.trace_columns(workflow_id="wf-columns", agent_id=ns[1], user_id=ns[0])
            assert len({len(values) for values in columns.values()}) == 1 and list(columns["tool"]) == ["bwa"]

    @pytest.mark.asyncio
    async def test_close_is_idempotent_and_final(self, make_provider: Callable[[], Any], ns: tuple[str, str]) -> None:
        provider = await self._build(make_provider)
        if self._lacks(provider, port.SupportsClose):
            return
        await provider.add("before closing", *ns)
        await provider.aclose()
        await provider.aclose()  # again: nothing to do, no error
        try:
            await provider.add("after closing", *ns)
        except MemkitError as exc:
            assert "closed" in str(exc)
        else:
            # Only a store that holds nothing to release may keep answering.
            assert not self.persistent, f"{type(provider).__name__} accepted a write after aclose()"

    @pytest.mark.asyncio
    async def test_get(self, provider: Any, ns: tuple[str, str]) -> None:
        if self._lacks(provider, port.SupportsGet):
            return
        mem_id = await provider.add("fetch me", *ns, metadata={"a": 1})
        item = await provider.get(mem_id)
        assert item is not None and (item.id, item.content, item.metadata) == (mem_id, "fetch me", {"a": 1})
        assert (item.user_id, item.agent_id) == ns
        assert await provider.get("no-such-id") is None

    @pytest.mark.asyncio
    async def test_add_many_is_all_or_nothing(self, provider: Any, ns: tuple[str, str]) -> None:
        if self._lacks(provider, port.SupportsAddMany):
            return
        user, agent = ns
        rows = [{"content": f"batch {i}", "user_id": user, "agent_id": agent, "metadata": {"i": i}} for i in range(30)]
        ids = await provider.add_many(rows)
        assert len(set(ids)) == 30
        assert _ids(await provider.get_all(user, agent, limit=50)) == ids[::-1]
        bad = [*rows[:3], {"content": "", "user_id": user, "agent_id": agent}]
        with pytest.raises(InvalidInputError):
            await provider.add_many(bad)
        with pytest.raises(InvalidInputError):  # an id that already exists
            await provider.add_many([{"content": "dup", "user_id": user, "agent_id": agent, "id": ids[0]}])
        assert len(await provider.get_all(user, agent, limit=50)) == 30
        assert await provider.add_many([]) == []

    @pytest.mark.asyncio
    async def test_namespaces(self, provider: Any, ns: tuple[str, str]) -> None:
        if self._lacks(provider, port.SupportsNamespaces):
            return
        user, agent = ns
        for _ in range(3):
            await provider.add("a", user, agent)
        await provider.add("b", user, f"{agent}-2")
        found = {(n.user_id, n.agent_id): n for n in await provider.namespaces()}
        assert found[(user, agent)].count == 3
        assert found[(user, f"{agent}-2")].count == 1
        info = found[(user, agent)]
        assert info.first_at is not None and info.last_at is not None and info.first_at <= info.last_at

    @pytest.mark.asyncio
    async def test_stats_and_health(self, provider: Any, ns: tuple[str, str]) -> None:
        if not self._lacks(provider, port.SupportsStats):
            before = await provider.stats()
            await provider.add("counted", *ns)
            await provider.add_trace(ns[1], "wf-stats", {"tool": "x"}, user_id=ns[0])
            after = await provider.stats()
            assert after.memories - before.memories == 2
            assert after.traces - before.traces == 1
        if not self._lacks(provider, port.SupportsHealth):
            health = await provider.health()
            assert health.ok is True and health.latency_ms >= 0 and health.detail

    @pytest.mark.asyncio
    async def test_export_yields_every_record_oldest_first(self, provider: Any, ns: tuple[str, str]) -> None:
        if self._lacks(provider, port.SupportsExport):
            return
        user, agent = ns
        ids = [await provider.add(f"export {i}", user, agent, {"i": i}) for i in range(5)]
        ids.append(await provider.add_trace(agent, "wf-export", {"tool": "t"}, user_id=user))
        exported = [item async for item in provider.export(user_id=user, agent_id=agent)]
        assert _ids(exported) == ids
        assert exported[0].metadata == {"i": 0}

    @pytest.mark.asyncio
    async def test_get_page(self, provider: Any, ns: tuple[str, str]) -> None:
        if self._lacks(provider, port.SupportsPaging):
            return
        ids = [await provider.add(f"page {i}", *ns) for i in range(7)]
        newest = ids[::-1]
        assert _ids(await provider.get_page(*ns, offset=0, limit=3)) == newest[:3]
        assert _ids(await provider.get_page(*ns, offset=3, limit=3)) == newest[3:6]
        assert _ids(await provider.get_page(*ns, offset=6, limit=3)) == newest[6:]
        assert await provider.get_page(*ns, offset=7, limit=3) == []
        # Refused before any store counts past 64 bits (SQLite and Neo4j raised OverflowError).
        for bad in (-1, 2**63, 2**64, True, 1.0):
            with pytest.raises(InvalidInputError):
                await provider.get_page(*ns, offset=bad, limit=3)
        for far in (2**32, 2**63 - 1):  # FalkorDB counts SKIP in 32 bits: 2**32 skipped nothing
            assert await provider.get_page(*ns, offset=far, limit=3) == []

    @pytest.mark.asyncio
    async def test_scoped_searches_are_recorded_as_recalls(self, provider: Any, ns: tuple[str, str]) -> None:
        import memkit

        if self._lacks(provider, port.SupportsRecalls):
            return
        other = (f"{ns[0]}-other", ns[1])
        await provider.add("kinase inhibitor screen", *ns)
        await provider.add("kinase assay buffer", *ns)
        await provider.add("kinase in another namespace", *other)
        await provider.search("kinase", *ns)  # outside a scope, recording off: not kept
        with memkit.recall_scope("conformance", step="look", step_index=2, run_id="r"):
            hits = await provider.search("kinase", *ns, limit=2)
        (recall,) = await provider.recalls(user_id=ns[0], agent_id=ns[1])
        scope = (recall.workflow_id, recall.run_id, recall.step_index, recall.step_name)
        assert scope == ("conformance", "r", 2, "look")
        assert [(h.id, h.rank, h.score, h.content) for h in recall.hits] == [
            (h.id, rank, h.score, h.content) for rank, h in enumerate(hits, start=1)]
        assert [h.details for h in recall.hits] == [h.score_details for h in hits]
        assert await provider.recalls(user_id=other[0], agent_id=other[1]) == []
        assert await provider.get_recall(recall.id, user_id=other[0], agent_id=other[1]) is None
        assert (await provider.get_recall(recall.id)) == recall

    @pytest.mark.asyncio
    async def test_as_of_leaves_out_later_memories(self, provider: Any, ns: tuple[str, str]) -> None:
        from datetime import datetime

        if self._lacks(provider, port.SupportsAsOf):
            return
        early = await provider.add("kinase early", *ns)
        await asyncio.sleep(0.002)
        cut = datetime.now(UTC)
        await asyncio.sleep(0.002)
        await provider.add("kinase late", *ns)
        for mode in provider.search_modes:
            assert _ids(await provider.search("kinase", *ns, mode=mode, as_of=cut)) == [early]
        assert _ids(await provider.search("", *ns, as_of=cut)) == [early]
        with pytest.raises(InvalidInputError):
            await provider.search("kinase", *ns, as_of="yesterday")
