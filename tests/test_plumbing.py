"""The adapters' shared worker threads: runs, translation of client errors, and strict closing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from memkit import StorageError
from memkit.adapters import SQLiteAdapter
from memkit.adapters._plumbing import Worker


def _translate(exc: Exception) -> Exception | None:
    return StorageError(f"client said: {exc}") if isinstance(exc, KeyError) else None


async def test_calls_run_off_the_loop_and_client_errors_become_memkit_errors() -> None:
    worker = Worker("memkit-test", lambda: "TestStore()", translate=_translate)
    try:
        assert await worker.run(threading.current_thread) is not threading.current_thread()
        with pytest.raises(StorageError, match="client said: 'k'"):
            await worker.run({}.__getitem__, "k")
        with pytest.raises(ValueError, match="untouched"):  # not the client's: raised as it is
            await worker.run(int, "untouched")
    finally:
        await worker.aclose()


async def test_close_waits_for_queued_calls_then_refuses_everything() -> None:
    worker = Worker("memkit-test", lambda: "TestStore('x')")
    order: list[str] = []

    def slow() -> None:
        time.sleep(0.05)
        order.append("call")

    pending = asyncio.ensure_future(worker.run(slow))
    await asyncio.sleep(0)
    # Two closes at once: both return only once the release has run, and it runs once.
    await asyncio.gather(worker.aclose(lambda: order.append("release")), worker.aclose(lambda: order.append("again")))
    await pending
    assert order == ["call", "release"]
    assert worker.closed
    worker.close()  # and from sync code: nothing left to do
    with pytest.raises(StorageError, match=r"TestStore\('x'\) is closed"):
        await worker.run(time.time)
    with pytest.raises(StorageError, match="is closed"):
        worker.call(time.time)
    assert worker.submit(time.time) is False


async def test_a_failing_release_is_reported_and_the_worker_still_stops() -> None:
    def release() -> None:
        raise KeyError("socket")

    worker = Worker("memkit-test", lambda: "TestStore()", translate=_translate)
    with pytest.raises(StorageError, match="client said"):
        await worker.aclose(release)
    with pytest.raises(StorageError, match="client said"):  # a second close reports the same outcome
        await worker.aclose(release)
    with pytest.raises(StorageError, match="is closed"):
        await worker.run(time.time)


def test_sqlite_close_is_final_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "closing.db"
    store = SQLiteAdapter(path, embedder=None)
    store.close()
    store.close()

    async def after() -> None:
        await store.aclose()
        with pytest.raises(StorageError, match=r"SQLiteAdapter\('.*closing\.db'\) is closed"):
            await store.add("late", "u", "a")

    asyncio.run(after())
    # the file was really released: another connection can take the write lock at once
    with sqlite3.connect(path, timeout=0) as other:
        other.execute("BEGIN IMMEDIATE")
        other.rollback()
