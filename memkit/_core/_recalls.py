"""Recalls and marks as values: what a search returned (a :class:`Recall`) and a researcher's verdict
on it or on a step (a :class:`Mark`). How they are recorded, checked and stored lives in
:mod:`memkit._recall`; these are the types every layer passes around.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Mark", "Recall", "RecalledMemory", "step_namespace"]


class RecalledMemory(BaseModel):
    """One memory a recall returned: its rank (1 = best), score, legs and text at the time."""

    model_config = ConfigDict(defer_build=True)

    id: str
    rank: int
    score: float | None = None
    details: dict[str, Any] | None = None
    content: str


class Recall(BaseModel):
    """One recorded ``search`` (``kind="search"``) or ``build_context`` (``kind="context"``).

    ``mode`` is the mode the search ran in (``"keyword"``, ``"semantic"``, ``"hybrid"``),
    ``filters`` the metadata filters as given. For a context recall, ``hits`` are the
    memories that went into the prompt (with their rank among the candidates) and
    ``options`` its budget and candidate count. ``workflow_id``, ``run_id``,
    ``step_index``, ``step_name`` and ``attempt`` say which step recalled it (``None``
    outside a step); ``trace_user_id`` and ``trace_agent_id`` the namespace that step's
    trace is stored in, when the step said so (``None``: the namespace searched; see
    :func:`step_namespace`).
    """

    model_config = ConfigDict(defer_build=True)

    id: str
    created_at: datetime
    user_id: str
    agent_id: str
    kind: Literal["search", "context"] = "search"
    query: str
    mode: str
    filters: dict[str, Any] | None = None
    limit: int
    as_of: datetime | None = None
    options: dict[str, Any] | None = None
    workflow_id: str | None = None
    run_id: str | None = None
    step_index: int | None = None
    step_name: str | None = None
    attempt: int | None = None
    trace_user_id: str | None = None
    trace_agent_id: str | None = None
    hits: list[RecalledMemory] = Field(default_factory=list)


def step_namespace(recall: Recall) -> tuple[str, str]:
    """The namespace of the trace whose step made ``recall``: a step belongs to one namespace's run.

    Runs are told apart by namespace (two users may run the same ``workflow_id`` without a
    ``run_id``), so a recall counts only for the step of its own namespace. A step of
    :class:`memkit.traces.ExecutionHistory` records its history's namespace; a recall that
    names none (made in a :func:`recall_scope` without ``user_id``, or recorded before
    recalls kept it) belongs to the step in the namespace it searched.
    """
    return (recall.trace_user_id or recall.user_id, recall.trace_agent_id or recall.agent_id)


class Mark(BaseModel):
    """A researcher's mark on a recalled memory (``label`` relevant / not_relevant) or on a step (good / bad).

    A memory mark names ``recall_id`` and ``memory_id`` and copies the recall's ``query``;
    a step mark names ``step_id``, the id of the step's trace record. Both copy where the
    step is (``workflow_id, run_id, step_index, step_name``) so marks can be read per run.
    ``note`` is the researcher's own text, kept as given and shown as text.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str
    created_at: datetime
    user_id: str
    agent_id: str
    label: Literal["relevant", "not_relevant", "good", "bad"]
    note: str = ""
    recall_id: str | None = None
    memory_id: str | None = None
    step_id: str | None = None
    query: str | None = None
    workflow_id: str | None = None
    run_id: str | None = None
    step_index: int | None = None
    step_name: str | None = None

    @property
    def kind(self) -> Literal["memory", "step"]:
        """``"memory"`` for a mark on a recalled memory, ``"step"`` for one on a step."""
        return "step" if self.step_id is not None else "memory"
