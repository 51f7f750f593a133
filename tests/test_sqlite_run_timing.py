"""Run start and end times of trace steps an agent wrote with ``add_many`` (its own timing keys, not
``add_trace``'s), as every reader gives them: SQLite's run summaries and trace columns, the generic
reads of SQLite, memory:// and PostgreSQL, and the command line."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit._core._runs import RunSummary, _steps_of_columns, summaries, summarise
from memkit._sync import run_sync
from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.cli import main
from memkit.testing import PostgresServer

# Each step is created (stored) a day after it ran: a reader that takes created_at for the start is wrong.
CREATED = datetime(2026, 10, 2, tzinfo=UTC)
T0 = datetime(2026, 10, 1, 8, tzinfo=UTC)


def _step(user: str, run: str, index: int, created_min: int, **timing: Any) -> dict[str, Any]:
    trace = {"step_index": index, "step_name": f"s{index}", "tool": "bwa", "status": "success", **timing}
    return {"content": f"[trace] {run} {index}", "user_id": user, "agent_id": "bio",
            "created_at": CREATED + timedelta(minutes=created_min),
            "metadata": {"type": "trace", "workflow_id": "wf", "run_id": run, "trace": trace}}


def _epoch(minutes: float) -> float:
    return (T0 + timedelta(minutes=minutes)).timestamp()


# alice and bob run workflow "wf" with the same run ids; every spelling an agent uses.
ROWS = [
    _step("alice", "r1", 0, 0, started_at="2026-10-01T10:00:00+02:00", ended_at="2026-10-01T10:00:30+02:00"),
    _step("alice", "r1", 1, 1, started_at="2026-10-01T08:01:00Z", ended_at="2026-10-01T08:02:00.250000Z"),
    _step("alice", "r1", 2, 2),  # no times: its created_at
    _step("bob", "r1", 0, 3, started_at="2026-10-01T07:00:00", ended_at="2026-10-01T07:05:00"),  # naive: UTC
    _step("bob", "r1", 1, 4, start_time=_epoch(-30), end_time=_epoch(-20)),
    _step("bob", "r2", 0, 5, started_at=_epoch(10) * 1000, duration_ms=1500),  # epoch milliseconds
    _step("bob", "r2", 1, 6, timestamp="2026-10-01T08:20:00+00:00", duration_s=2.5),  # ISO timestamp
    _step("alice", "r2", 0, 7, timestamp=_epoch(30)),  # add_trace's key, a number, no duration
    _step("alice", "r2", 1, 8, timestamp=_epoch(31), duration=4),
    _step("alice", "r3", 0, 9, ended_at="2026-10-01T09:00:00+00:00", duration_ms=60_000),  # end only
    _step("alice", "r3", 1, 10, started_at="not a time", ended_at=None),  # unreadable: created_at
]


M = timedelta(minutes=1)
#: What each run's steps recorded: (user, run) -> (start, end, steps).
TIMES = {
    ("alice", "r1"): (T0, T0 + 2 * M + timedelta(seconds=0.25), 3),  # 10:00+02:00, not the day after
    ("bob", "r1"): (T0 - 60 * M, T0 - 20 * M, 2),  # naive: UTC; its epoch end_time
    ("bob", "r2"): (T0 + 10 * M, T0 + 20 * M + timedelta(seconds=2.5), 2),
    ("alice", "r2"): (T0 + 30 * M, T0 + 31 * M + timedelta(seconds=4), 2),
    ("alice", "r3"): (T0 + 59 * M, T0 + 60 * M, 2),  # an end and a duration; an unreadable start
}


def _times(summary: list[RunSummary]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    assert {r.workflow_id for r in summary} == {"wf"}
    return {(r.user_id, r.run_id): (r.started_at, r.ended_at, r.steps) for r in summary}


def _sqlite_reads(mem: memkit.Memory) -> tuple[list[RunSummary], list[RunSummary], list[RunSummary]]:
    """SQLite's own summaries, the generic ones from its records, and the generic ones from its columns."""
    store = mem.provider
    own = run_sync(store.run_summaries())  # type: ignore[attr-defined]
    generic = run_sync(summaries(store))
    columns = summarise(_steps_of_columns(run_sync(store.trace_columns()), None),  # type: ignore[attr-defined]
                        recalls_kept=False)
    return own, generic, columns


@pytest.mark.filterwarnings("ignore:memkit. trace key")
def test_sqlite_reads_add_many_step_times_as_the_generic_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) \
        -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}?embedder=none"
    with memkit.open(url) as mem:
        mem.add_many(ROWS)
        own, generic, columns = _sqlite_reads(mem)
    with memkit.open("memory://") as mem:
        mem.add_many(ROWS)
        memory = run_sync(summaries(mem.provider))
    for read in (own, generic, memory):
        assert _times(read) == TIMES
        by_run = {(r.user_id, r.run_id): r for r in read}
        # Its untimed step has no start: its duration is the sum of its steps' (30 s + 60.25 s), said so,
        # and its end the last one recorded, never the day after, when the steps were stored.
        assert (by_run["alice", "r1"].duration_s, by_run["alice", "r1"].duration_kind) == (90.25, "sum of steps")
        assert (by_run["bob", "r1"].duration_s, by_run["bob", "r1"].duration_kind) == (40 * 60, "wall")
    assert {key: times[:2] for key, times in _times(columns).items()} == {k: t[:2] for k, t in TIMES.items()}
    # What a script reads: the command line prints these moments.
    assert main(["--url", url, "runs", "--json"]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(p["user_id"], p["run_id"]): (p["started_at"], p["ended_at"]) for p in printed} == {
        key: (start.isoformat(), end.isoformat()) for key, (start, end, _) in TIMES.items()}


def test_add_many_refuses_datetime_objects_in_a_trace(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'runs.db'}?embedder=none") as mem:
        with pytest.raises(memkit.InvalidInputError, match=r"metadata\.trace\.started_at is a datetime"):
            mem.add_many([ROWS[0], _step("alice", "r9", 0, 0, started_at=T0)])
        assert run_sync(mem.provider.run_summaries()) == []  # type: ignore[attr-defined]


@pytest.mark.filterwarnings("ignore:memkit. trace key")
async def test_postgres_trace_columns_read_add_many_step_times(postgres_server: PostgresServer) -> None:
    """PostgreSQL's trace columns (what run summaries read on a big store) time steps as its records do."""
    store = PostgresAdapter(postgres_server.url(f"timing_{uuid.uuid4().hex[:10]}"), embedder=None)
    try:
        await store.add_many(ROWS)
        generic = await summaries(store)  # from its records: a store this small is not read as columns
        columns = summarise(_steps_of_columns(await store.trace_columns(), None), recalls_kept=False)
        assert _times(generic) == _times(columns) == TIMES
    finally:
        await store.aclose()
