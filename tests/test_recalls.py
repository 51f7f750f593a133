"""Recalls: every search a step makes is recorded, shown per step, and replayed against today's store."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import threading
import uuid
import warnings
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import memkit
from memkit import InvalidInputError, Recall, SupportsAsOf, SupportsRecalls
from memkit.adapters import FalkorDBAdapter, Neo4jAdapter
from memkit.adapters._memory._adapter import InMemoryAdapter
from memkit.adapters._sqlite import SQLiteAdapter
from memkit.frames import recalls_frame, replay_recall, traces_frame
from memkit.testing import FalkorDBServer
from memkit.traces import ExecutionHistory

NS = ("u1", "bio")
FACTS = (
    "TP53 is mutated in sample 7",
    "BRCA1 carries a frameshift in sample 3",
    "sample 7 was sequenced on a NovaSeq",
    "TP53 loss correlates with poor response",
    "KRAS G12D found in the pancreatic line",
)


@pytest.fixture(params=["memory", "sqlite", "falkordb", "neo4j"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Every adapter that declares SupportsRecalls, on real databases."""
    if request.param == "memory":
        yield InMemoryAdapter()
        return
    adapter: Any
    if request.param == "sqlite":
        adapter = SQLiteAdapter(tmp_path / "recalls.db", embedder=None)
    elif request.param == "falkordb":
        server = request.getfixturevalue("falkordb_server")
        adapter = FalkorDBAdapter.from_url(server.url(f"recalls-{uuid.uuid4().hex[:8]}"))
    else:
        adapter = Neo4jAdapter(request.getfixturevalue("neo4j_uri"))
        await adapter.reset()  # one database for the session
    assert isinstance(adapter, SupportsRecalls)
    yield adapter
    if request.param != "sqlite":
        await adapter.reset()
    await adapter.aclose()


@pytest.fixture(params=["memory", "sqlite", "falkordb", "neo4j"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty store of every adapter that keeps recalls (for the sync facade)."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'sync.db'}?embedder=none"
    if request.param == "falkordb":
        return str(request.getfixturevalue("falkordb_server").url(f"recalls-{uuid.uuid4().hex[:8]}"))
    uri = str(request.getfixturevalue("neo4j_uri"))
    with memkit.open(uri) as mem:
        mem.reset()
    return uri


async def _fill(store: Any, facts: Sequence[str] = FACTS, ns: tuple[str, str] = NS) -> list[str]:
    return [await store.add(text, *ns) for text in facts]


def test_capabilities_are_declared() -> None:
    assert isinstance(InMemoryAdapter(), SupportsRecalls)
    assert isinstance(InMemoryAdapter(), SupportsAsOf)
    sqlite = SQLiteAdapter(":memory:", embedder=None)
    assert isinstance(sqlite, SupportsRecalls) and isinstance(sqlite, SupportsAsOf)
    sqlite.close()


# -- steps and scopes --------------------------------------------------------------------


async def test_async_steps_record_their_searches(store: Any) -> None:
    ids = await _fill(store)
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="bio", run_id="r1")
    async with history.step("plan", tool="llm"):
        await store.search("TP53", *NS, limit=2)
    async with history.step("fetch", tool="db"):
        await store.search("BRCA1 frameshift", *NS)
        await store.search("KRAS", *NS)
    recalls = await store.recalls(workflow_id="wf")
    assert [(r.step_name, r.step_index, r.run_id, r.query) for r in recalls] == [
        ("plan", 0, "r1", "TP53"), ("fetch", 1, "r1", "BRCA1 frameshift"), ("fetch", 1, "r1", "KRAS"),
    ]
    first = recalls[0]
    assert (first.user_id, first.agent_id, first.mode, first.limit, first.kind) == ("u1", "bio", "keyword", 2, "search")
    assert [h.rank for h in first.hits] == [1, 2]
    assert {h.id for h in first.hits} == {ids[0], ids[3]}
    assert all(h.details is not None and h.details["keyword"]["rank"] == h.rank for h in first.hits)
    assert all(h.score is not None and h.score > 0 for h in first.hits)
    first.hits[0].details["keyword"]["rank"] = 99  # type: ignore[index]  # editing a copy read back
    assert (await store.recalls(workflow_id="wf"))[0].hits[0].details["keyword"]["rank"] == 1  # type: ignore[index]
    # steps and recalls agree on which step is which
    steps = traces_frame(store, workflow_id="wf", recalls=True)
    assert steps[["step_name", "step_index", "recalls", "recalled"]].values.tolist() == [
        ["plan", 0, 1, 2], ["fetch", 1, 2, 2],
    ]


async def test_search_results_are_the_same_recorded_or_not(store: Any) -> None:
    await _fill(store)
    plain = await store.search("TP53 sample", *NS, limit=3)
    with memkit.recall_scope("wf", step="s"):
        recorded = await store.search("TP53 sample", *NS, limit=3)
    assert [(h.id, h.score, h.score_details) for h in recorded] == [(h.id, h.score, h.score_details) for h in plain]
    (recall,) = await store.recalls()
    assert [(h.id, h.score, h.content) for h in recall.hits] == [(h.id, h.score, h.content) for h in plain]


async def test_recording_off_records_nothing(store: Any) -> None:
    await _fill(store)
    await store.search("TP53", *NS)
    await store.search("", *NS)
    assert await store.recalls() == []
    store.record_recalls = True
    await store.search("TP53", *NS)
    (recall,) = await store.recalls()
    assert recall.workflow_id is None and recall.step_index is None


def test_sync_steps_through_the_facade(store_url: str) -> None:
    for url in (store_url,):
        with memkit.open(url) as mem:
            for text in FACTS:
                mem.add(text, *NS)
            with ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio") as history:
                with history.step("one", tool="t"):
                    mem.search("TP53", *NS)
                with history.step("two", tool="t"):
                    mem.search("NovaSeq", *NS)
            mem.search("outside", *NS)  # no scope, recording off: not kept
            df = recalls_frame(mem, "wf")
            assert df.groupby("step_name", sort=False)["query"].first().to_dict() == {"one": "TP53", "two": "NovaSeq"}
            assert df.step_index.tolist() == [0, 0, 1]
            assert len(recalls_frame(mem)) == 3


def test_retrying_records_each_attempt_under_one_step() -> None:
    with memkit.open("memory://") as mem:
        for text in FACTS:
            mem.add(text, *NS)
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio")
        for step in history.retrying("fetch", tool="db", max_retries=2):
            with step:
                mem.search("TP53", *NS)
                if step.attempt < 2:
                    raise ConnectionError("flaky")
        df = recalls_frame(mem, "wf").drop_duplicates("recall_id")
        assert df[["step_name", "step_index", "attempt"]].values.tolist() == [["fetch", 0, 1], ["fetch", 0, 2]]
        assert traces_frame(mem, recalls=True)["recalls"].tolist() == [2]


def test_threads_that_copy_the_context_and_threads_with_their_own_steps(store_url: str) -> None:
    with memkit.open(store_url) as mem:
        for text in FACTS:
            mem.add(text, *NS)
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio")
        with history.step("fan_out", tool="pool"), ThreadPoolExecutor(4) as pool:
            futures = [
                pool.submit(contextvars.copy_context().run, mem.search, query, *NS) for query in ("TP53", "KRAS")
            ]
            for future in futures:
                future.result()

        def worker(name: str) -> None:
            with history.step(name, tool="thread"):
                mem.search(name, *NS)

        threads = [threading.Thread(target=worker, args=(q,)) for q in ("BRCA1", "NovaSeq")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        df = recalls_frame(mem, "wf")
        by_step = df.groupby("step_name")["query"].agg(lambda q: sorted(set(q))).to_dict()
        assert by_step == {"fan_out": ["KRAS", "TP53"], "BRCA1": ["BRCA1"], "NovaSeq": ["NovaSeq"]}
        steps = traces_frame(mem, recalls=True).set_index("step_name")
        assert steps.loc["fan_out", "recalls"] == 2
        # each thread's recall points at that thread's own step
        for name in ("BRCA1", "NovaSeq"):
            assert df[df["query"] == name].step_index.iloc[0] == steps.loc[name, "step_index"]


async def test_async_tasks_and_to_thread_inherit_the_scope(store: Any) -> None:
    await _fill(store)
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="bio")
    async with history.step("gather", tool="llm"):
        await asyncio.gather(store.search("TP53", *NS), store.search("KRAS", *NS))
        await asyncio.to_thread(lambda: memkit.Memory(store).search("BRCA1", *NS))
    recalls = await store.recalls(workflow_id="wf")
    assert sorted(r.query for r in recalls) == ["BRCA1", "KRAS", "TP53"]
    assert {(r.step_name, r.step_index) for r in recalls} == {("gather", 0)}


async def test_jupyter_running_loop_with_the_sync_facade(tmp_path: Path) -> None:
    # A notebook cell: a loop runs on this thread, and the user calls the sync API.
    assert asyncio.get_running_loop().is_running()
    with memkit.open(f"sqlite:///{tmp_path / 'nb.db'}?embedder=none") as mem:
        for text in FACTS:
            mem.add(text, *NS)
        history = ExecutionHistory(memory_provider=mem, workflow_id="nb", agent_id="bio")
        with history.step("cell", tool="jupyter"):
            mem.search("TP53", *NS)
        with memkit.recall_scope("nb", step="by hand", step_index=7):
            mem.search("KRAS", *NS)
        df = recalls_frame(mem, "nb")
        assert df.drop_duplicates("recall_id")[["step_name", "step_index", "query"]].values.tolist() == [
            ["cell", 0, "TP53"], ["by hand", 7, "KRAS"],
        ]


def test_recall_scope_rejects_bad_input() -> None:
    with pytest.raises(InvalidInputError):
        memkit.recall_scope("wf\x00", step="s")
    with pytest.raises(InvalidInputError):
        memkit.recall_scope("wf", step_index=-1)
    with pytest.raises(InvalidInputError):
        memkit.recall_scope(123)  # type: ignore[arg-type]


async def test_as_of_must_be_a_datetime(store: Any) -> None:
    with pytest.raises(InvalidInputError, match="as_of"):
        await store.search("x", *NS, as_of="yesterday")


async def test_build_context_is_recorded_as_what_went_into_the_prompt(store: Any) -> None:
    await _fill(store)
    with memkit.recall_scope("wf", step="prompt"):
        window = await memkit.build_context(store, "TP53 sample", *NS, token_budget=20)
    (recall,) = await store.recalls()  # one recall: the context, not the search under it
    assert recall.kind == "context"
    assert [h.id for h in recall.hits] == [i.id for i in window.items]
    assert recall.options == {"token_budget": 20, "order": "relevance", "dedup_threshold": 0.9}
    assert len(window.items) < window.candidates  # the budget left candidates out: they are not in the recall


# -- storage: snapshots, namespaces, export ----------------------------------------------


async def test_a_deleted_memory_keeps_its_snapshot(store: Any) -> None:
    ids = await _fill(store)
    with memkit.recall_scope("wf", step="s"):
        await store.search("TP53", *NS)
    assert await store.delete(ids[0])
    df = recalls_frame(store)
    row = df[df.memory_id == ids[0]].iloc[0]
    assert row.content == FACTS[0] and row["rank"] >= 1


async def test_no_recall_leaks_across_namespaces(store: Any) -> None:
    await _fill(store)
    await _fill(store, ("TP53 in the other tenant",), ("u2", "bio"))
    with memkit.recall_scope("wf", step="s"):
        await store.search("TP53", *NS)
        await store.search("TP53", "u2", "bio")
    mine = await store.recalls(user_id="u1", agent_id="bio")
    theirs = await store.recalls(user_id="u2", agent_id="bio")
    assert len(mine) == len(theirs) == 1
    assert all(h.content != "TP53 in the other tenant" for h in mine[0].hits)
    assert [h.content for h in theirs[0].hits] == ["TP53 in the other tenant"]
    assert recalls_frame(store, user_id="u2").content.tolist() == ["TP53 in the other tenant"]
    assert await store.recalls(user_id="u1", agent_id="other") == []
    assert await store.get_recall(theirs[0].id, user_id="u1", agent_id="bio") is None
    assert await store.get_recall(theirs[0].id, user_id="u2", agent_id="bio") == theirs[0]


async def test_jsonl_round_trip_keeps_recalls_byte_identical(store: Any, tmp_path: Path) -> None:
    await _fill(store)
    with memkit.recall_scope("wf", step="s", run_id="r"):
        await store.search("TP53 sample", *NS)
        await store.search("nothing matches this", *NS)
        await memkit.build_context(store, "KRAS", *NS, token_budget=50)
    first = tmp_path / "a.jsonl"
    second = tmp_path / "b.jsonl"
    memkit.export_jsonl(store, first, progress=False)
    target = SQLiteAdapter(tmp_path / "copy.db", embedder=None)
    try:
        assert memkit.import_jsonl(target, first, progress=False) == len(FACTS) + 3
        memkit.export_jsonl(target, second, progress=False)
        copy = InMemoryAdapter()
        memkit.import_jsonl(copy, second, progress=False)
        third = tmp_path / "c.jsonl"
        memkit.export_jsonl(copy, third, progress=False)
    finally:
        await target.aclose()
    recall_lines = [line for line in first.read_bytes().splitlines() if line.startswith(b'{"recall":')]
    assert len(recall_lines) == 3
    assert first.read_bytes() == second.read_bytes() == third.read_bytes()
    # a second import refuses the recall ids it already holds and writes nothing
    again = InMemoryAdapter()
    memkit.import_jsonl(again, first, progress=False)
    before = len(await again.recalls())
    with pytest.raises(InvalidInputError):
        memkit.import_jsonl(again, first, progress=False)
    assert len(await again.recalls()) == before


def test_a_bad_recall_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"recall": {"id": "x", "query": 3}}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError, match=r"bad\.jsonl:1"):
        memkit.import_jsonl(InMemoryAdapter(), path, progress=False)


async def test_recalls_survive_reopening_and_reset_clears_them(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = SQLiteAdapter(path, embedder=None)
    await _fill(store)
    with memkit.recall_scope("wf", step="s"):
        await store.search("TP53", *NS)
    await store.aclose()
    store = SQLiteAdapter(path)
    (recall,) = await store.recalls()
    assert await store.get_recall(recall.id) == recall
    await store.reset()
    assert await store.recalls() == []
    await store.aclose()


async def test_a_failing_recall_write_warns_and_the_search_still_answers(store: Any) -> None:
    await _fill(store)

    def broken(recall: Recall) -> None:
        raise OSError("disk full")

    store._keep_recall = broken
    with memkit.recall_scope("wf", step="s"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hits = await store.search("TP53", *NS)
    assert len(hits) == 2
    assert any("could not record a recall" in str(w.message) for w in caught)


# -- replay and as_of ---------------------------------------------------------------------


async def test_replay_reports_new_gone_and_moved(store: Any) -> None:
    ids = await _fill(store)
    with memkit.recall_scope("wf", step="s"):
        await store.search("TP53 sample", *NS, limit=3)
    (recall,) = await store.recalls()
    same = replay_recall(store, recall.id)
    assert set(same.change) == {"same"}
    old = {h.id: h.rank for h in recall.hits}
    top = recall.hits[0].id
    assert await store.delete(top)
    newcomer = await store.add("TP53 TP53 sample sample TP53 in sample 9", *NS)
    diff = replay_recall(store, recall.id).set_index("memory_id")
    assert diff.loc[newcomer, "change"] == "new" and diff.loc[newcomer, "new_rank"] == 1
    assert pd.isna(diff.loc[newcomer, "old_rank"])
    assert diff.loc[top, "change"] == "gone" and bool(diff.loc[top, "deleted"])
    assert diff.loc[top, "content"] in FACTS and diff.loc[top, "old_rank"] == 1
    for memory_id, row in diff.iterrows():
        if memory_id in old and row.change != "gone":
            expected = "same" if row.new_rank == old[memory_id] else ("up" if row.new_rank < old[memory_id] else "down")
            assert row.change == expected
    assert await store.recalls() == [recall]  # replays are not recorded
    assert ids  # the store held the facts the recall ranked


async def test_replay_after_a_reembed_reports_moves(tmp_path: Path) -> None:
    store = SQLiteAdapter(tmp_path / "e.db", embedder="default")
    try:
        texts = ["a puppy played in the park", "the dog chased a ball", "kinase inhibitors in trial",
                 "stock prices fell", "my cat sleeps all day", "a golden retriever puppy"]
        for text in texts:
            await store.add(text, *NS)
        with memkit.recall_scope("wf", step="s"):
            await store.search("young dog", *NS, mode="semantic", limit=6)
        (recall,) = await store.recalls()
        assert await store.reembed(_Hashing(), progress=False) == len(texts)
        diff = replay_recall(store, recall.id)
        assert diff.attrs["recall"].mode == "semantic"
        moved = diff[diff.change.isin(["up", "down"])]
        assert len(moved) >= 2
        for _, row in moved.iterrows():
            assert (row.new_rank < row.old_rank) == (row.change == "up")
        assert set(diff.change) <= {"same", "up", "down"}  # six of six: nothing new or gone
    finally:
        await store.aclose()


async def test_replay_of_an_unknown_recall_is_not_found(store: Any) -> None:
    with pytest.raises(memkit.NotFoundError):
        replay_recall(store, "no-such-recall")


async def test_as_of_excludes_later_memories(store: Any) -> None:
    early = await store.add("TP53 early finding", *NS)
    await asyncio.sleep(0.002)
    cut = datetime.now(UTC)
    await asyncio.sleep(0.002)
    late = await store.add("TP53 late finding", *NS)
    now_ids = {h.id for h in await store.search("TP53", *NS)}
    then = await store.search("TP53", *NS, as_of=cut)
    assert now_ids == {early, late}
    assert [h.id for h in then] == [early]
    assert [h.id for h in await store.search("", *NS, as_of=cut)] == [early]
    assert [h.id for h in await store.search("TP53", *NS, as_of=cut, filters={"type": {"$ne": "trace"}})] == [early]
    with memkit.recall_scope("wf", step="s"):
        await store.search("TP53", *NS, as_of=cut)
    (recall,) = await store.recalls()
    assert recall.as_of is not None and abs((recall.as_of - cut).total_seconds()) < 1e-5


async def test_as_of_in_semantic_and_hybrid_modes(tmp_path: Path, falkordb_server: FalkorDBServer) -> None:
    stores: list[Any] = [
        SQLiteAdapter(tmp_path / "h.db", embedder="default"), InMemoryAdapter(embedder="default"),
        FalkorDBAdapter.from_url(falkordb_server.url(f"asof-{uuid.uuid4().hex[:8]}"), embedder="default"),
    ]
    for store in stores:
        early = await store.add("a golden retriever puppy", *NS)
        await asyncio.sleep(0.002)
        cut = datetime.now(UTC)
        await asyncio.sleep(0.002)
        await store.add("a puppy and a dog", *NS)
        for mode in ("semantic", "hybrid"):
            assert [h.id for h in await store.search("puppy dog", *NS, mode=mode, as_of=cut)] == [early]
        await store.aclose()


class _Hashing:
    """A deterministic hashed bag of words: a second embedder to move to (re-embed), not for quality."""

    name, dim = "hashing", 16

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


async def test_sqlite_writes_queued_recalls_without_being_asked(tmp_path: Path) -> None:
    import sqlite3

    store = SQLiteAdapter(tmp_path / "behind.db", embedder=None)
    try:
        await _fill(store)
        with memkit.recall_scope("wf", step="s"):
            await store.search("TP53", *NS)
        # another process's view of the file: the recall lands there on its own, shortly
        other = sqlite3.connect(tmp_path / "behind.db")
        deadline = asyncio.get_running_loop().time() + 10
        count = 0
        while count == 0 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
            count = other.execute("SELECT count(*) FROM recalls WHERE workflow_id = 'wf'").fetchone()[0]
        other.close()
        assert count == 1
    finally:
        await store.aclose()


def test_record_recalls_setting_from_the_url_and_the_constructor(tmp_path: Path) -> None:
    with memkit.open("memory://?record_recalls=true") as mem:
        mem.add("TP53 is mutated", *NS)
        mem.search("TP53", *NS)
        assert [r.query for r in mem.recalls()] == ["TP53"]
    with memkit.open(f"sqlite:///{tmp_path / 'on.db'}?record_recalls=yes&embedder=none") as mem:
        mem.add("TP53 is mutated", *NS)
        mem.search("TP53", *NS)
        assert [r.query for r in mem.recalls(user_id="u1", agent_id="bio")] == ["TP53"]
    with pytest.raises(memkit.ConfigError, match="record_recalls"):
        memkit.open("memory://?record_recalls=maybe")
    with pytest.raises(memkit.ConfigError, match="record_recalls"):
        InMemoryAdapter(record_recalls="yes")  # type: ignore[arg-type]
    with pytest.raises(memkit.ConfigError, match="record_recalls"):
        SQLiteAdapter(":memory:", record_recalls=1)  # type: ignore[arg-type]


async def test_filters_are_recorded_as_given_and_replayed(store: Any) -> None:
    await store.add("TP53 in tumour", *NS, metadata={"tissue": "tumour"})
    await store.add("TP53 in blood", *NS, metadata={"tissue": "blood"})
    wanted = {"tissue": {"$in": ["tumour"]}}
    with memkit.recall_scope("wf", step="s"):
        hits = await store.search("TP53", *NS, filters=wanted)
    wanted["tissue"]["$in"].append("blood")  # the caller's dict changes later; the recall must not
    (recall,) = await store.recalls()
    assert recall.filters == {"tissue": {"$in": ["tumour"]}}
    assert [h.content for h in hits] == ["TP53 in tumour"]
    assert replay_recall(store, recall.id).change.tolist() == ["same"]


def test_nested_steps_each_own_their_searches() -> None:
    with memkit.open("memory://") as mem:
        for text in FACTS:
            mem.add(text, *NS)
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio")
        with history.step("outer", tool="plan"):
            mem.search("TP53", *NS)
            with history.step("inner", tool="fetch"):
                mem.search("KRAS", *NS)
            mem.search("BRCA1", *NS)
        df = recalls_frame(mem, "wf").drop_duplicates("recall_id")
        assert df[["query", "step_name", "step_index"]].values.tolist() == [
            ["TP53", "outer", 0], ["KRAS", "inner", 1], ["BRCA1", "outer", 0],
        ]
        steps = traces_frame(mem, recalls=True).set_index("step_name")
        assert steps.loc["outer", "step_index"] == 0 and steps.loc["outer", "recalls"] == 2
        assert steps.loc["inner", "step_index"] == 1 and steps.loc["inner", "recalls"] == 1


def test_frames_of_a_store_without_recalls_or_traces() -> None:
    with memkit.open("memory://") as mem:
        assert recalls_frame(mem).empty and list(recalls_frame(mem).columns) == list(memkit.frames.RECALL_COLUMNS)
        assert traces_frame(mem, recalls=True).empty
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio")
        with history.step("quiet", tool="t"):
            pass
        assert traces_frame(mem, recalls=True)[["recalls", "recalled"]].values.tolist() == [[0, 0]]


def test_a_scope_left_in_another_context_still_ends() -> None:
    scope = memkit.recall_scope("wf", step="cell 1")
    entered = contextvars.copy_context()
    entered.run(scope.__enter__)
    assert entered.run(_recall_scope_now) == ("wf", "cell 1")
    scope.__exit__(None, None, None)  # another context, as in the next notebook cell
    assert _recall_scope_now() is None


def _recall_scope_now() -> tuple[str | None, str | None] | None:
    from memkit._recall._recording import current_scope

    scope = current_scope()
    return None if scope is None else (scope.workflow_id, scope.step_name)


async def test_editing_a_returned_hit_does_not_edit_its_recall(store: Any) -> None:
    await _fill(store)
    with memkit.recall_scope("wf", step="s"):
        hits = await store.search("TP53 sample", *NS)
    as_returned = copy.deepcopy(hits[0].score_details)
    assert as_returned is not None
    hits[0].score_details["keyword"]["rank"] = 99  # a caller's own use of its results
    hits[0].score_details["mode"] = "edited"
    (recall,) = await store.recalls()
    assert recall.hits[0].details == as_returned and as_returned["keyword"]["rank"] == 1


def test_a_queued_recall_is_stored_as_encoding_the_whole_body_would() -> None:
    from memkit._core._records import from_us
    from memkit._recall import _recording as _recall

    hits = [["m1", 1, 0.25, {"mode": "hybrid", "found_by": ["keyword"], "x": {"y": None}}, "é \u2028 \"q\" \x01"],
            ["m2", 2, None, None, ""]]
    body: dict[str, Any] = {
        "id": "r1", "created_at": 1_764_000_000_123_456, "user_id": "u", "agent_id": "a", "kind": "search",
        "query": "q", "mode": "hybrid", "filters": {"n": [1, 2.5]}, "limit": 5, "as_of": None, "options": None,
        "workflow_id": "wf", "run_id": None, "step_index": 3, "step_name": "s", "attempt": None, "hits": hits,
    }
    import pydantic_core

    whole = pydantic_core.to_json({**body, "created_at": from_us(body["created_at"]).isoformat()}).decode()
    assert _recall.encode({**body, "hits": _recall._Hits(hits)}) == whole == _recall.encode(body)
    for us in (0, 1, 999_999, 1_000_000, 1_764_000_000_000_000, 1_764_000_000_000_001, -1, -1_000_001):
        assert _recall._iso(us) == from_us(us).isoformat()


def _child_ids(out: Any) -> None:
    from memkit._recall import _recording as _recall

    out.put([_recall._new_id() for _ in range(3)])


def test_recall_ids_are_unique_across_a_fork() -> None:
    import multiprocessing
    import re

    from memkit._recall import _recording as _recall

    mine = [_recall._new_id() for _ in range(3)]
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child_ids, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(timeout=30)
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in mine + theirs)
    assert len(set(mine + theirs + [_recall._new_id() for _ in range(3)])) == 9
    assert {i[:16] for i in theirs}.isdisjoint({i[:16] for i in mine})  # a forked child draws its own prefix
