"""The shared adapter test-suite; see :mod:`memkit.testing` for how to use it.

The port's own behaviour is here; the optional capabilities' in :mod:`memkit.testing._optional`,
the data both write in :mod:`memkit.testing._cases`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC
from typing import Any, ClassVar, cast

try:
    import pytest
    import pytest_asyncio
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("memkit.testing needs pytest and pytest-asyncio: pip install 'memkit[dev]'") from exc

from memkit._core import _port as port
from memkit._core._errors import InvalidInputError
from memkit._core._filters import matches, parse_filters
from memkit.store._base import Store
from memkit.testing._cases import BAD_FILTERS, FILTER_CASES, FILTER_ROWS, HOSTILE
from memkit.testing._cases import ids as _ids
from memkit.testing._optional import OptionalConformance, absence_report

__all__ = ["ProviderConformance", "absence_report"]


class ProviderConformance(OptionalConformance):
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
    async def test_nul_in_metadata_is_text(self, provider: Any, ns: tuple[str, str]) -> None:
        """A NUL in metadata (keys, values, entity and trace fields) and in a filter value is text on
        every store: read back as written, exported as written, found by a filter."""
        odd = "a\x00b \uffff0 \uffff1 \uffff"  # U+FFFF: the mark stores that cannot hold NUL spell it with
        meta = {"k": odd, f"key {odd}": [odd, {"n": odd}], "gene": f"TP53 {odd}", "topic": odd}
        mem_id = await provider.add("nul in metadata", *ns, meta)
        await provider.add("nul elsewhere", *ns, {"k": "a"})
        trace = {"step_name": f"s {odd}", "tool": f"t {odd}", "error": odd, "run_id": f"r {odd}",
                 "parameters": {odd: odd}}
        trace_id = await provider.add_trace(ns[1], "wf-nul", trace, user_id=ns[0])
        stored = {item.id: item.metadata for item in await provider.get_all(*ns)}
        assert stored[mem_id] == meta
        assert {k: stored[trace_id]["trace"][k] for k in trace} == trace
        if isinstance(provider, port.SupportsExport):
            exported = {item.id: item.metadata async for item in provider.export(*ns)}
            assert exported == stored

    @pytest.mark.asyncio
    async def test_nul_in_trace_columns_is_text(self, provider: Any, ns: tuple[str, str]) -> None:
        if not isinstance(provider, port.SupportsTraceColumns):
            return
        provider = cast(Any, provider)
        odd = "a\x00b \uffff0 \uffff1 \uffff"
        trace = {"step_name": f"s {odd}", "tool": f"t {odd}", "error": odd, "run_id": f"r {odd}",
                 "parameters": {odd: odd}}
        await provider.add_trace(ns[1], "wf-nul", trace, user_id=ns[0])
        columns = await provider.trace_columns(workflow_id="wf-nul", user_id=ns[0])
        assert [columns[k][0] for k in ("step_name", "tool", "run_id", "error")] == [
            trace["step_name"], trace["tool"], trace["run_id"], odd]
        assert list(columns[f"params.{odd}"]) == [odd]

    @pytest.mark.asyncio
    async def test_nul_in_a_filter_value_is_text(self, provider: Any, ns: tuple[str, str]) -> None:
        odd = "a\x00b \uffff0 \uffff"
        mem_id = await provider.add("nul in metadata", *ns, {"k": odd})
        await provider.add("nul elsewhere", *ns, {"k": "a"})
        assert _ids(await provider.get_all(*ns, filters={"k": odd})) == [mem_id]
        assert _ids(await provider.get_all(*ns, filters={"k": {"$in": [odd, "zz"]}})) == [mem_id]
        assert _ids(await provider.search("nul", *ns, filters={"k": odd})) == [mem_id]
        assert _ids(await provider.get_all(*ns, filters={"k": "a\x00"})) == []

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
        from memkit._retrieval._fusion import MODES, HybridConfig

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
