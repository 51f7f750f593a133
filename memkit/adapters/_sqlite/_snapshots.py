"""When a closing handle saves the search snapshots of the namespaces it wrote, and who does it
when several processes close one file at once.

A pool of writer processes into one namespace closes at about the same time, each with rows of
its own in the namespace's feed. Building a namespace's snapshot costs the whole namespace
(every text analysed, every vector read), so one process does it. A closer first records the
namespaces it wants saved in the store (``store_meta`` rows, one transaction), then tries a
non-blocking lock on a file beside the store (``<store>-snapshots.lock``): if it gets it, it
takes every recorded request (its own and others') and saves them, lets go, and tries again
until no request is left; if not, it closes at once. A request is recorded before its closer
tries the lock, and a holder takes requests only while it holds the lock and looks again after
letting go, so whoever held the lock when a closer gave up reads that closer's request later:
none is left behind. A snapshot is written in one transaction and never replaces a newer one
(see ``_keywords._save`` and ``_vectors._save``), so whatever the order, a process killed while
saving leaves the previous snapshot, and a fresh process catches up from the change feed (its
requests wait in the store for the next closer that holds the lock).

The lock is the kernel's (``flock``): a process that dies holding it lets go, and there is no
timeout to tune. Two handles in one process exclude each other too (one lock per open file).

Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from collections import Counter
from contextlib import suppress

from memkit.adapters._sqlite._keywords import KeywordCache, lag
from memkit.adapters._sqlite._schema import write_transaction
from memkit.adapters._sqlite._vectors import Vectors, fits

__all__ = ["save_stale"]

# How many times a holder asks again for namespaces still stale after it saved them (other processes
# still writing: they save their rows when they close); requests from closers are always served.
_ROUNDS = 3


def lock_path(path: str) -> str:
    return f"{path}-snapshots.lock"


class _Turn:
    """The store's snapshot lock, taken without waiting (``mine``) until the block ends."""

    def __init__(self, path: str) -> None:
        self.mine = False
        self._fd: int | None = None
        try:
            import fcntl
        except ImportError:  # no flock on this platform: every closer saves, as before the lock
            self.mine = True
            return
        try:
            self._fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
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


# Requests are store_meta rows whose key is this prefix and the namespace as JSON.
_WANTED = "snapshot wanted "


def _ask(db: sqlite3.Connection, keys: list[tuple[str, str]]) -> None:
    with write_transaction(db):
        db.executemany("INSERT OR IGNORE INTO store_meta (key, value) VALUES (?, '')",
                       [(_WANTED + json.dumps(list(key)),) for key in keys])


def _take(db: sqlite3.Connection) -> set[tuple[str, str]]:
    """Every namespace closers asked to have saved, the requests removed (by the lock's holder)."""
    prefix = (_WANTED, _WANTED[:-1] + chr(ord(_WANTED[-1]) + 1))
    with write_transaction(db):
        rows = db.execute("DELETE FROM store_meta WHERE key >= ? AND key < ? RETURNING key", prefix).fetchall()
    asked: set[tuple[str, str]] = set()
    for (key,) in rows:
        with suppress(ValueError, TypeError):
            user_id, agent_id = json.loads(key[len(_WANTED):])
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
    stale = [key for key in written if _stale(db, *key, keywords, vectors)]
    if not stale:
        return  # nothing to save (a few writes): no lock taken, no lock file made
    _ask(db, stale)  # before trying the lock: whoever holds it now reads this after
    for round_ in itertools.count():  # ends: each round takes requests, and each closer asks once
        with _Turn(path) as turn:
            if not turn.mine:
                return  # the holder saves what we asked
            asked = _take(db)
            if not asked:
                return
            for user_id, agent_id in sorted(asked):  # looked at under the lock: another may just have saved
                if lag(db, "keyword_snapshots", user_id, agent_id) >= keywords.resave_min:
                    keywords.save_current(db, user_id, agent_id)
                if (vectors.embedder is not None
                        and lag(db, "vector_snapshots", user_id, agent_id) >= vectors.resave_min
                        and fits(db, vectors, user_id, agent_id)):
                    vectors.save_current(db, user_id, agent_id)
            # Still stale: saving found the file busy, or writers still write; asked again a few
            # times (those still writing save their rows when they close).
            again = [key for key in asked if _stale(db, *key, keywords, vectors)]
            if again and round_ < _ROUNDS:
                _ask(db, again)
