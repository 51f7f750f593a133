"""The threads an adapter runs its blocking client calls on, and what the adapters not yet on
the store base (:class:`memkit._core._store.Store`) still share.

* :class:`Worker`: the threads an adapter runs its blocking client calls on (SQLite's
  connection, the FalkorDB client, mem0), and the one way to close them.
* :class:`RecordWriter`, :func:`timed_health`, :func:`trace_count` (and ``namespace_infos``,
  now in :mod:`memkit._records`): the graph and Mem0 adapters' until they move onto the base,
  which does all of it; then they go.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NoReturn, TypeVar

from memkit._errors import StorageError
from memkit._models import Health
from memkit._records import Record, namespace_infos, new_record, trace_record
from memkit._validate import Limits

__all__ = ["RecordWriter", "Worker", "namespace_infos", "timed_health", "trace_count"]

T = TypeVar("T")


class Worker:
    """Threads that run one adapter's blocking calls off the event loop, and their closing.

    ``translate`` turns a client library's exception into the memkit error to raise
    (``None``: raise it as it is). Closing is strict, as in httpx: :meth:`aclose` (or
    :meth:`close` from sync code) runs ``release`` on the worker after the calls already
    queued, then stops the threads; closing again waits for the first close and returns;
    any call after that raises a :class:`~memkit.StorageError` naming the store.
    """

    def __init__(
        self,
        name: str,
        owner: Callable[[], str],
        *,
        threads: int = 1,
        translate: Callable[[Exception], BaseException | None] | None = None,
    ) -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._owner = owner
        self._translate = translate
        self._closing: concurrent.futures.Future[None] | None = None

    @property
    def closed(self) -> bool:
        """True from the moment a close starts: no call is accepted after that."""
        return self._closing is not None

    def _refuse(self) -> StorageError:
        return StorageError(f"{self._owner()} is closed; open the store again to use it")

    def _rethrow(self, exc: Exception) -> NoReturn:
        """Raise ``exc`` as the memkit error ``translate`` names (the client's traceback is noise)."""
        replacement = self._translate(exc) if self._translate is not None else None
        if replacement is None:
            raise exc
        raise replacement from None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread, awaited without blocking the loop."""
        if self._closing is not None:
            raise self._refuse()
        try:
            future = self._executor.submit(fn, *args)
        except RuntimeError:  # shut down between the check and the submit
            raise self._refuse() from None
        try:
            return await asyncio.wrap_future(future)
        except Exception as exc:
            self._rethrow(exc)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread, blocking (opening a store, sync code); errors as they are."""
        if self._closing is not None:
            raise self._refuse()
        return self._executor.submit(fn, *args).result()

    def submit(self, fn: Callable[[], object]) -> bool:
        """Queue ``fn`` without waiting (background flushes); ``False`` once the worker is closing."""
        if self._closing is not None:
            return False
        try:
            self._executor.submit(fn)
        except RuntimeError:
            return False
        return True

    def _start_close(self, release: Callable[[], object] | None) -> concurrent.futures.Future[None]:
        if self._closing is None:
            closing: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._closing = closing

            def finish(done: concurrent.futures.Future[object]) -> None:
                # Every call queued before the close ran first (one queue); the threads
                # end once idle, so nothing waits on them here.
                self._executor.shutdown(wait=False)
                error = done.exception()
                if error is None:
                    closing.set_result(None)
                else:
                    closing.set_exception(error)

            self._executor.submit(release if release is not None else _nothing).add_done_callback(finish)
        return self._closing

    async def aclose(self, release: Callable[[], object] | None = None) -> None:
        """Run ``release`` on the worker, then stop it; idempotent."""
        try:
            await asyncio.wrap_future(self._start_close(release))
        except Exception as exc:
            self._rethrow(exc)

    def close(self, release: Callable[[], object] | None = None) -> None:
        """:meth:`aclose` for sync code (no event loop needed)."""
        try:
            self._start_close(release).result()
        except Exception as exc:
            self._rethrow(exc)

    def abandon(self) -> None:
        """Stop the threads of a store that failed to open (nothing to release)."""
        self._closing = self._closing or concurrent.futures.Future()
        self._executor.shutdown(wait=False)


def _nothing() -> None:
    return None


async def timed_health(
    provider: str, ping: Callable[[], Awaitable[str]], failures: tuple[type[BaseException], ...] = (Exception,)
) -> Health:
    """Run ``ping`` (which returns a detail line) and time it; a failure is reported, not raised."""
    start = time.perf_counter()
    try:
        detail, ok = await ping(), True
    except failures as exc:
        detail, ok = str(exc), False
    return Health(ok=ok, provider=provider, latency_ms=(time.perf_counter() - start) * 1e3, detail=detail)


def trace_count(records: Iterable[Record]) -> int:
    """How many of ``records`` are trace steps."""
    return sum(1 for r in records if r.metadata.get("type") == "trace")


class RecordWriter:
    """The port's single writes, the same on every adapter: the input is checked into a
    :class:`memkit._records.Record` (so bad input fails before the store is touched), then the
    adapter's ``_store`` writes it."""

    limits: Limits

    async def _store(self, records: list[Record]) -> list[str]:
        raise NotImplementedError

    async def add(
        self, content: str, user_id: str, agent_id: str, metadata: dict[str, Any] | None = None
    ) -> str:
        return (await self._store([new_record(content, user_id, agent_id, metadata, self.limits)]))[0]

    async def add_trace(
        self, agent_id: str, workflow_id: str, trace_data: dict[str, Any], user_id: str = "system"
    ) -> str:
        return (await self._store([trace_record(agent_id, workflow_id, trace_data, user_id, self.limits)]))[0]
