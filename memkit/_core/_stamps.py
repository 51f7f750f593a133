"""What stamps a new record: its id (a random version-4 UUID as text, made a block at a time) and
its write time."""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime

__all__ = ["from_us", "iso_us", "json_time", "new_id", "now_us", "to_us"]

_ids: list[str] = []
_ID_BLOCK = 512
# Version 4 and the RFC 4122 variant, as uuid.uuid4() sets them.
_UUID4_CLEAR = (2**128 - 1) & ~((0xF000 << 64) | (0xC000 << 48))
_UUID4_SET = (0x4000 << 64) | (0x8000 << 48)
_uuid4_masks: dict[int, tuple[int, int]] = {}  # by block size: the masks of n ids side by side


def _uuid4_block(n: int) -> list[str]:
    """``n`` random version-4 UUIDs as text, from one ``os.urandom`` call (``str(uuid.uuid4())``
    reads the entropy pool and builds a UUID object per id: most of an import's id cost). The version
    and variant bits of all ``n`` are set at once, on the block as one integer."""
    masks = _uuid4_masks.get(n)
    if masks is None:
        masks = _uuid4_masks[n] = (int.from_bytes(_UUID4_CLEAR.to_bytes(16) * n),
                                   int.from_bytes(_UUID4_SET.to_bytes(16) * n))
    h = ((int.from_bytes(os.urandom(16 * n)) & masks[0]) | masks[1]).to_bytes(16 * n).hex()
    return [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-{h[i + 12:i + 16]}-{h[i + 16:i + 20]}-{h[i + 20:i + 32]}"
            for i in range(0, 32 * n, 32)]


# A forked child must not hand out the ids left in its parent's block.
os.register_at_fork(after_in_child=_ids.clear)


def new_id() -> str:
    """A new random (version 4) UUID as text."""
    while True:
        try:
            return _ids.pop()  # atomic: two threads never get the same id
        except IndexError:
            _ids.extend(_uuid4_block(_ID_BLOCK))


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
