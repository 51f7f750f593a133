"""What stamps a new record: its id (a random version-4 UUID as text) and its write time."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

__all__ = ["from_us", "iso_us", "json_time", "new_id", "now_us", "to_us"]


def new_id() -> str:
    """A new random (version 4) UUID as text."""
    return str(uuid.uuid4())


_clock_lock = threading.Lock()
_last_us = 0


def now_us() -> int:
    """Microseconds since the epoch, strictly increasing within this process.

    Strictness keeps "newest first" identical to insertion order for records
    written by one process, even when two land in the same microsecond.
    """
    global _last_us
    with _clock_lock:
        _last_us = max(time.time_ns() // 1000, _last_us + 1)
        return _last_us


def from_us(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=UTC)


def to_us(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round(moment.timestamp() * 1_000_000)


_iso_second: tuple[int, str] = (0, from_us(0).isoformat())


def iso_us(us: int) -> str:
    """``from_us(us).isoformat()``, without building a datetime for every recall of the same second."""
    global _iso_second
    second, micro = divmod(us, 1_000_000)
    cached, prefix = _iso_second
    if cached != second:
        prefix = from_us(second * 1_000_000).isoformat()[:-6]  # up to the seconds, before "+00:00"
        _iso_second = (second, prefix)
    return f"{prefix}.{micro:06d}+00:00" if micro else f"{prefix}+00:00"


def json_time(us: int) -> str:
    """What a recall body holds for a time (pydantic's JSON form of the datetime), without building it."""
    return iso_us(us)[:-6] + "Z"
