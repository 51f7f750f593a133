"""A store file written by an older memkit opens, upgrades, and reads its trace steps as they were written.

The old files are made here with the old schemas' own DDL (the shipped migrations up to that version,
run on a plain connection) and rows written the way that version wrote them: at schema 3 its insert
trigger filled the trace table from the JSON (ending a text at a NUL), at schema 12 memkit wrote
packed rows from Python (here one such row holds the NUL-cut text that version stored)."""

from __future__ import annotations

import json
import sqlite3
import struct
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memkit import frames
from memkit._core._records import Record, trace_record
from memkit._core._stamps import new_id
from memkit._sync import run_sync
from memkit.adapters._sqlite import _schema
from memkit.adapters._sqlite._adapter import SQLiteAdapter

NUL = "a\x00b"
T0 = datetime(2026, 10, 1, 8, tzinfo=UTC)


def _steps() -> list[Record]:
    steps = [
        trace_record("bio", "wf", {"step_name": f"s{i}", "tool": "bwa", "run_id": "r1", "step_index": i,
                                   "timestamp": 1.7e9 + i, "duration": 0.5, "status": "failed" if i == 2 else "success",
                                   **({"error": "boom"} if i == 2 else {}), "parameters": {"k": i}}, user_id="alice")
        for i in range(3)
    ]
    # Timing as an agent's add_many spells it: read from the JSON by Python, not SQL, since migration 13.
    steps.append(Record(id=new_id(), user_id="alice", agent_id="bio", content="agent-written", created_us=1,
                        metadata={"type": "trace", "workflow_id": "wf", "run_id": "r3", "trace": {
                            "step_name": "x", "started_at": "2026-10-01T10:00:00+02:00",
                            "ended_at": "2026-10-01T10:00:30+02:00"}}))
    steps.append(trace_record("bio", "wf", {"step_name": f"s {NUL}", "tool": NUL, "run_id": f"r {NUL}",
                                            "step_index": 0, "error": NUL, "parameters": {NUL: NUL}}, user_id="bob"))
    return steps


def _old_file(path: Path, version: int) -> list[Record]:
    records = _steps()
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        for target in range(1, version + 1):
            step = _schema.MIGRATIONS[target]
            if callable(step):
                step(conn)
            else:
                for statement in _schema.statements(step):
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
        for record in records:
            conn.execute(
                "INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us) VALUES (?, ?, ?, ?, ?, ?)",
                (record.id, record.user_id, record.agent_id, record.content, json.dumps(record.metadata),
                 record.created_us))
        conn.execute("INSERT INTO memories (id, user_id, agent_id, content, metadata, created_us)"
                     " VALUES ('note', 'alice', 'bio', 'not a step', '{\"type\": \"note\"}', 1)")
        if version == 12:  # the NUL-cut row that version wrote for bob's step (its other steps: none at all)
            conn.execute("INSERT INTO trace_dict (text) VALUES ('bob'), ('bio'), ('wf'), ('a')")
            seq = conn.execute("SELECT seq FROM memories WHERE user_id = 'bob'").fetchone()[0]
            numbers = struct.pack("<13q", seq, records[-1].created_us, 1, 2, 3, *[-(2**63)] * 8)
            conn.execute("INSERT INTO trace_steps VALUES (?, ?, 1, 2, 3, NULL, ?, ?)",
                         (seq, records[-1].created_us, numbers, f"{records[-1].id}\x1f\"a\"\x1fnull\x1fnull"))
    return records


@pytest.mark.parametrize("version", [3, 12])
def test_an_old_file_upgrades_with_its_steps_intact(tmp_path: Path, version: int) -> None:
    path = tmp_path / f"v{version}.db"
    records = _old_file(path, version)
    store = SQLiteAdapter(path, embedder=None)
    try:
        with closing(sqlite3.connect(path)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == _schema.SCHEMA_VERSION
            assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND name ="
                                " 'trace_steps_insert'").fetchall() == []
        df = frames.traces_frame(store)
        assert sorted(df.index) == sorted(r.id for r in records)  # every step, the note left out
        bob = df.loc[records[-1].id]
        assert (bob["step_name"], bob["tool"], bob["run_id"], bob["error"]) == (f"s {NUL}", NUL, f"r {NUL}", NUL)
        assert bob[f"params.{NUL}"] == NUL
        alice = df[(df["user_id"] == "alice") & (df["run_id"] == "r1")].sort_values("step_index")
        assert list(alice["tool"]) == ["bwa"] * 3 and list(alice["params.k"]) == [0, 1, 2]
        assert list(alice["duration_s"]) == [0.5] * 3
        runs = {(r.user_id, r.run_id): r for r in run_sync(store.run_summaries())}
        assert runs[("alice", "r1")].steps == 3 and runs[("alice", "r1")].first_error == "boom"
        assert runs[("bob", f"r {NUL}")].steps == 1
        assert (runs[("alice", "r3")].started_at, runs[("alice", "r3")].duration_s) == (T0, 30.0)
        # Writes after the upgrade read back beside the migrated steps; a filter finds the NUL text.
        run_sync(store.add_trace("bio", "wf", {"step_name": "new", "tool": NUL, "run_id": "r2"}, user_id="bob"))
        assert len(frames.traces_frame(store, user_id="bob")) == 2
        assert run_sync(store.trace_columns(workflow_id="wf", user_id="bob"))["tool"].tolist() == [NUL, NUL]
        assert run_sync(store.delete(records[0].id))
        assert records[0].id not in frames.traces_frame(store).index
    finally:
        store.close()
