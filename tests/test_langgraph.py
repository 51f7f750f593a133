"""memkit.langgraph.MemkitStore beyond LangGraph's own suite (tests/langgraph_store): namespaces that
never cross, a real LangGraph graph writing through it, NamespaceBrowser and the recall audit."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest

pytest.importorskip("langgraph.store.base", reason="needs memkit[langgraph]")

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

import memkit
from memkit import frames
from memkit.langgraph import MemkitStore
from memkit.traces import ExecutionHistory


@pytest.fixture
def mem(tmp_path: Path) -> Any:
    with memkit.open(f"sqlite:///{tmp_path}/lg.db") as opened:
        yield opened


def test_two_users_on_one_database_never_see_each_other(mem: memkit.Memory) -> None:
    alice = MemkitStore(mem, user_id="alice", agent_id="assistant")
    bob = MemkitStore(mem, user_id="bob", agent_id="assistant")
    alice.put(("memories", "prefs"), "food", {"text": "alice likes sushi"})
    bob.put(("memories", "prefs"), "food", {"text": "bob likes pizza"})
    mem.add("a plain memkit memory about sushi", "alice", "assistant")

    assert alice.get(("memories", "prefs"), "food").value == {"text": "alice likes sushi"}  # type: ignore[union-attr]
    assert bob.get(("memories", "prefs"), "food").value == {"text": "bob likes pizza"}  # type: ignore[union-attr]
    assert [i.value["text"] for i in alice.search(("memories",), query="sushi pizza")] == ["alice likes sushi"]
    assert [i.value["text"] for i in bob.search(("memories",), query="sushi pizza")] == ["bob likes pizza"]
    assert alice.list_namespaces() == [("memories", "prefs")]
    bob.delete(("memories", "prefs"), "food")
    assert bob.get(("memories", "prefs"), "food") is None
    assert alice.get(("memories", "prefs"), "food") is not None
    # The plain memory is memkit's, not the graph's: the store neither lists nor deletes it.
    assert [m.content for m in mem.get_all("alice", "assistant", 10, {"type": {"$ne": "langgraph_item"}})] == [
        "a plain memkit memory about sushi"
    ]


def test_update_keeps_created_at_and_list_namespaces_honours_prefix_suffix_depth(mem: memkit.Memory) -> None:
    store = MemkitStore(mem, user_id="u1", agent_id="a1")
    store.put(("a", "b", "c"), "k", {"n": 1})
    first = store.get(("a", "b", "c"), "k")
    store.put(("a", "b", "c"), "k", {"n": 2})
    second = store.get(("a", "b", "c"), "k")
    assert first is not None and second is not None
    assert second.value == {"n": 2} and second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    store.put(("a", "x"), "k", {"n": 3})
    store.put(("z", "b", "c"), "k", {"n": 4})
    assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "x")]
    assert store.list_namespaces(suffix=("b", "c")) == [("a", "b", "c"), ("z", "b", "c")]
    assert store.list_namespaces(max_depth=1) == [("a",), ("z",)]
    assert [i.value for i in store.search(("a",), filter={"n": {"$gte": 2}})] == [{"n": 3}, {"n": 2}]


def test_index_fields_decide_what_search_finds(mem: memkit.Memory) -> None:
    store = MemkitStore(mem, user_id="u1", agent_id="a1", index={"fields": ["title"]})
    store.put(("docs",), "d1", {"title": "zebrafish development", "body": "kinase"})
    store.put(("docs",), "d2", {"title": "kinase inhibitors", "body": "zebrafish"})
    hits = store.search(("docs",), query="kinase", limit=1)
    assert [h.key for h in hits] == ["d2"] and hits[0].score is not None


def test_refusals_are_clear(mem: memkit.Memory) -> None:
    store = MemkitStore(mem)
    with pytest.raises(NotImplementedError, match="TTL"):
        store.put(("a",), "k", {"v": 1}, ttl=5)
    with pytest.raises(memkit.ConfigError, match="embed"):
        MemkitStore(mem, index={"dims": 3, "embed": lambda texts: [[1.0, 0.0, 0.0] for _ in texts]})
    with pytest.raises(memkit.ConfigError, match="does not know"):
        MemkitStore(mem, index={"fields": ["a"], "distance": "l2"})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(memkit.ConfigError, match="TTL"):
        MemkitStore(mem, ttl={"default_ttl": 5})
    assert store.get(("a",), "k") is None


class _State(TypedDict):
    question: str
    answer: str


def _graph(store: BaseStore) -> Any:
    def remember(state: _State, *, store: BaseStore) -> dict[str, str]:
        store.put(("memories", "u1"), "fact-1", {"text": "TP53 is mutated in half of all cancers"})
        return {}

    def answer(state: _State, *, store: BaseStore) -> dict[str, str]:
        hits = store.search(("memories", "u1"), query=state["question"], limit=1)
        return {"answer": hits[0].value["text"] if hits else ""}

    builder = StateGraph(_State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    return builder.compile(store=store)


def test_a_langgraph_agent_shows_up_in_namespace_browser_and_recall_audit(mem: memkit.Memory) -> None:
    from memkit.widgets import NamespaceBrowser

    store = MemkitStore(mem, user_id="alice", agent_id="bio-agent", workflow_id="qa-graph")
    out = _graph(store).invoke({"question": "which gene is mutated in cancers?", "answer": ""})
    assert out["answer"] == "TP53 is mutated in half of all cancers"

    browser = NamespaceBrowser(mem)
    assert ("alice", "bio-agent") in [value for _, value in browser.namespace.options]
    browser.namespace.value = ("alice", "bio-agent")
    assert [item.metadata["lg_key"] for item in browser.items] == ["fact-1"]
    assert "TP53 is mutated" in browser.items[0].content

    recalls = frames.recalls_frame(mem, user_id="alice", agent_id="bio-agent")
    assert list(recalls["workflow_id"].unique()) == ["qa-graph"]
    assert list(recalls["step_name"].unique()) == ["store.search"]
    assert list(recalls["query"]) == ["which gene is mutated in cancers?"]
    assert recalls["memory_id"].iloc[0] == browser.items[0].id


def test_searches_inside_a_memkit_step_belong_to_that_step(mem: memkit.Memory) -> None:
    store = MemkitStore(mem, user_id="alice", agent_id="bio-agent")
    store.put(("notes",), "n1", {"text": "BRCA1 repairs DNA"})
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf-1", agent_id="bio-agent", user_id="alice")
    with history.step("lookup", tool="store") as step:
        step.result = {"hits": len(store.search(("notes",), query="BRCA1"))}
    recalls = mem.recalls(user_id="alice", agent_id="bio-agent")
    assert [(r.workflow_id, r.step_name, r.step_index) for r in recalls] == [("wf-1", "lookup", 0)]
    steps = frames.traces_frame(mem, recalls=True)
    assert steps.loc[steps["step_name"] == "lookup", "recalls"].tolist() == [1]


async def test_async_api_runs_on_memkit_loop(mem: memkit.Memory) -> None:
    store = MemkitStore(mem, user_id="u", agent_id="a")
    await store.aput(("a", "b"), "k1", {"text": "hello world"})
    await store.aput(("a", "c"), "k2", {"text": "other"})
    assert (await store.aget(("a", "b"), "k1")).value == {"text": "hello world"}  # type: ignore[union-attr]
    assert await store.alist_namespaces(prefix=("a",)) == [("a", "b"), ("a", "c")]
    assert [i.key for i in await store.asearch(("a",), query="hello")][:1] == ["k1"]


def test_url_store_is_opened_and_closed_by_the_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/own.db"
    with MemkitStore(url, user_id="u", agent_id="a") as store:
        store.put(("x",), "k", {"v": 1})
    with memkit.open(url) as mem:
        assert [i.metadata["lg_value"] for i in mem.get_all("u", "a")] == [{"v": 1}]
