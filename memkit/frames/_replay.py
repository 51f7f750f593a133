"""Replays: a workflow walked step by step, and a recorded recall run again against today's store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Unpack

import pandas as pd

from memkit._core._errors import NotFoundError
from memkit._core._models import MemoryItem
from memkit._core._port import (
    MemoryProvider,
    SupportsGet,
    SupportsRecalls,
)
from memkit._core._recalls import Recall
from memkit._display import status_of
from memkit._recall import _recording as _recall
from memkit._sync import Memory, call
from memkit.frames._reading import StepFilters, _missing, traces_frame
from memkit.traces import ExecutionHistory, ExecutionItem, ExecutionStatus


@dataclass
class ReplayState:
    """The workflow as it stood after one step."""

    position: int
    """0 for the first step stored, then 1, 2, ..."""
    step: pd.Series
    """The step just taken (a :func:`traces_frame` row)."""
    steps: pd.DataFrame
    """Every step so far, this one included."""
    history: ExecutionHistory
    """The same steps as an :class:`~memkit.traces.ExecutionHistory` (summaries, failure patterns)."""


def _item(row: pd.Series) -> ExecutionItem:
    params = {k.split(".", 1)[1]: v for k, v in row.items() if isinstance(k, str) and k.startswith("params.")}
    result = {k.split(".", 1)[1]: v for k, v in row.items() if isinstance(k, str) and k.startswith("result.")}
    retry = row["retry_count"]
    return ExecutionItem(
        step_name=row["step_name"],
        tool=row["tool"],
        status=ExecutionStatus(status_of(row["status"])),
        result={k: v for k, v in result.items() if not _missing(v)} or None,
        error=None if _missing(row["error"]) else row["error"],
        timestamp=row["started_at"].timestamp() if pd.notna(row["started_at"]) else float("nan"),
        parameters={k: v for k, v in params.items() if not _missing(v)} or None,
        duration=None if pd.isna(row["duration_s"]) else float(row["duration_s"]),
        retry_count=0 if pd.isna(retry) else int(retry),
    )


def replay(
    mem: MemoryProvider | Memory | pd.DataFrame, workflow_id: str, **filters: Unpack[StepFilters]
) -> Iterator[ReplayState]:
    """Walk one workflow step by step, yielding the state after each step.

    Examples
    --------
    >>> for state in replay(mem, "wf1"):                                  # doctest: +SKIP
    ...     print(state.position, state.step.step_name, state.history.get_failure_patterns())
    """
    if isinstance(mem, pd.DataFrame):
        df = mem[mem["workflow_id"] == workflow_id]
    else:
        df = traces_frame(mem, workflow_id=workflow_id, **filters)
    items: list[ExecutionItem] = []
    for position in range(len(df)):
        row = df.iloc[position]
        items.append(_item(row))
        # A fresh history per state, so a state kept by the caller never changes afterwards.
        history = ExecutionHistory(items=list(items), workflow_id=workflow_id)
        yield ReplayState(position=position, step=row, steps=df.iloc[: position + 1], history=history)



REPLAY_COLUMNS = ("memory_id", "change", "old_rank", "new_rank", "old_score", "new_score", "deleted", "content")
"""Columns of :func:`replay_recall`, in order."""


async def _rerun(provider: MemoryProvider, recall: Recall) -> list[tuple[int, MemoryItem]]:
    if recall.kind == "context":
        from memkit._recall._context import build_context

        options = recall.options or {}
        window = await build_context(
            provider, recall.query, recall.user_id, recall.agent_id,
            int(options.get("token_budget", 1_000)), candidates=recall.limit, filters=recall.filters,
            mode=recall.mode, order=options.get("order", "relevance"),
            dedup_threshold=float(options.get("dedup_threshold", 0.9)),
        )
        with _recall.paused():
            ranked = await provider.search(
                recall.query, recall.user_id, recall.agent_id, limit=recall.limit, filters=recall.filters,
                mode=recall.mode,
            )
        rank = {item.id: position for position, item in enumerate(ranked, start=1)}
        return [(rank.get(item.id, 0), item) for item in window.items]
    hits = await provider.search(
        recall.query, recall.user_id, recall.agent_id, limit=recall.limit, filters=recall.filters,
        mode=recall.mode,
    )
    return list(enumerate(hits, start=1))


async def _replay(provider: MemoryProvider, recall_id: str) -> tuple[Recall, list[tuple[int, MemoryItem]], set[str]]:
    if not isinstance(provider, SupportsRecalls):
        raise NotImplementedError(f"{provider!r} does not keep recalls")
    recall = await provider.get_recall(recall_id)
    if recall is None:
        raise NotFoundError(f"no recall with id {recall_id!r}")
    with _recall.paused():
        now = await _rerun(provider, recall)
    returned = {item.id for _, item in now}
    deleted: set[str] = set()
    if isinstance(provider, SupportsGet):
        for hit in recall.hits:
            if hit.id not in returned and await provider.get(hit.id) is None:
                deleted.add(hit.id)
    return recall, now, deleted


def replay_recall(mem: MemoryProvider | Memory, recall_id: str) -> pd.DataFrame:
    """Run a recorded recall again now and say what changed: would the step get the same memories?

    The same query, namespace, mode, filters and limit (for a context recall, the same
    budget and candidates through :func:`memkit.build_context`) against the store as it
    is today, with today's embedder and fusion settings. One row per memory in either
    answer (columns :data:`REPLAY_COLUMNS`), today's order first, then the ones gone:

    * ``change``: ``same`` (same rank), ``up``/``down`` (ranked better/worse now),
      ``new`` (returned now, not then), ``gone`` (returned then, not now);
    * ``deleted``: a gone memory no longer exists in the store (``content`` is then its
      snapshot from the recall; otherwise today's text).

    The replay itself is not recorded.
    """
    with _recall.paused():
        recall, now, deleted = call(mem, _replay, recall_id)
    old = {hit.id: hit for hit in recall.hits}
    rows: list[dict[str, Any]] = []
    for new_rank, item in now:
        before = old.get(item.id)
        if before is None:
            change = "new"
        elif new_rank == before.rank:
            change = "same"
        else:
            change = "up" if new_rank < before.rank else "down"
        rows.append({
            "memory_id": item.id, "change": change, "old_rank": None if before is None else before.rank,
            "new_rank": new_rank, "old_score": None if before is None else before.score, "new_score": item.score,
            "deleted": False, "content": item.content,
        })
    returned = {item.id for _, item in now}
    for hit in recall.hits:
        if hit.id not in returned:
            rows.append({
                "memory_id": hit.id, "change": "gone", "old_rank": hit.rank, "new_rank": None,
                "old_score": hit.score, "new_score": None, "deleted": hit.id in deleted, "content": hit.content,
            })
    frame = pd.DataFrame(rows, columns=list(REPLAY_COLUMNS))
    for column in ("old_rank", "new_rank"):
        frame[column] = pd.array(frame[column].astype("Float64"), dtype="Int64")
    for column in ("old_score", "new_score"):
        frame[column] = frame[column].astype("float64")
    frame["deleted"] = frame["deleted"].astype(bool)
    frame.attrs["recall"] = recall
    return frame


# -- marks: what a researcher judged ---------------------------------------------------------
