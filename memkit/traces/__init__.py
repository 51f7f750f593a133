"""Execution traces: the seed agent framework's ``ExecutionHistory``, persisted step by step.

Every :meth:`ExecutionHistory.add_item` becomes one ``add_trace`` call on the
history's ``memory_provider``. Two write modes, both lossless:

* write-through (default): ``add_item`` returns once the step is stored and
  raises :class:`TraceWriteError` if the store refused it. It runs the write on
  memkit's background loop, so it works the same from a script, a worker thread
  and a Jupyter cell (whose loop is running on the caller's thread).
* write-behind (``write_behind=True``): ``add_item`` queues the write and returns
  at once; writes land in order; :meth:`ExecutionHistory.flush`, ``close()`` and
  leaving a ``with`` block wait for every queued write and raise
  :class:`TraceWriteError` naming each step that failed. A failure also makes the
  next ``add_item`` raise, so a broken store cannot go unnoticed for long; that
  call's own step is still kept and queued.

Every step carries its own key (``metadata["step_key"]``), so
:meth:`ExecutionHistory.retry_failed` stores each failed step exactly once: a write
the store applied but never acknowledged is found, not written again.

Async code can ``await history.aadd_item(item)`` instead, which writes on the
caller's own loop.

Retries: one trace per step outcome, not per attempt. A step retried by
:meth:`ExecutionHistory.retrying` is stored once, with ``retry_count`` and the
earlier attempts' errors under ``retry_errors``; that keeps "one row per step"
in :func:`memkit.frames.traces_frame` without losing why it needed retries.

The package holds one step type end to end: what a step is (``_items``), how a run records
its steps (``_history``, ``_step``) and how a step's timing is read from whatever keys an agent
wrote (``_timing``, which the record layer uses when a step is stored, so this face imports
nothing until a name is asked for).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memkit._core._lazy import lazy_exports

if TYPE_CHECKING:
    from memkit._core._items import ExecutionItem, ExecutionStatus, TraceWriteError, categorize_error
    from memkit._core._records import REDACTED, Redactor, get_trace_redactor, set_trace_redactor
    from memkit.traces._history import ExecutionHistory
    from memkit.traces._step import Step

__all__ = [
    "REDACTED",
    "ExecutionHistory",
    "ExecutionItem",
    "ExecutionStatus",
    "Redactor",
    "Step",
    "TraceWriteError",
    "categorize_error",
    "get_trace_redactor",
    "set_trace_redactor",
]


# Where each name lives (the redaction hook is the record layer's: a step is redacted as it is stored).
_HOME = {
    "REDACTED": "memkit._core._records", "Redactor": "memkit._core._records",
    "get_trace_redactor": "memkit._core._records", "set_trace_redactor": "memkit._core._records",
    "ExecutionHistory": "memkit.traces._history",
    "ExecutionItem": "memkit._core._items", "ExecutionStatus": "memkit._core._items",
    "TraceWriteError": "memkit._core._items", "categorize_error": "memkit._core._items",
    "Step": "memkit.traces._step",
}


__getattr__, __dir__ = lazy_exports(__name__, _HOME, __all__, globals())
