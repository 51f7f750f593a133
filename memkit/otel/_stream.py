"""A big span file read, checked and planned in a second Python process while this one builds the rows.

An import is parse (read, decode, check every span), plan (steps and recalls trace by trace), rows
(each step's texts) and SQLite's writes, one after the other; on one core they cost about the same
per span. For a file of :data:`STREAM_MIN_BYTES` or more, a child process (a fresh interpreter, not
a fork: the store has threads) does the parse and the plan and sends the planned steps, a chunk at
a time (with their rows while this process is behind, :data:`ROWS_BEHIND`), while the store's writer thread here builds
the other rows and writes them in one transaction. A trace is planned as soon as the next one
begins (a file's traces nearly always come one after the other); a span of a trace already sent
makes the child start over with the whole file planned (:class:`StepsRestarted`).

The child never decides what is wrong with a file: at any refusal (or a memory span, or a crash) it
says ``fallback`` and the import is done again here the ordinary way, which raises the first error
in the order and words it always has; the store's transaction is rolled back, so nothing is written.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from memkit._core import _records
from memkit._core._port import MemoryProvider, SupportsImportSteps, SupportsRecalls
from memkit._core._records import Redactor
from memkit._core._validate import Limits
from memkit.otel._child import HEAD
from memkit.store._base import Store
from memkit.store._ops import StepsRestarted

__all__ = ["FREE_CORE_LOAD", "STREAM_MIN_BYTES", "Fallback", "StepStream", "worth_streaming"]

# Below this (about 20,000 spans of the benchmark's file, 700 bytes a span), starting the child
# (~0.3 s: a fresh interpreter importing memkit) costs more than the overlap gives.
STREAM_MIN_BYTES = 14_000_000
_CHUNK = 2_000  # steps a message: large enough that pickling's fixed cost is nothing
# The child also builds the rows (texts and JSON) of a message it plans while this many planned
# messages wait for this process to take them: this process is then the slower, and a row built
# there saves it most of its cost. The share so follows whichever process is behind, on a machine
# whose other load slows either.
ROWS_BEHIND = 1
# How much of a second core others may use (the 1-minute load average beyond this process) for the
# child to still have one: see worth_streaming.
FREE_CORE_LOAD = 1.0
_CHILD = (
    "import time; t = time.perf_counter(); import sys; sys.path[0] = sys.argv[1];"
    " from memkit.otel._child import serve; serve(t)"
)
# A debug hook (bench/otel_timeline.py): a list, and each streamed import appends to it its events
# ``(perf_counter time, "parent" or "child", what, steps)``; both processes' clocks are the
# machine's monotonic clock. None: nothing is recorded.
TIMELINE: list[tuple[float, str, str, int]] | None = None


def _mark(what: str, steps: int = 0) -> None:
    if TIMELINE is not None:
        TIMELINE.append((time.perf_counter(), "parent", what, steps))


class Fallback(Exception):
    """The child did not plan the whole file (a refused span, a memory span, a crash): import it here."""


class StepStream:
    """The planned ``(user, agent, workflow, data)`` steps as the child sends them, iterated (once, by
    the store's writer thread) as they arrive. ``steps`` and ``recalls`` hold what has arrived, ``runs``
    the trace ids once all has. Iteration raises :class:`StepsRestarted` when the child starts over
    (both lists are emptied: the same iteration then begins again) and :class:`Fallback` when it
    gives up."""

    def __init__(
        self, path: Path, user_id: str | None, agent_id: str | None, workflow_id: str | None, limits: Limits,
        maker: tuple[str, Any] | None = None,
    ) -> None:
        root = str(Path(__file__).resolve().parents[2])  # where this memkit is imported from
        _mark("spawn")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, root], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._out: IO[bytes] = self._proc.stdout
        _widen(self._out)
        try:
            # The rows are built as here only with this process's redactor (none, or memkit's own).
            redactor = _records._redactor
            rows = redactor is None or type(redactor) is Redactor
            self._proc.stdin.write(pickle.dumps(
                (str(path), user_id, agent_id, workflow_id, _CHUNK, limits, rows, redactor if rows else None,
                 ROWS_BEHIND, TIMELINE is not None, maker)))
            self._proc.stdin.close()
        except OSError:  # it died at once: read() says fallback
            pass
        # A step whose row the child made is a placeholder: its row, in ``built``, is what is written.
        self.steps: list[tuple[str, str, str, dict[str, Any]]] = []
        self.built: list[Any] = []  # each step's row if the child made it (by ``maker``, if one)
        self.recalls: list[dict[str, Any]] = []
        self.runs: list[str] | None = None
        self._failed = False

    def _read(self) -> tuple[str, Any]:
        while True:
            _mark("wait")
            head = self._out.read(HEAD.size)
            if len(head) < HEAD.size:
                return "fallback", None  # the child ended without a word: it crashed or was killed
            blob = self._out.read(HEAD.unpack(head)[0])
            _mark("read")
            message: tuple[str, Any] = pickle.loads(blob)  # our own child's, over our own pipe
            if message[0] != "timeline":
                _mark(message[0], len(message[1][0]) if message[0] == "steps" else 0)
                return message
            if TIMELINE is not None:
                TIMELINE.extend(message[1])

    def __iter__(self) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
        while self.runs is None:
            if self._failed:
                raise Fallback
            kind, payload = self._read()
            if kind == "steps":
                steps, recalls, rows = payload
                self.steps.extend(steps)
                self.built.extend(rows or [None] * len(steps))
                self.recalls.extend(recalls)
                yield from steps
            elif kind == "restart":
                self.steps.clear()
                self.built.clear()
                self.recalls.clear()
                raise StepsRestarted
            elif kind == "done":
                self.runs = payload
            else:
                self._failed = True
                raise Fallback

    def finish(self) -> bool:
        """Read what is left; whether the child planned the whole file (else the file is refused, or
        has memories, and only the ordinary import can say what it does)."""
        while self.runs is None and not self._failed:
            kind, payload = self._read()
            if kind == "done":
                self.runs = payload
            elif kind not in ("steps", "restart"):
                self._failed = True
        return self.runs is not None

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._out.close()


def _widen(pipe: IO[bytes]) -> None:
    """A pipe of 1 MB instead of 64 kB where the system allows it: a chunk (a few MB) then crosses in a
    few wake-ups of each process instead of dozens, which on a busy machine each wait for a core."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):  # not Linux, or a lower limit: the default size
        pass


def _load() -> float:
    """The runnable processes, averaged over the last minute (this one included)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not available here: taken as quiet
        return 0.0


def _cores() -> int:
    """The cores this process may run on: the child gains nothing without one of its own."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def worth_streaming(provider: MemoryProvider, source: Any) -> bool:
    """Whether ``source`` is a file big enough to be parsed and planned by a second process, for a store
    that takes planned steps."""
    # A frozen application's executable is not a Python that takes -c.
    if not (isinstance(source, (str, os.PathLike)) and sys.executable and not getattr(sys, "frozen", False)
            and isinstance(provider, Store)
            and isinstance(provider, SupportsImportSteps) and isinstance(provider, SupportsRecalls)):
        return False
    try:
        big = os.stat(source).st_size >= STREAM_MIN_BYTES
    except (OSError, ValueError):
        return False  # the ordinary import says what is wrong with the path
    # Streaming costs about a third more CPU in all (pickling both ways, the child's start, its
    # reading span by span) to be done in less wall time by two cores: only worth it when a core is
    # free. The load average counts the runnable processes, this one included (and its own import
    # just before: a benchmark's earlier rounds push it towards 2); measured on 2 cores, streamed
    # imports were about 1.45 times as fast as one process at loads of 1.5 to 1.8, and slower at 3.2
    # to 13.
    return big and (cores := _cores()) >= 2 and _load() <= cores - 1 + FREE_CORE_LOAD
