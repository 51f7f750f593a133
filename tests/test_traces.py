"""ExecutionHistory persisting through add_trace: every path, including stores that fail."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit import Limits
from memkit.adapters._memory._adapter import InMemoryAdapter, MockMemoryAdapter
from memkit.adapters._sqlite import SQLiteAdapter
from memkit.traces import (
    REDACTED,
    ExecutionHistory,
    ExecutionItem,
    ExecutionStatus,
    Redactor,
    TraceWriteError,
    categorize_error,
    get_trace_redactor,
    set_trace_redactor,
)


@pytest.fixture(params=["memory", "sqlite"])
async def provider(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[object]:
    if request.param == "memory":
        yield MockMemoryAdapter()
        return
    adapter = SQLiteAdapter(tmp_path / "traces.db")
    yield adapter
    await adapter.aclose()


def _item(name: str = "run_blast", status: ExecutionStatus = ExecutionStatus.SUCCESS, **kw: object) -> ExecutionItem:
    return ExecutionItem(step_name=name, tool=kw.pop("tool", "blast"), status=status, **kw)  # type: ignore[arg-type]


async def _traces(provider: object, agent: str = "bio_agent") -> list[memkit.MemoryItem]:
    return await provider.get_all("system", agent, limit=100, filters={"type": "trace"})  # type: ignore[attr-defined, no-any-return]


# -- the seed 002 pilot, from async code (a running loop on the caller's thread, like Jupyter)


async def test_history_add_item_persists_trace(provider: object) -> None:
    memory = provider
    history = ExecutionHistory(memory_provider=memory, workflow_id="wf1", agent_id="bio_agent")  # type: ignore[arg-type]
    item = ExecutionItem(step_name="run_blast", tool="blast", status=ExecutionStatus.SUCCESS, result={"hits": 3})
    history.add_item(item)
    hits = await memory.search("blast", user_id="system", agent_id="bio_agent", filters={"type": "trace"})  # type: ignore[attr-defined]
    assert len(hits) == 1
    assert hits[0].metadata["workflow_id"] == "wf1"
    meta = hits[0].metadata
    assert (meta["tool"], meta["status"], meta["step_index"], meta["step_name"]) == ("blast", "success", 0, "run_blast")
    assert meta["trace"]["result"] == {"hits": 3}


async def test_trace_content_is_searchable_by_step_name(provider: object) -> None:
    history = ExecutionHistory(memory_provider=provider, workflow_id="wf1", agent_id="bio_agent")  # type: ignore[arg-type]
    history.add_item(_item("fetch_structure", tool="pdb_fetch"))
    history.add_item(_item("run_blast"))
    hits = await provider.search("fetch_structure", "system", "bio_agent")  # type: ignore[attr-defined]
    assert [h.metadata["step_name"] for h in hits][:1] == ["fetch_structure"]


def test_sync_code_write_through_returns_after_the_write(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'm.db'}") as mem:
        history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="a", user_id="u1", run_id="r7")
        for i in range(5):
            history.add_item(_item(f"s{i}"))
        steps = mem.get_all("u1", "a", limit=10, filters={"type": "trace"})
        assert sorted(s.metadata["step_index"] for s in steps) == [0, 1, 2, 3, 4]
        assert {s.metadata["run_id"] for s in steps} == {"r7"}


def test_worker_threads_lose_nothing() -> None:
    mem = InMemoryAdapter()
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="a")

    def work(t: int) -> None:
        for i in range(20):
            history.add_item(_item(f"t{t}-{i}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored = asyncio.run(mem.get_all("system", "a", limit=1000))
    assert len(stored) == 80
    assert sorted(s.metadata["step_index"] for s in stored) == list(range(80))


async def test_aadd_item_writes_on_the_callers_loop(provider: object) -> None:
    history = ExecutionHistory(memory_provider=provider, workflow_id="wf", agent_id="bio_agent")  # type: ignore[arg-type]
    await history.aadd_item(_item())
    assert len(await _traces(provider)) == 1


async def test_write_behind_flush_stores_everything_in_order(provider: object) -> None:
    history = ExecutionHistory(
        memory_provider=provider, workflow_id="wf", agent_id="bio_agent", write_behind=True  # type: ignore[arg-type]
    )
    for i in range(50):
        history.add_item(_item(f"s{i}"))
    await history.aflush()
    stored = await _traces(provider)
    assert len(stored) == 50
    # get_all is newest first: the store order must equal the step order.
    assert [s.metadata["step_index"] for s in reversed(stored)] == list(range(50))


def test_context_manager_returns_only_when_stored() -> None:
    mem = InMemoryAdapter()
    with ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="a", write_behind=True) as history:
        for i in range(30):
            history.add_item(_item(f"s{i}"))
    assert history.end_time is not None
    assert len(asyncio.run(mem.get_all("system", "a", limit=100))) == 30


# -- failures surface ---------------------------------------------------------------------


def test_write_through_failure_raises(tmp_path: Path) -> None:
    store = SQLiteAdapter(tmp_path / "closed.db")
    store.close()  # a real store that refuses every write
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="a")
    with pytest.raises(TraceWriteError, match="run_blast") as info:
        history.add_item(_item())
    assert isinstance(info.value, memkit.StorageError)
    assert info.value.failures[0][0].step_name == "run_blast"


async def test_write_through_failure_raises_inside_a_running_loop(tmp_path: Path) -> None:
    store = SQLiteAdapter(tmp_path / "closed.db")
    await store.aclose()
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="a")
    with pytest.raises(TraceWriteError):
        history.add_item(_item())
    with pytest.raises(TraceWriteError):
        await history.aadd_item(_item())


def _tight_store() -> InMemoryAdapter:
    # Real validation failure: this store accepts at most 1,500 bytes of metadata.
    return InMemoryAdapter(limits=Limits(max_metadata_bytes=1_500))


def test_write_behind_failure_surfaces_on_flush_and_keeps_the_rest() -> None:
    store = _tight_store()
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="a", write_behind=True)
    history.add_item(_item("ok1"))
    history.add_item(_item("too_big", parameters={"blob": "x" * 5_000}))
    try:
        history.add_item(_item("ok2"))
    except TraceWriteError as exc:  # the failure was already known: reported here, not at flush
        reported = exc
    else:
        with pytest.raises(TraceWriteError, match="too_big") as info:
            history.flush()
        reported = info.value
    expected = {"ok1", "ok2"}  # the call that reported the failure still queued its own step
    assert "too_big" in str(reported)
    assert isinstance(reported.failures[0][1], memkit.InvalidInputError)
    history.flush()  # reported once, then clear
    names = {m.metadata["step_name"] for m in asyncio.run(store.get_all("system", "a", limit=10))}
    assert names == expected


def test_write_behind_failure_makes_the_next_add_item_raise() -> None:
    history = ExecutionHistory(memory_provider=_tight_store(), workflow_id="wf", agent_id="a", write_behind=True)
    history.add_item(_item("too_big", parameters={"blob": "x" * 5_000}))
    deadline = time.monotonic() + 10
    while not history._failures and time.monotonic() < deadline:  # wait for the queued write to fail
        time.sleep(0.001)
    with pytest.raises(TraceWriteError, match="too_big"):
        history.add_item(_item("next"))
    # The call that reported the failure kept and stored its own step.
    assert [i.step_name for i in history.items] == ["too_big", "next"]
    history.flush()
    stored = asyncio.run(history.memory_provider.get_all("system", "a"))  # type: ignore[union-attr]
    assert [m.metadata["step_name"] for m in stored] == ["next"]


def test_context_manager_raises_write_failures() -> None:
    with pytest.raises(TraceWriteError), ExecutionHistory(
        memory_provider=_tight_store(), workflow_id="wf", agent_id="a", write_behind=True
    ) as history:
        history.add_item(_item("too_big", parameters={"blob": "x" * 5_000}))


def test_body_exception_wins_and_carries_the_write_failure() -> None:
    with pytest.raises(KeyError) as info, ExecutionHistory(
        memory_provider=_tight_store(), workflow_id="wf", agent_id="a", write_behind=True
    ) as history:
        history.add_item(_item("too_big", parameters={"blob": "x" * 5_000}))
        raise KeyError("boom")
    assert any("too_big" in note for note in info.value.__notes__)


def test_add_item_rejects_non_items() -> None:
    history = ExecutionHistory(memory_provider=InMemoryAdapter(), workflow_id="wf", agent_id="a")
    with pytest.raises(memkit.InvalidInputError):
        history.add_item({"step_name": "x"})  # type: ignore[arg-type]
    assert history.items == []


# -- the step recorder ------------------------------------------------------------------


def test_step_records_success_with_duration() -> None:
    mem = InMemoryAdapter()
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="a")
    with history.step("run_blast", tool="blast", parameters={"db": "nr"}) as step:
        step.result = {"hits": 3}
    item = history.items[0]
    assert item.status is ExecutionStatus.SUCCESS and item.result == {"hits": 3}
    assert item.duration is not None and item.duration >= 0
    stored = asyncio.run(mem.get_all("system", "a"))[0].metadata["trace"]
    assert stored["parameters"] == {"db": "nr"} and stored["duration"] == item.duration


def test_step_records_failure_and_reraises() -> None:
    history = ExecutionHistory(memory_provider=InMemoryAdapter(), workflow_id="wf", agent_id="a")
    with pytest.raises(TimeoutError), history.step("fetch", tool="pdb"):
        raise TimeoutError("network timeout after 30s")
    item = history.items[0]
    assert item.status is ExecutionStatus.FAILED
    assert item.error == "TimeoutError: network timeout after 30s"
    assert history.get_failure_patterns() == {"network_error": 1}


async def test_async_step() -> None:
    mem = InMemoryAdapter()
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="a")
    async with history.step("embed", tool="encoder") as step:
        await asyncio.sleep(0)
        step.result = {"dims": 384}
    assert (await mem.get_all("system", "a"))[0].metadata["status"] == "success"


def test_retrying_stores_one_trace_with_retry_count() -> None:
    mem = InMemoryAdapter()
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="a")
    calls = 0
    for step in history.retrying("align", tool="muscle", max_retries=3):
        with step:
            calls += 1
            if calls < 3:
                raise ConnectionError(f"network down ({calls})")
            step.result = {"score": 0.9}
    assert calls == 3
    [stored] = asyncio.run(mem.get_all("system", "a"))
    trace = stored.metadata["trace"]
    assert (trace["status"], trace["retry_count"]) == ("success", 2)
    assert trace["retry_errors"] == ["ConnectionError: network down (1)", "ConnectionError: network down (2)"]


def test_retrying_gives_up_and_reraises() -> None:
    history = ExecutionHistory(memory_provider=InMemoryAdapter(), workflow_id="wf", agent_id="a")
    attempts = 0
    with pytest.raises(ValueError, match="schema"):
        for step in history.retrying("parse", tool="parser", max_retries=1):
            with step:
                attempts += 1
                raise ValueError("schema mismatch")
    assert attempts == 2
    assert [(i.status, i.retry_count) for i in history.items] == [(ExecutionStatus.FAILED, 1)]


def test_retrying_does_not_retry_other_errors() -> None:
    history = ExecutionHistory()
    with pytest.raises(KeyError):
        for step in history.retrying("x", tool="t", max_retries=5, retry_on=ConnectionError):
            with step:
                raise KeyError("k")
    assert history.items[0].retry_count == 0


def test_retrying_needs_with() -> None:
    history = ExecutionHistory()
    with pytest.raises(RuntimeError, match="with step"):
        for _step in history.retrying("x", tool="t"):
            pass
    with pytest.raises(memkit.InvalidInputError):
        next(history.retrying("x", tool="t", max_retries=-1))


# -- redaction --------------------------------------------------------------------------


async def test_secrets_are_redacted_by_default(provider: object) -> None:
    history = ExecutionHistory(memory_provider=provider, workflow_id="wf", agent_id="bio_agent")  # type: ignore[arg-type]
    params = {"api_key": "sk-123", "db": {"password": "hunter2", "host": "h"}, "accessToken": "t0k", "max_tokens": 256}
    history.add_item(_item(parameters=params, result={"session_cookie": "c", "hits": 1}))
    [stored] = await _traces(provider)
    trace = stored.metadata["trace"]
    assert trace["parameters"] == {
        "api_key": REDACTED, "db": {"password": REDACTED, "host": "h"}, "accessToken": REDACTED, "max_tokens": 256,
    }
    assert trace["result"] == {"session_cookie": REDACTED, "hits": 1}
    for secret in ("sk-123", "hunter2", "t0k"):
        assert secret not in stored.content and secret not in json.dumps(stored.metadata)
    assert history.items[0].parameters == params  # the in-memory history is the caller's own data


async def test_redaction_is_configurable(provider: object) -> None:
    previous = set_trace_redactor(Redactor(patterns=[r"^sample_id$"], replacement="***"))
    try:
        await provider.add_trace("bio_agent", "wf", {"tool": "t", "parameters": {"sample_id": "S1", "api_key": "k"}})  # type: ignore[attr-defined]
        set_trace_redactor(None)
        await provider.add_trace("bio_agent", "wf", {"tool": "t2", "parameters": {"api_key": "k"}})  # type: ignore[attr-defined]
    finally:
        set_trace_redactor(previous)
    assert get_trace_redactor() is previous
    stored = {s.metadata["tool"]: s.metadata["trace"]["parameters"] for s in await _traces(provider)}
    assert stored == {"t": {"sample_id": "***", "api_key": "k"}, "t2": {"api_key": "k"}}


def test_bad_redactor_is_refused() -> None:
    with pytest.raises(memkit.InvalidInputError):
        set_trace_redactor("api_key")  # type: ignore[arg-type]


# -- compatibility with the seed framework --------------------------------------------


def test_seed_queries_and_file_round_trip(tmp_path: Path) -> None:
    history = ExecutionHistory()
    history.add_item(_item("a", tool="blast"))
    history.add_item(_item("b", ExecutionStatus.FAILED, tool="pdb", error="Connection timeout"))
    history.add_item(_item("c", ExecutionStatus.FAILED, tool="pdb", error="Schema validation failed"))
    history.add_item(_item("d", ExecutionStatus.FAILED, tool="x", error="bad parameter k"))
    history.add_item(_item("e", ExecutionStatus.FAILED, tool="x", error="success_criteria not met"))
    history.add_item(_item("f", ExecutionStatus.FAILED, tool="x", error="segfault"))
    history.finish()
    assert history.get_failure_patterns() == {
        "network_error": 1, "validation_error": 1, "parameter_error": 1, "criteria_failure": 1, "execution_error": 1,
    }
    summary = history.get_execution_summary()
    assert summary["total_steps"] == 6 and summary["successful_steps"] == 1 and summary["failed_steps"] == 5
    assert summary["duration"] is not None and summary["tools_used"] == ["blast", "pdb", "x"]
    assert history.get_tool_usage_count("pdb") == 2 and history.get_step_by_name("c") is not None
    path = tmp_path / "history.json"
    history.save_to_file(str(path))
    data = json.loads(path.read_text())
    assert set(data) == {"items", "start_time", "end_time", "summary"}
    loaded = ExecutionHistory.load_from_file(str(path))
    assert loaded.items == history.items and loaded.end_time == history.end_time
    assert categorize_error(None) == "unknown"


def test_history_without_provider_stores_nothing_and_never_fails() -> None:
    history = ExecutionHistory()
    history.add_item(_item())
    history.flush()
    history.close()
    assert len(history.items) == 1


def test_add_item_on_memkits_own_loop_is_refused_not_deadlocked() -> None:
    from memkit._sync import run_sync

    history = ExecutionHistory(memory_provider=InMemoryAdapter(), workflow_id="wf", agent_id="a")

    async def inside() -> None:
        history.add_item(_item())

    with pytest.raises(RuntimeError, match="aadd_item"):
        run_sync(inside())
    assert history.items == []


def test_write_behind_keeps_every_step_stored_or_reported() -> None:
    store = _tight_store()
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="a", write_behind=True)
    names = [f"s{i}" for i in range(12)]
    reported: list[str] = []
    for i, name in enumerate(names):
        params = {"blob": "x" * 5_000} if i % 3 == 1 else None
        try:
            history.add_item(_item(name, parameters=params))
        except TraceWriteError as exc:
            reported += [item.step_name for item, _ in exc.failures]
        deadline = time.monotonic() + 10
        while history._pending and time.monotonic() < deadline:  # let the failure land before the next step
            time.sleep(0.001)
    try:
        history.flush()
    except TraceWriteError as exc:
        reported += [item.step_name for item, _ in exc.failures]
    stored = [m.metadata["step_name"] for m in asyncio.run(store.get_all("system", "a", limit=50))]
    assert [i.step_name for i in history.items] == names
    assert sorted(stored + reported) == sorted(names)
    assert sorted(reported) == ["s1", "s10", "s4", "s7"]


class _FlakyNetwork(InMemoryAdapter):
    """A store behind a network that fails once per step: for "align" after the write was
    applied (the reply was lost), for any other step before it reached the store."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: set[str] = set()

    async def add_trace(self, agent_id: str, workflow_id: str, trace_data: dict[str, Any],
                        user_id: str = "system") -> str:
        name = trace_data["step_name"]
        first = name not in self.failed
        self.failed.add(name)
        if first and name != "align":
            raise ConnectionError("connection refused")
        memory_id = await super().add_trace(agent_id, workflow_id, trace_data, user_id)
        if first:
            raise ConnectionError("connection reset before the reply")
        return memory_id


@pytest.mark.parametrize("write_behind", [False, True])
def test_a_retry_does_not_duplicate_an_unacknowledged_write(write_behind: bool) -> None:
    store = _FlakyNetwork()
    history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="a", write_behind=write_behind)
    for name in ("align", "call"):
        with pytest.raises(TraceWriteError, match="connection"):
            history.add_item(_item(name))
            history.flush()
    assert history.retry_failed() == 1  # "align" was applied already: only "call" is written
    assert history.retry_failed() == 0
    stored = [m.metadata["step_name"] for m in asyncio.run(store.get_all("system", "a", limit=50))]
    assert sorted(stored) == ["align", "call"]


def test_failed_write_behind_writes_print_no_asyncio_warnings(tmp_path: Path) -> None:
    script = textwrap.dedent("""
        import gc
        from memkit import Limits
        from memkit.adapters import InMemoryAdapter
        from memkit.traces import ExecutionHistory, ExecutionItem, ExecutionStatus, TraceWriteError
        store = InMemoryAdapter(limits=Limits(max_metadata_bytes=1_500))
        history = ExecutionHistory(memory_provider=store, workflow_id="wf", agent_id="a", write_behind=True)
        for i in range(20):
            item = ExecutionItem(f"s{i}", "t", ExecutionStatus.SUCCESS, parameters={"b": "x" * 5_000 * (i % 2)})
            try:
                history.add_item(item)
            except TraceWriteError:
                pass
        try:
            history.flush()
        except TraceWriteError:
            pass
        gc.collect()
        print("done")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.stdout.strip() == "done"
    assert "never retrieved" not in run.stderr and "Traceback" not in run.stderr, run.stderr
