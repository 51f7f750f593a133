"""Live: :class:`MemkitSpanProcessor`, the OTel SDK span processor that stores each ended span as a memkit step."""

from __future__ import annotations

from typing import Any

from memkit._core._errors import BackendUnavailableError
from memkit._core._port import MemoryProvider, SupportsRecalls
from memkit._recall._recording import Recall
from memkit._sync import Memory, call, provider_of
from memkit.otel._export import spans_to_otlp
from memkit.otel._plan import _plan
from memkit.otel._spans import _parse

_ProcessorBase: Any
try:
    from opentelemetry.sdk.trace import SpanProcessor as _ProcessorBase
except ImportError:  # pragma: no cover - depends on the install; the class still documents itself
    _ProcessorBase = object


class MemkitSpanProcessor(_ProcessorBase):  # type: ignore[misc]
    """An OTel SDK ``SpanProcessor`` that stores each span as a memkit step when it ends.

    >>> provider.add_span_processor(MemkitSpanProcessor(mem, user_id="alice", agent_id="bot"))  # doctest: +SKIP

    Steps are numbered per trace in the order their spans end (children end before their
    parents); ``span_id``/``parent_span_id`` keep the tree. A retriever span's documents become a
    recall of its step. A span the store refuses is reported on stderr by the SDK's own error
    handling and does not stop the agent.
    """

    def __init__(
        self,
        mem: Memory | MemoryProvider,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
    ) -> None:
        if _ProcessorBase is object:
            raise BackendUnavailableError("MemkitSpanProcessor needs the OTel SDK: pip install 'memkit[otel]'")
        self._mem = mem
        self._provider = provider_of(mem)
        self.user_id, self.agent_id, self.workflow_id = user_id, agent_id, workflow_id
        self._counts: dict[str, int] = {}
        self._roots: dict[str, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.parent is None:
            self._roots[format(span.context.trace_id, "032x")] = span.name

    def on_end(self, span: Any) -> None:
        request = spans_to_otlp([span])
        parsed = _parse(request)
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
        call(self._provider, _store_span, steps, recalls)

    def shutdown(self) -> None:
        self._counts.clear()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


async def _store_span(
    provider: MemoryProvider, steps: list[tuple[str, str, str, dict[str, Any]]], recalls: list[Recall]
) -> None:
    """One ended span's steps and recalls, stored in one visit to memkit's loop."""
    for user, agent, workflow, data in steps:
        await provider.add_trace(agent, workflow, data, user)
    if recalls and isinstance(provider, SupportsRecalls):
        await provider.add_recalls(recalls)
