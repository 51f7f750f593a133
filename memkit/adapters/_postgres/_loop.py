"""The PostgreSQL store's plumbing: psycopg loaded on demand, URLs without passwords, and the
event loop thread the connection pool lives on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from memkit._core._errors import BackendUnavailableError, missing_extra
from memkit._core._url import query_options
from memkit.adapters._plumbing import Closing

__all__ = ["Loop", "conninfo", "load_psycopg", "safe_url", "timed_out"]

T = TypeVar("T")


def load_psycopg() -> Any:
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise missing_extra("psycopg", "postgres") from None
    return psycopg, psycopg_pool


def safe_url(url: str) -> str:
    """The URL without its password, for messages and ``repr``."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def conninfo(url: str, timeout: float) -> str:
    """libpq's connection string for ``url``, with ``connect_timeout`` (whole seconds, at least libpq's 2)
    from ``timeout`` unless the URL sets one: libpq's connect waits forever for a frozen server."""
    parts = urlsplit(url)
    if "connect_timeout" not in query_options(url):
        wait = f"connect_timeout={max(2, math.ceil(timeout))}"
        parts = parts._replace(query="&".join(filter(None, (parts.query, wait))))
    return urlunsplit(("postgresql", *parts[1:]))


def timed_out(url: str, timeout: float) -> BackendUnavailableError:
    return BackendUnavailableError(
        f"PostgreSQL at {url} did not answer within the timeout ({timeout:g} s; set it with ?timeout= or"
        " timeout=): if this was a write, it may or may not have been applied (a transaction is whole or"
        " absent); read it back before writing it again"
    )


class Loop(Closing):
    """One event loop on a thread of its own, where the adapter's connection pool lives.

    Closing is strict, as in :class:`memkit.adapters._plumbing.Worker`: the first close runs
    ``release`` on the loop, later closes wait for it, any other call then fails saying so.
    """

    def __init__(self, name: str, owner: Callable[[], str]) -> None:
        super().__init__(owner)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closing is not None:
            coro.close()
            raise self._refuse()
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:  # noqa: ASYNC109
        """``coro``'s result; :class:`TimeoutError` after ``timeout`` seconds, ``coro`` then cancelled.

        The caller does not wait for the cancellation: psycopg's (a cancel request, then waiting
        for the query to end) would take up to 10 s more from a server that answers nothing.
        """
        if threading.current_thread() is self.thread:
            return await coro
        future = self.submit(coro)
        try:
            done, _ = await asyncio.wait([asyncio.wrap_future(future)], timeout=timeout)
        except asyncio.CancelledError:
            future.cancel()
            raise
        if not done:
            future.cancel()
            raise TimeoutError
        return done.pop().result()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.submit(coro).result()

    def _start_close(self, release: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        if self._closing is None:
            closing: concurrent.futures.Future[None] = concurrent.futures.Future()
            self._closing = closing
            done = asyncio.run_coroutine_threadsafe(release, self.loop)

            def finish(result: concurrent.futures.Future[None]) -> None:
                self.loop.call_soon_threadsafe(self.loop.stop)
                error = result.exception()
                if error is None:
                    closing.set_result(None)
                else:
                    closing.set_exception(error)

            done.add_done_callback(finish)
        else:
            release.close()
        return self._closing

    async def aclose(self, release: Coroutine[Any, Any, None]) -> None:
        await asyncio.wrap_future(self._start_close(release))

    def close(self, release: Coroutine[Any, Any, None]) -> None:
        self._start_close(release).result()
