"""The one search pipeline every adapter runs: validate, legs, fuse, tie-break, details, recall.

An adapter supplies only what is its own: the keyword leg (BM25 hits of the namespace, best
first, ties newest first), the semantic leg (a :class:`memkit._retrieval._fusion.DenseScores`:
its best candidates' cosines, the cosine of every keyword hit, and the namespace's
mean and standard deviation of cosine), how new each candidate is, and the rows of the
hits it returns. Everything else is here, so a query means the same on every adapter:

1. :func:`prepare` checks the arguments (query, namespace, limit, filters, mode,
   ``hybrid=``, ``as_of``) with the same errors everywhere;
2. the adapter runs its legs for the :class:`memkit.store._ops.SearchOp` (``depth`` candidates each);
3. :func:`rank` fuses them (:func:`memkit._retrieval._fusion.fuse`, the score fusion measured in
   docs/retrieval.md), breaks ties newest first, and builds ``score_details`` with the
   same keys on every adapter (``mode``, ``found_by``, one entry per leg and, with a semantic
   leg, ``dense_path``: whether an exact scan or an approximate index answered it);
4. :func:`search` runs the adapter's ranking and records the recall: the only place a
   search is recorded (:mod:`memkit._recall._recording`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from memkit._core._errors import InvalidInputError
from memkit._core._validate import Limits, check_query, check_read
from memkit._retrieval._fusion import DenseScores, HybridConfig, Neighbours, check_hybrid, check_mode, fuse

# The models (and pydantic) load with the first search a store runs: ranking alone (the command
# line's one-shot keyword search) needs none of them.
if TYPE_CHECKING:
    from memkit._core._models import MemoryItem
    from memkit.store._ops import SearchOp

__all__ = ["Ranked", "Ranking", "Searcher", "prepare", "rank", "search"]

K = TypeVar("K", bound=Hashable)

#: ``(key, score, score_details)``, best first.
Ranked = list[tuple[K, float, dict[str, Any]]]


class Searcher(Protocol):
    """What :func:`prepare` reads of a store: its limits, its fusion knobs and its search modes."""

    limits: Limits
    hybrid: HybridConfig

    @property
    def search_modes(self) -> tuple[str, ...]: ...


class Ranking(Protocol):
    """What :func:`rank` reads of a search (a :class:`memkit.store._ops.SearchOp` is one)."""

    @property
    def query(self) -> str: ...

    @property
    def limit(self) -> int: ...

    @property
    def mode(self) -> str: ...

    @property
    def config(self) -> HybridConfig: ...


def prepare(
    store: Searcher,
    query: object,
    user_id: object,
    agent_id: object,
    limit: object,
    filters: object,
    mode: object,
    hybrid: object,
    as_of: object = None,
) -> SearchOp:
    """Check a search's arguments against ``store`` (its ``limits``, ``search_modes`` and ``hybrid``)."""
    from memkit._core._port import SupportsAsOf
    from memkit._recall._recording import check_as_of
    from memkit.store._ops import SearchOp

    text = check_query(query, store.limits)
    user, agent, checked_limit, _, conditions = check_read(user_id, agent_id, limit, filters, store.limits)
    resolved = check_mode(mode, store.search_modes, repr(store))
    config = check_hybrid(hybrid) or store.hybrid
    until_us = check_as_of(as_of)
    if until_us is not None and not isinstance(store, SupportsAsOf):
        raise InvalidInputError(f"{store!r} cannot search as of a past time (as_of)")
    return SearchOp(
        query=text, user_id=user, agent_id=agent, limit=checked_limit, filters=filters, conditions=conditions,
        mode=resolved, config=config, as_of=cast(datetime, as_of) if until_us is not None else None,
        until_us=until_us,
    )


def _keyword_details(rank: int, score: float) -> dict[str, Any]:
    return {"mode": "keyword", "found_by": ["keyword"], "keyword": {"rank": rank, "score": score}}


def _semantic_details(rank: int, cosine: float, path: str) -> dict[str, Any]:
    return {"mode": "semantic", "found_by": ["semantic"], "semantic": {"rank": rank, "score": cosine},
            "dense_path": path}


def rank(
    request: Ranking,
    keyword: Sequence[tuple[K, float]],
    dense: DenseScores | None,
    newer: Callable[[list[K]], Mapping[K, tuple[int, int]]],
    neighbours: Neighbours | None = None,
    speakers: Callable[[list[K], str], set[K]] | None = None,
) -> Ranked[K]:
    """Fuse the legs in ``request.mode``; ties go to the newer memory; at most ``limit`` results.

    ``keyword`` is the keyword leg, best first (its own ties newest first); ``dense`` the
    semantic leg (``None`` in keyword mode). ``newer(keys)`` gives each key a
    ``(created_us, tie)`` pair, larger is newer; it is asked once, for the candidates
    that need it. ``neighbours`` (:data:`memkit._retrieval._fusion.Neighbours`) says which memories
    were written around each candidate, for ``config.context``; without it there is no context.
    ``speakers(keys, query)`` says which candidates are chat lines by someone the query names
    (:meth:`memkit._retrieval._keyword.KeywordIndex.spoken_by`), for ``config.speaker``.
    """
    if request.mode == "keyword":
        return [(key, score, _keyword_details(r, score)) for r, (key, score) in
                enumerate(keyword[: request.limit], start=1)]
    assert dense is not None
    if request.mode == "semantic":
        keys = dense.ranked[: request.limit]
        age = newer(keys)
        order = sorted(keys, key=lambda k: (-dense.cosine[k], -age[k][0], -age[k][1]))
        return [(k, dense.cosine[k], _semantic_details(r, dense.cosine[k], dense.path))
                for r, k in enumerate(order, start=1)]
    spoken = None if speakers is None else (lambda keys: speakers(keys, request.query))
    fused = fuse(keyword, dense, request.config, neighbours, spoken)
    for _, _, details in fused:
        details["dense_path"] = dense.path
    age = newer([k for k, _, _ in fused])
    fused.sort(key=lambda t: (-t[1], -age[t[0]][0], -age[t[0]][1]))
    return fused[: request.limit]


async def search(
    store: object,
    request: SearchOp,
    ranked: Callable[[SearchOp], Awaitable[list[MemoryItem]]],
) -> list[MemoryItem]:
    """Run the adapter's ranking for ``request`` and record the recall (if recording is on)."""
    from memkit._recall import _recording as _recall

    hits = await ranked(request)
    await _recall.settle(_recall.record(
        store, query=request.query, user_id=request.user_id, agent_id=request.agent_id, mode=request.mode,
        filters=request.filters, limit=request.limit, hits=hits, as_of=request.as_of,
    ))
    return hits
