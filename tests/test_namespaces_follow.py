"""A followed NamespaceBrowser shows the memories and namespaces another process writes, as they are written.

Real stores (SQLite files, a PostgreSQL server) and a real second process writing with ``add`` while
the browser is open; the browser is read as a notebook reads it (its widgets' values).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit.widgets import NamespaceBrowser
from tests._research_runs import store_url

ROOT = Path(__file__).resolve().parents[1]


def _until(check: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


def _followers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("memkit-follow-")]


@pytest.fixture(autouse=True)
def _no_thread_left() -> Iterator[None]:
    yield
    assert _followers() == []


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return store_url(request.param, request, tmp_path_factory, "nsfollow")


def _contents(browser: NamespaceBrowser) -> list[str]:
    return [i.content for i in browser.items]


def test_memories_and_a_namespace_another_process_writes_appear(url: str) -> None:
    with memkit.open(url) as mem:
        mem.add("old note", "alice", "bot")
        browser = NamespaceBrowser(mem, follow=True)
        try:
            assert browser.following and browser.namespace.value == ("alice", "bot")
            script = textwrap.dedent(f"""
                import time
                import memkit
                mem = memkit.open({url!r})
                for i in range(3):
                    mem.add(f"note {{i}}", "alice", "bot")
                    print(i, flush=True)
                    time.sleep(0.4)
                mem.add("carol's first", "carol", "helper")
                print("carol", flush=True)
                mem.close()
            """)
            writer = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                      env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
            assert writer.stdout is not None
            for line in writer.stdout:  # each memory, once written, is listed within about a second
                if line.strip() == "carol":
                    assert _until(lambda: ("carol", "helper") in [v for _, v in browser.namespace.options], 2.0)
                else:
                    i = int(line)
                    assert _until(lambda i=i: f"note {i}" in _contents(browser), 2.0), _contents(browser)
            assert writer.wait(30) == 0
            # the open namespace stayed open, its page holds every memory newest first
            assert browser.namespace.value == ("alice", "bot")
            assert _contents(browser) == ["note 2", "note 1", "note 0", "old note"]
            assert "2 namespaces" in browser.overview.value
        finally:
            browser.close()
        assert not browser.following and _followers() == []


def test_a_look_keeps_the_search_and_the_open_memory(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 's.db'}?embedder=none") as mem:
        first = mem.add("apple pie recipe", "alice", "bot")
        mem.add("banana bread", "alice", "bot")
        browser = NamespaceBrowser(mem)
        browser.query.value = "apple"
        browser.run_search()
        browser.rows.value = first
        assert browser.selected is not None and browser.selected.id == first
        assert browser.poll() is False  # nothing written: nothing read again
        mem.add("apple crumble", "alice", "bot")
        assert browser.poll() is True and browser.poll() is False
        assert browser.query.value == "apple" and browser._hits is not None
        assert sorted(_contents(browser)) == ["apple crumble", "apple pie recipe"]
        assert browser.selected is not None and browser.selected.id == first
        assert "apple pie recipe" in browser.detail.value
        browser.close()


def test_a_memory_deleted_elsewhere_leaves_the_page(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'd.db'}?embedder=none") as mem:
        gone = mem.add("to be deleted", "alice", "bot")
        mem.add("kept", "alice", "bot")
        browser = NamespaceBrowser(mem)
        mem.delete(gone)
        assert browser.poll() is True and _contents(browser) == ["kept"]
        browser.close()


@pytest.mark.parametrize("interval", [0, -1, "1", True, 1e9])
def test_a_bad_interval_is_refused_and_follows_nothing(interval: Any, tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'b.db'}?embedder=none") as mem:
        browser = NamespaceBrowser(mem)
        with pytest.raises(memkit.InvalidInputError, match="interval"):
            browser.follow(interval)
        assert not browser.following and _followers() == []
        browser.close()


def test_a_store_that_goes_away_is_said_and_closing_still_stops(tmp_path: Path) -> None:
    mem = memkit.open(f"sqlite:///{tmp_path / 'gone.db'}?embedder=none")
    mem.add("a note", "alice", "bot")
    browser = NamespaceBrowser(mem, follow=True)
    mem.close()
    assert _until(lambda: browser.message.startswith("following: StorageError") and browser.message_kind == "error", 5)
    assert browser.following and _contents(browser) == ["a note"]  # what was shown stays
    browser.close()
    assert not browser.following


def test_in_a_notebook_the_redraw_waits_for_the_kernel(tmp_path: Path) -> None:
    """Under a running event loop (a kernel's), a change is only drawn when the loop's thread is free:
    never in the middle of what the user's own action is changing."""
    url = f"sqlite:///{tmp_path / 'k.db'}?embedder=none"

    async def kernel() -> None:
        with memkit.open(url) as mem:
            mem.add("a note", "alice", "bot")
            browser = NamespaceBrowser(mem, follow=True)
            try:
                with memkit.open(url) as other:
                    other.add("a later note", "alice", "bot")
                time.sleep(1.5)  # noqa: ASYNC251 (the kernel busy on purpose: the thread saw the change, the page waits)
                assert _contents(browser) == ["a note"]
                end = time.monotonic() + 3
                while _contents(browser) != ["a later note", "a note"] and time.monotonic() < end:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)  # the kernel free: drawn
                assert _contents(browser) == ["a later note", "a note"]
            finally:
                browser.close()

    asyncio.run(kernel())
