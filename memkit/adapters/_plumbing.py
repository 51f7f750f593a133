"""The threads an adapter runs its blocking client calls on (SQLite's connection, the FalkorDB
client, mem0), and the one way to close them: :class:`Worker`. Everything else adapters share
is the store base's (:class:`memkit.store._base.Store`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

from memkit._core._errors import StorageError

__all__ = ["Closing", "Worker"]

T = TypeVar("T")


class Closing:
    """The closing state every kind of adapter worker shares: closed from the moment a close
    starts, and every call after that refused with an error naming the store."""

    def __init__(self, owner: Callable[[], str]) -> None:
        self._owner = owner
        self._closing: concurrent.futures.Future[None] | None = None

    @property
    def closed(self) -> bool:
        """True from the moment a close starts: no call is accepted after that."""
        return self._closing is not None

    def _refuse(self) -> StorageError:
        return StorageError(f"{self._owner()} is closed; open the store again to use it")


class Worker(Closing):
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
        super().__init__(owner)
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._translate = translate

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
