"""memkit.Memory: blocking calls that work with and without a running event loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

import memkit
from memkit import Memory
from memkit._sync import run_sync


def test_plain_script_usage(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path}/m.db") as mem:
        memory_id = mem.add("TP53 is mutated in sample 7", "alice", "bio", {"gene": "TP53"})
        assert [h.id for h in mem.search("TP53", "alice", "bio")] == [memory_id]
        assert mem.get(memory_id) is not None
        assert mem.namespaces()[0].count == 1
        assert mem.stats().memories == 1
        assert mem.health().ok
        assert [i.id for i in mem.export()] == [memory_id]
        assert [i.id for i in mem.get_page("alice", "bio", offset=0, limit=5)] == [memory_id]
        ids = mem.add_many([{"content": f"n{i}", "user_id": "alice", "agent_id": "bio"} for i in range(3)])
        assert len(ids) == 3
        trace = mem.add_trace("bio", "wf1", {"tool": "blast"}, user_id="alice")
        assert mem.search("", "alice", "bio", filters={"type": "trace"})[0].id == trace
        assert mem.delete(memory_id, user_id="bob") is False
        assert mem.delete(memory_id) is True
        assert mem.reset() is True
        assert mem.get_all("alice", "bio") == []


def test_inside_a_running_event_loop() -> None:
    """What Jupyter does: sync calls from a thread whose loop is already running."""

    async def notebook_cell() -> list[str]:
        mem = memkit.open("memory://")
        mem.add("called from inside a running loop", "u", "a")
        return [h.content for h in mem.get_all("u", "a")]

    assert asyncio.run(notebook_cell()) == ["called from inside a running loop"]


def test_many_threads_share_one_store(tmp_path: Path) -> None:
    mem = memkit.open(f"sqlite:///{tmp_path}/threads.db")
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(25):
                mem.add(f"thread {n} note {i}", "u", f"agent-{n % 2}")
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(ns.count for ns in mem.namespaces()) == 150
    mem.close()


def test_errors_surface_in_the_caller() -> None:
    mem = memkit.open("memory://")
    with pytest.raises(memkit.InvalidInputError):
        mem.add("", "u", "a")


def test_missing_capability_is_reported() -> None:
    class Minimal:
        async def add(self, content: str, user_id: str, agent_id: str, metadata: dict | None = None) -> str:
            return "x"

        async def add_trace(self, agent_id: str, workflow_id: str, trace_data: dict, user_id: str = "system") -> str:
            return "x"

        async def search(self, query: str, user_id: str, agent_id: str, limit: int = 5,
                         filters: dict | None = None) -> list[memkit.MemoryItem]:
            return []

        async def get_all(self, user_id: str, agent_id: str, limit: int = 10,
                          filters: dict | None = None) -> list[memkit.MemoryItem]:
            return []

        async def delete(self, memory_id: str) -> bool:
            return False

        async def reset(self) -> bool:
            return True

    mem = Memory(Minimal())
    assert mem.search("q", "u", "a") == []
    with pytest.raises(NotImplementedError, match="does not support stats"):
        mem.stats()
    mem.close()  # no aclose: nothing to do, no error


def test_wrapping_a_non_provider_is_refused() -> None:
    with pytest.raises(memkit.InvalidInputError, match="provider must be a MemoryProvider"):
        Memory(object())  # type: ignore[arg-type]


def test_run_sync_refuses_its_own_loop() -> None:
    async def nested() -> None:
        run_sync(asyncio.sleep(0))

    with pytest.raises(RuntimeError, match="own event loop"):
        run_sync(nested())
