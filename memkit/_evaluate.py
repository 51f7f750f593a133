"""Turn a researcher's marks into a retrieval evaluation: rerun each marked recall's query now.

Each recall with at least one memory marked relevant is one query of the evaluation set:
its query, namespace, filters and mode as recorded, and the memories marked relevant as
the answer. :func:`evaluate` searches again with the store as it is today (its memories,
embedder and hybrid settings, or options given here) and scores the top ``k``:

* recall@k: the share of the relevant memories in the top ``k``;
* reciprocal rank: ``1 / rank`` of the first relevant memory (0 when none is in the top ``k``);

averaged over the queries (MRR). The same scores for the recall as it was recorded
("then") sit beside them, so one call says whether today's retrieval finds more.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import pandas as pd

from memkit._core._errors import InvalidInputError
from memkit._core._port import MemoryProvider, SupportsMarks, SupportsRecalls
from memkit._core._recalls import Mark, Recall
from memkit._core._validate import check_id, check_limit
from memkit._recall import _recording as _recall
from memkit._recall._marks import no_recall
from memkit._retrieval._config import SearchOptions
from memkit._sync import Memory, call, provider_of

__all__ = ["EVALUATION_COLUMNS", "Evaluation", "QueryScore", "evaluate"]

EVALUATION_COLUMNS = (
    "recall_id", "user_id", "agent_id", "workflow_id", "run_id", "step_index", "step_name", "query", "mode",
    "relevant", "not_relevant", "recall_at_k_then", "rr_then", "recall_at_k", "rr", "found", "missed",
    "not_relevant_found",
)


@dataclass(frozen=True)
class QueryScore:
    """One marked recall, searched again: its scores then (as recorded) and now."""

    recall_id: str
    user_id: str
    agent_id: str
    workflow_id: str | None
    run_id: str | None
    step_index: int | None
    step_name: str | None
    query: str
    mode: str
    relevant: tuple[str, ...]
    """Memory ids marked relevant."""
    not_relevant: tuple[str, ...]
    """Memory ids marked not relevant."""
    recall_at_k_then: float
    rr_then: float
    recall_at_k: float
    rr: float
    ranked: tuple[str, ...]
    """The top ``k`` memory ids now, best first."""

    @property
    def found(self) -> tuple[str, ...]:
        """Relevant memories in today's top ``k``."""
        return tuple(m for m in self.ranked if m in self.relevant)

    @property
    def missed(self) -> tuple[str, ...]:
        """Relevant memories today's top ``k`` leaves out."""
        return tuple(m for m in self.relevant if m not in self.ranked)


@dataclass(frozen=True, repr=False)
class Evaluation:
    """Recall@k and MRR over the marked recalls, now and as recorded.

    ``recall_at_k`` and ``mrr`` are means over :attr:`queries` (``None`` with no query);
    ``*_then`` are the same scores of the recalls as they were recorded. ``skipped``
    counts marked recalls with no memory marked relevant (nothing to find, so no score).
    :meth:`frame` is one row per query.
    """

    k: int
    queries: tuple[QueryScore, ...]
    recall_at_k: float | None
    mrr: float | None
    recall_at_k_then: float | None
    mrr_then: float | None
    skipped: int

    def frame(self) -> pd.DataFrame:
        """One row per query (:data:`EVALUATION_COLUMNS`), in the order the recalls were made."""
        rows: list[dict[str, Any]] = []
        for q in self.queries:
            rows.append({
                "recall_id": q.recall_id, "user_id": q.user_id, "agent_id": q.agent_id,
                "workflow_id": q.workflow_id, "run_id": q.run_id, "step_index": q.step_index,
                "step_name": q.step_name, "query": q.query, "mode": q.mode, "relevant": len(q.relevant),
                "not_relevant": len(q.not_relevant), "recall_at_k_then": q.recall_at_k_then,
                "rr_then": q.rr_then, "recall_at_k": q.recall_at_k, "rr": q.rr, "found": list(q.found),
                "missed": list(q.missed),
                "not_relevant_found": [m for m in q.ranked if m in q.not_relevant],
            })
        frame = pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))
        frame["step_index"] = pd.array(frame["step_index"].astype("Float64"), dtype="Int64")
        for column in ("recall_at_k_then", "rr_then", "recall_at_k", "rr"):
            frame[column] = frame[column].astype("float64")
        return frame

    def __repr__(self) -> str:  # a notebook shows the summary, not every query's id lists
        return str(self)

    def __str__(self) -> str:
        if not self.queries:
            return f"Evaluation: no marked recall with a relevant memory ({self.skipped} skipped)"

        def pct(value: float | None) -> str:
            return "—" if value is None else f"{value:.3f}"

        return (
            f"Evaluation over {len(self.queries)} marked {'query' if len(self.queries) == 1 else 'queries'}"
            f" (k={self.k}): "
            f"recall@{self.k} {pct(self.recall_at_k)} (then {pct(self.recall_at_k_then)}), "
            f"MRR {pct(self.mrr)} (then {pct(self.mrr_then)})"
        )


def _scores(ranked: Sequence[str], relevant: set[str], k: int) -> tuple[float, float]:
    top = list(ranked)[:k]
    hit_ranks = [i for i, memory_id in enumerate(top, start=1) if memory_id in relevant]
    return len(hit_ranks) / len(relevant), (1.0 / hit_ranks[0]) if hit_ranks else 0.0


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


async def _evaluate(
    provider: MemoryProvider, marks: Iterable[Mark] | None, user_id: str | None, agent_id: str | None, k: int,
    mode: str | None, options: SearchOptions,
) -> Evaluation:
    if not isinstance(provider, SupportsRecalls):
        raise NotImplementedError(f"{provider!r} keeps no recalls: there is nothing to evaluate")
    if marks is None:
        if not isinstance(provider, SupportsMarks):
            raise NotImplementedError(f"{provider!r} keeps no marks: pass marks=")
        chosen = await provider.marks(user_id=user_id, agent_id=agent_id)
    else:
        if isinstance(marks, (str, bytes, Mark)) or not isinstance(marks, Iterable):
            raise InvalidInputError(f"marks must be a list of memkit.Mark, got {type(marks).__name__}")
        chosen = list(marks)
        for mark in chosen:
            if not isinstance(mark, Mark):
                raise InvalidInputError(f"marks must be memkit.Mark objects, got {type(mark).__name__}")
        chosen = [m for m in chosen if (user_id is None or m.user_id == user_id)
                  and (agent_id is None or m.agent_id == agent_id)]
    # Per recall (in its namespace): the memories marked relevant and not relevant.
    judged: dict[tuple[str, str, str], tuple[set[str], set[str]]] = {}
    for mark in chosen:
        if mark.kind != "memory" or mark.recall_id is None or mark.memory_id is None:
            continue
        good, bad = judged.setdefault((mark.user_id, mark.agent_id, mark.recall_id), (set(), set()))
        (good if mark.label == "relevant" else bad).add(mark.memory_id)
    recalls: list[Recall] = []
    for user, agent, recall_id in judged:
        recall = await provider.get_recall(recall_id, user_id=user, agent_id=agent)
        if recall is None:  # the recall was deleted, or the marks come from another store
            raise no_recall(recall_id, user, agent)
        recalls.append(recall)
    recalls.sort(key=lambda r: (r.created_at, r.id))
    scores: list[QueryScore] = []
    skipped = 0
    search: Any = provider.search  # options beyond the port's (hybrid=...) are the adapter's own
    for recall in recalls:
        good, bad = judged[(recall.user_id, recall.agent_id, recall.id)]
        if not good:
            skipped += 1
            continue
        then = [hit.id for hit in sorted(recall.hits, key=lambda h: h.rank) if hit.rank <= k]
        used = mode or recall.mode
        with _recall.paused():  # an evaluation is not something the agent recalled
            hits = await search(recall.query, recall.user_id, recall.agent_id, k, recall.filters, mode=used,
                                **options)
        ranked = tuple(hit.id for hit in hits)
        recall_then, rr_then = _scores(then, good, k)
        recall_now, rr_now = _scores(ranked, good, k)
        scores.append(QueryScore(
            recall_id=recall.id, user_id=recall.user_id, agent_id=recall.agent_id,
            workflow_id=recall.workflow_id, run_id=recall.run_id, step_index=recall.step_index,
            step_name=recall.step_name, query=recall.query, mode=used, relevant=tuple(sorted(good)),
            not_relevant=tuple(sorted(bad)), recall_at_k_then=recall_then, rr_then=rr_then,
            recall_at_k=recall_now, rr=rr_now, ranked=ranked,
        ))
    return Evaluation(
        k=k, queries=tuple(scores),
        recall_at_k=_mean([q.recall_at_k for q in scores]), mrr=_mean([q.rr for q in scores]),
        recall_at_k_then=_mean([q.recall_at_k_then for q in scores]), mrr_then=_mean([q.rr_then for q in scores]),
        skipped=skipped,
    )


def evaluate(
    store: MemoryProvider | Memory,
    marks: Iterable[Mark] | None = None,
    *,
    k: int = 5,
    user_id: str | None = None,
    agent_id: str | None = None,
    mode: str | None = None,
    **options: Unpack[SearchOptions],
) -> Evaluation:
    """Rerun every recall with memories marked relevant and score today's top ``k`` (recall@k, MRR).

    Parameters
    ----------
    store
        The store that holds the recalls (and, with ``marks=None``, the marks).
    marks
        The marks to evaluate (say, ``mem.marks(workflow_id="wf")``); ``None``: every mark
        the store keeps.
    k
        How many results count.
    user_id, agent_id
        Keep one namespace's marks.
    mode
        Search every query in this mode (``"keyword"``, ``"semantic"``, ``"hybrid"``) instead of
        the mode each recall was made in.
    options
        Passed to the store's ``search`` (``hybrid=memkit.HybridConfig(...)``), to try a setting
        before adopting it.

    Examples
    --------
    >>> result = memkit.evaluate(mem, k=5)                  # doctest: +SKIP
    >>> result.recall_at_k, result.mrr                      # doctest: +SKIP
    >>> result.frame()[["query", "recall_at_k_then", "recall_at_k"]]   # doctest: +SKIP
    """
    provider = provider_of(store)
    size = check_limit(k, name="k")
    for name, value in (("user_id", user_id), ("agent_id", agent_id), ("mode", mode)):
        if value is not None:
            check_id(value, name)
    if marks is not None and not isinstance(marks, Iterable):
        raise InvalidInputError(f"marks must be a list of memkit.Mark, got {type(marks).__name__}")
    return call(provider, _evaluate, marks, user_id, agent_id, size, mode, options)
