"""The operations a store executes, as values.

Each public method of :class:`memkit.store._base.Store` checks its arguments into one of
these (so a bad argument fails before the store is touched), then hands it to
:meth:`~memkit.store._base.Store.execute`, as LangGraph's ``BaseStore.batch`` takes
``GetOp``/``SearchOp``/``PutOp`` values and an httpx transport takes a request. An operation
is checked input only: every field already holds what the adapter may trust.

``Op[R]`` says what the operation returns. An operation holds data only: which backend method
executes it is one table in the store base (:data:`memkit.store._base.HANDLERS`), and a backend
offers an optional operation by writing that method, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from memkit._core._filters import Condition
from memkit._core._models import MemoryItem, NamespaceInfo, Stats
from memkit._core._recalls import Mark, Recall
from memkit._core._records import Record
from memkit._core._runs import RunSummary
from memkit._retrieval._config import leg_depth
from memkit._retrieval._fusion import HybridConfig

__all__ = [
    "AddRecallsOp",
    "CloseOp",
    "DeleteOp",
    "ExportOp",
    "GetOp",
    "ImportStepsOp",
    "ListOp",
    "MarksOp",
    "NamespacesOp",
    "Op",
    "PingOp",
    "PutMarksOp",
    "RecallsOp",
    "RemoveMarksOp",
    "ResetOp",
    "RunsOp",
    "SearchOp",
    "StatsOp",
    "TraceColumnsOp",
    "TracePayloadsOp",
    "ValuesOp",
    "WriteOp",
]

R = TypeVar("R")


class Op(Generic[R]):
    """One checked operation whose result is an ``R``: a plain value the store executes."""

    __slots__ = ()


@dataclass(frozen=True)
class WriteOp(Op[list[str]]):
    """Store these records, all or none (``add``, ``add_trace``, ``add_many``): ``Store._write``.

    ``replace``: a record whose id a memory of the same namespace holds replaces that memory in the
    same transaction (an upsert: of writers racing on one id the last wins and none fails); an id
    held in another namespace refuses the batch. Without it any id held already refuses the batch.
    """

    records: tuple[Record, ...]
    progress: bool = False  # show a progress bar (add_many)
    replace: bool = False



@dataclass(frozen=True)
class SearchOp(Op[list[MemoryItem]]):
    """Rank one namespace's memories against a non-empty query: ``Store._rank``.

    The adapter finds candidates (its keyword and semantic legs) and hands them to
    :func:`memkit.store._search.rank`; the base records the recall. An empty query never reaches
    the adapter as a search: the base lists the namespace newest first (:class:`ListOp`).
    """

    query: str
    user_id: str
    agent_id: str
    limit: int
    filters: object  # as given (the recall keeps them)
    conditions: tuple[Condition, ...]
    mode: str
    config: HybridConfig
    as_of: datetime | None = None
    until_us: int | None = None  # as_of in microseconds: memories created later are left out

    @property
    def depth(self) -> int:
        """How many candidates each leg contributes (hybrid: ``config.candidates``; else the limit)."""
        return leg_depth(self.mode, self.config, self.limit)



@dataclass(frozen=True)
class ListOp(Op[list[Record]]):
    """One namespace newest first, filtered, a page of it (``get_all``, ``get_page``, a search
    with an empty query): ``Store._list``."""

    user_id: str
    agent_id: str
    conditions: tuple[Condition, ...]
    limit: int
    offset: int = 0
    until_us: int | None = None  # leave out memories created later (search's as_of)



@dataclass(frozen=True)
class ValuesOp(Op[list[Any]]):
    """The distinct values one metadata ``path`` holds among a namespace's memories that pass the
    filters (a memory without it adds none), in no order: ``Store._values``. The base reads them
    from ``_list``; a store whose database can answer it alone overrides that."""

    user_id: str
    agent_id: str
    conditions: tuple[Condition, ...]
    path: tuple[str, ...]



@dataclass(frozen=True)
class GetOp(Op["Record | None"]):
    """One memory by id, whatever its namespace (``None``: no such memory): ``Store._get``."""

    memory_id: str



@dataclass(frozen=True)
class DeleteOp(Op[bool]):
    """Delete one memory, only if it lives in ``user_id``/``agent_id`` where given: ``Store._delete``."""

    memory_id: str
    user_id: str | None = None
    agent_id: str | None = None



@dataclass(frozen=True)
class ResetOp(Op[None]):
    """Delete everything the store holds (memories, recalls, marks): ``Store._reset``."""



@dataclass(frozen=True)
class NamespacesOp(Op[list[NamespaceInfo]]):
    """Every namespace with its count and activity, sorted: ``Store._namespaces``."""




@dataclass(frozen=True)
class StatsOp(Op[Stats]):
    """How much the store holds: ``Store._stats``."""




@dataclass(frozen=True)
class PingOp(Op[str]):
    """Reach the store and say where it is (the detail line of ``health``); the base times it
    and reports a failure: ``Store._ping``."""




@dataclass(frozen=True)
class ExportOp:
    """Every record, oldest first, those of ``user_id``/``agent_id`` where given: ``Store._export``.

    Not an :class:`Op`: its answer is a stream (an async iterator), read while it is produced.
    """

    user_id: str | None = None
    agent_id: str | None = None


@dataclass(frozen=True)
class TracePayloadsOp(Op[dict[str, Any]]):
    """Trace steps' data holding any of some words (see :class:`memkit._core._port.SupportsTracePayloads`)."""

    user_id: str | None = None
    agent_id: str | None = None
    containing: tuple[str, ...] = ()



@dataclass(frozen=True)
class TraceColumnsOp(Op[dict[str, Any]]):
    """Every trace step as columns (see :class:`memkit.SupportsTraceColumns`): ``Store._trace_columns``."""

    workflow_id: str | None = None
    agent_id: str | None = None
    user_id: str | None = None
    status: str | None = None
    since_us: int | None = None
    after_seq: int | None = None  # only the steps past this seq (a live view's next look)



@dataclass(frozen=True)
class RunsOp(Op[list[RunSummary]]):
    """Every run (of one namespace or workflow where given) in one row, newest first:
    ``Store._run_summaries`` (the base reads them from the store's public reads; a store that
    can count in place overrides it). Needs what the base reads them from: ``export``."""

    user_id: str | None = None
    agent_id: str | None = None
    workflow_id: str | None = None



@dataclass(frozen=True)
class RecallsOp(Op[list[Recall]]):
    """Stored recalls, oldest first, those matching every field given (``recalls``,
    ``get_recall``): ``Store._recalls``."""

    user_id: str | None = None
    agent_id: str | None = None
    workflow_id: str | None = None
    run_id: str | None = None
    recall_id: str | None = None



@dataclass(frozen=True)
class AddRecallsOp(Op[int]):
    """Store recalls as given (an import), all or none; an id held already refuses them all:
    ``Store._add_recalls``."""

    recalls: tuple[Recall, ...]



@dataclass(frozen=True)
class ImportStepsOp(Op[int]):
    """Store a bulk import's trace steps and then its recalls in one transaction, all or none; returns
    how many recalls: ``Store._import_steps``.

    ``records`` are the steps as :func:`memkit._core._records.trace_record` made them (checked);
    ``recalls`` are bodies as :func:`memkit._recall._recording.body_of` gives them, checked by the store
    after the steps (:func:`~memkit._recall._recording.checked_bodies`), as ``add_recalls`` would.
    """

    records: tuple[Record, ...]
    recalls: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class MarksOp(Op[list[Mark]]):
    """Stored marks, oldest first; the base keeps those matching every field given:
    ``Store._marks``."""

    user_id: str | None = None
    agent_id: str | None = None
    workflow_id: str | None = None
    run_id: str | None = None



@dataclass(frozen=True)
class PutMarksOp(Op[int]):
    """Store marks, each replacing the one on the same target (same id), all or none:
    ``Store._put_marks``."""

    marks: tuple[Mark, ...]



@dataclass(frozen=True)
class RemoveMarksOp(Op[int]):
    """Delete the marks with these ids that live in ``user_id``/``agent_id``; how many:
    ``Store._remove_marks``."""

    mark_ids: tuple[str, ...]
    user_id: str
    agent_id: str



@dataclass(frozen=True)
class CloseOp(Op[None]):
    """Release connections, files and threads, once (the base makes a second close a no-op):
    ``Store._close``."""


