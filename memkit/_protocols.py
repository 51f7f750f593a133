"""The port (``MemoryProvider``) and the optional capabilities an adapter may add.

Each capability is its own one-method protocol so callers can ask
``isinstance(provider, SupportsStats)`` instead of catching ``AttributeError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memkit._marks import Mark
from memkit._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._recall import Recall

__all__ = [
    "MemoryProvider",
    "SupportsAddMany",
    "SupportsAsOf",
    "SupportsClose",
    "SupportsExport",
    "SupportsGet",
    "SupportsHealth",
    "SupportsMarks",
    "SupportsNamespaces",
    "SupportsPaging",
    "SupportsRecalls",
    "SupportsSearchModes",
    "SupportsStats",
    "SupportsTraceColumns",
]


@runtime_checkable
class MemoryProvider(Protocol):
    """Vendor-agnostic memory interface (Ports & Adapters pattern)."""

    async def add(
        self,
        content: str,
        user_id: str,
        agent_id: str,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Add unstructured memory. Returns memory_id."""
        ...

    async def add_trace(
        self,
        agent_id: str,
        workflow_id: str,
        trace_data: dict[str, Any],
        user_id: str = "system",
    ) -> str:
        """Add structured execution trace. Returns memory_id."""
        ...

    async def search(
        self,
        query: str,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
    ) -> list[MemoryItem]:
        """The best ``limit`` matches in one namespace, best first.

        ``mode`` is one of the adapter's :attr:`SupportsSearchModes.search_modes`
        (``None``: hybrid where offered); any other is an ``InvalidInputError``.
        """
        ...

    async def get_all(
        self,
        user_id: str,
        agent_id: str,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        """Retrieve all memories for agent with optional filters."""
        ...

    async def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> bool:
        """Delete memory by ID (only if it lives in ``user_id``/``agent_id`` when given). True if deleted."""
        ...

    async def reset(self) -> bool:
        """Full wipe (testing only). Returns True if successful."""
        ...


@runtime_checkable
class SupportsSearchModes(Protocol):
    """Say which ``mode=`` values ``search`` answers, so callers need not try each one."""

    @property
    def search_modes(self) -> tuple[str, ...]: ...


@runtime_checkable
class SupportsGet(Protocol):
    """Fetch one memory by id (``None`` when it does not exist)."""

    async def get(self, memory_id: str) -> MemoryItem | None: ...


@runtime_checkable
class SupportsAddMany(Protocol):
    """Write many memories in one transaction: all of them or none."""

    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False
    ) -> list[str]: ...


@runtime_checkable
class SupportsNamespaces(Protocol):
    """List every (user_id, agent_id) namespace with counts and activity."""

    async def namespaces(self) -> list[NamespaceInfo]: ...


@runtime_checkable
class SupportsStats(Protocol):
    """Report how much the store holds."""

    async def stats(self) -> Stats: ...


@runtime_checkable
class SupportsHealth(Protocol):
    """Check that the store answers."""

    async def health(self) -> Health: ...


@runtime_checkable
class SupportsExport(Protocol):
    """Iterate every record (traces included), oldest first."""

    def export(
        self, user_id: str | None = None, agent_id: str | None = None
    ) -> AsyncIterator[MemoryItem]: ...


@runtime_checkable
class SupportsPaging(Protocol):
    """Page through a namespace newest first without loading all of it."""

    async def get_page(
        self,
        user_id: str,
        agent_id: str,
        *,
        offset: int = 0,
        limit: int = 50,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]: ...


@runtime_checkable
class SupportsClose(Protocol):
    """Release connections, files and worker threads.

    Closing again is a no-op (it waits for the first close); any other call after it
    raises a :class:`~memkit.StorageError` saying the store is closed (the in-memory
    store, which holds nothing to release, keeps answering). From sync code,
    :meth:`memkit.Memory.close` does it.
    """

    async def aclose(self) -> None: ...


@runtime_checkable
class SupportsTraceColumns(Protocol):
    """Read every trace step as columns (a fast path for :func:`memkit.frames.traces_frame`).

    Returns ``{column: sequence}`` of equal length, in storage order. Numbers are int64
    numpy arrays whose missing values are int64's minimum (numpy's NaT): ``seq`` (storage
    order), ``created_us``, ``step_index``, ``started_us``, ``duration_us`` (microseconds),
    ``retry_count``. Text columns are sequences of ``str | None``: ``id``, ``user_id``,
    ``agent_id``, ``workflow_id``, ``run_id``, ``step_name``, ``tool``, ``status``,
    ``error``. Then one object column ``params.<key>`` / ``result.<key>`` per key of the
    steps returned.
    """

    async def trace_columns(
        self,
        *,
        workflow_id: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        since_us: int | None = None,
    ) -> dict[str, Any]: ...


@runtime_checkable
class SupportsRecalls(Protocol):
    """Keep recalls: what each search returned, at which step (see :mod:`memkit._recall`).

    ``record_recalls`` is the store's setting for searches made outside any step scope
    (off unless the store was opened with ``record_recalls=True``); inside a scope every
    search is recorded. ``recalls`` lists them oldest first; with ``user_id``/``agent_id``
    only that namespace's (``get_recall`` likewise). ``add_recalls`` writes recalls as given
    (imports), all or none.
    """

    record_recalls: bool

    async def recalls(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Recall]: ...

    async def get_recall(
        self, recall_id: str, *, user_id: str | None = None, agent_id: str | None = None
    ) -> Recall | None: ...

    async def add_recalls(self, recalls: Iterable[Recall]) -> int: ...


@runtime_checkable
class SupportsMarks(Protocol):
    """Keep a researcher's marks on recalled memories and steps (see :class:`memkit.Mark`).

    ``marks`` lists them oldest first; with ``user_id``/``agent_id`` only that namespace's,
    with ``workflow_id``/``run_id`` only those of that workflow's (run's) steps.
    ``put_marks`` writes marks as given, each replacing the mark the store holds on the same
    target (the same id), all or none; callers check a mark's target first
    (:meth:`memkit.Memory.mark_memory`, :meth:`memkit.Memory.mark_step`). ``remove_marks``
    deletes the marks with these ids that live in ``user_id``/``agent_id`` and returns how many.
    """

    async def marks(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Mark]: ...

    async def put_marks(self, marks: Iterable[Mark]) -> int: ...

    async def remove_marks(self, mark_ids: Iterable[str], *, user_id: str, agent_id: str) -> int: ...


@runtime_checkable
class SupportsAsOf(Protocol):
    """``search(..., as_of=datetime)``: rank only the memories that existed at that time.

    Memories added after ``as_of`` are left out. What it cannot know: a memory deleted
    before the call is gone from the store, so it is missing from the answer even if it
    existed at ``as_of`` (a recall made back then keeps its snapshot).
    ``searches_as_of`` is ``True`` on adapters that implement it.
    """

    searches_as_of: bool

    async def search(
        self,
        query: str,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
        as_of: datetime | None = None,
    ) -> list[MemoryItem]: ...
