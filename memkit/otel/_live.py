"""Live: :class:`MemkitSpanProcessor`, the OTel SDK span processor that stores each ended span as a memkit step.

It runs inside ``span.end()``, in the agent's own call: whatever happens to memkit, it never raises
there (the SDK would pass the error to the agent, and the processors after it would never see the
span). A span memkit refuses is counted and logged; while the store is down, spans wait in a
bounded buffer and are written, in order, once it answers again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from memkit._core._errors import BackendUnavailableError, InvalidInputError, StorageError
from memkit._core._port import MemoryProvider, SupportsRecalls
from memkit._core._validate import DEFAULT_LIMITS, Limits
from memkit._sync import Memory, call, provider_of
from memkit.otel._export import spans_to_otlp
from memkit.otel._fit import fitted_record
from memkit.otel._plan import _plan
from memkit.otel._spans import _parse
from memkit.store._base import Store

_ProcessorBase: Any
try:
    from opentelemetry.sdk.trace import SpanProcessor as _ProcessorBase
except ImportError:  # pragma: no cover - depends on the install; the class still documents itself
    _ProcessorBase = object

_log = logging.getLogger("memkit.otel")

#: Spans kept while the store is down, by default; past it, each new span is dropped and counted.
MAX_PENDING = 10_000
_BACKOFF_MAX = 30.0  # seconds between tries of a store that is down, at most


@dataclass
class _Planned:
    """One ended span's steps and recalls, as they wait to be written; a step is removed once written,
    so that a write retried after an outage does not store it twice."""

    name: str
    steps: list[tuple[str, str, str, dict[str, Any]]]
    recalls: list[Any] = field(default_factory=list)
    truncated: int = 0


class MemkitSpanProcessor(_ProcessorBase):  # type: ignore[misc]
    """An OTel SDK ``SpanProcessor`` that stores each span as a memkit step when it ends.

    >>> provider.add_span_processor(MemkitSpanProcessor(mem, user_id="alice", agent_id="bot"))  # doctest: +SKIP

    Steps are numbered per trace in the order their spans end (children end before their
    parents); ``span_id``/``parent_span_id`` keep the tree. A retriever span's documents become a
    recall of its step. A payload too big for the store's limits is cut as ``import_otlp`` cuts it
    (``truncated`` counts those steps).

    It never raises into the agent: a span memkit refuses is logged (logger ``memkit.otel``) and
    counted in ``errors``; while the store is unavailable (a server down, a full disk, a closed
    store), spans wait in a buffer of ``max_pending`` (``pending`` of them now), retried at the next
    span after a pause growing to 30 s or at ``force_flush()``; a span that finds the buffer full is
    dropped and counted in ``dropped``.
    """

    def __init__(
        self,
        mem: Memory | MemoryProvider,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        max_pending: int = MAX_PENDING,
    ) -> None:
        if _ProcessorBase is object:
            raise BackendUnavailableError("MemkitSpanProcessor needs the OTel SDK: pip install 'memkit[otel]'")
        if isinstance(max_pending, bool) or not isinstance(max_pending, int) or max_pending < 0:
            raise InvalidInputError(f"max_pending must be a non-negative int, got {max_pending!r}")
        self._mem = mem
        self._provider = provider_of(mem)
        self._limits: Limits = self._provider.limits if isinstance(self._provider, Store) else DEFAULT_LIMITS
        self.user_id, self.agent_id, self.workflow_id = user_id, agent_id, workflow_id
        self.max_pending = max_pending
        self.errors = 0  # spans refused, or whose write failed other than by the store being down
        self.dropped = 0  # spans that found the buffer full while the store was down
        self.truncated = 0  # steps whose payload was cut to fit the store's limits
        self._counts: dict[str, int] = {}
        self._roots: dict[str, str] = {}
        self._pending: deque[_Planned] = deque()
        self._lock = threading.Lock()  # spans end on any of the agent's threads
        self._backoff = 0.0
        self._retry_at = 0.0

    @property
    def pending(self) -> int:
        """Spans waiting for the store to come back."""
        return len(self._pending)

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        try:
            if span.parent is None:
                self._roots[format(span.context.trace_id, "032x")] = span.name
        except Exception:  # never into the agent
            _log.exception("memkit: could not note the start of span %r", getattr(span, "name", "?"))

    def on_end(self, span: Any) -> None:
        try:
            planned = self._planned(span)
        except Exception as exc:  # a refused span is the agent's data, not its error
            self._failed(getattr(span, "name", "?"), exc)
            return
        with self._lock:
            if len(self._pending) >= self.max_pending:
                self.dropped += 1
                _log.warning("memkit: span %r dropped: the store is unavailable and %d spans already wait",
                             planned.name, len(self._pending))
            else:
                self._pending.append(planned)
            if time.monotonic() >= self._retry_at:
                self._flush()

    def _planned(self, span: Any) -> _Planned:
        parsed = _parse(spans_to_otlp([span]))
        trace_id = parsed[0].trace_id
        index = self._counts.get(trace_id, 0)
        self._counts[trace_id] = index + 1
        parsed[0].attrs.setdefault("memkit.step_index", index)
        workflow = self.workflow_id or parsed[0].service or self._roots.get(trace_id) or parsed[0].name
        if span.parent is None:
            self._roots.pop(trace_id, None)
            self._counts.pop(trace_id, None)
        steps, recalls, _ = _plan(parsed, self.user_id, self.agent_id, workflow)
        for *_, data in steps:
            data.pop("parent_step_index", None)  # the parent has not ended yet: its index is unknown
        if not isinstance(self._provider, SupportsRecalls):
            recalls = []
        return _Planned(span.name, steps, recalls)

    def _failed(self, name: str, exc: BaseException) -> None:
        self.errors += 1
        _log.warning("memkit: span %r not stored: %s: %s", name, type(exc).__name__, exc)

    def _flush(self) -> bool:
        """Write the waiting spans in order (the caller holds the lock); False if the store is down."""
        while self._pending:
            planned = self._pending[0]
            try:
                call(self._provider, _store_span, planned, self._limits)
            except (BackendUnavailableError, StorageError, OSError) as exc:
                if self._backoff == 0.0:
                    _log.warning("memkit: the store is unavailable (%s); spans wait for it", exc)
                self._backoff = min(max(2 * self._backoff, 0.5), _BACKOFF_MAX)
                self._retry_at = time.monotonic() + self._backoff
                return False
            except Exception as exc:  # refused by the store: counted, the next goes on
                self._pending.popleft()
                self._failed(planned.name, exc)
                continue
            self._pending.popleft()
            self.truncated += planned.truncated
        if self._backoff:
            _log.info("memkit: the store answers again; the spans that waited are stored")
        self._backoff = self._retry_at = 0.0
        return True

    def shutdown(self) -> None:
        self.force_flush()
        self._counts.clear()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Try the waiting spans now; whether none is left."""
        try:
            with self._lock:
                return self._flush()
        except Exception:  # never into the agent
            _log.exception("memkit: flushing the waiting spans failed")
            return False


async def _store_span(provider: MemoryProvider, planned: _Planned, limits: Limits) -> None:
    """One ended span's steps and recalls, stored in one visit to memkit's loop; each step is taken
    off ``planned`` once written."""
    while planned.steps:
        user, agent, workflow, data = planned.steps[0]
        try:
            await provider.add_trace(agent, workflow, data, user)
        except InvalidInputError:
            _, fitted, cut = fitted_record(agent, workflow, data, user, limits)
            await provider.add_trace(agent, workflow, fitted, user)
            planned.truncated += cut
        planned.steps.pop(0)
    if planned.recalls:
        assert isinstance(provider, SupportsRecalls)
        await provider.add_recalls(planned.recalls)
        planned.recalls = []
