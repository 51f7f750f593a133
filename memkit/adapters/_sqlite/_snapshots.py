"""When a closing handle saves the search snapshots of the namespaces it wrote.

Everything here runs on the adapter's worker thread, which owns the connection.
"""

from __future__ import annotations

import sqlite3
from collections import Counter

from memkit.adapters._sqlite._keywords import KeywordCache, lag
from memkit.adapters._sqlite._vectors import Vectors

__all__ = ["save_stale"]


def save_stale(
    db: sqlite3.Connection, path: str, written: Counter[tuple[str, str]], keywords: KeywordCache, vectors: Vectors
) -> None:
    """Save the keyword and vector snapshots of every namespace in ``written`` that lack
    at least ``resave_min`` changes, so that the first search of the next process that opens
    the file restores them instead of analysing and reading every memory again (seconds at
    100k). Costs the closing handle what that first search would have (once); a search or
    an ``add`` never waits for it."""
    if path == ":memory:":
        return
    for user_id, agent_id in written:
        if lag(db, "keyword_snapshots", user_id, agent_id) >= keywords.resave_min:
            keywords.save_current(db, user_id, agent_id)
        if vectors.embedder is not None and lag(db, "vector_snapshots", user_id, agent_id) >= vectors.resave_min:
            vectors.save_current(db, user_id, agent_id)
