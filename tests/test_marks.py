"""Marks: a researcher judges what a step recalled (and the step), and the marks become an evaluation set."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit import InvalidInputError, NotFoundError, SupportsMarks
from memkit._sync import run_sync
from memkit.adapters import Mem0Adapter
from memkit.adapters._memory._adapter import InMemoryAdapter
from memkit.adapters._sqlite import SQLiteAdapter
from memkit.adapters._sqlite._schema import MIGRATIONS, SCHEMA_VERSION, statements
from memkit.frames import ANNOTATION_COLUMNS, annotations_frame
from memkit.traces import ExecutionHistory

FACTS = (
    "TP53 is mutated in sample 7",
    "BRCA1 carries a frameshift in sample 3",
    "sample 7 was sequenced on a NovaSeq",
    "TP53 loss correlates with poor response",
    "KRAS G12D found in the pancreatic line",
)
# What a researcher may type: markup, quotes, SQL and Cypher. Kept as text, never run.
HOSTILE = "<img src=x onerror=alert(1)>'); DROP TABLE marks; -- \"}) MATCH (n) DETACH DELETE n //\nsecond line"


@pytest.fixture(params=["memory", "sqlite", "falkordb", "neo4j"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """``(kind, make)``: ``make(name)`` opens an empty store (another name, another empty store)."""
    kind = request.param
    opened: list[memkit.Memory] = []

    def make(name: str) -> memkit.Memory:
        if kind == "memory":
            url = "memory://"
        elif kind == "sqlite":
            url = f"sqlite:///{tmp_path / name}.db?embedder=none"
        elif kind == "falkordb":
            url = str(request.getfixturevalue("falkordb_server").url(f"marks-{name}-{uuid.uuid4().hex[:8]}"))
        else:
            url = str(request.getfixturevalue("neo4j_uri"))  # one database for the session
        mem = memkit.open(url)
        if kind == "neo4j":
            mem.reset()
        opened.append(mem)
        return mem

    yield kind, make
    for mem in opened:
        if kind in ("falkordb", "neo4j"):
            mem.reset()
        mem.close()


def _run(mem: memkit.Memory, user: str, agent: str = "bio", *, workflow: str = "wf", run_id: str | None = None,
         query: str = "TP53 sample", trace_user: str | None = None) -> tuple[memkit.Recall, str]:
    """One step of an agent that searches ``user``'s memories (traces kept under ``trace_user``)."""
    history = ExecutionHistory(memory_provider=mem, workflow_id=workflow, agent_id=agent,
                               user_id=trace_user or user, run_id=run_id)
    with history.step("plan", tool="llm"):
        mem.search(query, user_id=user, agent_id=agent)
    recall = [r for r in mem.recalls(user_id=user, agent_id=agent) if r.query == query][-1]
    steps = mem.get_all(trace_user or user, agent, limit=100, filters={"type": "trace", "workflow_id": workflow})
    return recall, steps[0].id


def _fill(mem: memkit.Memory, user: str = "u1", agent: str = "bio") -> list[str]:
    return [mem.add(text, user_id=user, agent_id=agent) for text in FACTS]


def test_capability_is_declared() -> None:
    assert isinstance(InMemoryAdapter(), SupportsMarks)
    store = SQLiteAdapter(":memory:", embedder=None)
    assert isinstance(store, SupportsMarks)
    store.close()


def test_marks_round_trip_through_export_and_import(backend: tuple[str, Any], tmp_path: Path) -> None:
    kind, make = backend
    mem = make("source")
    _fill(mem)
    recall, step_id = _run(mem, "u1", run_id="r1")
    assert len(recall.hits) >= 2
    first, second = recall.hits[0].id, recall.hits[1].id
    relevant = mem.mark_memory(recall.id, first, relevant=True, user_id="u1", agent_id="bio", note=HOSTILE)
    mem.mark_memory(recall.id, second, relevant=True, user_id="u1", agent_id="bio")
    # Marking the same memory again replaces the mark (one per target).
    mem.mark_memory(recall.id, second, relevant=False, user_id="u1", agent_id="bio", note="off topic")
    step = mem.mark_step(step_id, good=False, user_id="u1", agent_id="bio", note="planned without KRAS")
    kept = mem.marks()
    assert [(m.kind, m.label, m.memory_id) for m in kept] == [
        ("memory", "relevant", first), ("memory", "not_relevant", second), ("step", "bad", None)]
    assert kept[0] == relevant and kept[0].note == HOSTILE  # stored as typed, every byte
    assert kept[2] == step and (step.workflow_id, step.run_id, step.step_index, step.step_name) == (
        "wf", "r1", 0, "plan")
    assert mem.marks(workflow_id="wf", run_id="r1") == kept
    assert mem.marks(run_id="r2") == []

    path = tmp_path / "store.jsonl"
    lines = memkit.export_jsonl(mem, path, progress=False)
    text = path.read_text("utf-8")
    mark_lines = [json.loads(line)["mark"] for line in text.splitlines() if line.startswith('{"mark"')]
    assert [m["label"] for m in mark_lines] == ["relevant", "not_relevant", "bad"]
    if kind == "neo4j":
        mem.reset()
        target = mem
    else:
        target = make("target")
    assert target.marks() == []
    assert memkit.import_jsonl(target, path, progress=False) == lines
    assert target.marks() == kept
    frame = annotations_frame(target)
    assert list(frame.columns) == list(ANNOTATION_COLUMNS)
    assert frame[["kind", "label", "note"]].values.tolist() == [
        ["memory", "relevant", HOSTILE], ["memory", "not_relevant", "off topic"],
        ["step", "bad", "planned without KRAS"]]
    assert frame["step_index"].tolist() == [0, 0, 0]
    # docs/recalls.md: recalls beside their verdicts.
    from memkit import frames

    verdicts = frames.annotations_frame(target, "wf")[["recall_id", "memory_id", "label", "note"]]
    merged = frames.recalls_frame(target, "wf").merge(verdicts, on=["recall_id", "memory_id"], how="left")
    assert merged.set_index("memory_id").loc[[first, second], "label"].tolist() == ["relevant", "not_relevant"]
    assert merged["label"].isna().sum() == len(recall.hits) - 2
    # The evaluation set comes back with them: the recall reruns against the imported memories.
    result = memkit.evaluate(target, k=5)
    assert len(result.queries) == 1 and result.queries[0].relevant == (first,)
    again = tmp_path / "again.jsonl"
    memkit.export_jsonl(target, again, progress=False)
    assert again.read_text("utf-8").splitlines()[-3:] == path.read_text("utf-8").splitlines()[-3:]


def test_marks_never_leak_between_namespaces(backend: tuple[str, Any], tmp_path: Path) -> None:
    """Two users share a workflow id and write runs without run ids, the way an agent often does."""
    _, make = backend
    mem = make("leak")
    _fill(mem, "u1")
    _fill(mem, "u2")
    recall1, step1 = _run(mem, "u1")
    recall2, step2 = _run(mem, "u2")
    mem.mark_memory(recall1.id, recall1.hits[0].id, relevant=True, user_id="u1", agent_id="bio", note="u1's")
    mem.mark_step(step1, good=True, user_id="u1", agent_id="bio")
    before = mem.marks()
    # u2 cannot mark (or overwrite) u1's recall or step, even knowing their ids.
    with pytest.raises(NotFoundError, match="no recall"):
        mem.mark_memory(recall1.id, recall1.hits[0].id, relevant=False, user_id="u2", agent_id="bio")
    with pytest.raises(NotFoundError, match="no trace step"):
        mem.mark_step(step1, good=False, user_id="u2", agent_id="bio")
    assert mem.marks() == before
    # u2's own marks on the same workflow (same step index, no run id) stay u2's.
    mem.mark_memory(recall2.id, recall2.hits[0].id, relevant=False, user_id="u2", agent_id="bio", note="u2's")
    mem.mark_step(step2, good=False, user_id="u2", agent_id="bio")
    assert {(m.user_id, m.label) for m in mem.marks(user_id="u1", agent_id="bio")} == {
        ("u1", "relevant"), ("u1", "good")}
    assert {(m.user_id, m.label) for m in mem.marks(user_id="u2", workflow_id="wf")} == {
        ("u2", "not_relevant"), ("u2", "bad")}
    assert mem.marks(user_id="u1", agent_id="other") == []
    # Unmarking is namespaced too: u2 naming u1's mark id removes nothing.
    u1_step = next(m for m in mem.marks(user_id="u1") if m.kind == "step")
    assert mem.unmark(u1_step.id, user_id="u2", agent_id="bio") is False
    assert u1_step in mem.marks(user_id="u1")
    assert mem.unmark(u1_step.id, user_id="u1", agent_id="bio") is True
    assert mem.unmark(u1_step.id, user_id="u1", agent_id="bio") is False
    assert [m.kind for m in mem.marks(user_id="u1")] == ["memory"]
    mem.mark_step(step1, good=True, user_id="u1", agent_id="bio")
    assert set(annotations_frame(mem, "wf", user_id="u2")["note"]) == {"u2's", ""}
    path = tmp_path / "u2.jsonl"
    memkit.export_jsonl(mem, path, user_id="u2", progress=False)
    exported = [json.loads(line)["mark"] for line in path.read_text("utf-8").splitlines() if line.startswith('{"mark"')]
    assert {m["user_id"] for m in exported} == {"u2"} and len(exported) == 2
    # u2 marked nothing relevant: nothing to evaluate there; u1's evaluation searches u1's memories only.
    assert memkit.evaluate(mem, user_id="u2").queries == ()
    (score,) = memkit.evaluate(mem, user_id="u1").queries
    own = {item.id for item in mem.get_all("u1", "bio", limit=100)}
    assert set(score.ranked) <= own


def test_bad_marks_are_refused_and_change_nothing(tmp_path: Path) -> None:
    mem = memkit.open(f"sqlite:///{tmp_path / 'bad.db'}?embedder=none")
    _fill(mem)
    recall, step_id = _run(mem, "u1")
    hit = recall.hits[0].id
    ns = {"user_id": "u1", "agent_id": "bio"}
    cases: list[tuple[type[Exception], str, Any]] = [
        (NotFoundError, "no recall 'nope'", lambda: mem.mark_memory("nope", hit, relevant=True, **ns)),
        (InvalidInputError, "not among", lambda: mem.mark_memory(recall.id, "other-memory", relevant=True, **ns)),
        (InvalidInputError, "relevant must be True or False",
         lambda: mem.mark_memory(recall.id, hit, relevant="yes", **ns)),  # type: ignore[arg-type]
        (InvalidInputError, "relevant must be True or False",
         lambda: mem.mark_memory(recall.id, hit, relevant=1, **ns)),  # type: ignore[arg-type]
        (InvalidInputError, "good must be True or False",
         lambda: mem.mark_step(step_id, good=None, **ns)),  # type: ignore[arg-type]
        (InvalidInputError, "note must be a string",
         lambda: mem.mark_memory(recall.id, hit, relevant=True, note=42, **ns)),  # type: ignore[arg-type]
        (InvalidInputError, "control characters",
         lambda: mem.mark_memory(recall.id, hit, relevant=True, note="\x1b[2J\x1b[31mgotcha", **ns)),
        (InvalidInputError, "control characters",
         lambda: mem.mark_step(step_id, good=True, note="a\x00b", **ns)),
        (InvalidInputError, "limit is 2000", lambda: mem.mark_step(step_id, good=True, note="x" * 2001, **ns)),
        (InvalidInputError, "lone surrogate", lambda: mem.mark_step(step_id, good=True, note="\ud800", **ns)),
        (InvalidInputError, "recall_id must be a string",
         lambda: mem.mark_memory(None, hit, relevant=True, **ns)),  # type: ignore[arg-type]
        (InvalidInputError, "user_id", lambda: mem.mark_step(step_id, good=True, user_id="", agent_id="bio")),
        (NotFoundError, "no trace step", lambda: mem.mark_step(hit, good=True, **ns)),  # a memory, not a step
        (NotFoundError, "no trace step", lambda: mem.mark_step("missing", good=True, **ns)),
        (InvalidInputError, "mark id must not be empty", lambda: mem.unmark("", **ns)),
        (InvalidInputError, "mark_ids must be a list",
         lambda: run_sync(mem.provider.remove_marks("abc", **ns))),  # type: ignore[attr-defined]
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
    assert mem.marks() == []
    # A file with a forged mark (an id that is not its target's) imports nothing at all.
    mark = mem.mark_memory(recall.id, hit, relevant=True, **ns)
    forged = mark.model_copy(update={"user_id": "u2"})
    path = tmp_path / "forged.jsonl"
    path.write_text(
        json.dumps({"content": "new", "user_id": "u3", "agent_id": "bio"}) + "\n"
        + '{"mark":' + forged.model_dump_json() + "}\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="does not match"):
        memkit.import_jsonl(mem, path, progress=False)
    assert mem.get_all("u3", "bio") == [] and mem.marks() == [mark]
    path.write_text('{"mark": {"id": "x", "label": "great"}}\n', encoding="utf-8")
    with pytest.raises(InvalidInputError, match="not a valid mark"):
        memkit.import_jsonl(mem, path, progress=False)
    with pytest.raises(InvalidInputError, match="marks must be"):
        memkit.evaluate(mem, marks=[{"label": "relevant"}])  # type: ignore[list-item]
    with pytest.raises(InvalidInputError, match="k must be"):
        memkit.evaluate(mem, k=0)
    mem.close()


def test_stores_without_marks_refuse_clearly() -> None:
    class Plain:  # a provider written to the port alone
        limits = memkit.Limits()

        async def add(self, *args: Any, **kwargs: Any) -> str:
            return "m1"

        async def add_trace(self, *args: Any, **kwargs: Any) -> str:
            return "t1"

        async def search(self, *args: Any, **kwargs: Any) -> list[Any]:
            return []

        async def get_all(self, *args: Any, **kwargs: Any) -> list[Any]:
            return []

        async def delete(self, *args: Any, **kwargs: Any) -> bool:
            return False

        async def reset(self) -> bool:
            return True

    mem = memkit.Memory(Plain())
    with pytest.raises(NotImplementedError, match="does not support mark_memory"):
        mem.mark_memory("r", "m", relevant=True, user_id="u", agent_id="a")
    with pytest.raises(NotImplementedError, match="does not support marks"):
        mem.marks()
    with pytest.raises(NotImplementedError, match="does not keep marks"):
        annotations_frame(mem)


# -- the evaluation set --------------------------------------------------------------------------

LIBRARY = {
    "a1": "kinase inhibitor resistance in lung cancer",
    "a2": "kinase inhibitor dosing schedule",
    "a3": "kinase pathway overview",
    "a4": "inhibitor toxicity in mice",
    "b1": "sequencing depth for tumour samples",
    "b2": "tumour samples stored at minus eighty",
    "b3": "sequencing run failed on lane two",
}


def _library(mem: memkit.Memory) -> dict[str, str]:
    """id -> text: memories with fixed ids, so the test can name them."""
    mem.add_many([{"id": key, "content": text, "user_id": "lab", "agent_id": "bio"} for key, text in LIBRARY.items()])
    return LIBRARY


def test_evaluate_reproduces_known_recall_at_k_and_mrr() -> None:
    mem = memkit.open("memory://")
    _library(mem)
    with memkit.recall_scope("wf", step="look up", step_index=0, run_id="r1"):
        mem.search("kinase inhibitor", user_id="lab", agent_id="bio", limit=4, mode="keyword")
        mem.search("tumour samples sequencing", user_id="lab", agent_id="bio", limit=4, mode="keyword")
        mem.search("mice", user_id="lab", agent_id="bio", limit=4, mode="keyword")
    kinase, tumour, mice = mem.recalls()
    ranked_k = [h.id for h in kinase.hits]
    ranked_t = [h.id for h in tumour.hits]
    ns = {"user_id": "lab", "agent_id": "bio"}
    # kinase: relevant at ranks 1 and 3 (rank 2 judged not relevant); tumour: relevant at rank 2 only.
    mem.mark_memory(kinase.id, ranked_k[0], relevant=True, **ns)
    mem.mark_memory(kinase.id, ranked_k[1], relevant=False, **ns)
    mem.mark_memory(kinase.id, ranked_k[2], relevant=True, **ns)
    mem.mark_memory(tumour.id, ranked_t[1], relevant=True, **ns)
    mem.mark_memory(mice.id, mice.hits[0].id, relevant=False, **ns)  # nothing relevant: skipped
    before = len(mem.recalls())

    result = memkit.evaluate(mem, k=2)
    # recall@2: kinase finds 1 of 2, tumour 1 of 1 -> mean 0.75; RR: 1 and 1/2 -> MRR 0.75.
    assert (result.recall_at_k, result.mrr, result.skipped) == (0.75, 0.75, 1)
    assert (result.recall_at_k_then, result.mrr_then) == (0.75, 0.75)  # the same store: the same answer
    assert [q.query for q in result.queries] == ["kinase inhibitor", "tumour samples sequencing"]
    first = result.queries[0]
    assert (first.recall_at_k, first.rr, first.found, first.missed) == (0.5, 1.0, (ranked_k[0],), (ranked_k[2],))
    assert len(mem.recalls()) == before  # rerunning is not recalling
    frame = result.frame()
    assert frame[["query", "relevant", "not_relevant", "recall_at_k", "rr"]].values.tolist() == [
        ["kinase inhibitor", 2, 1, 0.5, 1.0], ["tumour samples sequencing", 1, 0, 1.0, 0.5]]
    assert frame["not_relevant_found"].tolist() == [[ranked_k[1]], []]
    assert "recall@2 0.750 (then 0.750)" in str(result)
    # k=3 takes kinase's third memory in: recall@3 = (1 + 1) / 2.
    assert memkit.evaluate(mem, k=3).recall_at_k == 1.0

    # A retrieval change: the best kinase memory is deleted, so today's search ranks the other
    # relevant one first? No: it is gone, so it can only be missed. recall@2 for kinase drops to
    # 1/2 (the third one moves up to rank 2), its RR to 1/2; "then" stays what the agent saw.
    mem.delete(ranked_k[0])
    after = memkit.evaluate(mem, k=2)
    assert after.queries[0].ranked[:2] == (ranked_k[1], ranked_k[2])
    assert (after.queries[0].recall_at_k, after.queries[0].rr) == (0.5, 0.5)
    assert (after.recall_at_k, after.mrr, after.recall_at_k_then) == (0.75, 0.5, 0.75)
    # Marks passed by hand: one query only.
    only = memkit.evaluate(mem, [m for m in mem.marks() if m.recall_id == tumour.id], k=2)
    assert [q.recall_id for q in only.queries] == [tumour.id]


def test_evaluate_with_another_setting(tmp_path: Path) -> None:
    """``mode=`` and search options rerun the set under another retrieval setting."""
    mem = memkit.open(f"sqlite:///{tmp_path / 'modes.db'}?embedder=static")
    _library(mem)
    with memkit.recall_scope("wf", step="s"):
        mem.search("kinase inhibitor", user_id="lab", agent_id="bio", limit=4, mode="keyword")
    (recall,) = mem.recalls()
    mem.mark_memory(recall.id, recall.hits[0].id, relevant=True, user_id="lab", agent_id="bio")
    keyword = memkit.evaluate(mem, k=1)
    assert keyword.queries[0].mode == "keyword" and keyword.recall_at_k == 1.0
    semantic = memkit.evaluate(mem, k=4, mode="semantic")
    assert semantic.queries[0].mode == "semantic" and len(semantic.queries[0].ranked) == 4
    # The options reach the search: all weight on one leg ranks as that leg does.
    semantic_only = memkit.evaluate(mem, k=4, mode="hybrid", hybrid=memkit.HybridConfig(alpha=1.0))
    keyword_only = memkit.evaluate(mem, k=4, mode="hybrid", hybrid=memkit.HybridConfig(alpha=0.0))
    assert semantic_only.queries[0].ranked == semantic.queries[0].ranked
    assert keyword_only.queries[0].ranked[0] == recall.hits[0].id
    mem.close()


# -- the SQLite schema -------------------------------------------------------------------------


def test_a_version_7_store_migrates_and_keeps_its_recalls(tmp_path: Path) -> None:
    path = tmp_path / "v7.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for target in range(1, 8):
        step = MIGRATIONS[target]
        if callable(step):
            step(conn)
        else:
            for statement in statements(step):
                conn.execute(statement)
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    # A version 7 store in use (recalls, no marks table), opened by this memkit.
    old = SQLiteAdapter(path, embedder=None)
    old.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE marks")
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    mem = memkit.open(f"sqlite:///{path}?embedder=none")
    _fill(mem)
    recall, _ = _run(mem, "u1")
    mem.close()

    assert SCHEMA_VERSION >= 9  # marks came with version 9
    mem = memkit.open(f"sqlite:///{path}?embedder=none")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    assert [r.id for r in mem.recalls()] == [recall.id]
    mark = mem.mark_memory(recall.id, recall.hits[0].id, relevant=True, user_id="u1", agent_id="bio")
    mem.close()
    with memkit.open(f"sqlite:///{path}?embedder=none") as again:
        assert again.marks() == [mark]
        again.reset()
        assert again.marks() == []


# -- mem0 keeps marks beside its recalls -------------------------------------------------------


@pytest.fixture(scope="module")
def mem0_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("mem0-marks")
    owner = Mem0Adapter(root)
    yield owner._backend.memory  # type: ignore[attr-defined]
    owner.close()


def test_mem0_keeps_marks_in_its_recall_file(mem0_backend: Any, tmp_path: Path) -> None:
    store = Mem0Adapter(tmp_path / "m", memory=mem0_backend)
    mem = memkit.Memory(store)
    mem.reset()
    for text in FACTS:
        mem.add(text, user_id="u1", agent_id="bio")
    with memkit.recall_scope("wf", step="s", run_id="r"):
        mem.search("TP53 sample", user_id="u1", agent_id="bio")
    (recall,) = mem.recalls()
    mark = mem.mark_memory(recall.id, recall.hits[0].id, relevant=True, user_id="u1", agent_id="bio", note=HOSTILE)
    assert mem.marks(user_id="u1") == [mark] and mem.marks(user_id="u2") == []
    path = tmp_path / "mem0.jsonl"
    memkit.export_jsonl(mem, path, progress=False)
    mem.close()
    # Into SQLite (mem0 assigns its own memory ids): the marks and the recall they judge arrive together.
    with memkit.open(f"sqlite:///{tmp_path / 'copy.db'}?embedder=none") as copy:
        memkit.import_jsonl(copy, path, progress=False)
        assert copy.marks() == [mark]
        assert memkit.evaluate(copy, mode="keyword").queries[0].relevant == (recall.hits[0].id,)
    reopened = Mem0Adapter(tmp_path / "m", memory=mem0_backend)
    with memkit.Memory(reopened) as again:
        assert again.marks() == [mark]  # on disk, beside the recalls


# -- TraceReplay's step detail -------------------------------------------------------------------


def test_trace_replay_marks_from_the_step_detail(tmp_path: Path) -> None:
    from memkit.widgets import TraceReplay

    mem = memkit.open(f"sqlite:///{tmp_path / 'panel.db'}?embedder=none")
    _fill(mem, "alice")
    _fill(mem, "bob")
    # Traces kept under "system" while the step searches alice's namespace, as agents often do.
    recall, step_id = _run(mem, "alice", run_id="r1", trace_user="system")
    _run(mem, "bob", run_id="r1", workflow="wf-bob")
    panel = TraceReplay(mem)
    panel.run = next(r["run"] for r in panel.runs if r["workflow_id"] == "wf")
    panel.step = 0
    assert panel.detail["keeps_marks"] and panel.detail["step_mark"] == {"label": None, "note": ""}
    assert panel.detail["hit_marks"] == {}
    first, second = recall.hits[0].id, recall.hits[1].id
    # A click, as the browser sends it.
    panel._on_message(panel, {"action": "mark_memory", "recall": recall.id, "memory": first, "relevant": True,
                              "note": HOSTILE}, [])
    assert panel.detail["hit_marks"] == {f"{recall.id} {first}": {"label": "relevant", "note": HOSTILE}}
    assert panel.message_kind == "ok" and "relevant" in panel.message
    panel.mark_memory(recall.id, second, relevant=False)
    panel._on_message(panel, {"action": "mark_step", "good": False, "note": "skipped the KRAS memory"}, [])
    assert panel.detail["step_mark"] == {"label": "bad", "note": "skipped the KRAS memory"}
    marks = mem.marks()
    assert [(m.user_id, m.kind, m.label) for m in marks] == [
        ("alice", "memory", "relevant"), ("alice", "memory", "not_relevant"), ("system", "step", "bad")]
    assert marks[2].step_id == step_id
    # Bad clicks say why in the panel and change nothing.
    for bad in ({"action": "mark_memory", "recall": recall.id, "memory": first, "relevant": "yes"},
                {"action": "mark_memory", "recall": "forged", "memory": first, "relevant": True},
                {"action": "mark_memory", "recall": recall.id, "memory": "not-recalled", "relevant": True},
                {"action": "mark_step", "good": True, "note": "\x1b[31m"},
                {"action": "mark_step", "good": True, "note": ["a list"]}):
        panel._on_message(panel, bad, [])
        assert panel.message_kind == "error" and panel.message.startswith("not marked:"), bad
    assert mem.marks() == marks
    # bob's recall is not the open step's: it cannot be marked from here.
    (bobs,) = mem.recalls(user_id="bob")
    with pytest.raises(NotFoundError, match="the open step made no recall"):
        panel.mark_memory(bobs.id, bobs.hits[0].id, relevant=True)
    # Reopening the step reads the marks back from the store.
    panel.step = -1
    panel.step = 0
    assert panel.detail["hit_marks"][f"{recall.id} {second}"] == {"label": "not_relevant", "note": ""}
    assert panel.detail["step_mark"]["label"] == "bad"
    # A click on the pressed button clears the mark.
    panel._on_message(panel, {"action": "mark_memory", "recall": recall.id, "memory": second, "relevant": None,
                              "note": ""}, [])
    assert f"{recall.id} {second}" not in panel.detail["hit_marks"] and panel.message.startswith("unmarked memory")
    assert panel.mark_step(good=None) is None and panel.detail["step_mark"]["label"] is None
    assert [m.label for m in mem.marks()] == ["relevant"]
    panel.step = -1
    with pytest.raises(InvalidInputError, match="open a step first"):
        panel.mark_step(good=True)
    mem.close()
