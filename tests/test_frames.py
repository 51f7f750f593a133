"""memkit.frames on both adapters: the SQLite fast path and the generic export path agree."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import pytest

import memkit
from memkit import frames
from memkit.adapters._memory._adapter import InMemoryAdapter
from memkit.adapters._sqlite import SQLiteAdapter, _schema
from memkit.frames import _reading, _usage
from memkit.traces import ExecutionHistory


def _record(history: ExecutionHistory) -> None:
    with history.step("run_blast", tool="blast", parameters={"db": "nr", "ids": [1, 2]}) as step:
        step.result = {"hits": 3}
    with pytest.raises(TimeoutError), history.step("fetch", tool="pdb", parameters={"id": "1abc"}):
        raise TimeoutError("network timeout")
    for step in history.retrying("align", tool="muscle", max_retries=2):
        with step:
            if step.attempt == 1:
                raise ValueError("schema validation failed")
            step.result = {"score": 0.9}


@pytest.fixture(params=["memory", "sqlite"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memkit.Memory]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'f.db'}"
    with memkit.open(url) as m:
        _record(ExecutionHistory(memory_provider=m, workflow_id="wf1", agent_id="bio", user_id="u1", run_id="r1"))
        _record(ExecutionHistory(memory_provider=m, workflow_id="wf2", agent_id="chem", user_id="u1"))
        m.add("a plain note", "u1", "bio", {"topic": "TP53"})
        yield m


def test_traces_frame_shape(mem: memkit.Memory) -> None:
    df = frames.traces_frame(mem)
    assert df.index.name == "step_id" and len(df) == 6
    assert list(df.columns[: len(frames.TRACE_COLUMNS)]) == list(frames.TRACE_COLUMNS)
    assert sorted(df.columns[len(frames.TRACE_COLUMNS) :]) == [
        "params.db", "params.id", "params.ids", "result.hits", "result.score",
    ]
    assert str(df["started_at"].dt.tz) == "UTC" and str(df["created_at"].dt.tz) == "UTC"
    assert list(df["step_name"]) == ["run_blast", "fetch", "align"] * 2  # replay order
    assert list(df["step_index"]) == [0, 1, 2, 0, 1, 2]
    assert list(df["retry_count"]) == [0, 0, 1] * 2
    assert list(df["status"]) == ["success", "failed", "success"] * 2
    first = df.iloc[0]
    assert first["params.ids"] == [1, 2] and first["result.hits"] == 3 and first["run_id"] == "r1"
    assert df.iloc[1]["error"] == "TimeoutError: network timeout" and df.iloc[0]["error"] is None
    assert (df["duration_s"] >= 0).all()
    lists = [v for v in df["params.ids"] if isinstance(v, list)]
    assert len(lists) == 2 and lists[0] is not lists[1]  # equal cells are still separate objects
    assert df["params.db"].dtype == object
    assert (df["ended_at"] >= df["started_at"]).all()
    ids = {m.id for m in mem.get_all("u1", "bio", limit=50, filters={"type": "trace"})}
    assert set(df[df.agent_id == "bio"].index) == ids


def test_traces_frame_filters(mem: memkit.Memory) -> None:
    assert set(frames.traces_frame(mem, workflow_id="wf2")["agent_id"]) == {"chem"}
    assert len(frames.traces_frame(mem, agent_id="bio")) == 3
    assert len(frames.traces_frame(mem, user_id="nobody")) == 0
    failed = frames.traces_frame(mem, status="failed")
    assert list(failed["tool"]) == ["pdb", "pdb"]
    assert len(frames.traces_frame(mem, since=datetime(2100, 1, 1, tzinfo=UTC))) == 0
    assert len(frames.traces_frame(mem, since="2000-01-01T00:00:00Z")) == 6
    with pytest.raises(ValueError):
        frames.traces_frame(mem, status="exploded")


def test_empty_store_gives_an_empty_frame_with_the_columns() -> None:
    df = frames.traces_frame(InMemoryAdapter())
    assert df.empty and list(df.columns) == list(frames.TRACE_COLUMNS)


@pytest.mark.parametrize("in_ram", [False, True], ids=["file", "ram"])
def test_sqlite_fast_path_equals_the_generic_path(tmp_path: Path, in_ram: bool) -> None:
    store = SQLiteAdapter(":memory:" if in_ram else tmp_path / "x.db")
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="a")
    _record(history)
    history.add_item(history.items[0].__class__(step_name="odd\x1fname", tool="t", status="skipped"))  # type: ignore[arg-type]
    # Odd values the trace columns must survive: a separator inside an
    # error, int64's minimum (the missing marker) and a fractional count (missing in
    # both paths; add_trace refuses one now, an older memkit stored it), nested containers twice.
    odd = {"step_name": "s", "tool": "t", "status": "failed", "error": "bad\x1fsep\x1e", "step_index": -(2**63),
           "duration": None, "parameters": {"deep": {"a": [1, {"b": 2}]}, "q": "x"}}
    for _ in range(2):
        record = memkit._core._records.trace_record("a", "wf", odd)
        record.metadata["trace"]["retry_count"] = 1.5
        asyncio.run(store.add_many([{"content": record.content, "user_id": record.user_id,
                                     "agent_id": record.agent_id, "metadata": record.metadata}]))
    fast = frames.traces_frame(store)
    slow = _reading._trace_frame(asyncio.run(_reading._export_trace_columns(store, None, None, None, None, None)))
    slow = _usage.with_usage(slow, _usage.found_of(asyncio.run(_reading._payloads(store, None, None, set(slow.index)))))
    pd.testing.assert_frame_equal(fast, slow)
    assert fast.iloc[3]["step_name"] == "odd\x1fname"
    last = fast.iloc[-1]
    assert last["error"] == "bad\x1fsep\x1e" and last["params.deep"] == {"a": [1, {"b": 2}]}
    assert pd.isna(last["step_index"]) and pd.isna(last["retry_count"]) and pd.isna(last["ended_at"])
    # Equal nested cells are separate objects at every depth.
    assert fast.iloc[-1]["params.deep"]["a"] is not fast.iloc[-2]["params.deep"]["a"]
    store.close()


@pytest.mark.parametrize("repeated", [True, False], ids=["repeated", "distinct"])
def test_json_cells_are_never_shared_between_rows(tmp_path: Path, repeated: bool) -> None:
    # Repeated cells are parsed once per distinct text, distinct ones one by one: both must
    # give every row its own lists and dicts.
    store = SQLiteAdapter(tmp_path / "x.db")
    for i in range(40):
        params = {"flat": [1, 2], "deep": {"a": [1, {"b": 2}]}, "n": 0 if repeated else i}
        asyncio.run(store.add_trace("a", "wf", {"tool": "t", "step_name": "s", "parameters": params,
                                                "error": "boom" if repeated else f"boom {i}"}))
    df = frames.traces_frame(store)
    store.close()
    assert len(df) == 40 and list(df["params.n"]) == ([0] * 40 if repeated else list(range(40)))
    assert set(df["error"]) == ({"boom"} if repeated else {f"boom {i}" for i in range(40)})
    for name in ("params.flat", "params.deep"):
        assert len({id(cell) for cell in df[name]}) == 40
    assert len({id(cell["a"][1]) for cell in df["params.deep"]}) == 40
    df.iloc[0]["params.deep"]["a"].append(3)
    assert df.iloc[1]["params.deep"] == {"a": [1, {"b": 2}]}


@pytest.mark.parametrize("version", [1, 3])
def test_migration_backfills_existing_traces(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for target in range(1, version + 1):
        for statement in _schema.statements(_schema.MIGRATIONS[target]):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    # Write traces with that schema's contract (its triggers, if any, fill its tables).
    records = [
        memkit._core._records.trace_record("a", "wf", {"tool": "blast", "step_name": "s", "parameters": {"k": 1},
                                                  "step_index": i, "duration": 0.5, "timestamp": 1.7e9})
        for i in range(2)
    ]
    for record in records:
        conn.execute(
            "INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (record.id, record.user_id, record.agent_id, record.content, json.dumps(record.metadata),
             record.created_us),
        )
    conn.close()
    upgraded = SQLiteAdapter(path)
    df = frames.traces_frame(upgraded)
    assert list(df.index) == [r.id for r in records] and list(df["params.k"]) == [1, 1]
    assert list(df["tool"]) == ["blast", "blast"] and list(df["step_index"]) == [0, 1]
    assert list(df["duration_s"]) == [0.5, 0.5]
    # New traces go through the new trigger and read back alongside the migrated ones.
    asyncio.run(upgraded.add_trace("a", "wf", {"tool": "align", "step_name": "t", "step_index": 2}))
    assert list(frames.traces_frame(upgraded)["tool"]) == ["blast", "blast", "align"]
    upgraded.close()


def test_deleting_a_trace_removes_its_row(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'd.db'}") as m:
        _record(ExecutionHistory(memory_provider=m, workflow_id="wf", agent_id="a"))
        step_id = frames.traces_frame(m).index[0]
        assert m.delete(step_id)
        assert step_id not in frames.traces_frame(m).index
        m.reset()
        assert frames.traces_frame(m).empty


def test_memories_frame(mem: memkit.Memory) -> None:
    df = frames.memories_frame(mem, "u1", "bio")
    assert df.index.name == "memory_id" and len(df) == 4
    assert df.iloc[0]["content"] == "a plain note"  # newest first
    assert df.iloc[0]["metadata.topic"] == "TP53"
    assert str(df["created_at"].dt.tz) == "UTC"
    notes = frames.memories_frame(mem, "u1", "bio", include_traces=False)
    assert list(notes["content"]) == ["a plain note"]
    only = frames.memories_frame(mem, "u1", "bio", filters={"topic": "TP53"})
    assert len(only) == 1
    assert frames.memories_frame(mem, "u1", "nobody").empty


def test_namespaces_frame(mem: memkit.Memory) -> None:
    df = frames.namespaces_frame(mem)
    assert list(df.columns) == ["user_id", "agent_id", "count", "first_at", "last_at"]
    assert dict(zip(df["agent_id"], df["count"], strict=True)) == {"bio": 4, "chem": 3}


def test_tool_stats(mem: memkit.Memory) -> None:
    stats = frames.tool_stats(mem)
    assert list(stats.index) == ["blast", "muscle", "pdb"]
    assert stats.loc["pdb", "success_rate"] == 0.0 and stats.loc["blast", "success_rate"] == 1.0
    assert stats.loc["muscle", "retries"] == 2 and stats.loc["blast", "steps"] == 2
    assert (stats["duration_p50_s"] <= stats["duration_p99_s"]).all()
    one = frames.tool_stats(frames.traces_frame(mem, workflow_id="wf1"))
    assert one["steps"].sum() == 3
    assert frames.tool_stats(InMemoryAdapter()).empty


def test_failure_patterns(mem: memkit.Memory) -> None:
    df = frames.failure_patterns(mem)
    assert df.to_dict("records") == [{"category": "network_error", "tool": "pdb", "count": 2}]
    assert frames.failure_patterns(mem, status="success").empty


def test_replay_yields_the_state_after_each_step(mem: memkit.Memory) -> None:
    states = list(frames.replay(mem, "wf1"))
    assert [s.position for s in states] == [0, 1, 2]
    assert [s.step["step_name"] for s in states] == ["run_blast", "fetch", "align"]
    assert [len(s.steps) for s in states] == [1, 2, 3]
    assert [s.history.get_execution_summary()["failed_steps"] for s in states] == [0, 1, 1]
    assert states[1].history.get_failure_patterns() == {"network_error": 1}
    assert states[0].history.items[0].parameters == {"db": "nr", "ids": [1, 2]}
    assert list(frames.replay(frames.traces_frame(mem), "wf2"))[-1].step["tool"] == "muscle"
    assert list(frames.replay(mem, "missing")) == []


def test_rejects_what_is_not_a_store() -> None:
    with pytest.raises(memkit.InvalidInputError, match=r"expected a MemoryProvider or memkit\.Memory"):
        frames.traces_frame(object())  # type: ignore[arg-type]


def test_runs_frame_has_one_row_per_run_and_filters(mem: memkit.Memory) -> None:
    runs = frames.runs_frame(mem)
    assert list(runs.columns) == list(frames.RUN_COLUMNS) and runs.index.name == "run"
    assert sorted(runs.index) == ["u1/bio/wf1/r1", "u1/chem/wf2"]
    wf1 = runs.loc["u1/bio/wf1/r1"]
    assert (wf1["steps"], wf1["failed_steps"], wf1["retries"], wf1["status"]) == (3, 1, 1, "failed")
    assert wf1["first_error"] == "TimeoutError: network timeout" and wf1["tools"] == "blast, muscle, pdb"
    assert wf1["duration_s"] >= 0 and str(runs["started_at"].dt.tz) == "UTC"
    assert list(frames.runs_frame(mem, agent_id="chem").index) == ["u1/chem/wf2"]
    assert frames.runs_frame(mem, tool="nope").empty
    assert len(frames.runs_frame(mem, status=["failed", "success"])) == 2
    assert frames.runs_frame(mem, min_duration=10_000).empty
    assert frames.runs_frame(mem, since="2000-01-01").index.tolist() == runs.index.tolist()
    assert frames.runs_frame(mem, until="2000-01-01").empty
    assert frames.runs_frame(frames.traces_frame(mem, recalls=True)).equals(runs)  # a frame already read gives the same


def test_runs_and_their_steps_count_recalls(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'r.db'}?embedder=none") as m:
        m.add("TP53 knockdown", "alice", "bio")
        history = ExecutionHistory(memory_provider=m, workflow_id="wf", agent_id="bio", run_id="r1")
        with history.step("plan", tool="llm"):
            m.search("TP53", "alice", "bio", mode="keyword")
            m.search("KRAS", "alice", "bio", mode="keyword")
        with history.step("act", tool="bwa"):
            pass
        other = ExecutionHistory(memory_provider=m, workflow_id="wf", agent_id="bio", run_id="r2")
        with other.step("plan", tool="llm"):
            pass
        history.flush()
        other.flush()
        runs = frames.runs_frame(m)
        assert runs["recalls"].to_dict() == {"system/bio/wf/r1": 2, "system/bio/wf/r2": 0}
        steps = frames.run_steps(m, "wf/r1")
        assert steps[["step_name", "recalls", "recalled"]].values.tolist() == [["plan", 2, 1], ["act", 0, 0]]
        # A frame read without recall counts says so instead of claiming zero.
        assert frames.runs_frame(frames.traces_frame(m))["recalls"].isna().all()


def test_runs_frame_of_an_empty_store_has_the_columns() -> None:
    with memkit.open("memory://") as m:
        runs = frames.runs_frame(m)
        assert runs.empty and list(runs.columns) == list(frames.RUN_COLUMNS)


def test_a_step_without_status_reads_unknown_and_never_raises(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'u.db'}") as m:
        m.add_trace("bio", "wf", {"tool": "bwa", "step_index": 0})  # no status, as in the README
        m.add_trace("bio", "wf", {"tool": "gatk", "step_index": 1, "status": "weird"})
        assert frames.runs_frame(m)["status"].tolist() == ["unknown"]
        assert frames.run_steps(m, "wf")["status"].tolist() == ["unknown", "unknown"]
        states = list(frames.replay(m, "wf"))
        assert [s.history.items[-1].status.value for s in states] == ["unknown", "unknown"]


def test_compare_runs_aligns_steps_and_names_what_changed(mem: memkit.Memory) -> None:
    diff = frames.compare_runs(mem, "wf1/r1", "wf2")
    assert diff["step_index"].tolist() == [0, 1, 2]
    assert diff["change"].tolist() == ["same", "same", "same"]  # same steps, same outcomes
    assert diff["duration_change_s"].notna().all()
    with memkit.open("memory://") as m:
        m.add_trace("a", "w", {"step_index": 0, "tool": "t", "status": "success", "parameters": {"k": 1}})
        m.add_trace("a", "w", {"step_index": 1, "tool": "t", "status": "success"})
        m.add_trace("a", "v", {"step_index": 0, "tool": "t", "status": "failed", "error": "boom",
                               "parameters": {"k": 2}})
        diff = frames.compare_runs(m, "w", "v")
        assert diff["change"].tolist() == ["changed", "only in a"]
        first = diff.iloc[0]
        assert first["changes"] == "status, error, params.k" and first["params_changed"] == {"k": (1, 2)}
        assert (first["status_a"], first["status_b"], first["error_a"], first["error_b"]) == (
            "success", "failed", None, "boom")
        with pytest.raises(memkit.InvalidInputError):
            frames.compare_runs(m, "w", "missing")
