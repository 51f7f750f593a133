"""THE store base: every public method of the port written once, over operations as values.

A public method (``add``, ``search``, ``get_page``, ``put_marks``, ...) checks its arguments
into an operation (:mod:`memkit.store._ops`), which :meth:`Store.execute` hands to the one
adapter method that executes it. Validation, limits, the empty-query listing, recall
recording (through :mod:`memkit.store._search`), ``health`` timing and the refusal of what a
store does not offer live here, once. An adapter holds only what differs:

* required: ``_write`` (store records, all or none), ``_rank`` (find the candidates of a
  query and rank them with :func:`memkit.store._search.rank`), ``_list`` (a namespace newest
  first), ``_delete`` and ``_reset``;
* per declared :class:`~memkit._core._port.Capability`: ``_get``, ``_namespaces``, ``_stats``,
  ``_ping``, ``_export`` (and ``_run_summaries``, which the base reads from it), ``_trace_columns``,
  ``_recalls``/``_add_recalls``/``_keep_recall``,
  ``_marks``/``_put_marks``/``_remove_marks``, ``_close``.

``capabilities`` is the declaration: ``isinstance(store, SupportsStats)`` answers from it, the
public methods of a capability it does not declare are absent (``AttributeError``, as on a
store that never had them), an operation it does not declare is refused by :meth:`Store.execute`
(``NotImplementedError``), and a class that declares a capability without its methods fails when
it is defined.
"""

from __future__ import annotations

import abc
import json
import time
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from memkit._core._errors import ConfigError, InvalidInputError
from memkit._core._filters import lookup
from memkit._core._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._core._port import Capability, Declares
from memkit._core._recalls import Mark, Recall
from memkit._core._records import Record, new_record, records_from_items, trace_record
from memkit._core._runs import RunSummary, summaries
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_id, check_namespace, check_read, check_scope
from memkit._recall import _marks
from memkit._recall._recording import checked_recalls
from memkit._retrieval._fusion import HybridConfig, modes_for
from memkit.store import _ops as ops
from memkit.store import _search as _pipeline

if TYPE_CHECKING:
    from memkit.embeddings import Embedder

__all__ = ["Store"]

R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])


class _Offered:
    """A method of an optional capability: there on a store that declares the capability, absent
    (``AttributeError``) on one that does not. So ``hasattr``, a wrapper that forwards attributes,
    ``isinstance(store, SupportsX)`` and a call all agree with the declaration."""

    def __init__(self, capability: Capability, fn: Callable[..., Any]) -> None:
        self.capability = capability
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, store: Store | None, owner: type | None = None) -> Any:
        if store is None:
            return self.fn  # on the class: the function itself (signatures, docs)
        if self.capability not in store.capabilities:
            raise AttributeError(f"{type(store).__name__} does not support {self.name}()")
        return types.MethodType(self.fn, store)


def _offered(capability: Capability) -> Callable[[F], F]:
    """Mark a public method as belonging to ``capability`` (see :class:`_Offered`)."""

    def mark(fn: F) -> F:
        return cast(F, _Offered(capability, fn))

    return mark

C = Capability
# The one table: each operation, the backend method that executes it, and the capability a backend
# offers by writing that method (None: every backend writes it, or the base answers it).
HANDLERS: dict[type[Any], tuple[str, Capability | None]] = {
    ops.WriteOp: ("_write", None),
    ops.SearchOp: ("_rank", None),
    ops.ListOp: ("_list", None),
    ops.ValuesOp: ("_values", None),
    ops.DeleteOp: ("_delete", None),
    ops.ResetOp: ("_reset", None),
    ops.RunsOp: ("_run_summaries", None),
    ops.GetOp: ("_get", C.GET),
    ops.NamespacesOp: ("_namespaces", C.NAMESPACES),
    ops.StatsOp: ("_stats", C.STATS),
    ops.PingOp: ("_ping", C.HEALTH),
    ops.ExportOp: ("_export", C.EXPORT),
    ops.CloseOp: ("_close", C.CLOSE),
    ops.TraceColumnsOp: ("_trace_columns", C.TRACE_COLUMNS),
    ops.TracePayloadsOp: ("_trace_payloads", C.TRACE_PAYLOADS),
    ops.RecallsOp: ("_recalls", C.RECALLS),
    ops.AddRecallsOp: ("_add_recalls", C.RECALLS),
    ops.ImportStepsOp: ("_import_steps", C.IMPORT_STEPS),
    ops.MarksOp: ("_marks", C.MARKS),
    ops.PutMarksOp: ("_put_marks", C.MARKS),
    ops.RemoveMarksOp: ("_remove_marks", C.MARKS),
}
# Capabilities a backend offers by writing a method that is not an operation's.
_OWN_METHODS: dict[Capability, tuple[str, ...]] = {
    C.RECALLS: ("_keep_recall",),
    C.RECALL_COUNTS: ("recall_step_counts",),
    C.REEMBED: ("reembed",),
    C.GRAPH: ("graph", "neighbourhood"),
}
# What the base itself gives every backend: batches (add_many) and pages over ``_list``.
_ALWAYS = frozenset({C.ADD_MANY, C.PAGING})


def _needs() -> dict[Capability, tuple[str, ...]]:
    needs: dict[Capability, list[str]] = {}
    for name, capability in HANDLERS.values():
        if capability is not None:
            needs.setdefault(capability, []).append(name)
    for capability, names in _OWN_METHODS.items():
        needs.setdefault(capability, []).extend(names)
    return {capability: tuple(names) for capability, names in needs.items()}


_NEEDS = _needs()


class Store(Declares, abc.ABC):
    """The memkit port (:class:`memkit.MemoryProvider` and its ``SupportsX`` capabilities) over
    the few operations an adapter executes. See the module docstring for what a subclass writes.

    Parameters
    ----------
    limits
        Input bounds (see :class:`memkit.Limits`).
    hybrid
        Fusion knobs for ``mode="hybrid"`` (:class:`memkit.HybridConfig`).
    record_recalls
        Record searches made outside any step scope as recalls too (inside a step they always
        are); see :class:`memkit.SupportsRecalls`.
    """

    provider_name: ClassVar[str] = "store"
    # Derived when a subclass is defined, from the methods it writes (never set by hand).
    capabilities: frozenset[Capability] = _ALWAYS
    # True for a backend whose ``_rank`` and ``_list`` leave out what was written after ``until_us``.
    supports_as_of: ClassVar[bool] = False
    # How long after a higher ``seq`` was read a step with a lower one may still commit (see
    # ``trace_columns(after_seq=)``); 0: seqs are handed out in commit order.
    late_commit_s: ClassVar[float] = 0.0
    # What a failing ``_ping`` may raise that ``health`` reports instead of raising.
    health_failures: ClassVar[tuple[type[BaseException], ...]] = (Exception,)
    # False for a store that assigns every id itself (``add_many`` refuses items that carry one), so
    # callers that need their own ids (memkit.langgraph) can refuse it when they open.
    keeps_given_ids: ClassVar[bool] = True

    def __init__(
        self, *, limits: Limits = DEFAULT_LIMITS, hybrid: HybridConfig | None = None, record_recalls: bool = False
    ) -> None:
        if not isinstance(record_recalls, bool):
            raise ConfigError(f"record_recalls must be True or False, got {record_recalls!r}")
        if hybrid is not None and not isinstance(hybrid, HybridConfig):
            raise ConfigError(f"hybrid must be a HybridConfig, got {type(hybrid).__name__}")
        self.limits = limits
        self.hybrid = hybrid or HybridConfig()
        self._record_recalls = record_recalls

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "capabilities" in vars(cls):
            raise TypeError(f"{cls.__name__} sets capabilities: a backend offers one by writing its methods"
                            " (see memkit.store), and as_of by setting supports_as_of = True")
        own = cls.__mro__[: cls.__mro__.index(Store)]
        offered = set(_ALWAYS)
        for capability, names in _NEEDS.items():
            written = [name for name in names if any(name in vars(k) for k in own)]
            if written and len(written) < len(names):
                missing = sorted(set(names) - set(written))
                raise TypeError(f"{cls.__name__} writes {', '.join(written)} but not {', '.join(missing)}:"
                                f" {capability.name} is offered whole or not at all")
            if written:
                offered.add(capability)
        if cls.supports_as_of:
            offered.add(C.AS_OF)
        cls.capabilities = frozenset(offered)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # -- the declaration -------------------------------------------------------------

    @property
    def embedder(self) -> Embedder | None:
        """The :class:`memkit.embeddings.Embedder` that makes this store's vectors (``None``: keyword only)."""
        return None

    @property
    def search_modes(self) -> tuple[str, ...]:
        """The ``mode=`` values :meth:`search` answers (all three with an embedder, else keyword)."""
        return modes_for(self.embedder is not None)

    @property
    def record_recalls(self) -> bool:
        """Record searches made outside any step scope too (see :class:`memkit.SupportsRecalls`);
        absent on a store that keeps no recalls."""
        if Capability.RECALLS not in self.capabilities:
            raise AttributeError(f"{type(self).__name__} keeps no recalls")
        return self._record_recalls

    @record_recalls.setter
    def record_recalls(self, value: bool) -> None:
        self._record_recalls = value

    @property
    def searches_as_of(self) -> bool:
        """``True`` where :meth:`search` takes ``as_of`` (see :class:`memkit.SupportsAsOf`); absent elsewhere."""
        if Capability.AS_OF not in self.capabilities:
            raise AttributeError(f"{type(self).__name__} does not search as of a past time")
        return True

    def _require(self, capability: Capability) -> None:
        if capability not in self.capabilities:
            raise NotImplementedError(f"{self!r} does not support {capability.value}()")

    async def execute(self, op: ops.Op[R]) -> R:
        """Execute one checked operation by the backend method :data:`HANDLERS` names for it (refused
        when the backend does not write that method)."""
        name, capability = HANDLERS[type(op)]
        if capability is not None:
            self._require(capability)
        result: R = await getattr(self, name)(op)
        return result

    # -- what every adapter writes ------------------------------------------------------

    @abc.abstractmethod
    async def _write(self, op: ops.WriteOp) -> list[str]:
        """Store ``op.records`` (ids already given), all or none; a clashing id is an ``InvalidInputError``."""

    @abc.abstractmethod
    async def _rank(self, op: ops.SearchOp) -> list[MemoryItem]:
        """The best ``op.limit`` memories for ``op.query`` (never empty), best first."""

    @abc.abstractmethod
    async def _list(self, op: ops.ListOp) -> list[Record]:
        """One namespace newest first (ties: later written first), filtered, paged."""

    @abc.abstractmethod
    async def _delete(self, op: ops.DeleteOp) -> bool:
        """Delete one memory if it is there (and in the namespace given); whether it was."""

    @abc.abstractmethod
    async def _reset(self, op: ops.ResetOp) -> None:
        """Delete every memory, recall and mark."""

    # -- what an adapter writes per capability it declares ------------------------------------

    async def _values(self, op: ops.ValuesOp) -> list[Any]:
        found: dict[str, Any] = {}
        listing = ops.ListOp(op.user_id, op.agent_id, op.conditions, 2**62)
        for record in await self._list(listing):
            present, value = lookup(record.metadata, op.path)
            if present:
                found.setdefault(json.dumps(value, sort_keys=True), value)
        return list(found.values())

    async def _get(self, op: ops.GetOp) -> Record | None:
        raise NotImplementedError

    async def _namespaces(self, op: ops.NamespacesOp) -> list[NamespaceInfo]:
        raise NotImplementedError

    async def _stats(self, op: ops.StatsOp) -> Stats:
        raise NotImplementedError

    async def _ping(self, op: ops.PingOp) -> str:
        raise NotImplementedError

    def _export(self, op: ops.ExportOp) -> AsyncIterator[Record]:
        raise NotImplementedError

    async def _trace_columns(self, op: ops.TraceColumnsOp) -> dict[str, Any]:
        raise NotImplementedError

    async def _trace_payloads(self, op: ops.TracePayloadsOp) -> dict[str, Any]:
        raise NotImplementedError

    async def _run_summaries(self, op: ops.RunsOp) -> list[RunSummary]:
        """Read from the store's public reads; a store that can count in place does better."""
        return await summaries(self, op.user_id, op.agent_id, op.workflow_id)

    async def _recalls(self, op: ops.RecallsOp) -> list[Recall]:
        raise NotImplementedError

    async def _add_recalls(self, op: ops.AddRecallsOp) -> int:
        raise NotImplementedError

    def _keep_recall(self, body: dict[str, Any]) -> Awaitable[None] | None:
        """Store one recorded recall (see :func:`memkit._recall._recording.record`); an awaitable if asynchronous."""
        raise NotImplementedError

    async def _import_steps(self, op: ops.ImportStepsOp) -> int:
        """A bulk import's steps and recalls in one transaction (no public method: imports call it)."""
        raise NotImplementedError

    async def _marks(self, op: ops.MarksOp) -> list[Mark]:
        raise NotImplementedError

    async def _put_marks(self, op: ops.PutMarksOp) -> int:
        raise NotImplementedError

    async def _remove_marks(self, op: ops.RemoveMarksOp) -> int:
        raise NotImplementedError

    async def _close(self, op: ops.CloseOp) -> None:
        raise NotImplementedError

    # -- the port ------------------------------------------------------------------------

    async def add(
        self, content: str, user_id: str, agent_id: str, metadata: dict[str, Any] | None = None
    ) -> str:
        """Add one memory to the namespace ``user_id``/``agent_id``; returns its id."""
        record = new_record(content, user_id, agent_id, metadata, self.limits)
        return (await self.execute(ops.WriteOp((record,))))[0]

    async def add_trace(
        self, agent_id: str, workflow_id: str, trace_data: dict[str, Any], user_id: str = "system"
    ) -> str:
        """Add one step of a workflow's execution trace; returns its id."""
        record = trace_record(agent_id, workflow_id, trace_data, user_id, self.limits)
        return (await self.execute(ops.WriteOp((record,))))[0]

    @_offered(Capability.ADD_MANY)
    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False, replace: bool = False
    ) -> list[str]:
        """Validate every item, then write all of them in one transaction (or none).

        ``replace=True``: an item whose ``id`` a memory of its namespace holds replaces it (see
        :class:`memkit.SupportsAddMany`).
        """
        if not isinstance(replace, bool):
            raise ConfigError(f"replace must be True or False, got {replace!r}")
        records = records_from_items(items, self.limits)
        if not records:
            return []
        return await self.execute(ops.WriteOp(tuple(records), progress, replace))

    async def search(
        self,
        query: str,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
        hybrid: HybridConfig | None = None,
        as_of: datetime | None = None,
    ) -> list[MemoryItem]:
        """Rank one namespace's memories against ``query``; an empty query lists it newest first.

        ``mode``: ``"hybrid"`` (the default with an embedder: keyword and semantic legs fused as
        in :class:`memkit.HybridConfig`), ``"keyword"`` (BM25, the default without one) or
        ``"semantic"`` (cosine); see :attr:`search_modes`. Filters apply in every mode. Each
        result's ``score_details`` says which leg found it and how. ``hybrid`` overrides the
        store's fusion knobs for this search. ``as_of``: only memories that existed then (see
        :class:`memkit.SupportsAsOf`).
        """
        op = _pipeline.prepare(self, query, user_id, agent_id, limit, filters, mode, hybrid, as_of)
        return await _pipeline.search(self, op, self._found)

    async def _found(self, op: ops.SearchOp) -> list[MemoryItem]:
        if op.query:
            return await self.execute(op)
        listing = ops.ListOp(op.user_id, op.agent_id, op.conditions, op.limit, until_us=op.until_us)
        return [r.to_item() for r in await self.execute(listing)]

    async def get_all(
        self, user_id: str, agent_id: str, limit: int = 10, filters: dict[str, Any] | None = None
    ) -> list[MemoryItem]:
        """One namespace's memories, newest first."""
        read = check_read(user_id, agent_id, limit, filters, self.limits)
        return [r.to_item() for r in await self.execute(ops.ListOp(read.user, read.agent, read.conditions, read.limit))]

    @_offered(Capability.PAGING)
    async def get_page(
        self,
        user_id: str,
        agent_id: str,
        *,
        offset: int = 0,
        limit: int = 50,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        """``limit`` memories of one namespace from ``offset``, newest first."""
        read = check_read(user_id, agent_id, limit, filters, self.limits, offset)
        listing = ops.ListOp(read.user, read.agent, read.conditions, read.limit, read.offset)
        return [r.to_item() for r in await self.execute(listing)]

    @_offered(Capability.GET)
    async def get(self, memory_id: str) -> MemoryItem | None:
        """One memory by id (``None`` when it does not exist)."""
        record = await self.execute(ops.GetOp(check_id(memory_id, "memory_id", self.limits)))
        return None if record is None else record.to_item()

    async def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> bool:
        """Delete one memory; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        return await self.execute(ops.DeleteOp(*check_scope(memory_id, user_id, agent_id, self.limits)))

    async def reset(self) -> bool:
        """Delete everything this store holds (testing only)."""
        await self.execute(ops.ResetOp())
        return True

    @_offered(Capability.NAMESPACES)
    async def namespaces(self) -> list[NamespaceInfo]:
        """Every (user_id, agent_id) namespace with counts and activity."""
        return await self.execute(ops.NamespacesOp())

    @_offered(Capability.STATS)
    async def stats(self) -> Stats:
        """How much the store holds."""
        return await self.execute(ops.StatsOp())

    @_offered(Capability.HEALTH)
    async def health(self) -> Health:
        """Whether the store answers, and how fast; a failure is reported, not raised."""
        start = time.perf_counter()
        try:
            detail, ok = await self.execute(ops.PingOp()), True
        except self.health_failures as exc:
            detail, ok = str(exc), False
        return Health(ok=ok, provider=self.provider_name, latency_ms=(time.perf_counter() - start) * 1e3,
                      detail=detail)

    @_offered(Capability.EXPORT)
    async def export(self, user_id: str | None = None, agent_id: str | None = None) -> AsyncIterator[MemoryItem]:
        """Every record (traces included), oldest first, read a chunk at a time."""
        async for record in self._export(ops.ExportOp(user_id, agent_id)):
            yield record.to_item()

    @_offered(Capability.TRACE_COLUMNS)
    async def trace_columns(
        self,
        *,
        workflow_id: str | None = None,
        agent_id: str | None = None,
        user_id: str | None = None,
        status: str | None = None,
        since_us: int | None = None,
        after_seq: int | None = None,
    ) -> dict[str, Any]:
        """Every trace step as columns (see :class:`memkit.SupportsTraceColumns`), in storage order;
        ``after_seq``: only the steps past it."""
        if after_seq is not None and (type(after_seq) is not int or not 0 <= after_seq < 2**63):
            raise InvalidInputError(f"after_seq must be a whole number from 0, got {after_seq!r}")
        return await self.execute(ops.TraceColumnsOp(workflow_id, agent_id, user_id, status, since_us, after_seq))

    @_offered(Capability.TRACE_PAYLOADS)
    async def trace_payloads(
        self, *, user_id: str | None = None, agent_id: str | None = None, containing: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """The data of the trace steps whose stored data holds any of ``containing`` (see
        :class:`memkit._core._port.SupportsTracePayloads`)."""
        return await self.execute(ops.TracePayloadsOp(user_id, agent_id, tuple(containing)))

    @_offered(Capability.EXPORT)
    async def run_summaries(
        self, *, user_id: str | None = None, agent_id: str | None = None, workflow_id: str | None = None
    ) -> list[RunSummary]:
        """Every workflow run (of one namespace or workflow where given) in one row, newest first:
        the figures of a :func:`memkit.frames.runs_frame` row, without reading each step."""
        for value, name in ((user_id, "user_id"), (agent_id, "agent_id"), (workflow_id, "workflow_id")):
            if value is not None:
                check_id(value, name, self.limits)
        return await self.execute(ops.RunsOp(user_id, agent_id, workflow_id))

    @_offered(Capability.RECALLS)
    async def recalls(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Recall]:
        """Recorded recalls, oldest first (see :class:`memkit.SupportsRecalls`)."""
        return await self.execute(ops.RecallsOp(user_id, agent_id, workflow_id, run_id))

    @_offered(Capability.RECALLS)
    async def get_recall(
        self, recall_id: str, *, user_id: str | None = None, agent_id: str | None = None
    ) -> Recall | None:
        """One recall; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        wanted = check_id(recall_id, "recall_id", self.limits)
        found = await self.execute(ops.RecallsOp(user_id, agent_id, recall_id=wanted))
        return found[0] if found else None

    @_offered(Capability.RECALLS)
    async def add_recalls(self, recalls: Iterable[Recall]) -> int:
        """Store recalls as given (an import), all or none; a recall id the store holds refuses them all."""
        batch = checked_recalls(recalls, self.limits)
        return await self.execute(ops.AddRecallsOp(tuple(batch))) if batch else 0

    @_offered(Capability.MARKS)
    async def marks(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Mark]:
        """A researcher's marks, oldest first (see :class:`memkit.SupportsMarks`)."""
        _marks.check_reads(self.limits, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id)
        kept = await self.execute(ops.MarksOp(user_id, agent_id, workflow_id, run_id))
        return _marks.matching(kept, user_id, agent_id, workflow_id, run_id)

    @_offered(Capability.MARKS)
    async def put_marks(self, marks: Iterable[Mark]) -> int:
        """Store marks, each replacing the mark on the same target; all or none."""
        batch = _marks.checked_marks(marks, self.limits)
        return await self.execute(ops.PutMarksOp(tuple(batch))) if batch else 0

    @_offered(Capability.MARKS)
    async def remove_marks(self, mark_ids: Iterable[str], *, user_id: str, agent_id: str) -> int:
        """Delete these marks, those of them that live in ``user_id``/``agent_id`` only."""
        ids = _marks.checked_ids(mark_ids, self.limits)
        user, agent = check_namespace(user_id, agent_id, self.limits)
        return await self.execute(ops.RemoveMarksOp(tuple(ids), user, agent)) if ids else 0

    @_offered(Capability.CLOSE)
    async def aclose(self) -> None:
        """Release what the store holds; again is a no-op (see :class:`memkit.SupportsClose`)."""
        await self.execute(ops.CloseOp())
