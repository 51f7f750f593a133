"""``history.step(...)``: times one step (and its retries) and records its outcome on exit."""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any

from memkit._core._items import ExecutionItem, ExecutionStatus, TraceWriteError
from memkit._recall._recording import RecallScope, current_scope, step_scope

if TYPE_CHECKING:
    from memkit.traces._history import ExecutionHistory

# A Step takes its index when it starts (its searches are recorded as recalls of that index
# while it runs) and hands it to add_item / aadd_item when it ends, through this variable,
# so those public methods keep their signatures.
_RESERVED_INDEX: contextvars.ContextVar[tuple[ExecutionHistory, int] | None] = contextvars.ContextVar(
    "memkit_reserved_step_index", default=None
)


class Step:
    """Times one step (and its retries) and records it on exit; made by :meth:`ExecutionHistory.step`."""

    def __init__(
        self,
        history: ExecutionHistory,
        step_name: str,
        tool: str,
        parameters: dict[str, Any] | None,
        *,
        max_retries: int = 0,
        retry_on: type[BaseException] | tuple[type[BaseException], ...] = Exception,
    ) -> None:
        self.history = history
        self.step_name = step_name
        self.tool = tool
        self.parameters = parameters
        self.result: dict[str, Any] | None = None
        self.retry_count = 0
        self.retry_errors: list[str] = []
        self.max_retries = max_retries
        self.retry_on = retry_on
        self.done = False
        self.item: ExecutionItem | None = None
        self._timestamp: float | None = None
        self._started: float | None = None
        self._exits = 0
        self._index: int | None = None
        self._parent: int | None = None  # the step of the same run this one started inside
        self._scopes: list[Any] = []

    @property
    def attempt(self) -> int:
        """1 for the first attempt, 2 for the first retry, ..."""
        return self.retry_count + 1

    def _begin(self) -> None:
        if self.done:
            raise RuntimeError(f"step {self.step_name!r} has already been recorded")
        if self._started is None:
            self._timestamp = datetime.now(UTC).timestamp()
            self._started = time.perf_counter()
            # The index is taken when the step starts, so searches made inside it (recorded
            # as recalls while it runs) already know which step they belong to.
            self._index = self.history._reserve()
            outer, h = current_scope(), self.history
            if outer is not None and (outer.workflow_id, outer.run_id, outer.user_id, outer.agent_id) == (
                    h.workflow_id or "unknown_workflow", h.run_id, h.user_id, h.agent_id or "unknown_agent"):
                self._parent = outer.step_index
        history = self.history
        scope = step_scope(RecallScope(
            workflow_id=history.workflow_id or "unknown_workflow", run_id=history.run_id,
            step_index=self._index, step_name=self.step_name, attempt=self.attempt,
            user_id=history.user_id, agent_id=history.agent_id or "unknown_agent",
        ))
        scope.__enter__()
        self._scopes.append(scope)

    def _leave_scope(self) -> None:
        self._scopes.pop().__exit__(None, None, None)

    @contextlib.contextmanager
    def _reserved(self) -> Iterator[None]:
        """Store this step under the index it took when it started (see _RESERVED_INDEX)."""
        assert self._index is not None
        token = _RESERVED_INDEX.set((self.history, self._index))
        try:
            yield
        finally:
            _RESERVED_INDEX.reset(token)

    def _finish(self, exc: BaseException | None) -> tuple[ExecutionItem | None, bool]:
        """Return the item to record (None while retrying) and whether to swallow ``exc``."""
        self._exits += 1
        if exc is not None and isinstance(exc, self.retry_on) and self.retry_count < self.max_retries:
            self.retry_errors.append(f"{type(exc).__name__}: {exc}")
            self.retry_count += 1
            return None, True
        assert self._started is not None and self._timestamp is not None
        self.done = True
        self.item = ExecutionItem(
            step_name=self.step_name,
            tool=self.tool,
            status=ExecutionStatus.SUCCESS if exc is None else ExecutionStatus.FAILED,
            result=self.result,
            error=None if exc is None else f"{type(exc).__name__}: {exc}",
            timestamp=self._timestamp,
            parameters=self.parameters,
            duration=time.perf_counter() - self._started,
            retry_count=self.retry_count,
        )
        return self.item, False

    def _extra(self) -> dict[str, Any] | None:
        extra: dict[str, Any] = {"retry_errors": list(self.retry_errors)} if self.retry_errors else {}
        if self._parent is not None:
            extra["parent_step_index"] = self._parent
        return extra or None

    def __enter__(self) -> Step:
        self._begin()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._leave_scope()
        item, swallow = self._finish(exc)
        if item is not None:
            try:
                with self._reserved():
                    self.history.add_item(item, extra=self._extra())
            except TraceWriteError as write_error:
                if exc is None:
                    raise
                exc.add_note(str(write_error))
        return swallow

    async def __aenter__(self) -> Step:
        self._begin()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        self._leave_scope()
        item, swallow = self._finish(exc)
        if item is not None:
            try:
                with self._reserved():
                    await self.history.aadd_item(item, extra=self._extra())
            except TraceWriteError as write_error:
                if exc is None:
                    raise
                exc.add_note(str(write_error))
        return swallow
