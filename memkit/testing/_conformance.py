"""The shared adapter test-suite; see :mod:`memkit.testing` for how to use it."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC
from typing import Any, ClassVar, cast

try:
    import pytest
    import pytest_asyncio
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("memkit.testing needs pytest and pytest-asyncio: pip install 'memkit[dev]'") from exc

from memkit import _protocols as port
from memkit._core._store import Store
from memkit._errors import InvalidInputError, MemkitError
from memkit._filters import matches, parse_filters
from memkit._models import MemoryItem

__all__ = ["ProviderConformance", "absence_report"]

# Metadata shaped to exercise every operator, type rule and missing-key rule.
FILTER_ROWS: list[dict[str, Any]] = [
    {"gene": "TP53", "score": 0.9, "n": 3, "ok": True, "tags": ["a", "b"], "run": {"step": 1}},
    {"gene": "BRCA1", "score": 0.4, "n": 10, "ok": False, "run": {"step": 2}},
    {"gene": "EGFR", "score": 0.5, "n": 1, "ok": True, "note": None},
    {"gene": "tp53", "score": 1, "n": "3", "ok": 1},
    {"score": 0.95, "n": 7},
    {},
]

FILTER_CASES: list[dict[str, Any]] = [
    {"gene": "TP53"},
    {"gene": {"$eq": "TP53"}},
    {"gene": {"$ne": "TP53"}},
    {"gene": {"$in": ["TP53", "EGFR", "nope"]}},
    {"gene": {"$nin": ["TP53", "EGFR"]}},
    {"gene": None},
    {"note": None},
    {"n": 3},
    {"n": "3"},
    {"n": {"$gt": 3}},
    {"n": {"$gte": 3}},
    {"n": {"$lt": 3}},
    {"n": {"$lte": 3, "$gt": 0}},
    {"score": {"$gte": 0.5}},
    {"score": 1},
    {"score": 1.0},
    {"ok": True},
    {"ok": 1},
    {"ok": {"$ne": True}},
    {"gene": {"$gt": "C"}},
    {"gene": {"$lt": "a"}},
    {"run.step": 2},
    {"run.step": {"$in": [1, 2]}},
    {"tags": "a"},
    {"gene": "TP53", "ok": True},
    {"gene": {"$in": []}},
    {"missing": {"$ne": 1}},
    {"missing": {"$gt": 0}},
]

BAD_FILTERS: list[Any] = [
    {"gene": {"$regex": "TP"}},
    {"gene": {"$where": "1"}},
    {"gene; DROP TABLE memories": 1},
    {"$.gene": 1},
    {"a..b": 1},
    {"1abc": 1},
    {"gene": {"$in": "TP53"}},
    {"gene": {"$gt": True}},
    {"gene": {"$gt": None}},
    {"gene": {"$eq": ["list"]}},
    {"gene": {}},
    ["gene", "TP53"],
    {"n": 2**64},
    {"n": {"$in": [1, -(2**64)]}},
    {"gene": "TP\ud800"},
]

HOSTILE = [
    "'); DROP TABLE memories; --",
    "\" OR 1=1 --",
    "MATCH (n) DETACH DELETE n",
    "}) DETACH DELETE n //",
    "<img src=x onerror=alert(1)>",
    "back\\slash and 'quotes' and \"doubles\"",
    "NEAR(a b) AND NOT c* ^d",
]


def _ids(items: list[MemoryItem]) -> list[str]:
    return [item.id for item in items]


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

# One call of each optional capability, which a store on the base that does not declare it refuses.
REFUSED: dict[type, Callable[[Any], Awaitable[object]]] = {
    port.SupportsGet: lambda p: p.get("some-id"),
    port.SupportsAddMany: lambda p: p.add_many([]),
    port.SupportsNamespaces: lambda p: p.namespaces(),
    port.SupportsStats: lambda p: p.stats(),
    port.SupportsHealth: lambda p: p.health(),
    port.SupportsExport: lambda p: anext(p.export()),
    port.SupportsPaging: lambda p: p.get_page("u", "a"),
    port.SupportsRecalls: lambda p: p.recalls(),
    port.SupportsMarks: lambda p: p.marks(),
    port.SupportsTraceColumns: lambda p: p.trace_columns(),
    port.SupportsClose: lambda p: p.aclose(),
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


class ProviderConformance:
    """Behaviour every :class:`~memkit.MemoryProvider` must show.

    Class attributes a subclass may set:

    ``persistent``
        The storage outlives the provider object (checked by reopening).
    ``differences``
        ``{"test_name": "why this adapter differs"}``; those tests must fail.
    """

    persistent: ClassVar[bool] = False
    differences: ClassVar[dict[str, str]] = {}

    # -- fixtures ------------------------------------------------------------------

    @pytest.fixture
    def make_provider(self) -> Callable[[], Any]:
        raise NotImplementedError("subclasses provide a make_provider fixture")

    @pytest.fixture(autouse=True)
    def _declared_differences(self, request: pytest.FixtureRequest) -> None:
        name = getattr(request.node, "originalname", request.node.name)
        reason = self.differences.get(name)
        if reason:
            request.node.add_marker(pytest.mark.xfail(reason=reason, strict=True))

    @staticmethod
    async def _build(make: Callable[[], Any]) -> Any:
        provider = make()
        if inspect.isawaitable(provider):
            provider = await provider
        return provider

    @staticmethod
    async def _close(provider: Any) -> None:
        if isinstance(provider, port.SupportsClose):
            await provider.aclose()

    @pytest_asyncio.fixture
    async def provider(self, make_provider: Callable[[], Any]) -> AsyncIterator[Any]:
        provider = await self._build(make_provider)
        try:
            yield provider
        finally:
            await self._close(provider)

    @pytest.fixture
    def ns(self) -> tuple[str, str]:
        """A namespace no other test uses, so shared servers need no cleanup between tests."""
        tag = uuid.uuid4().hex[:10]
        return f"user-{tag}", f"agent-{tag}"

    # -- the port's contract ---------------------------------------------------------

    @pytest.mark.asyncio
    async def test_add_and_search_namespaced(self, provider: Any, ns: tuple[str, str]) -> None:
        user, _ = ns
        await provider.add("bio p53", user_id=user, agent_id="bio")
        await provider.add("prime task", user_id=user, agent_id="prime")
        hits = await provider.search("p53", user_id=user, agent_id="bio")
        assert [h.content for h in hits] == ["bio p53"]

    @pytest.mark.asyncio
    async def test_metadata_filtering(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        await provider.add("chat msg", user_id=user, agent_id=agent, metadata={"type": "chat"})
        await provider.add_trace(agent, "wf1", {"tool": "blast"}, user_id=user)
        traces = await provider.search("", user_id=user, agent_id=agent, filters={"type": "trace"})
        assert len(traces) == 1
        assert traces[0].metadata["type"] == "trace"

    @pytest.mark.asyncio
    async def test_add_trace_structure(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        mem_id = await provider.add_trace(
            agent_id=agent, workflow_id="wf1", trace_data={"tool": "blast", "result": {"hits": 3}}, user_id=user
        )
        hits = await provider.search("blast", user_id=user, agent_id=agent)
        assert len(hits) == 1
        assert hits[0].id == mem_id
        assert hits[0].metadata["type"] == "trace"
        assert hits[0].metadata["workflow_id"] == "wf1"
        assert hits[0].agent_id == agent and hits[0].user_id == user

    @pytest.mark.asyncio
    async def test_add_trace_defaults_to_system_user(self, provider: Any, ns: tuple[str, str]) -> None:
        _, agent = ns
        mem_id = await provider.add_trace(agent, "wf-default", {"tool": "bwa"})
        try:
            found = await provider.get_all(user_id="system", agent_id=agent, limit=10)
            assert _ids(found) == [mem_id]
        finally:
            await provider.delete(mem_id)

    @pytest.mark.asyncio
    async def test_delete_and_reset(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        mem_id = await provider.add("test", user_id=user, agent_id=agent)
        assert await provider.delete(mem_id) is True
        assert await provider.delete(mem_id) is False
        await provider.add("test2", user_id=user, agent_id=agent)
        assert await provider.reset() is True
        assert await provider.get_all(user_id=user, agent_id=agent) == []

    def test_protocol_type_check(self, provider: Any) -> None:
        assert isinstance(provider, port.MemoryProvider)

    # -- ids, ordering, limits ----------------------------------------------------------

    @pytest.mark.asyncio
    async def test_add_returns_distinct_string_ids(self, provider: Any, ns: tuple[str, str]) -> None:
        ids = [await provider.add(f"note {i}", *ns) for i in range(5)]
        assert all(isinstance(i, str) and i for i in ids)
        assert len(set(ids)) == 5

    @pytest.mark.asyncio
    async def test_get_all_is_newest_first(self, provider: Any, ns: tuple[str, str]) -> None:
        ids = [await provider.add(f"note number {i}", *ns) for i in range(6)]
        assert _ids(await provider.get_all(*ns, limit=10)) == ids[::-1]

    @pytest.mark.asyncio
    async def test_get_all_respects_limit(self, provider: Any, ns: tuple[str, str]) -> None:
        ids = [await provider.add(f"note {i}", *ns) for i in range(25)]
        assert _ids(await provider.get_all(*ns)) == ids[::-1][:10]  # the seed's default limit
        assert _ids(await provider.get_all(*ns, limit=3)) == ids[::-1][:3]
        assert len(await provider.get_all(*ns, limit=25)) == 25
        assert len(await provider.get_all(*ns, limit=100)) == 25

    @pytest.mark.asyncio
    async def test_empty_query_lists_namespace_newest_first(self, provider: Any, ns: tuple[str, str]) -> None:
        ids = [await provider.add(f"entry {i}", *ns) for i in range(4)]
        for query in ("", None, "   "):
            assert _ids(await provider.search(query, *ns, limit=10)) == ids[::-1]

    @pytest.mark.asyncio
    async def test_search_ranks_the_relevant_memory_first(self, provider: Any, ns: tuple[str, str]) -> None:
        await provider.add("The planner scheduled a meeting about the budget", *ns)
        target = await provider.add("BLAST found 12 homologs of the TP53 tumour suppressor gene", *ns)
        await provider.add("The executor restarted the container after a timeout", *ns)
        await provider.add("Lunch options near the lab include noodles", *ns)
        hits = await provider.search("TP53 homologs", *ns, limit=3)
        assert hits and hits[0].id == target
        scores = [h.score for h in hits]
        assert all(isinstance(s, float) for s in scores)
        assert scores == sorted(scores, reverse=True)

    @pytest.mark.asyncio
    async def test_search_ties_are_newest_first(self, provider: Any, ns: tuple[str, str]) -> None:
        ids = [await provider.add("identical sequencing note", *ns) for _ in range(3)]
        hits = await provider.search("sequencing", *ns, limit=3)
        assert _ids(hits) == ids[::-1]

    @pytest.mark.asyncio
    async def test_search_respects_limit(self, provider: Any, ns: tuple[str, str]) -> None:
        for i in range(12):
            await provider.add(f"variant call {i} on chromosome {i % 3}", *ns)
        assert len(await provider.search("variant call", *ns)) == 5  # the seed's default limit
        assert len(await provider.search("variant call", *ns, limit=2)) == 2

    # -- namespaces never leak ----------------------------------------------------------------

    @pytest.mark.asyncio
    async def test_namespaces_are_isolated(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        other_user, other_agent = f"{user}-x", f"{agent}-x"
        mine = await provider.add("shared words about kinase", user, agent, {"k": 1})
        for u, a in ((user, other_agent), (other_user, agent), (other_user, other_agent)):
            await provider.add("shared words about kinase", u, a, {"k": 1})
        assert _ids(await provider.get_all(user, agent, limit=50)) == [mine]
        assert _ids(await provider.search("kinase", user, agent, limit=50)) == [mine]
        assert _ids(await provider.search("", user, agent, limit=50, filters={"k": 1})) == [mine]
        # ids that only differ by a separator must not collide
        await provider.add("colon trap", f"{user}:a", "b")
        assert await provider.get_all(user, "a:b", limit=50) == []

    @pytest.mark.asyncio
    async def test_unknown_namespace_is_empty(self, provider: Any, ns: tuple[str, str]) -> None:
        assert await provider.get_all(*ns) == []
        assert await provider.search("anything", *ns) == []

    @pytest.mark.asyncio
    async def test_scoped_delete_cannot_cross_namespaces(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        mem_id = await provider.add("keep me", user, agent)
        assert await provider.delete(mem_id, user_id=f"{user}-other", agent_id=agent) is False
        assert await provider.delete(mem_id, user_id=user, agent_id=f"{agent}-other") is False
        assert _ids(await provider.get_all(user, agent)) == [mem_id]
        assert await provider.delete(mem_id, user_id=user, agent_id=agent) is True

    # -- metadata and filters ----------------------------------------------------------------------

    @pytest.mark.asyncio
    async def test_metadata_round_trips(self, provider: Any, ns: tuple[str, str]) -> None:
        meta = {"gene": "TP53", "n": 3, "x": 0.1, "ok": False, "none": None,
                "nested": {"list": [1, "two", {"three": 3.5}]}, "ünï": "çødé"}
        mem_id = await provider.add("metadata carrier", *ns, metadata=meta)
        [item] = await provider.get_all(*ns)
        assert item.id == mem_id
        assert item.metadata == meta
        assert item.created_at is not None and item.created_at.tzinfo is not None
        assert item.created_at.utcoffset() == UTC.utcoffset(None)

    @pytest.mark.asyncio
    async def test_filters_match_the_reference_semantics(self, provider: Any, ns: tuple[str, str]) -> None:
        ids = [await provider.add(f"filter row {i}", *ns, metadata=m) for i, m in enumerate(FILTER_ROWS)]
        for case in FILTER_CASES:
            expected = {i for i, m in zip(ids, FILTER_ROWS, strict=True) if matches(parse_filters(case), m)}
            got = set(_ids(await provider.get_all(*ns, limit=50, filters=case)))
            assert got == expected, f"filter {case!r}"
            got_search = set(_ids(await provider.search("", *ns, limit=50, filters=case)))
            assert got_search == expected, f"filter {case!r} in search"
        # spot checks that pin the reference itself
        by_case = {repr(c): {i for i, m in zip(ids, FILTER_ROWS, strict=True) if matches(parse_filters(c), m)}
                   for c in FILTER_CASES}
        assert by_case[repr({"n": 3})] == {ids[0]}
        assert by_case[repr({"ok": True})] == {ids[0], ids[2]}
        assert by_case[repr({"gene": None})] == {ids[4], ids[5]}
        assert by_case[repr({"score": 1})] == {ids[3]}
        assert by_case[repr({"missing": {"$ne": 1}})] == set(ids)

    @pytest.mark.asyncio
    async def test_filters_apply_to_ranked_search(self, provider: Any, ns: tuple[str, str]) -> None:
        keep = await provider.add("kinase inhibitor screen", *ns, metadata={"topic": "drugs"})
        await provider.add("kinase inhibitor screen", *ns, metadata={"topic": "other"})
        hits = await provider.search("kinase inhibitor", *ns, filters={"topic": "drugs"})
        assert _ids(hits) == [keep]

    @pytest.mark.asyncio
    @pytest.mark.parametrize("bad", BAD_FILTERS, ids=repr)
    async def test_bad_filters_are_rejected(self, provider: Any, ns: tuple[str, str], bad: Any) -> None:
        await provider.add("something", *ns, metadata={"gene": "TP53"})
        with pytest.raises(InvalidInputError):
            await provider.get_all(*ns, filters=bad)
        with pytest.raises(InvalidInputError):
            await provider.search("something", *ns, filters=bad)

    # -- content -------------------------------------------------------------------------------------------

    @pytest.mark.asyncio
    async def test_unicode_round_trips_and_is_searchable(self, provider: Any, ns: tuple[str, str]) -> None:
        texts = ["Straße führt zur Universität", "日本語のメモ", "emoji 🧬 DNA helix", "naïve café résumé"]
        ids = [await provider.add(t, *ns) for t in texts]
        stored = {i.id: i.content for i in await provider.get_all(*ns)}
        assert stored == dict(zip(ids, texts, strict=True))
        hits = await provider.search("Universität", *ns, limit=1)
        assert _ids(hits) == [ids[0]]

    @pytest.mark.asyncio
    async def test_large_content_round_trips(self, provider: Any, ns: tuple[str, str]) -> None:
        limit = provider.limits.max_content_chars if isinstance(provider, Store) else 100_000
        big = ("genome " * (limit // 7 + 1))[:limit]
        mem_id = await provider.add(big, *ns)
        [item] = await provider.get_all(*ns)
        assert item.id == mem_id and item.content == big
        with pytest.raises(InvalidInputError):
            await provider.add(big + "x", *ns)
        assert len(await provider.get_all(*ns)) == 1

    @pytest.mark.asyncio
    async def test_hostile_strings_are_inert_data(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        for text in HOSTILE:
            hostile_user = f"{user}{text}"[:200]
            mem_id = await provider.add(text, hostile_user, agent, {"k'ey\"": text, "v": text})
            [item] = await provider.get_all(hostile_user, agent)
            assert (item.id, item.content, item.metadata["v"], item.user_id) == (mem_id, text, text, hostile_user)
            assert await provider.search(text, hostile_user, agent) != [] or not any(c.isalnum() for c in text)
            hits = await provider.search("", hostile_user, agent, filters={"v": text})
            assert _ids(hits) == [mem_id]
        # nothing else was touched
        assert await provider.get_all(user, agent) == []

    # -- concurrency and persistence ---------------------------------------------------------------------

    @pytest.mark.asyncio
    async def test_concurrent_adds_get_distinct_ids(self, provider: Any, ns: tuple[str, str]) -> None:
        ids = await asyncio.gather(*(provider.add(f"parallel note {i}", *ns) for i in range(40)))
        assert len(set(ids)) == 40
        assert len(await provider.get_all(*ns, limit=100)) == 40

    @pytest.mark.asyncio
    async def test_persists_across_reopen(self, make_provider: Callable[[], Any], ns: tuple[str, str]) -> None:
        if not self.persistent:
            # Declared: memories live as long as the object. Then a new one starts empty.
            first = await self._build(make_provider)
            await first.add("gone with the object", *ns)
            await self._close(first)
            second = await self._build(make_provider)
            try:
                assert await second.get_all(*ns) == []
            finally:
                await self._close(second)
            return
        first = await self._build(make_provider)
        try:
            mem_id = await first.add("survives a restart", *ns, metadata={"gene": "TP53"})
            trace_id = await first.add_trace(ns[1], "wf-persist", {"tool": "blast"}, user_id=ns[0])
        finally:
            await self._close(first)
        second = await self._build(make_provider)
        try:
            items = await second.get_all(*ns)
            assert _ids(items) == [trace_id, mem_id]
            assert items[1].metadata == {"gene": "TP53"}
            assert _ids(await second.search("restart", *ns)) == [mem_id]
        finally:
            await self._close(second)

    # -- bad input stores nothing -------------------------------------------------------------------------

    BAD_ADDS: ClassVar[list[tuple[str, dict[str, Any]]]] = [
        ("empty user_id", {"user_id": ""}),
        ("blank agent_id", {"agent_id": "   "}),
        ("int user_id", {"user_id": 7}),
        ("None agent_id", {"agent_id": None}),
        ("bytes content", {"content": b"bytes"}),
        ("int content", {"content": 42}),
        ("empty content", {"content": ""}),
        ("whitespace content", {"content": " \n\t"}),
        ("NUL in content", {"content": "a\x00b"}),
        ("metadata not a dict", {"metadata": ["a"]}),
        ("set in metadata", {"metadata": {"s": {1, 2}}}),
        ("object in metadata", {"metadata": {"o": object()}}),
        ("NaN in metadata", {"metadata": {"x": float("nan")}}),
        ("non-string metadata key", {"metadata": {1: "x"}}),
        ("huge int in metadata", {"metadata": {"x": 2**70}}),
        ("control char in user_id", {"user_id": "a\nb"}),
        ("lone surrogate in content", {"content": "x\ud800"}),
        ("lone surrogate in user_id", {"user_id": "alice\udfff"}),
        ("lone surrogate in a metadata value", {"metadata": {"note": "x\ud800"}}),
        ("lone surrogate in a metadata key", {"metadata": {"k\ud800": 1}}),
        ("lone surrogate deep in metadata", {"metadata": {"a": [{"b": "\ud800"}]}}),
    ]

    @pytest.mark.asyncio
    @pytest.mark.parametrize("case", BAD_ADDS, ids=lambda c: c[0])
    async def test_bad_add_raises_and_stores_nothing(
        self, provider: Any, ns: tuple[str, str], case: tuple[str, dict[str, Any]]
    ) -> None:
        user, agent = ns
        keep = await provider.add("already here", user, agent)
        args: dict[str, Any] = {"content": "fine", "user_id": user, "agent_id": agent, "metadata": None}
        args.update(case[1])
        with pytest.raises(InvalidInputError):
            await provider.add(**args)
        assert _ids(await provider.get_all(user, agent, limit=50)) == [keep]

    @pytest.mark.asyncio
    async def test_bad_trace_raises_and_stores_nothing(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        for bad in ({"agent_id": ""}, {"workflow_id": ""}, {"trace_data": "not a dict"},
                    {"trace_data": {"result": object()}}):
            args: dict[str, Any] = {"agent_id": agent, "workflow_id": "wf", "trace_data": {}, "user_id": user}
            args.update(bad)
            with pytest.raises(InvalidInputError):
                await provider.add_trace(**args)
        assert await provider.get_all(user, agent) == []

    @pytest.mark.asyncio
    @pytest.mark.parametrize("limit", [-1, 0, True, "5", 1.5, 10**9])
    async def test_bad_limits_are_rejected(self, provider: Any, ns: tuple[str, str], limit: Any) -> None:
        await provider.add("x marks the spot", *ns)
        with pytest.raises(InvalidInputError):
            await provider.get_all(*ns, limit=limit)
        with pytest.raises(InvalidInputError):
            await provider.search("spot", *ns, limit=limit)

    @pytest.mark.asyncio
    async def test_bad_query_and_ids_are_rejected(self, provider: Any, ns: tuple[str, str]) -> None:
        with pytest.raises(InvalidInputError):
            await provider.search(123, *ns)
        with pytest.raises(InvalidInputError):
            await provider.search("q", "", ns[1])
        with pytest.raises(InvalidInputError):
            await provider.delete(None)
        assert await provider.delete("no-such-id") is False

    @pytest.mark.asyncio
    async def test_bad_delete_scopes_are_rejected(self, provider: Any, ns: tuple[str, str]) -> None:
        user, agent = ns
        mem_id = await provider.add("keep me", user, agent)
        for scope in ({"user_id": [user]}, {"agent_id": 7}, {"user_id": ""}, {"agent_id": "a\ud800"}):
            with pytest.raises(InvalidInputError):
                await provider.delete(mem_id, **scope)
        with pytest.raises(InvalidInputError):
            await provider.delete("id\ud800")
        assert _ids(await provider.get_all(user, agent)) == [mem_id]

    @pytest.mark.asyncio
    async def test_lone_surrogates_in_a_search_are_rejected(self, provider: Any, ns: tuple[str, str]) -> None:
        await provider.add("plain text", *ns)
        with pytest.raises(InvalidInputError):
            await provider.search("plain\ud800", *ns)
        with pytest.raises(InvalidInputError):
            await provider.search("plain", ns[0], "agent\ud800")

    @pytest.mark.asyncio
    async def test_read_only_mapping_metadata_is_stored(self, provider: Any, ns: tuple[str, str]) -> None:
        from types import MappingProxyType

        mem_id = await provider.add("proxy", *ns, metadata=MappingProxyType({"gene": "TP53", "run": {"step": 1}}))
        [item] = await provider.get_all(*ns)
        assert item.id == mem_id and item.metadata == {"gene": "TP53", "run": {"step": 1}}

    @pytest.mark.asyncio
    async def test_search_modes_are_declared_and_kept(self, provider: Any, ns: tuple[str, str]) -> None:
        from memkit._retrieval import MODES, HybridConfig

        assert isinstance(provider, port.SupportsSearchModes)
        declared = provider.search_modes
        provider = cast(Any, provider)
        assert declared and set(declared) <= set(MODES)
        await provider.add("kinase inhibitor screen", *ns)
        for mode in declared:
            hits = await provider.search("kinase inhibitor", *ns, mode=mode)
            assert [h.score_details["mode"] for h in hits] == [mode] * len(hits)
        undeclared: list[object] = [m for m in MODES if m not in declared]
        for bad in [*undeclared, "fuzzy", 3]:
            with pytest.raises(InvalidInputError):
                await provider.search("kinase", *ns, mode=bad)
        if "hybrid" in declared:
            [hit] = await provider.search("kinase", *ns, mode="hybrid", hybrid=HybridConfig(candidates=10))
            assert hit.score_details["found_by"]
            with pytest.raises(InvalidInputError):
                await provider.search("kinase", *ns, mode="hybrid", hybrid={"alpha": 0.5})

    # -- optional capabilities ------------------------------------------------------------------------------

    @staticmethod
    async def _lacks(provider: Any, capability: type) -> bool:
        """False when ``provider`` offers ``capability``; else check that it says so cleanly, and note it.

        An adapter without a capability must have none of its members (no half-built
        capability a caller would trip on) and :class:`memkit.Memory` must refuse the
        call with ``NotImplementedError`` naming it. The absence is listed at the end
        of the run (see :func:`absence_report`), never skipped in silence.
        """
        if isinstance(provider, capability):
            return False
        if isinstance(provider, port.Declares):
            # A store on memkit's base has every method; one it does not declare refuses the call.
            call = REFUSED.get(capability)
            if call is not None:
                with pytest.raises(NotImplementedError, match="does not support"):
                    await call(provider)
        else:
            present = [m for m in _members(capability) if m in dir(provider) and m != "search"]
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

        lacking = await self._lacks(provider, capability)
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
        if await self._lacks(provider, port.SupportsClose):
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
        if await self._lacks(provider, port.SupportsGet):
            return
        mem_id = await provider.add("fetch me", *ns, metadata={"a": 1})
        item = await provider.get(mem_id)
        assert item is not None and (item.id, item.content, item.metadata) == (mem_id, "fetch me", {"a": 1})
        assert (item.user_id, item.agent_id) == ns
        assert await provider.get("no-such-id") is None

    @pytest.mark.asyncio
    async def test_add_many_is_all_or_nothing(self, provider: Any, ns: tuple[str, str]) -> None:
        if await self._lacks(provider, port.SupportsAddMany):
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
        if await self._lacks(provider, port.SupportsNamespaces):
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
        if not await self._lacks(provider, port.SupportsStats):
            before = await provider.stats()
            await provider.add("counted", *ns)
            await provider.add_trace(ns[1], "wf-stats", {"tool": "x"}, user_id=ns[0])
            after = await provider.stats()
            assert after.memories - before.memories == 2
            assert after.traces - before.traces == 1
        if not await self._lacks(provider, port.SupportsHealth):
            health = await provider.health()
            assert health.ok is True and health.latency_ms >= 0 and health.detail

    @pytest.mark.asyncio
    async def test_export_yields_every_record_oldest_first(self, provider: Any, ns: tuple[str, str]) -> None:
        if await self._lacks(provider, port.SupportsExport):
            return
        user, agent = ns
        ids = [await provider.add(f"export {i}", user, agent, {"i": i}) for i in range(5)]
        ids.append(await provider.add_trace(agent, "wf-export", {"tool": "t"}, user_id=user))
        exported = [item async for item in provider.export(user_id=user, agent_id=agent)]
        assert _ids(exported) == ids
        assert exported[0].metadata == {"i": 0}

    @pytest.mark.asyncio
    async def test_get_page(self, provider: Any, ns: tuple[str, str]) -> None:
        if await self._lacks(provider, port.SupportsPaging):
            return
        ids = [await provider.add(f"page {i}", *ns) for i in range(7)]
        newest = ids[::-1]
        assert _ids(await provider.get_page(*ns, offset=0, limit=3)) == newest[:3]
        assert _ids(await provider.get_page(*ns, offset=3, limit=3)) == newest[3:6]
        assert _ids(await provider.get_page(*ns, offset=6, limit=3)) == newest[6:]
        assert await provider.get_page(*ns, offset=7, limit=3) == []
        with pytest.raises(InvalidInputError):
            await provider.get_page(*ns, offset=-1, limit=3)

    @pytest.mark.asyncio
    async def test_scoped_searches_are_recorded_as_recalls(self, provider: Any, ns: tuple[str, str]) -> None:
        import memkit

        if await self._lacks(provider, port.SupportsRecalls):
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

        if await self._lacks(provider, port.SupportsAsOf):
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
