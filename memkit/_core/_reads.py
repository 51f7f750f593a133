"""One-shot reads: what a command that reads a little and exits asks of a store, on the caller's thread.

A store whose registry entry names a ``reads`` opener (see :mod:`memkit.store._registry`) answers
the command line's reads (``memkit runs``, ``show``, ``namespaces``, ``stats``, and a keyword
``search`` where that is what the store would run) through
:class:`OneShotReads` without the models, pydantic or an event loop, which are most of such a
command's CPU; any other store is read through its port, as every store can be
(:class:`memkit._serve._runs.PortReads`). Both give the same objects' fields, so a command prints
the same bytes either way (tests hold them equal).

The views here carry the fields of :class:`memkit.Recall`, :class:`memkit.Mark` and
:class:`memkit.NamespaceInfo` that a reader of runs shows, read from what the store keeps the way
those models read it (times as aware datetimes, scores as floats).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from types import TracebackType

    from memkit._core._runs import RunSummary, Step

__all__ = ["FoundView", "HitView", "MarkView", "NamespaceView", "OneShotReads", "RecallView", "found_json", "mark_view",
           "recall_view"]


@dataclass(frozen=True)
class HitView:
    """One memory a recall returned (the fields of :class:`memkit.RecalledMemory` a run shows)."""

    id: str
    rank: int
    score: float | None
    content: str


@dataclass(frozen=True)
class RecallView:
    """A recorded recall, as :class:`memkit.Recall` reads it (the fields a run shows)."""

    id: str
    created_at: datetime
    user_id: str
    agent_id: str
    query: str
    mode: str
    limit: int
    kind: str = "search"
    workflow_id: str | None = None
    run_id: str | None = None
    step_index: int | None = None
    step_name: str | None = None
    trace_user_id: str | None = None
    trace_agent_id: str | None = None
    hits: list[HitView] = field(default_factory=list)


@dataclass(frozen=True)
class MarkView:
    """A researcher's mark, as :class:`memkit.Mark` reads it."""

    id: str
    created_at: datetime
    user_id: str
    agent_id: str
    label: str
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
    def kind(self) -> str:
        return "step" if self.step_id is not None else "memory"


@dataclass(frozen=True)
class NamespaceView:
    """One namespace and its activity (:class:`memkit.NamespaceInfo`'s fields)."""

    user_id: str
    agent_id: str
    count: int
    first_at: datetime | None
    last_at: datetime | None


@dataclass(frozen=True)
class FoundView:
    """One search result with :class:`memkit.MemoryItem`'s fields, in its order."""

    id: str
    content: str
    score: float | None
    metadata: dict[str, Any]
    created_at: datetime | None
    agent_id: str | None
    user_id: str | None
    score_details: dict[str, Any] | None

    def as_json(self) -> dict[str, Any]:
        """What ``MemoryItem.model_dump(mode="json")`` gives for the same fields: the values are the plain,
        finite JSON the store validated on write, and pydantic writes a UTC time with ``Z``."""
        when = None if self.created_at is None else self.created_at.isoformat()
        if when is not None and when.endswith("+00:00"):
            when = when[:-6] + "Z"
        return {"id": self.id, "content": self.content, "score": self.score, "metadata": self.metadata,
                "created_at": when, "agent_id": self.agent_id, "user_id": self.user_id,
                "score_details": self.score_details}


def found_json(hit: Any) -> dict[str, Any]:
    """A search result (:class:`memkit.MemoryItem` or :class:`FoundView`) as ``search --json`` prints it."""
    return hit.as_json() if isinstance(hit, FoundView) else hit.model_dump(mode="json")


_RECALL_FIELDS = ("id", "user_id", "agent_id", "query", "mode", "limit", "kind", "workflow_id", "run_id",
                  "step_index", "step_name", "trace_user_id", "trace_agent_id")
_MARK_FIELDS = ("id", "user_id", "agent_id", "label", "note", "recall_id", "memory_id", "step_id", "query",
                "workflow_id", "run_id", "step_index", "step_name")


def recall_view(text: str) -> RecallView:
    """A stored recall's JSON (hits as ``[id, rank, score, details, content]`` arrays) as a view."""
    body = json.loads(text)
    hits = [HitView(hit_id, rank, None if score is None else float(score), content)
            for hit_id, rank, score, _, content in body.get("hits") or ()]
    return RecallView(created_at=datetime.fromisoformat(body["created_at"]), hits=hits,
                      **{name: body[name] for name in _RECALL_FIELDS if name in body})


def mark_view(text: str) -> MarkView:
    """A stored mark's JSON as a view."""
    body = json.loads(text)
    return MarkView(created_at=datetime.fromisoformat(body["created_at"]),
                    **{name: body[name] for name in _MARK_FIELDS if name in body})


class OneShotReads(Protocol):
    """The reads of ``memkit runs``, ``show``, ``namespaces`` and ``stats``, synchronous; a context
    manager that closes what it opened."""

    #: Whether the store records recalls (else a step's ``recalls`` stays ``None``: not kept).
    keeps_recalls: bool

    def run_summaries(
        self, user_id: str | None = None, agent_id: str | None = None, workflow_id: str | None = None
    ) -> list[RunSummary]:
        """What :meth:`memkit.store._base.Store.run_summaries` answers."""
        ...

    def run_steps(self, ids: tuple[str, str, str | None, str | None], size: int) -> list[Step]:
        """The steps of the run ``ids`` (``user_id, agent_id, workflow_id, run_id``) in replay order;
        ``size``: how many trace steps its workflow's listing holds (a run without a run_id: every
        step of the workflow without one)."""
        ...

    def recalls(self, workflow_id: str, run_id: str | None) -> list[Any]:
        """Recalls of that workflow (and run, where given), oldest first: :class:`RecallView` or
        :class:`memkit.Recall`, or ``[]`` where the store keeps none."""
        ...

    def marks(self, workflow_id: str, run_id: str | None) -> list[Any]:
        """Marks of that workflow (and run), oldest first: :class:`MarkView` or :class:`memkit.Mark`."""
        ...

    def namespaces(self) -> list[Any]:
        """:class:`NamespaceView` or :class:`memkit.NamespaceInfo` per namespace, sorted."""
        ...

    def stats(self) -> dict[str, Any]:
        """``memkit.Stats``' fields, in its order (what ``stats().model_dump()`` gives)."""
        ...

    def search(
        self, query: str, user_id: str, agent_id: str, limit: int, filters: Any, mode: str | None
    ) -> list[Any] | None:
        """What the store's ``search`` returns (:class:`FoundView` or :class:`memkit.MemoryItem`);
        ``None``: this search needs the store itself (then open it and ask its port)."""
        ...

    def __enter__(self) -> OneShotReads: ...

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None: ...
