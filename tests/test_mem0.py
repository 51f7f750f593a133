"""The Mem0 adapter on real mem0 2.2.1 code, a real local Qdrant folder and real embeddings.

The embeddings are memkit's shipped static model, handed to mem0 through its own
``langchain`` embedder provider: no torch on this path. One mem0 ``Memory`` is shared
by the whole session; each test wraps it in a fresh adapter. Tests that need their
own store (reopen, offline audit) say so.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mem0", reason="the mem0 extra is not installed: pip install 'memkit[mem0]'")

import memkit
from memkit import ConfigError, InvalidInputError, StorageError, get_memory_provider
from memkit._recall import _recording as _recall
from memkit.adapters import Mem0Adapter, SQLiteAdapter
from memkit.adapters._mem0._backend import decode_id, encode_id, oss_config
from memkit.embeddings import DEFAULT_EMBEDDER
from memkit.frames import recalls_frame, replay_recall, traces_frame
from memkit.testing import ProviderConformance
from memkit.traces import ExecutionHistory


@pytest.fixture(scope="session")
def shared_mem0(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One offline mem0 ``Memory`` built from memkit's own config, loaded once per session."""
    root = tmp_path_factory.mktemp("mem0-shared")
    owner = Mem0Adapter(root)  # sets the environment and builds mem0 exactly as users get it
    yield owner._backend.memory  # type: ignore[attr-defined]
    owner.close()


class TestMem0Conformance(ProviderConformance):
    persistent = True

    @pytest.fixture
    def make_provider(
        self, shared_mem0: Any, tmp_path: Path, request: pytest.FixtureRequest
    ) -> Callable[[], Mem0Adapter]:
        if request.node.originalname == "test_persists_across_reopen":
            # Reopening must really go back to disk: own folder, own mem0.
            # The test ends with a keyword-shaped check (search("restart") is exactly the
            # memory). The static model's vectors are not centred, so unrelated texts score
            # 0.3-0.6 (the trace scores 0.34 against "restart", the memory 0.78); a 0.7
            # similarity threshold keeps the check deterministic and still a real search.
            return lambda: Mem0Adapter(tmp_path / "store", threshold=0.7)
        return lambda: Mem0Adapter(tmp_path, memory=shared_mem0)


@pytest.fixture
async def mem(shared_mem0: Any, tmp_path: Path) -> AsyncIterator[Mem0Adapter]:
    adapter = Mem0Adapter(tmp_path, memory=shared_mem0)
    await adapter.reset()
    yield adapter
    await adapter.aclose()


# -- mapping onto mem0 ------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["plain", "with space", "tab\there", "*", "a*b", "100%", "%2A", "nbsp\u00a0x", "ü:ß"])
def test_id_escaping_round_trips_and_never_yields_mem0_specials(raw: str) -> None:
    encoded = encode_id(raw)
    assert decode_id(encoded) == raw
    assert encoded != "*" and "*" not in encoded
    assert not any(c.isspace() for c in encoded) and encoded == encoded.strip()


async def test_ids_mem0_would_reject_or_merge_stay_separate(mem: Mem0Adapter) -> None:
    # mem0 itself trims ids, rejects inner whitespace and reads "*" as "every user".
    a = await mem.add("star user note", "*", "agent")
    b = await mem.add("spaced user note", " u 1 ", "agent")
    c = await mem.add("plain user note", "u 1", "agent")
    assert [i.id for i in await mem.get_all("*", "agent")] == [a]
    assert [i.id for i in await mem.get_all(" u 1 ", "agent")] == [b]
    assert [i.id for i in await mem.get_all("u 1", "agent")] == [c]
    assert (await mem.get_all("*", "agent"))[0].user_id == "*"


async def test_get_all_has_no_silent_truncation(mem: Mem0Adapter) -> None:
    # mem0's own get_all stops at top_k=20 by default.
    ids = await mem.add_many([{"content": f"row {i}", "user_id": "u", "agent_id": "a"} for i in range(45)])
    got = await mem.get_all("u", "a", limit=45)
    assert [i.id for i in got] == ids[::-1]
    assert len(await mem.search("row", "u", "a", limit=45)) == 45


async def test_metadata_with_mem0_reserved_keys_round_trips(mem: Mem0Adapter) -> None:
    meta = {"role": "assistant", "data": "x", "hash": 1, "created_at": "yesterday", "user_id": "spoof",
            "expiration_date": "2000-01-01", "memkit": {"nested": True}}
    mem_id = await mem.add("reserved keys", "u", "a", meta)
    [item] = await mem.get_all("u", "a")
    assert (item.id, item.metadata, item.user_id) == (mem_id, meta, "u")
    assert [i.id for i in await mem.search("reserved", "u", "a", filters={"user_id": "spoof"})] == [mem_id]


async def test_search_scores_are_cosine_similarities(mem: Mem0Adapter, shared_mem0: Any, tmp_path: Path) -> None:
    query = "the ribosome translates messenger RNA"
    same = await mem.add(query, "u", "a")
    other = await mem.add("the freezer in room 4 was defrosted", "u", "a")
    wide = Mem0Adapter(tmp_path, memory=shared_mem0, threshold=0.0)
    hits = await wide.search(query, "u", "a", limit=2)
    assert [h.id for h in hits] == [same, other]
    assert hits[0].score == pytest.approx(1.0, abs=1e-6)
    assert hits[1].score is not None and 0.0 <= hits[1].score < 0.9
    assert hits[0].score_details == {"mode": "semantic", "found_by": ["semantic"],
                                     "semantic": {"rank": 1, "score": hits[0].score}, "dense_path": "index"}
    # The threshold is mem0's: a similarity floor that drops the unrelated memory.
    strict = Mem0Adapter(tmp_path, memory=shared_mem0, threshold=0.9)
    assert [h.id for h in await strict.search(query, "u", "a", limit=2)] == [same]
    with pytest.raises(InvalidInputError):
        await mem.search("x", "u", "a", mode="keyword")


async def test_filtered_search_widens_past_mem0_candidates(mem: Mem0Adapter) -> None:
    # The one match is semantically the worst: mem0's first top_k never contains it.
    rows = [{"content": f"gene expression profile number {i}", "user_id": "u", "agent_id": "a",
             "metadata": {"keep": False}} for i in range(30)]
    await mem.add_many(rows)
    keep = await mem.add("profile photo of the lab team", "u", "a", {"keep": True})
    unfiltered = await mem.search("gene expression profile", "u", "a", limit=31)
    assert [h.id for h in unfiltered][-1] == keep  # precondition: ranked last of 31
    hits = await mem.search("gene expression profile", "u", "a", limit=3, filters={"keep": True})
    assert [h.id for h in hits] == [keep]



async def test_add_trace_is_stored_through_mem0_metadata(mem: Mem0Adapter, shared_mem0: Any) -> None:
    trace_id = await mem.add_trace("planner", "wf-7", {"tool": "blast", "status": "ok", "result": {"hits": 3}},
                                   user_id="alice")
    raw = shared_mem0.get(trace_id)
    assert raw["user_id"] == "alice" and raw["agent_id"] == "planner"
    assert raw["memory"].startswith("[trace] workflow=wf-7 agent=planner data=")
    stored = raw["metadata"]["memkit"]["metadata"]
    assert stored["type"] == "trace" and stored["workflow_id"] == "wf-7" and stored["tool"] == "blast"
    assert stored["trace"]["result"] == {"hits": 3}
    [item] = await mem.search("", "alice", "planner", filters={"tool": "blast", "status": "ok"})
    assert item.id == trace_id and item.metadata == stored


async def test_memories_written_by_mem0_directly_are_readable(mem: Mem0Adapter, shared_mem0: Any) -> None:
    result = shared_mem0.add("written by plain mem0", user_id="u", agent_id="a", metadata={"src": "mem0"},
                             infer=False)
    mem_id = result["results"][0]["id"]
    [item] = await mem.get_all("u", "a")
    assert (item.id, item.content, item.metadata["src"]) == (mem_id, "written by plain mem0", "mem0")
    assert item.created_at is not None


async def test_reset_wipes_every_namespace(mem: Mem0Adapter) -> None:
    await mem.add("one", "u1", "a")
    await mem.add("two", "u2", "b")
    assert (await mem.stats()).namespaces == 2
    assert await mem.reset() is True
    assert (await mem.stats()).memories == 0 and await mem.namespaces() == []


async def test_add_many_refuses_ids_and_writes_nothing(mem: Mem0Adapter) -> None:
    with pytest.raises(InvalidInputError, match="mem0 assigns ids"):
        await mem.add_many([{"content": "x", "user_id": "u", "agent_id": "a"},
                            {"content": "y", "user_id": "u", "agent_id": "a", "id": "mine"}])
    assert await mem.get_all("u", "a") == []


async def test_calls_do_not_block_the_event_loop(mem: Mem0Adapter) -> None:
    # Ticks counted only while a call is awaited: a call that ran mem0 on the loop's own
    # thread would not let the ticker run at all between its start and its end.
    in_call = False
    ticks_in_call = 0

    async def ticker() -> None:
        nonlocal ticks_in_call
        while True:
            await asyncio.sleep(0.0005)
            ticks_in_call += in_call

    task = asyncio.create_task(ticker())
    try:
        await asyncio.sleep(0.002)
        for i in range(10):
            in_call = True
            await mem.add(f"a memory that takes an embedding pass {i}", "u", "a")
            in_call = False
        in_call = True
        await mem.search("embedding pass", "u", "a")
        in_call = False
    finally:
        task.cancel()
    assert ticks_in_call > 0


async def test_health_and_export(mem: Mem0Adapter) -> None:
    health = await mem.health()
    assert health.ok and health.provider == "mem0"
    ids = [await mem.add(f"export {i}", "u", "a") for i in range(3)]
    assert [i.id async for i in mem.export()] == ids
    assert [i.id async for i in mem.export(user_id="u")] == ids


# -- recalls: what each step's search returned, kept beside mem0 -------------------------------------

FACTS = (
    "TP53 is mutated in sample 7",
    "BRCA1 carries a frameshift in sample 3",
    "sample 7 was sequenced on a NovaSeq",
    "KRAS G12D found in the pancreatic line",
)


async def test_a_steps_search_is_recorded_with_its_step(mem: Mem0Adapter, tmp_path: Path) -> None:
    ids = [await mem.add(text, "u", "bio") for text in FACTS]
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id="u", run_id="r1")
    async with history.step("plan", tool="llm"):
        plain = await mem.search("TP53 mutation", "u", "bio", limit=2)
    async with history.step("fetch", tool="db"):
        await mem.search("KRAS", "u", "bio", limit=1, filters={"nope": {"$ne": 1}})
    recalls = await mem.recalls(workflow_id="wf")
    assert [(r.step_name, r.step_index, r.run_id, r.query, r.mode, r.limit) for r in recalls] == [
        ("plan", 0, "r1", "TP53 mutation", "semantic", 2), ("fetch", 1, "r1", "KRAS", "semantic", 1),
    ]
    first = recalls[0]
    assert [(h.id, h.rank, h.score, h.content) for h in first.hits] == [
        (h.id, rank, h.score, h.content) for rank, h in enumerate(plain, start=1)
    ]
    assert first.hits[0].id == ids[0] and first.hits[0].details == {"mode": "semantic", "found_by": ["semantic"],
                                                                    "semantic": {"rank": 1, "score": plain[0].score},
                                                                    "dense_path": "index"}
    assert recalls[1].filters == {"nope": {"$ne": 1}} and recalls[1].hits[0].id == ids[3]
    # the frames read them like any store's
    steps = traces_frame(mem, workflow_id="wf", recalls=True)
    assert steps[["step_name", "recalls", "recalled"]].values.tolist() == [["plan", 1, 2], ["fetch", 1, 1]]
    frame = recalls_frame(mem, "wf")
    assert frame[["step_name", "rank", "memory_id"]].values.tolist() == [
        ["plan", 1, plain[0].id], ["plan", 2, plain[1].id], ["fetch", 1, ids[3]],
    ]
    # kept in memkit's SQLite file beside mem0's (mem0 has no place for them)
    assert (tmp_path / "memkit-recalls.db").is_file()


def test_sync_steps_record_through_the_facade(shared_mem0: Any, tmp_path: Path) -> None:
    # The notebook path: memkit.Memory runs each call on memkit's own loop thread.
    mem = memkit.Memory(Mem0Adapter(tmp_path / "sync", memory=shared_mem0))
    try:
        mem.reset()
        target = mem.add("TP53 is mutated in sample 7", user_id="u", agent_id="bio")
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="bio", user_id="u")
        with history, history.step("plan", tool="llm"):
            mem.search("TP53", user_id="u", agent_id="bio", limit=1)
        (recall,) = mem.recalls(workflow_id="wf")
        assert (recall.step_name, recall.step_index, [h.id for h in recall.hits]) == ("plan", 0, [target])
    finally:
        mem.close()


async def test_a_recall_keeps_its_snapshot_after_the_memory_is_deleted(mem: Mem0Adapter) -> None:
    target = await mem.add("TP53 is mutated in sample 7", "u", "bio")
    with memkit.recall_scope("wf", step="s"):
        await mem.search("TP53", "u", "bio", limit=1)
    assert await mem.delete(target) is True
    (recall,) = await mem.recalls()
    assert [(h.id, h.content) for h in recall.hits] == [(target, "TP53 is mutated in sample 7")]
    assert await mem.get(target) is None


async def test_replay_reports_new_gone_and_moved(mem: Mem0Adapter) -> None:
    ids = [await mem.add(text, "u", "bio") for text in FACTS]
    with memkit.recall_scope("wf", step="s"):
        await mem.search("TP53 sample", "u", "bio", limit=3)
    (recall,) = await mem.recalls()
    assert set(replay_recall(mem, recall.id).change) == {"same"}
    top = recall.hits[0].id
    assert await mem.delete(top)
    newcomer = await mem.add("TP53 sample", "u", "bio")  # the query itself: cosine 1.0
    diff = replay_recall(mem, recall.id).set_index("memory_id")
    assert diff.loc[newcomer, "change"] == "new" and diff.loc[newcomer, "new_rank"] == 1
    assert diff.loc[top, "change"] == "gone" and bool(diff.loc[top, "deleted"])
    assert diff.loc[top, "content"] in FACTS and diff.loc[top, "old_rank"] == 1
    moved = diff[diff.change.isin(["up", "down"])]
    assert all((row.new_rank < row.old_rank) == (row.change == "up") for _, row in moved.iterrows())
    assert await mem.recalls() == [recall]  # replays are not recorded
    assert top in ids


async def test_as_of_leaves_out_later_memories(mem: Mem0Adapter) -> None:
    early = await mem.add("TP53 early finding", "u", "bio")
    await asyncio.sleep(0.002)
    cut = datetime.now(UTC)
    await asyncio.sleep(0.002)
    late = await mem.add("TP53 late finding", "u", "bio")
    assert {h.id for h in await mem.search("TP53", "u", "bio")} == {early, late}
    assert [h.id for h in await mem.search("TP53", "u", "bio", as_of=cut)] == [early]
    assert [h.id for h in await mem.search("", "u", "bio", as_of=cut)] == [early]
    with pytest.raises(InvalidInputError):
        await mem.search("TP53", "u", "bio", as_of="yesterday")  # type: ignore[arg-type]
    with memkit.recall_scope("wf", step="s"):
        await mem.search("TP53", "u", "bio", as_of=cut)
    (recall,) = await mem.recalls()
    assert recall.as_of == cut


async def test_no_recall_leaks_across_namespaces(mem: Mem0Adapter) -> None:
    await mem.add("TP53 in my tenant", "u1", "bio")
    await mem.add("TP53 in the other tenant", "u2", "bio")
    with memkit.recall_scope("wf", step="s"):
        await mem.search("TP53", "u1", "bio")
        await mem.search("TP53", "u2", "bio")
    (mine,) = await mem.recalls(user_id="u1", agent_id="bio")
    (theirs,) = await mem.recalls(user_id="u2", agent_id="bio")
    assert [h.content for h in mine.hits] == ["TP53 in my tenant"]
    assert [h.content for h in theirs.hits] == ["TP53 in the other tenant"]
    assert await mem.recalls(user_id="u1", agent_id="other") == []
    assert await mem.get_recall(theirs.id, user_id="u1", agent_id="bio") is None
    assert await mem.get_recall(theirs.id, user_id="u2", agent_id="bio") == theirs
    assert recalls_frame(mem, user_id="u2").content.tolist() == ["TP53 in the other tenant"]


async def test_jsonl_round_trip_keeps_recalls(mem: Mem0Adapter, shared_mem0: Any, tmp_path: Path) -> None:
    for text in FACTS:
        await mem.add(text, "u", "bio")
    with memkit.recall_scope("wf", step="s", run_id="r"):
        await mem.search("TP53 sample", "u", "bio")
        await memkit.build_context(mem, "KRAS", "u", "bio", token_budget=50)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    memkit.export_jsonl(mem, first, progress=False)
    recall_lines = [line for line in first.read_bytes().splitlines() if line.startswith(b'{"recall":')]
    assert len(recall_lines) == 2
    # Into a SQLite store (mem0 assigns its own memory ids, so memories cannot go back into mem0
    # under theirs) and out again: the same bytes.
    copy = SQLiteAdapter(tmp_path / "copy.db", embedder=None)
    try:
        assert memkit.import_jsonl(copy, first, progress=False) == len(FACTS) + 2
        memkit.export_jsonl(copy, second, progress=False)
    finally:
        await copy.aclose()
    assert first.read_bytes() == second.read_bytes()
    # Recalls go into another Mem0 store's recall file as given, and come out the same.
    other = Mem0Adapter(tmp_path / "other", memory=shared_mem0)
    try:
        assert await other.add_recalls(await mem.recalls()) == 2
        assert await other.recalls() == await mem.recalls()
        with pytest.raises(InvalidInputError):  # the ids are taken now: nothing is written
            await other.add_recalls(await mem.recalls())
        assert len(await other.recalls()) == 2
    finally:
        await other.aclose()


async def test_recording_off_records_nothing(mem: Mem0Adapter, shared_mem0: Any, tmp_path: Path) -> None:
    await mem.add("TP53 is mutated", "u", "bio")
    await mem.search("TP53", "u", "bio")
    await mem.search("", "u", "bio")
    with memkit.recall_scope("wf", step="s"), _recall.paused():
        await mem.search("TP53", "u", "bio")
    assert await mem.recalls() == []
    on = get_memory_provider({"url": f"mem0:///{tmp_path / 'on'}?record_recalls=true", "memory": shared_mem0})
    try:
        await on.search("TP53", "u", "bio")
        (recall,) = await on.recalls()  # type: ignore[attr-defined]
        assert recall.workflow_id is None and recall.step_index is None
    finally:
        await on.aclose()  # type: ignore[attr-defined]
    with pytest.raises(ConfigError):
        Mem0Adapter(tmp_path, memory=shared_mem0, record_recalls="yes")  # type: ignore[arg-type]


async def test_reset_clears_recalls_and_close_is_final(shared_mem0: Any, tmp_path: Path) -> None:
    store = Mem0Adapter(tmp_path, memory=shared_mem0)
    await store.reset()
    await store.add("TP53 is mutated", "u", "bio")
    with memkit.recall_scope("wf", step="s"):
        await store.search("TP53", "u", "bio")
    assert len(await store.recalls()) == 1
    await store.reset()
    assert await store.recalls() == []
    with memkit.recall_scope("wf", step="s"):
        await store.search("TP53", "u", "bio")
    await store.aclose()
    await store.aclose()
    store.close()
    reopened = Mem0Adapter(tmp_path, memory=shared_mem0)
    try:
        assert [r.query for r in await reopened.recalls()] == ["TP53"]  # written before the close
    finally:
        await reopened.aclose()
    for call in (store.recalls(), store.search("TP53", "u", "bio"), store.add("x", "u", "bio")):
        with pytest.raises(StorageError, match="is closed"):
            await call


async def test_without_a_recall_file_nothing_is_kept_and_it_says_so(
    shared_mem0: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    wrapped = Mem0Adapter(memory=shared_mem0)  # someone else's mem0, no folder of ours
    try:
        await wrapped.reset()
        await wrapped.add("TP53 is mutated", "u", "bio")
        with memkit.recall_scope("wf", step="s"), pytest.warns(RuntimeWarning, match="recalls_path"):
            hits = await wrapped.search("TP53", "u", "bio")
        assert [h.content for h in hits] == ["TP53 is mutated"]  # the search itself is unchanged
        assert await wrapped.recalls() == []
        with pytest.raises(ConfigError, match="recalls_path"):
            await wrapped.add_recalls([])
    finally:
        await wrapped.aclose()
    assert await asyncio.to_thread(lambda: list(tmp_path.rglob("*.db"))) == []


# -- config, URLs and the factory ---------------------------------------------------------------------


def test_factory_builds_oss_from_url_and_dict(shared_mem0: Any, tmp_path: Path) -> None:
    by_url = get_memory_provider({"url": f"mem0:///{tmp_path}", "memory": shared_mem0})
    assert isinstance(by_url, Mem0Adapter) and by_url.path == str(tmp_path) and by_url.mode == "oss"
    by_name = get_memory_provider({"provider": "mem0", "path": str(tmp_path), "memory": shared_mem0})
    assert isinstance(by_name, Mem0Adapter)
    assert repr(by_url) == f"Mem0Adapter(mode='oss', {str(tmp_path)!r})"
    by_url.close()
    by_name.close()


@pytest.mark.parametrize(
    "url",
    ["mem0://host/dir", "mem0:///dir?x=1", "mem0+cloud://", "mem0+cloud://key@api.mem0.ai", "mem0+cloud://h?y=2"],
)
def test_bad_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError) as err:
        Mem0Adapter.from_url(url)
    assert "key@" not in str(err.value)


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="mode"):
        Mem0Adapter(tmp_path, mode="hybrid")
    with pytest.raises(ConfigError, match="threshold"):
        Mem0Adapter(tmp_path, threshold=2)
    with pytest.raises(ConfigError, match="infer=True needs a real LLM"):
        Mem0Adapter(tmp_path, infer=True)


def test_oss_config_is_offline_by_construction(tmp_path: Path) -> None:
    cfg = oss_config(tmp_path)
    assert cfg["vector_store"]["provider"] == "qdrant"
    assert cfg["vector_store"]["config"]["path"] == str(tmp_path / "qdrant")
    assert cfg["vector_store"]["config"]["embedding_model_dims"] == 384
    assert cfg["embedder"]["provider"] == "langchain"
    vector = cfg["embedder"]["config"]["model"].embed_query("TP53 homologs")
    assert len(vector) == 384 and abs(sum(x * x for x in vector) - 1.0) < 1e-4
    assert cfg["history_db_path"] == str(tmp_path / "history.db")


async def test_the_folder_records_its_embedder_and_refuses_another(tmp_path: Path) -> None:
    class Tiny:
        name, dim = "tiny-test-embedder", 384

        def embed(self, texts: Any) -> Any:
            import numpy as np

            out = np.zeros((len(texts), 384), dtype=np.float32)
            out[:, 0] = 1.0
            return out

    first = Mem0Adapter(tmp_path / "store")
    assert first.embedder is not None and first.embedder.name == DEFAULT_EMBEDDER
    await first.add("kept with the default model", "u", "a")
    await first.aclose()
    with pytest.raises(ConfigError, match="same embedder"):
        Mem0Adapter(tmp_path / "store", embedder=Tiny())
    again = Mem0Adapter(tmp_path / "store")  # left out: the recorded one
    assert again.embedder is not None and again.embedder.name == DEFAULT_EMBEDDER
    await again.aclose()
    # A folder an older memkit filled (vectors, no record) must be told which model made them.
    legacy = tmp_path / "legacy"
    (legacy / "qdrant").mkdir(parents=True)
    with pytest.raises(ConfigError, match="records no embedder"):
        Mem0Adapter(legacy)
    with pytest.raises(ConfigError, match="always embeds"):
        get_memory_provider(f"mem0:///{tmp_path}/other?embedder=none")


async def test_reopen_reads_the_same_folder(tmp_path: Path) -> None:
    # Its own store and its own model load: the shared one never closes.
    first = Mem0Adapter(tmp_path / "store")
    try:
        mem_id = await first.add("survives a restart", "u", "a", {"gene": "TP53"})
        trace_id = await first.add_trace("a", "wf", {"tool": "blast"}, user_id="u")
    finally:
        await first.aclose()
    second = Mem0Adapter(tmp_path / "store")
    try:
        items = await second.get_all("u", "a")
        assert [i.id for i in items] == [trace_id, mem_id]
        assert items[1].metadata == {"gene": "TP53"}
        hits = await second.search("restart", "u", "a")
        assert hits[0].id == mem_id and hits[0].score is not None and hits[0].score > 0.7
        stats = await second.stats()
        assert stats.memories == 2 and stats.storage_bytes is not None and stats.storage_bytes > 0
    finally:
        await second.aclose()
    assert (tmp_path / "store" / "qdrant").is_dir() and (tmp_path / "store" / "history.db").is_file()


# -- offline guarantee ------------------------------------------------------------------------------------

_AUDIT = textwrap.dedent(
    """
    import asyncio, json, sys

    attempts = []

    def hook(event, args):
        if event in ("socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto"):
            attempts.append([event, repr(args)[:200]])

    sys.addaudithook(hook)  # before memkit, mem0 or langchain are imported

    from memkit.adapters import Mem0Adapter

    async def main():
        mem = Mem0Adapter(sys.argv[1])
        ids = [await mem.add(f"offline note {i}", "u", "a", {"i": i}) for i in range(3)]
        await mem.add_trace("a", "wf", {"tool": "blast"}, user_id="u")
        assert [h.id for h in await mem.search("offline note 2", "u", "a", limit=1)] == [ids[2]]
        assert len(await mem.get_all("u", "a")) == 4
        await mem.stats(); await mem.namespaces(); await mem.health()
        assert await mem.delete(ids[0]) is True
        await mem.reset()
        await mem.aclose()

    asyncio.run(main())
    print(json.dumps({"attempts": attempts, "modules": sorted(m for m in ("mem0", "torch") if m in sys.modules)}))
    """
)


def test_oss_mode_makes_no_network_call(tmp_path: Path) -> None:
    # A fresh interpreter, so mem0's import-time behaviour (telemetry, notices) is audited too.
    env = {k: v for k, v in __import__("os").environ.items()
           if k not in ("MEM0_TELEMETRY", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "MEM0_DIR")}
    env["OMP_NUM_THREADS"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", _AUDIT, str(tmp_path / "store")],
        capture_output=True, text=True, timeout=600, env=env, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["modules"] == ["mem0"]  # the real mem0 ran, and torch never loaded
    assert report["attempts"] == []
    assert (tmp_path / "store" / "mem0_home").is_dir()  # MEM0_DIR moved next to the store


def test_readme_mem0_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("## Mem0\n"):]
    code = section[section.index("```python\n") + 10 : section.index("```\n", section.index("```python\n"))]
    monkeypatch.chdir(tmp_path)  # the example's data/mem0 lands in a temporary folder
    exec(compile(code, "README.md#mem0", "exec"), {})
    assert (tmp_path / "data" / "mem0" / "qdrant").is_dir()


def test_llm_key_in_a_bad_config_is_not_echoed(tmp_path: Path) -> None:
    secret = "sk-test-0123456789abcdef"
    bad = {**oss_config(tmp_path), "llm": {"provider": "nonexistent", "config": {"api_key": secret}}}
    with pytest.raises(ConfigError) as err:
        Mem0Adapter(tmp_path, config=bad)
    # mem0's pydantic error echoes the llm section, key included; the adapter's does not.
    assert secret not in str(err.value) and "Unsupported LLM provider" in str(err.value)


@pytest.mark.parametrize("mode", ["oss", "cloud"])
def test_a_wrapped_object_that_is_not_mem0_is_refused_before_anything_is_made(tmp_path: Path, mode: str) -> None:
    """``memory=`` takes a mem0 Memory (or MemoryClient): anything else is named, and no folder appears."""
    target = tmp_path / "never"
    with pytest.raises(InvalidInputError, match=r"memory must be a mem0 Memory.*got dict"):
        Mem0Adapter(target, mode=mode, memory={"add": None})  # type: ignore[arg-type]
    assert not target.exists()


def test_langgraph_store_refuses_mem0_when_it_opens(shared_mem0: Any, tmp_path: Path) -> None:
    # A LangGraph item is found again by the id its namespace and key give it; mem0 assigns ids itself.
    pytest.importorskip("langgraph.store.base", reason="needs memkit[langgraph]")
    from memkit.langgraph import MemkitStore

    adapter = Mem0Adapter(tmp_path, memory=shared_mem0)
    try:
        with pytest.raises(ConfigError, match="assigns every id itself"):
            MemkitStore(adapter, user_id="alice", agent_id="a")
        assert memkit.Memory(adapter).get_all("alice", "a") == []
    finally:
        adapter.close()
