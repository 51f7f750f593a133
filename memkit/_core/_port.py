"""The port (``MemoryProvider``), the optional capabilities an adapter may add, and how a store
declares them.

Each capability is its own small protocol so callers can ask
``isinstance(provider, SupportsStats)`` instead of catching ``AttributeError``. A store built
on memkit's base (:class:`memkit.store._base.Store`) *declares* what it offers as a set of
:class:`Capability` values, and for such a store ``isinstance`` answers from that declaration
alone (the base writes every method once, so its shape says nothing); any other provider is
checked by its shape, as ``typing.Protocol`` does.
"""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memkit._core._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats

__all__ = [
    "Capability",
    "Declares",
    "MemoryProvider",
    "RecallKeeper",
    "SupportsAddMany",
    "SupportsAsOf",
    "SupportsClose",
    "SupportsExport",
    "SupportsGet",
    "SupportsGraph",
    "SupportsHealth",
    "SupportsImportSteps",
    "SupportsMarks",
    "SupportsNamespaces",
    "SupportsPaging",
    "SupportsRecallCounts",
    "SupportsRecalls",
    "SupportsReembed",
    "SupportsSearchModes",
    "SupportsStats",
    "SupportsTraceColumns",
]


class Capability(enum.StrEnum):
    """One optional thing a store can do; a store on the base lists its own in ``capabilities``."""

    ADD_MANY = "add_many"
    GET = "get"
    PAGING = "get_page"
    NAMESPACES = "namespaces"
    STATS = "stats"
    HEALTH = "health"
    EXPORT = "export"
    CLOSE = "aclose"
    TRACE_COLUMNS = "trace_columns"
    TRACE_PAYLOADS = "trace_payloads"
    RECALLS = "recalls"
    MARKS = "marks"
    AS_OF = "as_of"
    RECALL_COUNTS = "recall_step_counts"
    REEMBED = "reembed"
    GRAPH = "graph"
    IMPORT_STEPS = "import_steps"


class Declares:
    """A store that says what it offers: ``capabilities`` is the whole answer to
    ``isinstance(store, SupportsX)`` (see :class:`memkit.store._base.Store`)."""

    capabilities: frozenset[Capability] = frozenset()


if TYPE_CHECKING:
    from abc import ABCMeta as _ProtocolMeta

    from memkit._core._graph_model import MemoryGraph
    from memkit._core._recalls import Mark, Recall
else:
    _ProtocolMeta = type(Protocol)


class _Declared(_ProtocolMeta):
    """``isinstance`` for capability protocols: a declaring store by its declaration, any other
    provider by its shape."""

    def __instancecheck__(cls, instance: object) -> bool:
        if isinstance(instance, Declares):
            wanted = _CAPABILITY.get(cls)
            return wanted is None or wanted in instance.capabilities
        return super().__instancecheck__(instance)


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
class SupportsSearchModes(Protocol, metaclass=_Declared):
    """Say which ``mode=`` values ``search`` answers, so callers need not try each one."""

    @property
    def search_modes(self) -> tuple[str, ...]: ...


@runtime_checkable
class SupportsGet(Protocol, metaclass=_Declared):
    """Fetch one memory by id (``None`` when it does not exist)."""

    async def get(self, memory_id: str) -> MemoryItem | None: ...


@runtime_checkable
class SupportsAddMany(Protocol, metaclass=_Declared):
    """Write many memories in one transaction: all of them or none.

    ``replace=True`` makes each item with an ``id`` an upsert: a memory of the item's namespace
    holding that id is replaced in the same transaction (of writers racing on one id the last one
    wins and none fails); an id held in another namespace refuses the whole batch.
    """

    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False, replace: bool = False
    ) -> list[str]: ...


@runtime_checkable
class SupportsNamespaces(Protocol, metaclass=_Declared):
    """List every (user_id, agent_id) namespace with counts and activity."""

    async def namespaces(self) -> list[NamespaceInfo]: ...


@runtime_checkable
class SupportsStats(Protocol, metaclass=_Declared):
    """Report how much the store holds."""

    async def stats(self) -> Stats: ...


@runtime_checkable
class SupportsHealth(Protocol, metaclass=_Declared):
    """Check that the store answers."""

    async def health(self) -> Health: ...


@runtime_checkable
class SupportsExport(Protocol, metaclass=_Declared):
    """Iterate every record (traces included), oldest first."""

    def export(
        self, user_id: str | None = None, agent_id: str | None = None
    ) -> AsyncIterator[MemoryItem]: ...


@runtime_checkable
class SupportsPaging(Protocol, metaclass=_Declared):
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
class SupportsClose(Protocol, metaclass=_Declared):
    """Release connections, files and worker threads.

    Closing again is a no-op (it waits for the first close); any other call after it
    raises a :class:`~memkit.StorageError` saying the store is closed (the in-memory
    store, which holds nothing to release, keeps answering). From sync code,
    :meth:`memkit.Memory.close` does it.
    """

    async def aclose(self) -> None: ...


@runtime_checkable
class SupportsTracePayloads(Protocol, metaclass=_Declared):
    """Read the data of the trace steps whose stored data contains any of some words (a fast path for
    the usage columns of :func:`memkit.frames.traces_frame`: a store reads only the steps that may carry
    usage instead of every record).

    Returns ``{step id: metadata["trace"]}`` for the trace steps of the namespace(s) asked whose stored
    metadata text contains at least one of ``containing`` as written (a superset is allowed: a store
    may return more steps, never fewer).
    """

    async def trace_payloads(
        self, *, user_id: str | None = None, agent_id: str | None = None, containing: tuple[str, ...] = (),
    ) -> dict[str, Any]: ...


@runtime_checkable
class SupportsTraceColumns(Protocol, metaclass=_Declared):
    """Read every trace step as columns (a fast path for :func:`memkit.frames.traces_frame`).

    Returns ``{column: sequence}`` of equal length, in storage order. Numbers are int64
    numpy arrays whose missing values are int64's minimum (numpy's NaT): ``seq`` (storage
    order), ``created_us``, ``step_index``, ``started_us``, ``duration_us`` (microseconds),
    ``retry_count``. Text columns are sequences of ``str | None``: ``id``, ``user_id``,
    ``agent_id``, ``workflow_id``, ``run_id``, ``step_name``, ``tool``, ``status``,
    ``error``. Then one object column ``params.<key>`` / ``result.<key>`` per key of the
    steps returned.

    ``after_seq``: only the steps whose ``seq`` is greater (what a live view reads each time it
    looks again). A store hands out ``seq`` in commit order, or, where ``late_commit_s`` is above 0,
    a step may commit up to that many seconds after a higher ``seq`` was read.
    """

    async def trace_columns(
        self,
        *,
        workflow_id: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        since_us: int | None = None,
        after_seq: int | None = None,
    ) -> dict[str, Any]: ...


@runtime_checkable
class SupportsRecalls(Protocol, metaclass=_Declared):
    """Keep recalls: what each search returned, at which step (see :mod:`memkit._recall._recording`).

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
class SupportsMarks(Protocol, metaclass=_Declared):
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
class SupportsAsOf(Protocol, metaclass=_Declared):
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


@runtime_checkable
class SupportsRecallCounts(Protocol, metaclass=_Declared):
    """Count recalls per step in the store (SQLite: one ``GROUP BY``, no recall parsed)."""

    async def recall_step_counts(
        self, workflow_id: str | None = None, *, user_id: str | None = None, agent_id: str | None = None
    ) -> list[tuple[Any, ...]]: ...


@runtime_checkable
class SupportsReembed(Protocol, metaclass=_Declared):
    """Replace every stored vector with another embedder's."""

    async def reembed(self, embedder: object = "default", *, progress: bool = True) -> int: ...


@runtime_checkable
class SupportsGraph(Protocol, metaclass=_Declared):
    """A graph database: it reads its own stored graph and walks its own edges."""

    entity_fields: tuple[str, ...]

    async def graph(
        self, user_id: str | None = None, agent_id: str | None = None, workflow_id: str | None = None,
        limit: int = 1_000,
    ) -> MemoryGraph: ...

    async def neighbourhood(
        self, node_id: str, *, label: str | None = None, depth: int = 1, limit: int = 50
    ) -> MemoryGraph: ...


@runtime_checkable
class SupportsImportSteps(Protocol, metaclass=_Declared):
    """Write a bulk import's trace steps and recalls straight into rows, in one transaction (given a
    :class:`memkit.store._ops.ImportStepsOp`): a store that can skips the records and recall models
    the general path builds for each step. Internal: imports use it, users never call it."""

    async def _import_steps(self, op: Any) -> int: ...


@runtime_checkable
class RecallKeeper(Protocol, metaclass=_Declared):
    """Where :func:`memkit._recall._recording.record` puts a recall: ``_keep_recall`` stores its body (an
    awaitable when the write is asynchronous); ``record_recalls`` as in :class:`SupportsRecalls`."""

    record_recalls: bool

    def _keep_recall(self, body: dict[str, Any]) -> Awaitable[None] | None: ...


# The declaration each protocol stands for (None: every store on the base has it).
_CAPABILITY: dict[type, Capability | None] = {
    SupportsSearchModes: None,
    SupportsGet: Capability.GET,
    SupportsAddMany: Capability.ADD_MANY,
    SupportsNamespaces: Capability.NAMESPACES,
    SupportsStats: Capability.STATS,
    SupportsHealth: Capability.HEALTH,
    SupportsExport: Capability.EXPORT,
    SupportsPaging: Capability.PAGING,
    SupportsClose: Capability.CLOSE,
    SupportsTraceColumns: Capability.TRACE_COLUMNS,
    SupportsTracePayloads: Capability.TRACE_PAYLOADS,
    SupportsRecalls: Capability.RECALLS,
    SupportsMarks: Capability.MARKS,
    SupportsAsOf: Capability.AS_OF,
    SupportsRecallCounts: Capability.RECALL_COUNTS,
    SupportsReembed: Capability.REEMBED,
    SupportsGraph: Capability.GRAPH,
    SupportsImportSteps: Capability.IMPORT_STEPS,
    RecallKeeper: Capability.RECALLS,
}
