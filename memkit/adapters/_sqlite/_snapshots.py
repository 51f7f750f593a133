"""When a closing handle saves the search snapshots of the namespaces it wrote, and who does it
when several processes close one file at once.

A pool of writer processes into one namespace closes at about the same time, each with rows of
its own in the namespace's feed. Building a namespace's snapshot costs the whole namespace
(every text analysed, every vector read), so one process does it: a non-blocking lock on a
file beside the store (``<store>-snapshots.lock``) decides, and a closer that finds it taken
appends the namespaces it wanted saved to that file and closes at once. The holder, after
letting go, takes the lock again (without waiting) and saves what was asked meanwhile and what
of its own is still stale (from the index it holds: only the rows since); whoever holds the
lock when a closer asks looks at the file after that, so no request is left behind for good.
A snapshot is written in one transaction and never replaces a newer one (see
``_keywords._save`` and ``_vectors._save``), so whatever the order, a process killed while
saving leaves the previous snapshot, and a fresh process catches up from the change feed.

The lock is the kernel's (``flock``): a process that dies holding it lets go, and there is no
timeout to tune. Two handles in one process exclude each other too (one lock per open file).

Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from contextlib import suppress

from memkit.adapters._sqlite._keywords import KeywordCache, lag
from memkit.adapters._sqlite._vectors import Vectors, fits

__all__ = ["save_stale"]

# How many times a holder saves its own namespaces again while they stay stale (other processes still
# writing: they save their rows when they close); requests from closers are always served.
_ROUNDS = 3


def lock_path(path: str) -> str:
    return f"{path}-snapshots.lock"


class _Turn:
    """The store's snapshot lock, taken without waiting; and the namespaces closers asked to have saved."""

    def __init__(self, path: str) -> None:
        self.mine = False
        self._fd: int | None = None
        try:
            import fcntl
        except ImportError:  # no flock on this platform: every closer saves, as before the lock
            self.mine = True
            return
        try:
            self._fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            return  # a read-only folder: no snapshot could be written either
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.mine = True
        except OSError:
            pass

    def __enter__(self) -> _Turn:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # lets go of the lock
            self._fd = None

    def ask(self, keys: list[tuple[str, str]]) -> None:
        """Leave ``keys`` for the holder (one append: the holder reads whole lines)."""
        if self._fd is not None:
            with suppress(OSError):
                os.write(self._fd, "".join(json.dumps(list(key)) + "\n" for key in keys).encode())

    def take(self) -> set[tuple[str, str]]:
        """The namespaces asked for since the last holder looked (the holder only), emptying the list."""
        if self._fd is None or not self.mine:
            return set()
        asked: set[tuple[str, str]] = set()
        with suppress(OSError):
            os.lseek(self._fd, 0, os.SEEK_SET)
            data = b""
            while chunk := os.read(self._fd, 1 << 16):
                data += chunk
            os.ftruncate(self._fd, 0)
            for line in data.decode(errors="replace").splitlines():
                with suppress(ValueError, TypeError):
                    user_id, agent_id = json.loads(line)
                    if isinstance(user_id, str) and isinstance(agent_id, str):
                        asked.add((user_id, agent_id))
        return asked


def _stale(db: sqlite3.Connection, user_id: str, agent_id: str, keywords: KeywordCache, vectors: Vectors) -> bool:
    return lag(db, "keyword_snapshots", user_id, agent_id) >= keywords.resave_min or (
        vectors.embedder is not None
        and lag(db, "vector_snapshots", user_id, agent_id) >= vectors.resave_min
        and fits(db, vectors, user_id, agent_id)
    )


def save_stale(
    db: sqlite3.Connection, path: str, written: Counter[tuple[str, str]], keywords: KeywordCache, vectors: Vectors
) -> None:
    """Save the keyword and vector snapshots of every namespace in ``written`` that lack
    at least ``resave_min`` changes, so that the first search of the next process that opens
    the file restores them instead of analysing and reading every memory again (seconds at
    100k). Costs the closing handle what that first search would have (once); a search or
    an ``add`` never waits for it. Skipped while another process saves (see the module docstring)."""
    if path == ":memory:" or not written:
        return
    wanted = set(written)
    round_ = 0
    while True:  # ends: past _ROUNDS only for new requests, and each closer asks once
        stale = [key for key in wanted if _stale(db, *key, keywords, vectors)]
        if not stale and not round_:
            return  # nothing to save (a few writes): no lock taken, no lock file made
        with _Turn(path) as turn:
            if not turn.mine:
                turn.ask(stale)  # the holder saves them after its own
                return
            asked = turn.take()
            if not asked and (not stale or round_ >= _ROUNDS):
                return
            round_ += 1
            wanted |= asked
            for user_id, agent_id in sorted(set(stale) | asked):  # looked at again under the lock
                if lag(db, "keyword_snapshots", user_id, agent_id) >= keywords.resave_min:
                    keywords.save_current(db, user_id, agent_id)
                if (vectors.embedder is not None
                        and lag(db, "vector_snapshots", user_id, agent_id) >= vectors.resave_min
                        and fits(db, vectors, user_id, agent_id)):
                    vectors.save_current(db, user_id, agent_id)
