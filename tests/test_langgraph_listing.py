"""MemkitStore's listing through the stores' index of LangGraph namespace paths: exact beside
namespaces that share its text, labels that would make a path ambiguous refused, gets read in the
calling thread, and the search mode switch (semantic-only ranks as LangGraph's own stores do)."""

from __future__ import annotations

import sqlite3
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base", reason="needs memkit[langgraph]")

from langgraph.store.base import PutOp

import memkit
from memkit.langgraph import MemkitStore


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/lg.db?embedder=none"
    return str(request.getfixturevalue("postgres_server").url(f"lgl_{uuid.uuid4().hex[:10]}"))


@pytest.fixture
def store(url: str) -> Iterator[MemkitStore]:
    with MemkitStore(url, user_id="alice", agent_id="a") as opened:
        yield opened


SPACES = [("a", "b"), ("a", "b-c"), ("a", "b", "d"), ("a", "bb"), ("ab",), ("a", "b!")]


def test_listing_a_namespace_keeps_out_those_that_share_its_text(store: MemkitStore) -> None:
    for i in range(3):
        store.batch([PutOp(ns, f"k{i}", {"i": i, "ns": list(ns)}) for ns in SPACES])
    under = store.search(("a", "b"), limit=20)
    assert {tuple(item.namespace) for item in under} == {("a", "b"), ("a", "b", "d")}
    assert [item.value["i"] for item in under if item.namespace == ("a", "b")] == [2, 1, 0]  # newest first
    assert [item.key for item in store.search(("a", "b", "d"), limit=2)] == ["k2", "k1"]
    assert [item.key for item in store.search(("a", "b", "d"), limit=2, offset=2)] == ["k0"]
    assert store.search(("a", "c"), limit=5) == []
    assert store.list_namespaces() == sorted(SPACES)
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b"), ("a", "b", "d")]
    assert store.list_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "b!"), ("a", "b-c"), ("a", "bb")]
    # Another memkit namespace on the same store lists nothing of alice's, and alice nothing of its.
    other = MemkitStore(store._memory, user_id="bob", agent_id="a")
    other.put(("a", "b"), "bob's", {"i": 9})
    assert other.list_namespaces() == [("a", "b")]
    assert [item.key for item in other.search(("a", "b"), limit=10)] == ["bob's"]
    assert store.list_namespaces() == sorted(SPACES)
    for i in range(3):
        store.delete(("a", "b", "d"), f"k{i}")
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b")]


@pytest.mark.parametrize("label", ["a.b", "", "nul\x00"])
def test_a_label_that_would_make_its_path_ambiguous_is_refused_and_changes_nothing(
    store: MemkitStore, label: str
) -> None:
    with pytest.raises(memkit.InvalidInputError, match="label"):
        store.batch([PutOp(("ok",), "k", {"v": 1}), PutOp(("x", label), "k", {"v": 2})])
    assert store.get(("ok",), "k") is None
    assert store.list_namespaces() == []


def test_gets_from_many_threads_read_what_was_put(store: MemkitStore) -> None:
    failures: list[str] = []

    def work(n: int) -> None:
        for i in range(20):
            store.put(("t", str(n)), f"k{i}", {"n": n, "i": i})
            got = store.get(("t", str(n)), f"k{i}")
            if got is None or got.value != {"n": n, "i": i}:
                failures.append(f"{n}/{i}: {got!r}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert store.get(("t", "0"), "nope") is None


def test_a_get_after_close_is_a_memkit_error(tmp_path: Path) -> None:
    store = MemkitStore(f"sqlite:///{tmp_path}/closed.db?embedder=none")
    store.put(("a",), "k", {"v": 1})
    assert store.get(("a",), "k") is not None
    store.close()
    with pytest.raises(memkit.StorageError, match="closed"):
        store.get(("a",), "k")


def test_search_mode_decides_which_legs_rank(tmp_path: Path) -> None:
    with pytest.raises(memkit.ConfigError, match="search_mode"):
        MemkitStore(f"sqlite:///{tmp_path}/bad.db?embedder=none", search_mode="semantic")
    with memkit.open(f"sqlite:///{tmp_path}/modes.db") as mem:
        with pytest.raises(memkit.ConfigError, match="search_mode"):
            MemkitStore(mem, search_mode="vectors")
        MemkitStore(mem).batch([
            PutOp(("n",), "hit", {"text": "kinase inhibitor trial"}),
            PutOp(("n",), "miss", {"text": "weather in the harbour"}),
        ])
        scores = {}
        for mode in ("keyword", "semantic", "hybrid"):
            found = MemkitStore(mem, search_mode=mode).search(("n",), query="kinase", limit=5)
            scores[mode] = {item.key: item.score for item in found}
    # keyword-only ranks the one item holding the word; the other follows unranked (score 0.0)
    assert scores["keyword"]["miss"] == 0.0 and (scores["keyword"]["hit"] or 0) > 0
    # vectors score every item, as LangGraph's stores do
    assert all(score is not None and score != 0.0 for score in scores["semantic"].values())
    assert max(scores["hybrid"], key=lambda k: scores["hybrid"][k] or 0) == "hit"


def test_an_older_sqlite_store_gains_the_namespace_index(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with MemkitStore(f"sqlite:///{path}?embedder=none") as store:
        store.put(("a", "b"), "k", {"v": 1})
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX memories_listed")
    conn.execute("PRAGMA user_version = 13")
    conn.close()
    with MemkitStore(f"sqlite:///{path}?embedder=none") as store:
        assert store.list_namespaces() == [("a", "b")]
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'memories_listed'").fetchone() is not None
    conn.close()


def test_memory_lists_newest_first_when_an_older_memory_is_written_last() -> None:
    now = datetime.now(UTC)
    with memkit.open("memory://") as mem:
        mem.add_many([{"content": f"m{i}", "user_id": "u", "agent_id": "a", "created_at": now - timedelta(hours=i)}
                      for i in (2, 0)])
        assert [m.content for m in mem.get_all("u", "a")] == ["m0", "m2"]
        mem.add_many([{"content": "m1", "user_id": "u", "agent_id": "a", "created_at": now - timedelta(hours=1)}])
        assert [m.content for m in mem.get_all("u", "a")] == ["m0", "m1", "m2"]
        assert [m.content for m in mem.get_all("u", "a", limit=1)] == ["m0"]
