"""The PostgreSQL store's cosine statistics: the namespace's mean and spread of a query's cosine,
which memkit's fusion normalises the dense scores by.

They come from a fixed sample of the namespace (its ``SAMPLE`` vectors of lowest ``sample`` key,
a random number stored with each memory; all of them in a smaller namespace). Scoring that
sample in SQL on every search cost about 28 ms at 100k memories, most of the semantic leg. So
each process keeps the sample's vectors, read once in PostgreSQL's binary form, and scores the
query against them itself (a 2,000 x 384 product, well under a millisecond): the same
numbers, since the statistics are the population mean and standard deviation of the same
cosines.

The kept sample is used only while the namespace's *version* is unchanged: the transaction id
that last wrote its ``namespace_stats`` row (``xmin``: every insert and delete updates that row in
its own transaction, and a reset removes it), its memory count, its largest ``seq`` and the
embedder's name (re-embedding the store records it, and touches no namespace's row). No two
committed states of a namespace share a version, so a search in one process sees at once what
another process wrote, deleted or reset. The version is read in the statement that reads the
sample (one snapshot) and checked by one cheap statement per search. Reading a sample costs about
twice what scoring it in SQL does (28 ms at 100k), so a namespace that changed again within
``REREAD_AFTER_S`` of the last read (writers busy) is scored in SQL as before until then.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from typing import Any

__all__ = ["REREAD_AFTER_S", "SAMPLE", "VERSION_SQL", "SampleCache"]

#: The namespace's mean and spread of cosine come from this many of its vectors.
SAMPLE = 2_000

#: A namespace's sample is read again at most this often (seconds); between, a changed namespace
#: is scored in SQL.
REREAD_AFTER_S = 1.0

#: Keep at most this many bytes of samples per store (2,000 x 384 float32 vectors are 3 MB).
_CACHE_BYTES = 64 * 2**20

# The namespace's size, version and the vector index's segment ends, in one snapshot.
VERSION_SQL = """
SELECT (SELECT count FROM namespace_stats WHERE user_id = %(u)s AND agent_id = %(a)s),
       (SELECT max(seq) FROM memories WHERE user_id = %(u)s AND agent_id = %(a)s),
       (SELECT value FROM memkit_meta WHERE key = 'embedder_name'),
       (SELECT xmin::text FROM namespace_stats WHERE user_id = %(u)s AND agent_id = %(a)s),
       (SELECT value FROM memkit_meta WHERE key = 'vector_segments')
"""

# The version and the sample's vectors (pgvector's binary form: a 4-byte header, then big-endian
# float32s), concatenated into one value, in one snapshot.
_SAMPLE_SQL = """
SELECT (SELECT count FROM namespace_stats WHERE user_id = %(u)s AND agent_id = %(a)s),
       (SELECT max(seq) FROM memories WHERE user_id = %(u)s AND agent_id = %(a)s),
       (SELECT value FROM memkit_meta WHERE key = 'embedder_name'),
       (SELECT xmin::text FROM namespace_stats WHERE user_id = %(u)s AND agent_id = %(a)s),
       (SELECT string_agg(substring(vector_send(s.embedding) FROM 5), ''::bytea) FROM (
            SELECT m.embedding FROM memories m
            WHERE m.user_id = %(u)s AND m.agent_id = %(a)s AND m.embedding IS NOT NULL
            ORDER BY m.sample LIMIT %(n)s) s)
"""

# The same statistics scored in SQL, for a namespace that changes faster than it is worth reading.
_STATS_SQL = """
SELECT coalesce(avg(c), 0), coalesce(stddev_pop(c), 0) FROM (
    SELECT -(m.embedding <#> %s::vector) AS c FROM memories m
    WHERE m.user_id = %s AND m.agent_id = %s AND m.embedding IS NOT NULL
    ORDER BY m.sample LIMIT %s
) s
"""

Version = tuple[int, int, str | None, str | None]


class SampleCache:
    """Each namespace's sample of vectors, for one store, tagged with the version it was read at."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str], tuple[Version, Any]] = OrderedDict()
        self._read_at: dict[tuple[str, str], float] = {}

    async def stats(self, conn: Any, user: str, agent: str, version: Version, query: Any) -> tuple[float, float]:
        """Mean and population standard deviation of ``query``'s cosine over the namespace's sample."""
        import numpy as np

        key = (user, agent)
        kept = self._kept.get(key)
        if kept is None or kept[0] != version:
            now = time.monotonic()
            if now - self._read_at.get(key, -math.inf) < REREAD_AFTER_S:
                # Written to again since the last read a moment ago (writers busy): scoring the
                # sample in SQL costs about half of reading it, and is as exact.
                row = await (await conn.execute(_STATS_SQL, (query, user, agent, SAMPLE))).fetchone()
                return float(row[0]), float(row[1])
            self._read_at[key] = now
            kept = await self._read(conn, user, agent, len(query))
            self._kept[key] = kept
        self._kept.move_to_end(key)
        while len(self._kept) > 1 and sum(v.nbytes for _, v in self._kept.values()) > _CACHE_BYTES:
            self._read_at.pop(self._kept.popitem(last=False)[0], None)
        vectors = kept[1]
        if len(vectors) == 0:
            return 0.0, 0.0
        cosine = np.einsum("ij,j->i", vectors, np.asarray(query, dtype=np.float32))
        return float(cosine.mean(dtype=np.float64)), float(cosine.std(dtype=np.float64))

    async def _read(self, conn: Any, user: str, agent: str, dim: int) -> tuple[Version, Any]:
        import numpy as np

        row = await (await conn.execute(_SAMPLE_SQL, {"u": user, "a": agent, "n": SAMPLE}, binary=True)).fetchone()
        blob = bytes(row[4] or b"")
        vectors = np.frombuffer(blob, dtype=">f4").astype(np.float32).reshape(-1, dim)
        return (int(row[0] or 0), int(row[1] or 0), row[2], row[3]), vectors
