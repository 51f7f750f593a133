"""``memkit.Memory``: the synchronous face of any provider.

Every call is handed to one background event loop that memkit owns, and the
caller blocks on the result. That works the same in a script (no loop), in
Jupyter (a loop is already running on the caller's thread) and in worker
threads, without nest_asyncio or patching anyone's loop.

This module is the one sync/async boundary: :class:`Memory`'s methods, and
:func:`call` for the rest of the synchronous face (frames, graphs, import and
export, the demo, the evaluation), which hands it an ``async`` function of the
provider. Nothing else blocks on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar, Unpack

from memkit._core._errors import ConfigError, InvalidInputError
from memkit._core._models import Health, MemoryFilter, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._core._port import (
    MemoryProvider,
    SupportsAddMany,
    SupportsClose,
    SupportsExport,
    SupportsGet,
    SupportsHealth,
    SupportsMarks,
    SupportsNamespaces,
    SupportsPaging,
    SupportsRecalls,
    SupportsReembed,
    SupportsStats,
)
from memkit._core._recalls import Mark, Recall
from memkit._core._validate import (
    DEFAULT_LIMITS,
    Limits,
    check_forwarded,
    check_id,
    check_namespace,
    checked_as,
    checked_methods,
)
from memkit._recall import _marks
from memkit._recall._context import ContextOptions
from memkit._retrieval._config import SearchOptions
from memkit.store._registry import build_provider, default_url

__all__ = ["Memory", "call", "open"]

T = TypeVar("T")
Params = ParamSpec("Params")

#: What ``filters=`` takes: a dict of conditions, or the same dict in a :class:`MemoryFilter`.
Filters = dict[str, Any] | MemoryFilter | None

# The arguments Memory.search and Memory.build_context fill themselves; other keywords are passed on.
_SEARCH_ARGS = ("query", "user_id", "agent_id", "limit", "filters", "mode")
_CONTEXT_ARGS = ("provider", "query", "user_id", "agent_id", "token_budget")


class _LoopThread:
    """One daemon thread running one event loop for every sync caller in the process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="memkit-loop", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()


_runner: _LoopThread | None = None
_runner_lock = threading.Lock()


def _loop_thread() -> _LoopThread:
    global _runner
    with _runner_lock:
        if _runner is None or not _runner.thread.is_alive():
            _runner = _LoopThread()
        return _runner


def on_loop_thread() -> bool:
    """True on memkit's own loop thread, where blocking on that loop would deadlock."""
    return threading.current_thread() is _loop_thread().thread


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on memkit's background loop; the future settles when it is done."""
    return asyncio.run_coroutine_threadsafe(coro, _loop_thread().loop)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on memkit's background loop and return its result (or raise its error)."""
    runner = _loop_thread()
    if threading.current_thread() is runner.thread:
        coro.close()
        raise RuntimeError(
            "memkit's sync API was called from memkit's own event loop; await the provider's"
            " async method instead"
        )
    return asyncio.run_coroutine_threadsafe(coro, runner.loop).result()


def call(
    mem: object,
    fn: Callable[Concatenate[MemoryProvider, Params], Coroutine[Any, Any, T]],
    /,
    *args: Params.args,
    **kwargs: Params.kwargs,
) -> T:
    """Await ``fn(provider, *args, **kwargs)`` on memkit's loop and return its result (or raise its error).

    The one way synchronous code outside this module (frames, graphs, import and export, the demo,
    the evaluation) reaches a provider: ``mem`` is a :class:`Memory` or a provider, resolved here
    (anything else raises :class:`memkit.InvalidInputError` before ``fn`` runs), and ``fn`` is an
    ``async`` function whose first argument is the provider.
    """
    return run_sync(fn(provider_of(mem), *args, **kwargs))


P = TypeVar("P")


def _limits_of(provider: object) -> Limits:
    from memkit.store._base import Store  # the adapters' base: imported once a store is in use

    return provider.limits if isinstance(provider, Store) else DEFAULT_LIMITS


def _require(provider: object, capability: type[P], method: str) -> P:
    if not isinstance(provider, capability):
        raise NotImplementedError(f"{provider!r} does not support {method}()")
    return provider


@checked_methods
class Memory:
    """Blocking calls over a :class:`~memkit.MemoryProvider`, for notebooks, widgets and scripts.

    Parameters
    ----------
    provider
        Any provider; build one with :func:`memkit.open` rather than by hand.

    Every method checks its arguments against its signature before anything runs: an
    unknown or missing argument, or one of the wrong kind, raises
    :class:`memkit.InvalidInputError` naming it and what was expected.

    Examples
    --------
    >>> mem = memkit.open("memory://")
    >>> memory_id = mem.add("TP53 is mutated in sample 7", user_id="u1", agent_id="bio")
    >>> [hit.content for hit in mem.search("TP53", user_id="u1", agent_id="bio")]
    ['TP53 is mutated in sample 7']
    """

    def __init__(self, provider: MemoryProvider) -> None:
        if not isinstance(provider, MemoryProvider):
            raise InvalidInputError(f"Memory wraps a MemoryProvider, got {type(provider).__name__}")
        self.provider = provider

    def __repr__(self) -> str:
        return f"Memory({self.provider!r})"

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the port ---------------------------------------------------------------

    def add(self, content: str, user_id: str, agent_id: str, metadata: dict[str, Any] | None = None) -> str:
        """Store one memory and return its id."""
        return run_sync(self.provider.add(content, user_id, agent_id, metadata))

    def add_trace(
        self, agent_id: str, workflow_id: str, trace_data: dict[str, Any], user_id: str = "system"
    ) -> str:
        """Store one execution-trace step and return its id."""
        return run_sync(self.provider.add_trace(agent_id, workflow_id, trace_data, user_id))

    def search(
        self,
        query: str | None,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: Filters = None,
        *,
        mode: str | None = None,
        **options: Unpack[SearchOptions],
    ) -> list[MemoryItem]:
        """Best matches in one namespace; other ``options`` (e.g. ``hybrid=``) go to the adapter."""
        check_forwarded("Memory.search", self.provider.search, options, _SEARCH_ARGS)
        forwarded: dict[str, Any] = dict(options)
        if mode is not None:  # left out otherwise, so a provider written to the first port still works
            forwarded["mode"] = mode
        search: Any = self.provider.search  # the port's search need not take these keywords
        result: list[MemoryItem] = run_sync(search(query, user_id, agent_id, limit, filters, **forwarded))
        return result

    def build_context(
        self, query: str, user_id: str, agent_id: str, token_budget: int = 1_000, **options: Unpack[ContextOptions]
    ) -> Any:
        """The best memories that fit ``token_budget``, rendered (see :func:`memkit.build_context`)."""
        from memkit._recall._context import build_context

        check_forwarded("Memory.build_context", build_context, options, _CONTEXT_ARGS)
        return run_sync(build_context(self.provider, query, user_id, agent_id, token_budget, **options))

    def reembed(self, embedder: object = "default", *, progress: bool = True) -> int:
        """Re-embed every memory with ``embedder`` (adapters with vectors only)."""
        if not isinstance(self.provider, SupportsReembed):
            raise ConfigError(f"{type(self.provider).__name__} stores no vectors; nothing to re-embed")
        return run_sync(self.provider.reembed(embedder, progress=progress))

    def get_all(self, user_id: str, agent_id: str, limit: int = 10, filters: Filters = None) -> list[MemoryItem]:
        """One namespace's memories, newest first."""
        get_all: Any = self.provider.get_all  # filters may be a MemoryFilter: every adapter reads both
        result: list[MemoryItem] = run_sync(get_all(user_id, agent_id, limit, filters))
        return result

    def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> bool:
        """Delete by id (only within ``user_id``/``agent_id`` when given); ``False`` when nothing was deleted."""
        return run_sync(self.provider.delete(memory_id, user_id=user_id, agent_id=agent_id))

    def reset(self) -> bool:
        """Wipe the whole store."""
        return run_sync(self.provider.reset())

    # -- capabilities --------------------------------------------------------------

    def get(self, memory_id: str) -> MemoryItem | None:
        """One memory by id, or ``None``."""
        return run_sync(_require(self.provider, SupportsGet, "get").get(memory_id))

    def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False, replace: bool = False
    ) -> list[str]:
        """Store many memories in one transaction (``replace``: see :class:`memkit.SupportsAddMany`)."""
        adder = _require(self.provider, SupportsAddMany, "add_many")
        if replace:
            return run_sync(adder.add_many(list(items), progress=progress, replace=True))
        return run_sync(adder.add_many(list(items), progress=progress))

    def namespaces(self) -> list[NamespaceInfo]:
        """Every (user_id, agent_id) with counts and first/last activity."""
        return run_sync(_require(self.provider, SupportsNamespaces, "namespaces").namespaces())

    def recalls(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Recall]:
        """Recorded recalls, oldest first (see :class:`memkit.SupportsRecalls`)."""
        keeper = _require(self.provider, SupportsRecalls, "recalls")
        return run_sync(keeper.recalls(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id))

    def mark_memory(
        self, recall_id: str, memory_id: str, *, relevant: bool, user_id: str, agent_id: str, note: str = ""
    ) -> Mark:
        """Mark a memory that recall ``recall_id`` returned as relevant (or not) to its step; returns the mark.

        The recall must live in ``user_id``/``agent_id`` (:class:`~memkit.NotFoundError`
        otherwise) and have returned ``memory_id`` (:class:`~memkit.InvalidInputError`).
        Marking the same memory of the same recall again replaces the mark.
        """
        return run_sync(_mark_memory(self.provider, recall_id, memory_id, relevant, user_id, agent_id, note))

    def mark_step(self, step_id: str, *, good: bool, user_id: str, agent_id: str, note: str = "") -> Mark:
        """Mark a trace step (``step_id``: its record's id) as good or bad; returns the mark.

        The step must be stored in ``user_id``/``agent_id``; marking it again replaces the mark.
        """
        return run_sync(_mark_step(self.provider, step_id, good, user_id, agent_id, note))

    def unmark(self, mark_id: str, *, user_id: str, agent_id: str) -> bool:
        """Delete one mark (``Mark.id``) of ``user_id``/``agent_id``; ``False`` when it holds no such mark."""
        keeper = _require(self.provider, SupportsMarks, "unmark")
        return run_sync(keeper.remove_marks([mark_id], user_id=user_id, agent_id=agent_id)) == 1

    def marks(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Mark]:
        """The marks kept, oldest first (see :class:`memkit.SupportsMarks`)."""
        keeper = _require(self.provider, SupportsMarks, "marks")
        return run_sync(keeper.marks(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id))

    def stats(self) -> Stats:
        """How much the store holds."""
        return run_sync(_require(self.provider, SupportsStats, "stats").stats())

    def health(self) -> Health:
        """Whether the store answers, and how fast."""
        return run_sync(_require(self.provider, SupportsHealth, "health").health())

    def get_page(
        self,
        user_id: str,
        agent_id: str,
        *,
        offset: int = 0,
        limit: int = 50,
        filters: Filters = None,
    ) -> list[MemoryItem]:
        """One page of a namespace, newest first."""
        pager: Any = _require(self.provider, SupportsPaging, "get_page").get_page
        result: list[MemoryItem] = run_sync(pager(user_id, agent_id, offset=offset, limit=limit, filters=filters))
        return result

    def export(self, user_id: str | None = None, agent_id: str | None = None) -> Iterator[MemoryItem]:
        """Iterate every record, oldest first, without loading them all."""
        stream = _require(self.provider, SupportsExport, "export").export(user_id, agent_id)

        async def pull() -> MemoryItem:
            return await stream.__anext__()

        try:
            while True:
                try:
                    yield run_sync(pull())
                except StopAsyncIteration:
                    return
        finally:
            closer = getattr(stream, "aclose", None)
            if closer is not None:
                run_sync(closer())

    def close(self) -> None:
        """Release the provider's connections; the object is unusable afterwards."""
        if isinstance(self.provider, SupportsClose):
            run_sync(self.provider.aclose())


async def _mark_memory(
    provider: MemoryProvider, recall_id: object, memory_id: object, relevant: object, user_id: object,
    agent_id: object, note: object,
) -> Mark:
    keeper = _require(provider, SupportsMarks, "mark_memory")
    recalls = _require(provider, SupportsRecalls, "mark_memory")
    limits = _limits_of(provider)
    user, agent = check_namespace(user_id, agent_id, limits)
    wanted = check_id(recall_id, "recall_id", limits)
    check_id(memory_id, "memory_id", limits)
    _marks.check_flag(relevant, "relevant")
    _marks.check_note(note)
    recall = await recalls.get_recall(wanted, user_id=user, agent_id=agent)
    if recall is None:
        raise _marks.no_recall(wanted, user, agent)
    mark = _marks.memory_mark(recall, memory_id, relevant, note)
    await keeper.put_marks([mark])
    return mark


async def _mark_step(
    provider: MemoryProvider, step_id: object, good: object, user_id: object, agent_id: object, note: object
) -> Mark:
    keeper = _require(provider, SupportsMarks, "mark_step")
    getter = _require(provider, SupportsGet, "mark_step")
    limits = _limits_of(provider)
    user, agent = check_namespace(user_id, agent_id, limits)
    step = check_id(step_id, "step_id", limits)
    _marks.check_flag(good, "good")
    _marks.check_note(note)
    item = await getter.get(step)
    if item is None or not _marks.is_step(item, user, agent):
        raise _marks.no_step(step, user, agent)
    mark = _marks.step_mark(item, good, note)
    await keeper.put_marks([mark])
    return mark


def provider_of(mem: object) -> MemoryProvider:
    """The provider behind ``mem`` (a :class:`Memory` or a provider itself); a clear error otherwise."""
    provider = mem.provider if isinstance(mem, Memory) else mem
    if not isinstance(provider, MemoryProvider):
        raise InvalidInputError(f"expected a MemoryProvider or memkit.Memory, got {type(mem).__name__}")
    return provider


@checked_as("memkit.open")
def open(url_or_cfg: object = None) -> Memory:
    """Open a store and return its synchronous face.

    Accepts what :func:`memkit.get_memory_provider` accepts; ``None`` (or a config that names
    neither ``provider`` nor ``url``) opens ``$MEMKIT_URL`` or ``sqlite:///data/memory.db``.

    Examples
    --------
    >>> with memkit.open("memory://") as mem:
    ...     mem.stats().memories
    0
    """
    return Memory(build_provider(url_or_cfg, default_url()))

