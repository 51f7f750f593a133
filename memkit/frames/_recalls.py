"""What steps recalled (the recall audit), how many per step, and the marks a researcher made."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from memkit._core._port import (
    MemoryProvider,
    SupportsMarks,
    SupportsRecallCounts,
    SupportsRecalls,
)
from memkit._core._recalls import Mark, Recall, RecalledMemory, step_namespace
from memkit._sync import Memory, call, provider_of

RECALL_COLUMNS = (
    "recall_id", "created_at", "user_id", "agent_id", "workflow_id", "run_id", "step_index", "step_name",
    "attempt", "kind", "query", "mode", "limit", "as_of", "rank", "memory_id", "score", "legs",
    "keyword_rank", "keyword_score", "semantic_rank", "semantic_score", "content", "details",
)
"""Columns of :func:`recalls_frame`, in order."""

_LEGS = ("keyword", "semantic")


def _keeps_recalls(mem: MemoryProvider | Memory) -> bool:
    """Whether the store records recalls (implements :class:`memkit.SupportsRecalls`)."""
    return isinstance(provider_of(mem), SupportsRecalls)


async def _recalls_of(
    provider: MemoryProvider, *, user_id: str | None = None, agent_id: str | None = None,
    workflow_id: str | None = None, run_id: str | None = None,
) -> list[Recall]:
    if not isinstance(provider, SupportsRecalls):
        raise NotImplementedError(f"{provider!r} does not keep recalls")
    return await provider.recalls(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id)


async def _counted_in_place(
    provider: MemoryProvider, workflow_id: str | None, user_id: str | None, agent_id: str | None
) -> list[tuple[Any, ...]] | None:
    """Recalls per step from a store that counts them itself (SQLite: one GROUP BY, no recall parsed)."""
    if not isinstance(provider, SupportsRecallCounts):
        return None
    return list(await provider.recall_step_counts(workflow_id, user_id=user_id, agent_id=agent_id))


def _leg(details: dict[str, Any] | None, leg: str, field: str) -> Any:
    part = (details or {}).get(leg)
    value = part.get(field) if isinstance(part, dict) else None
    return np.nan if value is None else value


def recalls_frame(
    mem: MemoryProvider | Memory,
    workflow_id: str | None = None,
    *,
    run_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
) -> pd.DataFrame:
    """One row per (recall, memory it returned): which step recalled what, at what rank and score.

    Columns are :data:`RECALL_COLUMNS`: the recall (``recall_id``, ``created_at``, the
    namespace searched, the step: ``workflow_id, run_id, step_index, step_name,
    attempt``; ``kind`` is ``search`` or ``context``; ``query, mode, limit, as_of``), then
    the memory (``rank`` 1 = best, ``memory_id``, ``score``, ``legs``: the retrieval legs
    that found it, per-leg ranks and scores, ``content`` as it was returned, and the full
    ``details``). A recall that returned nothing is one row with an empty memory. Rows are
    in recording order, then rank. ``user_id``/``agent_id`` keep one namespace's recalls.

    Examples
    --------
    >>> df = recalls_frame(mem, workflow_id="wf1")                       # doctest: +SKIP
    >>> df.groupby("step_name").memory_id.nunique()                       # doctest: +SKIP
    """
    rows: list[dict[str, Any]] = []
    for recall in call(mem, _recalls_of, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id):
        head = {
            "recall_id": recall.id, "created_at": recall.created_at, "user_id": recall.user_id,
            "agent_id": recall.agent_id, "workflow_id": recall.workflow_id, "run_id": recall.run_id,
            "step_index": recall.step_index, "step_name": recall.step_name, "attempt": recall.attempt,
            "kind": recall.kind, "query": recall.query, "mode": recall.mode, "limit": recall.limit,
            "as_of": recall.as_of,
        }
        hits: list[RecalledMemory | None] = list(recall.hits) or [None]
        for hit in hits:
            row = dict(head)
            if hit is None:
                row.update(rank=None, memory_id=None, score=np.nan, legs="", content=None, details=None)
            else:
                found = [leg for leg in _LEGS if not pd.isna(_leg(hit.details, leg, "rank"))]
                row.update(
                    rank=hit.rank, memory_id=hit.id, score=np.nan if hit.score is None else hit.score,
                    legs=", ".join(found), content=hit.content, details=hit.details,
                )
            for leg in _LEGS:
                row[f"{leg}_rank"] = np.nan if hit is None else _leg(hit.details, leg, "rank")
                row[f"{leg}_score"] = np.nan if hit is None else _leg(hit.details, leg, "score")
            rows.append(row)
    frame = pd.DataFrame(rows, columns=list(RECALL_COLUMNS))
    for column in ("created_at", "as_of"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    for column in ("step_index", "attempt", "rank", "limit", "keyword_rank", "semantic_rank"):
        frame[column] = pd.array(frame[column].astype("Float64"), dtype="Int64")
    for column in ("score", "keyword_score", "semantic_score"):
        frame[column] = frame[column].astype("float64")
    return frame


def recall_counts(
    mem: MemoryProvider | Memory,
    workflow_id: str | None = None,
    *,
    user_id: str | None = None,
    agent_id: str | None = None,
) -> pd.DataFrame:
    """Recalls per step: ``user_id, agent_id, workflow_id, run_id, step_index, recalls, recalled``.

    ``user_id``/``agent_id`` are the namespace of the step's trace (a run is one namespace's:
    two users may run the same ``workflow_id``), whichever namespace its searches read;
    ``recalled`` counts the memories they returned. Give ``user_id``/``agent_id`` to count one
    namespace's steps only. Join it to :func:`traces_frame` on ``user_id, agent_id,
    workflow_id, run_id, step_index`` (as ``traces_frame(..., recalls=True)`` does).
    """
    provider = provider_of(mem)
    rows = call(provider, _counted_in_place, workflow_id, user_id, agent_id)
    if rows is not None:
        return pd.DataFrame({
            "user_id": pd.Series([r[0] for r in rows], dtype=object),
            "agent_id": pd.Series([r[1] for r in rows], dtype=object),
            "workflow_id": pd.Series([r[2] for r in rows], dtype=object),
            "run_id": pd.Series([r[3] for r in rows], dtype=object),
            "step_index": pd.Series([r[4] for r in rows], dtype="int64"),
            "recalls": pd.Series([r[5] for r in rows], dtype="int64"),
            "recalled": pd.Series([r[6] or 0 for r in rows], dtype="int64"),
        })
    recalls = [r for r in call(provider, _recalls_of, workflow_id=workflow_id) if r.step_index is not None]
    spaces = [step_namespace(r) for r in recalls]
    if user_id is not None or agent_id is not None:
        keep = [(user_id is None or u == user_id) and (agent_id is None or a == agent_id) for u, a in spaces]
        recalls = [r for r, k in zip(recalls, keep, strict=True) if k]
        spaces = [s for s, k in zip(spaces, keep, strict=True) if k]
    keys = ["user_id", "agent_id", "workflow_id", "run_id", "step_index"]
    frame = pd.DataFrame(
        {
            "user_id": [u for u, _ in spaces],
            "agent_id": [a for _, a in spaces],
            "workflow_id": [r.workflow_id for r in recalls],
            "run_id": [r.run_id for r in recalls],
            "step_index": [r.step_index for r in recalls],
            "recalled": [len(r.hits) for r in recalls],
        },
        columns=[*keys, "recalled"],
    )
    counts = (
        frame.groupby(keys, dropna=False, sort=False)
        .agg(recalls=("recalled", "size"), recalled=("recalled", "sum"))
        .reset_index()
    )
    counts["step_index"] = counts["step_index"].astype("int64")
    counts["recalls"] = counts["recalls"].astype("int64")
    counts["recalled"] = counts["recalled"].astype("int64")
    return counts


def _with_recall_counts(steps: pd.DataFrame, mem: MemoryProvider | Memory) -> pd.DataFrame:
    """``steps`` (a :func:`traces_frame`) with ``recalls`` and ``recalled`` per step (0 when none)."""
    if steps.empty:
        return steps.assign(recalls=pd.Series(dtype="int64"), recalled=pd.Series(dtype="int64"))
    workflows = steps["workflow_id"].dropna().unique()
    workflow = str(workflows[0]) if len(workflows) == 1 else None
    counts = recall_counts(mem, workflow)
    out = steps.copy(deep=False)  # the new columns only: copying every trace column costs more than the count
    if counts.empty:  # the common case of a store that records nothing: no join to make
        out["recalls"] = out["recalled"] = np.zeros(len(steps), dtype="int64")
        return out

    # The join as integer codes (a missing value is one more code): a Python loop over the steps
    # cost most of the panel's read on a store with thousands of runs. The step's namespace is
    # part of the key: another namespace's run of the same workflow (same workflow_id, no run_id,
    # same step indexes) must not lend this one its recalls.
    n = len(steps)
    key = np.zeros(n + len(counts), dtype=np.int64)
    for left, right in (
        (steps["user_id"].to_numpy(dtype=object), counts["user_id"].to_numpy(dtype=object)),
        (steps["agent_id"].to_numpy(dtype=object), counts["agent_id"].to_numpy(dtype=object)),
        (steps["workflow_id"].to_numpy(dtype=object), counts["workflow_id"].to_numpy(dtype=object)),
        (steps["run_id"].to_numpy(dtype=object), counts["run_id"].to_numpy(dtype=object)),
        (steps["step_index"].to_numpy(dtype="float64", na_value=np.nan), counts["step_index"].to_numpy("float64")),
    ):
        codes = pd.factorize(np.concatenate([left, right]), use_na_sentinel=False)[0].astype(np.int64)
        key = pd.factorize(key * (int(codes.max()) + 1) + codes)[0].astype(np.int64)
    where = pd.Index(key[n:]).get_indexer(key[:n])
    found = where >= 0
    for name in ("recalls", "recalled"):
        column = np.zeros(n, dtype="int64")
        column[found] = counts[name].to_numpy("int64")[where[found]]
        out[name] = column
    return out




ANNOTATION_COLUMNS = (
    "mark_id", "created_at", "user_id", "agent_id", "kind", "label", "note", "workflow_id", "run_id",
    "step_index", "step_name", "step_id", "recall_id", "query", "memory_id",
)
"""Columns of :func:`annotations_frame`, in order."""


def annotations_frame(
    mem: MemoryProvider | Memory,
    workflow_id: str | None = None,
    *,
    run_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
) -> pd.DataFrame:
    """One row per mark a researcher made (:meth:`memkit.Memory.mark_memory`, :meth:`~memkit.Memory.mark_step`).

    Columns are :data:`ANNOTATION_COLUMNS`: the mark (``mark_id``, ``created_at``, its
    namespace), ``kind`` (``memory`` or ``step``), ``label`` (``relevant`` / ``not_relevant``
    for a recalled memory, ``good`` / ``bad`` for a step) and the researcher's ``note``; where
    the step is (``workflow_id, run_id, step_index, step_name``; ``step_id`` for a step mark);
    for a memory mark the ``recall_id``, its ``query`` and the ``memory_id`` judged. Oldest
    first. ``user_id``/``agent_id`` keep one namespace's marks.

    Examples
    --------
    >>> df = annotations_frame(mem, "wf1", user_id="u1", agent_id="bio")     # doctest: +SKIP
    >>> df[df.label == "not_relevant"][["query", "memory_id", "note"]]      # doctest: +SKIP
    """
    marks = call(mem, _marks_of, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id)
    frame = pd.DataFrame(
        [{"mark_id": m.id, "created_at": m.created_at, "user_id": m.user_id, "agent_id": m.agent_id,
          "kind": m.kind, "label": m.label, "note": m.note, "workflow_id": m.workflow_id, "run_id": m.run_id,
          "step_index": m.step_index, "step_name": m.step_name, "step_id": m.step_id, "recall_id": m.recall_id,
          "query": m.query, "memory_id": m.memory_id} for m in marks],
        columns=list(ANNOTATION_COLUMNS),
    )
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    frame["step_index"] = pd.array(frame["step_index"].astype("Float64"), dtype="Int64")
    return frame


async def _marks_of(
    provider: MemoryProvider, *, user_id: str | None, agent_id: str | None, workflow_id: str | None,
    run_id: str | None,
) -> list[Mark]:
    if not isinstance(provider, SupportsMarks):
        raise NotImplementedError(f"{provider!r} does not keep marks")
    return await provider.marks(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id)
