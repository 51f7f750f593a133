"""The second process of a streamed span import (see :mod:`memkit.otel._stream`): it reads, checks and
plans the file and sends the planned steps and recall bodies, trace by trace, a chunk at a time."""

from __future__ import annotations

import gc
import importlib
import pickle
import queue
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from memkit._core._errors import InvalidInputError
from memkit._core._records import TraceRow, set_trace_redactor, trace_row
from memkit._core._validate import Limits
from memkit.otel import _incremental
from memkit.otel._plan import _plan_trace
from memkit.otel._spans import _check_tree, _is_memory, _read_blocks, _Span

__all__ = ["HEAD", "serve"]

HEAD = struct.Struct("<Q")  # each message's length, before its pickle


def serve(started: float) -> None:
    """The child (``started``: the time its interpreter began this module's import): read the import's
    arguments from stdin (a pickle, see StepStream), write the messages to stdout (each a length and a
    pickle)."""
    gc.disable()  # as in import_otlp: millions of small objects, none in a cycle
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing printed may land among the messages
    imported = time.perf_counter()
    path, user_id, agent_id, workflow_id, chunk, limits, rows, redactor, behind, timed, maker = pickle.load(
        sys.stdin.buffer)
    set_trace_redactor(redactor)
    global _timeline
    if timed:
        _timeline = [(started, "child", "python", 0), (imported, "child", "imported", 0)]
        _mark("arguments")
    sender = _Sender(out)

    def send(kind: str, payload: Any = None) -> None:
        if kind == "steps":
            _mark("send", len(payload[0]))
            sender.put(pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL), len(payload[0]))
            return
        if kind != "restart":  # the last message: after all the others, the timeline first
            sender.close()
            _mark(kind)
            if _timeline is not None:
                _write(out, pickle.dumps(("timeline", _timeline), protocol=pickle.HIGHEST_PROTOCOL))
            _write(out, pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL))
        else:
            _mark(kind)
            sender.put(pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL), 0)

    try:
        try:
            _plan_file(path, user_id, agent_id, workflow_id, chunk, send, limits if rows else None,
                       lambda: sender.waiting() >= behind, maker)
        except BrokenPipeError:
            raise
        except Exception:
            send("fallback")
    except BrokenPipeError:  # the importing process stopped listening: nothing to say
        pass


def _write(out: IO[bytes], blob: bytes) -> None:
    out.write(HEAD.pack(len(blob)))
    out.write(blob)
    out.flush()


class _Sender:
    """Writes the planned chunks to the pipe from a thread of its own, so that the planning goes on
    while the importing process is still busy with earlier chunks (a blocking write to a pipe holds
    no GIL). ``waiting()``: the chunks put that the importing process has not begun to read (each is
    written whole only then, the pipe holding less than one), that is, how far it is behind."""

    def __init__(self, out: IO[bytes]) -> None:
        self._out = out
        self._queue: queue.SimpleQueue[tuple[bytes, int] | None] = queue.SimpleQueue()
        self._broken = False
        self._put = self._written = 0  # each counted by one thread only
        self._thread = threading.Thread(target=self._run, name="memkit-otel-send", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            if not self._broken:
                try:
                    _write(self._out, item[0])
                except OSError:  # the importing process stopped listening
                    self._broken = True
                _mark("sent", item[1])
            self._written += 1

    def put(self, blob: bytes, steps: int) -> None:
        if self._broken:
            raise BrokenPipeError
        self._put += 1
        self._queue.put((blob, steps))

    def waiting(self) -> int:
        return self._put - self._written

    def close(self) -> None:
        """Once everything put has been written."""
        self._queue.put(None)
        self._thread.join()
        if self._broken:
            raise BrokenPipeError


_timeline: list[tuple[float, str, str, int]] | None = None  # see _stream.TIMELINE


def _mark(what: str, steps: int = 0) -> None:
    if _timeline is not None:
        _timeline.append((time.perf_counter(), "child", what, steps))


def _row(step: tuple[str, str, str, dict[str, Any]], limits: Limits) -> TraceRow | None:
    user, agent, workflow, data = step
    try:
        return trace_row(agent, workflow, data, user, limits)
    except InvalidInputError:
        return None  # the importing process tries again, and says what is wrong


Maker = Callable[[list[TraceRow | None]], list[Any]]


def _resolve(maker: tuple[str, Any] | None) -> Maker | None:
    """The store's row maker (``Store._import_row_maker()``: "module:function" and its argument) as a
    function of a chunk's rows; imported on first use (the first chunk, sent while the store waits,
    never needs it)."""
    if maker is None:
        return None
    (module, _, name), argument = maker[0].partition(":"), maker[1]
    function = getattr(importlib.import_module(module), name)

    def make(rows: list[TraceRow | None]) -> list[Any]:
        made: list[Any] = function(rows, argument)
        return made

    return make


_FIRST = 8  # the first message holds this fraction of a chunk's steps

_BUILT: tuple[str, str, str, dict[str, Any]] = ("", "", "", {})  # a step whose row is sent instead


class _Memory(Exception):
    """A memory span: such a file goes the general way."""


def _plan_file(
    path: str, user_id: str | None, agent_id: str | None, workflow_id: str | None, chunk: int,
    send: Callable[..., None], limits: Limits | None, behind: Callable[[], bool],
    maker: tuple[str, Any] | None = None,
) -> None:
    """Plan the file at ``path`` and send its steps ``chunk`` at a time, each trace as soon as the next
    begins; with ``limits``, also the rows of a chunk planned while the importing process is
    ``behind()`` (it then has the less to do, and this process, ahead, the more), in the form the
    store's ``maker`` makes of them if it names one (see ``Store._import_row_maker``)."""
    by_trace: dict[str, list[_Span]] = {}
    sent: set[str] = set()
    steps: list[tuple[str, str, str, dict[str, Any]]] = []
    recalls: list[Any] = []
    # The first message is smaller: the store waits idle for it (this interpreter's start included),
    # and can be writing it while the next ones are planned.
    state: dict[str, Any] = {"current": None, "streaming": True, "maker": None, "chunk": max(1, chunk // _FIRST)}

    def plan(trace_id: str) -> None:
        _plan_trace(by_trace[trace_id], user_id, agent_id, workflow_id, True, steps, recalls)
        if len(steps) >= state["chunk"]:
            state["chunk"] = chunk
            flush()

    def flush() -> None:
        if steps or recalls:
            rows = None
            sent = steps[:]
            if limits is not None and behind():
                _mark("rows", len(steps))
                rows = [_row(step, limits) for step in steps]
                if maker is not None:
                    if state["maker"] is None:
                        state["maker"] = _resolve(maker)
                    rows = state["maker"](rows)
                # A built row is all the importing process needs of its step (pickling it too would
                # double the message); it takes the step only where the row is None.
                sent = [step if row is None else _BUILT for step, row in zip(steps, rows, strict=True)]
            send("steps", (sent, recalls[:], rows))
            steps.clear()
            recalls.clear()

    def keep(span: _Span) -> None:
        if _is_memory(span):
            raise _Memory
        members = by_trace.get(span.trace_id)
        if members is None:
            current = state["current"]
            if current is not None and state["streaming"]:
                plan(current)  # the trace before is taken as complete: the next has begun
                sent.add(current)
            by_trace[span.trace_id] = [span]
            state["current"] = span.trace_id
        else:
            if span.trace_id in sent:
                state["streaming"] = False  # its steps went out planned without this span
            members.append(span)

    for request in _incremental.requests(path):
        spans: list[_Span] = []

        def read(span: _Span, spans: list[_Span] = spans) -> None:
            spans.append(span)
            keep(span)

        _read_blocks(request, read)
        _check_tree(spans)
        _mark("decoded", len(spans))
    if state["streaming"]:
        if state["current"] is not None:
            plan(state["current"])
    else:
        steps.clear()  # planned and not yet sent: planned again below
        recalls.clear()
        send("restart")
        for trace_id in by_trace:
            plan(trace_id)
    flush()
    send("done", list(by_trace))
