"""The trace steps a store gained since the last look: what a live view reads each time it looks again.

A SQLite store hands out each memory's ``seq`` inside its one writer's transaction, so the steps
past the highest ``seq`` seen are exactly the new ones. PostgreSQL hands out ``seq`` when a row is
inserted, not when it commits: a transaction that took a lower ``seq`` can commit after a higher
one was read, so there the read reaches back over the ``seq``s seen in the last few seconds and the
steps already held are dropped. Any other store is read whole (it keeps no such order) and the same
rule keeps only the steps not seen before.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import pandas as pd

from memkit._core._port import SupportsTraceColumns
from memkit._sync import Memory, call, provider_of
from memkit.frames._reading import _payloads, _trace_columns, _trace_frame
from memkit.frames._recalls import _with_recall_counts
from memkit.frames._runs import _normalised
from memkit.frames._usage import PricesLike, found_of, with_usage

__all__ = ["StepFeed"]



async def _columns_after(provider: Any, after: int | None) -> tuple[dict[str, Any], bool]:
    """The columns of the steps past ``after`` and whether the read was one (else: every step)."""
    if isinstance(provider, SupportsTraceColumns):
        return await provider.trace_columns(after_seq=after or 0), True
    return await _trace_columns(provider, None, None, None, None, None), False


async def _by_id(provider: Any, ids: list[str]) -> dict[str, Any]:
    """The trace payloads of the steps ``ids``, each read by its id (a few new steps of a large store)."""
    found = {}
    for step_id in ids:
        item = await provider.get(step_id)
        if item is not None and item.metadata.get("type") == "trace":
            found[step_id] = item.metadata.get("trace")
    return found


async def _payloads_of(provider: Any, ids: list[str]) -> dict[str, Any]:
    return await _payloads(provider, None, None, set(ids))


class StepFeed:
    """Reads a store's new trace steps, each time :meth:`read` is called, as :func:`traces_frame` rows.

    ``known`` is the index of the steps the caller already holds: the first read returns every step
    (as :func:`traces_frame` would), each later one only those not in ``known``.
    """

    def __init__(self, mem: Memory, *, prices: PricesLike = None, recalls: bool = False) -> None:
        self.mem, self.prices, self.recalls = mem, prices, recalls
        self._seen: deque[tuple[float, int]] = deque()  # (when read, highest seq then), newest last
        self.position: int | None = None  # the highest seq read (None before the first read)
        # How long a step may commit after a higher seq was read (see SupportsTraceColumns).
        self._late = float(getattr(provider_of(mem), "late_commit_s", 0.0))

    def _from(self) -> int | None:
        """The ``seq`` to read past: the newest seen, or where steps may commit late (the store's
        ``late_commit_s``) the newest seen before that window."""
        if self.position is None:
            return None
        if not self._late:
            return self.position
        cutoff = time.monotonic() - self._late
        return self._seen[0][1] if self._seen[0][0] <= cutoff else min(s for _, s in self._seen)

    def read(self, known: pd.Index | None = None) -> pd.DataFrame:
        """The steps written since the last read (and not in ``known``), with usage (and recall counts)."""
        provider = provider_of(self.mem)
        after = self._from()
        cols, ordered = call(provider, _columns_after, after)
        # Past the newest seq seen in commit order, every step read is new: nothing to look up.
        exact = ordered and after is not None and after == self.position
        seqs = cols["seq"]
        if ordered and len(seqs):
            self.position = max(self.position or 0, int(seqs.max()))
        elif ordered and self.position is None:
            self.position = 0
        now = time.monotonic()
        self._seen.append((now, self.position or 0))
        while len(self._seen) > 1 and self._seen[1][0] <= now - self._late:  # only the newest past the window
            self._seen.popleft()
        frame = _trace_frame(cols)
        if known is not None and len(known) and len(frame) and not exact:
            frame = frame[known.get_indexer_for(frame.index) < 0]
        if frame.empty:
            return _normalised(frame)
        # Usage is in each new step's record: read those records only, not every step's.
        wanted = [str(i) for i in frame.index]
        payloads = call(provider, _by_id if ordered else _payloads_of, wanted)
        frame = with_usage(frame, found_of(payloads), self.prices)
        if self.recalls:
            frame = _with_recall_counts(frame, provider)
        return _normalised(frame)
