"""Since schema 12 memkit writes ``trace_steps`` rows from Python instead of schema 11's insert trigger.

The reference is the trigger itself: a real store opened as schema 11 (its trigger in place) gets the
same records as a schema-12 store, and both files must hold the same ``trace_steps`` and ``trace_dict``
rows, byte for byte, and read back the same runs."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memkit
from memkit._core._records import Record, to_us, trace_record
from memkit._core._stamps import new_id
from memkit._sync import run_sync
from memkit.adapters._sqlite import _schema
from memkit.adapters._sqlite._adapter import SQLiteAdapter
from memkit.adapters._sqlite._step_rows import memory_rows
from memkit.adapters._sqlite._trace_writes import trigger_writes_steps

T0 = datetime(2026, 10, 1, 8, tzinfo=UTC)


def _step(user: str, run: Any, index: Any, **trace: Any) -> Record:
    """A trace step as an agent's add_many writes it: its own keys, whatever types it gives them."""
    metadata = {"type": "trace", "workflow_id": "wf", "run_id": run,
                "trace": {"step_index": index, "step_name": f"s{index}", "tool": "bwa", "status": "success", **trace}}
    return Record(id=new_id(), user_id=user, agent_id="bio", content=f"[trace] {run} {index}", metadata=metadata,
                  created_us=to_us(T0 + timedelta(minutes=1)))


def _epoch(minutes: float) -> float:
    return (T0 + timedelta(minutes=minutes)).timestamp()


def _records() -> list[Record]:
    """Plain and odd steps; alice and bob share workflow and run ids."""
    plain = [
        trace_record("bio", "wf", {"step_name": "align", "tool": "bwa", "step_index": i, "run_id": "r1",
                                   "timestamp": _epoch(i) + 0.1234565, "duration": 0.5000005 * i,
                                   "parameters": {"ref": "hg38", "ünï": "\u2028", "n": 1e300},
                                   "result": {"hits": [1, 2]}, **({"error": 'tab\t"quote"\n\x01'} if i else {})},
                     user_id=user)
        for user in ("alice", "bob") for i in range(3)
    ]
    agent_written = [
        _step("alice", "r1", 0, started_at="2026-10-01T10:00:00+02:00", ended_at="2026-10-01T10:00:30+02:00"),
        _step("bob", "r1", 0, started_at="2026-10-01T07:00:00", ended_at="2026-10-01T07:05:00"),  # naive
        _step("bob", "r1", 1, start_time=_epoch(-30), end_time=_epoch(-20)),  # epoch seconds
        _step("bob", "r2", 0, started_at=_epoch(10) * 1000, duration_ms=1500),  # epoch milliseconds
        _step("bob", "r2", 1, timestamp="2026-10-01T08:20:00+00:00", duration_s=2.5),  # ISO timestamp
        _step("alice", "r2", 0, timestamp=_epoch(30)),  # a number, no duration
        _step("alice", "r2", 1, timestamp=int(_epoch(31)), duration=4),  # integers
        _step("alice", "r3", 0, ended_at="2026-10-01T09:00:00+00:00", duration_ms=60_000),
        _step("alice", "r3", 1, started_at="not a time", ended_at=None),
        _step("alice", "r3", 2, timestamp=0.0000005, duration=-0.0000015),  # halves round away from zero
    ]
    odd = [
        _step("carol", 5, True, timestamp=True, duration="3"),  # a number as run id, a bool as index
        _step("carol", "5", 2.5, error=5),  # the text "5" now in the dictionary: the number above finds it
        _step("carol", "r\x00cut", 1, error="a\x00b"),  # SQLite's JSON stops at NUL
        _step("carol", ["r"], {"i": 1}, error={"code": 1}, parameters=[1], result="text"),
        _step("carol", None, 2**63 - 1, retry_count=-(2**63), status=None, tool=None),
        Record(id=new_id(), user_id="carol", agent_id="bio", content="not a step", metadata={"type": "note"}),
        Record(id=new_id(), user_id="carol", agent_id="bio", content="t", metadata={"type": "trace", "trace": [1]}),
        Record(id=new_id(), user_id="carol", agent_id="bio", content="t", metadata={"type": "trace"}),
        _step("dave", "r1", 0, timestamp=_epoch(0), duration=1.5),  # a plain one after the odd ones
    ]
    return plain + agent_written + odd


def _open(path: Path, schema: int, monkeypatch: pytest.MonkeyPatch) -> SQLiteAdapter:
    with monkeypatch.context() as patch:
        patch.setattr(_schema, "SCHEMA_VERSION", schema)
        return SQLiteAdapter(path, embedder=None)


def _write(store: SQLiteAdapter, records: list[Record]) -> None:
    store._worker.call(store._insert, *memory_rows(records))


def _rows(path: Path) -> tuple[list[Any], list[Any]]:
    with closing(sqlite3.connect(path)) as db:
        steps = db.execute("SELECT * FROM trace_steps ORDER BY seq").fetchall()
        words = db.execute("SELECT * FROM trace_dict ORDER BY code").fetchall()
    return steps, words


def _runs(store: SQLiteAdapter) -> list[Any]:
    return [(r.user_id, r.workflow_id, r.run_id, r.started_at, r.ended_at, r.steps, r.first_error)
            for r in run_sync(store.run_summaries())]


@pytest.mark.filterwarnings("ignore:memkit. trace key")
def test_new_and_migrated_stores_write_the_rows_the_trigger_wrote(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    records = _records()
    half = len(records) // 2
    reference = _open(tmp_path / "trigger.db", 11, monkeypatch)
    assert trigger_writes_steps(reference._worker.call(reference._db))
    _write(reference, records[:half])
    _write(reference, records[half:])
    fresh = SQLiteAdapter(tmp_path / "new.db", embedder=None)
    assert not trigger_writes_steps(fresh._worker.call(fresh._db))
    _write(fresh, records[:half])
    _write(fresh, records[half:])
    old = _open(tmp_path / "old.db", 11, monkeypatch)
    _write(old, records[:half])
    old.close()
    migrated = SQLiteAdapter(tmp_path / "old.db", embedder=None)  # schema 11 -> 12, then Python writes
    _write(migrated, records[half:])
    expected = _rows(tmp_path / "trigger.db")
    assert len(expected[0]) == len(records) - 1  # every trace step, the note left out
    assert _rows(tmp_path / "new.db") == expected
    assert _rows(tmp_path / "old.db") == expected
    assert _runs(fresh) == _runs(migrated) == _runs(reference)
    assert {("alice", "wf", "r1"), ("bob", "wf", "r1")} <= {r[:3] for r in _runs(fresh)}
    assert run_sync(migrated.delete(records[0].id))  # the delete trigger stays
    assert records[0].id not in {row[-1].split("\x1f")[0] for row in _rows(tmp_path / "old.db")[0]}
    for store in (reference, fresh, migrated):
        store.close()


@pytest.mark.parametrize("stamp", [2.0**52 + 1, 2.0**53 + 1, 9.3e12, -9.3e12, 2**62, 1e300, 0.5e-6, -2.5e-6])
def test_huge_and_halfway_times_pack_as_sqlite_rounds_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            stamp: float) -> None:
    records = [_step("alice", "r1", 0, timestamp=stamp, duration=stamp / 3)]
    reference, python = _open(tmp_path / "t.db", 11, monkeypatch), SQLiteAdapter(tmp_path / "p.db", embedder=None)
    for store in (reference, python):
        _write(store, records)
        store.close()
    assert _rows(tmp_path / "p.db") == _rows(tmp_path / "t.db")


def test_a_failed_write_leaves_no_steps(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'm.db'}?embedder=none") as mem:
        mem.add_trace("bio", "wf", {"step_name": "first", "run_id": "r1"})
        kept = _rows(tmp_path / "m.db")
        clash = _step("alice", "new-run", 0)
        store = mem.provider
        assert isinstance(store, SQLiteAdapter)
        existing = run_sync(store.get_all(user_id="system", agent_id="bio"))[0].id
        twin = Record(id=existing, user_id="x", agent_id="y", content="c", metadata=clash.metadata)
        with pytest.raises(memkit.InvalidInputError, match="already exists"):
            _write(store, [clash, twin])
        assert _rows(tmp_path / "m.db") == kept  # neither the step nor the texts "alice", "new-run"


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_field = _json | st.sampled_from(["a", "b", "5", "1", 5, 1, 1.0])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                     HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({}, optional={
    key: _field for key in ("workflow_id", "run_id", "step_name", "tool", "status", "step_index", "timestamp",
                            "duration", "retry_count", "error", "parameters", "result", "started_at", "ended_at")
}), min_size=1, max_size=6))
@pytest.mark.filterwarnings("ignore:memkit. trace key")
def test_any_step_data_gives_the_triggers_rows(tmp_path_factory: pytest.TempPathFactory,
                                               monkeypatch: pytest.MonkeyPatch, steps: list[dict[str, Any]]) -> None:
    records = []
    for i, fields in enumerate(steps):
        top: dict[str, Any] = {key: fields.pop(key) for key in ("workflow_id", "run_id") if key in fields}
        records.append(Record(id=f"id-{i}", user_id="u" if i % 2 else "5", agent_id="a", content="c",
                              metadata={"type": "trace", **top, "trace": fields}, created_us=i))
    folder = tmp_path_factory.mktemp("any")
    reference, python = _open(folder / "t.db", 11, monkeypatch), SQLiteAdapter(folder / "p.db", embedder=None)
    try:
        for store in (reference, python):
            store._worker.call(store._db).execute("INSERT INTO trace_dict (text) VALUES ('1')")  # a text stored earlier
            _write(store, records)
    finally:
        reference.close()
        python.close()
    assert _rows(folder / "p.db") == _rows(folder / "t.db"), json.dumps(steps, default=repr)[:2000]
