"""Listing a LangGraph namespace on PostgreSQL: one path is read through its index entries, several
through a bounded walk of the memkit namespace that hands a rarer filter to the metadata index. Each
way gives the same page: newest first, exact filters, nothing of another memkit namespace."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

pytest.importorskip("langgraph.store.base", reason="needs memkit[langgraph]")

from langgraph.store.base import PutOp

from memkit.adapters._postgres._sql import WALK
from memkit.langgraph import MemkitStore
from memkit.testing import PostgresServer

# Older than the walk reaches when one item is asked for: found only through the metadata index.
COUNT = 2 * WALK + 50


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    return str(postgres_server.url(f"pgl_{uuid.uuid4().hex[:10]}"))


@pytest.fixture
def store(url: str) -> Iterator[MemkitStore]:
    """Alice's items 0..COUNT-1 alternating between ("t", "p0") and ("t", "p1"), ``rare`` on the oldest
    and ``third`` on every third, and bob's newer items under the same paths (all rare, all third)."""
    with MemkitStore(url, user_id="alice", agent_id="a") as alice, MemkitStore(url, user_id="bob", agent_id="a") as bob:
        alice.batch([PutOp(("t", f"p{i % 2}"), f"k{i}", {"n": i, "rare": i == 0, "third": i % 3 == 0})
                     for i in range(COUNT)])
        bob.batch([PutOp(("t", f"p{i % 2}"), f"bob{i}", {"n": -1, "rare": True, "third": True}) for i in range(20)])
        yield alice


def _numbers(items: list) -> list[int]:  # type: ignore[type-arg]
    return [item.value["n"] for item in items]


def test_one_path_lists_newest_first_page_by_page(store: MemkitStore) -> None:
    mine = [n for n in reversed(range(COUNT)) if n % 2 == 1]
    assert _numbers(store.search(("t", "p1"), limit=10)) == mine[:10]
    pages = [_numbers(store.search(("t", "p1"), limit=7, offset=o)) for o in range(0, len(mine) + 7, 7)]
    assert [n for page in pages for n in page] == mine
    assert _numbers(store.search(("t", "p1"), filter={"third": True}, limit=5, offset=3)) == [
        n for n in mine if n % 3 == 0][3:8]
    assert store.search(("t", "p2"), limit=10) == []


def test_several_paths_list_newest_first_across_them(store: MemkitStore) -> None:
    every = list(reversed(range(COUNT)))
    assert _numbers(store.search(("t",), limit=10)) == every[:10]
    pages = [_numbers(store.search(("t",), limit=50, offset=o)) for o in range(0, COUNT + 50, 50)]
    assert [n for page in pages for n in page] == every
    thirds = [n for n in every if n % 3 == 0]
    assert _numbers(store.search(("t",), filter={"third": True}, limit=10)) == thirds[:10]
    assert _numbers(store.search(("t",), filter={"third": True}, limit=10, offset=60)) == thirds[60:70]


def test_a_filter_rarer_than_the_walk_is_still_found(store: MemkitStore) -> None:
    # The one rare item is the oldest: past the WALK newest that the walk reads for one item.
    assert _numbers(store.search(("t",), filter={"rare": True}, limit=1)) == [0]
    assert _numbers(store.search(("t",), filter={"rare": True}, limit=10)) == [0]
    assert store.search(("t",), filter={"rare": True}, limit=10, offset=1) == []
    assert _numbers(store.search(("t",), filter={"n": COUNT - 1}, limit=3)) == [COUNT - 1]
    assert store.search(("t",), filter={"n": COUNT}, limit=3) == []


def test_another_memkit_namespace_never_shows(store: MemkitStore, url: str) -> None:
    for prefix in [("t",), ("t", "p0"), ("t", "p1")]:
        for filter_ in [None, {"rare": True}, {"third": True}]:
            found = store.search(prefix, filter=filter_, limit=COUNT + 20)
            assert all(not item.key.startswith("bob") for item in found)
    with MemkitStore(url, user_id="bob", agent_id="a") as bob:
        assert [item.key for item in bob.search(("t",), limit=3)] == ["bob19", "bob18", "bob17"]
        assert [item.key for item in bob.search(("t", "p0"), filter={"rare": True}, limit=2)] == ["bob18", "bob16"]
        with MemkitStore(url, user_id="carol", agent_id="a") as carol:
            assert carol.search(("t",), limit=10) == []


@pytest.mark.parametrize("lo", ["t", "t.p1"])
def test_pages_of_a_path_range_follow_one_another(store: MemkitStore, lo: str) -> None:
    # memkit's own get_page with the range MemkitStore sends: its offset is the statement's own
    memory = store._memory
    expected = [n for n in reversed(range(COUNT)) if lo == "t" or n % 2 == 1]
    for filters, kept in [({}, expected), ({"lg_value.third": True}, [n for n in expected if n % 3 == 0])]:
        where = {"lg_path": {"$gte": lo, "$lt": lo + "/"}, **filters}
        got = [m.metadata["lg_value"]["n"] for offset in range(0, COUNT, 9)
               for m in memory.get_page("alice", "a", offset=offset, limit=9, filters=where)]
        assert got == kept
