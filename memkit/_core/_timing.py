"""Step timing read from trace data: the one place that knows how agents spell it.

A researcher's agent writes how long a step took in many ways. This module reads them all,
and everything that shows timing (frames, the trace panel, charts, the graph, the CLI) reads
a step's timing through :func:`step_timing`; ``add_trace`` also stores the canonical
``timestamp`` (start, epoch seconds) and ``duration`` (seconds) it finds (:func:`with_timing`),
so a store that indexes those two keys sees every spelling.

Durations: ``duration``, ``duration_s``, ``elapsed``, ``elapsed_s``, ``latency_s`` (seconds or a
``timedelta``); ``duration_ms``, ``elapsed_ms``, ``latency_ms`` (milliseconds).
Moments: ``started_at``, ``start_time``, ``timestamp`` and ``ended_at``, ``end_time`` (a
``datetime``, an ISO 8601 string, or epoch seconds; epoch milliseconds are recognised by size).
A duration is taken from the first duration key present, else from end minus start.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

__all__ = ["DURATION_KEYS", "END_KEYS", "START_KEYS", "TIMING_KEYS", "StepTiming", "step_timing", "with_timing"]

# key -> factor to seconds
DURATION_KEYS: dict[str, float] = {
    "duration": 1.0, "duration_s": 1.0, "elapsed": 1.0, "elapsed_s": 1.0, "latency_s": 1.0,
    "duration_ms": 1e-3, "elapsed_ms": 1e-3, "latency_ms": 1e-3,
}
# started_at before timestamp: ExecutionItem fills timestamp with its creation time, so an
# explicit start written beside it is the better answer.
START_KEYS = ("started_at", "start_time", "timestamp")
END_KEYS = ("ended_at", "end_time")
TIMING_KEYS = frozenset((*DURATION_KEYS, *START_KEYS, *END_KEYS))

# Names that look like timing but that memkit does not read: warned about once each, since a
# silently empty timeline is worse than a line on stderr.
_TIMING_LIKE = re.compile(
    r"(^|_)(duration|latency|elapsed|runtime|walltime|took|time_taken)(_|$)"
    r"|^(wall|run|exec|execution|step)_?time(_|$)"
    r"|^(start|started|end|ended|finish|finished|stop|stopped|complete|completed)(_?(at|time|ts|timestamp|ms|s|us|ns))?$"
    r"|_(secs?|seconds|ms|us|ns)$"
)
_NOT_TIMING = frozenset(("retry_count", "step_index", "created_at", "retry_errors"))
_warned: set[str] = set()
_judged: set[str] = set()  # keys found not to look like timing
_JUDGED_MAX = 10_000
_EPOCH_MS = 1e11  # epoch seconds reach this only in the year 5138: larger numbers are milliseconds


@dataclass(frozen=True)
class StepTiming:
    """One step's timing: ``start`` (epoch seconds), ``duration`` (seconds), ``source`` (the keys read)."""

    start: float | None
    duration: float | None
    source: str | None


def _warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, UserWarning, stacklevel=4)


def _seconds(value: Any) -> float | None:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    elif isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _moment(value: Any) -> float | None:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                return None
        else:
            return _moment(parsed)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    if not math.isfinite(number) or number <= 0:
        return None
    return number / 1000 if number > _EPOCH_MS else number


def _first(data: Mapping[str, Any], keys: Any, read: Any) -> tuple[str | None, float | None]:
    for key in keys:
        raw = data.get(key)
        if raw is None:
            continue
        value = read(raw)
        if value is None:
            _warn_once(f"bad:{key}", f"memkit: trace key {key!r} holds {raw!r}, which is not a time memkit can "
                                     f"read; that step's timing is left empty")
            continue
        return key, value
    return None, None


def _judge_keys(data: Mapping[str, Any]) -> None:
    """Warn (once per key) about keys that look like timing but are not read as timing."""
    for key in data.keys() - _judged:
        if isinstance(key, str) and key not in TIMING_KEYS and key not in _NOT_TIMING \
                and "timeout" not in key.lower() and _TIMING_LIKE.search(key.lower()):
            _warn_once(key, f"memkit: trace key {key!r} looks like step timing but is not read as timing; "
                            f"use duration (seconds), duration_ms, or started_at/ended_at")
        elif isinstance(key, str) and len(_judged) < _JUDGED_MAX:
            _judged.add(key)  # agents repeat the same few keys on every step: each is judged once


def step_timing(data: Mapping[str, Any], *, warn: bool = True) -> StepTiming:
    """The timing of one step from its trace data (see the module docstring for the keys)."""
    if warn:
        _judge_keys(data)
    duration_key, duration = _first(data, (k for k in DURATION_KEYS if k in data),
                                    lambda raw: None if _seconds(raw) is None else _seconds(raw))
    if duration_key is not None and duration is not None:
        duration *= DURATION_KEYS[duration_key]
    start_key, start = _first(data, (k for k in START_KEYS if k in data), _moment)
    end_key, end = _first(data, (k for k in END_KEYS if k in data), _moment)
    source = duration_key
    if duration is None and start is not None and end is not None and end >= start:
        duration, source = end - start, f"{start_key}/{end_key}"
    if start is None and end is not None and duration is not None:
        start = end - duration
    if source is None and start is not None:
        source = start_key
    return StepTiming(start, duration, source)


_CANONICAL = frozenset(("timestamp", "duration"))


def _canonical(start: Any, duration: Any) -> bool:
    """Whether ``step_timing`` reads ``start``/``duration`` as these very numbers: floats (an int
    would come back a float), finite, a start in epoch seconds (not milliseconds), a duration >= 0."""
    return (start is None or (type(start) is float and 0.0 < start <= _EPOCH_MS)) and (
        duration is None or (type(duration) is float and 0.0 <= duration < math.inf))


def with_timing(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` ready to store: ``timestamp``/``duration`` canonical, times made JSON (ISO strings, seconds).

    The caller's own keys are kept (a ``datetime`` becomes its ISO string, a ``timedelta`` its seconds).
    """
    if data.keys() & TIMING_KEYS <= _CANONICAL and _canonical(data.get("timestamp"), data.get("duration")):
        # Already canonical (what an import or ExecutionItem writes): step_timing would read these
        # two numbers back unchanged, so only the key check is left to do.
        _judge_keys(data)
        return dict(data)
    timing = step_timing(data)
    out = dict(data)
    for key in TIMING_KEYS & out.keys():
        value = out[key]
        if isinstance(value, (datetime, date)):
            out[key] = value.isoformat()
        elif isinstance(value, timedelta):
            out[key] = value.total_seconds()
    if timing.start is not None:
        out["timestamp"] = timing.start
    if timing.duration is not None:
        out["duration"] = timing.duration
    return out
