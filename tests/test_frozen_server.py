"""A frozen server (SIGSTOP) costs a call its timeout, not the whole freeze: PostgreSQL, Neo4j, FalkorDB.

Each test starts a server of its own (freezing the session's would stall other tests), opens a
store on it with a 2 s timeout, freezes every process of the server, and checks that a write and a
read each raise :class:`memkit.BackendUnavailableError` naming the timeout within a few seconds
(the write's error saying it may or may not have been applied); then thaws the server (always: in a
``finally``) and checks that the same store works again. Before the timeouts, PostgreSQL and Neo4j
held every call for as long as the server was frozen.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import memkit
from memkit.testing import FalkorDBServer, Neo4jServer, PostgresServer

TIMEOUT = 2.0
# The call's own timeout plus the scheduling slack of a loaded two-core machine.
SLACK = 6.0
# The server is thawed after this long whatever happens, so a call that waits for the server (as
# every call did before the timeouts) returns and fails the test instead of hanging it.
THAW_AFTER = 20.0


def _tree(root: int) -> list[int]:
    """``root`` and every process below it (PostgreSQL's backends each lead a process group of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


@contextmanager
def _frozen(server: Any) -> Iterator[None]:
    # The parent first: it starts no new process once stopped.
    frozen = _tree(server.process.pid)

    def thaw() -> None:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)

    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(THAW_AFTER, thaw)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        thaw()


def _bounded(call: Callable[[], object], *, write: bool) -> None:
    started = time.monotonic()
    with pytest.raises(memkit.BackendUnavailableError) as caught:
        call()
    elapsed = time.monotonic() - started
    assert TIMEOUT * 0.9 <= elapsed < TIMEOUT + SLACK, elapsed
    message = str(caught.value)
    assert "timeout" in message and "2 s" in message, message
    if write:
        assert "may or may not have been applied" in message, message


def _check(url: str, timeout_option: str, server: Any) -> None:
    # Warmed first through a handle with the default timeout: a cold server (Neo4j's JIT, the first
    # schema) may take longer than 2 s over its first writes on a loaded machine.
    with memkit.open(url) as warm:
        kept = warm.add("written before the freeze", "alice", "bio")
        warm.search("freeze", "alice", "bio")
    joiner = "&" if "?" in url else "?"
    with memkit.open(f"{url}{joiner}{timeout_option}={TIMEOUT:g}") as mem:
        assert [item.id for item in mem.get_all("alice", "bio")] == [kept]
        _frozen_calls(mem, server, kept)


def _frozen_calls(mem: memkit.Memory, server: Any, kept: str) -> None:
    with _frozen(server):
        _bounded(lambda: mem.add("written during the freeze", "alice", "bio", {"n": 1}), write=True)
        _bounded(lambda: mem.get_all("alice", "bio"), write=False)
    # Thawed: the same handle works again (what the frozen write did is the server's to say).
    ids = [item.id for item in mem.get_all("alice", "bio")]
    assert kept in ids
    assert mem.add("written after the freeze", "alice", "bio") in [i.id for i in mem.get_all("alice", "bio")]


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_falkordb() -> Iterator[FalkorDBServer]:
    server = FalkorDBServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_neo4j() -> Iterator[Neo4jServer]:
    server = Neo4jServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_postgres_call_gives_up_after_its_timeout(own_postgres: PostgresServer) -> None:
    _check(own_postgres.url("frozen") + "?embedder=none", "timeout", own_postgres)


def test_falkordb_call_gives_up_after_its_timeout(own_falkordb: FalkorDBServer) -> None:
    _check(own_falkordb.url("frozen") + "?embedder=none", "socket_timeout", own_falkordb)


def test_neo4j_call_gives_up_after_its_timeout(own_neo4j: Neo4jServer) -> None:
    _check(own_neo4j.url, "timeout", own_neo4j)


def test_timeouts_are_checked() -> None:
    for url in ("postgresql://u@127.0.0.1:1/x?timeout=0", "postgresql://u@127.0.0.1:1/x?timeout=soon",
                "neo4j://127.0.0.1:1?timeout=-1", "neo4j://127.0.0.1:1?timeout=soon"):
        with pytest.raises(memkit.ConfigError, match="timeout"):
            memkit.open(url)
