"""``ExecutionHistory``: the seed framework's step log, written to a store step by step (see :mod:`memkit.traces`)."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import json
import os
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, Unpack

from memkit._core._errors import InvalidInputError, StorageError
from memkit._core._items import ExecutionItem, ExecutionStatus, TraceWriteError, categorize_error
from memkit._core._port import MemoryProvider
from memkit._sync import Memory, on_loop_thread, provider_of, submit
from memkit.traces._step import _RESERVED_INDEX, Step

__all__ = ["ExecutionHistory"]

_pending_histories: weakref.WeakSet[ExecutionHistory] = weakref.WeakSet()



async def _settle(futures: list[concurrent.futures.Future[Any]]) -> None:
    """Wait for ``futures`` on this loop. Their errors are filed by _settled, so each wrapper's
    is retrieved here (an unretrieved one prints "Future exception was never retrieved")."""
    wrapped = [asyncio.wrap_future(f) for f in futures]
    if wrapped:
        await asyncio.wait(wrapped)
    for future in wrapped:
        if not future.cancelled():
            future.exception()


@atexit.register
def _flush_at_exit() -> None:
    # A write-behind history the caller forgot to close: finish its writes rather
    # than lose them, and say loudly if any failed (nobody is left to raise to).
    for history in list(_pending_histories):
        try:
            history.flush()
        except Exception as exc:
            print(f"memkit: {exc}", file=sys.stderr)


class HistoryOptions(TypedDict, total=False):
    """Where a loaded history's new steps go (:class:`ExecutionHistory`'s keywords besides its
    steps and times, which the loaded data sets)."""

    memory_provider: MemoryProvider | Memory | None
    workflow_id: str | None
    agent_id: str | None
    user_id: str
    run_id: str | None
    write_behind: bool


@dataclass(eq=False)
class ExecutionHistory:
    """History of a workflow's steps; with ``memory_provider`` every step is also stored.

    Parameters
    ----------
    memory_provider
        A :class:`~memkit.MemoryProvider` or :class:`memkit.Memory`; ``None`` keeps
        the history in memory only (the seed framework's behaviour).
    workflow_id, agent_id, user_id, run_id
        Where the traces go and how they are labelled (``run_id`` is optional).
    write_behind
        Queue writes and return at once; see the module docstring.

    Examples
    --------
    >>> history = ExecutionHistory(memory_provider=mem, workflow_id="wf1", agent_id="bio")  # doctest: +SKIP
    >>> with history.step("run_blast", tool="blast", parameters={"db": "nr"}) as step:   # doctest: +SKIP
    ...     step.result = {"hits": 3}
    """

    SUCCESS_RATE_THRESHOLD = 0.8

    items: list[ExecutionItem] = field(default_factory=list)
    start_time: float = field(default_factory=lambda: datetime.now(UTC).timestamp())
    end_time: float | None = None
    memory_provider: MemoryProvider | Memory | None = None
    workflow_id: str | None = None
    agent_id: str | None = None
    user_id: str = "system"
    run_id: str | None = None
    write_behind: bool = False

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._tail: concurrent.futures.Future[Any] | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._failures: list[tuple[ExecutionItem, BaseException]] = []
        # Writes that failed, by step key, until retry_failed() stores them.
        self._unstored: dict[str, tuple[ExecutionItem, dict[str, Any]]] = {}
        self._next_index = len(self.items)
        self._key = uuid.uuid4().hex

    # -- persistence -------------------------------------------------------------

    @property
    def _provider(self) -> MemoryProvider | None:
        return None if self.memory_provider is None else provider_of(self.memory_provider)

    def _trace_data(self, item: ExecutionItem, index: int, extra: Mapping[str, Any] | None) -> dict[str, Any]:
        data = item.to_dict()
        data["step_index"] = index
        if self.run_id is not None:
            data["run_id"] = self.run_id
        if extra:
            data.update(extra)
        # The step's own key, stored as top-level metadata: a retry finds a write the store
        # applied but never acknowledged instead of writing the step twice.
        meta = data.get("metadata")
        data["metadata"] = {**(meta if isinstance(meta, dict) else {}), "step_key": f"{self._key}-{index}"}
        return data

    async def _store(self, item: ExecutionItem, data: dict[str, Any]) -> str:
        provider = self._provider
        assert provider is not None
        return await provider.add_trace(
            agent_id=self.agent_id or "unknown_agent",
            workflow_id=self.workflow_id or "unknown_workflow",
            trace_data=data,
            user_id=self.user_id,
        )

    async def _stored(self, data: dict[str, Any]) -> bool:
        """Whether the step with ``data``'s key is already in the store."""
        provider = self._provider
        assert provider is not None
        found = await provider.get_all(
            self.user_id, self.agent_id or "unknown_agent", 1,
            {"type": "trace", "step_key": data["metadata"]["step_key"]},
        )
        return bool(found)

    async def _store_after(
        self, previous: concurrent.futures.Future[Any] | None, item: ExecutionItem, data: dict[str, Any]
    ) -> str:
        if previous is not None:
            # Keep write-behind in step order; the previous write's own error is reported separately.
            await _settle([previous])
        return await self._store(item, data)

    def _failed(self, item: ExecutionItem, data: dict[str, Any], exc: BaseException) -> None:
        with self._lock:
            self._failures.append((item, exc))
            self._unstored[data["metadata"]["step_key"]] = (item, data)

    def _take_failures(self) -> list[tuple[ExecutionItem, BaseException]]:
        with self._lock:
            failures, self._failures = self._failures, []
        return failures

    def _raise_failures(self, failures: list[tuple[ExecutionItem, BaseException]] | None = None) -> None:
        failures = self._take_failures() if failures is None else failures
        if failures:
            raise TraceWriteError(failures)

    def _reserve(self) -> int:
        with self._lock:
            index = self._next_index
            self._next_index += 1
        return index

    def _append(self, item: ExecutionItem) -> int:
        if not isinstance(item, ExecutionItem):
            raise InvalidInputError(f"add_item takes an ExecutionItem, got {type(item).__name__}")
        reserved = _RESERVED_INDEX.get()
        with self._lock:
            if reserved is not None and reserved[0] is self:
                index = reserved[1]
            else:
                index = self._next_index
                self._next_index += 1
            self.items.append(item)
        return index

    def add_item(self, item: ExecutionItem, *, extra: Mapping[str, Any] | None = None) -> None:
        """Append ``item`` and store it as a trace (see the module docstring for when).

        Raises
        ------
        TraceWriteError
            The store refused this write (write-through) or an earlier queued one; this
            step is appended and queued all the same (see :meth:`retry_failed`).
        """
        if self._provider is not None and on_loop_thread():
            raise RuntimeError("add_item was called on memkit's own event loop; await aadd_item() instead")
        index = self._append(item)
        if self._provider is None:
            return
        data = self._trace_data(item, index, extra)
        if not self.write_behind:
            try:
                submit(self._store(item, data)).result()
            except Exception as exc:
                self._failed(item, data, exc)
            self._raise_failures()
            return
        earlier = self._take_failures()
        with self._lock:
            future = submit(self._store_after(self._tail, item, data))
            self._tail = future
            self._pending.add(future)
        _pending_histories.add(self)
        future.add_done_callback(lambda f: self._settled(f, item, data))
        self._raise_failures(earlier)  # this step is queued all the same

    def _settled(self, future: concurrent.futures.Future[Any], item: ExecutionItem, data: dict[str, Any]) -> None:
        exc = StorageError("the write was cancelled") if future.cancelled() else future.exception()
        if exc is not None:
            self._failed(item, data, exc)
        with self._lock:
            self._pending.discard(future)

    async def aadd_item(self, item: ExecutionItem, *, extra: Mapping[str, Any] | None = None) -> None:
        """Async :meth:`add_item`: store on the caller's loop and return once stored."""
        with self._lock:
            pending = list(self._pending)
        await _settle(pending)
        index = self._append(item)
        if self._provider is not None:
            data = self._trace_data(item, index, extra)
            try:
                await self._store(item, data)
            except Exception as exc:
                self._failed(item, data, exc)
        await asyncio.to_thread(self.flush)

    def retry_failed(self) -> int:
        """Store every step whose write failed, once: a step the store did apply is not written again.

        Returns how many steps were written now; raises :class:`TraceWriteError` for those
        that fail again (they stay queued for the next retry).
        """
        self.flush_quietly()
        with self._lock:
            waiting, self._unstored = dict(self._unstored), {}
            self._failures = []
        written = 0
        for item, data in waiting.values():
            try:
                if not submit(self._stored(data)).result():
                    submit(self._store(item, data)).result()
                    written += 1
            except Exception as exc:
                self._failed(item, data, exc)
        self._raise_failures()
        return written

    def flush(self) -> None:
        """Return once every queued write is stored; raise :class:`TraceWriteError` if any failed."""
        self.flush_quietly()
        self._raise_failures()

    def flush_quietly(self) -> None:
        """Wait for every queued write; failures stay filed for :meth:`flush` to raise."""
        with self._lock:
            pending = list(self._pending)
        concurrent.futures.wait(pending)
        # Done callbacks may still be running on the loop thread; wait until they have filed.
        while True:
            with self._lock:
                if not any(f in self._pending for f in pending):
                    break
            time.sleep(0.001)
        _pending_histories.discard(self)

    async def aflush(self) -> None:
        """Async :meth:`flush` (does not block the caller's loop)."""
        with self._lock:
            pending = list(self._pending)
        await _settle(pending)
        await asyncio.to_thread(self.flush)

    def close(self) -> None:
        """Flush and mark the workflow finished."""
        self.flush()
        if self.end_time is None:
            self.finish()

    def __enter__(self) -> ExecutionHistory:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except TraceWriteError as write_error:
            # The body's exception wins; the write failure rides along as a note.
            exc.add_note(str(write_error))

    async def __aenter__(self) -> ExecutionHistory:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.__exit__, exc_type, exc, tb)

    # -- recording helpers ---------------------------------------------------------

    def step(self, step_name: str, tool: str, parameters: dict[str, Any] | None = None) -> Step:
        """A context manager that times one step and records its outcome.

        Success is recorded as ``SUCCESS``; an exception is recorded as ``FAILED``
        (``error`` = ``"<Type>: <message>"``) and re-raised. Set ``step.result``
        inside the block; bump ``step.retry_count`` if you retry by hand.
        Works with ``with`` and ``async with``.
        """
        return Step(self, step_name, tool, parameters)

    def retrying(
        self,
        step_name: str,
        tool: str,
        parameters: dict[str, Any] | None = None,
        *,
        max_retries: int = 3,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
    ) -> Iterator[Step]:
        """Attempts of one step: ``for step in history.retrying(...): with step: ...``.

        A failing attempt is swallowed while retries remain; the step is stored
        once, with its final status, ``retry_count`` and ``retry_errors``.
        """
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidInputError(f"max_retries must be a non-negative integer, got {max_retries!r}")
        step = Step(self, step_name, tool, parameters, max_retries=max_retries, retry_on=retry_on)
        while not step.done:
            exits = step._exits
            yield step
            if step._exits == exits:
                raise RuntimeError("use each step that retrying() yields as `with step:`")

    # -- the seed framework's queries ---------------------------------------------

    def get_successful_steps(self) -> list[ExecutionItem]:
        return [i for i in self.items if i.status == ExecutionStatus.SUCCESS]

    def get_failed_steps(self) -> list[ExecutionItem]:
        return [i for i in self.items if i.status == ExecutionStatus.FAILED]

    def get_step_by_name(self, step_name: str) -> ExecutionItem | None:
        return next((i for i in self.items if i.step_name == step_name), None)

    def get_tool_usage_count(self, tool_name: str) -> int:
        return sum(1 for i in self.items if i.tool == tool_name)

    def get_failure_patterns(self) -> dict[str, int]:
        """Failed steps per category (network, validation, parameter, criteria, execution)."""
        patterns: dict[str, int] = {}
        for item in self.get_failed_steps():
            category = categorize_error(item.error)
            patterns[category] = patterns.get(category, 0) + 1
        return patterns

    def get_execution_summary(self) -> dict[str, Any]:
        total = len(self.items)
        successful = len(self.get_successful_steps())
        return {
            "total_steps": total,
            "successful_steps": successful,
            "failed_steps": len(self.get_failed_steps()),
            "success_rate": successful / total if total else 0,
            "duration": None if self.end_time is None else self.end_time - self.start_time,
            "failure_patterns": self.get_failure_patterns(),
            "tools_used": sorted({i.tool for i in self.items}),
        }

    def finish(self) -> None:
        self.end_time = datetime.now(UTC).timestamp()

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": [i.to_dict() for i in self.items],
            "start_time": self.start_time,
            "end_time": self.end_time,
            "summary": self.get_execution_summary(),
        }

    def save_to_file(self, filepath: str | os.PathLike[str]) -> None:
        """Write :meth:`to_dict` as JSON (the seed framework's file format)."""
        with Path(filepath).open("w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2, default=str)

    @classmethod
    def load_from_file(cls, filepath: str | os.PathLike[str], **options: Unpack[HistoryOptions]) -> ExecutionHistory:
        """Read a :meth:`save_to_file` JSON; ``options`` (e.g. ``memory_provider``) go to the constructor.

        Loading never writes traces; use :func:`memkit.import_history` to store them.
        """
        with Path(filepath).open(encoding="utf-8") as f:
            data = json.load(f)
        return cls.from_dict(data, **options)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **options: Unpack[HistoryOptions]) -> ExecutionHistory:
        if not isinstance(data, Mapping) or not isinstance(data.get("items", []), list):
            raise InvalidInputError("an execution history must be a JSON object with an 'items' list")
        history = cls(**options)
        history.start_time = data.get("start_time", history.start_time)
        history.end_time = data.get("end_time")
        history.items.extend(ExecutionItem.from_dict(raw) for raw in data.get("items", []))
        history._next_index = len(history.items)
        return history
