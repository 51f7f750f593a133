"""When a closing handle saves the search snapshots of the namespaces it wrote, and who does it
when several processes close one file at once.

A pool of writer processes into one namespace closes at about the same time, each with rows of
its own in the namespace's feed. Building a namespace's snapshot costs the whole namespace
(every text analysed, every vector read), so one process does it: a non-blocking lock on a
file beside the store (``<store>-snapshots.lock``) decides, and a closer that finds it taken
skips saving and closes at once. The holder looks at the snapshots again after letting go, and
saves again (from the index it holds: only the rows since) if they still lack ``resave_min``
changes, so the rows of a closer that skipped while it held the lock are never left out for
good. A snapshot is written in one transaction and never replaces a newer one (see
``_keywords._save`` and ``_vectors._save``), so whatever the order, a process killed while
saving leaves the previous snapshot, and a fresh process catches up from the change feed.

The lock is the kernel's (``flock``): a process that dies holding it lets go, and there is no
timeout to tune. Two handles in one process exclude each other too (one lock per open file).

Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import os
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from memkit.adapters._sqlite._keywords import KeywordCache, lag
from memkit.adapters._sqlite._vectors import Vectors, fits

__all__ = ["save_stale"]

# How many times a holder looks again after letting go: enough for the closers that skipped
# while it saved; writers still writing after that save their own rows when they close.
_ROUNDS = 3


def lock_path(path: str) -> str:
    return f"{path}-snapshots.lock"


@contextmanager
def save_turn(path: str) -> Iterator[bool]:
    """Whether this handle holds the store's snapshot lock (taken without waiting) until the block ends.

    False when another process (or handle) holds it, or no lock can be made beside the store (a
    read-only folder: a snapshot could not be written either)."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: every closer saves, as before the lock
        yield True
        return
    try:
        fd = os.open(lock_path(path), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True  # closing the file descriptor below lets go of the lock
    finally:
        os.close(fd)


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
    if path == ":memory:":
        return
    for _ in range(_ROUNDS):
        stale = [key for key in written if _stale(db, *key, keywords, vectors)]
        if not stale:
            return
        with save_turn(path) as mine:
            if not mine:
                return  # the holder looks again after it lets go
            for user_id, agent_id in stale:  # looked at again under the lock: another closer may just have saved
                if lag(db, "keyword_snapshots", user_id, agent_id) >= keywords.resave_min:
                    keywords.save_current(db, user_id, agent_id)
                if (vectors.embedder is not None
                        and lag(db, "vector_snapshots", user_id, agent_id) >= vectors.resave_min
                        and fits(db, vectors, user_id, agent_id)):
                    vectors.save_current(db, user_id, agent_id)
